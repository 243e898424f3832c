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
