package crawl

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/airlockhq/airlock"
)

func TestBreadthFirstAndDepth(t *testing.T) {
	pages := map[string]resp{
		"/":    page("root", "/a", "/b"),
		"/a":   page("a", "/a1", "/a2"),
		"/b":   page("b", "/b1", "/a"),
		"/a1":  page("a1", "/a11"),
		"/a2":  page("a2"),
		"/b1":  page("b1"),
		"/a11": page("a11", "/a111"),
	}
	tests := []struct {
		name      string
		depth     int
		wantPaths []string
		wantDepth []string // skipped for depth
	}{
		{name: "default depth 2", depth: 0, wantPaths: []string{"/", "/a", "/b", "/a1", "/a2", "/b1"}, wantDepth: []string{"/a11"}},
		{name: "depth 1", depth: 1, wantPaths: []string{"/", "/a", "/b"}, wantDepth: []string{"/a1", "/a2", "/b1"}},
		{name: "unlimited", depth: Unlimited, wantPaths: []string{"/", "/a", "/b", "/a1", "/a2", "/b1", "/a11"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newSite(t, pages)
			c := crawlSite(t, s, airlock.CrawlRequest{Seed: s.URL("/"), Depth: tt.depth, Concurrency: 1, PerHostConcurrency: 1, MaxPages: 100})
			var want []string
			for _, p := range tt.wantPaths {
				want = append(want, s.URL(p))
			}
			if diff := cmp.Diff(want, c.urls()); diff != "" {
				t.Errorf("pages in order (-want +got):\n%s", diff)
			}
			var wantSkip []string
			for _, p := range tt.wantDepth {
				wantSkip = append(wantSkip, s.URL(p))
			}
			if diff := cmp.Diff(wantSkip, c.skipped(airlock.ReasonDepth)); diff != "" {
				t.Errorf("skipped for depth (-want +got):\n%s", diff)
			}
			if got := s.paths()[0]; got != "/robots.txt" {
				t.Errorf("first request = %s, want /robots.txt", got)
			}
			if c.sum.Pages != len(want) || c.sum.Stopped != "" {
				t.Errorf("summary = %+v, want %d pages, not stopped", c.sum, len(want))
			}
			for _, p := range c.pages {
				if p.Title == "" || p.Status != 200 || p.RequestedURL != p.URL || p.ContentType == "" || p.FetchedAt.IsZero() {
					t.Errorf("page fields not filled: %+v", p)
				}
			}
		})
	}
}

// chainSite is /p/0 … /p/n-1, each page linking to the next two.
func chainSite(t testing.TB, n int, sleep time.Duration) *site {
	s := newSite(t, map[string]resp{})
	s.gen = func(path string) (resp, bool) {
		var i int
		if _, err := fmt.Sscanf(path, "/p/%d", &i); err != nil || i < 0 || i >= n {
			return resp{}, false
		}
		r := page(fmt.Sprint("page ", i), fmt.Sprintf("/p/%d", i+1), fmt.Sprintf("/p/%d", i+2))
		r.sleep = sleep
		return r, true
	}
	return s
}

func TestMaxPages(t *testing.T) {
	s := chainSite(t, 50, 0)
	c := crawlSite(t, s, airlock.CrawlRequest{Seed: s.URL("/p/0"), Depth: Unlimited, MaxPages: 10})
	if c.sum.Pages != 10 || len(c.pages) != 10 {
		t.Fatalf("pages = %d (summary %d), want 10", len(c.pages), c.sum.Pages)
	}
	fetched := 0
	for _, p := range s.paths() {
		if strings.HasPrefix(p, "/p/") {
			fetched++
		}
	}
	if fetched != 10 {
		t.Errorf("fetched %d pages, want exactly 10", fetched)
	}
	if len(c.skipped(airlock.ReasonLimit)) == 0 {
		t.Errorf("no URL skipped for the limit: %+v", c.sum.Skipped)
	}
}

func TestMaxPagesCountsOnlySuccesses(t *testing.T) {
	s := newSite(t, map[string]resp{
		"/":   page("root", "/d1", "/d2", "/d3", "/ok1", "/ok2", "/ok3"),
		"/d1": {status: 404}, "/d2": {status: 500}, "/d3": {status: 410},
		"/ok1": page("1"), "/ok2": page("2"), "/ok3": page("3"),
	})
	c := crawlSite(t, s, airlock.CrawlRequest{Seed: s.URL("/"), MaxPages: 3, Concurrency: 1})
	if c.sum.Pages != 3 || c.sum.Failed != 3 {
		t.Errorf("pages %d, failed %d; want 3 and 3", c.sum.Pages, c.sum.Failed)
	}
	if got := c.skipped(airlock.ReasonLimit); !slices.Equal(got, []string{s.URL("/ok3")}) {
		t.Errorf("skipped for the limit = %q, want /ok3", got)
	}
}

// TestPathFilters: include_paths and exclude_paths decide which
// discovered links and sitemap entries are followed; the seed is fetched
// whatever they say, and a left-out URL is skipped with reason path.
func TestPathFilters(t *testing.T) {
	s := newSite(t, map[string]resp{
		"/":               page("root", "/docs/a", "/docs/private/x", "/blog/b", "/about"),
		"/docs/a":         page("a", "/docs/b", "/blog/c"),
		"/docs/b":         page("b"),
		"/docs/private/x": page("x"),
		"/blog/b":         page("blog b"),
		"/blog/c":         page("blog c"),
		"/about":          page("about"),
	})
	c := crawlSite(t, s, airlock.CrawlRequest{Seed: s.URL("/"), Depth: Unlimited,
		IncludePaths: []string{"^/docs/"}, ExcludePaths: []string{"/private/"}})
	var got []string
	for _, p := range c.pages {
		got = append(got, strings.TrimPrefix(p.URL, s.URL("")))
	}
	slices.Sort(got)
	if want := []string{"/", "/docs/a", "/docs/b"}; !slices.Equal(got, want) {
		t.Errorf("pages = %q, want %q", got, want)
	}
	skipped := c.skipped(airlock.ReasonPath)
	slices.Sort(skipped)
	want := []string{s.URL("/about"), s.URL("/blog/b"), s.URL("/blog/c"), s.URL("/docs/private/x")}
	if !slices.Equal(skipped, want) {
		t.Errorf("skipped for path = %q, want %q", skipped, want)
	}
	for _, p := range s.paths() {
		if strings.HasPrefix(p, "/blog/") || p == "/about" || strings.Contains(p, "private") {
			t.Errorf("%s was fetched though the path filters leave it out", p)
		}
	}
}

// TestExternal: with External, links to other hosts are followed (each
// fetch still goes through the Doer, which decides it).
func TestExternal(t *testing.T) {
	s := newSite(t, map[string]resp{
		"www.site.test/":      page("www", "http://other.test/", "/local"),
		"www.site.test/local": page("local"),
		"other.test/":         page("other", "/more"),
		"other.test/more":     page("more"),
	})
	d := newDoer(s, "www.site.test", "other.test")
	defer d.close()
	for _, external := range []bool{false, true} {
		c := crawlWith(t, t.Context(), Config{Doer: d}, airlock.CrawlRequest{Seed: "http://www.site.test/", External: external})
		if c.err != nil {
			t.Fatal(c.err)
		}
		got := c.urls()
		slices.Sort(got)
		want := []string{"http://www.site.test/", "http://www.site.test/local"}
		if external {
			want = []string{"http://other.test/", "http://other.test/more", "http://www.site.test/", "http://www.site.test/local"}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("external %v: pages (-want +got):\n%s", external, diff)
		}
	}
}

func TestScope(t *testing.T) {
	pages := map[string]resp{
		"www.site.test/": page("www", "http://blog.site.test/", "http://site.test/", "http://evil-site.test/",
			"http://other.test/", "mailto:me@site.test", "javascript:void(0)", "/local", "HTTP://WWW.SITE.TEST:80/local#x"),
		"www.site.test/local":   page("local"),
		"blog.site.test/":       page("blog", "/post"),
		"blog.site.test/post":   page("post"),
		"site.test/":            page("apex"),
		"evil-site.test/":       page("evil"),
		"other.test/":           page("other"),
		"www.site.test/moved":   {to: "http://other.test/"},
		"www.site.test/inscope": {to: "/local"},
	}
	names := []string{"www.site.test", "blog.site.test", "site.test", "evil-site.test", "other.test"}
	tests := []struct {
		name       string
		subdomains bool
		want       []string
		offHost    []string
	}{
		{
			name: "same host", want: []string{"http://www.site.test/", "http://www.site.test/local"},
			offHost: []string{"http://blog.site.test/", "http://evil-site.test/", "http://other.test/", "http://site.test/"},
		},
		{
			name: "subdomains", subdomains: true,
			want:    []string{"http://blog.site.test/", "http://blog.site.test/post", "http://site.test/", "http://www.site.test/", "http://www.site.test/local"},
			offHost: []string{"http://evil-site.test/", "http://other.test/"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newSite(t, pages)
			d := newDoer(s, names...)
			defer d.close()
			c := crawlWith(t, t.Context(), Config{Doer: d}, airlock.CrawlRequest{Seed: "http://www.site.test/", Subdomains: tt.subdomains})
			if c.err != nil {
				t.Fatal(c.err)
			}
			got := c.urls()
			slices.Sort(got)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("pages (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.offHost, c.skipped(airlock.ReasonOffHost)); diff != "" {
				t.Errorf("off_host (-want +got):\n%s", diff)
			}
			for _, h := range s.hits() {
				if h.host == "other.test" || h.host == "evil-site.test" {
					t.Errorf("off-host request %s%s", h.host, h.path)
				}
			}
		})
	}

	t.Run("redirects", func(t *testing.T) {
		s := newSite(t, map[string]resp{
			"site.test/":            {to: "http://www.site.test/"},
			"www.site.test/":        page("www", "/moved", "/inscope", "/local"),
			"www.site.test/local":   page("local"),
			"www.site.test/moved":   {to: "http://other.test/"},
			"www.site.test/inscope": {to: "/local"},
			"other.test/":           page("other"),
		})
		d := newDoer(s, names...)
		defer d.close()
		c := crawlWith(t, t.Context(), Config{Doer: d}, airlock.CrawlRequest{Seed: "http://site.test/", Concurrency: 1})
		if c.err != nil {
			t.Fatal(c.err)
		}
		// The seed's redirect moves the crawl to www; /inscope lands on
		// /local, which is emitted once; /moved leaves the host.
		want := []string{"http://www.site.test/", "http://www.site.test/local"}
		if diff := cmp.Diff(want, c.urls()); diff != "" {
			t.Errorf("pages (-want +got):\n%s", diff)
		}
		if got := c.skipped(airlock.ReasonOffHost); !slices.Equal(got, []string{"http://www.site.test/moved"}) {
			t.Errorf("off_host = %q, want /moved", got)
		}
		if c.pages[0].RequestedURL != "http://site.test/" {
			t.Errorf("seed page requested_url = %q", c.pages[0].RequestedURL)
		}
	})
}

func TestDedupe(t *testing.T) {
	s := newSite(t, map[string]resp{
		"www.site.test/": page("root",
			"/a", "/a#frag", "/%61", "/./a", "/b/../a", "HTTP://WWW.SITE.TEST:80/a", "http://www.site.test./a",
			"/c?x=1", "/c?x=1#f", "/c?x=%7e", "/c?x=~", "/c?x=%2f", "/c?x=%2F", "/c?y=1&x=1", "/c?x=1&y=1", "/A"),
		"www.site.test/a":          page("a", "/a", "/"),
		"www.site.test/A":          page("A"),
		"www.site.test/c?x=1":      page("c1"),
		"www.site.test/c?x=~":      page("c~"),
		"www.site.test/c?x=%2F":    page("c/"),
		"www.site.test/c?y=1&x=1":  page("yx"),
		"www.site.test/c?x=1&y=1":  page("xy"),
		"www.site.test/robots.txt": {status: 404},
	})
	d := newDoer(s, "www.site.test")
	defer d.close()
	c := crawlWith(t, t.Context(), Config{Doer: d}, airlock.CrawlRequest{Seed: "http://WWW.Site.Test/#top", MaxPages: 100})
	if c.err != nil {
		t.Fatal(c.err)
	}
	counts := map[string]int{}
	for _, p := range s.paths() {
		counts[p]++
	}
	want := map[string]int{"/robots.txt": 1, "/": 1, "/a": 1, "/A": 1, "/c?x=1": 1, "/c?x=~": 1, "/c?x=%2F": 1, "/c?y=1&x=1": 1, "/c?x=1&y=1": 1}
	if diff := cmp.Diff(want, counts); diff != "" {
		t.Errorf("requests per path (-want +got):\n%s", diff)
	}
	if c.sum.Pages != 8 {
		t.Errorf("pages = %d, want 8", c.sum.Pages)
	}
}

func TestRobots(t *testing.T) {
	tests := []struct {
		name    string
		robots  resp
		ignore  bool
		want    []string // pages
		blocked []string // skipped for robots
	}{
		{
			name:    "disallow",
			robots:  resp{body: "User-agent: *\nDisallow: /private\n", ctype: "text/plain"},
			want:    []string{"/", "/public"},
			blocked: []string{"/private/x"},
		},
		{
			name:    "our group wins over *",
			robots:  resp{body: "User-agent: *\nDisallow: /\n\nUser-agent: Airlock/1.0\nDisallow: /public\n", ctype: "text/plain"},
			want:    []string{"/", "/private/x"},
			blocked: []string{"/public"},
		},
		{
			name:   "another agent's group does not apply",
			robots: resp{body: "User-agent: otherbot\nDisallow: /\n", ctype: "text/plain"},
			want:   []string{"/", "/private/x", "/public"},
		},
		{name: "404 allows all", robots: resp{status: 404}, want: []string{"/", "/private/x", "/public"}},
		{name: "403 allows all", robots: resp{status: 403}, want: []string{"/", "/private/x", "/public"}},
		{name: "503 disallows all", robots: resp{status: 503}, blocked: []string{"/"}},
		{name: "429 disallows all", robots: resp{status: 429}, blocked: []string{"/"}},
		{
			name:   "ignored",
			robots: resp{body: "User-agent: *\nDisallow: /\n", ctype: "text/plain"}, ignore: true,
			want: []string{"/", "/private/x", "/public"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newSite(t, map[string]resp{
				"/robots.txt": tt.robots,
				"/":           page("root", "/private/x", "/public"),
				"/private/x":  page("x"),
				"/public":     page("public"),
			})
			c := crawlSite(t, s, airlock.CrawlRequest{Seed: s.URL("/"), IgnoreRobots: tt.ignore})
			var want, blocked []string
			for _, p := range tt.want {
				want = append(want, s.URL(p))
			}
			for _, p := range tt.blocked {
				blocked = append(blocked, s.URL(p))
			}
			got := c.urls()
			slices.Sort(got)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("pages (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(blocked, c.skipped(airlock.ReasonRobots)); diff != "" {
				t.Errorf("skipped for robots (-want +got):\n%s", diff)
			}
			for _, h := range s.hits() {
				if tt.ignore && h.path == "/robots.txt" {
					t.Error("robots.txt fetched although ignored")
				}
				if slices.Contains(tt.blocked, h.path) {
					t.Errorf("disallowed %s fetched", h.path)
				}
				if h.ua != UserAgent("dev") {
					t.Errorf("User-Agent = %q", h.ua)
				}
			}
			if tt.ignore {
				return
			}
			if n := s.count("/robots.txt"); n != 1 {
				t.Errorf("robots.txt fetched %d times, want once", n)
			}
		})
	}
}

func TestRobotsUnreachable(t *testing.T) {
	s := newSite(t, map[string]resp{"/": page("root")})
	d := newDoer(s)
	defer d.close()
	d.fail = func(u string) error {
		if strings.HasSuffix(u, "/robots.txt") {
			return airlock.Errorf(airlock.CodeUpstream, "connect", "connection refused")
		}
		return nil
	}
	c := crawlWith(t, t.Context(), Config{Doer: d}, airlock.CrawlRequest{Seed: s.URL("/")})
	if c.err != nil {
		t.Fatal(c.err)
	}
	if c.sum.Pages != 0 || len(c.sum.Skipped) != 1 || c.sum.Skipped[0].Reason != airlock.ReasonRobots ||
		!strings.Contains(c.sum.Skipped[0].Detail, "unreachable") {
		t.Errorf("summary = %+v, want the seed skipped: robots unreachable", c.sum)
	}
}

func TestRobotsCap(t *testing.T) {
	body := "User-agent: *\nDisallow: /early\n" + strings.Repeat("# filler filler filler filler filler\n", MaxRobotsBytes/36) + "Disallow: /late\n"
	if len(body) <= MaxRobotsBytes {
		t.Fatal("robots.txt not past the cap")
	}
	s := newSite(t, map[string]resp{
		"/robots.txt": {body: body, ctype: "text/plain"},
		"/":           page("root", "/early", "/late"),
		"/early":      page("early"),
		"/late":       page("late"),
	})
	c := crawlSite(t, s, airlock.CrawlRequest{Seed: s.URL("/")})
	if got := c.skipped(airlock.ReasonRobots); !slices.Equal(got, []string{s.URL("/early")}) {
		t.Errorf("skipped for robots = %q, want only /early (rules past 500 KiB are ignored)", got)
	}
	if c.sum.Pages != 2 {
		t.Errorf("pages = %d, want 2", c.sum.Pages)
	}
}

func TestRobotsCacheShared(t *testing.T) {
	s := newSite(t, map[string]resp{"/robots.txt": {body: "User-agent: *\nDisallow: /x\n"}, "/": page("root")})
	d := newDoer(s)
	defer d.close()
	cfg := Config{Doer: d, Robots: NewRobotsCache(0)}
	for range 3 {
		if c := crawlWith(t, t.Context(), cfg, airlock.CrawlRequest{Seed: s.URL("/")}); c.err != nil || c.sum.Pages != 1 {
			t.Fatalf("crawl = %+v, %v", c.sum, c.err)
		}
	}
	if n := s.count("/robots.txt"); n != 1 {
		t.Errorf("robots.txt fetched %d times over 3 crawls, want once", n)
	}
}

func TestCrawlDelay(t *testing.T) {
	const delay = 200 * time.Millisecond
	s := newSite(t, map[string]resp{
		"/robots.txt": {body: "User-agent: *\nCrawl-delay: 0.2\n", ctype: "text/plain"},
		"/":           page("root", "/1", "/2", "/3"),
		"/1":          page("1"), "/2": page("2"), "/3": page("3"),
	})
	c := crawlSite(t, s, airlock.CrawlRequest{Seed: s.URL("/"), PerHostConcurrency: 4})
	if c.sum.Pages != 4 {
		t.Fatalf("pages = %d, want 4", c.sum.Pages)
	}
	hits := s.hits()
	if len(hits) != 5 {
		t.Fatalf("requests = %d, want 5", len(hits))
	}
	// Lower bounds only: the server sees requests a little after they
	// start, so allow a margin below the delay.
	for i := 1; i < len(hits); i++ {
		if gap := hits[i].at.Sub(hits[i-1].at); gap < delay*3/4 {
			t.Errorf("gap between %s and %s = %v, want about %v or more", hits[i-1].path, hits[i].path, gap, delay)
		}
	}
	if p := s.peak.Load(); p != 1 {
		t.Errorf("peak concurrency = %d, want 1 under a crawl-delay", p)
	}
}

func TestPerHostConcurrency(t *testing.T) {
	var links []string
	pages := map[string]resp{}
	for i := range 30 {
		p := fmt.Sprintf("/%d", i)
		links = append(links, p)
		pages[p] = resp{body: pageHTML(p, ""), sleep: 20 * time.Millisecond}
	}
	pages["/"] = page("root", links...)
	for _, perHost := range []int{1, 2, 3} {
		t.Run(fmt.Sprint(perHost), func(t *testing.T) {
			s := newSite(t, pages)
			c := crawlSite(t, s, airlock.CrawlRequest{Seed: s.URL("/"), Concurrency: 8, PerHostConcurrency: perHost, MaxPages: 100})
			if c.sum.Pages != 31 {
				t.Fatalf("pages = %d, want 31", c.sum.Pages)
			}
			if p := s.peak.Load(); p > int32(perHost) {
				t.Errorf("peak in flight = %d, want at most %d", p, perHost)
			}
		})
	}

	t.Run("list over hosts", func(t *testing.T) {
		hosts := []string{"a.test", "b.test", "c.test", "d.test"}
		s := newSite(t, pages)
		d := newDoer(s, hosts...)
		defer d.close()
		var urls []string
		for _, h := range hosts {
			for i := range 8 {
				urls = append(urls, fmt.Sprintf("http://%s/%d", h, i))
			}
		}
		c := crawlWith(t, t.Context(), Config{Doer: d}, airlock.CrawlRequest{URLs: urls, Concurrency: 5, PerHostConcurrency: 2})
		if c.err != nil || c.sum.Pages != len(urls) {
			t.Fatalf("crawl = %+v, %v; want %d pages", c.sum, c.err, len(urls))
		}
		if p := s.peak.Load(); p > 5 {
			t.Errorf("peak in flight = %d, want at most 5", p)
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		for h, ph := range s.perHost {
			if ph[1] > 2 {
				t.Errorf("peak in flight on %s = %d, want at most 2", h, ph[1])
			}
		}
	})
}

func TestNoIndexNoFollow(t *testing.T) {
	s := newSite(t, map[string]resp{
		"/":               page("root", "/noindex", "/nofollow", "/none", "/hdr", "/hdr-other-bot", "/hdr-us", "/hdr-mixed"),
		"/noindex":        {body: pageHTML("noindex", `<meta name="robots" content="noindex">`, "/from-noindex")},
		"/nofollow":       {body: pageHTML("nofollow", `<meta name="robots" content="nofollow">`, "/from-nofollow")},
		"/none":           {body: pageHTML("none", `<meta name="robots" content="none">`, "/from-none")},
		"/hdr":            {body: pageHTML("hdr", ""), header: map[string]string{"X-Robots-Tag": "noindex"}},
		"/hdr-other-bot":  {body: pageHTML("other", ""), header: map[string]string{"X-Robots-Tag": "otherbot: noindex, nofollow"}},
		"/hdr-us":         {body: pageHTML("us", "", "/from-hdr-us"), header: map[string]string{"X-Robots-Tag": "airlock: nofollow"}},
		"/hdr-mixed":      {body: pageHTML("mixed", "", "/from-hdr-mixed"), header: map[string]string{"X-Robots-Tag": "otherbot: noindex, airlock: nofollow"}},
		"/from-hdr-mixed": page("from hdr mixed"),
		"/from-noindex":   page("from noindex"),
		"/from-nofollow":  page("from nofollow"),
		"/from-none":      page("from none"),
		"/from-hdr-us":    page("from hdr"),
	})
	c := crawlSite(t, s, airlock.CrawlRequest{Seed: s.URL("/"), MaxPages: 100})
	var want []string
	for _, p := range []string{"/", "/from-noindex", "/hdr-mixed", "/hdr-other-bot", "/hdr-us", "/nofollow"} {
		want = append(want, s.URL(p))
	}
	got := c.urls()
	slices.Sort(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("pages (-want +got):\n%s", diff)
	}
	for _, p := range []string{"/from-nofollow", "/from-none", "/from-hdr-us", "/from-hdr-mixed"} {
		if s.count(p) != 0 {
			t.Errorf("%s fetched: its only link was nofollow", p)
		}
	}
}

func gz(t *testing.T, s string) string {
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	w.Write([]byte(s))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestSitemap(t *testing.T) {
	urlset := func(locs ...string) string {
		var b strings.Builder
		b.WriteString(`<?xml version="1.0" encoding="UTF-8"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">`)
		for _, l := range locs {
			fmt.Fprintf(&b, "<url><loc>\n  %s\n</loc><lastmod>2024-01-01</lastmod></url>", l)
		}
		return b.String() + "</urlset>"
	}
	index := func(locs ...string) string {
		var b strings.Builder
		b.WriteString(`<?xml version="1.0" encoding="UTF-8"?><sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">`)
		for _, l := range locs {
			fmt.Fprintf(&b, "<sitemap><loc>%s</loc></sitemap>", l)
		}
		return b.String() + "</sitemapindex>"
	}
	s := newSite(t, map[string]resp{"/": page("root")})
	u := s.URL
	s.pages["/robots.txt"] = resp{body: "User-agent: *\nDisallow: /blocked\nSitemap: " + u("/sm-index.xml") + "\n", ctype: "text/plain"}
	s.pages["/sm-index.xml"] = resp{body: index(u("/sm1.xml"), u("/sm2.xml.gz"), u("/sm-nested.xml")), ctype: "application/xml"}
	s.pages["/sm1.xml"] = resp{body: urlset(u("/s1"), u("/s2"), u("/blocked"), "http://127.0.0.2/elsewhere"), ctype: "application/xml"}
	s.pages["/sm2.xml.gz"] = resp{body: gz(t, urlset(u("/s3"))), ctype: "application/gzip"}
	s.pages["/sm-nested.xml"] = resp{body: index(u("/sm3.xml")), ctype: "application/xml"}
	s.pages["/sm3.xml"] = resp{body: urlset(u("/s5")), ctype: "application/xml"}
	s.pages["/sitemap.xml"] = resp{body: u("/s4") + "\n", ctype: "text/plain"} // a text sitemap
	for _, p := range []string{"/s1", "/s2", "/s3", "/s4", "/s5", "/blocked"} {
		s.pages[p] = page(p)
	}

	c := crawlSite(t, s, airlock.CrawlRequest{Seed: u("/"), Sitemap: true, MaxPages: 100})
	var want []string
	for _, p := range []string{"/", "/s1", "/s2", "/s3", "/s4"} {
		want = append(want, u(p))
	}
	got := c.urls()
	slices.Sort(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("pages (-want +got):\n%s", diff)
	}
	if s.count("/sm3.xml") != 0 {
		t.Error("a sitemap index inside an index was followed")
	}
	if got := c.skipped(airlock.ReasonRobots); !slices.Equal(got, []string{u("/blocked")}) {
		t.Errorf("skipped for robots = %q, want /blocked", got)
	}
	if got := c.skipped(airlock.ReasonOffHost); !slices.Equal(got, []string{"http://127.0.0.2/elsewhere"}) {
		t.Errorf("skipped off host = %q", got)
	}

	t.Run("off", func(t *testing.T) {
		s.mu.Lock()
		s.log = nil
		s.mu.Unlock()
		c := crawlSite(t, s, airlock.CrawlRequest{Seed: u("/"), MaxPages: 100})
		if c.sum.Pages != 1 {
			t.Errorf("pages = %d, want only the seed", c.sum.Pages)
		}
		for _, p := range s.paths() {
			if strings.Contains(p, "sitemap") || strings.HasPrefix(p, "/sm") {
				t.Errorf("sitemap %s fetched without the option", p)
			}
		}
	})
}

func TestSkipReasons(t *testing.T) {
	closed := newSite(t, nil)
	closed.srv.Close()
	s := newSite(t, map[string]resp{
		"/ok":      page("ok"),
		"/404":     {status: 404},
		"/500":     {status: 500},
		"/slow":    {hang: true},
		"/botwall": page("wall"),
		"/bin":     {body: "\x00\x01", ctype: "application/octet-stream"},
		"/limited": page("limited"),
	})
	d := newDoer(s, "denied.test")
	defer d.close()
	d.fail = func(u string) error {
		switch {
		case strings.HasPrefix(u, "http://denied.test/"):
			return airlock.Errorf(airlock.CodeDenied, "loopback", "egress: denied")
		case strings.HasSuffix(u, "/limited"):
			return airlock.Errorf(airlock.CodeRateLimited, "rate_limited", "slow down")
		}
		return nil
	}
	page := func(ctx context.Context, r *airlock.HTTPResponse, mode string) (Extracted, error) {
		if strings.HasSuffix(r.URL, "/botwall") {
			return Extracted{}, airlock.Errorf(airlock.CodeUpstream, "bot_wall", "captcha")
		}
		return linkPage(ctx, r, mode)
	}
	urls := []string{
		s.URL("/ok"), s.URL("/404"), s.URL("/500"), s.URL("/slow"), s.URL("/botwall"), s.URL("/bin"),
		s.URL("/limited"), "http://denied.test/x", closed.URL("/gone"), "ftp://x.test/", "not a url", s.URL("/ok#again"),
	}
	start := time.Now()
	c := crawlWith(t, t.Context(), Config{Doer: d, Page: page}, airlock.CrawlRequest{URLs: urls, Timeout: 300 * time.Millisecond})
	if c.err != nil {
		t.Fatal(c.err)
	}
	got := map[string]string{}
	for _, sk := range c.sum.Skipped {
		got[sk.URL] = string(sk.Reason)
	}
	want := map[string]string{
		s.URL("/404"):          string(airlock.ReasonHTTPStatus),
		s.URL("/500"):          string(airlock.ReasonHTTPStatus),
		s.URL("/slow"):         string(airlock.ReasonTimeout),
		s.URL("/botwall"):      string(airlock.ReasonBotWall),
		s.URL("/bin"):          string(airlock.ReasonType),
		s.URL("/limited"):      string(airlock.ReasonRateLimited),
		"http://denied.test/x": string(airlock.ReasonPolicy),
		closed.URL("/gone"):    string(airlock.ReasonRobots), // unreachable: robots.txt is too (RFC 9309 §2.3.1.4)
		"ftp://x.test/":        string(airlock.ReasonInvalid),
		"not a url":            string(airlock.ReasonInvalid),
		s.URL("/ok#again"):     string(airlock.ReasonDuplicate),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("skipped (-want +got):\n%s", diff)
	}
	if c.sum.Pages != 1 || c.sum.Failed != 7 {
		t.Errorf("pages %d, failed %d; want 1 and 7", c.sum.Pages, c.sum.Failed)
	}
	for _, sk := range c.sum.Skipped {
		if sk.URL == s.URL("/404") && sk.Detail != "404" || sk.URL == "http://denied.test/x" && !strings.HasPrefix(sk.Detail, "loopback") {
			t.Errorf("detail of %s = %q", sk.URL, sk.Detail)
		}
	}
	if el := time.Since(start); el > 10*time.Second {
		t.Errorf("crawl took %v", el)
	}

	t.Run("unreachable without robots", func(t *testing.T) {
		c := crawlWith(t, t.Context(), Config{Doer: d}, airlock.CrawlRequest{URLs: []string{closed.URL("/gone")}, IgnoreRobots: true})
		if c.err != nil || len(c.sum.Skipped) != 1 || c.sum.Skipped[0].Reason != airlock.ReasonError {
			t.Errorf("crawl = %+v, %v; want the URL skipped as error", c.sum, c.err)
		}
	})
}

func TestCancel(t *testing.T) {
	s := newSite(t, nil)
	s.gen = func(path string) (resp, bool) {
		var i int
		if _, err := fmt.Sscanf(path, "/p/%d", &i); err != nil {
			return resp{}, false
		}
		if i%7 == 6 {
			return resp{hang: true}, true
		}
		r := page("p", fmt.Sprintf("/p/%d", 3*i+1), fmt.Sprintf("/p/%d", 3*i+2), fmt.Sprintf("/p/%d", 3*i+3))
		r.sleep = 10 * time.Millisecond
		return r, true
	}
	d := newDoer(s)
	defer d.close()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var mu sync.Mutex
	var canceledAt time.Time
	n := 0
	sum, err := Run(ctx, Config{Doer: d, Page: linkPage}, airlock.CrawlRequest{Seed: s.URL("/p/0"), Depth: Unlimited, MaxPages: 1 << 20}, func(*airlock.Page) error {
		mu.Lock()
		defer mu.Unlock()
		n++
		if n == 5 {
			cancel()
			canceledAt = time.Now()
		}
		return nil
	}, nil)
	returned := time.Since(canceledAt)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Run() error = %v, want context.Canceled", err)
	}
	if sum == nil || sum.Stopped != StoppedCanceled || sum.Pages != 5 || n != 5 {
		t.Fatalf("summary = %+v (emitted %d), want stopped canceled after 5 pages", sum, n)
	}
	if returned > 5*time.Second {
		t.Errorf("Run returned %v after the cancel", returned)
	}
	for _, sk := range sum.Skipped {
		if sk.Reason == airlock.ReasonTimeout || sk.Reason == airlock.ReasonError {
			t.Errorf("in-flight URL blamed for the cancel: %+v", sk)
		}
	}
}

func TestStops(t *testing.T) {
	s := chainSite(t, 100, 0)
	t.Run("revoked", func(t *testing.T) {
		d := newDoer(s)
		defer d.close()
		var calls int
		var mu sync.Mutex
		d.fail = func(string) error {
			mu.Lock()
			defer mu.Unlock()
			if calls++; calls > 4 {
				return airlock.Errorf(airlock.CodeRevoked, "revoked", "principal revoked")
			}
			return nil
		}
		c := crawlWith(t, t.Context(), Config{Doer: d}, airlock.CrawlRequest{Seed: s.URL("/p/0"), Depth: Unlimited, MaxPages: 100, Concurrency: 1})
		if airlock.CodeOf(c.err) != airlock.CodeRevoked || c.sum == nil || c.sum.Stopped != StoppedRevoked {
			t.Fatalf("crawl = %+v, %v; want stopped revoked", c.sum, c.err)
		}
		if c.sum.Pages != 3 {
			t.Errorf("pages = %d, want 3 (robots.txt and 3 pages before the revocation)", c.sum.Pages)
		}
		for _, sk := range c.sum.Skipped {
			if strings.Contains(sk.Detail, "revoked") {
				t.Errorf("revoked URL listed as skipped: %+v", sk)
			}
		}
	})
	t.Run("revoked through the context", func(t *testing.T) {
		d := newDoer(s)
		defer d.close()
		ctx, cancel := context.WithCancelCause(t.Context())
		defer cancel(nil)
		revoked := airlock.Errorf(airlock.CodeRevoked, "revoked", "principal revoked")
		sum, err := Run(ctx, Config{Doer: d, Page: linkPage}, airlock.CrawlRequest{Seed: s.URL("/p/0"), Depth: Unlimited, MaxPages: 100},
			func(*airlock.Page) error { cancel(revoked); return nil }, nil)
		if !errors.Is(err, revoked) || sum.Stopped != StoppedRevoked || sum.Pages != 1 {
			t.Fatalf("crawl = %+v, %v; want stopped revoked after one page", sum, err)
		}
	})
	t.Run("emit error", func(t *testing.T) {
		d := newDoer(s)
		defer d.close()
		boom := errors.New("disk full")
		n := 0
		sum, err := Run(t.Context(), Config{Doer: d, Page: linkPage}, airlock.CrawlRequest{Seed: s.URL("/p/0"), Depth: Unlimited, MaxPages: 100},
			func(*airlock.Page) error {
				if n++; n == 2 {
					return boom
				}
				return nil
			}, nil)
		if !errors.Is(err, boom) || sum.Stopped != StoppedEmit || sum.Pages != 1 {
			t.Fatalf("crawl = %+v, %v; want stopped by emit after one page", sum, err)
		}
	})
	t.Run("deadline", func(t *testing.T) {
		slow := chainSite(t, 1000, 30*time.Millisecond)
		d := newDoer(slow)
		defer d.close()
		ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
		defer cancel()
		c := crawlWith(t, ctx, Config{Doer: d}, airlock.CrawlRequest{Seed: slow.URL("/p/0"), Depth: Unlimited, MaxPages: 1000})
		if !errors.Is(c.err, context.DeadlineExceeded) || c.sum.Stopped != StoppedTimeout {
			t.Fatalf("crawl = %+v, %v; want stopped by the deadline", c.sum, c.err)
		}
	})
	t.Run("store error", func(t *testing.T) {
		d := newDoer(s)
		defer d.close()
		boom := errors.New("redis down")
		c := crawlWith(t, t.Context(), Config{Doer: d, Seen: &failingSeen{after: 3, err: boom}},
			airlock.CrawlRequest{Seed: s.URL("/p/0"), Depth: Unlimited, MaxPages: 100})
		if !errors.Is(c.err, boom) || c.sum.Stopped != StoppedStore {
			t.Fatalf("crawl = %+v, %v; want stopped by the store", c.sum, c.err)
		}
	})
}

type failingSeen struct {
	mu    sync.Mutex
	n     int
	after int
	err   error
}

func (f *failingSeen) Add(ctx context.Context, key string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n++; f.n > f.after {
		return false, f.err
	}
	return true, nil
}

func TestProgress(t *testing.T) {
	s := chainSite(t, 30, 25*time.Millisecond)
	c := crawlSite(t, s, airlock.CrawlRequest{Seed: s.URL("/p/0"), Depth: Unlimited, MaxPages: 30, PerHostConcurrency: 1})
	if len(c.progress) < 2 {
		t.Fatalf("progress events = %d, want several", len(c.progress))
	}
	last := c.progress[len(c.progress)-1]
	if last.Done != 30 || last.Queued != 0 || last.Failed != 0 || last.PagesPerS <= 0 {
		t.Errorf("last progress = %+v, want done 30", last)
	}
	// Events are at least ProgressInterval apart when emitted; the test
	// stamps them when its callback runs, which a loaded machine (and the
	// race detector) may delay for one event and not the next: only a gap
	// under half the interval shows events that were not rate-limited.
	for i := 1; i < len(c.at)-1; i++ {
		if gap := c.at[i].Sub(c.at[i-1]); gap < ProgressInterval/2 {
			t.Errorf("progress events %d and %d %v apart, want about %v", i-1, i, gap, ProgressInterval)
		}
	}
}

func TestSkippedCap(t *testing.T) {
	old := maxSkipped
	maxSkipped = 5
	defer func() { maxSkipped = old }()
	var links []string
	for i := range 20 {
		links = append(links, fmt.Sprintf("http://127.0.0.%d/", i+2))
	}
	s := newSite(t, map[string]resp{"/": page("root", links...)})
	c := crawlSite(t, s, airlock.CrawlRequest{Seed: s.URL("/")})
	if len(c.sum.Skipped) != 6 {
		t.Fatalf("skipped = %d entries, want 5 and a truncation mark", len(c.sum.Skipped))
	}
	if last := c.sum.Skipped[5]; last.Reason != airlock.ReasonTruncated || !strings.HasPrefix(last.Detail, "15 more") {
		t.Errorf("last entry = %+v, want 15 more truncated", last)
	}
}

func TestInvalidRequests(t *testing.T) {
	d := &httpDoer{}
	tests := []struct {
		name string
		cfg  Config
		req  airlock.CrawlRequest
	}{
		{name: "no doer", cfg: Config{Page: linkPage}, req: airlock.CrawlRequest{Seed: "http://a.test/"}},
		{name: "no page func", cfg: Config{Doer: d}, req: airlock.CrawlRequest{Seed: "http://a.test/"}},
		{name: "nothing to crawl", cfg: Config{Doer: d, Page: linkPage}},
		{name: "seed and list", cfg: Config{Doer: d, Page: linkPage}, req: airlock.CrawlRequest{Seed: "http://a.test/", URLs: []string{"http://b.test/"}}},
		{name: "bad seed", cfg: Config{Doer: d, Page: linkPage}, req: airlock.CrawlRequest{Seed: "ftp://a.test/"}},
		{name: "depth", cfg: Config{Doer: d, Page: linkPage}, req: airlock.CrawlRequest{Seed: "http://a.test/", Depth: -2}},
		{name: "max pages", cfg: Config{Doer: d, Page: linkPage}, req: airlock.CrawlRequest{Seed: "http://a.test/", MaxPages: -1}},
		{name: "extract", cfg: Config{Doer: d, Page: linkPage}, req: airlock.CrawlRequest{Seed: "http://a.test/", Extract: "some"}},
		{name: "include pattern", cfg: Config{Doer: d, Page: linkPage}, req: airlock.CrawlRequest{Seed: "http://a.test/", IncludePaths: []string{"^/docs/("}}},
		{name: "exclude pattern", cfg: Config{Doer: d, Page: linkPage}, req: airlock.CrawlRequest{Seed: "http://a.test/", ExcludePaths: []string{"[z-a]"}}},
		{name: "too many patterns", cfg: Config{Doer: d, Page: linkPage}, req: airlock.CrawlRequest{Seed: "http://a.test/", ExcludePaths: make([]string, MaxPathPatterns+1)}},
		{name: "long pattern", cfg: Config{Doer: d, Page: linkPage}, req: airlock.CrawlRequest{Seed: "http://a.test/", IncludePaths: []string{strings.Repeat("a", MaxPathPatternLn+1)}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sum, err := Run(t.Context(), tt.cfg, tt.req, nil, nil)
			if sum != nil || airlock.CodeOf(err) != airlock.CodeInvalid {
				t.Errorf("Run() = %v, %v; want an invalid error", sum, err)
			}
			if d.calls.Load() != 0 {
				t.Error("an invalid request reached the Doer")
			}
		})
	}
}

func TestExtractModeAndHeaders(t *testing.T) {
	s := newSite(t, map[string]resp{"/": page("root")})
	d := newDoer(s)
	defer d.close()
	var mu sync.Mutex
	var modes []string
	var tls []string
	rec := doerFunc(func(ctx context.Context, req *airlock.HTTPRequest) (*airlock.HTTPResponse, error) {
		mu.Lock()
		tls = append(tls, req.TLSProfile)
		mu.Unlock()
		return d.Do(ctx, req)
	})
	pf := func(ctx context.Context, r *airlock.HTTPResponse, mode string) (Extracted, error) {
		mu.Lock()
		modes = append(modes, mode)
		mu.Unlock()
		return linkPage(ctx, r, mode)
	}
	for _, tt := range []struct{ extract, tls, wantMode, wantTLS string }{
		{"", "", airlock.ExtractFull, DefaultTLSProfile},
		{airlock.ExtractNone, "chrome", airlock.ExtractNone, "chrome"},
	} {
		modes, tls = nil, nil
		c := crawlWith(t, t.Context(), Config{Doer: rec, Page: pf}, airlock.CrawlRequest{Seed: s.URL("/"), Extract: tt.extract, TLSProfile: tt.tls})
		if c.err != nil {
			t.Fatal(c.err)
		}
		if !slices.Equal(modes, []string{tt.wantMode}) {
			t.Errorf("modes = %q, want %q", modes, tt.wantMode)
		}
		for _, p := range tls {
			if p != tt.wantTLS {
				t.Errorf("TLS profile = %q, want %q", p, tt.wantTLS)
			}
		}
	}
}

type doerFunc func(ctx context.Context, req *airlock.HTTPRequest) (*airlock.HTTPResponse, error)

func (f doerFunc) Do(ctx context.Context, req *airlock.HTTPRequest) (*airlock.HTTPResponse, error) {
	return f(ctx, req)
}

func TestBoundedFrontier(t *testing.T) {
	s := newSite(t, map[string]resp{"/": page("root", "/1", "/2", "/3", "/4"), "/1": page("1"), "/2": page("2")})
	d := newDoer(s)
	defer d.close()
	c := crawlWith(t, t.Context(), Config{Doer: d, Frontier: NewMemoryFrontier(2)}, airlock.CrawlRequest{Seed: s.URL("/")})
	if c.err != nil {
		t.Fatal(c.err)
	}
	if c.sum.Pages != 3 || !slices.Equal(c.skipped(airlock.ReasonLimit), []string{s.URL("/3"), s.URL("/4")}) {
		t.Errorf("summary = %+v; want 3 pages, /3 and /4 refused by the full frontier", c.sum)
	}
}
