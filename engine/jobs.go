package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/egress"
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
	// one engine; one more is rate_limited.
	MaxRunningJobs = 4
	// DefaultJobPageLimit and MaxJobPageLimit bound CrawlJobPages and
	// CrawlJobs.
	DefaultJobPageLimit = 50
	MaxJobPageLimit     = 500
	// DefaultJobRetention: finished jobs, and their pages, are deleted this
	// long after they finished.
	DefaultJobRetention = 7 * 24 * time.Hour
	// DefaultJobLease is how long an engine vouches for the jobs it runs
	// without renewing (it renews every third of it). A job whose lease
	// passed belongs to a process that died: any engine on the store marks
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
	reasonCrawlJob   = "crawl_job"
)

// jobTable is the engine's share of the crawl jobs: those it runs.
type jobTable struct {
	owner     string // this engine's runner id in the store
	mu        sync.Mutex
	runs      map[string]*jobRun
	running   map[string]int // by tenant
	closed    bool
	wg        sync.WaitGroup // job goroutines
	stop      chan struct{}  // closed by stopJobs: the sweeper and watchers end
	loopDone  chan struct{}
	fleetDone chan struct{} // closed when fleetJobLoop ends (at once without a fleet)
}

// jobRun is one job this engine runs.
type jobRun struct {
	id, tenant string
	ctx        context.Context // detached from the starter's; cancelled by Cancel and Close
	cancel     context.CancelCauseFunc
	done       chan struct{} // closed after the final state is stored

	// A run of a job shared by the fleet (fleetjobs.go): its crawl state,
	// this run's name among the job's runs, and whether it joined a job
	// another replica started.
	shared  *fleet.Crawl
	runName string
	join    bool

	mu       sync.Mutex
	progress *airlock.CrawlProgress
	subs     map[chan struct{}]struct{}
}

// notify wakes the job's watchers without ever waiting for them.
func (r *jobRun) notify() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for c := range r.subs {
		select {
		case c <- struct{}{}:
		default:
		}
	}
}

func (r *jobRun) latest() *airlock.CrawlProgress {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.progress
}

// startJobs is called once by New: it marks interrupted the jobs whose
// process died and starts the sweeper.
func (e *Engine) startJobs() {
	e.jobs = &jobTable{owner: e.gate.NewID(), runs: map[string]*jobRun{}, running: map[string]int{},
		stop: make(chan struct{}), loopDone: make(chan struct{}), fleetDone: make(chan struct{})}
	ctx, cancel := context.WithTimeout(context.Background(), jobStoreTimeout)
	defer cancel()
	e.expireJobs(ctx)
	go e.jobLoop()
	if e.fleet != nil {
		go e.fleetJobLoop()
	} else {
		close(e.jobs.fleetDone)
	}
}

// jobLoop renews this engine's leases, expires those of dead processes and
// prunes old jobs.
func (e *Engine) jobLoop() {
	j := e.jobs
	defer close(j.loopDone)
	t := time.NewTicker(jobRenewEvery)
	defer t.Stop()
	var pruned time.Time
	for {
		ctx, cancel := context.WithTimeout(context.Background(), jobStoreTimeout)
		j.mu.Lock()
		owners := map[string]bool{}
		for _, r := range j.runs {
			if r.shared != nil {
				owners[fleetJobOwner(r.id)] = true
			} else {
				owners[j.owner] = true
			}
		}
		j.mu.Unlock()
		for owner := range owners {
			if _, err := e.jobStore.RenewJobs(ctx, owner, time.Now().Add(DefaultJobLease)); err != nil {
				e.logger.Error("crawl jobs: renew leases", slog.String("error", err.Error()))
			}
		}
		e.expireJobs(ctx)
		if time.Since(pruned) >= jobPruneEvery {
			pruned = time.Now()
			if _, err := e.jobStore.PruneJobs(ctx, pruned.Add(-DefaultJobRetention)); err != nil {
				e.logger.Error("crawl jobs: retention", slog.String("error", err.Error()))
			}
		}
		cancel()
		select {
		case <-j.stop:
			return
		case <-t.C:
		}
	}
}

// expireJobs marks interrupted every unfinished job whose lease passed.
func (e *Engine) expireJobs(ctx context.Context) {
	now := time.Now()
	ids, err := e.jobStore.ExpireJobs(ctx, now, airlock.JobInterrupted, now)
	if err != nil {
		e.logger.Error("crawl jobs: expire", slog.String("error", err.Error()))
		return
	}
	for _, id := range ids {
		e.logger.Info("crawl job interrupted: its process stopped", slog.String("job", id))
	}
}

// stopJobs is called once by Close: it cancels the running jobs, which
// store themselves as interrupted, and waits for them until ctx ends (then
// for at most DefaultDrainTimeout more, as Close does for calls). A job
// that could not store its state is marked interrupted by the next engine
// once its lease passes.
func (e *Engine) stopJobs(ctx context.Context) {
	j := e.jobs
	j.mu.Lock()
	j.closed = true
	for _, r := range j.runs {
		r.cancel(errShuttingDown())
	}
	j.mu.Unlock()
	done := make(chan struct{})
	go func() {
		j.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		t := time.NewTimer(DefaultDrainTimeout)
		select {
		case <-done:
		case <-t.C:
		}
		t.Stop()
	}
	close(j.stop)
	<-j.loopDone
	<-j.fleetDone
}

var errJobCancelled = airlock.Errorf(airlock.CodeTimeout, airlock.ReasonCanceled, "crawl job cancelled")

func jobNotFound(id string) error {
	return airlock.Errorf(airlock.CodeNotFound, reasonCrawlJob, "no crawl job %q", id)
}

func storeErr(what string, err error) error {
	return airlock.Errorf(airlock.CodeUnavailable, "store", "%s: %v", what, err)
}

// crawlTarget is what the audit log records as a crawl's target.
func crawlTarget(req airlock.CrawlRequest) string {
	target := req.Seed
	if target == "" {
		target = fmt.Sprintf("%d urls", len(req.URLs))
		if len(req.URLs) > 0 {
			target += " from " + req.URLs[0]
		}
	}
	var flags []string
	if req.IgnoreRobots {
		flags = append(flags, "ignore_robots")
	}
	if strings.EqualFold(req.TLSProfile, string(egress.ProfileChrome)) {
		flags = append(flags, "tls=chrome")
	}
	if len(flags) > 0 {
		target += " [" + strings.Join(flags, " ") + "]"
	}
	return target
}

// checkCrawlJob refuses, before anything runs, a request that the crawl
// would refuse at its start, and one larger than a job may be.
func (e *Engine) checkCrawlJob(call *gate.Call, req airlock.CrawlRequest) error {
	if _, _, err := e.browse.Resolve(airlock.VerbCrawl, req.Provider); err != nil {
		return err
	}
	if _, err := narrowChecker(req.Narrow); err != nil {
		return err
	}
	if err := crawl.ValidateRequest(req); err != nil {
		return err
	}
	if req.MaxPages > MaxJobPages || len(req.URLs) > MaxJobPages {
		return airlock.Errorf(airlock.CodeTooLarge, "crawl_job_pages", "a crawl job stores at most %d pages", MaxJobPages)
	}
	if _, err := egress.ParseTLSProfile(req.TLSProfile); err != nil {
		return err
	}
	if px := e.browse.Proxy(req.Proxy); px != "" && call.Tenant.Dialer.Proxies[px] == nil {
		return airlock.Errorf(airlock.CodeDenied, string(egress.ReasonProxy), "upstream proxy %q is not configured", px)
	}
	return nil
}

// StartCrawlJob starts a crawl job (capability browse): the crawl runs in
// the background, detached from ctx, and keeps its pages in the store,
// where they outlive the process. It is one broker call, audited as a
// crawl when it ends (or when it is refused).
//
// Everything the crawl would refuse at its start is refused here, as an
// error and not as a failed job: the principal (unknown, revoked, rate
// limited, without browse), the request (code invalid; reason limit for a
// value above the tenant's ceilings), ignore_robots without the tenant's
// allow_ignore_robots (denied), more than MaxJobPages pages (too_large), MaxRunningJobs jobs of the tenant already
// running (rate_limited), an engine shutting down (unavailable). The job
// belongs to the principal's tenant.
func (e *Engine) StartCrawlJob(ctx context.Context, p airlock.Principal, req airlock.CrawlRequest) (*airlock.CrawlJob, error) {
	j := e.jobs
	id := e.gate.NewID()
	jobCtx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	call, err := e.begin(jobCtx, p, airlock.CapabilityBrowse, "crawl", crawlTarget(req)+" job="+id)
	if err != nil {
		cancel(nil)
		return nil, err
	}
	fail := func(err error) (*airlock.CrawlJob, error) {
		err = call.End(err, 0, 0)
		cancel(nil)
		return nil, err
	}
	if err := call.Tenant.CheckCrawl(req); err != nil {
		return fail(err)
	}
	req = crawlDefaults(req, call.Tenant.Limits)
	if err := e.checkCrawlJob(call, req); err != nil {
		return fail(err)
	}
	reqJSON, err := json.Marshal(req)
	if err != nil {
		return fail(err)
	}
	progJSON, err := json.Marshal(airlock.CrawlProgress{})
	if err != nil {
		return fail(err)
	}
	r := &jobRun{id: id, tenant: p.Tenant, ctx: jobCtx, cancel: cancel, done: make(chan struct{}), subs: map[chan struct{}]struct{}{}}
	shared := e.sharesCrawl(req)
	if shared {
		e.sharedRun(r, true)
	}

	j.mu.Lock()
	switch {
	case j.closed:
		j.mu.Unlock()
		return fail(errShuttingDown())
	case j.running[p.Tenant] >= MaxRunningJobs:
		j.mu.Unlock()
		return fail(airlock.Errorf(airlock.CodeRateLimited, "crawl_jobs",
			"tenant %s already runs %d crawl jobs, the most at once; wait for one to finish or cancel one", p.Tenant, MaxRunningJobs))
	}
	j.running[p.Tenant]++
	j.runs[id] = r
	j.wg.Add(1)
	j.mu.Unlock()

	now := time.Now()
	sj := store.Job{ID: id, Tenant: p.Tenant, Owner: j.owner, State: airlock.JobQueued, Request: reqJSON, Progress: progJSON,
		Created: now, Updated: now, Lease: now.Add(DefaultJobLease)}
	if shared {
		sj.Owner = fleetJobOwner(id)
		if err := e.shareJob(ctx, r, p); err != nil {
			e.dropSharedJob(r)
			j.release(r)
			return fail(err)
		}
	}
	if err := e.jobStore.CreateJob(ctx, sj); err != nil {
		e.dropSharedJob(r)
		j.release(r)
		return fail(storeErr("store the crawl job", err))
	}
	go e.runJob(call, r, sj, req)
	return &airlock.CrawlJob{ID: id, Tenant: p.Tenant, State: airlock.JobQueued, Request: req, CreatedAt: now, UpdatedAt: now}, nil
}

// release forgets a run: its slot, its place in the table, its goroutine.
func (j *jobTable) release(r *jobRun) {
	j.mu.Lock()
	delete(j.runs, r.id)
	if j.running[r.tenant]--; j.running[r.tenant] <= 0 {
		delete(j.running, r.tenant)
	}
	j.mu.Unlock()
	j.wg.Done()
}

// writeJob stores sj's state as its runner; a job this engine no longer
// owns (another engine expired it while this one could not renew) stops.
func (e *Engine) writeJob(r *jobRun, sj *store.Job) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), jobStoreTimeout)
	defer cancel()
	sj.Updated = time.Now()
	if sj.Finished.IsZero() {
		sj.Lease = sj.Updated.Add(DefaultJobLease)
	} else {
		sj.Lease = time.Time{}
	}
	err := e.jobStore.UpdateJob(ctx, *sj)
	if errors.Is(err, store.ErrConflict) {
		r.cancel(airlock.Errorf(airlock.CodeUnavailable, "crawl_job_lost", "crawl job %s was taken over: its lease lapsed", sj.ID))
	}
	if err != nil {
		e.logger.Error("crawl job: store state", slog.String("job", sj.ID), slog.String("state", sj.State), slog.String("error", err.Error()))
	}
}

// runJob runs one job's crawl and stores what it gathers.
func (e *Engine) runJob(call *gate.Call, r *jobRun, sj store.Job, req airlock.CrawlRequest) {
	defer func() {
		r.cancel(nil)
		e.jobs.release(r)
		close(r.done)
		r.notify()
	}()
	if !r.join {
		sj.State = airlock.JobRunning
		e.writeJob(r, &sj)
		r.notify()
	}
	appender, _ := e.jobStore.(pageAppender)

	// emit and progress are called one at a time by the native crawler;
	// the lock keeps a provider that does otherwise correct.
	var mu sync.Mutex
	seq := 0
	var lastWrite time.Time
	emit := func(pg *airlock.Page) error {
		mu.Lock()
		defer mu.Unlock()
		if seq >= MaxJobPages {
			return airlock.Errorf(airlock.CodeTooLarge, "crawl_job_pages", "the crawl gave more than %d pages, the most a job stores", MaxJobPages)
		}
		data, err := json.Marshal(pg)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), jobStoreTimeout)
		if r.shared != nil {
			seq, err = appender.AppendNextJobPage(ctx, sj.ID, data)
		} else if err = e.jobStore.AppendJobPage(ctx, sj.ID, seq+1, data); err == nil {
			seq++
		}
		cancel()
		if err != nil {
			return storeErr("store a page of the crawl job", err)
		}
		r.notify()
		return nil
	}
	progress := func(pr airlock.CrawlProgress) {
		mu.Lock()
		defer mu.Unlock()
		if r.shared != nil {
			pr = e.fleetProgress(r, sj.Created, pr)
		}
		r.mu.Lock()
		r.progress = &pr
		r.mu.Unlock()
		r.notify()
		if time.Since(lastWrite) >= jobProgressEvery {
			lastWrite = time.Now()
			sj.Progress, _ = json.Marshal(pr)
			e.writeJob(r, &sj)
		}
	}
	var shared crawl.Shared // a nil *fleet.Crawl is not a nil interface
	if r.shared != nil {
		shared = r.shared
	}
	sum, in, err := e.crawlIn(call, shared, r.join, req, emit, progress)
	mu.Lock() // a provider's stray callback must not race with the end
	defer mu.Unlock()
	if sum != nil {
		sum.DecisionID = call.ID
		if call.Ctx.Err() != nil && sum.Stopped == "" {
			sum.Stopped = airlock.ReasonOf(context.Cause(call.Ctx))
		}
	}
	err = call.End(err, in, 0)
	if r.shared != nil {
		e.leaveSharedJob(r, sj, call.ID, sum, err)
		return
	}

	cause := context.Cause(r.ctx)
	stopped := ""
	switch {
	case errors.Is(cause, errJobCancelled):
		sj.State, stopped = airlock.JobCancelled, StoppedCancelled
	case airlock.ReasonOf(cause) == "shutting_down":
		sj.State, stopped = airlock.JobInterrupted, StoppedInterrupted
	case err != nil:
		sj.State = airlock.JobFailed
		sj.Error, _ = json.Marshal(pub(err, call.ID))
	default:
		sj.State = airlock.JobDone
	}
	if sum == nil {
		sum = &airlock.CrawlSummary{Pages: seq, Skipped: []airlock.Skipped{}, DecisionID: call.ID}
	}
	if stopped != "" {
		sum.Stopped = stopped
	}
	if pr := r.latest(); pr != nil {
		sj.Progress, _ = json.Marshal(*pr)
	}
	sj.Summary, _ = json.Marshal(sum)
	sj.Finished = time.Now()
	e.writeJob(r, &sj)
}

// jobReader checks a principal that reads or cancels jobs: the checks of
// the gate that do not spend its rate.
func (e *Engine) jobReader(p airlock.Principal) error {
	switch {
	case !p.Valid():
		return airlock.Errorf(airlock.CodeInvalid, gate.ReasonBadPrincipal, "bad principal %q", p.String())
	case e.gate.Tenant(p.Tenant) == nil:
		return airlock.Errorf(airlock.CodeDenied, gate.ReasonUnknownTenant, "unknown tenant %q", p.Tenant)
	case e.revs.Revoked(p):
		return airlock.Errorf(airlock.CodeRevoked, gate.ReasonRevoked, "%s is revoked", p.String())
	}
	return nil
}

// local returns the run of a job this engine runs, or nil.
func (j *jobTable) local(id string) *jobRun {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.runs[id]
}

// stale reports an unfinished job whose runner is gone.
func (e *Engine) stale(sj store.Job) bool {
	return sj.Finished.IsZero() && sj.Lease.Before(time.Now()) && e.jobs.local(sj.ID) == nil
}

// jobFor returns p's tenant's job id; another tenant's job is not found.
func (e *Engine) jobFor(ctx context.Context, p airlock.Principal, id string) (store.Job, error) {
	if err := e.jobReader(p); err != nil {
		return store.Job{}, err
	}
	for try := 0; ; try++ {
		sj, err := e.jobStore.GetJob(ctx, id)
		if errors.Is(err, store.ErrNotFound) || err == nil && sj.Tenant != p.Tenant {
			return store.Job{}, jobNotFound(id)
		}
		if err != nil {
			return store.Job{}, storeErr("read the crawl job", err)
		}
		if try == 1 || !e.stale(sj) {
			return sj, nil
		}
		e.expireJobs(ctx)
	}
}

// publicJob decodes a stored job. An interrupted job that could not store
// a summary gets one made of what it stored: its pages and progress.
func publicJob(sj store.Job) (*airlock.CrawlJob, error) {
	job := &airlock.CrawlJob{ID: sj.ID, Tenant: sj.Tenant, State: sj.State, Pages: sj.Pages, CreatedAt: sj.Created, UpdatedAt: sj.Updated}
	for _, d := range []struct {
		data []byte
		into any
	}{{sj.Request, &job.Request}, {sj.Progress, &job.Progress}, {sj.Summary, &job.Summary}, {sj.Error, &job.Error}} {
		if len(d.data) == 0 {
			continue
		}
		if err := json.Unmarshal(d.data, d.into); err != nil {
			return nil, fmt.Errorf("decode crawl job %s: %w", sj.ID, err)
		}
	}
	if !sj.Finished.IsZero() {
		f := sj.Finished
		job.FinishedAt = &f
		if job.Summary == nil && sj.State == airlock.JobInterrupted {
			job.Summary = &airlock.CrawlSummary{Pages: sj.Pages, Skipped: []airlock.Skipped{}, Queued: job.Progress.Queued,
				Failed: job.Progress.Failed, ElapsedMS: f.Sub(sj.Created).Milliseconds(), Stopped: StoppedInterrupted}
		}
	}
	return job, nil
}

// publicJobOf is publicJob with the freshest progress of a job this engine
// runs (the store's is at most a second old).
func (e *Engine) publicJobOf(sj store.Job) (*airlock.CrawlJob, error) {
	job, err := publicJob(sj)
	if err != nil {
		return nil, err
	}
	if r := e.jobs.local(sj.ID); r != nil && sj.Finished.IsZero() {
		if pr := r.latest(); pr != nil {
			job.Progress = *pr
		}
	}
	return job, nil
}

// CrawlJob returns the principal's tenant's job id: its state, progress,
// page count and, once finished, summary (and error when failed). An
// unknown id, or another tenant's job, is not_found.
func (e *Engine) CrawlJob(ctx context.Context, p airlock.Principal, id string) (*airlock.CrawlJob, error) {
	sj, err := e.jobFor(ctx, p, id)
	if err != nil {
		return nil, err
	}
	return e.publicJobOf(sj)
}

// listLimit refuses a list limit above the tenant's ceiling (a read:
// not a broker call, so not audited) and returns the limit to use: for 0,
// DefaultJobPageLimit, or the ceiling when that is lower.
func (e *Engine) listLimit(p airlock.Principal, limit int) (int, error) {
	var l *gate.Limits
	if t := e.gate.Tenant(p.Tenant); t != nil {
		l = t.Limits
	}
	if err := l.CheckValue(gate.LimitListPage, "limit", int64(limit)); err != nil {
		return 0, err
	}
	if limit == 0 {
		return int(min(DefaultJobPageLimit, l.Ceiling(gate.LimitListPage))), nil
	}
	return limit, nil
}

// CrawlJobs lists the principal's tenant's jobs, newest first: at most
// limit (0: DefaultJobPageLimit; above limits.list_limit, at most
// MaxJobPageLimit, or negative: invalid, reason limit).
func (e *Engine) CrawlJobs(ctx context.Context, p airlock.Principal, limit int) ([]airlock.CrawlJob, error) {
	if err := e.jobReader(p); err != nil {
		return nil, err
	}
	limit, err := e.listLimit(p, limit)
	if err != nil {
		return nil, err
	}
	var list []store.Job
	for try := range 2 {
		var err error
		list, err = e.jobStore.ListJobs(ctx, p.Tenant, limit)
		if err != nil {
			return nil, storeErr("list crawl jobs", err)
		}
		stale := false
		for _, sj := range list {
			stale = stale || e.stale(sj)
		}
		if !stale || try == 1 {
			break
		}
		e.expireJobs(ctx)
	}
	out := make([]airlock.CrawlJob, 0, len(list))
	for _, sj := range list {
		job, err := e.publicJobOf(sj)
		if err != nil {
			return nil, err
		}
		out = append(out, *job)
	}
	return out, nil
}

// CrawlJobPages returns the pages of the principal's tenant's job id with
// seq > after, in order: at most limit (0: DefaultJobPageLimit; above
// limits.list_limit, at most MaxJobPageLimit, or negative: invalid, reason
// limit). Pass the last seq received as after to get the next
// ones; an empty result means there are none yet (or none left, once the
// job is finished).
func (e *Engine) CrawlJobPages(ctx context.Context, p airlock.Principal, id string, after, limit int) ([]airlock.JobPage, error) {
	if after < 0 {
		return nil, airlock.Errorf(airlock.CodeInvalid, reasonCrawlJob, "after %d: want 0 or a page's seq", after)
	}
	limit, err := e.listLimit(p, limit)
	if err != nil {
		return nil, err
	}
	if _, err := e.jobFor(ctx, p, id); err != nil {
		return nil, err
	}
	pages, err := e.jobStore.JobPages(ctx, id, after, limit)
	if err != nil {
		return nil, storeErr("read the crawl job's pages", err)
	}
	out := make([]airlock.JobPage, 0, len(pages))
	for _, sp := range pages {
		pg, err := decodePage(id, sp)
		if err != nil {
			return nil, err
		}
		out = append(out, airlock.JobPage{Seq: sp.Seq, Page: pg})
	}
	return out, nil
}

func decodePage(id string, sp store.JobPage) (*airlock.Page, error) {
	var pg airlock.Page
	if err := json.Unmarshal(sp.Data, &pg); err != nil {
		return nil, fmt.Errorf("decode page %d of crawl job %s: %w", sp.Seq, id, err)
	}
	return &pg, nil
}

// CancelCrawlJob cancels the principal's tenant's job id and waits (until
// ctx ends) for it to stop: it ends cancelled, its pages kept. Cancelling
// a finished job does nothing. A job run by another process sharing the
// data directory is cancelled through that process: here it is
// unavailable.
func (e *Engine) CancelCrawlJob(ctx context.Context, p airlock.Principal, id string) error {
	sj, err := e.jobFor(ctx, p, id)
	if err != nil {
		return err
	}
	if !sj.Finished.IsZero() {
		return nil
	}
	if isFleetJob(sj) && e.fleet != nil {
		return e.cancelSharedJob(ctx, id)
	}
	r := e.jobs.local(id)
	if r == nil {
		return airlock.Errorf(airlock.CodeUnavailable, "crawl_job_elsewhere",
			"crawl job %s runs in another airlock process (a replica, or a process sharing the data directory): cancel it there", id)
	}
	r.cancel(errJobCancelled)
	select {
	case <-r.done:
	case <-ctx.Done():
	}
	return nil
}

// WatchCrawlJob streams the principal's tenant's job id: first its stored
// pages with seq > after, then each new page and progress as they come
// (progress events are coalesced: a watcher gets the latest), then one
// "end" event carrying the job in its final state, and the channel closes.
// For a finished job that is the stored pages, then the end.
//
// No page is lost or repeated: every page is read back from the store in
// seq order. A watcher that reads slowly never slows the crawl: the crawl
// only signals it, and it catches up from the store at its own pace.
//
// The channel also closes, without an end event, when ctx ends, when the
// engine closes or when the store fails: reconnect with after set to the
// last seq received. Jobs run by another process sharing the data
// directory are followed by polling the store.
func (e *Engine) WatchCrawlJob(ctx context.Context, p airlock.Principal, id string, after int) (<-chan airlock.CrawlJobEvent, error) {
	if after < 0 {
		return nil, airlock.Errorf(airlock.CodeInvalid, reasonCrawlJob, "after %d: want 0 or a page's seq", after)
	}
	if _, err := e.jobFor(ctx, p, id); err != nil {
		return nil, err
	}
	j := e.jobs
	wake := make(chan struct{}, 1)
	j.mu.Lock()
	if j.closed {
		j.mu.Unlock()
		return nil, errShuttingDown()
	}
	// Subscribe before the first read: a page stored after it wakes us.
	r := j.runs[id]
	if r != nil {
		r.mu.Lock()
		r.subs[wake] = struct{}{}
		r.mu.Unlock()
	}
	j.mu.Unlock()
	out := make(chan airlock.CrawlJobEvent, jobWatchBuffer)
	go e.watchJob(ctx, id, after, r, wake, out)
	return out, nil
}

func (e *Engine) watchJob(ctx context.Context, id string, last int, r *jobRun, wake chan struct{}, out chan<- airlock.CrawlJobEvent) {
	defer close(out)
	var poll <-chan time.Time
	if r != nil {
		defer func() {
			r.mu.Lock()
			delete(r.subs, wake)
			r.mu.Unlock()
		}()
	}
	if r == nil || r.shared != nil { // pages stored by other processes
		t := time.NewTicker(jobPollInterval)
		defer t.Stop()
		poll = t.C
	}
	stop := e.jobs.stop
	send := func(ev airlock.CrawlJobEvent) bool {
		select {
		case out <- ev:
			return true
		case <-ctx.Done():
		case <-stop:
		}
		return false
	}
	fail := func(err error) {
		select {
		case <-stop:
			return // the engine is closing its store
		default:
		}
		if ctx.Err() == nil {
			e.logger.Error("crawl job: watch", slog.String("job", id), slog.String("error", err.Error()))
		}
	}
	var sent *airlock.CrawlProgress
	for {
		// The state first: a job is finished only after its last page is
		// stored, so the pages read next are all of them.
		sj, err := e.jobStore.GetJob(ctx, id)
		if err != nil {
			fail(err)
			return
		}
		for {
			pages, err := e.jobStore.JobPages(ctx, id, last, jobReplayBatch)
			if err != nil {
				fail(err)
				return
			}
			for _, sp := range pages {
				pg, err := decodePage(id, sp)
				if err != nil {
					fail(err)
					return
				}
				if !send(airlock.CrawlJobEvent{Kind: airlock.JobEventPage, Seq: sp.Seq, Page: pg}) {
					return
				}
				last = sp.Seq
			}
			if len(pages) < jobReplayBatch {
				break
			}
		}
		job, err := e.publicJobOf(sj)
		if err != nil {
			fail(err)
			return
		}
		if !sj.Finished.IsZero() {
			send(airlock.CrawlJobEvent{Kind: airlock.JobEventEnd, Job: job})
			return
		}
		if pr := job.Progress; sent == nil || *sent != pr {
			if !send(airlock.CrawlJobEvent{Kind: airlock.JobEventProgress, Progress: &pr}) {
				return
			}
			sent = &pr
		}
		select {
		case <-wake:
		case <-poll:
		case <-ctx.Done():
			return
		case <-stop:
			return
		}
	}
}
