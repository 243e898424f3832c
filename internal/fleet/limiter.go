package fleet

import (
	"context"
	"math"
	"time"

	"github.com/go-redis/redis_rate/v10"

	"github.com/airlockhq/airlock/internal/gate"
)

// Limiter is a gate.RateLimiter whose buckets live in Redis (GCRA), so a
// limit holds across every replica. A Redis failure is an error, which the
// gate refuses as unavailable.
type Limiter struct {
	rl *redis_rate.Limiter
	f  *Fleet
}

// Limiter returns the fleet-wide rate limiter.
func (f *Fleet) Limiter() *Limiter { return &Limiter{rl: redis_rate.NewLimiter(f.rdb), f: f} }

// Allow implements gate.RateLimiter with the semantics of
// gate.MemoryLimiter: Rate tokens per second, Burst at once (at least 1,
// and at least Rate when Burst is 0), a refusal consumes nothing and says
// how long until the next token.
func (l *Limiter) Allow(ctx context.Context, key string, limit gate.Limit) (bool, time.Duration, error) {
	if limit.Rate <= 0 {
		return true, 0, nil
	}
	burst := limit.Burst
	if burst < 1 {
		burst = int(math.Max(1, limit.Rate))
	}
	// GCRA's emission interval is Period/Rate: one token per 1/Rate s.
	period := time.Duration(float64(time.Second) / limit.Rate)
	if period < time.Microsecond {
		period = time.Microsecond
	}
	res, err := l.rl.Allow(ctx, l.f.key("rate", key), redis_rate.Limit{Rate: 1, Period: period, Burst: burst})
	if err != nil {
		return false, 0, unavailable("rate limit", err)
	}
	if res.Allowed > 0 {
		return true, 0, nil
	}
	retry := res.RetryAfter
	if retry <= 0 {
		retry = period
	}
	return false, retry, nil
}

var _ gate.RateLimiter = (*Limiter)(nil)

// FallbackLimiter asks Shared (Redis) and, when Shared fails, the
// process's own Local limiter (state.fallback_local), telling Note of
// each fallback.
type FallbackLimiter struct {
	Shared gate.RateLimiter
	Local  *gate.MemoryLimiter
	Note   func(what string, err error)
}

// Allow implements gate.RateLimiter.
func (l *FallbackLimiter) Allow(ctx context.Context, key string, limit gate.Limit) (bool, time.Duration, error) {
	ok, retry, err := l.Shared.Allow(ctx, key, limit)
	if err == nil {
		return ok, retry, nil
	}
	l.Note("rate limit "+key, err)
	return l.Local.Allow(ctx, key, limit)
}
