package extract

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/airlockhq/airlock"
)

func pageOf(t *testing.T, pageURL, src string) *airlock.Page {
	t.Helper()
	p, err := Extract(context.Background(), Input{URL: pageURL, Body: []byte(src), ContentType: "text/html; charset=utf-8"}, Options{})
	if err != nil {
		t.Fatalf("Extract: %v", err)
	}
	return p
}

// article is enough prose for the main-content extractors to find it.
func article(paragraphs int) string {
	var b strings.Builder
	for i := range paragraphs {
		fmt.Fprintf(&b, "<p>Paragraph %d of the article tells its story with enough words to count as prose, "+
			"which is what the extractors look for before they keep a block of text as content.</p>\n", i+1)
	}
	return b.String()
}

func TestMetadataTitle(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, head, body, want string
	}{
		{"title element when nothing marks a headline", `<title> The  Title </title>`, `<p>x</p>`, "The Title"},
		{"og:title is the headline", `<title> The  Title | Site </title><meta property="og:title" content="OG">`, `<h1>H1</h1>`, "OG"},
		{"JSON-LD headline first", `<title>T | Site</title><meta property="og:title" content="OG"><script type="application/ld+json">{"@type":"NewsArticle","headline":"LD headline"}</script>`, ``, "LD headline"},
		{"h1 the title begins with", `<title>The Headline Here | Example Site</title>`, `<h1>The Headline Here</h1>`, "The Headline Here"},
		{"site name cut off the title", `<title>A Long Enough Headline Of Words - Example Site</title>`, `<p>x</p>`, "A Long Enough Headline Of Words"},
		{"itemprop headline", `<title>Site</title>`, `<div itemprop="headline">Marked headline</div>`, "Marked headline"},
		{"og:title when no title", `<meta property="og:title" content="OG Title">`, `<h1>H1</h1>`, "OG Title"},
		{"og:title when title is empty", `<title>  </title><meta property="og:title" content="OG Title">`, `<h1>H1</h1>`, "OG Title"},
		{"first h1 last", ``, `<h1>  </h1><h1>First <em>h1</em></h1><h1>Second</h1>`, "First h1"},
		{"svg title is not the title", ``, `<svg><title>icon</title></svg><h1>Heading</h1>`, "Heading"},
		{"twitter:title", `<meta name="twitter:title" content="TW">`, `<p>x</p>`, "TW"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := pageOf(t, "https://example.com/a", "<html><head>"+tt.head+"</head><body>"+tt.body+"</body></html>")
			if p.Title != tt.want {
				t.Errorf("Title = %q, want %q", p.Title, tt.want)
			}
		})
	}
}

func TestMetadataFields(t *testing.T) {
	t.Parallel()
	const ld = `<script type="application/ld+json">{"@context":"https://schema.org","@graph":[
		{"@type":"WebSite","name":"Site"},
		{"@type":"NewsArticle","headline":"LD headline","datePublished":"2024-03-01T10:00:00Z",
		 "author":[{"@type":"Person","name":"Ada Lovelace"},{"@type":"Person","name":"Alan Turing"}],
		 "publisher":{"@type":"Organization","name":"LD Publisher"}}]}</script>`
	tests := []struct {
		name, html string
		check      func(p *airlock.Page) string
	}{
		{"description from og first", `<meta name="description" content="Meta desc"><meta property="og:description" content="OG desc">`,
			func(p *airlock.Page) string { return want(p.Description, "OG desc") }},
		{"description from meta", `<meta name="description" content="Meta desc">`,
			func(p *airlock.Page) string { return want(p.Description, "Meta desc") }},
		{"no description, too little text to take one", ``,
			func(p *airlock.Page) string { return want(p.Description, "") }},
		{"description from twitter", `<meta name="twitter:description" content="TW desc">`,
			func(p *airlock.Page) string { return want(p.Description, "TW desc") }},
		{"lang from html", ``, func(p *airlock.Page) string { return want(p.Lang, "fr-CA") }},
		{"canonical absolute", `<link rel="canonical" href="/canonical/path">`,
			func(p *airlock.Page) string { return want(p.Canonical, "https://example.com/canonical/path") }},
		{"canonical from og:url", `<meta property="og:url" content="https://example.com/og">`,
			func(p *airlock.Page) string { return want(p.Canonical, "https://example.com/og") }},
		{"site name from og", `<meta property="og:site_name" content="OG Site">`,
			func(p *airlock.Page) string { return want(p.SiteName, "OG Site") }},
		{"site name from JSON-LD before og", `<meta property="og:site_name" content="OG Site">` + ld,
			func(p *airlock.Page) string { return want(p.SiteName, "LD Publisher") }},
		{"site name from twitter:site", `<meta name="twitter:site" content="@handle">`,
			func(p *airlock.Page) string { return want(p.SiteName, "handle") }},
		{"published normalised", `<meta property="article:published_time" content="2021-11-01T10:52:50+0100">`,
			func(p *airlock.Page) string { return want(p.Published, "2021-11-01T10:52:50+01:00") }},
		{"published from DC", `<meta name="DC.Date.Issued" content="2014-12-15">`,
			func(p *airlock.Page) string { return want(p.Published, "2014-12-15") }},
		{"unreadable date skipped", `<meta property="article:published_time" content="soon"><meta name="date" content="March 5, 2024">`,
			func(p *airlock.Page) string { return want(p.Published, "2024-03-05") }},
		{"author from dc:creator before author", `<meta name="author" content="Meta Author"><meta property="dc:creator" content="DC Author">`,
			func(p *airlock.Page) string { return want(p.Author, "DC Author") }},
		{"JSON-LD in CDATA", `<script type="application/ld+json"><![CDATA[{"@type":"Article","datePublished":"2018-04-05T06:00"}]]></script>`,
			func(p *airlock.Page) string { return want(p.Published, "2018-04-05T06:00:00") }},
		{"site name from JSON-LD publisher", ld, func(p *airlock.Page) string { return want(p.SiteName, "LD Publisher") }},
		{"authors from JSON-LD", ld + `<meta name="author" content="Meta Author">`,
			func(p *airlock.Page) string { return want(p.Author, "Ada Lovelace, Alan Turing") }},
		{"author from meta", `<meta name="author" content="Meta Author">`,
			func(p *airlock.Page) string { return want(p.Author, "Meta Author") }},
		{"author URL is not a name", `<meta property="article:author" content="https://facebook.com/someone">`,
			func(p *airlock.Page) string { return want(p.Author, "") }},
		{"published from JSON-LD", ld + `<meta property="article:published_time" content="2020-01-01">`,
			func(p *airlock.Page) string { return want(p.Published, "2024-03-01T10:00:00Z") }},
		{"published from article:published_time", `<meta property="article:published_time" content="2020-01-01T00:00:00Z">`,
			func(p *airlock.Page) string { return want(p.Published, "2020-01-01T00:00:00Z") }},
		{"<title> in meta as it is", ``, func(p *airlock.Page) string { return want(p.Meta["html:title"], "T") }},
		{"JSON-LD fields in meta", ld, func(p *airlock.Page) string { return want(p.Meta["jsonld:headline"], "LD headline") }},
		{"meta map keys", `<meta property="og:image" content="https://example.com/i.png"><meta name="Twitter:Card" content="summary"><meta name="og:image" content="second">`,
			func(p *airlock.Page) string {
				return want(p.Meta["og:image"]+"|"+p.Meta["twitter:card"], "https://example.com/i.png|summary")
			}},
		{"space-separated properties", `<meta property="og:title twitter:title" content="Both">`,
			func(p *airlock.Page) string { return want(p.Meta["og:title"]+"|"+p.Meta["twitter:title"], "Both|Both") }},
		{"broken JSON-LD ignored", `<script type="application/ld+json">{"@type": "Article", "author": </script><meta name="author" content="M">`,
			func(p *airlock.Page) string { return want(p.Author, "M") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := pageOf(t, "https://example.com/a/b", `<html lang="fr-CA"><head><title>T</title>`+tt.html+`</head><body><p>x</p></body></html>`)
			if msg := tt.check(p); msg != "" {
				t.Error(msg)
			}
		})
	}
}

func TestDescriptionFromText(t *testing.T) {
	t.Parallel()
	p := pageOf(t, "https://example.com/", "<html><head><title>T</title></head><body><article>"+article(5)+"</article></body></html>")
	if !strings.HasPrefix(p.Description, "Paragraph 1 of the article tells its story") {
		t.Errorf("Description = %q, want the first paragraph", p.Description)
	}
}

func want(got, want string) string {
	if got != want {
		return fmt.Sprintf("got %q, want %q", got, want)
	}
	return ""
}

func TestLinks(t *testing.T) {
	t.Parallel()
	src := `<html><head><title>Links</title></head><body>
		<a href="/about">About</a>
		<a href="/about#team">About again</a>
		<a href="other.html">Relative</a>
		<a href="https://EXAMPLE.com/case">Case of host</a>
		<a href="https://elsewhere.org/x" rel="nofollow noopener">External</a>
		<a href="//cdn.example.net/lib.js">Protocol-relative</a>
		<a href="javascript:void(0)">Script</a>
		<a href="mailto:a@example.com">Mail</a>
		<a href="#top">Fragment only</a>
		<a href="https://user:pw@example.com/secret">Userinfo</a>
		<a href="/img"><img src="i.png" alt="Picture link"></a>
		<template><a href="/hidden">Template</a></template>
	</body></html>`
	p := pageOf(t, "https://example.com/dir/page.html", src)
	wantLinks := []airlock.Link{
		{URL: "https://example.com/about", Text: "About", Internal: true},
		{URL: "https://example.com/dir/other.html", Text: "Relative", Internal: true},
		{URL: "https://example.com/case", Text: "Case of host", Internal: true},
		{URL: "https://elsewhere.org/x", Text: "External", Rel: "nofollow noopener"},
		{URL: "https://cdn.example.net/lib.js", Text: "Protocol-relative"},
		{URL: "https://example.com/secret", Text: "Userinfo", Internal: true},
		{URL: "https://example.com/img", Text: "Picture link", Internal: true},
	}
	if diff := cmp.Diff(wantLinks, p.Links); diff != "" {
		t.Errorf("links (-want +got):\n%s", diff)
	}
}

func TestLinksBaseElement(t *testing.T) {
	t.Parallel()
	p := pageOf(t, "https://example.com/a/page.html",
		`<html><head><base href="/base/dir/"><title>B</title></head><body><a href="x.html">X</a></body></html>`)
	if len(p.Links) != 1 || p.Links[0].URL != "https://example.com/base/dir/x.html" {
		t.Errorf("links = %+v, want x.html resolved against <base>", p.Links)
	}
}

func TestLinksCap(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString("<html><body>")
	for i := range airlock.MaxPageLinks + 500 {
		fmt.Fprintf(&b, `<a href="/p/%d">link %d</a> `, i, i)
	}
	b.WriteString("</body></html>")
	p := pageOf(t, "https://example.com/", b.String())
	if len(p.Links) != airlock.MaxPageLinks {
		t.Errorf("len(Links) = %d, want %d", len(p.Links), airlock.MaxPageLinks)
	}
	if !contains(p.Truncated, "links") {
		t.Errorf("Truncated = %v, want links", p.Truncated)
	}
}

// TestLinkElementsCap: past maxLinkElements anchors the walk stops and
// the page is marked truncated, even when the anchors repeat one target
// (each examined anchor costs a URL parse and its text; a hostile page
// holds a million).
func TestLinkElementsCap(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString("<html><body>")
	for range maxLinkElements {
		b.WriteString(`<a href="/same"></a>`)
	}
	b.WriteString(`<a href="/late">late</a></body></html>`)
	p := pageOf(t, "https://example.com/", b.String())
	if len(p.Links) != 1 || !contains(p.Truncated, "links") {
		t.Errorf("links %+v, truncated %v: want /same alone, links truncated", p.Links, p.Truncated)
	}
}

// TestHugeDocumentMarkdownIsText: past maxExtractElements the Markdown is
// the readable text, not a conversion of the whole tree (a page of a
// million links made 22 MB of Markdown and hundreds of MB of converter
// state).
func TestHugeDocumentMarkdownIsText(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString("<html><body><p>Some text with <a href=\"/x\">a link</a>.</p>")
	for range maxExtractElements {
		b.WriteString("<b>w</b> ")
	}
	b.WriteString("</body></html>")
	p := pageOf(t, "https://example.com/", b.String())
	if p.Markdown != p.Text || strings.Contains(p.Markdown, "](") {
		t.Errorf("Markdown (%d bytes, link syntax %v) is not the text (%d bytes)", len(p.Markdown), strings.Contains(p.Markdown, "]("), len(p.Text))
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func TestHeadings(t *testing.T) {
	t.Parallel()
	p := pageOf(t, "https://example.com/", `<html><body><h1>One</h1><h2> Two <small>sub</small></h2><h4>Four</h4><h3>Three</h3><h2></h2><script>"<h2>no</h2>"</script></body></html>`)
	wantH := []airlock.Heading{{Level: 1, Text: "One"}, {Level: 2, Text: "Two sub"}, {Level: 3, Text: "Three"}}
	if diff := cmp.Diff(wantH, p.Headings); diff != "" {
		t.Errorf("headings (-want +got):\n%s", diff)
	}

	var b strings.Builder
	for i := range airlock.MaxHeadings + 10 {
		fmt.Fprintf(&b, "<h2>Section %d</h2><p>text</p>", i)
	}
	p = pageOf(t, "https://example.com/", "<html><body>"+b.String()+"</body></html>")
	if len(p.Headings) != airlock.MaxHeadings || !contains(p.Truncated, "headings") {
		t.Errorf("len(Headings) = %d, Truncated = %v; want %d and headings", len(p.Headings), p.Truncated, airlock.MaxHeadings)
	}
}

func TestTables(t *testing.T) {
	t.Parallel()
	src := `<html><body>` + article(4) + `
	<table><thead><tr><th>Name</th><th>Score</th></tr></thead>
	<tbody><tr><td>Ada</td><td>10</td></tr><tr><td>Alan<br>Mathison</td><td> 9 </td></tr><tr><td></td><td></td></tr></tbody></table>
	<table role="presentation"><tr><td><table><tr><th>K</th><th>V</th></tr><tr><td>a</td><td>1</td></tr></table></td></tr></table>
	<table><tr><td>single cell row</td></tr><tr><td>another</td></tr></table>
	</body></html>`
	p := pageOf(t, "https://example.com/", src)
	wantT := [][][]string{
		{{"Name", "Score"}, {"Ada", "10"}, {"Alan Mathison", "9"}},
		{{"K", "V"}, {"a", "1"}},
	}
	if diff := cmp.Diff(wantT, p.Tables); diff != "" {
		t.Errorf("tables (-want +got):\n%s", diff)
	}
}

func TestMarkdown(t *testing.T) {
	t.Parallel()
	src := `<html><head><title>Guide</title></head><body><nav><a href="/">Home</a></nav><article>
	<h1>Guide</h1>
	` + article(3) + `
	<p>Read the <a href="/docs/intro">introduction</a> before the <a href="https://other.org/ref">reference</a>; it explains the terms used below in some detail.</p>
	<ul><li>First item of the list, with words</li><li>Second item of the list, with words</li></ul>
	<ol><li>Step one is to read</li><li>Step two is to write</li></ol>
	<pre><code class="language-go">func main() {
	fmt.Println("hi")
}</code></pre>
	<table><tr><th>Key</th><th>Value</th></tr><tr><td>first<br>line two</td><td>1</td></tr><tr><td>second</td><td>2</td></tr></table>
	` + article(2) + `
	</article><footer>Copyright</footer></body></html>`
	p := pageOf(t, "https://example.com/guide/", src)
	for _, w := range []string{
		"[introduction](https://example.com/docs/intro)",
		"[reference](https://other.org/ref)",
		"- First item of the list, with words",
		"1. Step one is to read",
		"2. Step two is to write",
		"```go\nfunc main() {\n\tfmt.Println(\"hi\")\n}\n```",
		"| Key",
		"first<br>line two",
		"| second",
	} {
		if !strings.Contains(p.Markdown, w) {
			t.Errorf("markdown lacks %q:\n%s", w, p.Markdown)
		}
	}
	for _, w := range []string{"First item of the list", "Step two is to write", "fmt.Println(\"hi\")", "line two", "Paragraph 3"} {
		if !strings.Contains(p.Text, w) {
			t.Errorf("text lacks %q:\n%s", w, p.Text)
		}
	}
	if strings.Contains(p.Text, "Copyright") {
		t.Errorf("text holds the footer:\n%s", p.Text)
	}
}

func TestTextBlocks(t *testing.T) {
	t.Parallel()
	n, err := parseHTML([]byte(`<div><h2>Title</h2><p>One <b>bold</b>,  two.</p><ul><li>a</li><li>b</li></ul><table><tr><td>x</td><td>y</td></tr></table><pre>  code
  kept</pre>line<br>break</div>`))
	if err != nil {
		t.Fatal(err)
	}
	got := nodeText(n)
	wantText := "Title\nOne bold, two.\n- a\n- b\nx\ty\n  code\n  kept\nline\nbreak"
	if got != wantText {
		t.Errorf("nodeText =\n%q\nwant\n%q", got, wantText)
	}
}

func TestDedupeBlocks(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, page, want string
	}{
		{
			name: "part of a block before, and a paragraph the page repeats",
			page: `<body><p>Lorem ipsum dolor sit amet, consectetur adipisicing elit, sed do eiusmod tempor.</p><p>consectetur adipisicing elit, sed do</p><p>Same paragraph repeated on purpose here.</p><p>Same paragraph repeated on purpose here.</p></body>`,
			want: "Lorem ipsum dolor sit amet, consectetur adipisicing elit, sed do eiusmod tempor.\nSame paragraph repeated on purpose here.\nSame paragraph repeated on purpose here.",
		},
		{
			name: "a lead the next paragraph opens with, and a heading that does",
			page: `<body><p>The winter timetable starts on Monday.</p><p>The winter timetable starts on Monday. Late ferries are fewer.</p><h2>Installation on Linux systems</h2><p>Installation on Linux systems takes a minute.</p></body>`,
			want: "The winter timetable starts on Monday. Late ferries are fewer.\nInstallation on Linux systems\nInstallation on Linux systems takes a minute.",
		},
		{
			name: "a paragraph the page has once, emitted twice",
			page: `<body><p>This paragraph is in the page only once.</p><p>Next one.</p></body>`,
			want: "This paragraph is in the page only once.\nNext one.",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc, _ := parseHTML([]byte(tt.page))
			// The content tree: a copy of the body, with the second case's
			// first paragraph doubled (an element taken twice).
			body := cloneFiltered(doc.FirstChild.LastChild, -1)
			if first := body.FirstChild; strings.Contains(tt.name, "twice") {
				body.InsertBefore(deepCopy(first, 0), first)
			}
			dedupeBlocks(body, doc)
			if got := nodeText(body); got != tt.want {
				t.Errorf("after dedupe:\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

func TestCharset(t *testing.T) {
	t.Parallel()
	const word = "Café déjà vu – “quoted”"
	cp1252 := []byte("Caf\xe9 d\xe9j\xe0 vu \x96 \x93quoted\x94")
	latin1Page := func(meta string) []byte {
		return append(append([]byte("<html><head>"+meta+"<title>"), cp1252...), []byte("</title></head><body><p>x</p></body></html>")...)
	}
	utf16 := func(s string) []byte {
		out := []byte{0xff, 0xfe}
		for _, r := range s {
			out = append(out, byte(r), byte(r>>8))
		}
		return out
	}
	tests := []struct {
		name        string
		body        []byte
		contentType string
		want        string
	}{
		{"windows-1252 from the header", latin1Page(""), "text/html; charset=windows-1252", word},
		{"iso-8859-1 header means windows-1252", latin1Page(""), "text/html; charset=ISO-8859-1", word},
		{"meta charset", latin1Page(`<meta charset="windows-1252">`), "text/html", word},
		{"http-equiv", latin1Page(`<meta http-equiv="Content-Type" content="text/html; charset=windows-1252">`), "", word},
		{"no label, not UTF-8", latin1Page(""), "text/html", word},
		{"UTF-8 BOM", append([]byte("\xef\xbb\xbf<html><head><title>"), []byte(word+"</title></head></html>")...), "text/html; charset=windows-1252", word},
		{"UTF-16LE BOM", utf16("<html><head><title>" + word + "</title></head></html>"), "", word},
		{"valid UTF-8 beats a stale meta", []byte(`<html><head><meta charset="gb2312"><title>` + word + `</title></head></html>`), "text/html", word},
		{"windows-1251 meta", append([]byte(`<html><head><meta charset="windows-1251"><title>`), []byte("\xcf\xf0\xe8\xe2\xe5\xf2</title></head></html>")...), "", "Привет"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Extract(context.Background(), Input{URL: "https://example.com/", Body: tt.body, ContentType: tt.contentType}, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if p.Title != tt.want {
				t.Errorf("Title = %q, want %q", p.Title, tt.want)
			}
		})
	}
}

func TestPassThrough(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, contentType, body         string
		wantType, wantTitle, wantPrefix string
	}{
		{"plain text", "text/plain; charset=utf-8", "Just text.\nLine two.", "text/plain", "", "Just text.\nLine two."},
		{"plain text in latin-1", "text/plain; charset=iso-8859-1", "caf\xe9", "text/plain", "", "café"},
		{"JSON", "application/json", `{"a": [1, 2]}`, "application/json", "", `{"a": [1, 2]}`},
		{"JSON sniffed", "", `[{"a": 1}]`, "application/json", "", `[{"a": 1}]`},
		{"RSS", "application/rss+xml", `<?xml version="1.0"?><rss version="2.0"><channel><title>Feed &amp; title</title><item><title>Item</title></item></channel></rss>`, "application/rss+xml", "Feed & title", "<?xml"},
		{"Atom with CDATA", "application/atom+xml", `<?xml version="1.0"?><feed xmlns="http://www.w3.org/2005/Atom"><title><![CDATA[Atom feed]]></title></feed>`, "application/atom+xml", "Atom feed", "<?xml"},
		{"XML sniffed", "", `<?xml version="1.0"?><doc><title>Doc</title></doc>`, "application/xml", "Doc", "<?xml"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Extract(context.Background(), Input{URL: "https://example.com/f", Body: []byte(tt.body), ContentType: tt.contentType}, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if p.ContentType != tt.wantType || p.Title != tt.wantTitle || !strings.HasPrefix(p.Text, tt.wantPrefix) {
				t.Errorf("got type %q title %q text %q; want %q, %q, prefix %q", p.ContentType, p.Title, p.Text, tt.wantType, tt.wantTitle, tt.wantPrefix)
			}
		})
	}
}

func TestOtherTypesUnsupported(t *testing.T) {
	t.Parallel()
	png := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
	for _, in := range []Input{
		{URL: "https://example.com/i.png", Body: png, ContentType: "image/png"},
		{URL: "https://example.com/i.png", Body: png},
		{URL: "https://example.com/f.zip", Body: []byte("PK\x03\x04"), ContentType: "application/zip"},
	} {
		p, err := Extract(context.Background(), in, Options{})
		if airlock.CodeOf(err) != airlock.CodeUpstream || airlock.ReasonOf(err) != airlock.ReasonUnsupportedContent {
			t.Errorf("%q: page %+v, err %v; want upstream/unsupported_content", in.ContentType, p, err)
		} else if size := fmt.Sprintf("(%d bytes)", len(in.Body)); !strings.Contains(err.Error(), size) || !strings.Contains(err.Error(), "/") {
			t.Errorf("%q: %q does not name the type and %s", in.ContentType, err, size)
		}
		p, err = Extract(context.Background(), in, Options{Mode: airlock.ExtractNone})
		if err != nil {
			t.Fatalf("%s, mode none: %v", in.ContentType, err)
		}
		if p.Text != "" || p.Markdown != "" || p.URL != in.URL || p.ContentType == "" {
			t.Errorf("%q: page = %+v, want metadata only", in.ContentType, p)
		}
	}
}

func TestSizeCap(t *testing.T) {
	t.Parallel()
	body := bytes.Repeat([]byte("a"), 1001)
	_, err := Extract(context.Background(), Input{Body: body, ContentType: "text/plain"}, Options{MaxInputBytes: 1000})
	if airlock.CodeOf(err) != airlock.CodeTooLarge || airlock.ReasonOf(err) != airlock.ReasonInputTooLarge {
		t.Errorf("err = %v (%s/%s), want too_large/%s", err, airlock.CodeOf(err), airlock.ReasonOf(err), airlock.ReasonInputTooLarge)
	}
	if _, err := Extract(context.Background(), Input{Body: body[:1000], ContentType: "text/plain"}, Options{MaxInputBytes: 1000}); err != nil {
		t.Errorf("at the cap: %v", err)
	}
	big := bytes.Repeat([]byte("b"), DefaultMaxInputBytes+1)
	if _, err := Extract(context.Background(), Input{Body: big, ContentType: "text/plain"}, Options{}); airlock.CodeOf(err) != airlock.CodeTooLarge {
		t.Errorf("past the default cap: err = %v, want too_large", err)
	}
}

func TestModeNone(t *testing.T) {
	t.Parallel()
	p, err := Extract(context.Background(), Input{URL: "https://example.com/", Body: []byte(`<html><head><title>T</title></head><body><h1>H</h1>` + article(5) + `<a href="/x">x</a></body></html>`)},
		Options{Mode: airlock.ExtractNone})
	if err != nil {
		t.Fatal(err)
	}
	if p.Title != "T" || len(p.Links) != 1 || len(p.Headings) != 1 || p.Text != "" || p.Markdown != "" {
		t.Errorf("mode none: title %q links %d headings %d text %q markdown %q", p.Title, len(p.Links), len(p.Headings), p.Text, p.Markdown)
	}
	if _, err := Extract(context.Background(), Input{Body: []byte("x")}, Options{Mode: "partial"}); airlock.CodeOf(err) != airlock.CodeInvalid {
		t.Errorf("unknown mode: err = %v, want invalid", err)
	}
}

func TestShortPageFallsBackToBody(t *testing.T) {
	t.Parallel()
	p := pageOf(t, "https://example.com/", `<html><body><header>Site header</header><div>Opening hours: 9 to 5.</div><div>Closed on Sundays.</div><footer>Footer</footer></body></html>`)
	if !strings.Contains(p.Text, "Opening hours: 9 to 5.") || !strings.Contains(p.Text, "Closed on Sundays.") {
		t.Errorf("text = %q, want the body text", p.Text)
	}
}

func TestRobots(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		meta         string
		header       []string
		noidx, nofol bool
	}{
		{"nothing", "", nil, false, false},
		{"meta noindex", `<meta name="robots" content="noindex, follow">`, nil, true, false},
		{"meta none", `<meta name="ROBOTS" content="NONE">`, nil, true, true},
		{"meta for airlock", `<meta name="airlock" content="nofollow">`, nil, false, true},
		{"meta for another bot", `<meta name="googlebot" content="noindex">`, nil, false, false},
		{"header", "", []string{"noindex"}, true, false},
		{"header for airlock", "", []string{"airlock: nofollow"}, false, true},
		{"header for another bot", "", []string{"googlebot: noindex, nofollow"}, false, false},
		{"header mixed agents", "", []string{"otherbot: noindex, airlock: nofollow"}, false, true},
		{"header directives with values", "", []string{"max-snippet: 20, noindex"}, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			for _, v := range tt.header {
				h.Add("X-Robots-Tag", v)
			}
			in := Input{URL: "https://example.com/", Body: []byte("<html><head>" + tt.meta + "</head><body><p>x</p></body></html>"), Header: h}
			p, err := Extract(context.Background(), in, Options{Mode: airlock.ExtractNone})
			if err != nil {
				t.Fatal(err)
			}
			ni, nf := Robots(in, p)
			if ni != tt.noidx || nf != tt.nofol {
				t.Errorf("Robots = %v, %v; want %v, %v", ni, nf, tt.noidx, tt.nofol)
			}
		})
	}
}

func TestBotWalls(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join("testdata", "botwall", "*.html"))
	if err != nil || len(files) < 15 {
		t.Fatalf("bot-wall fixtures: %v (%d files)", err, len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			t.Parallel()
			body, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			// <!-- want: KIND [VENDOR]. ... -->
			head, _, _ := strings.Cut(strings.TrimPrefix(string(body), "<!-- want: "), ".")
			fields := strings.Fields(head)
			wantKind, wantVendor := fields[0], ""
			if len(fields) > 1 {
				wantVendor = fields[1]
			}
			// A crawl with --extract none must see walls as a full
			// extraction does.
			for _, mode := range []string{airlock.ExtractFull, airlock.ExtractNone} {
				_, err = Extract(context.Background(), Input{URL: "https://www.example.com/news/", Body: body}, Options{Mode: mode})
				var wall *BotWallError
				switch {
				case wantKind == "none":
					if err != nil {
						t.Errorf("%s: err = %v, want a page", mode, err)
					}
				case !errors.As(err, &wall):
					t.Errorf("%s: err = %v, want a *BotWallError", mode, err)
				case wall.Kind != wantKind || wall.Vendor != wantVendor:
					t.Errorf("%s: wall = %s/%s, want %s/%s", mode, wall.Kind, wall.Vendor, wantKind, wantVendor)
				case airlock.CodeOf(err) != airlock.CodeUpstream || airlock.ReasonOf(err) != "bot_wall":
					t.Errorf("%s: classified %s/%s, want upstream/bot_wall", mode, airlock.CodeOf(err), airlock.ReasonOf(err))
				}
			}
		})
	}
}

func TestBotWallHeaders(t *testing.T) {
	t.Parallel()
	tests := []struct {
		header, value, kind string
	}{
		{"Cf-Mitigated", "challenge", BotWallChallenge},
		{"X-Amzn-Waf-Action", "captcha", BotWallCaptcha},
		{"X-Amzn-Waf-Action", "challenge", BotWallChallenge},
	}
	for _, tt := range tests {
		h := http.Header{}
		h.Set(tt.header, tt.value)
		_, err := Extract(context.Background(), Input{Body: []byte("<html><body>" + article(5) + "</body></html>"), Header: h}, Options{})
		var wall *BotWallError
		if !errors.As(err, &wall) || wall.Kind != tt.kind {
			t.Errorf("%s: %s: err = %v, want %s", tt.header, tt.value, err, tt.kind)
		}
	}
}

// TestBotWallNoFalseDetection: long pages that load the vendors' scripts,
// embed captchas in comment forms or borrow a wall's title are content.
func TestBotWallNoFalseDetection(t *testing.T) {
	t.Parallel()
	pages := map[string]string{
		"cloudflare beacon and bot script": `<html><head><title>News</title><script src="/cdn-cgi/challenge-platform/h/b/scripts/jsd/main.js"></script></head><body>` + article(12) + `<script>window.__CF$cv$params={r:'00',t:'00'};</script></body></html>`,
		"comment form with reCAPTCHA":      `<html><head><title>Post</title><script src="https://www.google.com/recaptcha/api.js"></script></head><body>` + article(12) + `<form id="comments"><p>Are you a robot? Please verify you are human.</p><div class="g-recaptcha" data-sitekey="x"></div></form></body></html>`,
		"article titled like a wall":       `<html><head><title>Just a moment... the art of waiting</title></head><body>` + article(12) + `</body></html>`,
		"DataDome tag on a page":           `<html><head><title>Shop</title><script>window.ddjskey='XXXX';</script><script src="https://js.datadome.co/tags.js"></script></head><body>` + article(12) + `</body></html>`,
		"article about access denied":      `<html><head><title>Access Denied: what a 403 means</title></head><body><p>You don't have permission to access this page on this server, says the error; Reference #18 explains.</p>` + article(12) + `</body></html>`,
	}
	for name, src := range pages {
		if _, err := Extract(context.Background(), Input{URL: "https://example.com/", Body: []byte(src)}, Options{}); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestHostile(t *testing.T) {
	t.Parallel()
	tests := map[string]string{
		"deep nesting":        "<html><body>" + strings.Repeat("<div>", 100000) + "deep text" + strings.Repeat("</div>", 100000) + "</body></html>",
		"deep inline nesting": "<html><body><p>" + strings.Repeat("<b><i>", 50000) + "styled" + "</p></body></html>",
		"huge attribute":      `<html><body><div class="` + strings.Repeat("x", 5<<20) + `">` + article(3) + `</div></body></html>`,
		"many links":          "<html><body>" + strings.Repeat(`<a href="/same">same</a><a href="https://a.example/`+"x"+`">x</a>`, 50000) + "</body></html>",
		"many elements":       "<html><body>" + strings.Repeat("<p>a</p>", 200000) + "</body></html>",
		"unclosed tags":       "<html><body>" + strings.Repeat("<table><tr><td><p><li>", 5000) + "text",
		"nul and garbage":     "<html>\x00<body>\xff\xfe<p>\x00text\x01</p><scr\x00ipt>x</script></body>",
		"huge JSON-LD":        `<html><head><script type="application/ld+json">` + strings.Repeat(`{"@graph":[`, 10000) + `</script></head><body>` + article(3) + `</body></html>`,
	}
	for name, src := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p, err := Extract(context.Background(), Input{URL: "https://example.com/", Body: []byte(src)}, Options{})
			if err != nil {
				var wall *BotWallError
				if errors.As(err, &wall) {
					t.Fatalf("taken for a bot wall: %v", err)
				}
				return // refusing is fine; panicking or hanging is not
			}
			if len(p.Links) > airlock.MaxPageLinks || len(p.Headings) > airlock.MaxHeadings || len(p.Tables) > airlock.MaxPageTables {
				t.Errorf("caps exceeded: %d links, %d headings, %d tables", len(p.Links), len(p.Headings), len(p.Tables))
			}
			if name == "deep nesting" && !strings.Contains(p.Text, "deep text") {
				t.Errorf("deep nesting: text %q lost the content", p.Text)
			}
		})
	}
}

func TestPoolHonoursContext(t *testing.T) {
	// Not parallel: it fills the pool.
	for range cap(pool) {
		pool <- struct{}{}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := Extract(ctx, Input{Body: []byte("<p>x</p>")}, Options{})
	for range cap(pool) {
		<-pool
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v, want the context's deadline while the pool is full", err)
	}
}

func TestPDF(t *testing.T) {
	// Not parallel: other PDF tests swap PDFCommand.
	body, err := os.ReadFile(filepath.Join("testdata", "pdf", "hello.pdf"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(body, minimalPDF("Hello from a PDF.\nAirlock reads this line too.", "Second page text.")) {
		t.Error("testdata/pdf/hello.pdf is not what minimalPDF writes: regenerate it")
	}
	for _, ct := range []string{"application/pdf", ""} {
		p, err := Extract(context.Background(), Input{URL: "https://example.com/doc.pdf", Body: body, ContentType: ct}, Options{})
		if err != nil {
			t.Fatalf("%q: %v", ct, err)
		}
		wantText := "Hello from a PDF.\nAirlock reads this line too.\n\nSecond page text."
		if p.Text != wantText || p.ContentType != "application/pdf" {
			t.Errorf("%q: text %q type %q, want %q", ct, p.Text, p.ContentType, wantText)
		}
	}

	corrupt, err := os.ReadFile(filepath.Join("testdata", "pdf", "corrupt.pdf"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = Extract(context.Background(), Input{Body: corrupt, ContentType: "application/pdf"}, Options{})
	if airlock.CodeOf(err) != airlock.CodeUpstream || airlock.ReasonOf(err) != airlock.ReasonPDF {
		t.Errorf("corrupt PDF: err = %v, want upstream/%s", err, airlock.ReasonPDF)
	}
}

func TestPDFKilledAtDeadline(t *testing.T) {
	// Not parallel: it swaps PDFCommand and PDFTimeout.
	defer func(c func(context.Context) (*exec.Cmd, error), d time.Duration) { PDFCommand, PDFTimeout = c, d }(PDFCommand, PDFTimeout)
	PDFCommand, PDFTimeout = helperCommand("hang"), 200*time.Millisecond
	start := time.Now()
	_, err := Extract(context.Background(), Input{Body: minimalPDF("x"), ContentType: "application/pdf"}, Options{})
	if airlock.CodeOf(err) != airlock.CodeTimeout || airlock.ReasonOf(err) != airlock.ReasonCPUDeadline {
		t.Errorf("err = %v, want timeout/%s", err, airlock.ReasonCPUDeadline)
	}
	// Not a timing assertion on the work, only that the kill happened:
	// the helper sleeps an hour.
	if time.Since(start) > time.Minute {
		t.Errorf("the PDF child was not killed at its deadline")
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Extract(ctx, Input{Body: minimalPDF("x"), ContentType: "application/pdf"}, Options{}); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled: err = %v, want context.Canceled", err)
	}
}

// minimalPDF writes a valid PDF 1.4 file with one page per text, each line
// shown with Helvetica; testdata/pdf/hello.pdf was made with it.
func minimalPDF(pages ...string) []byte {
	var objs []string
	kids := make([]string, len(pages))
	for i := range pages {
		kids[i] = fmt.Sprintf("%d 0 R", 4+2*i)
	}
	objs = append(objs,
		"<< /Type /Catalog /Pages 2 0 R >>",
		fmt.Sprintf("<< /Type /Pages /Kids [%s] /Count %d >>", strings.Join(kids, " "), len(pages)),
		"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>")
	esc := strings.NewReplacer(`\`, `\\`, `(`, `\(`, `)`, `\)`)
	for i, text := range pages {
		ops := []string{"BT /F1 12 Tf 72 720 Td 14 TL"}
		for _, l := range strings.Split(text, "\n") {
			ops = append(ops, "("+esc.Replace(l)+") Tj T*")
		}
		ops = append(ops, "ET")
		stream := strings.Join(ops, "\n")
		objs = append(objs,
			fmt.Sprintf("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> /Contents %d 0 R >>", 5+2*i),
			fmt.Sprintf("<< /Length %d >>\nstream\n%s\nendstream", len(stream), stream))
	}
	return pdfFile(objs)
}

// cyclicPDF is a hostile PDF whose page tree's only kid is the tree
// itself: a reader that walks /Kids to find page 1 never ends, and
// allocates nothing while it spins.
func cyclicPDF() []byte {
	return pdfFile([]string{
		"<< /Type /Catalog /Pages 2 0 R >>",
		"<< /Type /Pages /Kids [2 0 R] /Count 1 >>",
	})
}

// pdfFile writes objs as objects 1, 2, ... of a PDF 1.4 file with a cross
// reference table; object 1 is the catalog.
func pdfFile(objs []string) []byte {
	var b bytes.Buffer
	b.WriteString("%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
	offsets := make([]int, len(objs))
	for i, o := range objs {
		offsets[i] = b.Len()
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", i+1, o)
	}
	xref := b.Len()
	fmt.Fprintf(&b, "xref\n0 %d\n0000000000 65535 f \n", len(objs)+1)
	for _, o := range offsets {
		fmt.Fprintf(&b, "%010d 00000 n \n", o)
	}
	fmt.Fprintf(&b, "trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n", len(objs)+1, xref)
	return b.Bytes()
}

// TestShortPageNotRunTogether: a page too short for the extractors must
// not come out as the whole document's text run together, title included
// ("BPage BThe second page."), as go-trafilatura's last resort gave it.
func TestShortPageNotRunTogether(t *testing.T) {
	t.Parallel()
	p := pageOf(t, "https://example.com/b", `<html><head><title>B</title></head><body><h1>Page B</h1><p>The second page.</p></body></html>`)
	for _, s := range []string{p.Text, p.Markdown} {
		if strings.Contains(s, "BPage") || strings.Count(s, "The second page.") != 1 {
			t.Errorf("content run together or repeated: %q", s)
		}
	}
	if !strings.Contains(p.Text, "The second page.") {
		t.Errorf("text lost the paragraph: %q", p.Text)
	}
}
