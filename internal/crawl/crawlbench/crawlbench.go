// Package crawlbench is the generated site and the measurements that the
// crawl benchmarks share: package crawl's own (BenchmarkCrawlGeneratedSite,
// BenchmarkCrawlMemory) and the comparison with colly in the nested module
// bench/ (BenchmarkColly), which keeps colly out of the main module. Test
// support only: nothing in the airlock binary imports it.
//
// The site: every page links to its two children in a binary tree (so a
// breadth-first walk from /p/0 reaches every page), to two pseudo-random
// pages and to the root, and carries about 4 KB of text. Pages are
// generated on the fly, so the site's own memory does not grow with its
// size.
package crawlbench

import (
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
)

// Sizes are the site sizes (pages) of the throughput benchmarks.
var Sizes = []int{1000, 2000, 10000}

// Concurrency is the crawl concurrency of the benchmarks; the per-host
// parallelism is 2 or Concurrency.
const Concurrency = 8

// The idle-connection settings of the http.Transport every crawler under
// comparison gets (each benchmark builds its own from these).
const (
	MaxIdleConns        = 100
	MaxIdleConnsPerHost = 64
	IdleConnTimeout     = 30 * time.Second
)

// Site is the generated site of N pages /p/0 to /p/{N-1}.
type Site struct {
	Server *httptest.Server
	N      int
}

var filler = strings.Repeat("<p>Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore et dolore magna aliqua.</p>\n", 32)

// NewSite starts a site of n pages on loopback, closed when b ends.
func NewSite(b testing.TB, n int) *Site {
	s := &Site{N: n}
	s.Server = httptest.NewServer(s)
	b.Cleanup(s.Server.Close)
	return s
}

// Seed is the URL of the root page, from which every page is reachable.
func (s *Site) Seed() string { return s.Server.URL + "/p/0" }

// ServeHTTP answers /p/i.
func (s *Site) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/p/")
	i, err := strconv.Atoi(rest)
	if !ok || err != nil || i < 0 || i >= s.N {
		http.NotFound(w, r)
		return
	}
	var b strings.Builder
	b.Grow(len(filler) + 512)
	fmt.Fprintf(&b, "<!doctype html><html><head><title>Page %d</title></head><body><nav><a href=\"/p/0\">home</a></nav><h1>Page %d</h1>\n", i, i)
	for _, j := range []int{2*i + 1, 2*i + 2, (i*7 + 3) % s.N, (i*31 + 11) % s.N} {
		if j < s.N {
			fmt.Fprintf(&b, "<p><a href=\"/p/%d\">page %d</a></p>\n", j, j)
		}
	}
	b.WriteString(filler)
	b.WriteString("</body></html>")
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	io.WriteString(w, b.String())
}

// HeapPeak measures a benchmark's memory. After a GC at the start it
// samples, every millisecond, the heap in use (HeapInuse: the spans that
// hold objects, garbage included, which is what the process keeps mapped
// for the heap) and the live heap as of the last GC (/gc/heap/live:bytes,
// which counts what was allocated while the GC marked too). Both are
// noisy: the first follows the GC's pacing (it never sees less than the
// 4 MiB minimum heap goal), and the peak of either over a long run catches
// spikes that a short run may miss. Probe gives the steady figure: it
// forces a GC and records the heap that survives it.
type HeapPeak struct {
	stop           chan struct{}
	once           sync.Once
	wg             sync.WaitGroup
	live, in       atomic.Uint64
	base, retained uint64
}

var heapMetrics = []string{"/gc/heap/live:bytes", "/memory/classes/heap/objects:bytes", "/memory/classes/heap/unused:bytes"}

// StartHeapPeak starts sampling; it stops at Report or when b ends.
func StartHeapPeak(b *testing.B) *HeapPeak {
	h := &HeapPeak{stop: make(chan struct{})}
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

// Probe records the retained heap; call it from one goroutine at a time.
func (h *HeapPeak) Probe() { h.retained = max(h.retained, retainedHeap()) }

func (h *HeapPeak) halt() {
	h.once.Do(func() { close(h.stop) })
	h.wg.Wait()
}

// Report stops sampling and reports peak-live-MiB and peak-inuse-MiB, and,
// when Probe was called, peak-retained-MiB and crawl-retained-KiB (the
// retained peak less the heap before the crawl).
func (h *HeapPeak) Report(b *testing.B) {
	h.halt()
	b.ReportMetric(float64(h.live.Load())/(1<<20), "peak-live-MiB")
	b.ReportMetric(float64(h.in.Load())/(1<<20), "peak-inuse-MiB")
	if h.retained > 0 {
		b.ReportMetric(float64(h.retained)/(1<<20), "peak-retained-MiB")
		b.ReportMetric(float64(h.retained-min(h.base, h.retained))/(1<<10), "crawl-retained-KiB")
	}
}

// ReportPages reports pages/s over the benchmark's elapsed time.
func ReportPages(b *testing.B, pages int) {
	b.ReportMetric(float64(pages)/b.Elapsed().Seconds(), "pages/s")
}
