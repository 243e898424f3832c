package cli

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlockhq/airlock/engine"
)

// cliRouteToken has bytes that percent-encoding changes.
const cliRouteToken = "cli/route+TOKEN=&z"

// credentialEcho redirects /redirect to a same-origin URL that carries the
// bearer credential, and echoes it percent-encoded on /encoded.
func credentialEcho() *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cred := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		switch r.URL.Path {
		case "/redirect":
			http.Redirect(w, r, "/cb?token="+url.QueryEscape(cred), http.StatusFound)
		case "/encoded":
			w.Header().Set("X-Echo", url.PathEscape(cred))
			fmt.Fprintf(w, "q=%s bare=%s", url.QueryEscape(cred), cred)
		default:
			fmt.Fprintf(w, "at %s", r.URL)
		}
	}))
}

// TestRouteCommandCredential: `airlock route --format json` refuses a
// redirect that carries the credential, and redacts its encoded echoes.
func TestRouteCommandCredential(t *testing.T) {
	t.Setenv("CLI_ROUTE_TOKEN", cliRouteToken) // the engine reads the process environment
	srv := credentialEcho()
	defer srv.Close()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "airlock.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`egress:
  exceptions: ["127.0.0.1"]
routes:
  api:
    base_url: %s
    header: Authorization
    value_prefix: "Bearer "
    value_env: CLI_ROUTE_TOKEN
`, srv.URL)), 0o600)
	route := func(path string) result {
		var stdout, stderr lockedBuffer
		e := &env{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr}
		code := run(context.Background(), e, []string{"route", "api", "GET", path, "--format", "json", "--config", cfg, "--data-dir", filepath.Join(dir, "data"), "--include"}, commands)
		return result{code: code, stdout: stdout.String(), stderr: stderr.String()}
	}
	forms := []string{cliRouteToken, url.QueryEscape(cliRouteToken), url.PathEscape(cliRouteToken), "route+TOKEN"}
	for _, path := range []string{"/redirect", "/encoded"} {
		r := route(path)
		for _, f := range forms {
			if strings.Contains(r.stdout+r.stderr, f) {
				t.Errorf("%s: output carries the credential as %q:\n%s%s", path, f, r.stdout, r.stderr)
			}
		}
		switch path {
		case "/redirect":
			if r.code != 3 || !strings.Contains(r.stderr, `"reason":"route_credential_in_redirect"`) {
				t.Errorf("%s: exit %d, stderr %s, want 3 and route_credential_in_redirect", path, r.code, r.stderr)
			}
		case "/encoded":
			if r.code != 0 || !strings.Contains(r.stdout, "[REDACTED]") {
				t.Errorf("%s: exit %d, stdout %s stderr %s", path, r.code, r.stdout, r.stderr)
			}
		}
	}
}

// TestMCPStdioHidesAnswers: `airlock mcp` over stdio is a workload's
// surface: a name resolving into the floor is internal_address, without
// the answer.
func TestMCPStdioHidesAnswers(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "airlock.yaml")
	os.WriteFile(cfg, []byte("egress:\n  resolve:\n    internal.test: [\"10.1.2.3\"]\n    loop.test: [\"127.0.0.9\"]\n"), 0o600)
	ctx := context.Background()
	cs, stderr, wait, err := startMCP(t, ctx, nil, "--data-dir", filepath.Join(dir, "data"), "--config", cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{"http://internal.test/", "http://loop.test/"} {
		out, isErr := mcpCall(t, ctx, cs, "web_fetch", map[string]any{"url": u})
		if !isErr || !strings.HasPrefix(out, "denied (internal_address): ") {
			t.Errorf("web_fetch %s: %v %q", u, isErr, out)
		}
		for _, leak := range []string{"10.1.2.3", "127.0.0.9", "private", "loopback"} {
			if strings.Contains(out, leak) {
				t.Errorf("web_fetch %s: %q carries %q", u, out, leak)
			}
		}
	}
	if code := wait(); code != 0 {
		t.Fatalf("exit %d, stderr %q", code, stderr.String())
	}
}

// TestHintNamesTheAnswer: the operator at the terminal is told which
// address a name resolved to (a workload never is), and how to reach it.
func TestHintNamesTheAnswer(t *testing.T) {
	t.Parallel()
	r := invoke(t, context.Background(), "", []string{"fetch", "--data-dir", t.TempDir(), "--resolve", "svc.test=10.1.2.3", "http://svc.test/"})
	if r.code != 3 || !strings.Contains(r.stderr, "internal_address") || !strings.Contains(r.stderr, "hint: ") || !strings.Contains(r.stderr, "--except 10.1.2.3 ") {
		t.Errorf("fetch of a name into the floor: %d %q, want internal_address and a hint naming --except 10.1.2.3", r.code, r.stderr)
	}
}

// TestImplicitTenantRoutes: the tenant "local" that policy flags create
// when no tenant is configured is granted every route, as the engine's
// implicit tenant is; a configured tenant keeps its own list.
func TestImplicitTenantRoutes(t *testing.T) {
	var cfg engine.Config
	name, tc, err := defaultTenant(&cfg)
	if err != nil || name != "local" || len(tc.Routes) != 1 || tc.Routes[0] != engine.AllRoutes {
		t.Errorf("implicit tenant %q: routes %v (%v), want [*]", name, tc.Routes, err)
	}
	cfg = engine.Config{Tenants: map[string]engine.TenantConfig{"local": {Profile: "posix"}}}
	if _, tc, _ := defaultTenant(&cfg); tc.Routes != nil {
		t.Errorf("configured tenant: routes %v, want its own (none)", tc.Routes)
	}
}
