package engine_test

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/engine"
	"github.com/airlockhq/airlock/internal/crawl/crawltest"
	"github.com/airlockhq/airlock/internal/fleet/fleettest"
)

// replicaEnv holds the Redis URL of the replica child process that
// TestFleetCrawlJobSurvivesKill kills.
const replicaEnv = "AIRLOCK_ENGINE_TEST_REPLICA_REDIS"

// fleetCrawlConfig is the configuration of every replica of the shared
// crawl tests, the child process's included.
func fleetCrawlConfig(redisURL string) engine.Config {
	return engine.Config{
		InMemory:      true,
		State:         engine.StateConfig{RedisURL: redisURL, CrawlLease: time.Second},
		DefaultTenant: "acme",
		Tenants: map[string]engine.TenantConfig{
			"acme": {Profile: "posix", Exceptions: []string{"127.0.0.1"}},
		},
	}
}

// waitFleetJob waits for a crawl job to finish, read on e.
func waitFleetJob(t *testing.T, e *engine.Engine, id string, within time.Duration) *airlock.CrawlJob {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		job, err := e.CrawlJob(testCtx(t), airlock.Principal{Tenant: "acme"}, id)
		if err != nil {
			t.Fatal(err)
		}
		if job.FinishedAt != nil {
			return job
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s not finished after %v: %+v", id, within, job)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// jobURLs reads every stored page of a job and counts them by URL.
func jobURLs(t *testing.T, e *engine.Engine, id string) (map[string]int, int) {
	t.Helper()
	urls := map[string]int{}
	after, total := 0, 0
	for {
		pages, err := e.CrawlJobPages(testCtx(t), airlock.Principal{Tenant: "acme"}, id, after, engine.MaxJobPageLimit)
		if err != nil {
			t.Fatal(err)
		}
		if len(pages) == 0 {
			return urls, total
		}
		for _, p := range pages {
			if p.Seq != after+1 {
				t.Fatalf("page seq %d after %d", p.Seq, after)
			}
			after = p.Seq
			urls[p.Page.URL]++
			total++
		}
	}
}

// joinedRuns counts the audited crawl runs that joined a job, read on e.
// The other replicas' records reach e through the fleet's audit stream,
// after their own writers flush: it waits (a hang guard of 10 s) until at
// least min of them have arrived.
func joinedRuns(t *testing.T, e *engine.Engine, id string, min int, others ...*engine.Engine) int {
	t.Helper()
	for _, o := range others {
		if err := o.FlushAudit(testCtx(t)); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if err := e.FlushAudit(testCtx(t)); err != nil {
			t.Fatal(err)
		}
		recs, err := e.AuditQuery(testCtx(t), airlock.AuditQuery{Broker: "crawl", Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, r := range recs {
			if strings.Contains(r.Target, "job="+id+" joined") {
				n++
			}
		}
		if n >= min || time.Now().After(deadline) {
			return n
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// heldUntil serves site through a front that holds every request but the
// seed's until each of joined has fired (a hang guard of a minute), so
// that the replicas expected to join a shared job find work left when
// they do, however fast the first one crawls: the test then needs no
// more pages than its assertions do. The crawl's counts stay the site's.
func heldUntil(t *testing.T, site *crawltest.TreeSite, seed string, joined ...*logWatch) *httptest.Server {
	t.Helper()
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != seed {
			for _, j := range joined {
				select {
				case <-j.seen:
				case <-r.Context().Done():
					return
				case <-time.After(time.Minute):
				}
			}
		}
		site.Config.Handler.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	return front
}

// A crawl job started on one of three replicas is worked by all three: a
// 500-page site is stored exactly once, every page fetched once, and the
// job's state and pages read the same from any replica. The site holds
// its pages until the other two replicas have joined.
func TestFleetCrawlJobShared(t *testing.T) {
	t.Parallel()
	const pages = 500
	srv := fleettest.Start(t)
	es := make([]*engine.Engine, 3)
	joins := make([]*logWatch, 3)
	for i := range es {
		joins[i] = &logWatch{want: "crawl job joined", seen: make(chan struct{})}
		es[i] = newEngine(t, fleetCrawlConfig(srv.URL(0)), engine.WithLogger(slog.New(slog.NewTextHandler(joins[i], nil))))
	}
	site := crawltest.NewTreeSite(t, pages, "", 2*time.Millisecond)
	front := heldUntil(t, site, "/p0", joins[1:]...)
	p := airlock.Principal{Tenant: "acme"}
	job, err := es[0].StartCrawlJob(testCtx(t), p, airlock.CrawlRequest{Seed: front.URL + "/p0", MaxPages: pages, Depth: 40,
		Concurrency: 4, PerHostConcurrency: 8})
	if err != nil {
		t.Fatal(err)
	}
	done := waitFleetJob(t, es[1], job.ID, 2*time.Minute)
	if done.State != airlock.JobDone || done.Pages != pages || done.Summary == nil || done.Summary.Pages != pages {
		t.Fatalf("job = %+v, summary %+v; want done with %d pages", done, done.Summary, pages)
	}
	urls, total := jobURLs(t, es[2], job.ID)
	if len(urls) != pages || total != pages {
		t.Fatalf("%d pages stored, %d distinct; want %d once each", total, len(urls), pages)
	}
	paths, _, extra := site.PageHits()
	if paths != pages || extra != 0 {
		t.Fatalf("%d pages requested, %d requested again; want %d once each", paths, extra, pages)
	}
	if n := joinedRuns(t, es[0], job.ID, 2, es[1:]...); n != 2 {
		t.Fatalf("%d replicas joined the job; want the other two working it", n)
	}
	t.Logf("%d pages on 3 replicas: %d ms", pages, done.Summary.ElapsedMS)
}

// A shared job cancelled on a replica that does not run it stops on all.
func TestFleetCrawlJobCancel(t *testing.T) {
	t.Parallel()
	srv := fleettest.Start(t)
	es := []*engine.Engine{newEngine(t, fleetCrawlConfig(srv.URL(0))), newEngine(t, fleetCrawlConfig(srv.URL(0)))}
	site := crawltest.NewTreeSite(t, 100000, "", 20*time.Millisecond)
	p := airlock.Principal{Tenant: "acme"}
	job, err := es[0].StartCrawlJob(testCtx(t), p, airlock.CrawlRequest{Seed: site.URL + "/p0", MaxPages: 5000, Depth: 40, Concurrency: 2})
	if err != nil {
		t.Fatal(err)
	}
	for site.Requests() < 20 {
		time.Sleep(10 * time.Millisecond)
	}
	if err := es[1].CancelCrawlJob(testCtx(t), p, job.ID); err != nil {
		t.Fatal(err)
	}
	done := waitFleetJob(t, es[0], job.ID, 10*time.Second)
	if done.State != airlock.JobCancelled {
		t.Fatalf("state %s, want cancelled", done.State)
	}
	n := site.Requests()
	time.Sleep(300 * time.Millisecond)
	if m := site.Requests(); m != n {
		t.Fatalf("%d requests after the job was cancelled", m-n)
	}
}

// TestFleetReplicaProcess is the replica that TestFleetCrawlJobSurvivesKill
// starts in a child process and kills: it joins the fleet's jobs until
// killed.
func TestFleetReplicaProcess(t *testing.T) {
	url := os.Getenv(replicaEnv)
	if url == "" {
		t.Skip("the child process of TestFleetCrawlJobSurvivesKill")
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	if _, err := engine.New(context.Background(), fleetCrawlConfig(url), engine.WithLogger(log)); err != nil {
		t.Fatal(err)
	}
	fmt.Println("ready")
	select {} // until SIGKILL
}

// Three replicas, one of them a process killed with SIGKILL in the middle
// of a 600-page crawl job: the job still completes with every page
// stored, and pages stored or fetched twice are bounded by what the dead
// replica was fetching (its concurrency). The site holds its pages until
// the child has joined, so that it is killed with work left.
func TestFleetCrawlJobSurvivesKill(t *testing.T) {
	t.Parallel()
	const pages = 600
	const childConcurrency = 4
	srv := fleettest.Start(t)
	joined := &logWatch{want: "crawl job joined", seen: make(chan struct{})}
	child := startChild(t, "TestFleetReplicaProcess", replicaEnv+"="+srv.URL(0), joined)
	if line, err := bufio.NewReader(child.stdout).ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("child: %q, %v", line, err)
	}
	es := []*engine.Engine{newEngine(t, fleetCrawlConfig(srv.URL(0))), newEngine(t, fleetCrawlConfig(srv.URL(0)))}
	site := crawltest.NewTreeSite(t, pages, "", 5*time.Millisecond)
	front := heldUntil(t, site, "/p0", joined)
	p := airlock.Principal{Tenant: "acme"}
	job, err := es[0].StartCrawlJob(testCtx(t), p, airlock.CrawlRequest{Seed: front.URL + "/p0", MaxPages: pages, Depth: 40,
		Concurrency: childConcurrency, PerHostConcurrency: childConcurrency})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-joined.seen:
	case <-time.After(time.Minute):
		t.Fatal("the child replica did not join the job")
	}
	// Let the child work a while, then kill it in the middle of fetches.
	start := site.Requests()
	for site.Requests() < start+100 {
		time.Sleep(5 * time.Millisecond)
	}
	child.kill9(t)
	t.Logf("child killed after %d page requests", site.Requests())

	done := waitFleetJob(t, es[1], job.ID, 2*time.Minute)
	if done.State != airlock.JobDone {
		t.Fatalf("job %s, summary %+v; want done", done.State, done.Summary)
	}
	urls, total := jobURLs(t, es[0], job.ID)
	if len(urls) != pages {
		t.Fatalf("%d distinct pages stored; want all %d (none lost)", len(urls), pages)
	}
	paths, _, extra := site.PageHits()
	if paths != pages {
		t.Fatalf("%d pages requested, want %d", paths, pages)
	}
	if total-pages > childConcurrency || extra > childConcurrency {
		t.Fatalf("%d pages stored twice, %d requested twice; want at most the dead replica's %d fetches in flight", total-pages, extra, childConcurrency)
	}
	t.Logf("job done after the kill: %d pages stored, %d stored twice, %d fetched twice", total, total-pages, extra)
}

// A revocation made on one replica stops a shared job on every replica
// that works it: the job fails as revoked and the site hears no more.
func TestFleetCrawlJobRevoked(t *testing.T) {
	t.Parallel()
	srv := fleettest.Start(t)
	es := make([]*engine.Engine, 3)
	joins := make([]*logWatch, 3)
	for i := range es {
		joins[i] = &logWatch{want: "crawl job joined", seen: make(chan struct{})}
		es[i] = newEngine(t, fleetCrawlConfig(srv.URL(0)), engine.WithLogger(slog.New(slog.NewTextHandler(joins[i], nil))))
	}
	site := crawltest.NewTreeSite(t, 100000, "", 10*time.Millisecond)
	p := airlock.Principal{Tenant: "acme"}
	job, err := es[0].StartCrawlJob(testCtx(t), p, airlock.CrawlRequest{Seed: site.URL + "/p0", MaxPages: 5000, Depth: 40, Concurrency: 2, PerHostConcurrency: 6})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range joins[1:] { // both other replicas work the job
		select {
		case <-w.seen:
		case <-time.After(10 * time.Second):
			t.Fatal("a replica did not join the job")
		}
	}
	if err := es[2].Revoke(testCtx(t), "acme", "fleet job test"); err != nil {
		t.Fatal(err)
	}
	// The site goes quiet at once on all three replicas.
	time.Sleep(200 * time.Millisecond)
	n := site.Requests()
	time.Sleep(500 * time.Millisecond)
	if m := site.Requests(); m != n {
		t.Fatalf("%d requests 200 ms after the revocation", m-n)
	}
	// A revoked tenant cannot read its jobs: lift the revocation to look.
	if err := es[0].Unrevoke(testCtx(t), "acme"); err != nil {
		t.Fatal(err)
	}
	var done *airlock.CrawlJob
	for range 100 {
		j, err := es[1].CrawlJob(testCtx(t), p, job.ID)
		if err == nil {
			done = j
			break
		}
		time.Sleep(10 * time.Millisecond) // the lifted revocation reaching replica B
	}
	if done == nil || done.State != airlock.JobFailed || done.Error == nil || done.Error.Code != airlock.CodeRevoked {
		t.Fatalf("job %+v; want failed as revoked", done)
	}
}

// logWatch is a log destination that closes seen when a line holds want.
type logWatch struct {
	want string
	once sync.Once
	seen chan struct{}
}

func (w *logWatch) Write(b []byte) (int, error) {
	if strings.Contains(string(b), w.want) {
		w.once.Do(func() { close(w.seen) })
	}
	return len(b), nil
}
