package crawl

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
)

// The benchmarks crawl a generated loopback site: every page links to its
// two children in a binary tree (so a breadth-first walk from /p/0 reaches
// every page), to two pseudo-random pages and to the root, and carries
// about 4 KB of text. Pages are generated on the fly, so the site's own
// memory does not grow with its size. BenchmarkColly (colly_bench_test.go)
// crawls the same site with the same settings.
//
//	go test -run '^$' -bench 'CrawlGeneratedSite|Colly' -benchtime 3x ./internal/crawl/

var benchSizes = []int{1000, 2000, 10000}

const benchConcurrency = 8

type benchSite struct {
	srv *httptest.Server
	n   int
}

var benchFiller = strings.Repeat("<p>Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore et dolore magna aliqua.</p>\n", 32)

func newBenchSite(b *testing.B, n int) *benchSite {
	s := &benchSite{n: n}
	s.srv = httptest.NewServer(s)
	b.Cleanup(s.srv.Close)
	return s
}

func (s *benchSite) seed() string { return s.srv.URL + "/p/0" }

func (s *benchSite) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/p/")
	i, err := strconv.Atoi(rest)
	if !ok || err != nil || i < 0 || i >= s.n {
		http.NotFound(w, r)
		return
	}
	var b strings.Builder
	b.Grow(len(benchFiller) + 512)
	fmt.Fprintf(&b, "<!doctype html><html><head><title>Page %d</title></head><body><nav><a href=\"/p/0\">home</a></nav><h1>Page %d</h1>\n", i, i)
	for _, j := range []int{2*i + 1, 2*i + 2, (i*7 + 3) % s.n, (i*31 + 11) % s.n} {
		if j < s.n {
			fmt.Fprintf(&b, "<p><a href=\"/p/%d\">page %d</a></p>\n", j, j)
		}
	}
	b.WriteString(benchFiller)
	b.WriteString("</body></html>")
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	io.WriteString(w, b.String())
}

// benchTransport is the client side both crawlers get.
func benchTransport() *http.Transport {
	return &http.Transport{MaxIdleConns: 100, MaxIdleConnsPerHost: 64, IdleConnTimeout: 30 * time.Second}
}

// clientDoer is a Doer over a plain http.Client (test code may dial
// loopback; the engine's Doer is egress's client).
type clientDoer struct{ c *http.Client }

func (d clientDoer) Do(ctx context.Context, req *airlock.HTTPRequest) (*airlock.HTTPResponse, error) {
	hr, err := http.NewRequestWithContext(ctx, http.MethodGet, req.URL, nil)
	if err != nil {
		return nil, err
	}
	for k, v := range req.Header {
		hr.Header[k] = v
	}
	res, err := d.c.Do(hr)
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

// heapPeak samples the heap while a benchmark runs: the live heap after
// each GC (/gc/heap/live:bytes, independent of when the GC runs) and the
// heap in use, garbage included.
type heapPeak struct {
	stop     chan struct{}
	once     sync.Once
	wg       sync.WaitGroup
	live, in uint64
}

func startHeapPeak(b *testing.B) *heapPeak {
	runtime.GC()
	h := &heapPeak{stop: make(chan struct{})}
	b.Cleanup(h.halt)
	h.wg.Go(func() {
		s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/memory/classes/heap/objects:bytes"}}
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(s)
			h.live = max(h.live, s[0].Value.Uint64())
			h.in = max(h.in, s[1].Value.Uint64())
			select {
			case <-h.stop:
				return
			case <-t.C:
			}
		}
	})
	return h
}

func (h *heapPeak) halt() {
	h.once.Do(func() { close(h.stop) })
	h.wg.Wait()
}

func (h *heapPeak) report(b *testing.B) {
	h.halt()
	b.ReportMetric(float64(h.live)/(1<<20), "peak-live-MiB")
	b.ReportMetric(float64(h.in)/(1<<20), "peak-inuse-MiB")
}

func reportPages(b *testing.B, pages int) {
	b.ReportMetric(float64(pages)/b.Elapsed().Seconds(), "pages/s")
}

// BenchmarkCrawlGeneratedSite crawls the whole generated site breadth
// first with extract none: the page function only tokenizes links, so the
// figure is the crawler's own cost plus HTTP over loopback.
func BenchmarkCrawlGeneratedSite(b *testing.B) {
	for _, n := range benchSizes {
		for _, perHost := range []int{2, benchConcurrency} {
			for _, robots := range []bool{false, true} {
				if robots && perHost != benchConcurrency {
					continue
				}
				name := fmt.Sprintf("pages=%d/per-host=%d", n, perHost)
				if robots {
					name += "/robots"
				}
				b.Run(name, func(b *testing.B) {
					s := newBenchSite(b, n)
					tr := benchTransport()
					defer tr.CloseIdleConnections()
					cfg := Config{Doer: clientDoer{&http.Client{Transport: tr}}, Page: linkPage}
					req := airlock.CrawlRequest{
						Seed: s.seed(), Depth: Unlimited, MaxPages: n, Concurrency: benchConcurrency,
						PerHostConcurrency: perHost, Extract: airlock.ExtractNone, IgnoreRobots: !robots,
					}
					peak := startHeapPeak(b)
					total := 0
					for b.Loop() {
						sum, err := Run(b.Context(), cfg, req, func(*airlock.Page) error { return nil }, nil)
						if err != nil {
							b.Fatal(err)
						}
						if sum.Pages != n {
							b.Fatalf("crawled %d pages, want %d (skipped %v)", sum.Pages, n, sum.Skipped[:min(5, len(sum.Skipped))])
						}
						total += sum.Pages
					}
					peak.report(b)
					reportPages(b, total)
				})
			}
		}
	}
}
