package engine_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/engine"
)

// A denied origin cannot be reached under another name: alias.test is a
// static answer for 127.0.0.1 (the proxy pins it), [::1] is another
// loopback address of the same machine. Each refusal, before the browser,
// in it or at the proxy, is a browser_policy_denied event and an audited
// decision, and the server sees nothing.
func TestBrowserDeniedOriginHoldsUnderAnotherName(t *testing.T) {
	t.Parallel()
	var hits atomic.Int64
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte("<title>secret</title>secret"))
	})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	v6 := false
	if ln, err := net.Listen("tcp", "[::1]:"+strconv.Itoa(port)); err == nil {
		s6 := &http.Server{Handler: h}
		go s6.Serve(ln)
		t.Cleanup(func() { s6.Close() })
		v6 = true
	}
	e, p := browserEngine(t, func(c *engine.Config) {
		c.Egress.Resolve = map[string][]string{"alias.test": {"127.0.0.1"}}
		tc := c.Tenants["local"]
		tc.Exceptions = []string{"127.0.0.1", "::1"}
		c.Tenants["local"] = tc
	})
	ctx := testCtx(t)
	info, err := e.BrowserOpen(ctx, p, engine.BrowserOpenRequest{Policy: &engine.BrowserPolicy{
		DefaultAction: "allow", DeniedOrigins: []string{srv.URL}}})
	if err != nil {
		t.Fatalf("BrowserOpen: %v", err)
	}
	events, cancel, err := e.BrowserEvents(p, info.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()

	alias := "http://alias.test:" + strconv.Itoa(port)
	urls := []string{srv.URL + "/", alias + "/"}
	if v6 {
		urls = append(urls, "http://[::1]:"+strconv.Itoa(port)+"/")
	}
	for _, u := range urls {
		_, err := e.BrowserDo(ctx, p, info.ID, engine.BrowserOp{Kind: "navigate", URL: u})
		if airlock.CodeOf(err) != airlock.CodeDenied {
			t.Errorf("navigate %s: %v, want denied", u, err)
		}
		host := strings.TrimSuffix(strings.TrimPrefix(u, "http://"), "/")
		deadline := time.After(15 * time.Second)
	wait:
		for {
			select {
			case ev := <-events:
				if ev.Type == "browser_policy_denied" && strings.Contains(ev.URL, host) {
					if ev.Reason != "denied_origin" {
						t.Errorf("%s: refusal reason %q, want denied_origin", u, ev.Reason)
					}
					break wait
				}
			case <-deadline:
				t.Errorf("navigate %s: no browser_policy_denied event", u)
				break wait
			}
		}
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the denied server got %d requests", n)
	}
	// A subresource under the other name is refused at the proxy, and
	// audited there too.
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte(`<!doctype html><title>page</title><script>fetch("` + alias + `/fetch").catch(() => {});</script>`))
	}))
	t.Cleanup(page.Close)
	if _, err := e.BrowserDo(ctx, p, info.ID, engine.BrowserOp{Kind: "navigate", URL: page.URL}); err != nil {
		t.Fatalf("navigate to the page: %v", err)
	}
	deadline := time.After(15 * time.Second)
	for got := false; !got; {
		select {
		case ev := <-events:
			got = ev.Type == "browser_policy_denied" && strings.Contains(ev.URL, "alias.test") && strings.HasSuffix(ev.URL, "/fetch")
		case <-deadline:
			t.Fatal("the fetch under another name was not reported")
		}
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the denied server got %d requests", n)
	}
	if err := e.FlushAudit(ctx); err != nil {
		t.Fatal(err)
	}
	recs, err := e.AuditQuery(ctx, airlock.AuditQuery{Principal: "local", Limit: 200})
	if err != nil {
		t.Fatal(err)
	}
	refused := map[string]bool{}
	for _, r := range recs {
		if r.Broker == "browser_request" && r.Outcome == "deny" {
			for _, u := range append(urls, alias+"/fetch") {
				if r.Target == u {
					refused[u] = true
				}
			}
		}
	}
	for _, u := range append(urls, alias+"/fetch") {
		if !refused[u] {
			t.Errorf("no audited refusal of %s; records %+v", u, recs)
		}
	}
}

// With no approver channel attached (no API serving an admin or approver
// token: airlock mcp over stdio, airlock browser run), ask is deny at
// once, and the refusal names what allows the origin.
func TestBrowserAskWithoutApproverDeniesAtOnce(t *testing.T) {
	t.Parallel()
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	t.Cleanup(srv.Close)
	e, p := browserEngine(t, func(c *engine.Config) { c.Browser.AskTimeout = 5 * time.Minute })
	ctx := testCtx(t)
	info, err := e.BrowserOpen(ctx, p, engine.BrowserOpenRequest{Policy: &engine.BrowserPolicy{DefaultAction: "ask"}})
	if err != nil {
		t.Fatalf("BrowserOpen: %v", err)
	}
	events, cancel, err := e.BrowserEvents(p, info.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	_, err = e.BrowserDo(ctx, p, info.ID, engine.BrowserOp{Kind: "navigate", URL: srv.URL + "/"})
	ae := wantCode(t, err, airlock.CodeDenied, "no_approver")
	if msg := airlock.PublicMessageOf(ae); !strings.Contains(msg, "--allow-origin") || !strings.Contains(msg, "allowed_origins") {
		t.Errorf("the refusal does not say what allows the origin: %q", msg)
	}
	for got := false; !got; {
		select {
		case ev := <-events:
			if ev.Type == "browser_approval_required" {
				t.Fatalf("an ask no one can answer was raised: %+v", ev)
			}
			got = ev.Type == "browser_policy_denied" && ev.Reason == "no_approver"
		case <-ctx.Done():
			t.Fatal("no browser_policy_denied event")
		}
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the server got %d requests", n)
	}
}

func TestBrowserApproverTokensConfig(t *testing.T) {
	hash := engine.HashToken("alk_approver")
	for _, tc := range []struct {
		name string
		cfg  engine.Config
	}{
		{"plain token", engine.Config{InMemory: true, Browser: engine.BrowserConfig{ApproverTokens: []string{"alk_approver"}}}},
		{"a tenant's token", engine.Config{InMemory: true, Browser: engine.BrowserConfig{ApproverTokens: []string{hash}},
			Tenants: map[string]engine.TenantConfig{"local": {Tokens: []string{hash}}}}},
	} {
		if _, err := engine.New(context.Background(), tc.cfg); airlock.CodeOf(err) != airlock.CodeInvalid {
			t.Errorf("%s: %v, want invalid", tc.name, err)
		}
	}
	e := newEngine(t, engine.Config{Browser: engine.BrowserConfig{ApproverTokens: []string{hash}}})
	if name, err := e.AuthenticateApprover("alk_approver"); err != nil || !strings.HasPrefix(name, "approver sha256:") {
		t.Errorf("AuthenticateApprover = %q, %v", name, err)
	}
	if _, err := e.AuthenticateApprover("alk_other"); airlock.CodeOf(err) != airlock.CodeDenied {
		t.Errorf("unknown approver token: %v", err)
	}
}

// An approver attached to the engine (the CLI's terminal prompt) or to a
// session (an MCP client's elicitation) answers asks while the navigate
// waits, each answer audited; detached, ask is no_approver again.
func TestBrowserApprovers(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte(`<title>Asked</title>`))
	}))
	t.Cleanup(srv.Close)
	e, p := browserEngine(t, func(c *engine.Config) { c.Browser.AskTimeout = time.Minute })
	ctx := testCtx(t)
	var asked atomic.Int64
	answer := func(ok bool) engine.BrowserApprover {
		return engine.BrowserApproverFunc(func(ctx context.Context, req engine.BrowserApprovalRequest) (bool, error) {
			asked.Add(1)
			if req.Tenant != p.Tenant || !strings.HasPrefix(req.Session, "bs_") || req.Origin != srv.URL {
				t.Errorf("request %+v", req)
			}
			return ok, nil
		})
	}
	remove := e.AddBrowserApprover("terminal", answer(true))
	info, err := e.BrowserOpen(ctx, p, engine.BrowserOpenRequest{Policy: &engine.BrowserPolicy{DefaultAction: "ask"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.BrowserDo(ctx, p, info.ID, engine.BrowserOp{Kind: "navigate", URL: srv.URL + "/"}); err != nil {
		t.Fatalf("navigate approved by the engine's approver: %v", err)
	}
	remove()
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	t.Cleanup(other.Close)
	_, err = e.BrowserDo(ctx, p, info.ID, engine.BrowserOp{Kind: "navigate", URL: other.URL + "/"})
	wantCode(t, err, airlock.CodeDenied, "no_approver")

	// A session's own approver, here denying.
	info2, err := e.BrowserOpen(ctx, p, engine.BrowserOpenRequest{Policy: &engine.BrowserPolicy{DefaultAction: "ask"},
		Approver: answer(false), ApproverName: "mcp elicitation"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.BrowserDo(ctx, p, info2.ID, engine.BrowserOp{Kind: "navigate", URL: srv.URL + "/"})
	if airlock.CodeOf(err) != airlock.CodeDenied {
		t.Fatalf("navigate denied by the session's approver: %v", err)
	}
	if n := asked.Load(); n != 2 {
		t.Errorf("approvers asked %d times, want 2", n)
	}
	if err := e.FlushAudit(ctx); err != nil {
		t.Fatal(err)
	}
	recs, err := e.AuditQuery(ctx, airlock.AuditQuery{Principal: "local", Limit: 200})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range recs {
		if r.Broker == "browser_approval" {
			got = append(got, r.Detail)
		}
	}
	slices.Sort(got)
	want := []string{"approved by terminal: " + srv.URL, "denied by mcp elicitation: " + srv.URL}
	if !slices.Equal(got, want) {
		t.Errorf("audited answers %q, want %q", got, want)
	}
}
