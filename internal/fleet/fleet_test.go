package fleet

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/egress/egresstest"
	"github.com/airlockhq/airlock/internal/fleet/fleettest"
	"github.com/airlockhq/airlock/internal/gate"
	"github.com/airlockhq/airlock/internal/gate/gatetest"
	"github.com/airlockhq/airlock/internal/leakcheck"
	"github.com/airlockhq/airlock/internal/store"
	"github.com/airlockhq/airlock/internal/store/storetest"
)

func TestMain(m *testing.M) {
	// These tests mostly wait, on leases lapsing or being renewed, on
	// Crawl-delays and on Redis, and each has its own key space (open) or
	// its own server.
	leakcheck.RaiseParallel(8)
	code := leakcheck.Main(m, "fleet", leakcheck.Options{})
	fleettest.StopShared()
	os.Exit(code)
}

// open connects to the shared server under a prefix of this test's own.
func open(t *testing.T) *Fleet {
	t.Helper()
	srv := fleettest.Shared(t)
	f, err := Open(t.Context(), srv.URL(0), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f.WithPrefix("airlock-test:" + strings.ReplaceAll(t.Name(), "/", ".") + ":" + time.Now().Format("150405.000000000") + ":")
}

// second is another client (another replica) on a's server and prefix.
func second(t *testing.T, a *Fleet) *Fleet {
	t.Helper()
	b, err := Open(t.Context(), fleettest.Shared(t).URL(0), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b.WithPrefix(a.prefix)
}

func TestRevocationsConformance(t *testing.T) {
	t.Parallel()
	storetest.RunRevocations(t, func(t *testing.T) store.Revocations {
		// Handles of one subtest share the prefix: one store.
		f := open(t)
		if p, ok := subtestPrefix.Load(t.Name()); ok {
			return f.WithPrefix(p.(string)).Revocations()
		}
		subtestPrefix.Store(t.Name(), f.prefix)
		return f.Revocations()
	})
}

var subtestPrefix sync.Map

func TestOpenErrors(t *testing.T) {
	t.Parallel()
	_, err := Open(t.Context(), "http://nope", nil)
	if airlock.CodeOf(err) != airlock.CodeInvalid {
		t.Errorf("bad URL: %v", err)
	}
	_, err = Open(t.Context(), "redis://127.0.0.1:1/0", nil)
	if airlock.CodeOf(err) != airlock.CodeUnavailable || airlock.ReasonOf(err) != "redis" {
		t.Errorf("nothing listening: %v", err)
	}
}

// fresh returns a function that gives the test's fleet under a prefix of
// its own at each call: an empty store for each subtest of a conformance
// suite.
func fresh(t *testing.T) func() *Fleet {
	f := open(t)
	n := 0
	return func() *Fleet {
		n++
		return f.WithPrefix(f.prefix + strconv.Itoa(n) + ":")
	}
}

// The limiter has the local limiter's semantics: the same conformance
// suite. It stays serial: the suite expects a burst's immediate calls to
// be made before the bucket refills (within 200 ms), which tests running
// beside it on a loaded machine can delay.
func TestLimiterConformance(t *testing.T) {
	next := fresh(t)
	gatetest.RunLimiter(t, func(*testing.T) gate.RateLimiter { return next().Limiter() })
}

func TestPinsConformance(t *testing.T) {
	t.Parallel()
	next := fresh(t)
	egresstest.RunPins(t, func(*testing.T) egresstest.PinStore { return next().Pins() })
}

// Two clients (two replicas) share one bucket. Not parallel: the bucket
// refills a token a second, so a stall between the calls would let one
// more through.
func TestLimiter(t *testing.T) {
	a := open(t)
	b := second(t, a)
	la, lb := a.Limiter(), b.Limiter()
	ctx := t.Context()
	lim := gate.Limit{Rate: 1, Burst: 3}
	for i := range 3 {
		l := la
		if i%2 == 1 {
			l = lb
		}
		if ok, _, err := l.Allow(ctx, "k", lim); !ok || err != nil {
			t.Fatalf("token %d: %v %v", i, ok, err)
		}
	}
	ok, retry, err := lb.Allow(ctx, "k", lim)
	if ok || err != nil || retry <= 0 || retry > time.Second {
		t.Fatalf("over the burst on the other replica: ok %v retry %v err %v", ok, retry, err)
	}
}

// Concurrent callers on two clients get exactly the burst.
func TestLimiterConcurrent(t *testing.T) {
	t.Parallel()
	a := open(t)
	b := second(t, a)
	lim := gate.Limit{Rate: 0.001, Burst: 20}
	var allowed atomic.Int64
	var wg sync.WaitGroup
	for i := range 60 {
		l := a.Limiter()
		if i%2 == 1 {
			l = b.Limiter()
		}
		wg.Go(func() {
			if ok, _, err := l.Allow(t.Context(), "c", lim); ok && err == nil {
				allowed.Add(1)
			}
		})
	}
	wg.Wait()
	if n := allowed.Load(); n != 20 {
		t.Fatalf("%d allowed across two replicas, want the burst of 20", n)
	}
}

// Another replica's later answer does not replace a pin, whatever the
// case of the name.
func TestPins(t *testing.T) {
	t.Parallel()
	f := open(t)
	ctx := t.Context()
	public := []netip.Addr{netip.MustParseAddr("192.0.2.14")}
	private := []netip.Addr{netip.MustParseAddr("10.0.0.1")}
	if got, err := f.Pins().Pin(ctx, "Rebind.test", public, time.Minute); err != nil || len(got) != 1 || got[0] != public[0] {
		t.Fatalf("first pin: %v %v", got, err)
	}
	got, err := second(t, f).Pins().Pin(ctx, "rebind.test", private, time.Minute)
	if err != nil || len(got) != 1 || got[0] != public[0] {
		t.Fatalf("second answer: %v %v, want the pinned %v", got, err, public)
	}
}

// A change announced by one replica reaches another's watcher; the delay
// is logged (the target: under 100 ms on loopback).
func TestWatchPropagation(t *testing.T) {
	t.Parallel()
	a := open(t)
	b := second(t, a)
	ctx, cancel := context.WithCancel(t.Context())
	var loops sync.WaitGroup
	changed := make(chan time.Time, 16)
	defer func() { // the watcher ends with ctx
		cancel()
		done := make(chan struct{})
		go func() { loops.Wait(); close(done) }()
		for {
			select {
			case <-changed:
			case <-done:
				return
			}
		}
	}()
	if err := b.Revocations().Watch(ctx, &loops, func() { changed <- time.Now() }, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	<-changed // the call after subscribing
	var delays []time.Duration
	for i := range 20 {
		start := time.Now()
		subject := "acme"
		if i%2 == 1 {
			if err := a.Revocations().Unrevoke(ctx, subject); err != nil {
				t.Fatal(err)
			}
		} else if err := a.Revocations().Revoke(ctx, subject, "test"); err != nil {
			t.Fatal(err)
		}
		select {
		case at := <-changed:
			delays = append(delays, at.Sub(start))
		case <-time.After(5 * time.Second):
			t.Fatal("no change notification")
		}
	}
	sort.Slice(delays, func(i, j int) bool { return delays[i] < delays[j] })
	t.Logf("revocation propagation over pub/sub: p50 %v, max %v", delays[len(delays)/2], delays[len(delays)-1])
	cancel()
	time.Sleep(50 * time.Millisecond)
}

// With Redis gone, every operation fails as unavailable: nothing is
// allowed by default.
func TestRedisDownFailsClosed(t *testing.T) {
	t.Parallel()
	srv := fleettest.Start(t)
	f, err := Open(t.Context(), srv.URL(0), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	srv.Stop()
	ctx := t.Context()
	ok, _, err := f.Limiter().Allow(ctx, "k", gate.Limit{Rate: 1, Burst: 1})
	if ok || airlock.CodeOf(err) != airlock.CodeUnavailable {
		t.Errorf("limiter: %v %v", ok, err)
	}
	if _, err := f.Revocations().RevocationVersion(ctx); airlock.CodeOf(err) != airlock.CodeUnavailable {
		t.Errorf("revocations: %v", err)
	}
	if _, err := f.Pins().Pin(ctx, "x.test", []netip.Addr{netip.MustParseAddr("93.184.215.14")}, time.Minute); airlock.CodeOf(err) != airlock.CodeUnavailable {
		t.Errorf("pins: %v", err)
	}
	if err := f.Ping(ctx); !errors.Is(err, err) || airlock.CodeOf(err) != airlock.CodeUnavailable {
		t.Errorf("ping: %v", err)
	}
}

// BenchmarkLimiter: the gate's rate check on Redis (loopback) against the
// process's own limiter.
func BenchmarkLimiter(b *testing.B) {
	srv := fleettest.Start(b)
	f, err := Open(context.Background(), srv.URL(0), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	lim := gate.Limit{Rate: 1e9, Burst: 1 << 30}
	ctx := context.Background()
	b.Run("redis", func(b *testing.B) {
		l := f.Limiter()
		for b.Loop() {
			if ok, _, err := l.Allow(ctx, "bench", lim); !ok || err != nil {
				b.Fatal(ok, err)
			}
		}
	})
	b.Run("local", func(b *testing.B) {
		var l gate.MemoryLimiter
		for b.Loop() {
			if ok, _, err := l.Allow(ctx, "bench", lim); !ok || err != nil {
				b.Fatal(ok, err)
			}
		}
	})
	b.Run("pin", func(b *testing.B) {
		p := f.Pins()
		addrs := []netip.Addr{netip.MustParseAddr("93.184.215.14")}
		for b.Loop() {
			if _, err := p.Pin(ctx, "bench.test", addrs, time.Minute); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func TestJobsConformance(t *testing.T) {
	t.Parallel()
	storetest.RunJobs(t, func(t *testing.T) store.Jobs {
		f := open(t)
		if p, ok := subtestPrefix.Load(t.Name()); ok {
			return f.WithPrefix(p.(string)).Jobs()
		}
		subtestPrefix.Store(t.Name(), f.prefix)
		return f.Jobs()
	})
}
