package api

import (
	"strings"
	"testing"

	"github.com/airlockhq/airlock"
)

// TestErrorHint: an API error body carries the hint the CLI prints for the
// same refusal, and none where the CLI has none.
func TestErrorHint(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	r := f.do("POST", "/api/http", acmeToken, airlock.HTTPRequest{URL: "http://[::1]:1/"})
	e := wantError(t, r, 403, airlock.CodeDenied, "loopback")
	if !strings.Contains(e.Hint, "--except") || e.Hint != airlock.HintOf(airlock.Errorf(airlock.CodeDenied, "loopback", "x")) {
		t.Errorf("loopback hint = %q (%s)", e.Hint, r.body)
	}
	// The network profile has no parallel capability.
	r = f.do("POST", "/api/browse", otherToken, map[string]any{"verb": "fetch", "urls": []string{f.site.URL + "/a", f.site.URL + "/b"}})
	e = wantError(t, r, 403, airlock.CodeDenied, "capability")
	if !strings.Contains(e.Hint, "profile") {
		t.Errorf("capability hint = %q (%s)", e.Hint, r.body)
	}
	r = f.do("POST", "/api/browse", acmeToken, map[string]any{"verb": "fetch"})
	e = wantError(t, r, 400, airlock.CodeInvalid, "")
	if e.Hint != "" || strings.Contains(string(r.body), `"hint"`) {
		t.Errorf("an error without a hint has one: %s", r.body)
	}
}

// TestFetchTimeoutOption: a fetch's timeout option is held to
// limits.fetch_timeout, as the CLI's --timeout is.
func TestFetchTimeoutOption(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	r := f.do("POST", "/api/browse", acmeToken, map[string]any{"verb": "fetch", "url": f.site.URL + "/a", "options": map[string]any{"timeout": "1h"}})
	e := wantError(t, r, 400, airlock.CodeInvalid, airlock.ReasonLimit)
	if !strings.Contains(e.Message, "fetch_timeout") {
		t.Errorf("timeout above the ceiling: %s", r.body)
	}
	r = f.do("POST", "/api/browse", acmeToken, map[string]any{"verb": "fetch", "url": f.site.URL + "/a", "options": map[string]any{"timeout": "30s"}})
	if r.StatusCode != 200 {
		t.Errorf("timeout 30s: %s", r)
	}
}
