package engine

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/browse"
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
func (e *Engine) sharesCrawl(req airlock.CrawlRequest) bool {
	if e.fleet == nil {
		return false
	}
	if _, ok := e.jobStore.(pageAppender); !ok {
		return false
	}
	name, _, err := e.browse.Resolve(airlock.VerbCrawl, req.Provider)
	return err == nil && (name == browse.NativeName || name == ChromiumProvider)
}

// crawlLease is the lease of a shared crawl's URLs (state.crawl_lease).
func (e *Engine) crawlLease() time.Duration {
	return e.cfg.State.CrawlLease
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
func (e *Engine) sharedRun(r *jobRun, lead bool) *jobRun {
	r.shared = e.fleet.Crawl(r.id, e.crawlLease())
	r.runName = e.replica + "/" + r.id
	r.join = !lead
	return r
}

// shareJob announces a shared job's crawl to the fleet (lead) and records
// this run as working it.
func (e *Engine) shareJob(ctx context.Context, r *jobRun, p airlock.Principal) error {
	if !r.join {
		if err := r.shared.SetMeta(ctx, fleetJobMeta{Principal: p.String()}); err != nil {
			return err
		}
	}
	return r.shared.Join(ctx, r.runName)
}

// dropSharedJob undoes shareJob for a job that could not start.
func (e *Engine) dropSharedJob(r *jobRun) {
	if r.shared == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), jobStoreTimeout)
	defer cancel()
	r.shared.Close(ctx)
	if err := r.shared.Delete(ctx); err != nil {
		e.logger.Warn("crawl job: shared crawl state not removed", slog.String("job", r.id), slog.String("error", err.Error()))
	}
}

// fleetProgress is the progress of a shared job, over every replica.
func (e *Engine) fleetProgress(r *jobRun, created time.Time, local airlock.CrawlProgress) airlock.CrawlProgress {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), fleet.IOTimeout)
	defer cancel()
	st, err := r.shared.Stats(ctx)
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
func (e *Engine) leaveSharedJob(r *jobRun, sj store.Job, callID string, sum *airlock.CrawlSummary, err error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), jobStoreTimeout)
	defer cancel()
	cause := context.Cause(r.ctx)
	interrupted := airlock.ReasonOf(cause) == "shutting_down"
	res := fleetRunResult{Replica: e.replica, Summary: sum, Cancelled: errors.Is(cause, errJobCancelled)}
	if err != nil && !res.Cancelled && !interrupted && !errors.Is(cause, errJobConcluded) {
		res.Error, _ = json.Marshal(pub(err, callID))
	}
	if err := r.shared.Close(ctx); err != nil {
		e.logger.Warn("crawl job: leased URLs not returned; they return when their leases lapse",
			slog.String("job", sj.ID), slog.String("error", err.Error()))
	}
	raw, _ := json.Marshal(res)
	last, lerr := r.shared.Leave(ctx, r.runName, raw)
	if lerr != nil {
		e.logger.Error("crawl job: leaving the shared crawl", slog.String("job", sj.ID), slog.String("error", lerr.Error()))
		return
	}
	if last {
		e.concludeSharedJob(ctx, r, sj, interrupted)
	}
}

// concludeSharedJob stores the final state of a shared job, made of every
// run's result, and removes its crawl state.
func (e *Engine) concludeSharedJob(ctx context.Context, r *jobRun, sj store.Job, interrupted bool) {
	cur, err := e.jobStore.GetJob(ctx, sj.ID)
	if err != nil || !cur.Finished.IsZero() {
		return
	}
	results, err := r.shared.Results(ctx)
	if err != nil {
		e.logger.Error("crawl job: reading the runs' results", slog.String("job", sj.ID), slog.String("error", err.Error()))
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
	if pr := r.latest(); pr != nil {
		sj.Progress, _ = json.Marshal(*pr)
	}
	sj.Summary, _ = json.Marshal(sum)
	sj.Finished = now
	e.writeJob(r, &sj)
	if err := r.shared.Delete(ctx); err != nil {
		e.logger.Warn("crawl job: shared crawl state not removed", slog.String("job", sj.ID), slog.String("error", err.Error()))
	}
	e.logger.Info("crawl job concluded by the fleet", slog.String("job", sj.ID), slog.String("state", sj.State),
		slog.Int("pages", sum.Pages), slog.Any("runs", replicas))
}

// fleetJobLoop joins the fleet's shared crawl jobs and stops the local
// runs of jobs cancelled or concluded elsewhere.
func (e *Engine) fleetJobLoop() {
	j := e.jobs
	defer close(j.fleetDone)
	t := time.NewTicker(jobPollInterval)
	defer t.Stop()
	done := map[string]bool{} // jobs this engine worked or will not work
	for {
		select {
		case <-j.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), jobStoreTimeout)
		e.fleetJobTick(ctx, done)
		cancel()
	}
}

func (e *Engine) fleetJobTick(ctx context.Context, done map[string]bool) {
	j := e.jobs
	j.mu.Lock()
	var mine []*jobRun
	for _, r := range j.runs {
		if r.shared != nil {
			mine = append(mine, r)
		}
	}
	j.mu.Unlock()
	for _, r := range mine {
		done[r.id] = true
		if reason, err := r.shared.Stopped(ctx); err == nil && reason == airlock.JobCancelled {
			r.cancel(errJobCancelled)
			continue
		}
		// Concluded elsewhere, or gone (pruned, or Redis lost its data):
		// this run would otherwise wait for a frontier that never empties.
		if sj, err := e.jobStore.GetJob(ctx, r.id); err == nil && !sj.Finished.IsZero() || errors.Is(err, store.ErrNotFound) {
			r.cancel(errJobConcluded)
		}
	}
	ids, err := e.fleet.ActiveCrawls(ctx)
	if err != nil {
		return
	}
	active := make(map[string]bool, len(ids))
	for _, id := range ids {
		active[id] = true
		if !done[id] && e.joinCrawlJob(ctx, id) {
			done[id] = true
		}
	}
	for id := range done {
		if !active[id] {
			delete(done, id)
		}
	}
}

// joinCrawlJob starts a run of shared job id on this engine; it reports
// whether the job is settled for this engine (joined, finished, or not to
// be joined), false when it is worth trying again.
func (e *Engine) joinCrawlJob(ctx context.Context, id string) bool {
	sj, err := e.jobStore.GetJob(ctx, id)
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
	c := e.fleet.Crawl(id, e.crawlLease())
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
		e.logger.Error("crawl job: cannot join", slog.String("job", id), slog.String("error", err.Error()))
		return true
	}
	j := e.jobs
	j.mu.Lock()
	full := j.closed || j.running[p.Tenant] >= MaxRunningJobs
	j.mu.Unlock()
	if full {
		return false
	}
	jobCtx, cancel := context.WithCancelCause(context.Background())
	call, err := e.begin(jobCtx, p, airlock.CapabilityBrowse, "crawl", crawlTarget(req)+" job="+id+" joined")
	if err != nil {
		cancel(nil)
		// A principal refused for good (revoked, no grant) is not tried again.
		return airlock.CodeOf(err) != airlock.CodeRateLimited && airlock.CodeOf(err) != airlock.CodeUnavailable
	}
	r := e.sharedRun(&jobRun{id: id, tenant: p.Tenant, ctx: jobCtx, cancel: cancel, done: make(chan struct{}), subs: map[chan struct{}]struct{}{}}, false)
	j.mu.Lock()
	if j.closed || j.runs[id] != nil {
		j.mu.Unlock()
		cancel(nil)
		call.End(errShuttingDown(), 0, 0)
		return true
	}
	j.running[p.Tenant]++
	j.runs[id] = r
	j.wg.Add(1)
	j.mu.Unlock()
	if err := e.shareJob(ctx, r, p); err != nil {
		r.shared.Close(ctx)
		j.release(r)
		cancel(nil)
		call.End(err, 0, 0)
		return false
	}
	e.logger.Info("crawl job joined", slog.String("job", id), slog.String("replica", e.replica))
	go e.runJob(call, r, sj, req)
	return true
}

// cancelSharedJob asks every replica to stop shared job id and waits,
// until ctx ends, for the job to be concluded.
func (e *Engine) cancelSharedJob(ctx context.Context, id string) error {
	if err := e.fleet.Crawl(id, 0).Stop(ctx, airlock.JobCancelled); err != nil {
		return err
	}
	if r := e.jobs.local(id); r != nil {
		r.cancel(errJobCancelled)
	}
	t := time.NewTicker(jobPollInterval / 5)
	defer t.Stop()
	for {
		sj, err := e.jobStore.GetJob(ctx, id)
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
