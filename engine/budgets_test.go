package engine_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/engine"
)

// connGauge counts a server's open connections and the most at once.
type connGauge struct {
	mu         sync.Mutex
	open, peak int
	total      int
}

func (g *connGauge) track(_ net.Conn, st http.ConnState) {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch st {
	case http.StateNew:
		g.open++
		g.total++
		g.peak = max(g.peak, g.open)
	case http.StateClosed, http.StateHijacked:
		g.open--
	}
}

func (g *connGauge) max() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.peak
}

// serveCounted starts a server on 127.0.0.1 whose connections g counts.
func serveCounted(t *testing.T, g *connGauge, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ConnState = g.track
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

func budgetTenants(names ...string) map[string]engine.TenantConfig {
	m := map[string]engine.TenantConfig{}
	for _, n := range names {
		m[n] = engine.TenantConfig{Profile: "posix", Exceptions: []string{"127.0.0.1"}, AllowIgnoreRobots: true}
	}
	return m
}

// TestBudgetsTenantIsolation: tenant a's hostile load (many calls to
// servers that hang) never holds more than a's connection share, its calls
// past the share are refused rate_limited (reason budget, with a
// Retry-After) after the bounded wait, and tenant b's calls all succeed
// meanwhile, although the process total is only twice a tenant's share.
func TestBudgetsTenantIsolation(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	e := newEngine(t, engine.Config{DefaultTenant: "a", Tenants: budgetTenants("a", "b"),
		Budgets: engine.BudgetsConfig{Connections: 8, Wait: time.Second, Tenant: engine.TenantBudgets{Connections: 4}}})

	hang := make(chan struct{})
	var hostile connGauge
	var hanging atomic.Int64
	var servers []*httptest.Server
	for range 6 {
		servers = append(servers, serveCounted(t, &hostile, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			hanging.Add(1)
			select {
			case <-hang:
			case <-r.Context().Done():
			}
		})))
	}
	var fast connGauge
	ok := serveCounted(t, &fast, okHandler("fine"))

	const hostileCalls = 24
	var wg sync.WaitGroup
	var refused, otherErr atomic.Int64
	var firstOther atomic.Value
	for i := range hostileCalls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := e.HTTP(ctx, airlock.Principal{Tenant: "a"}, airlock.HTTPRequest{URL: servers[i%len(servers)].URL + "/hang"})
			switch {
			case err == nil:
			case airlock.CodeOf(err) == airlock.CodeRateLimited && airlock.ReasonOf(err) == "budget":
				if airlock.RetryAfter(err) <= 0 {
					t.Errorf("a budget refusal without a retry-after: %v", err)
				}
				refused.Add(1)
			default:
				otherErr.Add(1)
				firstOther.CompareAndSwap(nil, err.Error())
			}
		}()
	}
	// Wait until a holds what it can, and its other calls have been
	// refused.
	deadline := time.Now().Add(testTimeout)
	for (hanging.Load() < 4 || refused.Load() < hostileCalls-4) && time.Now().Before(deadline) && otherErr.Load() == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	if got := refused.Load(); got != hostileCalls-4 {
		t.Errorf("a's calls refused for want of budget: got %d, want %d (other errors: %d, %v)", got, hostileCalls-4, otherErr.Load(), firstOther.Load())
	}

	// b, meanwhile: every call succeeds.
	var bwg sync.WaitGroup
	var bFailed atomic.Int64
	for range 4 {
		bwg.Add(1)
		go func() {
			defer bwg.Done()
			for range 5 {
				resp, err := e.HTTP(ctx, airlock.Principal{Tenant: "b"}, airlock.HTTPRequest{URL: ok.URL + "/"})
				if err != nil || string(resp.Body) != "fine" {
					bFailed.Add(1)
					t.Errorf("tenant b while a is saturated: %v", err)
				}
			}
		}()
	}
	bwg.Wait()
	if bFailed.Load() != 0 {
		t.Errorf("tenant b calls failed: %d of 20", bFailed.Load())
	}

	mfs, _ := scrape(t, e)
	if v, _ := metricValue(mfs, "airlock_budget_in_use", map[string]string{"budget": "connections", "scope": "tenant a"}); v != 4 {
		t.Errorf("airlock_budget_in_use for tenant a's connections: got %v, want 4", v)
	}
	if v, _ := metricValue(mfs, "airlock_budget_limit", map[string]string{"budget": "connections", "scope": "process"}); v != 8 {
		t.Errorf("airlock_budget_limit of the process's connections: got %v, want 8", v)
	}
	close(hang)
	wg.Wait()
	if got := hostile.max(); got > 4 {
		t.Errorf("connections tenant a held at once at the hostile servers: got %d, want at most 4", got)
	}
	if got := fast.max(); got > 4 {
		t.Errorf("connections tenant b held at once: got %d, want at most 4", got)
	}
}

// treeHandler serves pages /p0../p{n-1}, page i linking to 2i+1 and 2i+2,
// each after delay.
func treeHandler(n int, delay time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/p"))
		if err != nil || i < 0 || i >= n {
			http.NotFound(w, r)
			return
		}
		time.Sleep(delay)
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, "<html><head><title>Page %d</title></head><body><main><h1>Page %d</h1><p>Page %d of the tree.</p>", i, i, i)
		for _, c := range []int{2*i + 1, 2*i + 2} {
			if c < n {
				fmt.Fprintf(w, `<a href="/p%d">page %d</a> `, c, c)
			}
		}
		fmt.Fprint(w, "</main></body></html>")
	})
}

// TestBudgetsCrawlConnections: a crawl asking for a large concurrency
// never holds more connections at the site than the tenant's connection
// budget, and still completes (its fetches wait for a slot).
func TestBudgetsCrawlConnections(t *testing.T) {
	ctx := testCtx(t)
	e := newEngine(t, engine.Config{DefaultTenant: "a", Tenants: budgetTenants("a"),
		Budgets: engine.BudgetsConfig{Tenant: engine.TenantBudgets{Connections: 3}}})
	var g connGauge
	const pages = 60
	site := serveCounted(t, &g, treeHandler(pages, 10*time.Millisecond))
	sum, err := e.Crawl(ctx, airlock.Principal{Tenant: "a"}, airlock.CrawlRequest{Seed: site.URL + "/p0", MaxPages: pages, Depth: 10,
		Concurrency: 64, PerHostConcurrency: 8}, nil, nil)
	if err != nil {
		t.Fatalf("crawl: %v", err)
	}
	if sum.Pages != pages {
		t.Errorf("pages crawled: got %d, want %d (%+v)", sum.Pages, pages, sum)
	}
	if got := g.max(); got > 3 {
		t.Errorf("connections the crawl held at once: got %d, want at most 3", got)
	}
	t.Logf("connections opened in all: %d", g.total)
	if got := g.max(); got < 2 {
		t.Logf("the crawl never used more than %d connection at once", got)
	}
}

// TestBudgetsCrawls: crawls, crawl jobs and fetch batches take a slot of
// the crawls budget; one that finds none in time is refused rate_limited.
func TestBudgetsCrawls(t *testing.T) {
	ctx := testCtx(t)
	e := newEngine(t, engine.Config{DefaultTenant: "a", Tenants: budgetTenants("a", "b"),
		Budgets: engine.BudgetsConfig{Wait: 100 * time.Millisecond, Tenant: engine.TenantBudgets{Crawls: 1}}})
	slow := newSlowServer(t)
	crawlCtx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	go func() {
		_, err := e.Crawl(crawlCtx, airlock.Principal{Tenant: "a"}, airlock.CrawlRequest{URLs: []string{slow.URL + "/slow"}, IgnoreRobots: true}, nil, nil)
		done <- err
	}()
	<-slow.started // a's one crawl slot is held
	_, _, err := e.FetchMany(ctx, airlock.Principal{Tenant: "a"}, []string{slow.URL + "/fast"}, airlock.FetchRequest{})
	wantErr(t, err, airlock.CodeRateLimited, "budget")
	_, err = e.Crawl(ctx, airlock.Principal{Tenant: "a"}, airlock.CrawlRequest{URLs: []string{slow.URL + "/fast"}, IgnoreRobots: true}, nil, nil)
	wantErr(t, err, airlock.CodeRateLimited, "budget")
	// Another tenant's batch is not affected.
	res, _, err := e.FetchMany(ctx, airlock.Principal{Tenant: "b"}, []string{slow.URL + "/fast"}, airlock.FetchRequest{})
	if err != nil || len(res) != 1 || res[0].Error != nil {
		t.Errorf("tenant b's batch: %+v, %v", res, err)
	}
	// A crawl job waits in the same line: with no slot in time, it fails
	// rate_limited.
	job, err := e.StartCrawlJob(ctx, airlock.Principal{Tenant: "a"}, airlock.CrawlRequest{URLs: []string{slow.URL + "/fast"}, IgnoreRobots: true})
	if err != nil {
		t.Fatal(err)
	}
	got := waitJob(t, e, airlock.Principal{Tenant: "a"}, job.ID, "finished", finished)
	if got.State != airlock.JobFailed || got.Error == nil || got.Error.Code != airlock.CodeRateLimited || got.Error.Reason != "budget" {
		t.Errorf("a crawl job with no slot: state %s, error %+v; want failed rate_limited budget", got.State, got.Error)
	}
	stop()
	<-done
	// The slot is given back when the crawl ends.
	if _, _, err := e.FetchMany(ctx, airlock.Principal{Tenant: "a"}, []string{slow.URL + "/fast"}, airlock.FetchRequest{}); err != nil {
		t.Errorf("a's batch after its crawl ended: %v", err)
	}
}

// TestBudgetsExtraction: four concurrent pages of about 10 MB extracted
// under an extraction budget that admits one at a time: all succeed (the
// others wait in line), the budget's peak never passes it, and a page
// larger than the whole budget is refused too_large.
func TestBudgetsExtraction(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	const pageBytes = 9_750_000
	const budget = 15_000_000
	e := newEngine(t, engine.Config{DefaultTenant: "a", Tenants: budgetTenants("a"),
		Browse:  engine.BrowseConfig{BatchTimeout: testTimeout},
		Budgets: engine.BudgetsConfig{ExtractBytes: budget, ExtractFactor: 1, Wait: testTimeout}})
	body := bytes.Repeat([]byte("a budget for extraction memory\n"), pageBytes/31)
	srv := serveOn(t, "127.0.0.1", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Write(body)
	}))
	var urls []string
	for i := range 4 {
		urls = append(urls, fmt.Sprintf("%s/page%d", srv.URL, i))
	}
	res, _, err := e.FetchMany(ctx, airlock.Principal{Tenant: "a"}, urls, airlock.FetchRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Error != nil {
			t.Errorf("%s: %v", r.URL, r.Error)
		}
	}
	mfs, _ := scrape(t, e)
	peak, _ := metricValue(mfs, "airlock_budget_peak", map[string]string{"budget": "extract_bytes", "scope": "process"})
	if peak > budget || peak < float64(len(body)) {
		t.Errorf("peak extraction bytes admitted at once: got %v, want between one page (%d) and the budget (%d)", peak, len(body), budget)
	}

	small := newEngine(t, engine.Config{DefaultTenant: "a", Tenants: budgetTenants("a"),
		Budgets: engine.BudgetsConfig{ExtractBytes: 5_000_000, ExtractFactor: 1}})
	_, err = small.Fetch(ctx, airlock.Principal{Tenant: "a"}, airlock.FetchRequest{URL: urls[0]})
	wantErr(t, err, airlock.CodeTooLarge, "budget")
}

// TestBudgetsConfig: a connection budget above the descriptor limit less
// the reserve is a configuration error; so is a tenant's share above the
// process total, and a negative value.
func TestBudgetsConfig(t *testing.T) {
	base := func() engine.Config {
		return engine.Config{InMemory: true, DefaultTenant: "a", Tenants: budgetTenants("a")}
	}
	cfg := base()
	cfg.Budgets.Connections = 1 << 29
	err := engine.Validate(cfg)
	wantCode(t, err, airlock.CodeInvalid, "config")
	if !strings.Contains(err.Error(), "budgets.connections") || !strings.Contains(err.Error(), "RLIMIT_NOFILE") {
		t.Errorf("error does not name the key and the limit: %v", err)
	}
	cfg = base()
	cfg.Budgets.Connections = 10
	cfg.Tenants["a"] = engine.TenantConfig{Budgets: engine.TenantBudgets{Connections: 11}}
	wantCode(t, engine.Validate(cfg), airlock.CodeInvalid, "config")
	cfg = base()
	cfg.Budgets.Tenant.BytesInFlight = -1
	wantCode(t, engine.Validate(cfg), airlock.CodeInvalid, "config")

	eff := engine.Effective(base()).Budgets
	if eff.Connections <= 0 || eff.Connections > engine.DefaultBudgetConnections || eff.Tenant.Connections > eff.Connections/2 {
		t.Errorf("default connection budgets: %+v", eff)
	}
	if eff.ExtractFactor != engine.DefaultExtractFactor || eff.Wait != engine.DefaultBudgetWait {
		t.Errorf("defaults not filled: %+v", eff)
	}
}

// TestBudgetsBytesInFlight: a body larger than the tenant's bytes in
// flight is refused too_large with reason budget, and the tenant's bytes are all
// given back after the call.
func TestBudgetsBytesInFlight(t *testing.T) {
	ctx := testCtx(t)
	e := newEngine(t, engine.Config{DefaultTenant: "a", Tenants: budgetTenants("a"),
		Budgets: engine.BudgetsConfig{Wait: 50 * time.Millisecond, Tenant: engine.TenantBudgets{BytesInFlight: 1 << 20}}})
	big := bytes.Repeat([]byte("x"), 3<<20)
	srv := serveOn(t, "127.0.0.1", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/big" {
			w.Write(big)
			return
		}
		w.Write(big[:100<<10])
	}))
	_, err := e.HTTP(ctx, airlock.Principal{Tenant: "a"}, airlock.HTTPRequest{URL: srv.URL + "/big"})
	wantErr(t, err, airlock.CodeTooLarge, "budget")
	for range 3 {
		if _, err := e.HTTP(ctx, airlock.Principal{Tenant: "a"}, airlock.HTTPRequest{URL: srv.URL + "/small"}); err != nil {
			t.Fatalf("small body: %v", err)
		}
	}
	mfs, _ := scrape(t, e)
	if v, _ := metricValue(mfs, "airlock_budget_in_use", map[string]string{"budget": "bytes_in_flight", "scope": "tenant a"}); v != 0 {
		t.Errorf("bytes in flight after the calls: %v, want 0", v)
	}
}

// TestBudgetsBrowserSessions: browser sessions take a slot of the tenant's
// share and of the process's; a caller's session that finds none is
// refused at once, and closing a session gives its slot back.
func TestBudgetsBrowserSessions(t *testing.T) {
	t.Parallel()
	e, p := browserEngine(t, func(c *engine.Config) {
		c.Tenants["other"] = engine.TenantConfig{Profile: "posix", Exceptions: []string{"127.0.0.1"}}
		c.Budgets = engine.BudgetsConfig{BrowserSessions: 1, Tenant: engine.TenantBudgets{BrowserSessions: 1}}
	})
	ctx := testCtx(t)
	other := airlock.Principal{Tenant: "other"}
	info, err := e.BrowserOpen(ctx, p, engine.BrowserOpenRequest{})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	_, err = e.BrowserOpen(ctx, p, engine.BrowserOpenRequest{})
	if ae := wantCode(t, err, airlock.CodeRateLimited, "budget"); !strings.Contains(ae.Message, "tenant local") {
		t.Errorf("refusal does not name the tenant's share: %v", ae.Message)
	}
	_, err = e.BrowserOpen(ctx, other, engine.BrowserOpenRequest{})
	if ae := wantCode(t, err, airlock.CodeRateLimited, "budget"); !strings.Contains(ae.Message, "process") {
		t.Errorf("refusal does not name the process budget: %v", ae.Message)
	}
	if err := e.BrowserClose(ctx, p, info.ID, true); err != nil {
		t.Fatal(err)
	}
	info, err = e.BrowserOpen(ctx, other, engine.BrowserOpenRequest{})
	if err != nil {
		t.Fatalf("other's open after the first session closed: %v", err)
	}
	if err := e.BrowserClose(ctx, other, info.ID, true); err != nil {
		t.Fatal(err)
	}
	mfs, _ := scrape(t, e)
	if v, _ := metricValue(mfs, "airlock_budget_in_use", map[string]string{"budget": "browser_sessions", "scope": "process"}); v != 0 {
		t.Errorf("browser sessions in use after both closed: %v", v)
	}
}

// TestBudgetsIdleConnectionsReclaimed: pooled keep-alive connections hold
// slots, but a call to another destination that finds the share full of
// idle ones gets a slot once they are closed (after the one-second grace a
// destination in use keeps its own), instead of waiting for their idle
// timeout.
func TestBudgetsIdleConnectionsReclaimed(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	e := newEngine(t, engine.Config{DefaultTenant: "a", Tenants: budgetTenants("a"),
		Budgets: engine.BudgetsConfig{Wait: 5 * time.Second, Tenant: engine.TenantBudgets{Connections: 2}}})
	var g connGauge
	var urls []string
	for range 4 {
		urls = append(urls, serveCounted(t, &g, okHandler("fine")).URL+"/")
	}
	for i, u := range urls {
		if _, err := e.HTTP(ctx, airlock.Principal{Tenant: "a"}, airlock.HTTPRequest{URL: u}); err != nil {
			t.Fatalf("destination %d with the share full of idle connections: %v", i, err)
		}
	}
	mfs, _ := scrape(t, e)
	if v, _ := metricValue(mfs, "airlock_budget_in_use", map[string]string{"budget": "connections", "scope": "tenant a"}); v > 2 {
		t.Errorf("connections held: %v, want at most 2", v)
	}
}
