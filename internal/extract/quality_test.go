package extract

import (
	"fmt"
	"strings"
	"testing"
)

// Main-content quality rules (issue #19): each test is a small page of
// the kind where the extractor kept boilerplate or dropped content.

// TestQualityLongCommentThread: a short post (a photo and two sentences)
// under a comment thread many times its length. The thread is marked as
// comments; that it holds most of the page does not make it the page's
// wrapper.
func TestQualityLongCommentThread(t *testing.T) {
	t.Parallel()
	var comments strings.Builder
	for i := range 20 {
		fmt.Fprintf(&comments, `<li class="comment" id="comment-%d"><div class="comment-author vcard"><a href="/r">Reader %d</a></div>
<p>October 2 | <a href="#c">Permalink</a></p><p>Comment %d: I love this outfit so much, the colours work together beautifully, and the bag is simply amazing, where did you find it?</p></li>`, i, i, i)
	}
	page := `<html><head><title>In Paris</title></head><body>
<div id="wrapper"><div id="main"><div id="content">
<div class="hentry post" id="post-1"><h2>In St. Germain</h2><div class="entry-content"><p><img src="/p.jpg" alt="Look"></p>
<p>I am totally inspired by this autumn collection, my all time favourite. The shirt and tie are vintage, the jeans are new and so are the shoes.</p></div></div>
<div id="comments"><h3>20 Comments</h3><div class="comments" id="comments-list"><ol>` + comments.String() + `</ol></div></div>
</div></div></div></body></html>`
	text := extractPage(t, page, "text/html")
	if !strings.Contains(text, "totally inspired") {
		t.Errorf("the post is missing:\n%s", text)
	}
	for _, not := range []string{"Comment 0:", "Comment 19:", "Reader 5"} {
		if strings.Contains(text, not) {
			t.Errorf("text has %q:\n%s", not, text)
		}
	}
}

// TestQualityAuthorBio: an author's box (a bio under the post, in the
// post's own container) is not the article; a byline is left to the
// other rules.
func TestQualityAuthorBio(t *testing.T) {
	t.Parallel()
	var article strings.Builder
	for i := range 5 {
		fmt.Fprintf(&article, "<p>%s</p>", para(i))
	}
	for _, box := range []string{
		`<div class="author-bio"><h4>About Becky</h4><p>Hi, I am Becky. I live in Atlanta, and besides editing this blog you can find me writing design opinions, tips and reviews for several magazines and sites.</p></div>`,
		`<div id="better-author-bio-div"><div class="better-author-bio-div-info"><p>Hi, I am Becky. I live in Atlanta, and besides editing this blog you can find me writing design opinions, tips and reviews for several magazines and sites.</p></div></div>`,
		`<div class="author_info"><h4>About the author...</h4><p>Hi, I am Becky. I live in Atlanta, and besides editing this blog you can find me writing design opinions, tips and reviews for several magazines and sites.</p></div>`,
	} {
		page := `<html><head><title>Ferries</title></head><body><div id="page"><div class="content">
<div class="post" id="post-1"><h1>Ferries change their winter timetable</h1><div class="entry">` + article.String() + box + `</div></div>
</div></div></body></html>`
		text := extractPage(t, page, "text/html")
		if !strings.Contains(text, "Paragraph 0 of") || !strings.Contains(text, "Paragraph 4 of") {
			t.Errorf("article missing:\n%s", text)
		}
		if strings.Contains(text, "I live in Atlanta") {
			t.Errorf("the author's bio is in the text:\n%s", text)
		}
	}
}

// TestQualityCommentHeading: an old blog template puts the comment
// thread in the post's own container, unmarked but for its heading
// (an id, a class, or an anchor inside it): the heading ends the post.
func TestQualityCommentHeading(t *testing.T) {
	t.Parallel()
	var article, comments strings.Builder
	for i := range 4 {
		fmt.Fprintf(&article, "<p>%s</p>", para(i))
	}
	for i := range 8 {
		fmt.Fprintf(&comments, `<p>Comment %d: I have taken the late ferry for years, and the new timetable will make my commute home from the city much longer than it is today, which is a pity.</p>
<p class="posted">Posted by: <a href="http://reader%d.example">Reader %d</a> | March 20, 2007 10:19 PM</p>`, i, i, i)
	}
	for _, h := range []string{`<h2 id="comments">Comments</h2>`, `<h2><a id="comments"></a>Comments</h2>`, `<h3 class="comments-header">Comments</h3>`} {
		page := `<html><head><title>Ferries</title></head><body><div id="container"><div id="center"><div class="content">
<h3>Ferries change their winter timetable</h3>` + article.String() + `<p class="posted">Posted by Kathy at March 20, 2007 09:00 AM</p>
` + h + comments.String() + `</div></div></div></body></html>`
		text := extractPage(t, page, "text/html")
		if !strings.Contains(text, "Paragraph 0 of") || !strings.Contains(text, "Paragraph 3 of") {
			t.Errorf("article missing:\n%s", text)
		}
		if strings.Contains(text, "Comment 0:") || strings.Contains(text, "Reader 7") {
			t.Errorf("%s: the comments are in the text:\n%s", h, text)
		}
	}
}

// TestQualityShortLastLine: the article's short closing line, which
// readability keeps too, is not cut as trailing boilerplate for being
// too short to compare.
func TestQualityShortLastLine(t *testing.T) {
	t.Parallel()
	var article strings.Builder
	for i := range 5 {
		fmt.Fprintf(&article, "<p>%s</p>", para(i))
	}
	page := `<html><head><title>Ferries</title></head><body><div id="page"><div class="post">
<h1>Ferries change their winter timetable</h1>` + article.String() + `<p>Thanks, see you soon!</p></div></div></body></html>`
	text := extractPage(t, page, "text/html")
	if !strings.Contains(text, "Paragraph 4 of") || !strings.Contains(text, "Thanks, see you soon!") {
		t.Errorf("the article's end is missing:\n%s", text)
	}
}

// TestQualityShortPostReadabilityThread: under a short post readability
// takes the comment thread; the short result is not then swapped for
// readability's longer one, nor for the page's whole text.
func TestQualityShortPostReadabilityThread(t *testing.T) {
	t.Parallel()
	var comments strings.Builder
	for i := range 20 {
		fmt.Fprintf(&comments, `<li class="comment" id="comment-%d"><div class="comment-author vcard"><a href="/r">Reader %d</a></div>
<p>October 2 | <a href="#c">Permalink</a></p><p>Comment %d: I love these pictures so much, the colours work together beautifully, and the lens is simply amazing, where did you buy it?</p></li>`, i, i, i)
	}
	page := `<html><head><title>Sample images</title></head><body>
<div id="wrapper"><div id="main"><div id="content">
<div class="hentry post" id="post-1"><div class="entry-content">
<p>In addition to the first set of sample images from the new lens I published a few days ago, here are a few more pictures.</p></div></div>
<div id="comments"><h3>20 Comments</h3><div class="comments" id="comments-list"><ol>` + comments.String() + `</ol></div></div>
</div>
<div id="extra"><p>Our photo club meets on the first Monday of every month in the library hall, where members show prints, swap lenses and plan the next trip to the coast together.</p></div>
</div></div></body></html>`
	text := extractPage(t, page, "text/html")
	if !strings.Contains(text, "sample images from the new lens") {
		t.Errorf("the post is missing:\n%s", text)
	}
	for _, not := range []string{"Comment 0:", "Comment 19:", "Reader 5"} {
		if strings.Contains(text, not) {
			t.Errorf("text has %q:\n%s", not, text)
		}
	}
}

// TestQualityPostMetadata: a blog template's post footer ("This entry
// was posted on ... and is filed under ...") is not the article, though
// it sits in the post's own container.
func TestQualityPostMetadata(t *testing.T) {
	t.Parallel()
	var article strings.Builder
	for i := range 4 {
		fmt.Fprintf(&article, "<p>%s</p>", para(i))
	}
	for _, foot := range []string{
		`<p class="postmetadata alt"><small>This entry was posted on Thursday, August 9th, 2012 at 12:04 am and is filed under Harbours, Ferries and Local News. You can follow any responses to this entry through the feed.</small></p>`,
		`<div class="entry-utility"><span class="cat-links">This entry was posted on Thursday, August 9th, 2012 at 12:04 am and is filed under Harbours, Ferries and Local News. You can follow any responses to this entry through the feed.</span></div>`,
	} {
		page := `<html><head><title>Ferries</title></head><body><div id="page"><div id="content">
<div class="post hentry" id="post-1"><h2>Ferries change their winter timetable</h2><div class="entry">` + article.String() + foot + `</div></div>
</div></div></body></html>`
		text := extractPage(t, page, "text/html")
		if !strings.Contains(text, "Paragraph 0 of") || !strings.Contains(text, "Paragraph 3 of") {
			t.Errorf("article missing:\n%s", text)
		}
		if strings.Contains(text, "is filed under") {
			t.Errorf("the post's footer is in the text:\n%s", text)
		}
	}
}
