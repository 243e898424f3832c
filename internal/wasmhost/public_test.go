package wasmhost_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/engine"
)

// TestGuestErrorsHideAnswers: a guest's last_error for a name that
// resolves into the floor is internal_address, without the answer.
func TestGuestErrorsHideAnswers(t *testing.T) {
	t.Parallel() // builds or compiles a guest: overlaps the others
	cfg := tenants("posix")
	cfg.Egress.Resolve = map[string][]string{"internal.test": {"10.1.2.3"}, "loop.test": {"127.0.0.9"}}
	h := newHost(t, newEngine(t, cfg))
	for _, args := range [][]string{
		{"fetch", "http://internal.test/"},
		{"http", "GET", "http://loop.test/x"},
		{"tcp", "internal.test", "80", "x"},
	} {
		lines := probe(t, h, "posix", args...)
		if len(lines) != 1 || lines[0].Error == nil {
			t.Fatalf("%v: %+v", args, lines)
		}
		e := lines[0].Error
		if e.Code != airlock.CodeDenied || e.Reason != "internal_address" {
			t.Errorf("%v: last_error %+v, want denied internal_address", args, e)
		}
		for _, leak := range []string{"10.1.2.3", "127.0.0.9", "private", "loopback"} {
			if strings.Contains(e.Message, leak) {
				t.Errorf("%v: last_error message %q carries %q", args, e.Message, leak)
			}
		}
	}
}

// TestGuestRouteCredential: through the route import, a redirect that
// carries the credential is refused and its encoded echoes are redacted.
func TestGuestRouteCredential(t *testing.T) {
	t.Parallel() // builds or compiles a guest: overlaps the others
	const token = "wasm/tok+EN=&q"
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cred := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		if r.URL.Path == "/v1/redirect" {
			http.Redirect(w, r, "/v1/cb?token="+url.QueryEscape(cred), http.StatusFound)
			return
		}
		w.Write([]byte("q=" + url.QueryEscape(cred) + " p=" + url.PathEscape(cred)))
	}))
	defer api.Close()
	cfg := engine.Config{
		Tenants: map[string]engine.TenantConfig{"posix": {Profile: "posix", Exceptions: []string{"127.0.0.1"}, Routes: []string{"api"}}},
		Routes: map[string]engine.RouteConfig{"api": {BaseURL: api.URL, Header: "Authorization", ValueEnv: "API_TOKEN",
			Prefix: "Bearer ", PathPrefix: "/v1"}},
	}
	h := newHost(t, newEngine(t, cfg, engine.WithGetenv(func(k string) string {
		if k == "API_TOKEN" {
			return token
		}
		return ""
	})))
	forms := []string{token, url.QueryEscape(token), url.PathEscape(token), "tok+EN"}
	for _, path := range []string{"/v1/redirect", "/v1/encoded"} {
		lines := probe(t, h, "posix", "route", "api", "GET", path)
		if len(lines) != 1 {
			t.Fatalf("%s: %+v", path, lines)
		}
		out := string(lines[0].OK)
		if e := lines[0].Error; e != nil {
			out += e.Message
		}
		for _, f := range forms {
			if strings.Contains(out, f) {
				t.Errorf("%s: the guest got the credential as %q: %s", path, f, out)
			}
		}
		switch e := lines[0].Error; path {
		case "/v1/redirect":
			if e == nil || e.Code != airlock.CodeDenied || e.Reason != "route_credential_in_redirect" {
				t.Errorf("%s: %+v, want denied route_credential_in_redirect", path, lines[0])
			}
		default:
			if e != nil || !strings.Contains(out, `q=[REDACTED] p=[REDACTED]`) {
				t.Errorf("%s: %+v (%s)", path, lines[0], out)
			}
		}
	}
}
