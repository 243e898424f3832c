package crawltest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
)

// TreeSite is a local site of pages /p0 to /p{n-1} in which page i links
// to 2i+1 and 2i+2: every page is reachable from /p0 and linked from one
// page only, so a crawl that loses a page, or fetches one twice, shows in
// the counts. It serves Robots at /robots.txt (404 when empty) and answers
// each page after Delay.
type TreeSite struct {
	*httptest.Server
	robots string
	delay  time.Duration

	mu          sync.Mutex
	hits        map[string]int // requests by path
	inflight    int            // page requests being answered
	maxInflight int
	starts      []time.Time // when each page request arrived
}

// NewTreeSite starts a TreeSite of n pages, closed when the test ends.
func NewTreeSite(t testing.TB, n int, robots string, delay time.Duration) *TreeSite {
	s := &TreeSite{robots: robots, delay: delay, hits: map[string]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.hits[r.URL.Path]++
		s.mu.Unlock()
		if r.URL.Path == "/robots.txt" && s.robots != "" {
			fmt.Fprint(w, s.robots)
			return
		}
		i, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/p"))
		if err != nil || i < 0 || i >= n {
			http.NotFound(w, r)
			return
		}
		s.mu.Lock()
		s.inflight++
		s.maxInflight = max(s.maxInflight, s.inflight)
		s.starts = append(s.starts, time.Now())
		s.mu.Unlock()
		defer func() {
			s.mu.Lock()
			s.inflight--
			s.mu.Unlock()
		}()
		time.Sleep(s.delay)
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, "<html><head><title>Page %d</title></head><body><main><h1>Page %d</h1><p>This is page number %d of the tree.</p>", i, i, i)
		for _, c := range []int{2*i + 1, 2*i + 2} {
			if c < n {
				fmt.Fprintf(w, `<a href="/p%d">page %d</a> `, c, c)
			}
		}
		fmt.Fprint(w, "</main></body></html>")
	}))
	t.Cleanup(s.Close)
	return s
}

// Hits returns the requests for path.
func (s *TreeSite) Hits(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hits[path]
}

// PageHits returns how many pages were requested, how many requests they
// got in all, and how many of those were beyond the first of a page.
func (s *TreeSite) PageHits() (pages, requests, extra int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for p, n := range s.hits {
		if strings.HasPrefix(p, "/p") {
			pages++
			requests += n
			extra += n - 1
		}
	}
	return pages, requests, extra
}

// Requests returns the page requests so far.
func (s *TreeSite) Requests() int {
	_, n, _ := s.PageHits()
	return n
}

// MaxInflight returns the most page requests answered at once.
func (s *TreeSite) MaxInflight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.maxInflight
}

// Starts returns when each page request arrived, in order.
func (s *TreeSite) Starts() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.starts...)
}

// ClientDoer is an airlock.Doer over a plain http.Client, for tests that
// crawl a local site (test code may dial loopback; the engine's Doer is
// the only one that reaches anything else).
type ClientDoer struct{ Client *http.Client }

// Do implements airlock.Doer: a GET with the request's headers.
func (d ClientDoer) Do(ctx context.Context, req *airlock.HTTPRequest) (*airlock.HTTPResponse, error) {
	hr, err := http.NewRequestWithContext(ctx, http.MethodGet, req.URL, nil)
	if err != nil {
		return nil, err
	}
	for k, v := range req.Header {
		hr.Header[k] = v
	}
	res, err := d.Client.Do(hr)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, err
	}
	return &airlock.HTTPResponse{Status: res.StatusCode, Header: res.Header, Body: body, URL: res.Request.URL.String(), Proto: res.Proto}, nil
}
