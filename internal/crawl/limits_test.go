package crawl

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
)

// TestCrawlRequestCap: failures do not count toward max_pages, so a seed
// linking to hundreds of dead links would take a request each; the run
// stops at RequestsPerPage × max_pages page requests, with a status that
// says so, and skips the rest as limit.
func TestCrawlRequestCap(t *testing.T) {
	const dead, maxPages = 300, 5
	var links []string
	for i := range dead {
		links = append(links, fmt.Sprintf("/dead/%d", i))
	}
	s := newSite(t, map[string]resp{"/": page("seed", links...)})
	c := crawlSite(t, s, airlock.CrawlRequest{Seed: s.URL("/"), MaxPages: maxPages, Depth: 1, Concurrency: 8, PerHostConcurrency: 8})
	pages := 0
	for _, p := range s.paths() {
		if p == "/" || strings.HasPrefix(p, "/dead/") {
			pages++
		}
	}
	if pages > RequestsPerPage*maxPages {
		t.Errorf("%d page requests for max_pages %d, want at most %d", pages, maxPages, RequestsPerPage*maxPages)
	}
	if c.sum.Stopped != StoppedRequests || len(c.skipped(airlock.ReasonLimit)) == 0 {
		t.Errorf("summary: stopped %q, %d skipped as limit; want %q and some", c.sum.Stopped, len(c.skipped(airlock.ReasonLimit)), StoppedRequests)
	}
	if c.sum.Pages != 1 {
		t.Errorf("pages = %d, want the seed alone", c.sum.Pages)
	}
}

// TestCrawlRequestCapNotReachedBySuccess: a crawl whose pages all work
// ends on its page limit, not on the request cap.
func TestCrawlRequestCapNotReachedBySuccess(t *testing.T) {
	pages := map[string]resp{}
	for i := range 40 {
		pages[fmt.Sprintf("/p%d", i)] = page("p", fmt.Sprintf("/p%d", 2*i+1), fmt.Sprintf("/p%d", 2*i+2))
	}
	s := newSite(t, pages)
	c := crawlSite(t, s, airlock.CrawlRequest{Seed: s.URL("/p0"), MaxPages: 20, Depth: 10})
	if c.sum.Pages != 20 || c.sum.Stopped != "" {
		t.Errorf("pages %d, stopped %q; want 20 and not stopped", c.sum.Pages, c.sum.Stopped)
	}
}

// TestCrawlDelay: a request's delay spaces the requests to an origin and
// makes them one at a time, whatever per_host_concurrency says; it
// lengthens robots.txt's Crawl-delay but never shortens it.
func TestCrawlRequestDelay(t *testing.T) {
	tests := []struct {
		name   string
		robots string
		delay  time.Duration
		want   time.Duration // the least gap between two page requests
	}{
		{"request delay", "", 80 * time.Millisecond, 80 * time.Millisecond},
		{"longer than crawl-delay", "User-agent: *\nCrawl-delay: 0.01\n", 80 * time.Millisecond, 80 * time.Millisecond},
		{"shorter than crawl-delay", "User-agent: *\nCrawl-delay: 0.1\n", 10 * time.Millisecond, 100 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pages := map[string]resp{}
			for i := range 6 {
				pages[fmt.Sprintf("/p%d", i)] = page("p", fmt.Sprintf("/p%d", i+1))
			}
			if tt.robots != "" {
				pages["/robots.txt"] = resp{body: tt.robots, ctype: "text/plain"}
			}
			s := newSite(t, pages)
			crawlSite(t, s, airlock.CrawlRequest{Seed: s.URL("/p0"), MaxPages: 5, Depth: 10, PerHostConcurrency: 8, Delay: tt.delay})
			var last time.Time
			n := 0
			for _, h := range s.hits() {
				if !strings.HasPrefix(h.path, "/p") {
					continue
				}
				// Lower bounds only, with TestCrawlDelay's margin: the server
				// sees a request a little after it starts.
				if n > 0 && h.at.Sub(last) < tt.want*3/4 {
					t.Errorf("request %d came %s after the one before, want at least %s", n, h.at.Sub(last), tt.want)
				}
				last, n = h.at, n+1
			}
			if n != 5 {
				t.Errorf("%d page requests, want 5", n)
			}
			if p := s.peak.Load(); p != 1 {
				t.Errorf("peak requests at once = %d, want 1", p)
			}
		})
	}
}

func TestValidateRequestDelay(t *testing.T) {
	if err := ValidateRequest(airlock.CrawlRequest{Seed: "http://example.com/", Delay: -time.Second}); airlock.CodeOf(err) != airlock.CodeInvalid {
		t.Errorf("negative delay: %v", err)
	}
}
