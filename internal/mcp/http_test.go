package mcp

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	sdkmcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/engine"
	"github.com/airlockhq/airlock/internal/store"
)

func slogTo(w io.Writer) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }

// bearerTransport adds a bearer token to every request of the SDK's client.
type bearerTransport struct {
	token string
	next  http.RoundTripper
}

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

func httpClient(t *testing.T, srv *httptest.Server, token string) *sdkmcp.ClientSession {
	t.Helper()
	tr := &sdkmcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp", MaxRetries: -1,
		HTTPClient: &http.Client{Transport: bearerTransport{token, srv.Client().Transport}}}
	cs, err := newClient().Connect(testCtx(t), tr, nil)
	if err != nil {
		t.Fatalf("connect with token: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func mcpServer(t *testing.T, en *engine.Engine) *httptest.Server {
	mux := http.NewServeMux()
	mux.Handle("/mcp", HTTPHandler(en, Options{Version: "test"}))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// TestHTTP runs the tools over streamable HTTP with bearer tokens of two
// tenants, and checks that each call runs as the tenant of its token.
func TestHTTP(t *testing.T) {
	t.Parallel()
	site := site(t)
	const acmeToken = "acme-static-token-for-the-test"
	cfg := loopback
	cfg.Tenants = map[string]engine.TenantConfig{
		"local": {Profile: "posix"},
		"acme":  {Profile: "network", Tokens: []string{store.HashToken(acmeToken)}, Deny: []string{"127.0.0.1:" + site.URL[strings.LastIndex(site.URL, ":")+1:]}},
	}
	en := newEngine(t, cfg)
	ctx := testCtx(t)
	localToken, err := en.CreateToken(ctx, "local", "mcp test")
	if err != nil {
		t.Fatal(err)
	}
	srv := mcpServer(t, en)

	cs := httpClient(t, srv, localToken)
	tools, err := cs.ListTools(ctx, nil)
	if err != nil || len(tools.Tools) != 26 {
		t.Fatalf("ListTools: %v %v", tools, err)
	}
	if out := mustOK(t, call(t, cs, ToolFetch, map[string]any{"url": site.URL + "/a", "max_length": 50})); !strings.Contains(out, "start_index=50 to continue>") {
		t.Errorf("web_fetch over HTTP:\n%s", out)
	}
	if out := mustOK(t, call(t, cs, ToolSearch, map[string]any{"query": "q", "limit": 2})); !strings.Contains(out, "- Result 2 for q\n  URL: https://example.com/2") {
		t.Errorf("web_search over HTTP:\n%s", out)
	}
	if out := mustOK(t, call(t, cs, ToolCrawl, map[string]any{"seed": site.URL + "/", "max_pages": 2})); !strings.HasPrefix(out, "Crawled 2 pages") {
		t.Errorf("web_crawl over HTTP:\n%.300s", out)
	}
	res := call(t, cs, ToolFetch, map[string]any{"url": "http://10.0.0.5/"})
	if !res.IsError || !strings.HasPrefix(text(res), "denied (private): ") {
		t.Errorf("denied over HTTP: %v %s", res.IsError, text(res))
	}

	// The acme tenant's deny list refuses the site, which local reaches.
	acme := httpClient(t, srv, acmeToken)
	res = call(t, acme, ToolFetch, map[string]any{"url": site.URL + "/a"})
	if !res.IsError || !strings.HasPrefix(text(res), "denied (deny_list): ") {
		t.Errorf("acme fetch of a denied site: %v %s", res.IsError, text(res))
	}
	if err := en.FlushAudit(ctx); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		tenant  string
		outcome string
		want    int
	}{{"local", "allow", 1}, {"local", "deny", 1}, {"acme", "deny", 1}, {"acme", "allow", 0}} {
		recs, err := en.AuditQuery(ctx, airlock.AuditQuery{Principal: tc.tenant, Broker: "fetch", Outcome: tc.outcome})
		if err != nil || len(recs) != tc.want {
			t.Errorf("audit %s %s fetches: %d (%v), want %d", tc.tenant, tc.outcome, len(recs), err, tc.want)
		}
	}
}

func TestHTTPAuth(t *testing.T) {
	t.Parallel()
	en := newEngine(t, loopback)
	srv := mcpServer(t, en)
	ctx := testCtx(t)
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"curl","version":"1"}}}`
	for _, tc := range []struct{ name, header, message string }{
		{"no header", "", "missing token"},
		{"unknown token", "Bearer alk_not-a-token", "unknown token"},
		{"basic auth", "Basic dXNlcjpwYXNz", "missing token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/mcp", strings.NewReader(init))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			if tc.header != "" {
				req.Header.Set("Authorization", tc.header)
			}
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var body airlock.ErrorBody
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") ||
				resp.Header.Get("Content-Type") != "application/json" ||
				body.Error.Code != airlock.CodeDenied || body.Error.Reason != "token" || body.Error.Message != tc.message {
				t.Errorf("status %d, WWW-Authenticate %q, body %+v", resp.StatusCode, resp.Header.Get("WWW-Authenticate"), body)
			}
		})
	}
	// The SDK's client with a bad token cannot connect.
	tr := &sdkmcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp", MaxRetries: -1,
		HTTPClient: &http.Client{Transport: bearerTransport{"alk_wrong", srv.Client().Transport}}}
	if cs, err := newClient().Connect(ctx, tr, nil); err == nil {
		cs.Close()
		t.Error("connected with a bad token")
	}
}

// TestHTTPSessionBelongsToItsTenant checks that a session opened with one
// tenant's token cannot be used with another's.
func TestHTTPSessionBelongsToItsTenant(t *testing.T) {
	t.Parallel()
	const tokA, tokB = "token-of-tenant-a-for-the-test", "token-of-tenant-b-for-the-test"
	cfg := loopback
	cfg.DefaultTenant = "a"
	cfg.Tenants = map[string]engine.TenantConfig{
		"a": {Profile: "network", Tokens: []string{store.HashToken(tokA)}},
		"b": {Profile: "network", Tokens: []string{store.HashToken(tokB)}},
	}
	en := newEngine(t, cfg)
	srv := mcpServer(t, en)
	ctx := testCtx(t)
	post := func(token, session, body string) *http.Response {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+token)
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
			req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	resp := post(tokA, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"curl","version":"1"}}}`)
	session := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || session == "" {
		t.Fatalf("initialize: %d, session %q", resp.StatusCode, session)
	}
	list := `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
	if resp := post(tokB, session, list); resp.StatusCode != http.StatusForbidden {
		t.Errorf("tenant b on tenant a's session: %d, want 403", resp.StatusCode)
	}
	if resp := post(tokA, session, list); resp.StatusCode != http.StatusOK {
		t.Errorf("tenant a on its session: %d", resp.StatusCode)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodDelete, srv.URL+"/mcp", nil)
	req.Header.Set("Authorization", "Bearer "+tokA)
	req.Header.Set("Mcp-Session-Id", session)
	if resp, err := srv.Client().Do(req); err == nil {
		resp.Body.Close()
	}
}

// TestToolsByCapability: over streamable HTTP each tenant is offered only
// the tools its profile can call, whatever tenant opened a session before
// it, and over stdio likewise.
func TestToolsByCapability(t *testing.T) {
	t.Parallel()
	tokens := map[string]string{"compute": "token-of-the-compute-tenant", "network": "token-of-the-network-tenant", "posix": "token-of-the-posix-tenant"}
	cfg := loopback
	cfg.DefaultTenant = "posix"
	cfg.Tenants = map[string]engine.TenantConfig{}
	for prof, tok := range tokens {
		cfg.Tenants[prof] = engine.TenantConfig{Profile: prof, Tokens: []string{store.HashToken(tok)}}
	}
	en := newEngine(t, cfg)
	srv := mcpServer(t, en)
	ctx := testCtx(t)
	names := func(cs *sdkmcp.ClientSession) (browse, browser int) {
		t.Helper()
		res, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, tool := range res.Tools {
			if strings.HasPrefix(tool.Name, "browser_") {
				browser++
			} else {
				browse++
			}
		}
		return browse, browser
	}
	want := map[string][2]int{"compute": {0, 0}, "network": {3, 0}, "posix": {3, 23}}
	// posix first, so a shared server would leak its tools to the others.
	for _, prof := range []string{"posix", "compute", "network", "posix"} {
		browse, browser := names(httpClient(t, srv, tokens[prof]))
		if w := want[prof]; browse != w[0] || browser != w[1] {
			t.Errorf("HTTP, profile %s: %d browse and %d browser tools, want %d and %d", prof, browse, browser, w[0], w[1])
		}
		// An unlisted tool is still refused by the engine, not run.
		if prof == "compute" {
			cs := httpClient(t, srv, tokens[prof])
			res, err := cs.CallTool(ctx, &sdkmcp.CallToolParams{Name: ToolFetch, Arguments: map[string]any{"url": "http://127.0.0.1:1/"}})
			if err == nil && !res.IsError {
				t.Errorf("compute tenant called web_fetch: %s", text(res))
			}
		}
	}
	for _, prof := range []string{"compute", "network", "posix"} {
		cr, sw := io.Pipe()
		sr, cw := io.Pipe()
		done := make(chan error, 1)
		go func() {
			done <- ServeStdio(ctx, en, airlock.Principal{Tenant: prof}, sr, sw, Options{})
			sw.Close()
		}()
		cs, err := newClient().Connect(ctx, &sdkmcp.IOTransport{Reader: cr, Writer: cw}, nil)
		if err != nil {
			t.Fatal(err)
		}
		browse, browser := names(cs)
		if w := want[prof]; browse != w[0] || browser != w[1] {
			t.Errorf("stdio, profile %s: %d browse and %d browser tools, want %d and %d", prof, browse, browser, w[0], w[1])
		}
		cs.Close()
		<-done
	}
}
