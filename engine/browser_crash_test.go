package engine

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/browser"
)

// TestBrowserCrashReportedAndRestarted: a killed Chromium is reported on
// the event stream and the next op restarts it with the session's profile.
func TestBrowserCrashReportedAndRestarted(t *testing.T) {
	t.Parallel()
	e, err := New(context.Background(), Config{InMemory: true, Tenants: map[string]TenantConfig{"local": {Profile: "posix", Exceptions: []string{"127.0.0.1"}}},
		Browser: BrowserConfig{Policy: BrowserPolicy{AllowedOrigins: []string{"127.0.0.1"}}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close(t.Context()) })
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte(`<title>Alive</title>`))
	}))
	t.Cleanup(page.Close)
	ctx := t.Context()
	p := airlock.Principal{Tenant: "local"}
	info, err := e.BrowserOpen(ctx, p, BrowserOpenRequest{})
	if err != nil {
		t.Fatal(err)
	}
	events, cancel, err := e.BrowserEvents(p, info.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	bs, err := e.browser.Get(p, info.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := bs.Browser().KillForTest(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for !bs.Browser().Crashed() {
		if time.Now().After(deadline) {
			t.Fatal("the crash was never noticed")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := e.BrowserDo(ctx, p, info.ID, BrowserOp{Kind: "navigate", URL: page.URL}); err != nil {
		t.Fatalf("the op after the crash: %v", err)
	}
	res, err := e.BrowserDo(ctx, p, info.ID, BrowserOp{Kind: "get_state"})
	if err != nil || res.State.Title != "Alive" {
		t.Fatalf("state after restart: %+v %v", res.State, err)
	}
	for {
		select {
		case ev := <-events:
			if ev.Type == browser.EventCrashed {
				return
			}
		case <-time.After(5 * time.Second):
			t.Fatal("no browser_crashed event")
		}
	}
}
