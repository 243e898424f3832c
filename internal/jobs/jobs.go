// Package jobs owns crawl jobs: crawls that run in the background under a
// principal and keep their pages in a store.Jobs, where they outlive the
// process. A Runner starts, reads, lists, pages, cancels and watches them,
// renews the leases of the jobs it runs, marks interrupted the jobs whose
// process died, prunes old ones and, with a fleet, works the crawl jobs
// every replica shares (fleet.go).
//
// The Runner does not crawl: its Crawler runs one crawl as a principal
// (the engine's gate call and browse dispatcher). It holds no engine.
package jobs

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/egress"
	"github.com/airlockhq/airlock/internal/browse"
	"github.com/airlockhq/airlock/internal/crawl"
	"github.com/airlockhq/airlock/internal/fleet"
	"github.com/airlockhq/airlock/internal/gate"
	"github.com/airlockhq/airlock/internal/store"
)

// Crawl job limits and timings.
const (
	// MaxJobPages is the most pages one crawl job stores: a request asking
	// for more is too_large, and a provider that emits more fails the job
	// (too_large) with the pages gathered kept.
	MaxJobPages = 10_000
	// MaxRunningJobs is how many crawl jobs one tenant may run at once in
	// one runner; one more is rate_limited.
	MaxRunningJobs = 4
	// DefaultJobPageLimit and MaxJobPageLimit bound Pages and List.
	DefaultJobPageLimit = 50
	MaxJobPageLimit     = 500
	// DefaultJobRetention: finished jobs, and their pages, are deleted this
	// long after they finished.
	DefaultJobRetention = 7 * 24 * time.Hour
	// DefaultJobLease is how long a runner vouches for the jobs it runs
	// without renewing (it renews every third of it). A job whose lease
	// passed belongs to a process that died: any runner on the store marks
	// it interrupted (at New, on its sweeps, or when the job is read).
	DefaultJobLease = 30 * time.Second
)

// StoppedInterrupted is CrawlSummary.Stopped of an interrupted job, and
// StoppedCancelled that of a cancelled one.
const (
	StoppedInterrupted = "interrupted"
	StoppedCancelled   = "cancelled"
)

const (
	jobRenewEvery    = DefaultJobLease / 3
	jobProgressEvery = time.Second            // at most one progress write per second per job
	jobPollInterval  = 500 * time.Millisecond // watchers of jobs run by another process
	jobPruneEvery    = time.Hour
	jobWatchBuffer   = 16
	jobReplayBatch   = 100
	jobStoreTimeout  = 10 * time.Second
)

// Crawler runs crawls as principals: the engine's gate and browse
// dispatcher, as the Runner sees them. Every field is required.
type Crawler struct {
	// Begin begins the broker call of one run of a crawl job (capability
	// browse, broker crawl), audited with target, on ctx: the run's own
	// context, which the Runner cancels.
	Begin func(ctx context.Context, p airlock.Principal, target string) (*gate.Call, error)
	// Prepare gives req the tenant's defaults and refuses, before anything
	// runs, what the crawl would refuse at its start and what is larger
	// than a job may be (MaxJobPages).
	Prepare func(call *gate.Call, req airlock.CrawlRequest) (airlock.CrawlRequest, error)
	// Run runs req's crawl in call, as Engine.Crawl does: shared, when not
	// nil, is the fleet's state of a shared job (join: another replica
	// seeded it). It returns the bytes read, for call.End.
	Run func(call *gate.Call, shared crawl.Shared, join bool, req airlock.CrawlRequest,
		emit func(*airlock.Page) error, progress func(airlock.CrawlProgress)) (*airlock.CrawlSummary, int64, error)
	// Shareable reports whether req's provider can work a crawl whose
	// state is the fleet's (the native and chromium crawlers).
	Shareable func(req airlock.CrawlRequest) bool
}

// Fleet is the shared crawl state of several replicas (*fleet.Fleet).
type Fleet interface {
	Crawl(id string, lease time.Duration) *fleet.Crawl
	ActiveCrawls(ctx context.Context) ([]string, error)
}

// Config is what a Runner needs. Store, Crawler, NewID, CheckReader and
// Limits are required.
type Config struct {
	// Store keeps the jobs and their pages. With a Fleet it must number
	// pages itself (AppendNextJobPage, as fleet.Jobs does) for a job to be
	// shared.
	Store   store.Jobs
	Crawler Crawler
	// Fleet, when not nil, shares the jobs of shareable crawls with the
	// other replicas; Replica names this one, and CrawlLease is how long
	// it holds a URL of a shared crawl (0: fleet.DefaultCrawlLease).
	Fleet      Fleet
	Replica    string
	CrawlLease time.Duration
	// NewID makes job ids (the gate's ULIDs).
	NewID func() string
	// CheckReader refuses a principal that may not read or cancel jobs:
	// the gate's checks that spend no rate (bad principal, unknown
	// tenant, revoked).
	CheckReader func(p airlock.Principal) error
	// Limits returns a tenant's ceilings (nil: the defaults).
	Limits func(tenant string) *gate.Limits
	// DrainTimeout bounds how long Close waits for the runs once its
	// context has ended.
	DrainTimeout time.Duration
	// Logger defaults to discarding.
	Logger *slog.Logger
}

// Runner runs crawl jobs. Its methods are safe for concurrent use; Close
// stops it.
type Runner struct {
	cfg      Config
	store    store.Jobs
	crawler  Crawler
	fleet    Fleet
	logger   *slog.Logger
	owner    string             // this runner's id in the store
	ctx      context.Context    // the runner's: its loops and watchers end with it
	stop     context.CancelFunc // cancels ctx (Close)
	loops    sync.WaitGroup     // the sweeper, the fleet loop, the watchers
	runsDone sync.WaitGroup     // job goroutines

	mu      sync.Mutex
	runs    map[string]*jobRun
	running map[string]int // by tenant
	closed  bool
}

// New marks interrupted the jobs whose process died and starts the
// Runner's loops on ctx (which Close cancels).
func New(ctx context.Context, cfg Config) *Runner {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, stop := context.WithCancel(ctx)
	r := &Runner{cfg: cfg, store: cfg.Store, crawler: cfg.Crawler, fleet: cfg.Fleet, logger: cfg.Logger,
		owner: cfg.NewID(), ctx: ctx, stop: stop, runs: map[string]*jobRun{}, running: map[string]int{}}
	sctx, cancel := context.WithTimeout(ctx, jobStoreTimeout)
	defer cancel()
	r.expire(sctx)
	r.loops.Go(r.sweep)
	if r.fleet != nil {
		r.loops.Go(r.fleetLoop)
	}
	return r
}

// Close cancels the running jobs, which store themselves as interrupted,
// and waits for them until ctx ends (then for at most DrainTimeout more);
// then it stops the loops and watchers and waits for them. A job that
// could not store its state is marked interrupted by the next runner once
// its lease passes.
func (r *Runner) Close(ctx context.Context) {
	r.mu.Lock()
	r.closed = true
	for _, run := range r.runs {
		run.cancel(errShuttingDown())
	}
	r.mu.Unlock()
	done := make(chan struct{})
	go func() {
		r.runsDone.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		t := time.NewTimer(r.cfg.DrainTimeout)
		select {
		case <-done:
		case <-t.C:
		}
		t.Stop()
	}
	r.stop()
	r.loops.Wait()
}

// jobRun is one job this runner runs.
type jobRun struct {
	id, tenant string
	ctx        context.Context // detached from the starter's; cancelled by Cancel and Close
	cancel     context.CancelCauseFunc
	done       chan struct{} // closed after the final state is stored

	// A run of a job shared by the fleet (fleet.go): its crawl state, this
	// run's name among the job's runs, and whether it joined a job another
	// replica started.
	shared  *fleet.Crawl
	runName string
	join    bool

	mu       sync.Mutex
	progress *airlock.CrawlProgress
	subs     map[chan struct{}]struct{}
}

func newRun(ctx context.Context, cancel context.CancelCauseFunc, id, tenant string) *jobRun {
	return &jobRun{id: id, tenant: tenant, ctx: ctx, cancel: cancel, done: make(chan struct{}), subs: map[chan struct{}]struct{}{}}
}

// notify wakes the job's watchers without ever waiting for them.
func (j *jobRun) notify() {
	j.mu.Lock()
	defer j.mu.Unlock()
	for c := range j.subs {
		select {
		case c <- struct{}{}:
		default:
		}
	}
}

func (j *jobRun) latest() *airlock.CrawlProgress {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.progress
}

// sweep renews this runner's leases, expires those of dead processes and
// prunes old jobs, until the runner's context ends.
func (r *Runner) sweep() {
	t := time.NewTicker(jobRenewEvery)
	defer t.Stop()
	var pruned time.Time
	for {
		// A sweep under way completes: its writes are bounded on their own.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), jobStoreTimeout)
		r.mu.Lock()
		owners := map[string]bool{}
		for _, run := range r.runs {
			if run.shared != nil {
				owners[fleetJobOwner(run.id)] = true
			} else {
				owners[r.owner] = true
			}
		}
		r.mu.Unlock()
		for owner := range owners {
			if _, err := r.store.RenewJobs(ctx, owner, time.Now().Add(DefaultJobLease)); err != nil {
				r.logger.Error("crawl jobs: renew leases", slog.String("error", err.Error()))
			}
		}
		r.expire(ctx)
		if time.Since(pruned) >= jobPruneEvery {
			pruned = time.Now()
			if _, err := r.store.PruneJobs(ctx, pruned.Add(-DefaultJobRetention)); err != nil {
				r.logger.Error("crawl jobs: retention", slog.String("error", err.Error()))
			}
		}
		cancel()
		select {
		case <-r.ctx.Done():
			return
		case <-t.C:
		}
	}
}

// expire marks interrupted every unfinished job whose lease passed.
func (r *Runner) expire(ctx context.Context) {
	now := time.Now()
	ids, err := r.store.ExpireJobs(ctx, now, airlock.JobInterrupted, now)
	if err != nil {
		r.logger.Error("crawl jobs: expire", slog.String("error", err.Error()))
		return
	}
	for _, id := range ids {
		r.logger.Info("crawl job interrupted: its process stopped", slog.String("job", id))
	}
}

// local returns the run of a job this runner runs, or nil.
func (r *Runner) local(id string) *jobRun {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.runs[id]
}

// release forgets a run: its slot, its place in the table, its goroutine.
func (r *Runner) release(run *jobRun) {
	r.mu.Lock()
	delete(r.runs, run.id)
	if r.running[run.tenant]--; r.running[run.tenant] <= 0 {
		delete(r.running, run.tenant)
	}
	r.mu.Unlock()
	r.runsDone.Done()
}

func errShuttingDown() *airlock.Error {
	return airlock.Errorf(airlock.CodeUnavailable, airlock.ReasonShuttingDown, "engine is shutting down")
}

var errJobCancelled = airlock.Errorf(airlock.CodeTimeout, airlock.ReasonCanceled, "crawl job cancelled")

func jobNotFound(id string) error {
	return airlock.Errorf(airlock.CodeNotFound, airlock.ReasonCrawlJob, "no crawl job %q", id)
}

func storeErr(what string, err error) error {
	return airlock.Errorf(airlock.CodeUnavailable, airlock.ReasonStore, "%s: %v", what, err)
}

func pub(err error, id string) *airlock.Error {
	pe := airlock.Public(err, id)
	return &pe
}

// CrawlDefaults gives the zero values of a crawl request the crawl's
// defaults where the tenant's ceiling is below them (the ceiling is then
// the default): a caller asking for nothing is never refused.
func CrawlDefaults(req airlock.CrawlRequest, l *gate.Limits) airlock.CrawlRequest {
	low := func(v *int, def int, name string) {
		if c := int(l.Ceiling(name)); *v == 0 && c < def {
			*v = c
		}
	}
	low(&req.Concurrency, crawl.DefaultConcurrency, gate.LimitCrawlConcurrency)
	low(&req.PerHostConcurrency, crawl.DefaultPerHostConcurrency, gate.LimitCrawlPerHost)
	low(&req.Depth, crawl.DefaultDepth, gate.LimitCrawlDepth)
	if req.Seed != "" {
		low(&req.MaxPages, crawl.DefaultMaxPages, gate.LimitCrawlMaxPages)
	}
	if c := time.Duration(l.Ceiling(gate.LimitCrawlTimeout)); req.Timeout == 0 && c < crawl.DefaultTimeout {
		req.Timeout = c
	}
	return req
}

// Prepare gives a job's request the defaults of t, the tenant, and
// refuses, before anything runs, a request that the crawl would refuse at
// its start (d resolves its provider and proxy), and one larger than a job
// may be.
func Prepare(t *gate.Tenant, d *browse.Dispatcher, req airlock.CrawlRequest) (airlock.CrawlRequest, error) {
	if err := t.CheckCrawl(req); err != nil {
		return req, err
	}
	req = CrawlDefaults(req, t.Limits)
	if _, _, err := d.Resolve(airlock.VerbCrawl, req.Provider); err != nil {
		return req, err
	}
	if _, err := browse.Narrowing(req.Narrow); err != nil {
		return req, err
	}
	if err := crawl.ValidateRequest(req); err != nil {
		return req, err
	}
	if req.MaxPages > MaxJobPages || len(req.URLs) > MaxJobPages {
		return req, airlock.Errorf(airlock.CodeTooLarge, airlock.ReasonCrawlJobPages, "a crawl job stores at most %d pages", MaxJobPages)
	}
	if _, err := egress.ParseTLSProfile(req.TLSProfile); err != nil {
		return req, err
	}
	if px := d.Proxy(req.Proxy); px != "" && t.Dialer.Proxies[px] == nil {
		return req, airlock.Errorf(airlock.CodeDenied, airlock.ReasonProxy, "upstream proxy %q is not configured", px)
	}
	return req, nil
}
