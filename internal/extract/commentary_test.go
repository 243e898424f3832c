package extract

import (
	"strings"
	"testing"
)

// TestCommentaryIsNotComments: "commentary" (and "commentator") contain
// "comment" but name an article's kind: an article in <div
// class="commentary-body"> comes out whole, and an <h2 id="commentary">
// in it does not end it as a comments heading would. A real comment
// thread (class="commentlist", id="comments") stays out.
func TestCommentaryIsNotComments(t *testing.T) {
	t.Parallel()
	var article, thread strings.Builder
	for i := range 10 {
		article.WriteString("<p>" + para(i) + "</p>\n")
	}
	for i := range 3 {
		thread.WriteString(`<li class="comment"><p>Reader remark number ` + string(rune('a'+i)) + ` says the ferry was late again and the cafe on the pier was closed all week long.</p></li>`)
	}
	for _, c := range []struct{ name, page string }{
		{"container", `<html><body><h1>Big Title Here</h1><div class="commentary-body">` + article.String() +
			`</div><ol class="commentlist">` + thread.String() + `</ol></body></html>`},
		{"heading", `<html><body><div class="entry-content">` + article.String() + `<h2 id="commentary">Commentary</h2>` +
			"<p>" + para(90) + "</p><p>" + para(91) + `</p></div><div id="comments"><ol>` + thread.String() + `</ol></div></body></html>`},
		{"commentator", `<html><body><h1>Big Title Here</h1><div class="commentator-column">` + article.String() + `</div><div id="comments"><ol>` + thread.String() + `</ol></div></body></html>`},
	} {
		got := extractPage(t, c.page, "text/html")
		for i := range 10 {
			if !strings.Contains(got, para(i)) {
				t.Errorf("%s: paragraph %d missing; got %d bytes:\n%s", c.name, i, len(got), got)
				break
			}
		}
		if c.name == "heading" && !strings.Contains(got, para(91)) {
			t.Errorf("%s: the text after the commentary heading is missing", c.name)
		}
		if strings.Contains(got, "Reader remark") {
			t.Errorf("%s: the comment thread came out", c.name)
		}
	}
}

// TestCommentMarks: the words of comment threads are comment marks; the
// words that only begin like them are not.
func TestCommentMarks(t *testing.T) {
	t.Parallel()
	for v, want := range map[string]bool{
		"comment": true, "comments": true, "commentlist": true, "comment-list": true, "comments-area": true,
		"commentarea": true, "usercomments": true, "commentsList": true, "disqus_thread": true, "respond": true,
		"commentary": false, "commentary-body": false, "commentaries": false, "commentator-column": false,
		"entry-content": false, "commentary commentlist": true,
	} {
		if got := hasMark(v, commentMarks); got != want {
			t.Errorf("hasMark(%q, commentMarks) = %v, want %v", v, got, want)
		}
	}
	if hasMark("commentary", threadMarks) || !hasMark("comments-title", threadMarks) {
		t.Error("threadMarks: commentary is a comments heading, or comments-title is not")
	}
}
