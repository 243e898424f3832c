package engine

import (
	"context"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/browse"
	"github.com/airlockhq/airlock/internal/gate"
	"github.com/airlockhq/airlock/internal/jobs"
	"github.com/airlockhq/airlock/internal/store"
)

// Crawl job limits and timings (internal/jobs owns them).
const (
	// MaxJobPages is the most pages one crawl job stores: a request asking
	// for more is too_large, and a provider that emits more fails the job
	// (too_large) with the pages gathered kept.
	MaxJobPages = jobs.MaxJobPages
	// MaxRunningJobs is how many crawl jobs one tenant may run at once in
	// one engine; one more is rate_limited.
	MaxRunningJobs = jobs.MaxRunningJobs
	// DefaultJobPageLimit and MaxJobPageLimit bound CrawlJobPages and
	// CrawlJobs.
	DefaultJobPageLimit = jobs.DefaultJobPageLimit
	MaxJobPageLimit     = jobs.MaxJobPageLimit
	// DefaultJobRetention: finished jobs, and their pages, are deleted this
	// long after they finished.
	DefaultJobRetention = jobs.DefaultJobRetention
	// DefaultJobLease is how long an engine vouches for the jobs it runs
	// without renewing (it renews every third of it). A job whose lease
	// passed belongs to a process that died: any engine on the store marks
	// it interrupted (at New, on its sweeps, or when the job is read).
	DefaultJobLease = jobs.DefaultJobLease
)

// StoppedInterrupted is CrawlSummary.Stopped of an interrupted job, and
// StoppedCancelled that of a cancelled one.
const (
	StoppedInterrupted = jobs.StoppedInterrupted
	StoppedCancelled   = jobs.StoppedCancelled
)

// startJobs is called once by New: the runner marks interrupted the jobs
// whose process died and starts its loops.
func (e *Engine) startJobs(ctx context.Context) {
	var shared jobs.Fleet // a nil *fleet.Fleet is not a nil interface
	var st store.Jobs = e.st
	if e.fleet != nil {
		shared, st = e.fleet, e.fleet.Jobs()
	}
	e.jobs = jobs.New(ctx, jobs.Config{
		Store: st,
		Crawler: jobs.Crawler{Begin: e.beginCrawl, Prepare: e.prepareCrawlJob, Run: e.crawlIn,
			Shareable: e.sharesCrawl},
		Fleet: shared, Replica: e.replica, CrawlLease: e.cfg.State.CrawlLease,
		NewID: e.gate.NewID, CheckReader: e.gate.CheckReader, Limits: e.gate.Limits,
		DrainTimeout: DefaultDrainTimeout, Logger: e.logger,
	})
}

// beginCrawl begins the broker call of a crawl.
func (e *Engine) beginCrawl(ctx context.Context, p airlock.Principal, target string) (*gate.Call, error) {
	return e.begin(ctx, p, airlock.CapabilityBrowse, "crawl", target)
}

// prepareCrawlJob gives a job's request the tenant's defaults and refuses,
// before anything runs, a request that the crawl would refuse at its
// start, and one larger than a job may be.
func (e *Engine) prepareCrawlJob(call *gate.Call, req airlock.CrawlRequest) (airlock.CrawlRequest, error) {
	if _, err := e.initiator(call, req.Initiator); err != nil {
		return req, err
	}
	return jobs.Prepare(call.Tenant, e.browse, req)
}

// sharesCrawl reports whether req's provider can work a crawl job whose
// state the fleet shares.
func (e *Engine) sharesCrawl(req airlock.CrawlRequest) bool {
	name, _, err := e.browse.Resolve(airlock.VerbCrawl, req.Provider)
	return err == nil && (name == browse.NativeName || name == ChromiumProvider)
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
	return e.jobs.Start(ctx, p, req)
}

// CrawlJob returns the principal's tenant's job id: its state, progress,
// page count and, once finished, summary (and error when failed). An
// unknown id, or another tenant's job, is not_found.
func (e *Engine) CrawlJob(ctx context.Context, p airlock.Principal, id string) (*airlock.CrawlJob, error) {
	return e.jobs.Get(ctx, p, id)
}

// CrawlJobs lists the principal's tenant's jobs, newest first: at most
// limit (0: DefaultJobPageLimit; above limits.list_limit, at most
// MaxJobPageLimit, or negative: invalid, reason limit).
func (e *Engine) CrawlJobs(ctx context.Context, p airlock.Principal, limit int) ([]airlock.CrawlJob, error) {
	return e.jobs.List(ctx, p, limit)
}

// CrawlJobPages returns the pages of the principal's tenant's job id with
// seq > after, in order: at most limit (0: DefaultJobPageLimit; above
// limits.list_limit, at most MaxJobPageLimit, or negative: invalid, reason
// limit). Pass the last seq received as after to get the next
// ones; an empty result means there are none yet (or none left, once the
// job is finished).
func (e *Engine) CrawlJobPages(ctx context.Context, p airlock.Principal, id string, after, limit int) ([]airlock.JobPage, error) {
	return e.jobs.Pages(ctx, p, id, after, limit)
}

// CancelCrawlJob cancels the principal's tenant's job id and waits (until
// ctx ends) for it to stop: it ends cancelled, its pages kept. Cancelling
// a finished job does nothing. A job run by another process sharing the
// data directory is cancelled through that process: here it is
// unavailable.
func (e *Engine) CancelCrawlJob(ctx context.Context, p airlock.Principal, id string) error {
	return e.jobs.Cancel(ctx, p, id)
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
	return e.jobs.Watch(ctx, p, id, after)
}
