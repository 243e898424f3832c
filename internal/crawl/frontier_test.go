package crawl_test

import (
	"context"
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
