package api

import (
	"strings"
	"testing"

	"github.com/airlockhq/airlock"
)

// TestErrorHint: an API error body carries the hint the CLI prints for the
// same refusal, and none where the CLI has none.
func TestErrorHint(t *testing.T) {
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
