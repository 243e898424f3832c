package extract

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
)

// recordBudget admits everything and records what it was asked.
type recordBudget struct {
	mu    sync.Mutex
	asked []int64
	held  atomic.Int64
	err   error
}

func (b *recordBudget) Acquire(ctx context.Context, n int64) (func(), error) {
	b.mu.Lock()
	b.asked = append(b.asked, n)
	b.mu.Unlock()
	if b.err != nil {
		return nil, b.err
	}
	b.held.Add(n)
	return func() { b.held.Add(-n) }, nil
}

// TestExtractAsksBudget: Extract asks the context's budget for the input's
// size before it runs, gives it back when done, and returns a refusal as
// is without extracting.
func TestExtractAsksBudget(t *testing.T) {
	body := []byte("<html><head><title>T</title></head><body><p>hello</p></body></html>")
	b := &recordBudget{}
	ctx := WithBudget(context.Background(), b)
	if _, err := Extract(ctx, Input{URL: "http://example.com/", Body: body}, Options{}); err != nil {
		t.Fatal(err)
	}
	if len(b.asked) != 1 || b.asked[0] != int64(len(body)) || b.held.Load() != 0 {
		t.Errorf("budget asked %v (held after: %d); want [%d] and 0 held", b.asked, b.held.Load(), len(body))
	}
	refusal := airlock.Errorf(airlock.CodeTooLarge, "budget", "over the whole budget")
	b = &recordBudget{err: refusal}
	_, err := Extract(WithBudget(context.Background(), b), Input{Body: body}, Options{})
	if !errors.Is(err, refusal) {
		t.Errorf("refused: got %v, want the budget's error", err)
	}
}

// Page shapes for the memory measurement, each a large page of n bytes
// generated from a fixed seed.
var pageShapes = map[string]func(rng *rand.Rand, w *bytes.Buffer){
	// prose: headings and paragraphs with inline links.
	"article": func(rng *rand.Rand, w *bytes.Buffer) {
		fmt.Fprintf(w, "<h2>Section %d</h2><p>", rng.IntN(1000))
		for range 40 {
			w.WriteString(vocab[rng.IntN(len(vocab))])
			w.WriteByte(' ')
		}
		fmt.Fprintf(w, `<a href="/a/%d">%s</a>.</p>`, rng.IntN(1e6), vocab[rng.IntN(len(vocab))])
	},
	// a link farm: one list item and link per ~40 bytes.
	"links": func(rng *rand.Rand, w *bytes.Buffer) {
		fmt.Fprintf(w, `<li><a href="/p/%d">%s</a></li>`, rng.IntN(1e9), vocab[rng.IntN(len(vocab))])
	},
	// a large table.
	"table": func(rng *rand.Rand, w *bytes.Buffer) {
		w.WriteString("<tr>")
		for range 5 {
			fmt.Fprintf(w, "<td>%s %d</td>", vocab[rng.IntN(len(vocab))], rng.IntN(1e6))
		}
		w.WriteString("</tr>")
	},
	// element soup: many small elements with attributes.
	"divs": func(rng *rand.Rand, w *bytes.Buffer) {
		fmt.Fprintf(w, `<div class="c%d" data-x="%d"><span>%s</span><b>%s</b></div>`, rng.IntN(100), rng.IntN(1e6), vocab[rng.IntN(len(vocab))], vocab[rng.IntN(len(vocab))])
	},
}

var vocab = strings.Fields("the quick brown fox jumps over lazy dog gateway egress policy budget memory extraction page link table heading paragraph tenant process")

// largePage returns a page of about n bytes of one shape.
func largePage(shape string, n int) []byte {
	rng := rand.New(rand.NewPCG(14, 11))
	var w bytes.Buffer
	w.Grow(n + 4096)
	w.WriteString("<!doctype html><html><head><title>Large page</title></head><body><main>")
	open, close := "", ""
	switch shape {
	case "links":
		open, close = "<ul>", "</ul>"
	case "table":
		open, close = "<table>", "</table>"
	}
	w.WriteString(open)
	for w.Len() < n {
		pageShapes[shape](rng, &w)
	}
	w.WriteString(close + "</main></body></html>")
	return w.Bytes()
}

// peakHeap runs f while sampling the heap's object bytes every
// millisecond, and returns the peak above the heap before f.
func peakHeap(f func()) uint64 {
	runtime.GC()
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	base := s[0].Value.Uint64()
	var peak atomic.Uint64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(s)
			if v := s[0].Value.Uint64(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	f()
	close(stop)
	<-done
	if p := peak.Load(); p > base {
		return p - base
	}
	return 0
}

// BenchmarkExtractPeakHeap measures the peak heap an extraction takes per
// input byte (heapB/inB) on large generated pages of several shapes: the
// factor the engine's extraction budget multiplies input sizes by
// (budgets.extract_factor). Run it once per case:
//
//	go test ./internal/extract -run '^$' -bench ExtractPeakHeap -benchtime 1x
//
// AIRLOCK_MEASURE_SHAPES and AIRLOCK_MEASURE_SIZES (MiB) choose the cases.
func BenchmarkExtractPeakHeap(b *testing.B) {
	// Warm up: the first extraction loads lazily built tables (dates,
	// languages) that stay for the life of the process.
	Extract(context.Background(), Input{URL: "http://example.com/", Body: largePage("article", 64<<10)}, Options{})
	for _, shape := range measureShapes() {
		for _, size := range measureSizes() {
			page := largePage(shape, size)
			b.Run(fmt.Sprintf("%s/%dMiB", shape, size>>20), func(b *testing.B) {
				var worst uint64
				for range b.N {
					var err error
					peak := peakHeap(func() {
						_, err = Extract(context.Background(), Input{URL: "http://example.com/", Body: page, ContentType: "text/html; charset=utf-8"}, Options{})
					})
					if err != nil {
						b.Fatal(err)
					}
					worst = max(worst, peak)
				}
				b.ReportMetric(float64(worst)/float64(len(page)), "heapB/inB")
				b.ReportMetric(float64(worst)/(1<<20), "peakMiB")
			})
		}
	}
}

// measureSizes are the page sizes measured: AIRLOCK_MEASURE_SIZES (MiB,
// comma-separated) or 1, 4 and 9 MiB.
func measureSizes() []int {
	v := os.Getenv("AIRLOCK_MEASURE_SIZES")
	if v == "" {
		return []int{1 << 20, 4 << 20, 9 << 20}
	}
	var out []int
	for _, f := range strings.Split(v, ",") {
		var n int
		fmt.Sscan(f, &n)
		out = append(out, n<<20)
	}
	return out
}

// measureShapes are the page shapes measured: AIRLOCK_MEASURE_SHAPES
// (comma-separated) or all of them.
func measureShapes() []string {
	if v := os.Getenv("AIRLOCK_MEASURE_SHAPES"); v != "" {
		return strings.Split(v, ",")
	}
	return []string{"article", "links", "table", "divs"}
}
