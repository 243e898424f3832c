package extract

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

// kelvin4 is four Kelvin signs (U+212A, 3 bytes each; lower case "k").
const kelvin4 = "\u212a\u212a\u212a\u212a"

// caseFoldTriggers are strings whose lower case has another byte length
// than they have ("Ⱥ" is 2 bytes, "ⱥ" 3; U+212A, the Kelvin sign, is 3 bytes,
// "k" 1): a match found in a lowered copy is at other offsets in the
// original.
var caseFoldTriggers = []struct{ site, title, author string }{
	{site: "ⱥⱥⱥⱥ", title: "ȺȺȺȺ | ab"},
	{site: "ȺȺȺȺ", title: "ab cd | ⱥⱥⱥⱥ"},
	{site: "ⱥⱥ", title: "ȺȺ - one two three"},
	{site: kelvin4, title: "one two | kkkk"},
	{site: "kkkk", title: kelvin4 + " | one two"},
	{site: "x", title: "ȺȺȺȺ", author: "ȺȺȺȺȺȺȺȺȺȺȺȺȺȺȺȺȺȺȺȺ edited by Bob"},
	{site: "x", title: "t", author: "Monday, November 12, 2012, " + strings.Repeat("Ⱥ", 20) + " by Bob"},
	{site: "x", title: "t", author: strings.Repeat("\u212a", 20) + " photo by Ann"},
	{site: "x", title: "t", author: "Monday, November 12, 2012, " + strings.Repeat("\u212a", 20) + " by Bob"},
}

// TestExtractCaseFoldNoPanic: titles, site names and bylines whose lower
// case changes their byte length do not panic Extract (they sliced the
// original with a lowered copy's offsets), and the site's name still comes
// off a title that ends with it in another case.
func TestExtractCaseFoldNoPanic(t *testing.T) {
	t.Parallel()
	var body strings.Builder
	for i := range 8 {
		body.WriteString("<p>" + para(i) + "</p>\n")
	}
	for i, c := range caseFoldTriggers {
		page := fmt.Sprintf(`<html><head><title>%s</title><meta property="og:site_name" content="%s"><meta property="og:title" content="%s">`+
			`<meta name="author" content="%s"></head><body><article><h1>Heading</h1>%s</article></body></html>`,
			c.title, c.site, c.title, c.author, body.String())
		p, err := Extract(context.Background(), Input{URL: "https://example.com/post", Body: []byte(page)}, Options{})
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		if !utf8.ValidString(p.Title) || !utf8.ValidString(p.Author) {
			t.Errorf("case %d: invalid UTF-8 in title %q or author %q", i, p.Title, p.Author)
		}
	}
	if got := trimSiteName("ÜBER Ü | One Two", "über ü"); got != "One Two" {
		t.Errorf("trimSiteName with a site in other case = %q, want %q", got, "One Two")
	}
	if got := cleanByline(strings.Repeat("Ⱥ", 20) + " edited by Bob"); got != strings.Repeat("Ⱥ", 20) {
		t.Errorf("cleanByline = %q, want the name before the credit", got)
	}
	if got := cleanByline("Monday, November 12, 2012, " + strings.Repeat("Ⱥ", 4) + " by Bob Kang"); got != "Bob Kang" {
		t.Errorf("cleanByline after a date = %q, want %q", got, "Bob Kang")
	}
	if got := charsetParam(strings.Repeat("Ⱥ", 10) + "charset=utf-8"); got != "utf-8" {
		t.Errorf("charsetParam = %q, want utf-8", got)
	}
	if got := charsetParam("text/html; " + strings.Repeat("\u212a", 10) + "; CHARSET=latin1"); got != "latin1" {
		t.Errorf("charsetParam = %q, want latin1", got)
	}
}

// FuzzCleanByline: cleanByline never panics and keeps valid UTF-8 valid.
// The seeds run as a normal test.
func FuzzCleanByline(f *testing.F) {
	for _, c := range caseFoldTriggers {
		f.Add(c.author)
	}
	for _, s := range []string{"By Ann Writer", "Written by Ann Edited by Bo", "Ann Writer | Published on Monday, 5 May 2021 at 2:23 pm",
		"Monday, November 12, 2012, by Matthew Kang", kelvin4 + " Edited By Bob", "İİİİ photo by x", "ⱥ by:", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := cleanByline(s)
		if utf8.ValidString(s) && !utf8.ValidString(out) {
			t.Errorf("cleanByline(%q) = %q: invalid UTF-8", s, out)
		}
		_ = domByline(s)
	})
}

// FuzzTrimSiteName: trimSiteName never panics and gives a part of the
// title.
func FuzzTrimSiteName(f *testing.F) {
	for _, c := range caseFoldTriggers {
		f.Add(c.title, c.site)
	}
	for _, s := range [][2]string{{"Headline Here | Site", "Site"}, {"Site - Headline Here", "site"}, {"A B | Factorio", "Factorio.com"},
		{"ȺȺȺȺ | ab", "ⱥⱥⱥⱥ.com"}, {"İİ x y | z", "i̇i̇"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, title, site string) {
		out := trimSiteName(title, site)
		if !strings.Contains(title, out) {
			t.Errorf("trimSiteName(%q, %q) = %q: not a part of the title", title, site, out)
		}
		if utf8.ValidString(title) && !utf8.ValidString(out) {
			t.Errorf("trimSiteName(%q, %q) = %q: invalid UTF-8", title, site, out)
		}
	})
}
