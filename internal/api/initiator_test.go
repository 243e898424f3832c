package api

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/engine"
)

// TestBrowseInitiator: a fetch through the API is the model's unless it
// says otherwise, so it honours robots.txt; a tenant claims person only
// when its configuration lists it, and then robots.txt does not apply.
func TestBrowseInitiator(t *testing.T) {
	t.Parallel()
	var robots, pages atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			robots.Add(1)
			fmt.Fprint(w, "User-agent: *\nDisallow: /private\n")
			return
		}
		pages.Add(1)
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, "<html><head><title>Private</title></head><body><main><p>Words a person asked to read, enough of them for the extractor.</p></main></body></html>")
	}))
	defer srv.Close()
	fetch := func(opts map[string]any) map[string]any {
		body := map[string]any{"verb": "fetch", "url": srv.URL + "/private"}
		if opts != nil {
			body["options"] = opts
		}
		return body
	}

	f := newFixture(t)
	e := wantError(t, f.do("POST", "/api/browse", acmeToken, fetch(nil)), 403, airlock.CodeDenied, "robots")
	if robots.Load() != 1 || pages.Load() != 0 {
		t.Errorf("default (model): %d robots.txt and %d page requests, want 1 and 0 (%s)", robots.Load(), pages.Load(), e.Message)
	}
	wantError(t, f.do("POST", "/api/browse", acmeToken, fetch(map[string]any{"initiator": "model"})), 403, airlock.CodeDenied, "robots")
	wantError(t, f.do("POST", "/api/browse", acmeToken, fetch(map[string]any{"initiator": "person"})), 403, airlock.CodeDenied, "initiator")
	wantError(t, f.do("POST", "/api/crawls", acmeToken, map[string]any{"seed": srv.URL + "/", "initiator": "person"}), 403, airlock.CodeDenied, "initiator")
	if pages.Load() != 0 {
		t.Errorf("a refused claim reached the site: %d page requests", pages.Load())
	}

	f = newFixture(t, func(c *engine.Config) {
		tc := c.Tenants["acme"]
		tc.Initiators = []string{airlock.InitiatorModel, airlock.InitiatorPerson}
		c.Tenants["acme"] = tc
	})
	if r := f.do("POST", "/api/browse", acmeToken, fetch(map[string]any{"initiator": "person"})); r.StatusCode != 200 || pages.Load() != 1 {
		t.Errorf("person by a tenant that lists it: %s (%d page requests)", r, pages.Load())
	}
	wantError(t, f.do("POST", "/api/browse", acmeToken, fetch(nil)), 403, airlock.CodeDenied, "robots")
}
