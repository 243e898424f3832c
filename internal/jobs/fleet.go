package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/crawl"
	"github.com/airlockhq/airlock/internal/fleet"
	"github.com/airlockhq/airlock/internal/store"
)

// A crawl job of the native or chromium crawler, started on an engine with
// a fleet (state.redis_url), is worked by every replica: its frontier,
// seen set, page slots and pages are in Redis (fleet.Crawl), the replica
// that starts it seeds it, and the others join it within jobPollInterval.
// Each replica's run is a broker call of its own, under the job's
// principal: a revocation stops them all, and each is audited where it
// ran. The job's record is owned by all of them (fleetJobOwner): any of
// them renews its lease, so it lives as long as one of them does. The run
// that leaves last (fleet.Crawl.Leave) concludes the job from the results
// every run recorded.

// fleetJobOwner is the store owner of a crawl job shared by the fleet.
func fleetJobOwner(id string) string { return "fleet:" + id }

func isFleetJob(sj store.Job) bool { return strings.HasPrefix(sj.Owner, "fleet:") }

// pageAppender is a job store that numbers pages itself, so that several
// replicas can store one job's pages at once (fleet.Jobs).
type pageAppender interface {
	AppendNextJobPage(ctx context.Context, id string, data []byte) (int, error)
}

// sharesCrawl reports whether a crawl job of req is shared by the fleet.
func (r *Runner) sharesCrawl(req airlock.CrawlRequest) bool {
	if r.fleet == nil {
		return false
	}
	if _, ok := r.store.(pageAppender); !ok {
		return false
	}
	return r.crawler.Shareable(req)
}

// fleetJobMeta is what a replica joining a shared job needs besides the
// job's record.
type fleetJobMeta struct {
	Principal string `json:"principal"`
}

// fleetRunResult is what one replica's run of a shared job records when
// it leaves.
type fleetRunResult struct {
	Replica   string                `json:"replica"`
	Summary   *airlock.CrawlSummary `json:"summary,omitempty"`
	Error     json.RawMessage       `json:"error,omitempty"` // the public error of a run that failed
	Cancelled bool                  `json:"cancelled,omitempty"`
}

// errJobConcluded stops a run of a shared job that another replica has
// concluded.
var errJobConcluded = airlock.Errorf(airlock.CodeTimeout, airlock.ReasonCanceled, "crawl job concluded by another replica")

// sharedRun makes r a run of a job the fleet shares, before r is in the
// job table (its fields are read without r's lock).
func (r *Runner) sharedRun(run *jobRun, lead bool) *jobRun {
	run.shared = r.fleet.Crawl(run.id, r.cfg.CrawlLease)
	run.runName = r.cfg.Replica + "/" + run.id
	run.join = !lead
	return run
}

// shareJob announces a shared job's crawl to the fleet (lead) and records
// this run as working it.
func (r *Runner) shareJob(ctx context.Context, run *jobRun, p airlock.Principal) error {
	if !run.join {
		if err := run.shared.SetMeta(ctx, fleetJobMeta{Principal: p.String()}); err != nil {
			return err
		}
	}
	return run.shared.Join(ctx, run.runName)
}

// dropSharedJob undoes shareJob for a job that could not start.
func (r *Runner) dropSharedJob(run *jobRun) {
	if run.shared == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), jobStoreTimeout)
	defer cancel()
	run.shared.Close(ctx)
	if err := run.shared.Delete(ctx); err != nil {
		r.logger.Warn("crawl job: shared crawl state not removed", slog.String("job", run.id), slog.String("error", err.Error()))
	}
}

// fleetProgress is the progress of a shared job, over every replica.
func (r *Runner) fleetProgress(run *jobRun, created time.Time, local airlock.CrawlProgress) airlock.CrawlProgress {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(run.ctx), fleet.IOTimeout)
	defer cancel()
	st, err := run.shared.Stats(ctx)
	if err != nil {
		return local
	}
	pr := airlock.CrawlProgress{Done: st.Done, Queued: st.Waiting + st.Leased, Failed: st.Failed}
	if s := time.Since(created).Seconds(); s > 0 {
		pr.PagesPerS = float64(st.OK) / s
	}
	return pr
}

// leaveSharedJob ends this replica's run of a shared job: its leased URLs
// go back to the frontier, its result is recorded, and the last run to
// leave concludes the job.
func (r *Runner) leaveSharedJob(run *jobRun, sj store.Job, callID string, sum *airlock.CrawlSummary, err error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(run.ctx), jobStoreTimeout)
	defer cancel()
	cause := context.Cause(run.ctx)
	interrupted := airlock.ReasonOf(cause) == airlock.ReasonShuttingDown
	res := fleetRunResult{Replica: r.cfg.Replica, Summary: sum, Cancelled: errors.Is(cause, errJobCancelled)}
	if err != nil && !res.Cancelled && !interrupted && !errors.Is(cause, errJobConcluded) {
		res.Error, _ = json.Marshal(pub(err, callID))
	}
	if err := run.shared.Close(ctx); err != nil {
		r.logger.Warn("crawl job: leased URLs not returned; they return when their leases lapse",
			slog.String("job", sj.ID), slog.String("error", err.Error()))
	}
	raw, _ := json.Marshal(res)
	last, lerr := run.shared.Leave(ctx, run.runName, raw)
	if lerr != nil {
		r.logger.Error("crawl job: leaving the shared crawl", slog.String("job", sj.ID), slog.String("error", lerr.Error()))
		return
	}
	if last {
		r.concludeSharedJob(ctx, run, sj, interrupted)
	}
}

// concludeSharedJob stores the final state of a shared job, made of every
// run's result, and removes its crawl state.
func (r *Runner) concludeSharedJob(ctx context.Context, run *jobRun, sj store.Job, interrupted bool) {
	cur, err := r.store.GetJob(ctx, sj.ID)
	if err != nil || !cur.Finished.IsZero() {
		return
	}
	results, err := run.shared.Results(ctx)
	if err != nil {
		r.logger.Error("crawl job: reading the runs' results", slog.String("job", sj.ID), slog.String("error", err.Error()))
		return
	}
	now := time.Now()
	sum := &airlock.CrawlSummary{Skipped: []airlock.Skipped{}}
	var cancelled bool
	var failure json.RawMessage
	var replicas []string
	for _, raw := range results {
		var res fleetRunResult
		if json.Unmarshal(raw, &res) != nil {
			continue
		}
		replicas = append(replicas, res.Replica)
		cancelled = cancelled || res.Cancelled
		if failure == nil && len(res.Error) > 0 {
			failure = res.Error
		}
		if s := res.Summary; s != nil {
			sum.Queued += s.Queued
			sum.Fetched += s.Fetched
			sum.Failed += s.Failed
			sum.Bytes += s.Bytes
			if room := crawl.MaxSkipped - len(sum.Skipped); room > 0 {
				sum.Skipped = append(sum.Skipped, s.Skipped[:min(room, len(s.Skipped))]...)
			}
			if sum.Stopped == "" {
				sum.Stopped = s.Stopped
			}
			sum.DecisionID = s.DecisionID
		}
	}
	sum.Pages = cur.Pages
	sum.ElapsedMS = now.Sub(cur.Created).Milliseconds()
	if s := now.Sub(cur.Created).Seconds(); s > 0 {
		sum.PagesPerS = float64(sum.Pages) / s
	}
	switch {
	case cancelled:
		sj.State, sum.Stopped = airlock.JobCancelled, StoppedCancelled
	case failure != nil:
		sj.State, sj.Error = airlock.JobFailed, failure
	case interrupted:
		sj.State, sum.Stopped = airlock.JobInterrupted, StoppedInterrupted
	default:
		sj.State, sum.Stopped = airlock.JobDone, ""
	}
	if pr := run.latest(); pr != nil {
		sj.Progress, _ = json.Marshal(*pr)
	}
	sj.Summary, _ = json.Marshal(sum)
	sj.Finished = now
	r.writeJob(run, &sj)
	if err := run.shared.Delete(ctx); err != nil {
		r.logger.Warn("crawl job: shared crawl state not removed", slog.String("job", sj.ID), slog.String("error", err.Error()))
	}
	r.logger.Info("crawl job concluded by the fleet", slog.String("job", sj.ID), slog.String("state", sj.State),
		slog.Int("pages", sum.Pages), slog.Any("runs", replicas))
}

// fleetLoop joins the fleet's shared crawl jobs and stops the local runs
// of jobs cancelled or concluded elsewhere, until the runner's context
// ends.
func (r *Runner) fleetLoop() {
	t := time.NewTicker(jobPollInterval)
	defer t.Stop()
	done := map[string]bool{} // jobs this runner worked or will not work
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), jobStoreTimeout)
		r.fleetTick(ctx, done)
		cancel()
	}
}

func (r *Runner) fleetTick(ctx context.Context, done map[string]bool) {
	r.mu.Lock()
	var mine []*jobRun
	for _, run := range r.runs {
		if run.shared != nil {
			mine = append(mine, run)
		}
	}
	r.mu.Unlock()
	for _, run := range mine {
		done[run.id] = true
		if reason, err := run.shared.Stopped(ctx); err == nil && reason == airlock.JobCancelled {
			run.cancel(errJobCancelled)
			continue
		}
		// Concluded elsewhere, or gone (pruned, or Redis lost its data):
		// this run would otherwise wait for a frontier that never empties.
		if sj, err := r.store.GetJob(ctx, run.id); err == nil && !sj.Finished.IsZero() || errors.Is(err, store.ErrNotFound) {
			run.cancel(errJobConcluded)
		}
	}
	ids, err := r.fleet.ActiveCrawls(ctx)
	if err != nil {
		return
	}
	active := make(map[string]bool, len(ids))
	for _, id := range ids {
		active[id] = true
		if !done[id] && r.join(ctx, id) {
			done[id] = true
		}
	}
	for id := range done {
		if !active[id] {
			delete(done, id)
		}
	}
}

// join starts a run of shared job id on this runner; it reports whether
// the job is settled for this runner (joined, finished, or not to be
// joined), false when it is worth trying again.
func (r *Runner) join(ctx context.Context, id string) bool {
	sj, err := r.store.GetJob(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return false // announced before it is stored
	case err != nil:
		return false
	case !sj.Finished.IsZero() || !isFleetJob(sj):
		return true
	case sj.State != airlock.JobRunning:
		return false
	}
	c := r.fleet.Crawl(id, r.cfg.CrawlLease)
	if reason, err := c.Stopped(ctx); err != nil || reason != "" {
		return err == nil
	}
	// Join only once the seed is queued: a job whose starter died before
	// that then ends (its lease lapses) instead of being worked forever.
	if st, err := c.Stats(ctx); err != nil || !st.Seeded {
		return false
	}
	var meta fleetJobMeta
	if err := c.GetMeta(ctx, &meta); err != nil {
		return false
	}
	p, err := airlock.ParsePrincipal(meta.Principal)
	var req airlock.CrawlRequest
	if err == nil {
		err = json.Unmarshal(sj.Request, &req)
	}
	if err != nil {
		r.logger.Error("crawl job: cannot join", slog.String("job", id), slog.String("error", err.Error()))
		return true
	}
	r.mu.Lock()
	full := r.closed || r.running[p.Tenant] >= MaxRunningJobs
	r.mu.Unlock()
	if full {
		return false
	}
	jobCtx, cancel := context.WithCancelCause(context.WithoutCancel(r.ctx))
	call, err := r.crawler.Begin(jobCtx, p, Target(req)+" job="+id+" joined")
	if err != nil {
		cancel(nil)
		// A principal refused for good (revoked, no grant) is not tried again.
		return airlock.CodeOf(err) != airlock.CodeRateLimited && airlock.CodeOf(err) != airlock.CodeUnavailable
	}
	run := r.sharedRun(newRun(jobCtx, cancel, id, p.Tenant), false)
	r.mu.Lock()
	if r.closed || r.runs[id] != nil {
		r.mu.Unlock()
		cancel(nil)
		call.End(errShuttingDown(), 0, 0)
		return true
	}
	r.running[p.Tenant]++
	r.runs[id] = run
	r.runsDone.Add(1)
	r.mu.Unlock()
	if err := r.shareJob(ctx, run, p); err != nil {
		run.shared.Close(ctx)
		r.release(run)
		cancel(nil)
		call.End(err, 0, 0)
		return false
	}
	r.logger.Info("crawl job joined", slog.String("job", id), slog.String("replica", r.cfg.Replica))
	go r.runJob(call, run, sj, req)
	return true
}

// cancelSharedJob asks every replica to stop shared job id and waits,
// until ctx ends, for the job to be concluded.
func (r *Runner) cancelSharedJob(ctx context.Context, id string) error {
	if err := r.fleet.Crawl(id, 0).Stop(ctx, airlock.JobCancelled); err != nil {
		return err
	}
	if run := r.local(id); run != nil {
		run.cancel(errJobCancelled)
	}
	t := time.NewTicker(jobPollInterval / 5)
	defer t.Stop()
	for {
		sj, err := r.store.GetJob(ctx, id)
		if err != nil || !sj.Finished.IsZero() {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

var _ Fleet = (*fleet.Fleet)(nil)
