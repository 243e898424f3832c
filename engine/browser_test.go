package engine_test

import (
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/engine"
)

// browserEngine is an engine whose tenant "local" (posix) may reach
// 127.0.0.1 and nothing else on loopback.
func browserEngine(t *testing.T, tweak func(*engine.Config)) (*engine.Engine, airlock.Principal) {
	t.Helper()
	if _, err := os.Stat("/usr/lib/chromium/chromium"); err != nil {
		t.Fatalf("these tests need Debian's Chromium (apt-get install chromium): %v", err)
	}
	cfg := engine.Config{
		Tenants: map[string]engine.TenantConfig{
			"local":   {Profile: "posix", Exceptions: []string{"127.0.0.1"}},
			"compute": {Profile: "compute"},
		},
		Browser: engine.BrowserConfig{Policy: engine.BrowserPolicy{AllowedOrigins: []string{"127.0.0.1"}}},
	}
	if tweak != nil {
		tweak(&cfg)
	}
	e := newEngine(t, cfg)
	return e, airlock.Principal{Tenant: "local"}
}

// deniedServer listens on 127.0.0.2, which the floor refuses, and counts
// every request that reaches it.
func deniedServer(t *testing.T) (string, *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatalf("listen on 127.0.0.2: %v", err)
	}
	var hits atomic.Int64
	srv := &httptest.Server{Listener: ln, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Write([]byte("leaked"))
	})}}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL, &hits
}

func TestBrowserSessionNavigatesAndDeniesOffPolicyRequests(t *testing.T) {
	t.Parallel()
	e, p := browserEngine(t, nil)
	ctx := testCtx(t)
	denied, hits := deniedServer(t)
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte(`<!doctype html><title>Home</title><h1>Hello from the page</h1>
<button>Press me</button>
<img src="` + denied + `/pixel.png">
<script>fetch("` + denied + `/api").catch(() => {});</script>`))
	}))
	t.Cleanup(page.Close)

	info, err := e.BrowserOpen(ctx, p, engine.BrowserOpenRequest{})
	if err != nil {
		t.Fatalf("BrowserOpen: %v", err)
	}
	if !info.Ephemeral || !strings.HasPrefix(info.ID, "bs_") {
		t.Fatalf("info = %+v", info)
	}
	events, cancel, err := e.BrowserEvents(p, info.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()

	if _, err := e.BrowserDo(ctx, p, info.ID, engine.BrowserOp{Kind: "navigate", URL: page.URL}); err != nil {
		t.Fatalf("navigate: %v", err)
	}
	res, err := e.BrowserDo(ctx, p, info.ID, engine.BrowserOp{Kind: "snapshot"})
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	if res.Snapshot == nil || !strings.Contains(res.Snapshot.Text, "Hello from the page") {
		t.Fatalf("snapshot: %+v", res.Snapshot)
	}

	// Both requests to the denied server are refused and reported.
	seen := map[string]bool{}
	deadline := time.After(15 * time.Second)
	for !(seen["/pixel.png"] && seen["/api"]) {
		select {
		case ev := <-events:
			if ev.Type == "browser_policy_denied" && strings.HasPrefix(ev.URL, denied) {
				seen[strings.TrimPrefix(ev.URL, denied)] = true
			}
		case <-deadline:
			t.Fatalf("denial events seen: %v", seen)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the denied server got %d requests", n)
	}

	// The ops and the refused requests are in the audit trail.
	if err := e.FlushAudit(ctx); err != nil {
		t.Fatal(err)
	}
	recs, err := e.AuditQuery(ctx, airlock.AuditQuery{Principal: "local", Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var ops, refused int
	for _, r := range recs {
		switch {
		case r.Broker == "browser" && r.Outcome == "allow":
			ops++
		case r.Broker == "browser_request" && r.Outcome == "deny" && strings.HasPrefix(r.Target, denied):
			refused++
		}
	}
	if ops < 3 || refused < 2 {
		t.Fatalf("audit: %d browser calls allowed, %d refused requests; records %+v", ops, refused, recs)
	}

	if got := e.BrowserSessions(p); len(got) != 1 || got[0].ID != info.ID {
		t.Fatalf("sessions: %+v", got)
	}
	if err := e.BrowserClose(ctx, p, info.ID, false); err != nil {
		t.Fatalf("close: %v", err)
	}
	if got := e.BrowserSessions(p); len(got) != 0 {
		t.Fatalf("sessions after close: %+v", got)
	}
	_, err = e.BrowserDo(ctx, p, info.ID, engine.BrowserOp{Kind: "get_state"})
	wantCode(t, err, airlock.CodeNotFound, "no_session")
}

func TestBrowserCapabilityAndTenancy(t *testing.T) {
	t.Parallel()
	e, p := browserEngine(t, func(c *engine.Config) { c.Browser.MaxSessions = 1 })
	ctx := testCtx(t)

	_, err := e.BrowserOpen(ctx, airlock.Principal{Tenant: "compute"}, engine.BrowserOpenRequest{})
	wantCode(t, err, airlock.CodeDenied, "capability")

	_, err = e.BrowserOpen(ctx, p, engine.BrowserOpenRequest{Profile: "../etc"})
	wantCode(t, err, airlock.CodeInvalid, "bad_profile")

	info, err := e.BrowserOpen(ctx, p, engine.BrowserOpenRequest{Profile: "work"})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	_, err = e.BrowserOpen(ctx, p, engine.BrowserOpenRequest{})
	wantCode(t, err, airlock.CodeRateLimited, "browser_sessions")

	// Another tenant cannot see or use the session.
	other := airlock.Principal{Tenant: "compute"}
	_, err = e.BrowserDo(ctx, other, info.ID, engine.BrowserOp{Kind: "get_state"})
	wantCode(t, err, airlock.CodeNotFound, "no_session")
	if got := e.BrowserSessions(other); len(got) != 0 {
		t.Fatalf("other tenant sees %+v", got)
	}
	if err := e.BrowserClose(ctx, p, info.ID, true); err != nil {
		t.Fatal(err)
	}
}

func TestBrowserProfilePersistsAndWipes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e, p := browserEngine(t, func(c *engine.Config) { c.DataDir = dir })
	ctx := testCtx(t)
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		if r.URL.Path == "/set" {
			http.SetCookie(w, &http.Cookie{Name: "who", Value: "airlock", Path: "/", MaxAge: 3600})
		}
		c, _ := r.Cookie("who")
		v := "none"
		if c != nil {
			v = c.Value
		}
		w.Write([]byte(`<!doctype html><title>c</title><p>cookie=` + v + `</p><p id="ls"></p>
<script>if (location.pathname === "/set") localStorage.setItem("k", "stored");
document.getElementById("ls").textContent = "ls=" + (localStorage.getItem("k") || "none");</script>`))
	}))
	t.Cleanup(page.Close)

	run := func(path string) string {
		info, err := e.BrowserOpen(ctx, p, engine.BrowserOpenRequest{Profile: "keep"})
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		if _, err := e.BrowserDo(ctx, p, info.ID, engine.BrowserOp{Kind: "navigate", URL: page.URL + path}); err != nil {
			t.Fatalf("navigate: %v", err)
		}
		res, err := e.BrowserDo(ctx, p, info.ID, engine.BrowserOp{Kind: "snapshot"})
		if err != nil {
			t.Fatalf("snapshot: %v", err)
		}
		if err := e.BrowserClose(ctx, p, info.ID, path == "/wipe"); err != nil {
			t.Fatalf("close: %v", err)
		}
		return res.Snapshot.Text
	}
	if got := run("/set"); !strings.Contains(got, "cookie=none") || !strings.Contains(got, "ls=stored") {
		t.Fatalf("first visit: %q", got)
	}
	if got := run("/wipe"); !strings.Contains(got, "cookie=airlock") || !strings.Contains(got, "ls=stored") {
		t.Fatalf("the cookie and localStorage did not survive closing the session: %q", got)
	}
	if _, err := os.Stat(filepath.Join(dir, "browser", "profiles", "local", "keep")); !os.IsNotExist(err) {
		t.Fatalf("wipe left the profile: %v", err)
	}
	if got := run("/"); !strings.Contains(got, "cookie=none") || !strings.Contains(got, "ls=none") {
		t.Fatalf("after wipe: %q", got)
	}
}

func TestBrowserIdleSessionsAreReaped(t *testing.T) {
	t.Parallel()
	e, p := browserEngine(t, func(c *engine.Config) { c.Browser.IdleTimeout = 300 * time.Millisecond })
	ctx := testCtx(t)
	info, err := e.BrowserOpen(ctx, p, engine.BrowserOpenRequest{})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for len(e.BrowserSessions(p)) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("session %s not reaped", info.ID)
		}
		time.Sleep(50 * time.Millisecond)
	}
	_, err = e.BrowserDo(ctx, p, info.ID, engine.BrowserOp{Kind: "get_state"})
	wantCode(t, err, airlock.CodeNotFound, "no_session")
}

// jsOnlySite serves pages whose text exists only after their script runs,
// linking to each other.
func jsOnlySite(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			w.Write([]byte("User-agent: *\nAllow: /\n"))
			return
		}
		w.Header().Set("Content-Type", "text/html")
		next := map[string]string{"/": "/two", "/two": "/three", "/three": "/"}[r.URL.Path]
		w.Write([]byte(`<!doctype html><html><head><title>JS ` + r.URL.Path + `</title></head><body><div id="app"></div>
<script>
const p = document.createElement("p");
p.textContent = "Rendered by script on ` + r.URL.Path + `: " + "the quick brown fox jumps over the lazy dog. ".repeat(8);
const a = document.createElement("a"); a.href = "` + next + `"; a.textContent = "next page";
document.getElementById("app").append(p, a);
</script></body></html>`))
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestChromiumProviderRendersJavaScript(t *testing.T) {
	t.Parallel()
	e, p := browserEngine(t, nil)
	ctx := testCtx(t)
	srv := jsOnlySite(t)

	native, err := e.Fetch(ctx, p, airlock.FetchRequest{URL: srv.URL + "/"})
	if err == nil && strings.Contains(native.Text, "Rendered by script") {
		t.Fatalf("the native provider saw script output: %q", native.Text)
	}
	page, err := e.Fetch(ctx, p, airlock.FetchRequest{URL: srv.URL + "/", Provider: "chromium"})
	if err != nil {
		t.Fatalf("chromium fetch: %v", err)
	}
	if page.Provider != "chromium" || page.Title != "JS /" || !strings.Contains(page.Text, "Rendered by script on /") {
		t.Fatalf("page: provider %q title %q text %q", page.Provider, page.Title, page.Text)
	}

	var got []string
	sum, err := e.Crawl(ctx, p, airlock.CrawlRequest{Seed: srv.URL + "/", MaxPages: 10, Depth: 5, Provider: "chromium"}, func(pg *airlock.Page) error {
		if !strings.Contains(pg.Text, "Rendered by script") {
			t.Errorf("crawled page %s without its script's text: %q", pg.URL, pg.Text)
		}
		got = append(got, pg.URL)
		return nil
	}, nil)
	if err != nil {
		t.Fatalf("chromium crawl: %v", err)
	}
	if len(got) != 3 || sum.Pages != 3 {
		t.Fatalf("crawl got %v, summary %+v", got, sum)
	}

	// The pool's sessions are the engine's, not the tenant's.
	if s := e.BrowserSessions(p); len(s) != 0 {
		t.Fatalf("render sessions listed: %+v", s)
	}
	// The floor still applies: a private target is refused before rendering.
	_, err = e.Fetch(ctx, p, airlock.FetchRequest{URL: "http://10.0.0.5/", Provider: "chromium"})
	if airlock.CodeOf(err) != airlock.CodeDenied {
		t.Fatalf("private target: %v", err)
	}
}
