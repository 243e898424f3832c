package egresstest

import (
	"context"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"
)

// PinStore is egress.PinStore, restated so that egress's own tests can
// import this package.
type PinStore interface {
	Pin(ctx context.Context, name string, addrs []netip.Addr, ttl time.Duration) ([]netip.Addr, error)
}

// RunPins is the conformance suite for implementations of
// egress.PinStore: the in-process store and the fleet's Redis store run
// the same tests, so that a pin means the same on one replica or many.
// newPins returns an empty store for each subtest; the addresses are data
// only, nothing is dialled.
func RunPins(t *testing.T, newPins func(t *testing.T) PinStore) {
	ctx := context.Background()
	a1 := []netip.Addr{netip.MustParseAddr("192.0.2.1")}
	a2 := []netip.Addr{netip.MustParseAddr("10.0.0.1")}
	same := func(got, want []netip.Addr) bool {
		g, w := slices.Clone(got), slices.Clone(want)
		slices.SortFunc(g, netip.Addr.Compare)
		slices.SortFunc(w, netip.Addr.Compare)
		return slices.Equal(g, w)
	}

	t.Run("first answer wins", func(t *testing.T) {
		p := newPins(t)
		if got, err := p.Pin(ctx, "rebind.test", a1, time.Minute); err != nil || !same(got, a1) {
			t.Fatalf("first pin = %v, %v", got, err)
		}
		if got, err := p.Pin(ctx, "rebind.test", a2, time.Minute); err != nil || !same(got, a1) {
			t.Fatalf("second answer = %v, %v; want the pinned %v", got, err, a1)
		}
		if got, _ := p.Pin(ctx, "other.test", a2, time.Minute); !same(got, a2) {
			t.Fatalf("another name = %v, want its own answer", got)
		}
	})

	t.Run("expiry", func(t *testing.T) {
		p := newPins(t)
		p.Pin(ctx, "short.test", a1, time.Second)
		time.Sleep(1100 * time.Millisecond)
		if got, err := p.Pin(ctx, "short.test", a2, time.Minute); err != nil || !same(got, a2) {
			t.Fatalf("after expiry = %v, %v; want the new answer", got, err)
		}
	})

	t.Run("several addresses", func(t *testing.T) {
		p := newPins(t)
		many := []netip.Addr{netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("192.0.2.7")}
		p.Pin(ctx, "many.test", many, time.Minute)
		if got, err := p.Pin(ctx, "many.test", a2, time.Minute); err != nil || !same(got, many) {
			t.Fatalf("pinned = %v, %v; want %v", got, err, many)
		}
	})

	t.Run("concurrent first answers agree", func(t *testing.T) {
		p := newPins(t)
		answers := make([][]netip.Addr, 16)
		var wg sync.WaitGroup
		for i := range answers {
			wg.Go(func() {
				offer := a1
				if i%2 == 1 {
					offer = a2
				}
				answers[i], _ = p.Pin(ctx, "race.test", offer, time.Minute)
			})
		}
		wg.Wait()
		for i, got := range answers {
			if !same(got, answers[0]) {
				t.Fatalf("caller %d got %v, caller 0 %v: one name, two answers", i, got, answers[0])
			}
		}
	})
}
