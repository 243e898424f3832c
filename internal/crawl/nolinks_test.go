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
