package crawl_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/airlockhq/airlock/internal/crawl"
	"github.com/airlockhq/airlock/internal/crawl/crawltest"
)

func TestMemoryFrontier(t *testing.T) {
	crawltest.TestFrontier(t, func(*testing.T) crawl.Frontier { return crawl.NewMemoryFrontier(0) })
}

func TestMemorySeen(t *testing.T) {
	crawltest.TestSeen(t, func(*testing.T) crawl.Seen { return crawl.NewMemorySeen() })
}

func TestMemoryFrontierCapacity(t *testing.T) {
	ctx := context.Background()
	f := crawl.NewMemoryFrontier(3)
	items := []crawl.Item{{URL: "http://a.test/1"}, {URL: "http://a.test/2"}}
	if n, _ := f.Push(ctx, items); n != 2 {
		t.Fatalf("Push = %d, want 2", n)
	}
	if n, _ := f.Push(ctx, items); n != 1 {
		t.Fatalf("Push past capacity = %d, want 1", n)
	}
	f.Pop(ctx)
	if n, _ := f.Push(ctx, items); n != 1 {
		t.Fatalf("Push after a pop = %d, want 1", n)
	}
	if n, _ := f.Len(ctx); n != 3 {
		t.Fatalf("Len = %d, want 3", n)
	}
}

// TestMemoryFrontierCoding checks that front-coded blocks give back every
// item as pushed: URLs sharing prefixes, equal URLs, a URL that is the
// prefix of the next, one longer than a block's text, the empty URL, and
// depths far from zero.
func TestMemoryFrontierCoding(t *testing.T) {
	ctx := context.Background()
	long := "http://a.test/" + strings.Repeat("x", 20000)
	var want []crawl.Item
	for i := range 1500 {
		u := fmt.Sprintf("http://a.test/p/%d", i)
		switch i % 7 {
		case 1:
			u = fmt.Sprintf("https://b%d.test/", i%3)
		case 2:
			u = want[i-1].URL // the same URL again
		case 3:
			u = want[i-1].URL + "/more"
		case 4:
			if i%5 == 0 {
				u = long[:len(long)-i]
			}
		case 5:
			if i%10 == 0 {
				u = ""
			}
		}
		want = append(want, crawl.Item{URL: u, Depth: (i%11 - 1) << (i % 50), Kind: crawl.Kind(i % 2)})
	}
	f := crawl.NewMemoryFrontier(0)
	var got []crawl.Item
	for i, step := 0, 1; i < len(want); i, step = i+step, step%97+13 {
		batch := want[i:min(i+step, len(want))]
		if n, err := f.Push(ctx, batch); err != nil || n != len(batch) {
			t.Fatalf("Push() = %d, %v; want %d", n, err, len(batch))
		}
		for range step / 3 {
			it, ok, _ := f.Pop(ctx)
			if !ok {
				break
			}
			got = append(got, it)
		}
	}
	for {
		it, ok, _ := f.Pop(ctx)
		if !ok {
			break
		}
		got = append(got, it)
	}
	if len(got) != len(want) {
		t.Fatalf("popped %d items, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("item %d = %+v, want %+v", i, trim(got[i]), trim(want[i]))
		}
	}
}

func trim(it crawl.Item) crawl.Item {
	if len(it.URL) > 80 {
		it.URL = it.URL[:80] + fmt.Sprintf("…(%d bytes)", len(it.URL))
	}
	return it
}

// TestMemoryFootprint bounds what the in-memory frontier and seen set hold
// per URL, the two parts of a crawl that grow with its size.
func TestMemoryFootprint(t *testing.T) {
	const n = 100000
	ctx := context.Background()
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	items := make([]crawl.Item, 1000)
	before := heap()
	f := crawl.NewMemoryFrontier(0)
	for i := 0; i < n; i += len(items) {
		for j := range items {
			items[j] = crawl.Item{URL: fmt.Sprintf("https://www.example.com/articles/%d/page.html", i+j), Depth: 3}
		}
		f.Push(ctx, items)
	}
	after := heap()
	t.Logf("MemoryFrontier: %.1f bytes per queued URL", float64(after-before)/n)
	if per := float64(after-before) / n; per > 32 { // an Item and its string: 64
		t.Errorf("MemoryFrontier holds %.1f bytes per queued URL, want at most 32", per)
	}
	runtime.KeepAlive(f)
	before = heap()
	s := crawl.NewMemorySeen()
	for i := range n {
		s.Add(ctx, fmt.Sprintf("https://www.example.com/articles/%d/page.html", i))
	}
	after = heap()
	t.Logf("MemorySeen: %.1f bytes per URL", float64(after-before)/n)
	if per := float64(after-before) / n; per > 22 {
		t.Errorf("MemorySeen holds %.1f bytes per URL, want at most 22", per)
	}
	if s.Len() != n {
		t.Errorf("Len() = %d, want %d", s.Len(), n)
	}
}
