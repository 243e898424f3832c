package engine_test

import (
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/engine"
	"github.com/airlockhq/airlock/internal/fleet/fleettest"
)

// replicas builds n engines sharing one real Redis, each with its own
// in-memory store, as n `airlock serve` processes would.
func replicas(t *testing.T, n int, tweak func(i int, c *engine.Config)) []*engine.Engine {
	t.Helper()
	srv := fleettest.Start(t)
	out := make([]*engine.Engine, n)
	for i := range n {
		cfg := engine.Config{
			State: engine.StateConfig{RedisURL: srv.URL(0)}, DefaultTenant: "acme",
			Tenants: map[string]engine.TenantConfig{
				"acme": {Profile: "posix", Exceptions: []string{"127.0.0.1", "127.0.0.3"}},
			},
		}
		if tweak != nil {
			tweak(i, &cfg)
		}
		out[i] = newEngine(t, cfg)
	}
	return out
}

func okServer(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) }))
	t.Cleanup(srv.Close)
	return srv
}

// A tenant's rate limit holds across three replicas.
func TestFleetGlobalRateLimit(t *testing.T) {
	t.Parallel()
	es := replicas(t, 3, func(_ int, c *engine.Config) {
		tc := c.Tenants["acme"]
		tc.Rate, tc.Burst = 0.001, 5
		c.Tenants["acme"] = tc
	})
	srv := okServer(t)
	p := airlock.Principal{Tenant: "acme"}
	var ok, limited int
	for i := range 12 {
		_, err := es[i%3].HTTP(testCtx(t), p, airlock.HTTPRequest{URL: srv.URL})
		switch airlock.CodeOf(err) {
		case "":
			ok++
		case airlock.CodeRateLimited:
			limited++
		default:
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if ok != 5 || limited != 7 {
		t.Fatalf("%d allowed, %d limited across the fleet; want the burst of 5 allowed", ok, limited)
	}
}

// A revocation made on replica A stops the tenant on B and C, including a
// crawl running on B, and lifting it on C frees every replica again: in
// five rounds, each change is seen by the replicas before the next is
// made. Propagation is asserted by its effect and its order, not by its
// speed (a loaded machine delays pub/sub); the delays are logged, and a
// replica that never sees a change fails at a generous hang guard.
func TestFleetRevocationPropagates(t *testing.T) {
	t.Parallel()
	const hangGuard = 30 * time.Second
	es := replicas(t, 3, nil)
	var pages atomic.Int64
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		pages.Add(1)
		time.Sleep(20 * time.Millisecond)
		n := pages.Load()
		w.Header().Set("Content-Type", "text/html")
		var b strings.Builder
		b.WriteString("<title>p</title>")
		for i := range 5 {
			b.WriteString(`<a href="/p` + itoa(n*10+int64(i)) + `">x</a>`)
		}
		w.Write([]byte(b.String()))
	}))
	t.Cleanup(site.Close)
	p := airlock.Principal{Tenant: "acme"}
	ctx := testCtx(t)

	// A crawl on B that would take far longer than the test.
	crawlDone := make(chan *airlock.CrawlSummary, 1)
	go func() {
		sum, _ := es[1].Crawl(ctx, p, airlock.CrawlRequest{Seed: site.URL + "/", MaxPages: 5000, Depth: 50, Concurrency: 2}, func(*airlock.Page) error { return nil }, nil)
		crawlDone <- sum
	}()
	for pages.Load() < 3 {
		time.Sleep(10 * time.Millisecond)
	}

	// until polls e until a call's code is (or, with not, is no longer)
	// revoked.
	until := func(round int, e *engine.Engine, revoked bool, what string) {
		t.Helper()
		start := time.Now()
		for {
			_, _, err := e.Sign(ctx, p, "none", []byte("x"))
			if (airlock.CodeOf(err) == airlock.CodeRevoked) == revoked {
				return
			}
			if time.Since(start) > hangGuard {
				t.Fatalf("round %d: %s not seen after %v: %v", round, what, hangGuard, err)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	var delays []time.Duration
	for round := range 5 {
		start := time.Now()
		if err := es[0].Revoke(ctx, "acme", "fleet test"); err != nil {
			t.Fatal(err)
		}
		for _, e := range es[1:] {
			until(round, e, true, "the revocation made on A")
		}
		delays = append(delays, time.Since(start))
		if round == 0 {
			select {
			case sum := <-crawlDone:
				if sum == nil || sum.Stopped != "revoked" {
					t.Fatalf("the crawl on B: %+v, want stopped: revoked", sum)
				}
			case <-time.After(hangGuard):
				t.Fatal("the crawl on B did not stop")
			}
		}
		if err := es[2].Unrevoke(ctx, "acme"); err != nil {
			t.Fatal(err)
		}
		for _, e := range es { // every replica, so that the next round's refusals are new
			until(round, e, false, "the lifting made on C")
		}
	}
	sort.Slice(delays, func(i, j int) bool { return delays[i] < delays[j] })
	t.Logf("revoke on A → refused on B and C: p50 %v, max %v", delays[len(delays)/2], delays[len(delays)-1])
}

func itoa(n int64) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			return string(b[i:])
		}
	}
}

// A name pinned by replica A cannot resolve to another address on B
// within the pin window: B refuses it as DNS rebinding and never dials the
// second answer.
func TestFleetPinsStopRebinding(t *testing.T) {
	t.Parallel()
	// The same port on a second loopback address: what the second answer
	// would reach.
	first := okServer(t)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(first.URL, "http://"))
	var hits3 atomic.Int64
	ln, err := net.Listen("tcp", "127.0.0.3:"+port)
	if err != nil {
		t.Fatalf("listen on 127.0.0.3:%s: %v", port, err)
	}
	second := &httptest.Server{Listener: ln, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits3.Add(1) })}}
	second.Start()
	t.Cleanup(second.Close)
	// DNS that answers differently on the two replicas, as a rebinding
	// server answers differently over time.
	es := replicas(t, 2, func(i int, c *engine.Config) {
		addr := "127.0.0.1"
		if i == 1 {
			addr = "127.0.0.3"
		}
		c.Egress.Resolve = map[string][]string{"rebind.test": {addr}}
	})
	p := airlock.Principal{Tenant: "acme"}
	url := "http://rebind.test:" + port + "/"
	if _, err := es[0].HTTP(testCtx(t), p, airlock.HTTPRequest{URL: url}); err != nil {
		t.Fatalf("replica A: %v", err)
	}
	_, err = es[1].HTTP(testCtx(t), p, airlock.HTTPRequest{URL: url})
	if airlock.ReasonOf(err) != "dns_rebinding" {
		t.Fatalf("replica B: %v, want dns_rebinding", err)
	}
	if n := hits3.Load(); n != 0 {
		t.Fatalf("the second answer was dialled %d times", n)
	}
}

// With Redis gone, replicas refuse (unavailable) rather than serve with
// stale revocations or no rate limit, and /readyz says why.
func TestFleetRedisDownFailsClosed(t *testing.T) {
	t.Parallel()
	srv := fleettest.Start(t)
	e := newEngine(t, engine.Config{State: engine.StateConfig{RedisURL: srv.URL(0)}, DefaultTenant: "acme",
		Tenants: map[string]engine.TenantConfig{"acme": {Profile: "posix", Exceptions: []string{"127.0.0.1"}, Rate: 100, Burst: 100}}})
	site := okServer(t)
	p := airlock.Principal{Tenant: "acme"}
	ctx := testCtx(t)
	if _, err := e.HTTP(ctx, p, airlock.HTTPRequest{URL: site.URL}); err != nil {
		t.Fatal(err)
	}
	if err := e.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	_, err := e.HTTP(ctx, p, airlock.HTTPRequest{URL: site.URL})
	if airlock.CodeOf(err) != airlock.CodeUnavailable {
		t.Fatalf("Redis down: %v, want unavailable", err)
	}
	time.Sleep(engine.DefaultFleetMaxStale + 300*time.Millisecond)
	_, _, err = e.Sign(ctx, p, "none", nil)
	if airlock.CodeOf(err) != airlock.CodeUnavailable || airlock.ReasonOf(err) != "revocations_stale" {
		t.Fatalf("stale revocations: %v", err)
	}
	if err := e.Ready(ctx); airlock.CodeOf(err) != airlock.CodeUnavailable {
		t.Fatalf("Ready with Redis down: %v", err)
	}
}

// state.fallback_local: with Redis gone, a replica goes on with limits of
// its own and its last revocation set, and audits that it does.
func TestFleetFallbackLocal(t *testing.T) {
	t.Parallel()
	srv := fleettest.Start(t)
	e := newEngine(t, engine.Config{State: engine.StateConfig{RedisURL: srv.URL(0), FallbackLocal: true}, DefaultTenant: "acme",
		Tenants: map[string]engine.TenantConfig{"acme": {Profile: "posix", Exceptions: []string{"127.0.0.1"}, Rate: 0.001, Burst: 2}}})
	site := okServer(t)
	p := airlock.Principal{Tenant: "acme"}
	ctx := testCtx(t)
	if _, err := e.HTTP(ctx, p, airlock.HTTPRequest{URL: site.URL}); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	time.Sleep(engine.DefaultFleetMaxStale + 300*time.Millisecond)
	// The local limiter has its own, fresh bucket of 2.
	var ok, limited int
	for range 4 {
		_, err := e.HTTP(ctx, p, airlock.HTTPRequest{URL: site.URL})
		switch airlock.CodeOf(err) {
		case "":
			ok++
		case airlock.CodeRateLimited:
			limited++
		default:
			t.Fatalf("with fallback: %v", err)
		}
	}
	if ok != 2 || limited != 2 {
		t.Fatalf("local fallback: %d allowed, %d limited", ok, limited)
	}
	if err := e.FlushAudit(ctx); err != nil {
		t.Fatal(err)
	}
	recs, err := e.AuditQuery(ctx, airlock.AuditQuery{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var fallback bool
	for _, r := range recs {
		if r.Broker == "fleet" && r.Reason == "redis_fallback" {
			fallback = true
		}
	}
	if !fallback {
		t.Fatalf("no redis_fallback audit record in %+v", recs)
	}
}

// The audit trail is the fleet's: a decision made on one replica is in
// the audit query, the stats and the deny ring of every other.
func TestFleetAuditTrail(t *testing.T) {
	t.Parallel()
	es := replicas(t, 3, nil)
	p := airlock.Principal{Tenant: "acme", Instance: "agent-7"}
	ctx := testCtx(t)
	_, err := es[0].HTTP(ctx, p, airlock.HTTPRequest{URL: "http://169.254.169.254/latest/meta-data/"})
	if airlock.CodeOf(err) != airlock.CodeDenied {
		t.Fatalf("metadata: %v", err)
	}
	id := airlock.Public(err, "").DecisionID
	if err := es[0].FlushAudit(ctx); err != nil {
		t.Fatal(err)
	}
	for i, e := range es[1:] {
		deadline := time.Now().Add(10 * time.Second)
		for {
			recs, err := e.AuditQuery(ctx, airlock.AuditQuery{Principal: "acme/agent-7", Limit: 10})
			if err != nil {
				t.Fatal(err)
			}
			if len(recs) == 1 && recs[0].ID == id && recs[0].Outcome == "deny" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("replica %d: audit query %+v, want decision %s", i+1, recs, id)
			}
			time.Sleep(20 * time.Millisecond)
		}
		if ring := e.RecentDenials("acme/agent-7", 1); len(ring) != 1 || ring[0].ID != id {
			t.Errorf("replica %d: deny ring %+v", i+1, ring)
		}
		stats, err := e.AuditStats(ctx, time.Now().Add(-time.Hour), "acme")
		if err != nil || len(stats) == 0 {
			t.Errorf("replica %d: stats %+v %v", i+1, stats, err)
		}
	}
}

// The Redis metrics are exported with the engine's.
func TestFleetMetrics(t *testing.T) {
	t.Parallel()
	es := replicas(t, 1, nil)
	srv := okServer(t)
	if _, err := es[0].HTTP(testCtx(t), airlock.Principal{Tenant: "acme"}, airlock.HTTPRequest{URL: srv.URL}); err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	es[0].Metrics().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.String()
	if !strings.Contains(body, "airlock_redis_command_duration_seconds_count") {
		t.Fatalf("no Redis latency metric in\n%.2000s", body)
	}
}

// A browser session lives on the replica that runs its Chromium; another
// replica refuses its calls naming the owner.
func TestFleetBrowserSessionOwner(t *testing.T) {
	t.Parallel()
	es := replicas(t, 2, func(i int, c *engine.Config) {
		c.State.Replica = []string{"replica-a", "replica-b"}[i]
	})
	p := airlock.Principal{Tenant: "acme"}
	ctx := testCtx(t)
	info, err := es[0].BrowserOpen(ctx, p, engine.BrowserOpenRequest{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = es[1].BrowserDo(ctx, p, info.ID, engine.BrowserOp{Kind: "get_state"})
	if airlock.CodeOf(err) != airlock.CodeUnavailable || airlock.ReasonOf(err) != "session_elsewhere" || !strings.Contains(err.Error(), "replica-a") {
		t.Fatalf("on the other replica: %v", err)
	}
	if err := es[0].BrowserClose(ctx, p, info.ID, false); err != nil {
		t.Fatal(err)
	}
	_, err = es[1].BrowserDo(ctx, p, info.ID, engine.BrowserOp{Kind: "get_state"})
	if airlock.ReasonOf(err) != "no_session" {
		t.Fatalf("after close: %v", err)
	}
}

// A crawl job started on one replica is visible, with its pages and its
// event stream, from every other.
func TestFleetCrawlJobVisible(t *testing.T) {
	t.Parallel()
	es := replicas(t, 2, nil)
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte(`<title>page</title><a href="/a">a</a><a href="/b">b</a><a href="/c">c</a>`))
	}))
	t.Cleanup(site.Close)
	p := airlock.Principal{Tenant: "acme"}
	ctx := testCtx(t)
	job, err := es[0].StartCrawlJob(ctx, p, airlock.CrawlRequest{Seed: site.URL + "/", MaxPages: 4, Depth: 1})
	if err != nil {
		t.Fatal(err)
	}
	events, err := es[1].WatchCrawlJob(ctx, p, job.ID, 0)
	if err != nil {
		t.Fatalf("watch on the other replica: %v", err)
	}
	pages := 0
	var end *airlock.CrawlJob
	for ev := range events {
		switch ev.Kind {
		case airlock.JobEventPage:
			pages++
		case airlock.JobEventEnd:
			end = ev.Job
		}
	}
	if end == nil || end.State != airlock.JobDone || pages != 4 {
		t.Fatalf("on the other replica: %d pages, end %+v", pages, end)
	}
	got, err := es[1].CrawlJob(ctx, p, job.ID)
	if err != nil || got.State != airlock.JobDone {
		t.Fatalf("CrawlJob on the other replica: %+v %v", got, err)
	}
	list, err := es[1].CrawlJobs(ctx, p, 10)
	if err != nil || len(list) != 1 {
		t.Fatalf("CrawlJobs on the other replica: %+v %v", list, err)
	}
	jp, err := es[1].CrawlJobPages(ctx, p, job.ID, 0, 10)
	if err != nil || len(jp) != 4 {
		t.Fatalf("pages on the other replica: %d %v", len(jp), err)
	}
}
