package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/browse"
	"github.com/airlockhq/airlock/internal/browser/sessions"
	"github.com/airlockhq/airlock/internal/config"
	"github.com/airlockhq/airlock/internal/crawl"
	"github.com/airlockhq/airlock/internal/doer"
	"github.com/airlockhq/airlock/internal/fleet"
	"github.com/airlockhq/airlock/internal/gate"
	"github.com/airlockhq/airlock/internal/jobs"
	"github.com/airlockhq/airlock/internal/pagecache"
	"github.com/airlockhq/airlock/internal/store"
)

// Option configures New (and Validate).
type Option func(*options)

type options struct {
	logger    *slog.Logger
	getenv    func(string) string
	limiter   gate.RateLimiter
	providers []Provider
}

// WithLogger sets the structured logger (one record per decision). The
// default discards.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithGetenv replaces os.Getenv for reading secrets, route credentials and
// provider keys.
func WithGetenv(f func(string) string) Option { return func(o *options) { o.getenv = f } }

func newOptions(opts []Option) options {
	o := options{getenv: os.Getenv}
	for _, f := range opts {
		f(&o)
	}
	if o.logger == nil {
		o.logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Engine is a running Airlock engine. Its methods are safe for concurrent
// use. Close it to drain calls and flush the audit log.
type Engine struct {
	cfg      Config // with every default filled in
	st       *store.SQLite
	gate     *gate.Gate
	audit    *gate.Auditor
	revs     *gate.RevocationSet
	registry *prometheus.Registry
	routes   map[string]*gate.Route
	browse   *browse.Dispatcher
	tokens   map[string]string // config token hash → tenant
	logger   *slog.Logger
	budgets  *gate.Budgets     // resource budgets (budgets.go)
	jobs     *jobs.Runner      // crawl jobs (jobs.go)
	pages    *pagecache.Cache  // rendered pages read in parts (pages.go)
	doers    *doer.Env         // the requests of calls: doers, the HTTP cache, robots.txt of single fetches
	browser  *sessions.Manager // browser sessions and the render pool (browser.go)

	fleet       *fleet.Fleet // shared state on Redis, or nil (fleet.go)
	fleetRevs   *fleet.ReplicaRevocations
	auditStream *fleet.AuditStream
	replica     string // this replica's name in the fleet
	// state.fallback_local: fallbacks so far, and when one was last audited
	fallbacks fleet.Fallbacks

	// The lifecycle: ctx lives until Close, every background loop of the
	// engine runs in loops under it, and closers undoes what New opened,
	// in reverse.
	ctx     context.Context
	loops   sync.WaitGroup
	closers closers
	closing atomic.Bool // no new calls
	closeMu sync.Mutex
	closed  bool
}

// closers is a stack of shutdown steps: New pushes each one when it opens
// what the step undoes, and Close (or a New that fails part-way) runs them
// last first.
type closers []closer

type closer struct {
	name string
	fn   func(context.Context) error
}

func (s *closers) push(name string, fn func(context.Context) error) {
	*s = append(*s, closer{name, fn})
}

// unwind runs every step, last pushed first, and joins their errors.
func (s *closers) unwind(ctx context.Context) error {
	var errs []error
	for i := len(*s) - 1; i >= 0; i-- {
		c := (*s)[i]
		if err := c.fn(ctx); err != nil {
			errs = append(errs, fmt.Errorf("close %s: %w", c.name, err))
		}
	}
	*s = nil
	return errors.Join(errs...)
}

// Validate compiles a configuration as New does, opening nothing:
// profiles, tenants, token hashes, patterns, secrets (read from the
// environment or their files), routes and their credentials, the
// resolver, the upstream proxies, the TLS profile and the browse providers
// (whose keys are read as New reads them). What New refuses before it
// opens anything, Validate refuses with the same error: invalid, reason
// config.
func Validate(cfg Config, opts ...Option) error {
	o := newOptions(opts)
	_, err := config.Compile(cfg, o.getenv, o.dispatcher(nil))
	return err
}

// New compiles cfg (see Validate), then opens the shared state (Redis,
// with state.redis_url) and the store and starts the engine's background
// loops. ctx bounds the start only (connecting, loading revocations): the
// engine runs until Close. A New that fails part-way closes what it
// opened.
func New(ctx context.Context, cfg Config, opts ...Option) (_ *Engine, err error) {
	o := newOptions(opts)
	p, err := config.Compile(cfg, o.getenv, o.dispatcher(nil))
	if err != nil {
		return nil, err
	}
	cfg = p.Cfg
	e := &Engine{cfg: cfg, logger: o.logger, registry: prometheus.NewRegistry(), tokens: p.Tokens, routes: p.Routes, browse: p.Browse}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // the start's own context
	lctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	e.ctx = lctx
	e.closers.push("context", func(context.Context) error { stop(); return nil })
	defer func() {
		if err != nil {
			e.closers.unwind(context.WithoutCancel(ctx))
		}
	}()

	if e.fleet, err = fleet.Connect(ctx, cfg.State.RedisURL, o.logger); err != nil {
		return nil, err
	}
	if e.fleet != nil {
		e.closers.push("redis", func(context.Context) error { return e.fleet.Close() })
	}
	e.replica = fleet.ReplicaName(cfg.State.Replica)
	e.fallbacks = fleet.Fallbacks{Logger: o.logger, Record: e.recordFallback}
	e.budgets = gate.NewBudgets(p.Budgets)
	e.pages = pagecache.New(pagecache.Config{MaxBytes: cfg.Browse.PageCacheBytes, TTL: cfg.Browse.PageCacheTTL})
	// DNS pins (fleet.PinsFor): a fleet's in Redis, or egress.pin_dns's.
	pins, pinTTL := fleet.PinsFor(e.fleet, cfg.Egress.PinDNS)
	tenants := p.GateTenants(pins, pinTTL, e.budgets, e.logger)
	e.closers.push("idle connections", func(context.Context) error {
		for _, t := range tenants {
			t.Client.CloseIdleConnections()
		}
		return nil
	})

	if err := e.openLog(stop); err != nil {
		return nil, err
	}
	e.doers = &doer.Env{Revoked: func(p airlock.Principal) bool { return e.revs.Revoked(p) }, Budgets: e.budgets, Cache: e.st,
		Robots: crawl.NewRobotsCache(0), Proxy: func(s string) string { return e.browse.Proxy(s) }, UserAgent: crawlerUserAgent(), Logger: o.logger}

	// The poller may call onChange from its goroutine before the gate
	// exists: hand the gate over through an atomic pointer.
	var gp atomic.Pointer[gate.Gate]
	var revStore store.Revocations = e.st
	limiter := o.limiter
	if e.fleet != nil {
		revStore = e.fleetRevocations(e.fleet, o.logger)
		if limiter == nil {
			limiter = e.fleet.FallbackOrShared(e.fallbackNote())
		}
	}
	e.revs, err = gate.NewRevocationSet(ctx, revStore, DefaultRevocationPoll, o.logger, func() {
		if g := gp.Load(); g != nil {
			g.RevocationsChanged()
		}
	})
	if err != nil {
		return nil, airlock.Errorf(airlock.CodeUnavailable, airlock.ReasonStore, "load revocations: %v", err)
	}
	e.closers.push("revocations", func(context.Context) error { e.revs.Close(); return nil })
	if err := e.watchFleet(); err != nil {
		return nil, err
	}
	e.budgets.OnFull(gate.BudgetConnections, "", func() {
		for _, t := range tenants {
			t.Client.ReleaseIdle()
		}
	})
	g := gate.New(gate.Config{Tenants: tenants, Limiter: limiter, Revocations: e.revs, Auditor: e.audit, Logger: o.logger, Connect: p.Connect})
	gp.Store(g)
	e.gate = g
	e.browser = sessions.OnGate(e.ctx, cfg, sessions.Gate{Gate: g, Audit: e.audit, Revs: e.revs, Budgets: e.budgets, Narrow: browse.Narrowing},
		browserOwners(e.fleet, e.replica, o.logger), o.logger)
	e.closers.push("browser sessions", func(ctx context.Context) error { e.browser.Close(ctx); return nil })
	// compile built the same dispatcher to validate it: this cannot fail.
	if e.browse, err = o.dispatcher(e.browser)(cfg.Browse); err != nil {
		return nil, config.Errorf("%v", err)
	}
	e.closers.push("calls in flight", func(ctx context.Context) error { g.Drain(ctx, errShuttingDown(), DefaultDrainTimeout); return nil })

	e.registerMetrics()
	e.startJobs(e.ctx)
	e.closers.push("crawl jobs", func(ctx context.Context) error { e.jobs.Close(ctx); return nil })
	e.loops.Go(func() { gate.Retain(e.ctx, e.st, cfg.Audit.Retention, cfg.Audit.MaxRows, e.logger) })
	return e, nil
}

// openLog opens the store and the audit pipeline on it (with a fleet, the
// replica's own log teed to the audit stream), and pushes their closers
// and, above them, stopping the loops (stop cancels the engine's
// context), which use both.
func (e *Engine) openLog(stop context.CancelFunc) error {
	cfg := e.cfg
	var err error
	if cfg.InMemory {
		e.st, err = store.OpenMemory()
	} else {
		e.st, err = store.Open(filepath.Join(cfg.DataDir, "airlock.db"))
	}
	if err != nil {
		return airlock.Errorf(airlock.CodeUnavailable, airlock.ReasonStore, "open the store in %s: %v", cfg.DataDir, err)
	}
	e.closers.push("store", func(context.Context) error { return e.st.Close() })
	var sink store.AuditLog = e.st
	if e.fleet != nil {
		e.auditStream = e.fleet.AuditStream(e.replica)
		sink = &fleet.TeeAudit{AuditLog: e.st, Stream: e.auditStream, Logger: e.logger}
	}
	e.audit = gate.NewAuditor(gate.AuditorConfig{Sink: sink, Interval: cfg.Audit.BatchInterval, Queue: cfg.Audit.QueueSize, Logger: e.logger, Registry: e.registry})
	e.closers.push("audit log", func(ctx context.Context) error {
		flushCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), DefaultDrainTimeout)
		defer cancel()
		return e.audit.Close(flushCtx)
	})
	e.closers.push("loops", func(context.Context) error {
		stop()
		e.loops.Wait()
		return nil
	})
	return nil
}

// registerMetrics registers the build info, the budgets, the Go and
// process collectors, the calls in flight and, with a fleet, Redis's.
func (e *Engine) registerMetrics() {
	bi := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "airlock_build_info", Help: "Build information; always 1."}, []string{"version", "goversion"})
	bi.WithLabelValues(Version, runtime.Version()).Set(1)
	if e.fleet != nil {
		// A fresh registry: registering cannot collide.
		if err := e.fleet.Register(e.registry); err != nil {
			e.logger.Error("redis metrics not registered", slog.String("error", err.Error()))
		}
	}
	g := e.gate
	e.registry.MustRegister(bi, e.budgets,
		&lazyCollector{new: func() prometheus.Collector { return collectors.NewGoCollector() }},
		&lazyCollector{new: func() prometheus.Collector { return collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}) }},
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "airlock_broker_calls_in_flight", Help: "Broker calls in progress."}, func() float64 { return float64(g.Active()) }))
}

// lazyCollector builds its collector on the first Collect, so that an
// engine whose metrics are never read (every CLI verb's) does not build
// the Go and process collectors at start. It describes nothing, which
// makes it an unchecked collector: the registry checks its metrics when
// they are gathered instead of when it is registered.
type lazyCollector struct {
	once sync.Once
	new  func() prometheus.Collector
	c    prometheus.Collector
}

func (l *lazyCollector) Describe(chan<- *prometheus.Desc) {}

func (l *lazyCollector) Collect(ch chan<- prometheus.Metric) {
	l.once.Do(func() { l.c = l.new() })
	l.c.Collect(ch)
}

// Close stops taking calls, stops the crawl jobs, waits for calls in
// flight (until ctx ends, then cancels them), closes the browser sessions,
// stops the background loops, flushes the audit log and closes the store
// and the shared state: what New opened, in reverse. Closing again does
// nothing.
func (e *Engine) Close(ctx context.Context) error {
	e.closeMu.Lock()
	defer e.closeMu.Unlock()
	if e.closed {
		return nil
	}
	e.closed = true
	e.closing.Store(true)
	return e.closers.unwind(ctx)
}
