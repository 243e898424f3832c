// Package crawltest is the conformance suite for implementations of
// crawl.Frontier and crawl.Seen (the in-memory ones and the shared store's
// run the same tests), and what crawl tests share: a local site whose
// counts show a page lost or fetched twice (TreeSite), and a Doer over a
// plain client (ClientDoer).
package crawltest

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/airlockhq/airlock/internal/crawl"
)

// TestFrontier checks a Frontier implementation. newFrontier returns an
// empty, unbounded frontier for each subtest.
func TestFrontier(t *testing.T, newFrontier func(t *testing.T) crawl.Frontier) {
	ctx := context.Background()
	items := func(prefix string, n, depth int) []crawl.Item {
		out := make([]crawl.Item, n)
		for i := range out {
			out[i] = crawl.Item{URL: fmt.Sprintf("http://%s.test/%d", prefix, i), Depth: depth}
		}
		return out
	}

	t.Run("empty", func(t *testing.T) {
		f := newFrontier(t)
		if it, ok, err := f.Pop(ctx); err != nil || ok {
			t.Fatalf("Pop() on an empty frontier = %v, %v, %v; want nothing", it, ok, err)
		}
		if n, err := f.Len(ctx); err != nil || n != 0 {
			t.Fatalf("Len() = %d, %v; want 0", n, err)
		}
	})

	t.Run("fifo", func(t *testing.T) {
		f := newFrontier(t)
		want := append(items("a", 700, 1), crawl.Item{URL: "http://s.test/sitemap.xml", Kind: crawl.KindSitemap, Depth: 1})
		// Pushed in batches, interleaved with pops, across block boundaries.
		var got []crawl.Item
		for i := 0; i < len(want); i += 100 {
			n, err := f.Push(ctx, want[i:min(i+100, len(want))])
			if err != nil || n != min(100, len(want)-i) {
				t.Fatalf("Push() = %d, %v", n, err)
			}
			it, ok, err := f.Pop(ctx)
			if err != nil || !ok {
				t.Fatalf("Pop() = %v, %v", ok, err)
			}
			got = append(got, it)
			if err := f.Done(ctx, it); err != nil {
				t.Fatalf("Done() = %v", err)
			}
		}
		if n, err := f.Len(ctx); err != nil || n != len(want)-len(got) {
			t.Fatalf("Len() = %d, %v; want %d", n, err, len(want)-len(got))
		}
		for {
			it, ok, err := f.Pop(ctx)
			if err != nil {
				t.Fatal(err)
			}
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
				t.Fatalf("item %d = %+v, want %+v", i, got[i], want[i])
			}
		}
	})

	t.Run("reuse after empty", func(t *testing.T) {
		f := newFrontier(t)
		for round := range 3 {
			in := items(fmt.Sprint("r", round), 300, round)
			if _, err := f.Push(ctx, in); err != nil {
				t.Fatal(err)
			}
			for i := range in {
				it, ok, err := f.Pop(ctx)
				if err != nil || !ok || it != in[i] {
					t.Fatalf("round %d: Pop() = %+v, %v, %v; want %+v", round, it, ok, err, in[i])
				}
			}
			if _, ok, _ := f.Pop(ctx); ok {
				t.Fatalf("round %d: Pop() on an emptied frontier returned an item", round)
			}
		}
	})

	t.Run("concurrent", func(t *testing.T) {
		f := newFrontier(t)
		const pushers, each = 4, 500
		var wg sync.WaitGroup
		for p := range pushers {
			wg.Go(func() {
				for _, it := range items(fmt.Sprint("p", p), each, 0) {
					if _, err := f.Push(ctx, []crawl.Item{it}); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		var mu sync.Mutex
		seen := map[string]int{}
		for range 4 {
			wg.Go(func() {
				for {
					mu.Lock()
					n := len(seen)
					mu.Unlock()
					if n == pushers*each {
						return
					}
					it, ok, err := f.Pop(ctx)
					if err != nil {
						t.Error(err)
						return
					}
					if ok {
						mu.Lock()
						seen[it.URL]++
						mu.Unlock()
					}
				}
			})
		}
		wg.Wait()
		for u, n := range seen {
			if n != 1 {
				t.Errorf("%s popped %d times", u, n)
			}
		}
		if len(seen) != pushers*each {
			t.Errorf("popped %d distinct items, want %d", len(seen), pushers*each)
		}
	})
}

// TestSeen checks a Seen implementation. newSeen returns an empty set for
// each subtest.
func TestSeen(t *testing.T, newSeen func(t *testing.T) crawl.Seen) {
	ctx := context.Background()
	t.Run("add", func(t *testing.T) {
		s := newSeen(t)
		for _, tt := range []struct {
			key  string
			want bool
		}{
			{"http://a.test/", true},
			{"http://a.test/", false},
			{"http://a.test/x", true},
			{"sitemap http://a.test/", true},
			{"", true},
			{"", false},
		} {
			got, err := s.Add(ctx, tt.key)
			if err != nil || got != tt.want {
				t.Errorf("Add(%q) = %v, %v; want %v", tt.key, got, err, tt.want)
			}
		}
	})
	t.Run("concurrent", func(t *testing.T) {
		s := newSeen(t)
		const workers, keys = 8, 1000
		var added [keys]int32
		var mu sync.Mutex
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for k := range keys {
					ok, err := s.Add(ctx, fmt.Sprintf("http://c.test/%d", k))
					if err != nil {
						t.Error(err)
						return
					}
					if ok {
						mu.Lock()
						added[k]++
						mu.Unlock()
					}
				}
			})
		}
		wg.Wait()
		for k, n := range added {
			if n != 1 {
				t.Fatalf("key %d added %d times, want once", k, n)
			}
		}
	})
}
