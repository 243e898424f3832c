package api

import (
	"bytes"
	"context"
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/engine"
)

// answersConfig answers internal.test with a private address and
// loop.test with a loopback one that no floor exception covers (static
// answers: a denied name is never dialled).
func answersConfig(c *engine.Config) {
	c.Egress.Resolve = map[string][]string{"internal.test": {"10.1.2.3"}, "loop.test": {"127.0.0.9"}}
}

// TestPublicErrorsHideAnswers: a name whose answer the policy refuses is
// denied internal_address on /api/http and /api/browse, and no answer (nor
// its class) is in the body; the audit record keeps them. A literal keeps
// its class.
func TestPublicErrorsHideAnswers(t *testing.T) {
	t.Parallel()
	f := newFixture(t, answersConfig)
	calls := []struct {
		name, path string
		body       any
		answer     string
	}{
		{"http private", "/api/http", map[string]any{"url": "http://internal.test/"}, "10.1.2.3"},
		{"http loopback", "/api/http", map[string]any{"url": "http://loop.test:8080/x"}, "127.0.0.9"},
		{"browse fetch private", "/api/browse", map[string]any{"verb": "fetch", "url": "http://internal.test/"}, "10.1.2.3"},
		{"browse fetch loopback", "/api/browse", map[string]any{"verb": "fetch", "url": "http://loop.test/"}, "127.0.0.9"},
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			r := f.do("POST", c.path, acmeToken, c.body)
			pub := wantError(t, r, 403, airlock.CodeDenied, "internal_address")
			for _, leak := range []string{c.answer, "private", "loopback"} {
				if bytes.Contains(r.body, []byte(leak)) {
					t.Errorf("response %s carries %q", r.body, leak)
				}
			}
			if !strings.Contains(pub.Message, "resolves to an address the policy refuses") {
				t.Errorf("message %q does not say why", pub.Message)
			}
			if err := f.en.FlushAudit(context.Background()); err != nil {
				t.Fatal(err)
			}
			recs, err := f.en.AuditQuery(context.Background(), airlock.AuditQuery{Limit: 100})
			if err != nil {
				t.Fatal(err)
			}
			var detail string
			for _, rec := range recs {
				if rec.ID == pub.DecisionID {
					detail = rec.Detail
				}
			}
			if !strings.Contains(detail, c.answer) {
				t.Errorf("audit record %s: detail %q, want the answer %s", pub.DecisionID, detail, c.answer)
			}
		})
	}
	r := f.do("POST", "/api/http", acmeToken, map[string]any{"url": "http://10.1.2.3/"})
	wantError(t, r, 403, airlock.CodeDenied, "private")
}

// TestRouteCredentialForms: a route's credential reaches no caller in any
// form: a same-origin redirect that carries it is refused as a hop, and
// echoes of it percent-encoded, JSON-escaped or without its prefix are
// redacted in the body and the headers.
func TestRouteCredentialForms(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	forms := []string{routeSecret, url.QueryEscape(routeSecret), url.PathEscape(routeSecret),
		"route%2fsecret%2bCANARY%3d%26x+y", "secret+CANARY"}
	noCredential := func(t *testing.T, b []byte) {
		t.Helper()
		for _, s := range forms {
			if bytes.Contains(b, []byte(s)) {
				t.Errorf("answer %s carries the credential as %q", b, s)
			}
		}
	}
	for _, route := range []string{"echo", "bearer"} {
		t.Run(route+" redirect", func(t *testing.T) {
			r := f.do("POST", "/api/routes/"+route, acmeToken, map[string]any{"path": "/redirect"})
			wantError(t, r, 403, airlock.CodeDenied, "route_credential_in_redirect")
			noCredential(t, r.body)
		})
		t.Run(route+" encoded echo", func(t *testing.T) {
			r := f.do("POST", "/api/routes/"+route, acmeToken, map[string]any{"path": "/encoded"})
			if r.StatusCode != 200 {
				t.Fatalf("route: %s", r)
			}
			noCredential(t, r.body)
			var got airlock.HTTPResponse
			r.decode(t, &got)
			if want := "q=[REDACTED] p=[REDACTED] lower=[REDACTED] bare=[REDACTED]"; string(got.Body) != want {
				t.Errorf("body %q, want %q", got.Body, want)
			}
			if got.Header["X-Echo-Query"][0] != "[REDACTED]" || got.Header["X-Echo-Path"][0] != "[REDACTED]" {
				t.Errorf("headers %v, want the echoes redacted", got.Header)
			}
		})
	}
	// The audit log has no credential either.
	if err := f.en.FlushAudit(context.Background()); err != nil {
		t.Fatal(err)
	}
	recs, err := f.en.AuditQuery(context.Background(), airlock.AuditQuery{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(recs)
	noCredential(t, b)
}

// TestRoutesGrant: a tenant without a routes list (or with an empty one)
// may call no route; "*" grants every route.
func TestRoutesGrant(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *engine.Config) {
		c.Tenants["other"] = engine.TenantConfig{Profile: "network", Tokens: []string{hashToken(otherToken)}, Exceptions: []string{"127.0.0.1"}, Routes: []string{}}
	})
	wantError(t, f.do("POST", "/api/routes/echo", otherToken, map[string]any{"path": "/x"}), 404, airlock.CodeNotFound, "route")
	wantError(t, f.do("POST", "/api/routes/echo", slowToken, map[string]any{"path": "/x"}), 404, airlock.CodeNotFound, "route")
	if r := f.do("POST", "/api/routes/echo", acmeToken, map[string]any{"path": "/x"}); r.StatusCode != 200 {
		t.Errorf("acme (routes [*]): %s", r)
	}
}
