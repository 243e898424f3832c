package gate

import (
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock/internal/store/storetest"
)

// ulidTime decodes the millisecond timestamp of a ULID (its first 10
// characters).
func ulidTime(t *testing.T, id string) time.Time {
	t.Helper()
	var ms uint64
	for _, c := range id[:10] {
		i := strings.IndexRune(crockford, c)
		if i < 0 {
			t.Fatalf("ULID %q: %q is not Crockford base32", id, c)
		}
		ms = ms<<5 | uint64(i)
	}
	return time.UnixMilli(int64(ms))
}

func checkULID(t *testing.T, id string) {
	t.Helper()
	if len(id) != 26 {
		t.Fatalf("ULID %q has %d characters, want 26", id, len(id))
	}
	if strings.Trim(id, crockford) != "" {
		t.Fatalf("ULID %q has characters outside Crockford base32", id)
	}
	if id[0] > '7' {
		t.Fatalf("ULID %q overflows 128 bits", id)
	}
}

func TestEncodeULID(t *testing.T) {
	var zero, ones [16]byte
	for i := range ones {
		ones[i] = 0xff
	}
	tests := []struct {
		name string
		in   [16]byte
		want string
	}{
		{"zero", zero, "00000000000000000000000000"},
		{"max", ones, "7ZZZZZZZZZZZZZZZZZZZZZZZZZ"},
	}
	for _, tt := range tests {
		if got := encodeULID(tt.in); got != tt.want {
			t.Errorf("encodeULID(%s) = %q, want %q", tt.name, got, tt.want)
		}
	}
	// The spec's example: 01ARYZ6S41 is the millisecond 1469918176385.
	var g ulidGen
	if got := g.next(time.UnixMilli(1469918176385)); got[:10] != "01ARYZ6S41" {
		t.Errorf("time part = %q, want 01ARYZ6S41", got[:10])
	}
	// Differential check against the conformance suite's independent
	// encoder, for ids with a known random part.
	for _, ms := range []int64{0, 1, 1469918176385, time.Now().UnixMilli(), 1<<48 - 1} {
		for _, seq := range []uint64{0, 1, 0xdeadbeef, 1<<64 - 1} {
			var raw [16]byte
			for i := range 6 {
				raw[i] = byte(uint64(ms) >> (40 - 8*i))
			}
			for i := range 8 {
				raw[8+i] = byte(seq >> (56 - 8*i))
			}
			if got, want := encodeULID(raw), storetest.ULID(time.UnixMilli(ms), seq); got != want {
				t.Errorf("encodeULID(ms=%d, seq=%#x) = %q, want %q", ms, seq, got, want)
			}
		}
	}
}

func TestULIDMonotonic(t *testing.T) {
	var g ulidGen
	now := time.Now()
	tests := []struct {
		name  string
		clock []time.Time
	}{
		{"same millisecond", []time.Time{now, now, now, now, now}},
		{"advancing", []time.Time{now, now.Add(time.Millisecond), now.Add(2 * time.Millisecond), now.Add(time.Second)}},
		// A clock stepping back must not make ids go backwards.
		{"clock steps back", []time.Time{now.Add(2 * time.Second), now.Add(time.Second), now.Add(time.Second), now}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prev := ""
			for i, c := range tt.clock {
				id := g.next(c)
				checkULID(t, id)
				if id <= prev {
					t.Fatalf("id %d = %q, not after the previous %q", i, id, prev)
				}
				prev = id
			}
		})
	}
	// The time part is the clock's millisecond.
	at := time.UnixMilli(time.Now().Add(time.Hour).UnixMilli())
	if got := ulidTime(t, g.next(at)); !got.Equal(at) {
		t.Errorf("decoded time = %v, want %v", got, at)
	}
}

func TestULIDConcurrentUniqueSorted(t *testing.T) {
	var g Gate
	const workers, perWorker = 8, 5000
	before := time.Now().Truncate(time.Millisecond)
	ids := make([][]string, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			out := make([]string, perWorker)
			for i := range out {
				out[i] = g.NewID()
			}
			ids[w] = out
		})
	}
	wg.Wait()
	after := time.Now()

	seen := make(map[string]bool, workers*perWorker)
	for w, list := range ids {
		// Each goroutine sees its own ids in increasing order: ids sort in
		// the order they were made.
		if !slices.IsSorted(list) {
			t.Errorf("worker %d: ids not increasing", w)
		}
		for _, id := range list {
			checkULID(t, id)
			if seen[id] {
				t.Fatalf("duplicate id %q", id)
			}
			seen[id] = true
			if ts := ulidTime(t, id); ts.Before(before) || ts.After(after) {
				t.Fatalf("id %q has time %v outside [%v, %v]", id, ts, before, after)
			}
		}
	}
	if len(seen) != workers*perWorker {
		t.Errorf("got %d unique ids, want %d", len(seen), workers*perWorker)
	}
}
