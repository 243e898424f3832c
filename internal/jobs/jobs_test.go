package jobs

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/crawl"
	"github.com/airlockhq/airlock/internal/gate"
	"github.com/airlockhq/airlock/internal/leakcheck"
	"github.com/airlockhq/airlock/internal/store"
)

func TestMain(m *testing.M) { os.Exit(leakcheck.Main(m, "jobs", leakcheck.Options{})) }

// hangGuard bounds the waits of these tests; it is never the assertion.
const hangGuard = 30 * time.Second

// fakeCrawl stands in for the engine: a gate of one tenant ("acme") and a
// crawl that emits pages pages, then, when block, waits for its call to
// be cancelled.
type fakeCrawl struct {
	gate    *gate.Gate
	audit   *gate.Auditor
	pages   int
	block   bool
	started chan struct{} // one send per run that started
	runs    atomic.Int32
	panics  bool // the crawl panics after its pages
}

func newFake(t *testing.T, pages int, block bool) *fakeCrawl {
	t.Helper()
	a := gate.NewAuditor(gate.AuditorConfig{Interval: time.Hour})
	t.Cleanup(func() { a.Close(context.Background()) })
	g := gate.New(gate.Config{Auditor: a, Tenants: map[string]*gate.Tenant{
		"acme": {Name: "acme", Profile: gate.BuiltinProfiles()[gate.ProfilePosix]},
	}})
	return &fakeCrawl{gate: g, audit: a, pages: pages, block: block, started: make(chan struct{}, 16)}
}

func (f *fakeCrawl) crawler() Crawler {
	return Crawler{
		Begin: func(ctx context.Context, p airlock.Principal, target string) (*gate.Call, error) {
			return f.gate.Begin(ctx, p, airlock.CapabilityBrowse, "crawl", target)
		},
		Prepare: func(call *gate.Call, req airlock.CrawlRequest) (airlock.CrawlRequest, error) {
			if req.MaxPages > MaxJobPages {
				return req, airlock.Errorf(airlock.CodeTooLarge, "crawl_job_pages", "too many")
			}
			return req, nil
		},
		Run: func(call *gate.Call, _ crawl.Shared, _ bool, req airlock.CrawlRequest, emit func(*airlock.Page) error, progress func(airlock.CrawlProgress)) (*airlock.CrawlSummary, int64, error) {
			f.runs.Add(1)
			f.started <- struct{}{}
			for i := range f.pages {
				if err := emit(&airlock.Page{URL: fmt.Sprintf("%s%d", req.Seed, i)}); err != nil {
					return nil, 0, err
				}
				progress(airlock.CrawlProgress{Done: i + 1})
			}
			if f.panics {
				panic("hostile page")
			}
			if f.block {
				<-call.Ctx.Done()
				return &airlock.CrawlSummary{Pages: f.pages, Skipped: []airlock.Skipped{}}, 0, context.Cause(call.Ctx)
			}
			return &airlock.CrawlSummary{Pages: f.pages, Fetched: f.pages, Skipped: []airlock.Skipped{}}, 0, nil
		},
		Shareable: func(airlock.CrawlRequest) bool { return true },
	}
}

func newRunner(t *testing.T, st store.Jobs, f *fakeCrawl) *Runner {
	t.Helper()
	return New(context.Background(), Config{
		Store: st, Crawler: f.crawler(), NewID: f.gate.NewID,
		CheckReader: func(p airlock.Principal) error {
			if f.gate.Tenant(p.Tenant) == nil {
				return airlock.Errorf(airlock.CodeDenied, airlock.ReasonUnknownTenant, "unknown tenant %q", p.Tenant)
			}
			return nil
		},
		Limits:       func(string) *gate.Limits { return nil },
		DrainTimeout: time.Second,
	})
}

func memStore(t *testing.T) *store.SQLite {
	t.Helper()
	st, err := store.OpenMemory()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

var acme = airlock.Principal{Tenant: "acme"}

// drain reads a watch to its end and returns the page seqs and the final job.
func drain(t *testing.T, ch <-chan airlock.CrawlJobEvent) ([]int, *airlock.CrawlJob) {
	t.Helper()
	var seqs []int
	timeout := time.After(hangGuard)
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				return seqs, nil
			}
			switch ev.Kind {
			case airlock.JobEventPage:
				seqs = append(seqs, ev.Seq)
			case airlock.JobEventEnd:
				if _, ok := <-ch; ok {
					t.Error("an event after the end")
				}
				return seqs, ev.Job
			}
		case <-timeout:
			t.Fatal("watch did not end")
		}
	}
}

func TestRunnerRunsToTheEnd(t *testing.T) {
	f := newFake(t, 7, false)
	r := newRunner(t, memStore(t), f)
	defer r.Close(context.Background())
	ctx := context.Background()
	job, err := r.Start(ctx, acme, airlock.CrawlRequest{Seed: "https://example.com/"})
	if err != nil {
		t.Fatal(err)
	}
	ch, err := r.Watch(ctx, acme, job.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	seqs, end := drain(t, ch)
	if end == nil || end.State != airlock.JobDone || end.Summary == nil || end.Summary.DecisionID == "" {
		t.Fatalf("end = %+v, want a done job with a summary carrying the decision id", end)
	}
	if fmt.Sprint(seqs) != "[1 2 3 4 5 6 7]" {
		t.Errorf("watched seqs %v, want 1..7 once each in order", seqs)
	}
	pages, err := r.Pages(ctx, acme, job.ID, 5, 0)
	if err != nil || len(pages) != 2 || pages[0].Seq != 6 || pages[0].Page.URL != "https://example.com/5" {
		t.Errorf("Pages after 5 = %+v, %v; want seqs 6 and 7", pages, err)
	}
	list, err := r.List(ctx, acme, 0)
	if err != nil || len(list) != 1 || list[0].ID != job.ID || list[0].Pages != 7 {
		t.Errorf("List = %+v, %v; want the one job with 7 pages", list, err)
	}
	if _, err := r.Get(ctx, airlock.Principal{Tenant: "other"}, job.ID); airlock.CodeOf(err) != airlock.CodeDenied {
		t.Errorf("Get by an unknown tenant: %v, want denied", err)
	}
	if _, err := r.Pages(ctx, acme, job.ID, -1, 0); airlock.CodeOf(err) != airlock.CodeInvalid {
		t.Errorf("Pages after -1: %v, want invalid", err)
	}
}

func TestRunnerCancelAndCap(t *testing.T) {
	f := newFake(t, 2, true)
	r := newRunner(t, memStore(t), f)
	defer r.Close(context.Background())
	ctx := context.Background()
	var ids []string
	for range MaxRunningJobs {
		job, err := r.Start(ctx, acme, airlock.CrawlRequest{Seed: "https://example.com/"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, job.ID)
		<-f.started
	}
	if _, err := r.Start(ctx, acme, airlock.CrawlRequest{Seed: "https://example.com/"}); airlock.CodeOf(err) != airlock.CodeRateLimited {
		t.Fatalf("job %d: %v, want rate_limited", MaxRunningJobs+1, err)
	}
	if _, err := r.Start(ctx, acme, airlock.CrawlRequest{Seed: "https://example.com/", MaxPages: MaxJobPages + 1}); airlock.CodeOf(err) != airlock.CodeTooLarge {
		t.Fatalf("a refused request: %v, want Prepare's too_large", err)
	}
	cctx, cancel := context.WithTimeout(ctx, hangGuard)
	defer cancel()
	if err := r.Cancel(cctx, acme, ids[0]); err != nil {
		t.Fatal(err)
	}
	job, err := r.Get(ctx, acme, ids[0])
	if err != nil || job.State != airlock.JobCancelled || job.Summary == nil || job.Summary.Stopped != StoppedCancelled || job.Pages != 2 {
		t.Fatalf("cancelled job = %+v, %v; want cancelled, 2 pages kept", job, err)
	}
	// The cancelled job's slot is free again.
	if _, err := r.Start(ctx, acme, airlock.CrawlRequest{Seed: "https://example.com/"}); err != nil {
		t.Fatalf("a job after a cancel: %v", err)
	}
	<-f.started
}

func TestRunnerCloseInterrupts(t *testing.T) {
	f := newFake(t, 3, true)
	st := memStore(t)
	r := newRunner(t, st, f)
	ctx := context.Background()
	job, err := r.Start(ctx, acme, airlock.CrawlRequest{Seed: "https://example.com/"})
	if err != nil {
		t.Fatal(err)
	}
	<-f.started
	ch, err := r.Watch(ctx, acme, job.ID, 0) // left open: Close ends it
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for range ch {
		}
	}()
	r.Close(ctx)
	if _, err := r.Start(ctx, acme, airlock.CrawlRequest{Seed: "https://example.com/"}); airlock.ReasonOf(err) != airlock.ReasonShuttingDown {
		t.Errorf("Start after Close: %v, want shutting_down", err)
	}
	if _, err := r.Watch(ctx, acme, job.ID, 0); airlock.ReasonOf(err) != airlock.ReasonShuttingDown {
		t.Errorf("Watch after Close: %v, want shutting_down", err)
	}
	sj, err := st.GetJob(ctx, job.ID)
	if err != nil || sj.State != airlock.JobInterrupted || sj.Pages != 3 {
		t.Fatalf("stored job = %+v, %v; want interrupted with its 3 pages", sj, err)
	}
}

func TestRunnerExpiresDeadProcesses(t *testing.T) {
	st := memStore(t)
	ctx := context.Background()
	old := time.Now().Add(-time.Hour)
	if err := st.CreateJob(ctx, store.Job{ID: "01DEAD", Tenant: "acme", Owner: "gone", State: airlock.JobRunning,
		Request: []byte(`{"seed":"https://example.com/"}`), Progress: []byte(`{"queued":3,"failed":1}`),
		Created: old, Updated: old, Lease: old.Add(DefaultJobLease)}); err != nil {
		t.Fatal(err)
	}
	f := newFake(t, 0, false)
	r := newRunner(t, st, f)
	defer r.Close(ctx)
	if sj, err := st.GetJob(ctx, "01DEAD"); err != nil || sj.State != airlock.JobInterrupted {
		t.Fatalf("after New, the stored job = %+v, %v; want it marked interrupted", sj, err)
	}
	job, err := r.Get(ctx, acme, "01DEAD")
	if err != nil || job.State != airlock.JobInterrupted || job.Summary == nil ||
		job.Summary.Stopped != StoppedInterrupted || job.Summary.Queued != 3 || job.Summary.Failed != 1 {
		t.Fatalf("job of a dead process = %+v, %v; want interrupted, its summary made of its progress", job, err)
	}
	if err := r.Cancel(ctx, acme, "01DEAD"); err != nil {
		t.Errorf("cancelling a finished job: %v, want nothing done", err)
	}
	if f.runs.Load() != 0 {
		t.Errorf("%d crawls ran, want none", f.runs.Load())
	}
}

// A watcher of a job another process runs polls the store until Close
// ends it: Close waits for it, and its channel closes without an end.
func TestRunnerCloseEndsWatchers(t *testing.T) {
	st := memStore(t)
	ctx := context.Background()
	now := time.Now()
	if err := st.CreateJob(ctx, store.Job{ID: "01ELSEWHERE", Tenant: "acme", Owner: "another-process", State: airlock.JobRunning,
		Request: []byte(`{}`), Created: now, Updated: now, Lease: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	r := newRunner(t, st, newFake(t, 0, false))
	ch, err := r.Watch(ctx, acme, "01ELSEWHERE", 0)
	if err != nil {
		t.Fatal(err)
	}
	if ev := <-ch; ev.Kind != airlock.JobEventProgress {
		t.Fatalf("first event %+v, want the job's progress", ev)
	}
	r.Close(ctx)
	select {
	case ev, ok := <-ch:
		if ok {
			t.Fatalf("after Close: event %+v, want the channel closed", ev)
		}
	default:
		t.Fatal("Close returned with the watcher still running")
	}
}
