package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/egress"
	"github.com/airlockhq/airlock/internal/crawl"
	"github.com/airlockhq/airlock/internal/gate"
	"github.com/airlockhq/airlock/internal/store"
)

// Target is what the audit log records as a crawl's target.
func Target(req airlock.CrawlRequest) string {
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

// Start starts a crawl job of p's tenant: the crawl runs in the
// background, detached from ctx, and keeps its pages in the store. It is
// one broker call (Crawler.Begin), audited as a crawl when it ends or when
// it is refused.
//
// Everything the crawl would refuse at its start is refused here, as an
// error and not as a failed job: what Crawler.Begin and Crawler.Prepare
// refuse, MaxRunningJobs jobs of the tenant already running
// (rate_limited), a runner closing (unavailable).
func (r *Runner) Start(ctx context.Context, p airlock.Principal, req airlock.CrawlRequest) (*airlock.CrawlJob, error) {
	id := r.cfg.NewID()
	jobCtx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	call, err := r.crawler.Begin(jobCtx, p, Target(req)+" job="+id)
	if err != nil {
		cancel(nil)
		return nil, err
	}
	fail := func(err error) (*airlock.CrawlJob, error) {
		err = call.End(err, 0, 0)
		cancel(nil)
		return nil, err
	}
	if req, err = r.crawler.Prepare(call, req); err != nil {
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
	run := newRun(jobCtx, cancel, id, p.Tenant)
	shared := r.sharesCrawl(req)
	if shared {
		r.sharedRun(run, true)
	}

	r.mu.Lock()
	switch {
	case r.closed:
		r.mu.Unlock()
		return fail(errShuttingDown())
	case r.running[p.Tenant] >= MaxRunningJobs:
		r.mu.Unlock()
		return fail(airlock.Errorf(airlock.CodeRateLimited, airlock.ReasonCrawlJobs,
			"tenant %s already runs %d crawl jobs, the most at once; wait for one to finish or cancel one", p.Tenant, MaxRunningJobs))
	}
	r.running[p.Tenant]++
	r.runs[id] = run
	r.runsDone.Add(1)
	r.mu.Unlock()

	now := time.Now()
	sj := store.Job{ID: id, Tenant: p.Tenant, Owner: r.owner, State: airlock.JobQueued, Request: reqJSON, Progress: progJSON,
		Created: now, Updated: now, Lease: now.Add(DefaultJobLease)}
	if shared {
		sj.Owner = fleetJobOwner(id)
		if err := r.shareJob(ctx, run, p); err != nil {
			r.dropSharedJob(run)
			r.release(run)
			return fail(err)
		}
	}
	if err := r.store.CreateJob(ctx, sj); err != nil {
		r.dropSharedJob(run)
		r.release(run)
		return fail(storeErr("store the crawl job", err))
	}
	go r.runJob(call, run, sj, req)
	return &airlock.CrawlJob{ID: id, Tenant: p.Tenant, State: airlock.JobQueued, Request: req, CreatedAt: now, UpdatedAt: now}, nil
}

// writeJob stores sj's state as its runner; a job this runner no longer
// owns (another runner expired it while this one could not renew) stops.
func (r *Runner) writeJob(run *jobRun, sj *store.Job) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(run.ctx), jobStoreTimeout)
	defer cancel()
	sj.Updated = time.Now()
	if sj.Finished.IsZero() {
		sj.Lease = sj.Updated.Add(DefaultJobLease)
	} else {
		sj.Lease = time.Time{}
	}
	err := r.store.UpdateJob(ctx, *sj)
	if errors.Is(err, store.ErrConflict) {
		run.cancel(airlock.Errorf(airlock.CodeUnavailable, airlock.ReasonCrawlJobLost, "crawl job %s was taken over: its lease lapsed", sj.ID))
	}
	if err != nil {
		r.logger.Error("crawl job: store state", slog.String("job", sj.ID), slog.String("state", sj.State), slog.String("error", err.Error()))
	}
}

// runJob runs one job's crawl and stores what it gathers.
func (r *Runner) runJob(call *gate.Call, run *jobRun, sj store.Job, req airlock.CrawlRequest) {
	defer func() {
		run.cancel(nil)
		r.release(run)
		close(run.done)
		run.notify()
	}()
	if !run.join {
		sj.State = airlock.JobRunning
		r.writeJob(run, &sj)
		run.notify()
	}
	appender, _ := r.store.(pageAppender)

	// emit and progress are called one at a time by the native crawler;
	// the lock keeps a provider that does otherwise correct.
	var mu sync.Mutex
	seq := 0
	var lastWrite time.Time
	emit := func(pg *airlock.Page) error {
		mu.Lock()
		defer mu.Unlock()
		if seq >= MaxJobPages {
			return airlock.Errorf(airlock.CodeTooLarge, airlock.ReasonCrawlJobPages, "the crawl gave more than %d pages, the most a job stores", MaxJobPages)
		}
		data, err := json.Marshal(pg)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(run.ctx), jobStoreTimeout)
		if run.shared != nil {
			seq, err = appender.AppendNextJobPage(ctx, sj.ID, data)
		} else if err = r.store.AppendJobPage(ctx, sj.ID, seq+1, data); err == nil {
			seq++
		}
		cancel()
		if err != nil {
			return storeErr("store a page of the crawl job", err)
		}
		run.notify()
		return nil
	}
	progress := func(pr airlock.CrawlProgress) {
		mu.Lock()
		defer mu.Unlock()
		if run.shared != nil {
			pr = r.fleetProgress(run, sj.Created, pr)
		}
		run.mu.Lock()
		run.progress = &pr
		run.mu.Unlock()
		run.notify()
		if time.Since(lastWrite) >= jobProgressEvery {
			lastWrite = time.Now()
			sj.Progress, _ = json.Marshal(pr)
			r.writeJob(run, &sj)
		}
	}
	var shared crawl.Shared // a nil *fleet.Crawl is not a nil interface
	if run.shared != nil {
		shared = run.shared
	}
	sum, in, err := r.runCrawl(sj.ID, func() (*airlock.CrawlSummary, int64, error) {
		return r.crawler.Run(call, shared, run.join, req, emit, progress)
	})
	mu.Lock() // a provider's stray callback must not race with the end
	defer mu.Unlock()
	if sum != nil {
		sum.DecisionID = call.ID
		if call.Ctx.Err() != nil && sum.Stopped == "" {
			sum.Stopped = string(airlock.ReasonOf(context.Cause(call.Ctx)))
		}
	}
	err = call.End(err, in, 0)
	if run.shared != nil {
		r.leaveSharedJob(run, sj, call.ID, sum, err)
		return
	}

	cause := context.Cause(run.ctx)
	stopped := ""
	switch {
	case errors.Is(cause, errJobCancelled):
		sj.State, stopped = airlock.JobCancelled, StoppedCancelled
	case airlock.ReasonOf(cause) == airlock.ReasonShuttingDown:
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
	if pr := run.latest(); pr != nil {
		sj.Progress, _ = json.Marshal(*pr)
	}
	sj.Summary, _ = json.Marshal(sum)
	sj.Finished = time.Now()
	r.writeJob(run, &sj)
}

// runCrawl runs a job's crawl, and makes a panic in it (from a hostile
// page the crawler did not survive, say) the job's failure: code internal,
// reason panic, without the panic's value, which goes with its stack to
// the log. The process, and the runner's other jobs, go on.
func (r *Runner) runCrawl(id string, do func() (*airlock.CrawlSummary, int64, error)) (sum *airlock.CrawlSummary, in int64, err error) {
	defer func() {
		if v := recover(); v != nil {
			r.logger.Error("crawl job: panic", slog.String("job", id), slog.Any("panic", v),
				slog.String("stack", string(debug.Stack())))
			sum, in = nil, 0
			err = airlock.Errorf(airlock.CodeInternal, airlock.ReasonPanic, "crawl job %s failed: an internal error stopped its crawl", id)
		}
	}()
	return do()
}
