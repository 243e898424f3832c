package engine_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/engine"
)

// TestBrowserHidesAnswers: a page's request to a name that resolves into
// the floor (127.0.0.9, no exception) is reported as an internal_address
// denial without the answer, and so is a navigation to it.
func TestBrowserHidesAnswers(t *testing.T) {
	t.Parallel()
	e, p := browserEngine(t, func(c *engine.Config) {
		c.Egress.Resolve = map[string][]string{"internal.test": {"127.0.0.9"}}
		c.Browser.Policy.AllowedOrigins = append(c.Browser.Policy.AllowedOrigins, "internal.test")
	})
	ctx := testCtx(t)
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte(`<!doctype html><title>p</title><img src="http://internal.test/img">
<script>fetch("http://internal.test/fetch").catch(() => {});</script>`))
	}))
	t.Cleanup(page.Close)
	info, err := e.BrowserOpen(ctx, p, engine.BrowserOpenRequest{})
	if err != nil {
		t.Fatalf("BrowserOpen: %v", err)
	}
	events, cancel, err := e.BrowserEvents(p, info.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	if _, err := e.BrowserDo(ctx, p, info.ID, engine.BrowserOp{Kind: "navigate", URL: page.URL}); err != nil {
		t.Fatalf("navigate: %v", err)
	}
	deadline := time.After(20 * time.Second)
	for denials := 0; denials < 2; {
		select {
		case ev := <-events:
			if ev.Type != "browser_policy_denied" || !strings.Contains(ev.URL, "internal.test") {
				continue
			}
			denials++
			b, _ := json.Marshal(ev)
			if ev.Reason != "internal_address" || strings.Contains(string(b), "127.0.0.9") || strings.Contains(string(b), "loopback") {
				t.Errorf("denial event %s: want reason internal_address and no answer", b)
			}
		case <-deadline:
			t.Fatal("no denial events for internal.test")
		}
	}
	_, err = e.BrowserDo(ctx, p, info.ID, engine.BrowserOp{Kind: "navigate", URL: "http://internal.test/"})
	if pub := airlock.Public(err, ""); pub.Reason != "internal_address" || strings.Contains(pub.Message, "127.0.0.9") {
		t.Errorf("navigate to internal.test: %+v", pub)
	}
}
