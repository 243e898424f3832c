package extract

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

func extractPage(t *testing.T, page, contentType string) string {
	t.Helper()
	p, err := Extract(context.Background(), Input{URL: "https://example.com/post", Body: []byte(page), ContentType: contentType}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return p.Text
}

// para is a paragraph of prose of about forty words, numbered.
func para(i int) string {
	return fmt.Sprintf("Paragraph %d of the article explains, at some length and with care, how the harbour ferries changed their winter timetable, why the late crossings were moved, and what the town council said about it at the meeting on Tuesday evening.", i)
}

// TestDensityArticle: the article's paragraphs come out; the navigation,
// a comment thread and a list of related links in the article's own
// container, a share bar wrapped (unclosed) around the article, and a
// sidebar of teasers stay out.
func TestDensityArticle(t *testing.T) {
	t.Parallel()
	var article, comments, sidebar strings.Builder
	for i := range 6 {
		fmt.Fprintf(&article, "<p>%s</p>", para(i))
	}
	for i := range 12 {
		fmt.Fprintf(&comments, `<div class="comment"><p>Reader %d wrote: I have taken the late ferry for years, and the new timetable will make my commute home from the city much longer than it is today, which is a pity.</p></div>`, i)
	}
	for i := range 3 {
		fmt.Fprintf(&sidebar, `<div class="teaser"><p>Teaser %d: a story elsewhere on this site about the weather, the local football club and the new library opening hours this spring.</p></div>`, i)
	}
	page := `<html><head><title>Ferries</title></head><body>
<nav><ul><li><a href="/">Home</a></li><li><a href="/news">News</a></li><li><a href="/sport">Sport</a></li></ul></nav>
<div id="page"><div class="share_wrapper"><div class="share"><a href="/s/1">Share</a> <a href="/s/2">Tweet</a></div>
<div id="contentmiddle"><h1>Ferries change their winter timetable</h1>` + article.String() + `
<h3>Related</h3><ul><li><a href="/a">Ferry fares rise</a></li><li><a href="/b">New harbour master</a></li><li><a href="/c">Storm closes the pier</a></li></ul>
<h3>12 comments</h3>` + comments.String() + `</div>
<div id="sidebar">` + sidebar.String() + `</div></div></body></html>`
	text := extractPage(t, page, "text/html")
	for i := range 6 {
		if !strings.Contains(text, fmt.Sprintf("Paragraph %d of the article", i)) {
			t.Errorf("paragraph %d missing:\n%s", i, text)
		}
	}
	for _, not := range []string{"Reader 0 wrote", "Reader 11 wrote", "Teaser 0", "Ferry fares rise", "Tweet", "Sport"} {
		if strings.Contains(text, not) {
			t.Errorf("text has %q:\n%s", not, text)
		}
	}
}

// TestDensityListing: a page without an article (a home page of teaser
// links) gives its visible text in reading order, not one stray block.
func TestDensityListing(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString(`<html><head><title>Harbour News</title></head><body><header><a href="/">Harbour News</a></header><main>`)
	for i := range 10 {
		fmt.Fprintf(&b, `<div class="card"><h2><a href="/story/%d">Headline number %d about the harbour</a></h2><p>A short summary of story %d, in a dozen words or so for the reader.</p></div>`, i, i, i)
	}
	b.WriteString(`</main><footer>Contact us</footer></body></html>`)
	text := extractPage(t, b.String(), "text/html")
	at := 0
	for i := range 10 {
		for _, w := range []string{fmt.Sprintf("Headline number %d about", i), fmt.Sprintf("A short summary of story %d,", i)} {
			j := strings.Index(text[at:], w)
			if j < 0 {
				t.Fatalf("text lacks %q after byte %d:\n%s", w, at, text)
			}
			at += j
		}
	}
}

// TestSniffMarkupFragment: a saved page that opens with an unknown
// element and has none of <html>, <body>, <div>, <p> near its start is
// still HTML when its markup is (tables, fonts, links), not text.
func TestSniffMarkupFragment(t *testing.T) {
	t.Parallel()
	page := `<text id="http://example.com/page" title="Phones">` + "\n" + strings.Repeat(" ", 100) +
		`<table border="0"><tr><td><font face="Arial"><b>Long distance plans</b><br>` + para(1) + `</font></td></tr></table></text>`
	text := extractPage(t, page, "")
	if strings.Contains(text, "<table") || strings.Contains(text, "<font") {
		t.Errorf("markup passed through as text:\n%s", text)
	}
	if !strings.Contains(text, "Paragraph 1 of the article") {
		t.Errorf("text lacks the paragraph:\n%s", text)
	}
}

// TestDensityMarkedArticle: a short article in an element that says it
// holds the article wins over a longer block of prose elsewhere (a
// publisher's "about" box).
func TestDensityMarkedArticle(t *testing.T) {
	t.Parallel()
	page := `<html><head><title>Watch: the leather works</title></head><body>
<div id="wrap"><article class="post-page"><h1>Watch: the leather works</h1><div class="body entry-content"><p>Take a visit inside the leather works studio by the river, where the craftsman gives us a tour of his workshop and talks about his tools.</p><p>The studio has made bags, belts and wallets by hand for thirty years, and the craftsman explains why he still cuts every piece himself.</p></div></article>
<div class="about"><h3>About the publisher</h3><p>The publisher is a wholly independent company of online fashion and lifestyle news websites with offices in two cities. Our sites cover the latest in new and emerging trends and products in the world of fashion, art, design and culture.</p></div></div></body></html>`
	text := extractPage(t, page, "text/html")
	if !strings.Contains(text, "Take a visit inside the leather works") {
		t.Errorf("article missing:\n%s", text)
	}
	if strings.Contains(text, "wholly independent") {
		t.Errorf("about box in the text:\n%s", text)
	}
}

// TestListingHint: mainContent reports a page of teasers as a listing,
// an article as none.
func TestListingHint(t *testing.T) {
	t.Parallel()
	var listing, article strings.Builder
	listing.WriteString(`<html><body><main>`)
	article.WriteString(`<html><body><article><h1>Ferries</h1>`)
	for i := range 8 {
		fmt.Fprintf(&listing, `<div><h2><a href="/s/%d">Headline number %d about the harbour</a></h2><p>A short summary of story %d, in a dozen words or so for the reader.</p></div>`, i, i, i)
		fmt.Fprintf(&article, `<p>%s</p>`, para(i))
	}
	listing.WriteString(`</main></body></html>`)
	article.WriteString(`</article></body></html>`)
	for _, tt := range []struct {
		name, page string
		want       bool
	}{{"listing", listing.String(), true}, {"article", article.String(), false}} {
		doc, err := parseHTML([]byte(tt.page))
		if err != nil {
			t.Fatal(err)
		}
		c, err := mainContent(context.Background(), doc, nil, "")
		if err != nil {
			t.Fatal(err)
		}
		if got := c.listing; got != tt.want {
			t.Errorf("%s: listing = %v, want %v", tt.name, got, tt.want)
		}
	}
}
