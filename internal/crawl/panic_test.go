package crawl

import (
	"bytes"
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/airlockhq/airlock"
)

// syncBuffer is a log destination for concurrent workers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestCrawlPagePanicIsPageError: a page function that panics on one page
// fails that page (reason panic, code internal's), logs the panic with
// its stack, and the crawl goes on to its other pages.
func TestCrawlPagePanicIsPageError(t *testing.T) {
	s := newSite(t, map[string]resp{
		"/":     page("Home", "/boom", "/a"),
		"/boom": page("Boom", "/b"),
		"/a":    page("A"),
	})
	d := newDoer(s)
	defer d.close()
	pageFn := func(ctx context.Context, r *airlock.HTTPResponse, mode string) (Extracted, error) {
		if strings.HasSuffix(r.URL, "/boom") {
			panic("hostile page")
		}
		return linkPage(ctx, r, mode)
	}
	var log syncBuffer
	cfg := Config{Doer: d, Page: pageFn, Logger: slog.New(slog.NewTextHandler(&log, nil))}
	c := crawlWith(t, t.Context(), cfg, airlock.CrawlRequest{Seed: s.URL("/"), Depth: 3})
	if c.err != nil {
		t.Fatalf("Run: %v", c.err)
	}
	if got := c.skipped(airlock.ReasonPanic); !slices.Equal(got, []string{s.URL("/boom")}) {
		t.Errorf("skipped for panic: %v, want /boom", got)
	}
	urls := c.urls()
	slices.Sort(urls)
	if want := []string{s.URL("/"), s.URL("/a")}; !slices.Equal(urls, want) {
		t.Errorf("pages %v, want %v", urls, want)
	}
	for _, sk := range c.sum.Skipped {
		if strings.Contains(sk.Detail, "goroutine") || strings.Contains(sk.Detail, "hostile page") {
			t.Errorf("the skip's detail tells the caller the panic: %q", sk.Detail)
		}
	}
	if l := log.String(); !strings.Contains(l, "hostile page") || !strings.Contains(l, "panic_test.go") {
		t.Errorf("the log has no panic with its stack:\n%s", l)
	}
}
