package crawl

import (
	"slices"
	"strings"
	"testing"

	"github.com/airlockhq/airlock"
)

// TestNoLinks: NoLinks fetches the seed and, with Sitemap, its sitemap's
// URLs, and none of the links of their pages, whatever Depth says.
func TestNoLinks(t *testing.T) {
	s := newSite(t, map[string]resp{
		"/":           page("root", "/a", "/b"),
		"/a":          page("a", "/c"),
		"/b":          page("b"),
		"/c":          page("c"),
		"/listed":     page("listed", "/a"),
		"/robots.txt": {status: 404},
	})
	s.pages["/sitemap.xml"] = resp{body: s.URL("/listed") + "\n", ctype: "text/plain"}
	for _, c := range []struct {
		name string
		req  airlock.CrawlRequest
		want []string
	}{
		{"seed only", airlock.CrawlRequest{Seed: s.URL("/"), NoLinks: true, Depth: 5}, []string{"/"}},
		{"seed and sitemap", airlock.CrawlRequest{Seed: s.URL("/"), NoLinks: true, Sitemap: true}, []string{"/", "/listed"}},
		{"links followed without it", airlock.CrawlRequest{Seed: s.URL("/"), Depth: 1}, []string{"/", "/a", "/b"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			res := crawlSite(t, s, c.req)
			var got []string
			for _, u := range res.urls() {
				got = append(got, strings.TrimPrefix(u, s.URL("")))
			}
			slices.Sort(got)
			if !slices.Equal(got, c.want) {
				t.Errorf("pages = %q, want %q", got, c.want)
			}
		})
	}
}

// TestRawFormat: with FormatRawHTML among its formats, a crawl keeps each
// page's body as served (invalid UTF-8 replaced); without, it keeps none;
// an unknown format is refused before anything is fetched.
func TestRawFormat(t *testing.T) {
	s := newSite(t, map[string]resp{
		"/":           {body: "<html><head><title>root</title></head><body>caf\xe9 <a href=\"/a\">a</a></body></html>"},
		"/a":          page("a"),
		"/robots.txt": {status: 404},
	})
	res := crawlSite(t, s, airlock.CrawlRequest{Seed: s.URL("/"), Depth: 1, Formats: []string{airlock.FormatMarkdown, airlock.FormatRawHTML}})
	raw := map[string]string{}
	for _, p := range res.pages {
		raw[strings.TrimPrefix(p.URL, s.URL(""))] = p.RawHTML
	}
	if want := "<html><head><title>root</title></head><body>caf\uFFFD <a href=\"/a\">a</a></body></html>"; raw["/"] != want {
		t.Errorf("RawHTML of / = %q, want %q", raw["/"], want)
	}
	if want := pageHTML("a", ""); raw["/a"] != want {
		t.Errorf("RawHTML of /a = %q, want %q", raw["/a"], want)
	}
	for _, p := range crawlSite(t, s, airlock.CrawlRequest{Seed: s.URL("/"), Depth: 1}).pages {
		if p.RawHTML != "" {
			t.Errorf("%s kept its body without FormatRawHTML", p.URL)
		}
	}
	before := len(s.hits())
	d := newDoer(s)
	defer d.close()
	if c := crawlWith(t, t.Context(), Config{Doer: d}, airlock.CrawlRequest{Seed: s.URL("/"), Formats: []string{"rawHtml"}}); airlock.CodeOf(c.err) != airlock.CodeInvalid {
		t.Errorf("format rawHtml: error %v, want invalid", c.err)
	}
	if n := len(s.hits()) - before; n != 0 {
		t.Errorf("a refused crawl made %d requests", n)
	}
}
