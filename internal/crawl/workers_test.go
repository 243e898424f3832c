package crawl

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/airlockhq/airlock"
)

// goroutineDoer serves a generated tree of pages without a network and
// notes which goroutine fetched each.
type goroutineDoer struct {
	n  int
	mu sync.Mutex
	gs map[string]bool
}

func (d *goroutineDoer) Do(_ context.Context, req *airlock.HTTPRequest) (*airlock.HTTPResponse, error) {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	id, _, _ := bytes.Cut(bytes.TrimPrefix(buf, []byte("goroutine ")), []byte(" "))
	d.mu.Lock()
	d.gs[string(id)] = true
	d.mu.Unlock()
	path := req.URL[strings.Index(req.URL[len("http://"):], "/")+len("http://"):]
	i, err := strconv.Atoi(strings.TrimPrefix(path, "/p/"))
	if err != nil || i >= d.n {
		return &airlock.HTTPResponse{Status: http.StatusNotFound, URL: req.URL, Header: map[string][]string{}}, nil
	}
	body := fmt.Sprintf(`<html><body><a href="/p/%d">a</a> <a href="/p/%d">b</a></body></html>`, 2*i+1, 2*i+2)
	return &airlock.HTTPResponse{Status: http.StatusOK, URL: req.URL, Body: []byte(body),
		Header: map[string][]string{"Content-Type": {"text/html"}}}, nil
}

// Fetches run on a few workers reused from page to page, not on a
// goroutine per page, and the workers are gone when Run returns (the
// package's leak check sees to that).
func TestWorkersReused(t *testing.T) {
	const pages, conc = 300, 4
	d := &goroutineDoer{n: pages, gs: map[string]bool{}}
	c := crawlWith(t, t.Context(), Config{Doer: d}, airlock.CrawlRequest{
		Seed: "http://127.0.0.9/p/0", MaxPages: pages, Depth: 100, Concurrency: conc, PerHostConcurrency: conc,
		Extract: airlock.ExtractNone,
	})
	if c.err != nil || len(c.pages) != pages {
		t.Fatalf("crawl: %d pages, %v; want %d", len(c.pages), c.err, pages)
	}
	if got := len(d.gs); got > 4*conc {
		t.Errorf("%d pages were fetched on %d goroutines; want workers reused (at most %d)", pages, got, 4*conc)
	}
}
