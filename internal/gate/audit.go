package gate

import (
	"context"
	"errors"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/airlockhq/airlock/internal/store"
)

// Audit limits.
const (
	DefaultRingSize      = 128  // last denials kept in memory, per engine and per principal
	RingStringCap        = 512  // bytes of guest-controlled strings kept in the ring
	PersistStringCap     = 2048 // bytes of guest-controlled strings persisted
	maxRingPrincipals    = 4096 // principals with their own deny ring
	maxBatch             = 2000 // records per store transaction
	defaultAuditInterval = 100 * time.Millisecond
	defaultAuditQueue    = 65536
)

// Record is one broker decision as audited.
type Record = store.AuditRecord

// AuditorConfig configures an Auditor.
type AuditorConfig struct {
	Sink     store.AuditLog // persistent log; nil keeps records in memory only
	Interval time.Duration  // batch interval; 0: 100 ms
	Queue    int            // bounded queue; 0: 65,536
	Logger   *slog.Logger   // one record per decision; nil: none
	Registry prometheus.Registerer
}

// Auditor fans every decision out to the counters, the deny rings, the
// metrics, the structured log and, in batches off the request path, the
// persistent log. Record never blocks: when the queue is full the record is
// dropped from the persistent log only, counted in
// airlock_audit_dropped_total and logged. Close drains the queue.
type Auditor struct {
	cfg AuditorConfig
	// qmu guards queue, the records waiting for the writer: at most
	// cfg.Queue, grown as records come rather than reserved (every CLI
	// call makes an Auditor). wake tells the writer that a batch is full.
	qmu    sync.Mutex
	queue  []Record
	wake   chan struct{}
	stop   chan struct{}
	done   chan struct{}
	closed atomic.Bool

	mu       sync.Mutex
	counters map[statKey]*statEntry
	ring     *ring
	rings    map[string]*ring

	flushReq chan chan error

	dropped     atomic.Int64
	written     atomic.Int64
	lastDropLog atomic.Int64

	calls    *prometheus.CounterVec
	duration *prometheus.HistogramVec
	bytes    *prometheus.CounterVec
	dropCtr  prometheus.Counter
	writeCtr prometheus.Counter
	writeErr prometheus.Counter
}

type statKey struct{ broker, outcome, reason string }

// statEntry is one counter and the metric series of its key, looked up once
// rather than by label values on every decision (the request path).
type statEntry struct {
	n        int64
	calls    prometheus.Counter
	duration prometheus.Observer
	in, out  prometheus.Counter // created on first use
}

// NewAuditor starts the batch writer.
func NewAuditor(cfg AuditorConfig) *Auditor {
	if cfg.Interval <= 0 {
		cfg.Interval = defaultAuditInterval
	}
	if cfg.Queue <= 0 {
		cfg.Queue = defaultAuditQueue
	}
	a := &Auditor{
		cfg:      cfg,
		wake:     make(chan struct{}, 1),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
		counters: map[statKey]*statEntry{},
		ring:     newRing(DefaultRingSize),
		rings:    map[string]*ring{},
		flushReq: make(chan chan error),
	}
	a.calls = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "airlock_broker_calls_total", Help: "Broker calls by broker, outcome and reason."}, []string{"broker", "outcome", "reason"})
	a.duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "airlock_broker_call_duration_seconds", Help: "Broker call latency.", Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10)}, []string{"broker"})
	a.bytes = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "airlock_broker_bytes_total", Help: "Bytes moved by broker calls, by direction (in = from the network)."}, []string{"broker", "direction"})
	a.dropCtr = prometheus.NewCounter(prometheus.CounterOpts{Name: "airlock_audit_dropped_total", Help: "Audit records dropped from the persistent log because the queue was full."})
	a.writeCtr = prometheus.NewCounter(prometheus.CounterOpts{Name: "airlock_audit_written_total", Help: "Audit records written to the persistent log."})
	a.writeErr = prometheus.NewCounter(prometheus.CounterOpts{Name: "airlock_audit_write_errors_total", Help: "Failed batch writes to the persistent audit log (retried)."})
	if cfg.Registry != nil {
		for _, c := range []prometheus.Collector{a.calls, a.duration, a.bytes, a.dropCtr, a.writeCtr, a.writeErr,
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "airlock_audit_queue_length", Help: "Audit records waiting for the persistent log."}, func() float64 { return float64(a.queued()) }),
		} {
			cfg.Registry.MustRegister(c)
		}
	}
	go a.writer()
	return a
}

// Observe adds a decision made by another replica of a fleet to the
// counters and the deny rings, so that they cover the fleet. It neither
// persists the record (the caller stores it) nor counts it in this
// process's metrics (each replica exports its own).
func (a *Auditor) Observe(r Record) {
	a.mu.Lock()
	defer a.mu.Unlock()
	k := statKey{r.Broker, r.Outcome, r.Reason}
	se := a.counters[k]
	if se == nil {
		se = &statEntry{calls: a.calls.WithLabelValues(r.Broker, r.Outcome, r.Reason), duration: a.duration.WithLabelValues(r.Broker)}
		a.counters[k] = se
	}
	se.n++
	if r.Outcome != "allow" {
		a.addDenialLocked(r)
	}
}

// addDenialLocked puts a refusal in the engine-wide ring and its
// principal's. a.mu is held.
func (a *Auditor) addDenialLocked(r Record) {
	rr := r
	rr.Target, rr.Detail = cut(r.Target, RingStringCap), cut(r.Detail, RingStringCap)
	a.ring.add(rr)
	p := principalKey(r.Tenant, r.Instance)
	pr := a.rings[p]
	if pr == nil {
		if len(a.rings) >= maxRingPrincipals {
			for k := range a.rings { // drop an arbitrary one; the engine-wide ring keeps everything
				delete(a.rings, k)
				break
			}
		}
		pr = newRing(DefaultRingSize)
		a.rings[p] = pr
	}
	pr.add(rr)
}

// Record audits one decision.
func (a *Auditor) Record(r Record) {
	r.Target = cut(r.Target, PersistStringCap)
	r.Detail = cut(r.Detail, PersistStringCap)
	k := statKey{r.Broker, r.Outcome, r.Reason}
	a.mu.Lock()
	se := a.counters[k]
	if se == nil {
		se = &statEntry{calls: a.calls.WithLabelValues(r.Broker, r.Outcome, r.Reason), duration: a.duration.WithLabelValues(r.Broker)}
		a.counters[k] = se
	}
	se.n++
	if r.BytesIn > 0 && se.in == nil {
		se.in = a.bytes.WithLabelValues(r.Broker, "in")
	}
	if r.BytesOut > 0 && se.out == nil {
		se.out = a.bytes.WithLabelValues(r.Broker, "out")
	}
	calls, duration, in, out := se.calls, se.duration, se.in, se.out
	if r.Outcome != "allow" {
		a.addDenialLocked(r)
	}
	a.mu.Unlock()
	calls.Inc()
	duration.Observe(float64(r.DurationMS) / 1000)
	if r.BytesIn > 0 {
		in.Add(float64(r.BytesIn))
	}
	if r.BytesOut > 0 {
		out.Add(float64(r.BytesOut))
	}
	level := slog.LevelInfo
	if r.Outcome != "allow" {
		level = slog.LevelWarn
	}
	if l := a.cfg.Logger; l != nil && l.Enabled(context.Background(), level) { // skip building the record for a discarding logger
		l.LogAttrs(context.Background(), level, "broker decision",
			slog.String("decision_id", r.ID),
			slog.String("tenant", r.Tenant),
			slog.String("instance", r.Instance),
			slog.String("broker", r.Broker),
			slog.String("outcome", r.Outcome),
			slog.String("code", r.Code),
			slog.String("reason", r.Reason),
			slog.String("target", cut(r.Target, RingStringCap)),
			slog.String("detail", cut(r.Detail, RingStringCap)),
			slog.Int64("duration_ms", r.DurationMS),
			slog.Int64("bytes_in", r.BytesIn),
			slog.Int64("bytes_out", r.BytesOut),
		)
	}
	if a.closed.Load() {
		a.drop(r, "auditor closed")
		return
	}
	a.qmu.Lock()
	if len(a.queue) >= a.cfg.Queue {
		a.qmu.Unlock()
		a.drop(r, "audit queue full")
		return
	}
	a.queue = append(a.queue, r)
	full := len(a.queue) >= maxBatch
	a.qmu.Unlock()
	if full {
		select {
		case a.wake <- struct{}{}:
		default:
		}
	}
}

// queued returns how many records wait for the writer.
func (a *Auditor) queued() int {
	a.qmu.Lock()
	defer a.qmu.Unlock()
	return len(a.queue)
}

// takeQueue appends the waiting records to batch and empties the queue.
func (a *Auditor) takeQueue(batch []Record) []Record {
	a.qmu.Lock()
	defer a.qmu.Unlock()
	batch = append(batch, a.queue...)
	clear(a.queue) // drop the strings for the GC
	a.queue = a.queue[:0]
	if cap(a.queue) > 2*maxBatch { // a burst is over: give its memory back
		a.queue = nil
	}
	return batch
}

func (a *Auditor) drop(r Record, why string) {
	a.dropped.Add(1)
	a.dropCtr.Inc()
	now := time.Now().Unix()
	if last := a.lastDropLog.Load(); now != last && a.lastDropLog.CompareAndSwap(last, now) && a.cfg.Logger != nil {
		a.cfg.Logger.Error("audit record not persisted", slog.String("why", why), slog.String("decision_id", r.ID), slog.Int64("dropped_total", a.dropped.Load()))
	}
}

// Dropped returns how many records never reached the persistent log.
func (a *Auditor) Dropped() int64 { return a.dropped.Load() }

// Written returns how many records reached the persistent log.
func (a *Auditor) Written() int64 { return a.written.Load() }

func principalKey(tenant, instance string) string {
	if instance == "" {
		return tenant
	}
	return tenant + "/" + instance
}

// Recent returns up to n of the latest denials, newest first: engine-wide
// when principal is "", else for that principal ("tenant" or
// "tenant/instance").
func (a *Auditor) Recent(principal string, n int) []Record {
	a.mu.Lock()
	defer a.mu.Unlock()
	r := a.ring
	if principal != "" {
		r = a.rings[principal]
		if r == nil {
			return nil
		}
	}
	return r.latest(n)
}

// Stat is one counter of the in-memory audit counters.
type Stat = store.AuditStat

// Stats returns the counters since the engine started, largest first.
func (a *Auditor) Stats() []Stat {
	a.mu.Lock()
	out := make([]Stat, 0, len(a.counters))
	for k, v := range a.counters {
		out = append(out, Stat{Broker: k.broker, Outcome: k.outcome, Reason: k.reason, Count: v.n})
	}
	a.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].Count != out[j].Count {
			return out[i].Count > out[j].Count
		}
		if out[i].Broker != out[j].Broker {
			return out[i].Broker < out[j].Broker
		}
		if out[i].Outcome != out[j].Outcome {
			return out[i].Outcome < out[j].Outcome
		}
		return out[i].Reason < out[j].Reason
	})
	return out
}

// Flush blocks until every record recorded before the call is persisted.
func (a *Auditor) Flush(ctx context.Context) error {
	if a.cfg.Sink == nil {
		return nil
	}
	ch := make(chan error, 1)
	select {
	case a.flushReq <- ch:
	case <-a.done:
		return errors.New("gate: auditor closed")
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close stops accepting records, writes what is queued and returns. Records
// that could not be written before ctx ends are counted as dropped.
func (a *Auditor) Close(ctx context.Context) error {
	if !a.closed.CompareAndSwap(false, true) {
		<-a.done
		return nil
	}
	close(a.stop)
	select {
	case <-a.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (a *Auditor) writer() {
	defer close(a.done)
	tick := time.NewTicker(a.cfg.Interval)
	defer tick.Stop()
	var batch []Record
	write := func() error {
		if len(batch) == 0 || a.cfg.Sink == nil {
			batch = batch[:0]
			return nil
		}
		for len(batch) > 0 {
			n := min(len(batch), maxBatch)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			err := a.cfg.Sink.AppendAudit(ctx, batch[:n])
			cancel()
			if err != nil {
				a.writeErr.Inc()
				if a.cfg.Logger != nil {
					a.cfg.Logger.Error("audit batch write failed; will retry", slog.Int("records", len(batch)), slog.String("error", err.Error()))
				}
				if len(batch) > a.cfg.Queue { // keep memory bounded while the store is down
					over := len(batch) - a.cfg.Queue
					for _, r := range batch[:over] {
						a.drop(r, "audit store unavailable")
					}
					batch = append(batch[:0], batch[over:]...)
				}
				return err
			}
			a.written.Add(int64(n))
			a.writeCtr.Add(float64(n))
			batch = append(batch[:0], batch[n:]...)
		}
		return nil
	}
	drain := func() { batch = a.takeQueue(batch) }
	for {
		select {
		case <-a.wake:
			drain()
			write()
		case <-tick.C:
			drain()
			write()
		case ch := <-a.flushReq:
			drain()
			ch <- write()
		case <-a.stop:
			drain()
			for attempt := 0; attempt < 3; attempt++ {
				if write() == nil {
					break
				}
				time.Sleep(a.cfg.Interval)
			}
			for _, r := range batch {
				a.drop(r, "audit store unavailable at shutdown")
			}
			return
		}
	}
}

type ring struct {
	buf  []Record
	next int
	full bool
}

func newRing(n int) *ring { return &ring{buf: make([]Record, n)} }

func (r *ring) add(rec Record) {
	r.buf[r.next] = rec
	r.next = (r.next + 1) % len(r.buf)
	if r.next == 0 {
		r.full = true
	}
}

func (r *ring) latest(n int) []Record {
	size := r.next
	if r.full {
		size = len(r.buf)
	}
	if n <= 0 || n > size {
		n = size
	}
	out := make([]Record, 0, n)
	for i := 1; i <= n; i++ {
		out = append(out, r.buf[(r.next-i+len(r.buf))%len(r.buf)])
	}
	return out
}

// cut truncates s to at most n bytes on a UTF-8 boundary.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && s[i]&0xc0 == 0x80 {
		i--
	}
	return s[:i]
}

// Retain prunes log to retention and maxRows now and every ten minutes,
// until ctx ends.
func Retain(ctx context.Context, log store.AuditLog, retention time.Duration, maxRows int64, logger *slog.Logger) {
	t := time.NewTicker(10 * time.Minute)
	defer t.Stop()
	prune := func() {
		pctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		if _, err := log.PruneAudit(pctx, time.Now().Add(-retention), maxRows); err != nil && ctx.Err() == nil {
			logger.Error("audit retention", slog.String("error", err.Error()))
		}
	}
	prune()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			prune()
		}
	}
}
