package gate

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestMemoryLimiterBurstAndRetry(t *testing.T) {
	tests := []struct {
		name      string
		limit     Limit
		allowed   int // immediate calls allowed out of attempts
		attempts  int
		maxRetry  time.Duration // upper bound of the retry-after of a refusal
		unlimited bool
	}{
		{name: "burst 5 at 5/s", limit: Limit{Rate: 5, Burst: 5}, allowed: 5, attempts: 8, maxRetry: 200 * time.Millisecond},
		{name: "burst 1 at 2/s", limit: Limit{Rate: 2, Burst: 1}, allowed: 1, attempts: 3, maxRetry: 500 * time.Millisecond},
		// Burst < 1 means the rate's worth of calls at once.
		{name: "burst 0 at 3/s", limit: Limit{Rate: 3}, allowed: 3, attempts: 5, maxRetry: 334 * time.Millisecond},
		{name: "zero rate is unlimited", limit: Limit{}, allowed: 1000, attempts: 1000, unlimited: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var l MemoryLimiter
			ctx := context.Background()
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
			}
			if got != tt.allowed {
				t.Errorf("allowed %d of %d immediate calls, want %d", got, tt.attempts, tt.allowed)
			}
		})
	}
}

func TestMemoryLimiterKeysIndependent(t *testing.T) {
	var l MemoryLimiter
	ctx := context.Background()
	lim := Limit{Rate: 1, Burst: 2}
	for _, key := range []string{"tenant:a", "tenant:b", "connect:a/1"} {
		for i := range 2 {
			if ok, _, _ := l.Allow(ctx, key, lim); !ok {
				t.Errorf("%s: call %d refused, want allowed (other keys must not share the bucket)", key, i)
			}
		}
		if ok, _, _ := l.Allow(ctx, key, lim); ok {
			t.Errorf("%s: third call allowed, want refused", key)
		}
	}
}

// A refused call must not use up a token: waiting the retry-after it was
// given is enough, however many refusals came in between.
func TestMemoryLimiterRefusalsDoNotConsume(t *testing.T) {
	var l MemoryLimiter
	ctx := context.Background()
	lim := Limit{Rate: 20, Burst: 1}
	if ok, _, _ := l.Allow(ctx, "k", lim); !ok {
		t.Fatal("first call refused")
	}
	var retry time.Duration
	for range 20 {
		ok, r, _ := l.Allow(ctx, "k", lim)
		if ok {
			t.Fatal("call within the same instant allowed past a burst of 1")
		}
		retry = r
	}
	time.Sleep(retry + 10*time.Millisecond)
	if ok, r, _ := l.Allow(ctx, "k", lim); !ok {
		t.Errorf("call after waiting the retry-after refused (retry %s): refusals consumed tokens", r)
	}
}

// A changed limit for a key (a config reload) starts a fresh bucket.
func TestMemoryLimiterLimitChange(t *testing.T) {
	var l MemoryLimiter
	ctx := context.Background()
	l.Allow(ctx, "k", Limit{Rate: 1, Burst: 1})
	if ok, _, _ := l.Allow(ctx, "k", Limit{Rate: 1, Burst: 1}); ok {
		t.Fatal("second call allowed past a burst of 1")
	}
	if ok, _, _ := l.Allow(ctx, "k", Limit{Rate: 1, Burst: 3}); !ok {
		t.Error("call under a new, larger limit refused")
	}
}

func TestMemoryLimiterConcurrent(t *testing.T) {
	var l MemoryLimiter
	ctx := context.Background()
	lim := Limit{Rate: 0.001, Burst: 1000} // no refill within the test
	var allowed atomic.Int64
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			for range 100 {
				if ok, _, _ := l.Allow(ctx, "shared", lim); ok {
					allowed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if got := allowed.Load(); got != 1000 {
		t.Errorf("allowed %d of 5000 concurrent calls, want exactly the burst of 1000", got)
	}
}

// The key table is bounded: idle buckets are swept when it is full.
func TestMemoryLimiterSweep(t *testing.T) {
	var l MemoryLimiter
	ctx := context.Background()
	lim := Limit{Rate: 10, Burst: 10}
	l.Allow(ctx, "old", lim)
	l.Allow(ctx, "fresh", lim)
	l.mu.Lock()
	l.m["old"].used = time.Now().Add(-2 * time.Minute)
	for i := len(l.m); i < maxLimiterKeys; i++ {
		l.m["filler-"+strconv.Itoa(i)] = &limEntry{at: lim, used: time.Now().Add(-2 * time.Minute)}
	}
	l.mu.Unlock()
	l.Allow(ctx, "new", lim)
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.m["old"]; ok {
		t.Error("an idle bucket survived the sweep of a full table")
	}
	if _, ok := l.m["fresh"]; !ok {
		t.Error("a recently used bucket was swept")
	}
	if len(l.m) > maxLimiterKeys {
		t.Errorf("table holds %d keys, want at most %d", len(l.m), maxLimiterKeys)
	}
}

// Concurrent callers must not get more than burst + rate × elapsed between
// them, refill included (x/time/rate over-grants when it is handed times
// out of order, which concurrent callers do unless the limiter serialises
// reading the clock with the reservation).
func TestMemoryLimiterConcurrentRefill(t *testing.T) {
	var l MemoryLimiter
	ctx := context.Background()
	lim := Limit{Rate: 200, Burst: 50}
	var allowed atomic.Int64
	start := time.Now()
	stop := start.Add(300 * time.Millisecond)
	var wg sync.WaitGroup
	for range 16 {
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
}
