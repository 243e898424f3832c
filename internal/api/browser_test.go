package api

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/engine"
)

// TestBrowserAPI drives a session over HTTP: open with an origin policy,
// ops, an interact sequence, the event stream with a refused request, an
// unknown approval, another tenant's view, close.
func TestBrowserAPI(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte(`<!doctype html><title>API page</title><input id="q" aria-label="Query"><button>Go</button>
<img src="http://127.0.0.1:1/blocked.png">`))
	}))
	t.Cleanup(page.Close)

	r := f.do("POST", "/api/browser/sessions", acmeToken, map[string]any{"policy": map[string]any{"allowed_origins": []string{page.URL}}})
	if r.StatusCode != http.StatusCreated {
		t.Fatalf("open: %s", r)
	}
	var info engine.BrowserSessionInfo
	r.decode(t, &info)
	base := "/api/browser/sessions/" + info.ID

	// The event stream, read in the background.
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", f.api.URL+base+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+acmeToken)
	resp, err := f.api.Client().Do(req)
	if err != nil || resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("events: %v %v", err, resp)
	}
	defer resp.Body.Close()
	denied := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		var event string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: ") && event == "browser_policy_denied":
				denied <- strings.TrimPrefix(line, "data: ")
			}
		}
	}()

	r = f.do("POST", base+"/ops", acmeToken, map[string]any{"kind": "navigate", "url": page.URL + "/"})
	if r.StatusCode != 200 {
		t.Fatalf("navigate: %s", r)
	}
	r = f.do("POST", base+"/ops", acmeToken, map[string]any{"kind": "snapshot", "interactive_only": true})
	var res engine.BrowserResult
	r.decode(t, &res)
	if r.StatusCode != 200 || res.Snapshot == nil || !strings.Contains(res.Snapshot.Text, `textbox "Query"`) {
		t.Fatalf("snapshot: %s", r)
	}
	// A bad op is a 400 naming the field.
	wantError(t, f.do("POST", base+"/ops", acmeToken, map[string]any{"kind": "click", "url": "x"}), 400, airlock.CodeInvalid, "browser_op")
	wantError(t, f.do("POST", base+"/ops", acmeToken, map[string]any{"kind": "evaluate"}), 400, airlock.CodeInvalid, "browser_op")

	r = f.do("POST", base+"/interact", acmeToken, map[string]any{"actions": []map[string]any{
		{"action": "fill", "selector": "#q", "text": "airlock"},
		{"action": "extract_text", "selector": "title"},
		{"action": "click", "selector": "#missing", "timeout_ms": 300},
	}})
	var ir engine.BrowserInteractResult
	r.decode(t, &ir)
	if r.StatusCode != 200 || len(ir.Results) != 3 || !ir.Results[0].OK || ir.Results[2].OK || ir.Results[2].Error == nil || ir.Title != "API page" {
		t.Fatalf("interact: %s", r)
	}
	wantError(t, f.do("POST", base+"/interact", acmeToken, map[string]any{"actions": []map[string]any{{"action": "eval"}}}), 400, airlock.CodeInvalid, airlock.ReasonRequest)

	// Chromium's own background requests may be refused (at the proxy)
	// first: wait for the page's.
	for seen := false; !seen; {
		select {
		case d := <-denied:
			seen = strings.Contains(d, "blocked.png")
		case <-ctx.Done():
			t.Fatal("no browser_policy_denied event for the page's image on the stream")
		}
	}

	wantError(t, f.do("POST", base+"/approvals/ap_nothing", adminToken, map[string]any{"approve": true}), 404, airlock.CodeNotFound, "approval")
	wantError(t, f.do("POST", base+"/approvals/ap_nothing", acmeToken, map[string]any{"approve": true}), 403, airlock.CodeDenied, "approver")

	// Sessions are the tenant's: another tenant sees none of them.
	var list browserSessionsResponse
	f.do("GET", "/api/browser/sessions", acmeToken, nil).decode(t, &list)
	if len(list.Sessions) != 1 || list.Sessions[0].ID != info.ID {
		t.Fatalf("list: %+v", list)
	}
	f.do("GET", "/api/browser/sessions", otherToken, nil).decode(t, &list)
	if len(list.Sessions) != 0 {
		t.Fatalf("other tenant's list: %+v", list)
	}
	wantError(t, f.do("POST", base+"/ops", otherToken, map[string]any{"kind": "get_state"}), 404, airlock.CodeNotFound, "no_session")

	if r := f.do("DELETE", base+"?wipe=true", acmeToken, nil); r.StatusCode != http.StatusNoContent {
		t.Fatalf("close: %s", r)
	}
	wantError(t, f.do("POST", base+"/ops", acmeToken, map[string]any{"kind": "get_state"}), 404, airlock.CodeNotFound, "no_session")
}
