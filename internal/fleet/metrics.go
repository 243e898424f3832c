package fleet

import (
	"context"
	"errors"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
)

// metricsHook observes every Redis command and pipeline: latency, and
// failures (a missing key, redis.Nil, is an answer, not a failure).
type metricsHook struct {
	duration *prometheus.HistogramVec
	errors   *prometheus.CounterVec
}

// Register adds the fleet's Redis metrics to reg:
// airlock_redis_command_duration_seconds{command} and
// airlock_redis_errors_total{command}. Call it once.
func (f *Fleet) Register(reg prometheus.Registerer) error {
	h := &metricsHook{
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "airlock_redis_command_duration_seconds",
			Help: "Latency of the shared state's Redis commands (a pipeline counts as one).", Buckets: prometheus.ExponentialBuckets(0.0001, 4, 9)}, []string{"command"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "airlock_redis_errors_total",
			Help: "Failed Redis commands of the shared state (connection, timeout, server errors)."}, []string{"command"}),
	}
	for _, c := range []prometheus.Collector{h.duration, h.errors} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	f.rdb.AddHook(h)
	return nil
}

func (h *metricsHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := next(ctx, network, addr)
		if err != nil {
			h.errors.WithLabelValues("dial").Inc()
		}
		return c, err
	}
}

func (h *metricsHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		start := time.Now()
		err := next(ctx, cmd)
		h.observe(cmd.Name(), start, err)
		return err
	}
}

func (h *metricsHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		start := time.Now()
		err := next(ctx, cmds)
		h.observe("pipeline", start, err)
		return err
	}
}

func (h *metricsHook) observe(name string, start time.Time, err error) {
	h.duration.WithLabelValues(name).Observe(time.Since(start).Seconds())
	if err != nil && !errors.Is(err, redis.Nil) {
		h.errors.WithLabelValues(name).Inc()
	}
}
