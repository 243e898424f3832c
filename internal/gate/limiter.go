package gate

import (
	"context"
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Limit is a token bucket: Rate tokens per second, up to Burst at once.
// A zero Rate means no limit.
type Limit struct {
	Rate  float64
	Burst int
}

// RateLimiter takes one token for key under limit. When it refuses, it
// says how long until a token is available. Implementations must be safe
// for concurrent use; a shared one (Redis GCRA) makes a limit fleet-wide.
type RateLimiter interface {
	Allow(ctx context.Context, key string, limit Limit) (ok bool, retryAfter time.Duration, err error)
}

// MemoryLimiter is a RateLimiter for one process. The zero value is ready.
type MemoryLimiter struct {
	mu sync.Mutex
	m  map[string]*limEntry
}

type limEntry struct {
	// mu serialises reading the clock with the reservation: rate.Limiter
	// trusts its callers' times to be in order, and over-grants (refills
	// the same interval again) when concurrent callers hand it a time
	// earlier than one it has already seen.
	mu   sync.Mutex
	lim  *rate.Limiter
	at   Limit
	used time.Time // guarded by MemoryLimiter.mu
}

const maxLimiterKeys = 100000

// Allow implements RateLimiter.
func (l *MemoryLimiter) Allow(_ context.Context, key string, limit Limit) (bool, time.Duration, error) {
	if limit.Rate <= 0 {
		return true, 0, nil
	}
	now := time.Now()
	l.mu.Lock()
	if l.m == nil {
		l.m = map[string]*limEntry{}
	}
	e := l.m[key]
	if e == nil || e.at != limit {
		if len(l.m) >= maxLimiterKeys {
			l.sweepLocked(now)
		}
		burst := limit.Burst
		if burst < 1 {
			burst = int(math.Max(1, limit.Rate))
		}
		e = &limEntry{lim: rate.NewLimiter(rate.Limit(limit.Rate), burst), at: limit}
		l.m[key] = e
	}
	e.used = now
	l.mu.Unlock()
	e.mu.Lock()
	defer e.mu.Unlock()
	now = time.Now()
	if e.lim.AllowN(now, 1) { // the common case, without a reservation to allocate
		return true, 0, nil
	}
	r := e.lim.ReserveN(now, 1)
	if !r.OK() {
		return false, time.Second, nil
	}
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d, nil
	}
	return true, 0, nil
}

// sweepLocked drops buckets idle long enough to be full again.
func (l *MemoryLimiter) sweepLocked(now time.Time) {
	for k, e := range l.m {
		if now.Sub(e.used) > time.Minute {
			delete(l.m, k)
		}
	}
}
