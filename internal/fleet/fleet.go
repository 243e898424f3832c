// Package fleet is the shared state that makes many `airlock serve`
// replicas behave as one, on Redis (or Valkey): a GCRA rate limiter, the
// revocation set with change notification, and one pinned DNS answer per
// name for the whole fleet. Each is a second implementation of a small
// interface the embedded default already has (gate.RateLimiter,
// store.Revocations, egress.PinStore).
//
// Redis trouble never widens access: every failure is an error that the
// gate turns into unavailable (the limiter, the pins), and the revocation
// set is refused as stale when it cannot be refreshed (see
// gate.RevocationSet).
package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/egress"
)

// Timeouts of the Redis client: short, because every broker call may wait
// on them and a slow Redis must turn into unavailable, not into latency.
const (
	DialTimeout = 2 * time.Second
	IOTimeout   = time.Second
)

// KeyPrefix starts every key this package writes.
const KeyPrefix = "airlock:"

// Fleet is a connection to the shared Redis.
type Fleet struct {
	rdb    *redis.Client
	prefix string
	logger *slog.Logger
}

// Open connects to the Redis at rawURL (redis://[user:pass@]host:port/db
// or rediss:// for TLS) and checks it answers. Errors: invalid
// (redis_url), unavailable (redis).
func Open(ctx context.Context, rawURL string, logger *slog.Logger) (*Fleet, error) {
	opts, err := redis.ParseURL(rawURL)
	if err != nil {
		return nil, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonRedisURL, "state.redis_url: %v", err)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	setLogger.Do(func() { redis.SetLogger(redisLogger{logger}) })
	opts.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
		return egress.DialInfrastructure(ctx, network, addr)
	}
	opts.DialTimeout = DialTimeout
	opts.ReadTimeout = IOTimeout
	opts.WriteTimeout = IOTimeout
	opts.PoolTimeout = IOTimeout
	opts.MaxRetries = 1
	opts.ClientName = "airlock"
	f := &Fleet{rdb: redis.NewClient(opts), prefix: KeyPrefix, logger: logger}
	pctx, cancel := context.WithTimeout(ctx, DialTimeout)
	defer cancel()
	if err := f.Ping(pctx); err != nil {
		f.rdb.Close()
		return nil, err
	}
	return f, nil
}

// Ping checks that Redis answers. Errors: unavailable (redis).
func (f *Fleet) Ping(ctx context.Context) error {
	if err := f.rdb.Ping(ctx).Err(); err != nil {
		return unavailable("ping", err)
	}
	return nil
}

// Close closes the connections.
func (f *Fleet) Close() error { return f.rdb.Close() }

// Client is the Redis client, for tests and metrics.
func (f *Fleet) Client() *redis.Client { return f.rdb }

func (f *Fleet) key(parts ...string) string { return f.prefix + strings.Join(parts, ":") }

// unavailable wraps a Redis failure in the vocabulary.
func unavailable(op string, err error) error {
	var ae *airlock.Error
	if errors.As(err, &ae) {
		return err
	}
	return airlock.Errorf(airlock.CodeUnavailable, airlock.ReasonRedis, "shared state (Redis) %s: %v", op, err)
}

// setLogger routes go-redis's own log (a package-level setting) to the
// first fleet's logger, at debug level: failures reach callers as errors.
var setLogger sync.Once

type redisLogger struct{ l *slog.Logger }

func (r redisLogger) Printf(ctx context.Context, format string, v ...any) {
	r.l.DebugContext(ctx, "redis: "+fmt.Sprintf(format, v...))
}

// String names the Redis the fleet uses, without credentials.
func (f *Fleet) String() string {
	o := f.rdb.Options()
	return fmt.Sprintf("redis %s db %d", o.Addr, o.DB)
}

// WithPrefix returns the fleet with its keys under another prefix (tests
// and several deployments sharing one Redis); it shares the connections.
func (f *Fleet) WithPrefix(prefix string) *Fleet {
	c := *f
	c.prefix = prefix
	return &c
}
