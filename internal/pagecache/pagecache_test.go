package pagecache

import (
	"strings"
	"testing"
	"time"
)

func entry(n int) Entry { return Entry{Content: strings.Repeat("x", n)} }

func TestBoundsAndLRU(t *testing.T) {
	c := New(Config{MaxBytes: 1000})
	// Per tenant: a holds at most 400 bytes; its oldest go first.
	for _, k := range []string{"k1", "k2", "k3"} {
		c.Put("a", k, entry(148), 400) // 150 bytes with the key
	}
	if _, ok := c.Get("a", "k1"); ok {
		t.Error("k1 survived past tenant a's bound")
	}
	if total, a := c.Bytes("a"); total != 300 || a != 300 {
		t.Errorf("bytes: total %d, a %d; want 300, 300", total, a)
	}
	// k2 used: k3 is now the least recently used of a.
	if _, ok := c.Get("a", "k2"); !ok {
		t.Fatal("k2 missing")
	}
	c.Put("a", "k4", entry(148), 400)
	if _, ok := c.Get("a", "k3"); ok {
		t.Error("k3, the least recently used, survived")
	}
	if _, ok := c.Get("a", "k2"); !ok {
		t.Error("k2, recently used, was evicted")
	}
	// In total: tenant b fills the cache, evicting a's entries first
	// (the least recently used), never holding more than MaxBytes.
	for i := range 6 {
		c.Put("b", "b"+string(rune('0'+i)), entry(148), 1000)
		if total, _ := c.Bytes("b"); total > 1000 {
			t.Fatalf("total %d above 1000", total)
		}
	}
	if total, a := c.Bytes("a"); total != 900 || a != 0 {
		t.Errorf("after b filled it: total %d, a %d; want 900, 0", total, a)
	}
	// Too big for the tenant's bound, or for the cache: not stored.
	c.Put("c", "big", entry(500), 400)
	c.Put("c", "huge", entry(2000), 5000)
	if _, c1 := c.Bytes("c"); c1 != 0 {
		t.Errorf("oversized entries stored: %d bytes", c1)
	}
}

func TestTenantsApart(t *testing.T) {
	c := New(Config{})
	c.Put("a", "k", Entry{Content: "of a"}, DefaultTenantMaxBytes)
	if _, ok := c.Get("b", "k"); ok {
		t.Error("tenant b read tenant a's entry")
	}
}

func TestTTL(t *testing.T) {
	now := time.Unix(1000, 0)
	c := New(Config{TTL: time.Minute, Now: func() time.Time { return now }})
	c.Put("a", "k", Entry{Content: "page"}, 100)
	now = now.Add(59 * time.Second)
	if _, ok := c.Get("a", "k"); !ok {
		t.Fatal("entry gone before its TTL")
	}
	now = now.Add(time.Second)
	if _, ok := c.Get("a", "k"); ok {
		t.Fatal("entry served after its TTL")
	}
	if total, _ := c.Bytes("a"); total != 0 {
		t.Errorf("expired entry still counted: %d", total)
	}
}
