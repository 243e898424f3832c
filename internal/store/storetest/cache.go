package storetest

import (
	"bytes"
	"fmt"
	"net/http"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/airlockhq/airlock/internal/store"
)

// RunCache runs the conformance suite of store.Cache.
func RunCache(t *testing.T, open func(t *testing.T) store.Cache) {
	const key = "GET https://example.com/index.html"
	entry := func(body string) store.CacheEntry {
		return store.CacheEntry{Status: 200, Body: []byte(body), Stored: time.Now().UTC()}
	}
	get := func(t *testing.T, c store.Cache, partition, key string) store.CacheEntry {
		t.Helper()
		e, err := c.GetCacheEntry(ctx(t), partition, key)
		must(t, fmt.Sprintf("GetCacheEntry(%q, %q)", partition, key), err)
		return e
	}
	missing := func(t *testing.T, c store.Cache, partition, key string) {
		t.Helper()
		_, err := c.GetCacheEntry(ctx(t), partition, key)
		wantErr(t, fmt.Sprintf("GetCacheEntry(%q, %q)", partition, key), err, store.ErrNotFound)
	}
	wantBody := func(t *testing.T, c store.Cache, partition, key, body string) {
		t.Helper()
		if got := get(t, c, partition, key); !bytes.Equal(got.Body, []byte(body)) {
			t.Errorf("GetCacheEntry(%q, %q) body %q, want %q", partition, key, got.Body, body)
		}
	}

	t.Run("RoundTrip", func(t *testing.T) {
		c := open(t)
		want := store.CacheEntry{
			Status: 203,
			Header: http.Header{
				"Content-Type":  {"text/html; charset=utf-8"},
				"Cache-Control": {"public, max-age=600"},
				"Set-Cookie":    {"a=1", "b=2"},
				"Vary":          {"Accept-Encoding"},
			},
			RequestHeader: http.Header{"Accept-Encoding": {"gzip"}},
			Body:          []byte("<html>\x00\xff binary-safe</html>"),
			Stored:        base.In(time.FixedZone("Z", 3600)),
			Expires:       time.Now().Add(time.Hour).Round(0),
		}
		must(t, "PutCacheEntry", c.PutCacheEntry(ctx(t), "acme", key, want))
		got := get(t, c, "acme", key)
		if d := gocmp.Diff(want, got); d != "" {
			t.Errorf("GetCacheEntry (-want +got):\n%s", d)
		}
		if got.Stored.Location() != time.UTC {
			t.Errorf("Stored location %v, want UTC", got.Stored.Location())
		}
	})

	t.Run("EmptyEntry", func(t *testing.T) {
		c := open(t)
		must(t, "PutCacheEntry", c.PutCacheEntry(ctx(t), "acme", key, store.CacheEntry{Status: 204}))
		got := get(t, c, "acme", key)
		if d := gocmp.Diff(store.CacheEntry{Status: 204}, got, cmpopts.EquateEmpty()); d != "" {
			t.Errorf("GetCacheEntry (-want +got):\n%s", d)
		}
	})

	t.Run("Missing", func(t *testing.T) {
		c := open(t)
		missing(t, c, "acme", key)
		must(t, "DeleteCacheEntry of an absent entry", c.DeleteCacheEntry(ctx(t), "acme", key))
	})

	t.Run("Invalid", func(t *testing.T) {
		c := open(t)
		for _, pk := range [][2]string{{"", key}, {"acme", ""}, {"", ""}} {
			what := fmt.Sprintf("(%q, %q)", pk[0], pk[1])
			wantErr(t, "PutCacheEntry"+what, c.PutCacheEntry(ctx(t), pk[0], pk[1], entry("x")), store.ErrInvalid)
			_, err := c.GetCacheEntry(ctx(t), pk[0], pk[1])
			wantErr(t, "GetCacheEntry"+what, err, store.ErrInvalid)
			wantErr(t, "DeleteCacheEntry"+what, c.DeleteCacheEntry(ctx(t), pk[0], pk[1]), store.ErrInvalid)
		}
	})

	t.Run("PartitionIsolation", func(t *testing.T) {
		c := open(t)
		must(t, "PutCacheEntry", c.PutCacheEntry(ctx(t), "acme", key, entry("acme's page")))
		missing(t, c, "globex", key)
		missing(t, c, "acm", key)
		missing(t, c, "acme/", key)

		must(t, "PutCacheEntry", c.PutCacheEntry(ctx(t), "globex", key, entry("globex's page")))
		wantBody(t, c, "acme", key, "acme's page")
		wantBody(t, c, "globex", key, "globex's page")

		must(t, "DeleteCacheEntry", c.DeleteCacheEntry(ctx(t), "globex", key))
		missing(t, c, "globex", key)
		wantBody(t, c, "acme", key, "acme's page")
	})

	t.Run("Replace", func(t *testing.T) {
		c := open(t)
		must(t, "PutCacheEntry", c.PutCacheEntry(ctx(t), "acme", key, entry("old")))
		must(t, "PutCacheEntry", c.PutCacheEntry(ctx(t), "acme", key, entry("new")))
		wantBody(t, c, "acme", key, "new")
	})

	t.Run("Expiry", func(t *testing.T) {
		c := open(t)
		now := time.Now()
		for name, exp := range map[string]time.Time{
			"expired":      now.Add(-time.Second),
			"long expired": base,
			"fresh":        now.Add(time.Hour),
			"far future":   time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC),
			"never":        {},
		} {
			e := entry(name)
			e.Expires = exp
			must(t, "PutCacheEntry", c.PutCacheEntry(ctx(t), "acme", name, e))
		}
		missing(t, c, "acme", "expired")
		missing(t, c, "acme", "long expired")
		wantBody(t, c, "acme", "fresh", "fresh")
		wantBody(t, c, "acme", "never", "never")
		wantBody(t, c, "acme", "far future", "far future")

		// Expiry comes with time passing, too. The entry must be there when
		// it is read before its expiry; on a machine so loaded that the put
		// and the read outlast the expiry, the next try gives it longer.
		e := entry("soon")
		read := false
		for _, life := range []time.Duration{300 * time.Millisecond, 2 * time.Second, 10 * time.Second} {
			e.Expires = time.Now().Add(life)
			must(t, "PutCacheEntry", c.PutCacheEntry(ctx(t), "acme", "soon", e))
			got, err := c.GetCacheEntry(ctx(t), "acme", "soon")
			if time.Now().After(e.Expires) {
				continue // inconclusive: read after the expiry
			}
			if err != nil || string(got.Body) != "soon" {
				t.Fatalf("GetCacheEntry before its expiry: %q, %v", got.Body, err)
			}
			read = true
			break
		}
		if !read {
			t.Fatal("every read of the entry came after its expiry, even at 10 s")
		}
		time.Sleep(time.Until(e.Expires) + 50*time.Millisecond)
		missing(t, c, "acme", "soon")

		n, err := c.PruneCache(ctx(t), 0)
		must(t, "PruneCache", err)
		if n != 3 {
			t.Errorf("PruneCache deleted %d, want the 3 expired entries", n)
		}
		wantBody(t, c, "acme", "fresh", "fresh")
		wantBody(t, c, "acme", "never", "never")
	})

	t.Run("PruneBySize", func(t *testing.T) {
		c := open(t)
		// Ten 1000-byte entries, oldest first, over two partitions, put in
		// an order that is not their age.
		body := bytes.Repeat([]byte("x"), 1000)
		for _, i := range []int{3, 9, 0, 5, 1, 7, 2, 8, 4, 6} {
			e := store.CacheEntry{Status: 200, Body: body, Stored: base.Add(time.Duration(i) * time.Minute)}
			if e.Size() != 1000 {
				t.Fatalf("Size = %d, want 1000", e.Size())
			}
			must(t, "PutCacheEntry", c.PutCacheEntry(ctx(t), []string{"acme", "globex"}[i%2], fmt.Sprint(i), e))
		}
		present := func() (keys []int) {
			for i := range 10 {
				_, err := c.GetCacheEntry(ctx(t), []string{"acme", "globex"}[i%2], fmt.Sprint(i))
				if err == nil {
					keys = append(keys, i)
				}
			}
			return keys
		}
		for _, step := range []struct {
			maxBytes    int64
			wantDeleted int64
			wantLeft    []int
		}{
			{maxBytes: 0, wantDeleted: 0, wantLeft: []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}},
			{maxBytes: 10000, wantDeleted: 0, wantLeft: []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}},
			{maxBytes: 8000, wantDeleted: 2, wantLeft: []int{2, 3, 4, 5, 6, 7, 8, 9}},
			{maxBytes: 4500, wantDeleted: 4, wantLeft: []int{6, 7, 8, 9}},
			{maxBytes: 4500, wantDeleted: 0, wantLeft: []int{6, 7, 8, 9}},
			{maxBytes: 1, wantDeleted: 4, wantLeft: nil},
		} {
			n, err := c.PruneCache(ctx(t), step.maxBytes)
			must(t, "PruneCache", err)
			if n != step.wantDeleted {
				t.Errorf("PruneCache(%d) deleted %d, want %d", step.maxBytes, n, step.wantDeleted)
			}
			if d := gocmp.Diff(step.wantLeft, present(), cmpopts.EquateEmpty()); d != "" {
				t.Errorf("after PruneCache(%d), entries (-want +got):\n%s", step.maxBytes, d)
			}
		}
	})

	t.Run("PruneCountsHeaders", func(t *testing.T) {
		c := open(t)
		old := store.CacheEntry{Status: 200, Body: []byte("0123456789"), Stored: base,
			Header: http.Header{"Etag": {"abcdef"}}} // 10 + 4 + 6 = 20 bytes
		young := store.CacheEntry{Status: 200, Body: []byte("0123456789"), Stored: base.Add(time.Second)}
		must(t, "PutCacheEntry", c.PutCacheEntry(ctx(t), "acme", "old", old))
		must(t, "PutCacheEntry", c.PutCacheEntry(ctx(t), "acme", "young", young))
		n, err := c.PruneCache(ctx(t), 30)
		must(t, "PruneCache", err)
		if n != 0 {
			t.Errorf("PruneCache(30) with 30 bytes stored deleted %d, want 0", n)
		}
		n, err = c.PruneCache(ctx(t), 29)
		must(t, "PruneCache", err)
		if n != 1 {
			t.Errorf("PruneCache(29) with 30 bytes stored deleted %d, want 1", n)
		}
		missing(t, c, "acme", "old")
		wantBody(t, c, "acme", "young", "0123456789")
	})

	t.Run("TwoHandles", func(t *testing.T) {
		a, b := open(t), open(t)
		must(t, "PutCacheEntry on a", a.PutCacheEntry(ctx(t), "acme", key, entry("shared")))
		wantBody(t, b, "acme", key, "shared")
		missing(t, b, "globex", key)
		must(t, "DeleteCacheEntry on b", b.DeleteCacheEntry(ctx(t), "acme", key))
		missing(t, a, "acme", key)
	})
}
