package crawl

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestRobotsRules(t *testing.T) {
	tests := []struct {
		name     string
		robots   string
		allow    []string
		disallow []string
	}{
		{
			name:     "longest match, allow wins ties",
			robots:   "User-agent: *\nDisallow: /a\nAllow: /a/b\nDisallow: /a/b/c\nAllow: /x\nDisallow: /x\n",
			allow:    []string{"/", "/a/b", "/a/bz", "/x"},
			disallow: []string{"/a", "/a/z", "/a/b/c/d"},
		},
		{
			name:     "wildcards and end anchor",
			robots:   "User-agent: *\nDisallow: /*.pdf$\nDisallow: /search?*q=\n",
			allow:    []string{"/a.pdf?x=1", "/search"},
			disallow: []string{"/a.pdf", "/d/b.pdf", "/search?lang=en&q=x"},
		},
		{
			name:     "percent-encoding: ~ and %7E are one character (RFC 9309 §2.2.2)",
			robots:   "User-agent: *\nDisallow: /~joe\nDisallow: /%7ebob\nDisallow: /caf%C3%A9\nDisallow: /a%2Fb\nDisallow: /über/%2f1\n",
			allow:    []string{"/a/b", "/joe", "/über/1"},
			disallow: []string{"/~joe/x", "/%7Ejoe/x", "/~bob", "/%7ebob", "/café", "/caf%c3%a9", "/a%2fb", "/über/%2F1", "/%C3%BCber/%2f1"},
		},
		{
			name:     "our group, matched by product token",
			robots:   "User-agent: googlebot\nDisallow: /\n\nUser-agent: *\nDisallow: /\n\nUser-agent: AIRLOCK/2.0\nDisallow: /private\n",
			allow:    []string{"/", "/public"},
			disallow: []string{"/private"},
		},
		{
			name:     "groups of the same agent merge; a group may name several",
			robots:   "User-agent: a\nUser-agent: airlock\nDisallow: /one\n\nUser-agent: airlock\nDisallow: /two\n",
			allow:    []string{"/three"},
			disallow: []string{"/one", "/two"},
		},
		{
			name:   "an empty group of ours opens everything",
			robots: "User-agent: *\nDisallow: /\n\nUser-agent: airlock\nDisallow:\n",
			allow:  []string{"/", "/x"},
		},
		{
			name:   "another agent's rules do not apply",
			robots: "User-agent: otherbot\nDisallow: /\n",
			allow:  []string{"/", "/x"},
		},
		{
			name:     "rules before any user-agent are ignored; typos tolerated",
			robots:   "Disallow: /early\nuser-agent: *\ndisalow: /typo\n",
			allow:    []string{"/early"},
			disallow: []string{"/typo"},
		},
		{
			name:     "crawl-delay and sitemap lines do not split a group",
			robots:   "User-agent: *\nCrawl-delay: 3\nSitemap: http://a.test/s.xml\nUser-agent: airlock\nDisallow: /both\n",
			disallow: []string{"/both"},
		},
		{
			name:     "robots.txt itself is always allowed",
			robots:   "User-agent: *\nDisallow: /\n",
			allow:    []string{"/robots.txt"},
			disallow: []string{"/", "/robots.txt.bak"},
		},
		{
			name:     "comments, CRLF and a BOM",
			robots:   "\xef\xbb\xbfUser-agent: * # all\r\nDisallow: /c # not this\r\n",
			allow:    []string{"/d"},
			disallow: []string{"/c"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := parseRobots([]byte(tt.robots), time.Now())
			check := func(p string, want bool) {
				n, err := Normalize("http://a.test" + p)
				if err != nil {
					t.Fatal(err)
				}
				u, _ := url.Parse(n)
				if got := r.allowed(u); got != want {
					t.Errorf("allowed(%q) = %v, want %v (rules %q)", p, got, want, r.body)
				}
			}
			for _, p := range tt.allow {
				check(p, true)
			}
			for _, p := range tt.disallow {
				check(p, false)
			}
		})
	}
}

func TestRobotsDelayAndSitemaps(t *testing.T) {
	tests := []struct {
		name     string
		robots   string
		delay    time.Duration
		sitemaps []string
	}{
		{name: "none", robots: "User-agent: *\nDisallow: /x\n"},
		{name: "global", robots: "User-agent: *\nCrawl-delay: 2\n", delay: 2 * time.Second},
		{name: "fraction", robots: "User-agent: *\nCrawl-delay: 0.5\n", delay: 500 * time.Millisecond},
		{name: "ours over global", robots: "User-agent: *\nCrawl-delay: 9\n\nUser-agent: airlock\nCrawl-delay: 1\nDisallow: /x\n", delay: time.Second},
		{name: "ours without delay", robots: "User-agent: *\nCrawl-delay: 9\n\nUser-agent: airlock\nDisallow: /x\n"},
		{name: "another agent's", robots: "User-agent: slowbot\nCrawl-delay: 9\n"},
		{name: "capped", robots: "User-agent: *\nCrawl-delay: 86400\n", delay: MaxCrawlDelay},
		{name: "junk", robots: "User-agent: *\nCrawl-delay: soon\nCrawl-delay: -1\nCrawl-delay: NaN\n"},
		{
			name:     "sitemaps anywhere",
			robots:   "Sitemap: http://a.test/1.xml\nUser-agent: *\nDisallow:\nsitemap: http://a.test/2.xml\n",
			sitemaps: []string{"http://a.test/1.xml", "http://a.test/2.xml"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := parseRobots([]byte(tt.robots), time.Now())
			if r.delay != tt.delay {
				t.Errorf("delay = %v, want %v", r.delay, tt.delay)
			}
			if diff := cmp.Diff(tt.sitemaps, r.sitemaps); diff != "" {
				t.Errorf("sitemaps (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRobotsStatus(t *testing.T) {
	now := time.Now()
	for _, tt := range []struct {
		status int
		want   robotsVerdict
		ttl    time.Duration
	}{
		{200, robotsRules, DefaultRobotsTTL},
		{204, robotsRules, DefaultRobotsTTL},
		{400, robotsAllowAll, DefaultRobotsTTL},
		{401, robotsAllowAll, DefaultRobotsTTL},
		{404, robotsAllowAll, DefaultRobotsTTL},
		{429, robotsDisallowAll, RobotsRetryTTL},
		{499, robotsAllowAll, DefaultRobotsTTL},
		{500, robotsDisallowAll, RobotsRetryTTL},
		{503, robotsDisallowAll, RobotsRetryTTL},
		{304, robotsDisallowAll, RobotsRetryTTL},
	} {
		r := robotsFromStatus(tt.status, nil, now)
		if r.verdict != tt.want || r.expires != now.Add(tt.ttl) {
			t.Errorf("status %d: verdict %v, expires in %v; want %v, %v", tt.status, r.verdict, r.expires.Sub(now), tt.want, tt.ttl)
		}
	}
}

func TestRobotsCompactedBodyIsSmall(t *testing.T) {
	var b strings.Builder
	for i := range 2000 {
		b.WriteString("User-agent: bot" + string(rune('a'+i%26)) + "\nDisallow: /private/" + strings.Repeat("x", 40) + "\n\n")
	}
	b.WriteString("User-agent: *\nDisallow: /secret\n")
	r := parseRobots([]byte(b.String()), time.Now())
	if r.body != "user-agent: *\ndisallow: /secret\n" {
		t.Errorf("compacted rules = %q", r.body)
	}
}

func TestRobotsCache(t *testing.T) {
	now := time.Now()
	c := NewRobotsCache(2)
	r := &robots{verdict: robotsAllowAll, expires: now.Add(time.Hour), cache: true}
	c.put("http://a.test", r, now)
	if c.get("http://a.test", now) != r {
		t.Fatal("entry not cached")
	}
	if c.get("http://a.test", now.Add(time.Hour)) != nil {
		t.Error("expired entry returned")
	}
	c.put("http://b.test", &robots{expires: now.Add(time.Hour)}, now) // not cacheable (a policy verdict)
	if c.get("http://b.test", now) != nil {
		t.Error("uncacheable entry cached")
	}
	for _, o := range []string{"http://c.test", "http://d.test", "http://e.test"} {
		c.put(o, r, now)
	}
	if n := len(c.m); n > 2 {
		t.Errorf("cache holds %d entries, want at most 2", n)
	}
	var nilCache *RobotsCache
	nilCache.put("http://a.test", r, now)
	if nilCache.get("http://a.test", now) != nil {
		t.Error("nil cache returned an entry")
	}
}
