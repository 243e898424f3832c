package crawl

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/crawl/crawlbench"
	"github.com/airlockhq/airlock/internal/extract"
)

// domPage is what the full extractor makes of resp in ExtractNone mode:
// the page and its robots directives (the DOM path that Discover
// replaces for a crawl).
func domPage(t testing.TB, resp *airlock.HTTPResponse) (_ *airlock.Page, _, _ bool, err error) {
	t.Helper()
	defer func() {
		if v := recover(); v != nil { // the extractor's bug, reported as the page's
			err = fmt.Errorf("the extractor panicked: %v", v)
		}
	}()
	h := http.Header(resp.Header)
	in := extract.Input{URL: resp.URL, Body: resp.Body, ContentType: h.Get("Content-Type"), Header: h}
	p, err := extract.Extract(context.Background(), in, extract.Options{Mode: airlock.ExtractNone})
	if err != nil {
		return nil, false, false, err
	}
	ni, nf := extract.Robots(in, p)
	return p, ni, nf, nil
}

// sameAsDOM reports how Discover's reading of resp differs from the
// extractor's: links, <title>, meta tags, canonical URL, language and
// robots directives, headings; "" when they agree or Discover declines
// the page.
// Language, description and site name are compared only when the page has
// no JSON-LD (the extractor reads them there too; Discover does not).
func sameAsDOM(t testing.TB, resp *airlock.HTTPResponse) (diff string, discovered bool) {
	t.Helper()
	ex, ok := discover(resp)
	if !ok {
		return "", false
	}
	p, ni, nf, err := domPage(t, resp)
	if err != nil {
		return fmt.Sprintf("Discover read a page the extractor refuses: %v", err), true
	}
	var b strings.Builder
	d := ex.Page
	if diff := cmp.Diff(p.Links, d.Links); diff != "" {
		fmt.Fprintf(&b, "links (-dom +discover):\n%s", diff)
	}
	if diff := cmp.Diff(p.Headings, d.Headings); diff != "" {
		fmt.Fprintf(&b, "headings (-dom +discover):\n%s", diff)
	}
	for _, f := range []string{"headings", "links"} {
		if got, want := slicesHas(d.Truncated, f), slicesHas(p.Truncated, f); got != want {
			fmt.Fprintf(&b, "%s truncated: got %v, want %v\n", f, got, want)
		}
	}
	for k, v := range d.Meta {
		if p.Meta[k] != v {
			fmt.Fprintf(&b, "meta %q: got %q, want %q\n", k, v, p.Meta[k])
		}
	}
	ld := bytes.Contains(bytes.ToLower(resp.Body), []byte("ld+json"))
	for k, v := range p.Meta {
		if _, has := d.Meta[k]; !has && !ld {
			fmt.Fprintf(&b, "meta %q: missing, want %q\n", k, v)
		}
	}
	if d.Canonical != p.Canonical {
		fmt.Fprintf(&b, "canonical: got %q, want %q\n", d.Canonical, p.Canonical)
	}
	if !ld {
		for _, f := range []struct{ name, got, want string }{
			{"lang", d.Lang, p.Lang}, {"description", d.Description, p.Description}, {"site_name", d.SiteName, p.SiteName},
		} {
			if f.got != f.want {
				fmt.Fprintf(&b, "%s: got %q, want %q\n", f.name, f.got, f.want)
			}
		}
	}
	if ex.NoIndex != ni || ex.NoFollow != nf {
		fmt.Fprintf(&b, "robots: got noindex %v nofollow %v, want %v %v\n", ex.NoIndex, ex.NoFollow, ni, nf)
	}
	var urls []string
	for _, l := range p.Links {
		urls = append(urls, l.URL)
	}
	if diff := cmp.Diff(urls, ex.Links, cmp.Comparer(func(a, b []string) bool { return strings.Join(a, "\n") == strings.Join(b, "\n") })); diff != "" && len(urls)+len(ex.Links) > 0 {
		fmt.Fprintf(&b, "links to follow (-dom +discover):\n%s", diff)
	}
	return b.String(), true
}

func slicesHas(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func htmlResponse(u string, body []byte) *airlock.HTTPResponse {
	return &airlock.HTTPResponse{
		Status: 200, URL: u, Body: body,
		Header: map[string][]string{"Content-Type": {"text/html; charset=utf-8"}},
	}
}

// TestDiscoverSameAsDOM holds Discover to the extractor over the
// extractor's Readability test pages and pages of the generated crawl
// site: wherever Discover reads a page, its links (URL, text, rel,
// internal), headings, meta tags, <title>, canonical URL, language and
// robots directives are the extractor's.
func TestDiscoverSameAsDOM(t *testing.T) {
	sources, err := filepath.Glob("../extract/testdata/readability/*/source.html")
	if err != nil || len(sources) == 0 {
		t.Fatalf("no Readability pages under ../extract/testdata: %v", err)
	}
	read := 0
	for _, src := range sources {
		body, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Base(filepath.Dir(src))
		diff, ok := sameAsDOM(t, htmlResponse("http://fakehost/test/page.html", body))
		if ok {
			read++
		}
		if diff != "" {
			t.Errorf("%s:\n%s", name, diff)
		}
	}
	// Most of them are long enough and UTF-8: a Discover that declined
	// them all would pass the comparison without reading anything.
	t.Logf("Discover read %d of %d Readability pages", read, len(sources))
	if read < len(sources)/2 {
		t.Errorf("Discover read %d of %d Readability pages, want at least half", read, len(sources))
	}
	site := &crawlbench.Site{N: 2000}
	for _, i := range []int{0, 1, 2, 999, 1999} {
		rec := httptest.NewRecorder()
		site.ServeHTTP(rec, httptest.NewRequest("GET", fmt.Sprintf("/p/%d", i), nil))
		diff, ok := sameAsDOM(t, htmlResponse(fmt.Sprintf("http://127.0.0.1:8080/p/%d", i), rec.Body.Bytes()))
		if !ok {
			t.Errorf("generated page %d: Discover declined it", i)
		}
		if diff != "" {
			t.Errorf("generated page %d:\n%s", i, diff)
		}
	}
}

// TestDiscoverDeclinesBotWalls: every bot wall page of the extractor's
// tests goes to the extractor (Discover reads only pages with more text
// than a wall has), so that a crawl for discovery still skips walls.
func TestDiscoverDeclinesBotWalls(t *testing.T) {
	walls, err := filepath.Glob("../extract/testdata/botwall/*.html")
	if err != nil || len(walls) == 0 {
		t.Fatalf("no bot wall pages under ../extract/testdata: %v", err)
	}
	for _, w := range walls {
		body, err := os.ReadFile(w)
		if err != nil {
			t.Fatal(err)
		}
		resp := htmlResponse("https://shop.example/item", body)
		if _, ok := discover(resp); !ok {
			continue
		}
		var wall *extract.BotWallError
		if _, _, _, err := domPage(t, resp); errors.As(err, &wall) {
			t.Errorf("%s: Discover read a page the extractor calls a bot wall (%v)", filepath.Base(w), err)
		}
	}
	long := bytes.Repeat([]byte("<p>Lorem ipsum dolor sit amet, consectetur adipiscing elit.</p>\n"), 40)
	for _, h := range []string{"Cf-Mitigated", "X-Amzn-Waf-Action"} {
		resp := htmlResponse("https://shop.example/item", long)
		resp.Header[h] = []string{"challenge"}
		if _, ok := discover(resp); ok {
			t.Errorf("Discover read a page answered with %s", h)
		}
	}
}

// TestDiscoverDeclines lists what Discover leaves to the extractor.
func TestDiscoverDeclines(t *testing.T) {
	long := "<html><head><title>T</title></head><body>" + strings.Repeat("<p>Lorem ipsum dolor sit amet, consectetur adipiscing elit.</p>\n", 40)
	for _, tc := range []struct {
		name, ctype, body string
		want              bool
	}{
		{"long utf-8 page", "text/html; charset=utf-8", long + "é", true},
		{"short page", "text/html", "<title>Just a moment...</title><p>Checking your browser</p>", false},
		{"not html", "application/json", long, false},
		{"unlabelled", "", long, false},
		{"latin-1 bytes", "text/html; charset=iso-8859-1", long + "\xe9", false},
		{"utf-16 label on ascii", "text/html; charset=utf-16", long, false},
		{"iso-2022 escapes", "text/html", long + "\x1b$B", false},
		{"utf-16 bom", "text/html", "\xff\xfe" + long, false},
		{"too deep", "text/html", long + strings.Repeat("<div>", 300), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := &airlock.HTTPResponse{Status: 200, URL: "https://site.example/", Body: []byte(tc.body),
				Header: map[string][]string{"Content-Type": {tc.ctype}}}
			if _, got := discover(resp); got != tc.want {
				t.Errorf("Discover read it: %v, want %v", got, tc.want)
			}
		})
	}
}

// FuzzDiscover: Discover never panics, its links are absolute http(s)
// URLs without fragments, each once, within the page caps, and the
// links to follow are the page's; where it reads a page, it agrees with
// the extractor (see sameAsDOM). Seeds: the generated site's pages and
// hand-written cases (base, nested and unclosed links, SVG, templates,
// meta robots) and the inputs fuzzing found (testdata/fuzz); CI runs the
// seeds only. Fuzzing still finds pages where the two disagree, from
// parser repairs Discover does not follow: an implicitly closed link
// reopened in the next block (its text counts when the link has none),
// foster parenting in tables, tags in <select>; on 11,000 mutated pages
// about 0.7% differ, 0.05% in the links to follow.
func FuzzDiscover(f *testing.F) {
	site := &crawlbench.Site{N: 100}
	for _, i := range []int{0, 7, 99} {
		rec := httptest.NewRecorder()
		site.ServeHTTP(rec, httptest.NewRequest("GET", fmt.Sprintf("/p/%d", i), nil))
		f.Add(rec.Body.String())
	}
	pad := strings.Repeat("<p>Lorem ipsum dolor sit amet, consectetur adipiscing elit.</p>\n", 45)
	var manyKeys string // more keys than the meta map holds, in one tag
	for i := range 300 {
		manyKeys += fmt.Sprintf("k%d ", i)
	}
	for _, s := range []string{
		`<head><base href="/sub/"><meta name="robots" content="noindex, nofollow"></head><body><a href="x">x</a><a href="../y#f">y</a>`,
		`<a href="/a">one<a href="/b">two</a></a><area href="/c" alt="c"><map><area href="/d" title="d"></map>`,
		`<svg><a href="/svg">s</a><title>t</title><style>a{}</style></svg><title>Doc</title><a href="/t"><img alt="i"></a>`,
		`<template><a href="/hidden">h</a></template><a href="javascript:x"><area href="/in"></a><a href="/e"><script>x</script>e</a>`,
		`<html lang="fr"><meta property="og:title twitter:title" content=" A  B "><meta name="author" content="x"><meta name="author" content="y"><link rel="Canonical" href="/c">`,
		`<meta property="og:site_name" content="ⱥⱥⱥⱥ"><meta property="og:title" content="ȺȺȺȺ | ab">`,
		`<meta property="og:site_name" content="ⱥⱥⱥⱥ"><meta property="og:title" content="ab | ȺȺȺȺ">`,
		`<meta property="` + manyKeys + strings.Repeat("y", 200) + ` z" content="x">`,
	} {
		f.Add(s + pad)
	}
	f.Fuzz(func(t *testing.T, body string) {
		resp := htmlResponse("https://site.example/dir/page", []byte(body))
		ex, ok := discover(resp)
		if !ok {
			return
		}
		seen := map[string]bool{}
		if len(ex.Page.Links) > airlock.MaxPageLinks || len(ex.Links) != len(ex.Page.Links) {
			t.Fatalf("%d links, %d to follow", len(ex.Page.Links), len(ex.Links))
		}
		for i, l := range ex.Page.Links {
			if !strings.HasPrefix(l.URL, "http://") && !strings.HasPrefix(l.URL, "https://") || strings.Contains(l.URL, "#") || seen[l.URL] || ex.Links[i] != l.URL || len(l.Text) > discoverMaxText {
				t.Fatalf("link %d: %+v (to follow: %q)", i, l, ex.Links[i])
			}
			seen[l.URL] = true
		}
		if diff, _ := sameAsDOM(t, resp); diff != "" {
			t.Errorf("Discover and the extractor disagree:\n%s", diff)
		}
	})
}
