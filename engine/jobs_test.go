package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/engine"
	"github.com/airlockhq/airlock/internal/store"
	"github.com/airlockhq/airlock/internal/store/storetest"
)

// jobSite serves a binary tree of pages on loopback: / links to /n/1, and
// /n/i to /n/2i and /n/2i+1. Pages numbered blockFrom or more (and / when
// blockFrom is 0) answer only at the test's end or the request ends; blockFrom < 0 blocks none. It returns
// the site's URL.
func jobSite(t *testing.T, blockFrom int) string {
	t.Helper()
	block := make(chan struct{})
	srv := serveOn(t, "127.0.0.1", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			http.NotFound(w, r)
			return
		}
		n := 0
		if s, ok := strings.CutPrefix(r.URL.Path, "/n/"); ok {
			var err error
			if n, err = strconv.Atoi(s); err != nil {
				http.NotFound(w, r)
				return
			}
		} else if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		if blockFrom >= 0 && n >= blockFrom {
			select {
			case <-block:
			case <-r.Context().Done():
				return
			}
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		body := strings.Repeat(fmt.Sprintf("Words about page %d and its subject. ", n), 20)
		links := `<a href="/n/1">one</a>`
		if n > 0 {
			links = fmt.Sprintf(`<a href="/n/%d">left</a> <a href="/n/%d">right</a>`, 2*n, 2*n+1)
		}
		fmt.Fprintf(w, `<!doctype html><html lang="en"><head><title>Page %d</title></head><body><h1>Page %d</h1><p>%s</p>%s</body></html>`, n, n, body, links)
	}))
	t.Cleanup(func() { close(block) }) // runs before the server closes
	return srv.URL
}

func jobEngineConfig(tenants ...string) engine.Config {
	cfg := engine.Config{Egress: engine.EgressConfig{Exceptions: []string{"127.0.0.1"}}}
	if len(tenants) > 0 {
		cfg.DefaultTenant = tenants[0]
		cfg.Tenants = map[string]engine.TenantConfig{}
		for _, name := range tenants {
			cfg.Tenants[name] = engine.TenantConfig{Profile: "posix"}
		}
	}
	return cfg
}

// waitJob polls the job until cond holds (failing after 20 s).
func waitJob(t *testing.T, e *engine.Engine, p airlock.Principal, id string, what string, cond func(*airlock.CrawlJob) bool) *airlock.CrawlJob {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		job, err := e.CrawlJob(context.Background(), p, id)
		if err != nil {
			t.Fatalf("CrawlJob(%s): %v", id, err)
		}
		if cond(job) {
			return job
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s: never %s; last %+v", id, what, job)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func finished(j *airlock.CrawlJob) bool { return airlock.JobFinished(j.State) }

// stream is what a watch delivered until its channel closed.
type stream struct {
	seqs     []int
	pages    []*airlock.Page
	progress int
	end      *airlock.CrawlJob
}

// collect reads a watch to its end (failing after 20 s). Nothing may
// follow the end event.
func collect(t *testing.T, ch <-chan airlock.CrawlJobEvent) stream {
	t.Helper()
	var s stream
	timeout := time.After(20 * time.Second)
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				return s
			}
			if s.end != nil {
				t.Fatalf("event %+v after the end event", ev)
			}
			switch ev.Kind {
			case airlock.JobEventPage:
				if ev.Page == nil {
					t.Fatalf("page event %d without a page", ev.Seq)
				}
				s.seqs = append(s.seqs, ev.Seq)
				s.pages = append(s.pages, ev.Page)
			case airlock.JobEventProgress:
				if ev.Progress == nil {
					t.Fatal("progress event without progress")
				}
				s.progress++
			case airlock.JobEventEnd:
				if ev.Job == nil {
					t.Fatal("end event without a job")
				}
				s.end = ev.Job
			default:
				t.Fatalf("event of kind %q", ev.Kind)
			}
		case <-timeout:
			t.Fatalf("watch did not end; got %d pages so far", len(s.seqs))
		}
	}
}

func seqRange(from, to int) []int {
	var out []int
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

func TestCrawlJobRunsToTheEnd(t *testing.T) {
	site := jobSite(t, -1)
	e := newEngine(t, jobEngineConfig())
	ctx := testCtx(t)
	p := e.Principal()

	job, err := e.StartCrawlJob(ctx, p, airlock.CrawlRequest{Seed: site + "/", MaxPages: 12, Depth: 10})
	if err != nil {
		t.Fatal(err)
	}
	wantULID(t, job.ID)
	if job.Tenant != "local" || job.State != airlock.JobQueued || job.Request.MaxPages != 12 || job.CreatedAt.IsZero() {
		t.Errorf("started job = %+v", job)
	}
	s := collect(t, mustWatch(t, e, ctx, p, job.ID, 0))
	if !slices.Equal(s.seqs, seqRange(1, 12)) {
		t.Errorf("watched seqs %v, want 1..12", s.seqs)
	}
	if s.end == nil || s.end.State != airlock.JobDone || s.end.Pages != 12 || s.end.Summary == nil || s.end.Summary.Pages != 12 ||
		s.end.FinishedAt == nil || s.end.Error != nil {
		t.Fatalf("end event job = %+v", s.end)
	}
	wantULID(t, s.end.Summary.DecisionID)
	if s.progress == 0 {
		t.Error("no progress event")
	}

	// Paging through the results gives the pages the watch gave.
	var all []airlock.JobPage
	for after := 0; ; {
		pages, err := e.CrawlJobPages(ctx, p, job.ID, after, 5)
		if err != nil {
			t.Fatal(err)
		}
		if len(pages) > 5 {
			t.Fatalf("%d pages with limit 5", len(pages))
		}
		if len(pages) == 0 {
			break
		}
		all = append(all, pages...)
		after = pages[len(pages)-1].Seq
	}
	if len(all) != 12 {
		t.Fatalf("paged %d pages, want 12", len(all))
	}
	urls := map[string]bool{}
	for i, jp := range all {
		if jp.Seq != i+1 || jp.Page.URL != s.pages[i].URL || !strings.HasPrefix(jp.Page.Title, "Page ") || jp.Page.Text == "" {
			t.Errorf("page %d: seq %d, %s %q (watched %s)", i+1, jp.Seq, jp.Page.URL, jp.Page.Title, s.pages[i].URL)
		}
		urls[jp.Page.URL] = true
	}
	if len(urls) != 12 {
		t.Errorf("%d distinct URLs among 12 pages", len(urls))
	}
	if _, err := e.CrawlJobPages(ctx, p, job.ID, -1, 0); airlock.CodeOf(err) != airlock.CodeInvalid {
		t.Errorf("after -1: %v", err)
	}

	got, err := e.CrawlJob(ctx, p, job.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != airlock.JobDone || got.Pages != 12 || got.Summary.Pages != 12 || got.Progress.Done == 0 {
		t.Errorf("CrawlJob = %+v", got)
	}
	// The job's JSON is the API's.
	b, _ := json.Marshal(got)
	for _, key := range []string{`"id":`, `"tenant":"local"`, `"state":"done"`, `"request":`, `"progress":`, `"pages":12`, `"summary":`, `"created_at":`, `"updated_at":`, `"finished_at":`} {
		if !strings.Contains(string(b), key) {
			t.Errorf("job JSON lacks %s: %s", key, b)
		}
	}
	if strings.Contains(string(b), `"error"`) {
		t.Errorf("a done job's JSON has an error: %s", b)
	}

	// A watch of a finished job replays what follows after, then ends.
	s = collect(t, mustWatch(t, e, ctx, p, job.ID, 9))
	if !slices.Equal(s.seqs, []int{10, 11, 12}) || s.end == nil || s.end.State != airlock.JobDone || s.progress != 0 {
		t.Errorf("replay after 9: seqs %v, %d progress, end %+v", s.seqs, s.progress, s.end)
	}
	s = collect(t, mustWatch(t, e, ctx, p, job.ID, 12))
	if len(s.seqs) != 0 || s.end == nil {
		t.Errorf("replay after the last: seqs %v, end %+v", s.seqs, s.end)
	}

	// A second job, then the list, newest first.
	job2, err := e.StartCrawlJob(ctx, p, airlock.CrawlRequest{URLs: []string{site + "/n/7", site + "/n/8"}})
	if err != nil {
		t.Fatal(err)
	}
	waitJob(t, e, p, job2.ID, "finished", finished)
	list, err := e.CrawlJobs(ctx, p, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].ID != job2.ID || list[1].ID != job.ID || list[0].Pages != 2 {
		t.Errorf("CrawlJobs = %+v", list)
	}
	if list, _ := e.CrawlJobs(ctx, p, 1); len(list) != 1 || list[0].ID != job2.ID {
		t.Errorf("CrawlJobs limit 1 = %+v", list)
	}

	// Each job is one broker call, audited once, as a crawl.
	flush(t, e)
	recs := auditAll(t, e, airlock.AuditQuery{Broker: "crawl"})
	if len(recs) != 2 {
		t.Fatalf("%d crawl records, want 2 (one per job): %+v", len(recs), recs)
	}
	for _, r := range recs {
		if r.Outcome != "allow" || !strings.Contains(r.Target, "job=") || r.BytesIn == 0 {
			t.Errorf("record %+v", r)
		}
	}
	if !slices.ContainsFunc(recs, func(r airlock.AuditRecord) bool { return r.ID == got.Summary.DecisionID }) {
		t.Errorf("the summary's decision id %s is not in the audit log", got.Summary.DecisionID)
	}
}

func mustWatch(t *testing.T, e *engine.Engine, ctx context.Context, p airlock.Principal, id string, after int) <-chan airlock.CrawlJobEvent {
	t.Helper()
	ch, err := e.WatchCrawlJob(ctx, p, id, after)
	if err != nil {
		t.Fatalf("WatchCrawlJob: %v", err)
	}
	return ch
}

func TestCrawlJobCancel(t *testing.T) {
	site := jobSite(t, 3)
	e := newEngine(t, jobEngineConfig())
	ctx := testCtx(t)
	p := e.Principal()
	job, err := e.StartCrawlJob(ctx, p, airlock.CrawlRequest{Seed: site + "/", MaxPages: 100, Depth: 10})
	if err != nil {
		t.Fatal(err)
	}
	running := waitJob(t, e, p, job.ID, "running with 3 pages", func(j *airlock.CrawlJob) bool { return j.Pages >= 3 })
	if running.State != airlock.JobRunning || running.Summary != nil || running.FinishedAt != nil {
		t.Errorf("running job = %+v", running)
	}

	// A watcher whose context ends is closed, without an end event.
	wctx, wcancel := context.WithCancel(ctx)
	ch := mustWatch(t, e, wctx, p, job.ID, 0)
	var seen []int
	for len(seen) < 3 {
		ev := <-ch
		if ev.Kind == airlock.JobEventPage {
			seen = append(seen, ev.Seq)
		}
	}
	wcancel()
	for ev := range ch {
		if ev.Kind == airlock.JobEventEnd {
			t.Errorf("end event after the watcher's context ended: %+v", ev.Job)
		}
	}

	// The crawl is blocked on page 3: cancel it.
	live := mustWatch(t, e, ctx, p, job.ID, 3)
	if err := e.CancelCrawlJob(ctx, p, job.ID); err != nil {
		t.Fatal(err)
	}
	got, err := e.CrawlJob(ctx, p, job.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != airlock.JobCancelled || got.Pages != 3 || got.Summary == nil || got.Summary.Stopped != engine.StoppedCancelled ||
		got.FinishedAt == nil || got.Error != nil {
		t.Errorf("cancelled job = %+v (summary %+v)", got, got.Summary)
	}
	s := collect(t, live)
	if len(s.seqs) != 0 || s.end == nil || s.end.State != airlock.JobCancelled {
		t.Errorf("live watcher: seqs %v, end %+v", s.seqs, s.end)
	}
	if pages, err := e.CrawlJobPages(ctx, p, job.ID, 0, 0); err != nil || len(pages) != 3 {
		t.Errorf("pages of the cancelled job: %d, %v", len(pages), err)
	}
	// Cancelling a finished job does nothing.
	if err := e.CancelCrawlJob(ctx, p, job.ID); err != nil {
		t.Errorf("cancel again: %v", err)
	}
	if got, _ := e.CrawlJob(ctx, p, job.ID); got.State != airlock.JobCancelled {
		t.Errorf("state after a second cancel: %s", got.State)
	}
	// The call ended: nothing is in flight, and it was audited once.
	flush(t, e)
	recs := auditAll(t, e, airlock.AuditQuery{Broker: "crawl"})
	if len(recs) != 1 || airlock.Reason(recs[0].Reason) != airlock.ReasonCanceled {
		t.Errorf("crawl records = %+v", recs)
	}
}

func TestCrawlJobTenants(t *testing.T) {
	site := jobSite(t, 2)
	e := newEngine(t, jobEngineConfig("acme", "globex"))
	ctx := testCtx(t)
	acme, globex := airlock.Principal{Tenant: "acme", Instance: "agent-1"}, airlock.Principal{Tenant: "globex"}

	job, err := e.StartCrawlJob(ctx, acme, airlock.CrawlRequest{Seed: site + "/", MaxPages: 50, Depth: 10})
	if err != nil {
		t.Fatal(err)
	}
	waitJob(t, e, acme, job.ID, "with 2 pages", func(j *airlock.CrawlJob) bool { return j.Pages >= 2 })

	// Another instance of the tenant sees the job.
	if _, err := e.CrawlJob(ctx, airlock.Principal{Tenant: "acme"}, job.ID); err != nil {
		t.Errorf("the tenant's other principal: %v", err)
	}
	// Another tenant does not, whatever it tries; nor does anyone see an
	// unknown id.
	unknown := storetest.ULID(time.Now(), 42)
	for _, tc := range []struct {
		p  airlock.Principal
		id string
	}{{globex, job.ID}, {acme, unknown}, {acme, "not-an-id"}} {
		_, err := e.CrawlJob(ctx, tc.p, tc.id)
		wantCode(t, err, airlock.CodeNotFound, "crawl_job")
		_, err = e.CrawlJobPages(ctx, tc.p, tc.id, 0, 0)
		wantCode(t, err, airlock.CodeNotFound, "crawl_job")
		_, err = e.WatchCrawlJob(ctx, tc.p, tc.id, 0)
		wantCode(t, err, airlock.CodeNotFound, "crawl_job")
		wantCode(t, e.CancelCrawlJob(ctx, tc.p, tc.id), airlock.CodeNotFound, "crawl_job")
		if strings.Contains(fmt.Sprint(err), "acme") {
			t.Errorf("the not_found error names the owner: %v", err)
		}
	}
	if list, err := e.CrawlJobs(ctx, globex, 0); err != nil || len(list) != 0 {
		t.Errorf("globex's jobs = %+v, %v", list, err)
	}
	if list, err := e.CrawlJobs(ctx, acme, 0); err != nil || len(list) != 1 {
		t.Errorf("acme's jobs = %+v, %v", list, err)
	}
	// Unknown tenants and bad principals are refused before any lookup.
	_, err = e.CrawlJob(ctx, airlock.Principal{Tenant: "initech"}, job.ID)
	wantCode(t, err, airlock.CodeDenied, "unknown_tenant")
	_, err = e.CrawlJobs(ctx, airlock.Principal{}, 0)
	wantCode(t, err, airlock.CodeInvalid, "principal")

	// A revoked tenant's job fails as revoked, its pages kept; the
	// revoked tenant cannot read it until unrevoked.
	if err := e.Revoke(ctx, "acme", "test"); err != nil {
		t.Fatal(err)
	}
	_, err = e.CrawlJob(ctx, acme, job.ID)
	wantCode(t, err, airlock.CodeRevoked, "revoked")
	if err := e.Unrevoke(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	got := waitJob(t, e, acme, job.ID, "finished", finished)
	if got.State != airlock.JobFailed || got.Error == nil || got.Error.Code != airlock.CodeRevoked || got.Pages < 2 {
		t.Errorf("revoked job = %+v (error %+v)", got, got.Error)
	}
	wantULID(t, got.Error.DecisionID)
}

func TestCrawlJobRefusedAtStart(t *testing.T) {
	cfg := jobEngineConfig("acme", "nobrowse")
	cfg.Tenants["nobrowse"] = engine.TenantConfig{Profile: "minimal"}
	// big's ceiling lets a request ask for more pages than a job stores.
	cfg.Tenants["big"] = engine.TenantConfig{Profile: "posix", Limits: engine.CeilingsConfig{CrawlMaxPages: 2 * engine.MaxJobPages}}
	e := newEngine(t, cfg)
	ctx := testCtx(t)
	acme, big := airlock.Principal{Tenant: "acme"}, airlock.Principal{Tenant: "big"}
	seed := "http://127.0.0.1:1/"
	tests := []struct {
		name   string
		p      airlock.Principal
		req    airlock.CrawlRequest
		code   airlock.Code
		reason airlock.Reason
	}{
		{"nothing to crawl", acme, airlock.CrawlRequest{}, airlock.CodeInvalid, "crawl_request"},
		{"seed and urls", acme, airlock.CrawlRequest{Seed: seed, URLs: []string{seed}}, airlock.CodeInvalid, "crawl_request"},
		{"negative depth", acme, airlock.CrawlRequest{Seed: seed, Depth: -2}, airlock.CodeInvalid, airlock.ReasonLimit},
		{"negative pages", acme, airlock.CrawlRequest{Seed: seed, MaxPages: -1}, airlock.CodeInvalid, airlock.ReasonLimit},
		{"bad seed", acme, airlock.CrawlRequest{Seed: "ftp://x/"}, airlock.CodeInvalid, "crawl_request"},
		{"bad extract", acme, airlock.CrawlRequest{Seed: seed, Extract: "some"}, airlock.CodeInvalid, "crawl_request"},
		{"bad tls profile", acme, airlock.CrawlRequest{Seed: seed, TLSProfile: "netscape"}, airlock.CodeInvalid, ""},
		{"unknown provider", acme, airlock.CrawlRequest{Seed: seed, Provider: "nope"}, airlock.CodeInvalid, "provider"},
		{"unknown proxy", acme, airlock.CrawlRequest{Seed: seed, Proxy: "nope"}, airlock.CodeDenied, "proxy"},
		{"bad narrowing", acme, airlock.CrawlRequest{Seed: seed, Narrow: &airlock.Narrowing{Allow: []string{"["}}}, airlock.CodeInvalid, "narrow"},
		{"pages above the ceiling", acme, airlock.CrawlRequest{Seed: seed, MaxPages: engine.MaxJobPages + 1}, airlock.CodeInvalid, airlock.ReasonLimit},
		{"urls above the ceiling", acme, airlock.CrawlRequest{URLs: make([]string, engine.MaxJobPages+1)}, airlock.CodeInvalid, airlock.ReasonLimit},
		{"more pages than a job stores", big, airlock.CrawlRequest{Seed: seed, MaxPages: engine.MaxJobPages + 1}, airlock.CodeTooLarge, "crawl_job_pages"},
		{"no browse capability", airlock.Principal{Tenant: "nobrowse"}, airlock.CrawlRequest{Seed: seed}, airlock.CodeDenied, "capability"},
		{"unknown tenant", airlock.Principal{Tenant: "initech"}, airlock.CrawlRequest{Seed: seed}, airlock.CodeDenied, "unknown_tenant"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			job, err := e.StartCrawlJob(ctx, tt.p, tt.req)
			if job != nil {
				t.Errorf("a job was returned: %+v", job)
			}
			wantErr(t, err, tt.code, string(tt.reason))
		})
	}
	if list, err := e.CrawlJobs(ctx, acme, 0); err != nil || len(list) != 0 {
		t.Errorf("refused requests made jobs: %+v, %v", list, err)
	}
	// Each refusal is one crawl decision, as Crawl's would be.
	flush(t, e)
	if recs := auditAll(t, e, airlock.AuditQuery{Broker: "crawl"}); len(recs) != len(tests) {
		t.Errorf("%d crawl records for %d refusals", len(recs), len(tests))
	}

	if err := e.Revoke(ctx, "acme", "test"); err != nil {
		t.Fatal(err)
	}
	_, err := e.StartCrawlJob(ctx, acme, airlock.CrawlRequest{Seed: seed})
	wantErr(t, err, airlock.CodeRevoked, "revoked")
}

func TestCrawlJobTenantCap(t *testing.T) {
	site := jobSite(t, 0) // every page blocks: jobs run until stopped
	e := newEngine(t, jobEngineConfig("acme", "globex"))
	ctx := testCtx(t)
	acme := airlock.Principal{Tenant: "acme"}
	req := airlock.CrawlRequest{Seed: site + "/"}
	var ids []string
	for range engine.MaxRunningJobs {
		job, err := e.StartCrawlJob(ctx, acme, req)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, job.ID)
	}
	_, err := e.StartCrawlJob(ctx, acme, req)
	wantErr(t, err, airlock.CodeRateLimited, "crawl_jobs")
	// The cap is per tenant.
	other, err := e.StartCrawlJob(ctx, airlock.Principal{Tenant: "globex"}, req)
	if err != nil {
		t.Fatalf("another tenant: %v", err)
	}
	// A finished job frees its slot.
	if err := e.CancelCrawlJob(ctx, acme, ids[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := e.StartCrawlJob(ctx, acme, req); err != nil {
		t.Errorf("after a cancel: %v", err)
	}
	_, err = e.StartCrawlJob(ctx, acme, req)
	wantErr(t, err, airlock.CodeRateLimited, "crawl_jobs")
	// Still going (queued until its goroutine marks it running).
	if got, _ := e.CrawlJob(ctx, airlock.Principal{Tenant: "globex"}, other.ID); got.State != airlock.JobRunning && got.State != airlock.JobQueued {
		t.Errorf("globex's job: %s, want running or queued", got.State)
	}
}

func TestCrawlJobSlowWatcher(t *testing.T) {
	site := jobSite(t, -1)
	e := newEngine(t, jobEngineConfig())
	ctx := testCtx(t)
	p := e.Principal()
	const n = 60 // several times the watch buffer
	job, err := e.StartCrawlJob(ctx, p, airlock.CrawlRequest{Seed: site + "/", MaxPages: n, Depth: 10, Concurrency: 4, PerHostConcurrency: 4})
	if err != nil {
		t.Fatal(err)
	}
	// Subscribed at once, read only after the crawl ended: if the watcher
	// held the crawl back, the job would never finish.
	ch := mustWatch(t, e, ctx, p, job.ID, 0)
	got := waitJob(t, e, p, job.ID, "finished while its watcher does not read", finished)
	if got.State != airlock.JobDone || got.Pages != n {
		t.Fatalf("job = %+v", got)
	}
	s := collect(t, ch)
	if !slices.Equal(s.seqs, seqRange(1, n)) {
		t.Errorf("slow watcher got seqs %v, want 1..%d once each in order", s.seqs, n)
	}
	if s.end == nil || s.end.State != airlock.JobDone {
		t.Errorf("end = %+v", s.end)
	}
}

// TestCrawlJobCloseInterrupts: Close stops running jobs and stores them as
// interrupted, pages kept; the next engine on the data directory reads
// them.
func TestCrawlJobCloseInterrupts(t *testing.T) {
	site := jobSite(t, 3)
	dir := t.TempDir()
	cfg := jobEngineConfig()
	cfg.DataDir = dir
	e1, err := engine.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	p := e1.Principal()
	job, err := e1.StartCrawlJob(ctx, p, airlock.CrawlRequest{Seed: site + "/", MaxPages: 100, Depth: 10})
	if err != nil {
		e1.Close(ctx)
		t.Fatal(err)
	}
	waitJob(t, e1, p, job.ID, "with 3 pages", func(j *airlock.CrawlJob) bool { return j.Pages >= 3 })
	watch := mustWatch(t, e1, ctx, p, job.ID, 3)
	if err := e1.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// The watcher of the closed engine is closed without an end event.
	for ev := range watch {
		if ev.Kind == airlock.JobEventEnd && ev.Job.State != airlock.JobInterrupted {
			t.Errorf("end event %+v", ev.Job)
		}
	}
	if _, err := e1.StartCrawlJob(ctx, p, airlock.CrawlRequest{Seed: site + "/"}); airlock.CodeOf(err) != airlock.CodeUnavailable {
		t.Errorf("start after Close: %v", err)
	}

	e2 := newEngine(t, cfg)
	got, err := e2.CrawlJob(ctx, p, job.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != airlock.JobInterrupted || got.Pages != 3 || got.Summary == nil || got.Summary.Stopped != engine.StoppedInterrupted || got.FinishedAt == nil {
		t.Errorf("after Close then New: %+v (summary %+v)", got, got.Summary)
	}
	pages, err := e2.CrawlJobPages(ctx, p, job.ID, 0, 0)
	if err != nil || len(pages) != 3 {
		t.Fatalf("pages kept: %d, %v", len(pages), err)
	}
	s := collect(t, mustWatch(t, e2, ctx, p, job.ID, 0))
	if !slices.Equal(s.seqs, []int{1, 2, 3}) || s.end == nil || s.end.State != airlock.JobInterrupted {
		t.Errorf("watch on the new engine: %v, end %+v", s.seqs, s.end)
	}
	// The interrupted call was audited by the engine that ran it.
	recs := auditAll(t, e2, airlock.AuditQuery{Broker: "crawl"})
	if len(recs) != 1 || recs[0].Reason != "shutting_down" {
		t.Errorf("crawl records = %+v", recs)
	}
}

// TestCrawlJobCrashedProcess: a job left running by a process that died
// (kill -9: no Close) is marked interrupted by the next engine, with the
// pages it stored; a job whose runner still renews its lease is left alone.
func TestCrawlJobCrashedProcess(t *testing.T) {
	dir := t.TempDir()
	st, err := store.Open(filepath.Join(dir, "airlock.db"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	now := time.Now()
	req, _ := json.Marshal(airlock.CrawlRequest{Seed: "http://127.0.0.1:1/"})
	prog, _ := json.Marshal(airlock.CrawlProgress{Done: 2, Queued: 9, Failed: 1})
	dead := store.Job{ID: storetest.ULID(now.Add(-time.Hour), 1), Tenant: "local", Owner: "dead-process", State: airlock.JobRunning,
		Request: req, Progress: prog, Created: now.Add(-time.Hour), Lease: now.Add(-time.Minute)}
	alive := dead
	alive.ID, alive.Owner, alive.Lease = storetest.ULID(now.Add(-time.Hour), 2), "live-process", now.Add(time.Hour)
	for _, j := range []store.Job{dead, alive} {
		if err := st.CreateJob(ctx, j); err != nil {
			t.Fatal(err)
		}
		for seq := 1; seq <= 2; seq++ {
			pg, _ := json.Marshal(airlock.Page{URL: fmt.Sprintf("http://127.0.0.1:1/%d", seq), Title: "stored"})
			if err := st.AppendJobPage(ctx, j.ID, seq, pg); err != nil {
				t.Fatal(err)
			}
		}
	}
	st.Close()

	cfg := jobEngineConfig()
	cfg.DataDir = dir
	e := newEngine(t, cfg)
	p := e.Principal()
	// New itself marked it, before anyone read it.
	st, err = store.Open(filepath.Join(dir, "airlock.db"))
	if err != nil {
		t.Fatal(err)
	}
	sj, err := st.GetJob(ctx, dead.ID)
	st.Close()
	if err != nil || sj.State != airlock.JobInterrupted {
		t.Errorf("after New, the store has %+v, %v", sj, err)
	}
	got, err := e.CrawlJob(ctx, p, dead.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != airlock.JobInterrupted || got.Pages != 2 || got.FinishedAt == nil || got.Summary == nil ||
		got.Summary.Stopped != engine.StoppedInterrupted || got.Summary.Pages != 2 || got.Summary.Queued != 9 || got.Progress.Done != 2 {
		t.Errorf("crashed job = %+v (summary %+v)", got, got.Summary)
	}
	pages, err := e.CrawlJobPages(ctx, p, dead.ID, 0, 0)
	if err != nil || len(pages) != 2 || pages[1].Page.URL != "http://127.0.0.1:1/2" {
		t.Errorf("pages = %+v, %v", pages, err)
	}
	got, err = e.CrawlJob(ctx, p, alive.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != airlock.JobRunning || got.FinishedAt != nil {
		t.Errorf("a job whose runner holds its lease = %+v", got)
	}
	// It runs elsewhere: this engine cannot cancel it.
	wantCode(t, e.CancelCrawlJob(ctx, p, alive.ID), airlock.CodeUnavailable, "crawl_job_elsewhere")
}

// TestCrawlJobSharedDataDir: two engines on one data directory, as serve
// and a CLI verb: the second does not interrupt the first's job, and
// follows it by polling the store.
func TestCrawlJobSharedDataDir(t *testing.T) {
	t.Parallel()
	site := jobSite(t, 3)
	cfg := jobEngineConfig()
	cfg.DataDir = t.TempDir()
	e1 := newEngine(t, cfg)
	ctx := testCtx(t)
	p := e1.Principal()
	job, err := e1.StartCrawlJob(ctx, p, airlock.CrawlRequest{Seed: site + "/", MaxPages: 100, Depth: 10})
	if err != nil {
		t.Fatal(err)
	}
	waitJob(t, e1, p, job.ID, "with 3 pages", func(j *airlock.CrawlJob) bool { return j.Pages >= 3 })

	e2 := newEngine(t, cfg)
	got, err := e2.CrawlJob(ctx, p, job.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != airlock.JobRunning || got.Pages != 3 {
		t.Errorf("the second engine sees %+v", got)
	}
	watch := mustWatch(t, e2, ctx, p, job.ID, 1)
	if err := e1.CancelCrawlJob(ctx, p, job.ID); err != nil {
		t.Fatal(err)
	}
	s := collect(t, watch)
	if !slices.Equal(s.seqs, []int{2, 3}) || s.end == nil || s.end.State != airlock.JobCancelled {
		t.Errorf("the second engine's watch: %v, end %+v", s.seqs, s.end)
	}
}
