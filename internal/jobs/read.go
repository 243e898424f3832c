package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/gate"
	"github.com/airlockhq/airlock/internal/store"
)

// stale reports an unfinished job whose runner is gone.
func (r *Runner) stale(sj store.Job) bool {
	return sj.Finished.IsZero() && sj.Lease.Before(time.Now()) && r.local(sj.ID) == nil
}

// jobFor returns p's tenant's job id; another tenant's job is not found.
func (r *Runner) jobFor(ctx context.Context, p airlock.Principal, id string) (store.Job, error) {
	if err := r.cfg.CheckReader(p); err != nil {
		return store.Job{}, err
	}
	for try := 0; ; try++ {
		sj, err := r.store.GetJob(ctx, id)
		if errors.Is(err, store.ErrNotFound) || err == nil && sj.Tenant != p.Tenant {
			return store.Job{}, jobNotFound(id)
		}
		if err != nil {
			return store.Job{}, storeErr("read the crawl job", err)
		}
		if try == 1 || !r.stale(sj) {
			return sj, nil
		}
		r.expire(ctx)
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

// publicJobOf is publicJob with the freshest progress of a job this runner
// runs (the store's is at most a second old).
func (r *Runner) publicJobOf(sj store.Job) (*airlock.CrawlJob, error) {
	job, err := publicJob(sj)
	if err != nil {
		return nil, err
	}
	if run := r.local(sj.ID); run != nil && sj.Finished.IsZero() {
		if pr := run.latest(); pr != nil {
			job.Progress = *pr
		}
	}
	return job, nil
}

// Get returns p's tenant's job id: its state, progress, page count and,
// once finished, summary (and error when failed). An unknown id, or
// another tenant's job, is not_found.
func (r *Runner) Get(ctx context.Context, p airlock.Principal, id string) (*airlock.CrawlJob, error) {
	sj, err := r.jobFor(ctx, p, id)
	if err != nil {
		return nil, err
	}
	return r.publicJobOf(sj)
}

// listLimit refuses a list limit above the tenant's ceiling (a read:
// not a broker call, so not audited) and returns the limit to use: for 0,
// DefaultJobPageLimit, or the ceiling when that is lower.
func (r *Runner) listLimit(p airlock.Principal, limit int) (int, error) {
	l := r.cfg.Limits(p.Tenant)
	if err := l.CheckValue(gate.LimitListPage, "limit", int64(limit)); err != nil {
		return 0, err
	}
	if limit == 0 {
		return int(min(DefaultJobPageLimit, l.Ceiling(gate.LimitListPage))), nil
	}
	return limit, nil
}

// List lists p's tenant's jobs, newest first: at most limit (0:
// DefaultJobPageLimit; above limits.list_limit, at most MaxJobPageLimit,
// or negative: invalid, reason limit).
func (r *Runner) List(ctx context.Context, p airlock.Principal, limit int) ([]airlock.CrawlJob, error) {
	if err := r.cfg.CheckReader(p); err != nil {
		return nil, err
	}
	limit, err := r.listLimit(p, limit)
	if err != nil {
		return nil, err
	}
	var list []store.Job
	for try := range 2 {
		var err error
		list, err = r.store.ListJobs(ctx, p.Tenant, limit)
		if err != nil {
			return nil, storeErr("list crawl jobs", err)
		}
		stale := false
		for _, sj := range list {
			stale = stale || r.stale(sj)
		}
		if !stale || try == 1 {
			break
		}
		r.expire(ctx)
	}
	out := make([]airlock.CrawlJob, 0, len(list))
	for _, sj := range list {
		job, err := r.publicJobOf(sj)
		if err != nil {
			return nil, err
		}
		out = append(out, *job)
	}
	return out, nil
}

// Pages returns the pages of p's tenant's job id with seq > after, in
// order: at most limit (as List's). An empty result means there are none
// yet (or none left, once the job is finished).
func (r *Runner) Pages(ctx context.Context, p airlock.Principal, id string, after, limit int) ([]airlock.JobPage, error) {
	if after < 0 {
		return nil, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonCrawlJob, "after %d: want 0 or a page's seq", after)
	}
	limit, err := r.listLimit(p, limit)
	if err != nil {
		return nil, err
	}
	if _, err := r.jobFor(ctx, p, id); err != nil {
		return nil, err
	}
	pages, err := r.store.JobPages(ctx, id, after, limit)
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

// Cancel cancels p's tenant's job id and waits (until ctx ends) for it to
// stop: it ends cancelled, its pages kept. Cancelling a finished job does
// nothing. A job run by another process sharing the store (and not shared
// by a fleet) is cancelled through that process: here it is unavailable.
func (r *Runner) Cancel(ctx context.Context, p airlock.Principal, id string) error {
	sj, err := r.jobFor(ctx, p, id)
	if err != nil {
		return err
	}
	if !sj.Finished.IsZero() {
		return nil
	}
	if isFleetJob(sj) && r.fleet != nil {
		return r.cancelSharedJob(ctx, id)
	}
	run := r.local(id)
	if run == nil {
		return airlock.Errorf(airlock.CodeUnavailable, airlock.ReasonCrawlJobElsewhere,
			"crawl job %s runs in another airlock process (a replica, or a process sharing the data directory): cancel it there", id)
	}
	run.cancel(errJobCancelled)
	select {
	case <-run.done:
	case <-ctx.Done():
	}
	return nil
}

// Watch streams p's tenant's job id: first its stored pages with seq >
// after, then each new page and progress as they come (progress events
// are coalesced: a watcher gets the latest), then one "end" event carrying
// the job in its final state, and the channel closes. For a finished job
// that is the stored pages, then the end.
//
// No page is lost or repeated: every page is read back from the store in
// seq order. A watcher that reads slowly never slows the crawl: the crawl
// only signals it, and it catches up from the store at its own pace.
//
// The channel also closes, without an end event, when ctx ends, when the
// runner closes or when the store fails: reconnect with after set to the
// last seq received. Jobs run by another process are followed by polling
// the store.
func (r *Runner) Watch(ctx context.Context, p airlock.Principal, id string, after int) (<-chan airlock.CrawlJobEvent, error) {
	if after < 0 {
		return nil, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonCrawlJob, "after %d: want 0 or a page's seq", after)
	}
	if _, err := r.jobFor(ctx, p, id); err != nil {
		return nil, err
	}
	wake := make(chan struct{}, 1)
	out := make(chan airlock.CrawlJobEvent, jobWatchBuffer)
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil, errShuttingDown()
	}
	// Subscribe before the first read: a page stored after it wakes us.
	run := r.runs[id]
	if run != nil {
		run.mu.Lock()
		run.subs[wake] = struct{}{}
		run.mu.Unlock()
	}
	r.loops.Go(func() { r.watch(ctx, id, after, run, wake, out) })
	r.mu.Unlock()
	return out, nil
}

func (r *Runner) watch(ctx context.Context, id string, last int, run *jobRun, wake chan struct{}, out chan<- airlock.CrawlJobEvent) {
	defer close(out)
	var poll <-chan time.Time
	if run != nil {
		defer func() {
			run.mu.Lock()
			delete(run.subs, wake)
			run.mu.Unlock()
		}()
	}
	if run == nil || run.shared != nil { // pages stored by other processes
		t := time.NewTicker(jobPollInterval)
		defer t.Stop()
		poll = t.C
	}
	stop := r.ctx.Done()
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
			return // the runner is closing, and its store with it
		default:
		}
		if ctx.Err() == nil {
			r.logger.Error("crawl job: watch", slog.String("job", id), slog.String("error", err.Error()))
		}
	}
	var sent *airlock.CrawlProgress
	for {
		// The state first: a job is finished only after its last page is
		// stored, so the pages read next are all of them.
		sj, err := r.store.GetJob(ctx, id)
		if err != nil {
			fail(err)
			return
		}
		for {
			pages, err := r.store.JobPages(ctx, id, last, jobReplayBatch)
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
		job, err := r.publicJobOf(sj)
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
