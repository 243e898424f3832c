// Package gatetest is the conformance suite for implementations of
// gate.RateLimiter: the in-process limiter and the fleet's Redis limiter
// run the same tests, so that a limit means the same on one replica or
// many.
package gatetest

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockhq/airlock/internal/gate"
)

// RunLimiter checks a RateLimiter. newLimiter returns a limiter with no
// buckets in use for each subtest.
func RunLimiter(t *testing.T, newLimiter func(t *testing.T) gate.RateLimiter) {
	ctx := context.Background()

	t.Run("burst and retry-after", func(t *testing.T) {
		for _, tt := range []struct {
			name     string
			limit    gate.Limit
			allowed  int
			attempts int
			maxRetry time.Duration
		}{
			{"burst 5 at 5/s", gate.Limit{Rate: 5, Burst: 5}, 5, 8, 200 * time.Millisecond},
			{"burst 1 at 2/s", gate.Limit{Rate: 2, Burst: 1}, 1, 3, 500 * time.Millisecond},
			// Burst < 1: the rate's worth of calls at once.
			{"burst 0 at 3/s", gate.Limit{Rate: 3}, 3, 5, 334 * time.Millisecond},
			{"one per 100 s", gate.Limit{Rate: 0.01, Burst: 1}, 1, 3, 100 * time.Second},
			{"zero rate is unlimited", gate.Limit{}, 500, 500, 0},
		} {
			t.Run(tt.name, func(t *testing.T) {
				l := newLimiter(t)
				got := 0
				for i := range tt.attempts {
					ok, retry, err := l.Allow(ctx, "k", tt.limit)
					if err != nil {
						t.Fatalf("Allow: %v", err)
					}
					if ok {
						got++
						if retry != 0 {
							t.Errorf("call %d allowed with retry-after %s, want 0", i, retry)
						}
						continue
					}
					if retry <= 0 || retry > tt.maxRetry {
						t.Errorf("call %d refused with retry-after %s, want in (0, %s]", i, retry, tt.maxRetry)
					}
					if tt.limit.Rate < 1 && retry < tt.maxRetry*9/10 {
						t.Errorf("call %d: retry-after %s, want about %s", i, retry, tt.maxRetry)
					}
				}
				if got != tt.allowed {
					t.Errorf("allowed %d of %d immediate calls, want %d", got, tt.attempts, tt.allowed)
				}
			})
		}
	})

	t.Run("keys independent", func(t *testing.T) {
		l := newLimiter(t)
		lim := gate.Limit{Rate: 1, Burst: 2}
		for _, key := range []string{"tenant:a", "tenant:b", "connect:a/1"} {
			for i := range 2 {
				if ok, _, err := l.Allow(ctx, key, lim); !ok || err != nil {
					t.Errorf("%s: call %d refused (%v), want allowed: keys must not share a bucket", key, i, err)
				}
			}
			if ok, _, _ := l.Allow(ctx, key, lim); ok {
				t.Errorf("%s: third call allowed, want refused", key)
			}
		}
	})

	// A refused call uses up no token: waiting the retry-after it was given
	// is enough, however many refusals came in between.
	t.Run("refusals consume nothing", func(t *testing.T) {
		l := newLimiter(t)
		lim := gate.Limit{Rate: 20, Burst: 1}
		if ok, _, err := l.Allow(ctx, "k", lim); !ok || err != nil {
			t.Fatalf("first call refused: %v", err)
		}
		var retry time.Duration
		for range 20 {
			ok, r, err := l.Allow(ctx, "k", lim)
			if ok || err != nil {
				t.Fatalf("call within the same instant allowed past a burst of 1 (%v)", err)
			}
			retry = r
		}
		time.Sleep(retry + 20*time.Millisecond)
		if ok, r, _ := l.Allow(ctx, "k", lim); !ok {
			t.Errorf("call after waiting the retry-after refused (retry %s): refusals consumed tokens", r)
		}
	})

	t.Run("concurrent", func(t *testing.T) {
		l := newLimiter(t)
		lim := gate.Limit{Rate: 0.001, Burst: 100} // no refill within the test
		var allowed atomic.Int64
		var wg sync.WaitGroup
		for range 20 {
			wg.Go(func() {
				for range 20 {
					if ok, _, err := l.Allow(ctx, "shared", lim); ok && err == nil {
						allowed.Add(1)
					}
				}
			})
		}
		wg.Wait()
		if got := allowed.Load(); got != 100 {
			t.Errorf("allowed %d of 400 concurrent calls, want exactly the burst of 100", got)
		}
	})

	// Concurrent callers get no more than burst + rate × elapsed, refill
	// included.
	t.Run("concurrent refill", func(t *testing.T) {
		l := newLimiter(t)
		lim := gate.Limit{Rate: 200, Burst: 50}
		var allowed atomic.Int64
		start := time.Now()
		stop := start.Add(300 * time.Millisecond)
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for time.Now().Before(stop) {
					if ok, _, _ := l.Allow(ctx, "k", lim); ok {
						allowed.Add(1)
					}
				}
			})
		}
		wg.Wait()
		elapsed := time.Since(start)
		ceiling := int64(lim.Burst) + int64(lim.Rate*elapsed.Seconds()) + 1
		if got := allowed.Load(); got > ceiling {
			t.Errorf("allowed %d calls in %s, want at most burst %d + %v/s = %d", got, elapsed.Round(time.Millisecond), lim.Burst, lim.Rate, ceiling)
		}
	})
}
