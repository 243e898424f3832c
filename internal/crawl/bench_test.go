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
	"sync/atomic"
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

// heapPeak measures a benchmark's memory. After a GC at the start it
// samples, every millisecond, the heap in use (HeapInuse: the spans that
// hold objects, garbage included, which is what the process keeps mapped
// for the heap) and the live heap as of the last GC (/gc/heap/live:bytes,
// which counts what was allocated while the GC marked too). Both are
// noisy: the first follows the GC's pacing (it never sees less than the
// 4 MiB minimum heap goal), and the peak of either over a long run catches
// spikes that a short run may miss. probe gives the steady figure: it
// forces a GC and records the heap that survives it.
type heapPeak struct {
	stop           chan struct{}
	once           sync.Once
	wg             sync.WaitGroup
	live, in       atomic.Uint64
	base, retained uint64
}

var heapMetrics = []string{"/gc/heap/live:bytes", "/memory/classes/heap/objects:bytes", "/memory/classes/heap/unused:bytes"}

func startHeapPeak(b *testing.B) *heapPeak {
	h := &heapPeak{stop: make(chan struct{})}
	h.base = retainedHeap()
	b.Cleanup(h.halt)
	h.wg.Go(func() {
		s := make([]metrics.Sample, len(heapMetrics))
		for i, name := range heapMetrics {
			s[i].Name = name
		}
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(s)
			atomicMax(&h.live, s[0].Value.Uint64())
			atomicMax(&h.in, s[1].Value.Uint64()+s[2].Value.Uint64())
			select {
			case <-h.stop:
				return
			case <-t.C:
			}
		}
	})
	return h
}

func atomicMax(v *atomic.Uint64, x uint64) {
	for old := v.Load(); x > old && !v.CompareAndSwap(old, x); old = v.Load() {
	}
}

// retainedHeap forces a GC and returns the live heap it found.
func retainedHeap() uint64 {
	runtime.GC()
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// probe records the retained heap; call it from one goroutine at a time.
func (h *heapPeak) probe() { h.retained = max(h.retained, retainedHeap()) }

func (h *heapPeak) halt() {
	h.once.Do(func() { close(h.stop) })
	h.wg.Wait()
}

func (h *heapPeak) report(b *testing.B) {
	h.halt()
	b.ReportMetric(float64(h.live.Load())/(1<<20), "peak-live-MiB")
	b.ReportMetric(float64(h.in.Load())/(1<<20), "peak-inuse-MiB")
	if h.retained > 0 {
		b.ReportMetric(float64(h.retained)/(1<<20), "peak-retained-MiB")
		b.ReportMetric(float64(h.retained-min(h.base, h.retained))/(1<<10), "crawl-retained-KiB")
	}
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

// memSizes are the crawl sizes of BenchmarkCrawlMemory.
var memSizes = []int{1000, 10000, 100000}

// BenchmarkCrawlMemory crawls the generated site once per iteration and
// measures the heap (see heapPeak): peak-retained-MiB is the largest heap
// that survives a forced GC, taken every n/50 pages, and
// crawl-retained-KiB is that less the heap before the crawl (the test
// binary, the site's server): what the crawl itself holds. The forced GCs
// slow the crawl, so its pages/s is not reported; see
// BenchmarkCrawlGeneratedSite.
//
//	go test -run '^$' -bench CrawlMemory -benchtime 1x -count 5 ./internal/crawl/
func BenchmarkCrawlMemory(b *testing.B) {
	for _, n := range memSizes {
		for _, perHost := range []int{2, benchConcurrency} {
			b.Run(fmt.Sprintf("pages=%d/per-host=%d", n, perHost), func(b *testing.B) {
				s := newBenchSite(b, n)
				tr := benchTransport()
				defer tr.CloseIdleConnections()
				cfg := Config{Doer: clientDoer{&http.Client{Transport: tr}}, Page: linkPage}
				req := airlock.CrawlRequest{
					Seed: s.seed(), Depth: Unlimited, MaxPages: n, Concurrency: benchConcurrency,
					PerHostConcurrency: perHost, Extract: airlock.ExtractNone, IgnoreRobots: true,
				}
				every := max(1, n/50)
				peak := startHeapPeak(b)
				for b.Loop() {
					emitted := 0
					sum, err := Run(b.Context(), cfg, req, func(*airlock.Page) error {
						if emitted++; emitted%every == 0 {
							peak.probe()
						}
						return nil
					}, nil)
					if err != nil {
						b.Fatal(err)
					}
					if sum.Pages != n {
						b.Fatalf("crawled %d pages, want %d", sum.Pages, n)
					}
				}
				peak.report(b)
			})
		}
	}
}
