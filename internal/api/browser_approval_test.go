package api

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/engine"
)

const approverToken = "alk_approver-test-token"

// approvalEvents reads a session's event stream and passes on its
// browser_approval_required events.
func approvalEvents(t *testing.T, f *fixture, ctx context.Context, base string) <-chan engine.BrowserEvent {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", f.api.URL+base+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+acmeToken)
	resp, err := f.api.Client().Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("events: %v %v", err, resp)
	}
	t.Cleanup(func() { resp.Body.Close() })
	out := make(chan engine.BrowserEvent, 16)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		var event string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: ") && event == "browser_approval_required":
				var ev engine.BrowserEvent
				if json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &ev) == nil {
					out <- ev
				}
			}
		}
	}()
	return out
}

// An ask is answered while the navigate that raised it waits: the
// approval does not queue behind the session's op. Only an approver
// channel answers: the admin token or an approver token, never the
// tenant token that opened the session (the workload holds it).
func TestBrowserAskApprovedWhileNavigating(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *engine.Config) {
		c.Browser.ApproverTokens = []string{hashToken(approverToken)}
		c.Browser.AskTimeout = 40 * time.Second
	})
	const rounds = 5
	var sites []*httptest.Server
	for range rounds + 1 {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			w.Write([]byte(`<!doctype html><title>asked</title>ok`))
		}))
		t.Cleanup(s.Close)
		sites = append(sites, s)
	}
	r := f.do("POST", "/api/browser/sessions", acmeToken, map[string]any{"policy": map[string]any{"default_action": "ask"}})
	if r.StatusCode != http.StatusCreated {
		t.Fatalf("open: %s", r)
	}
	var info engine.BrowserSessionInfo
	r.decode(t, &info)
	base := "/api/browser/sessions/" + info.ID
	ctx, cancel := context.WithTimeout(t.Context(), 120*time.Second)
	defer cancel()
	asks := approvalEvents(t, f, ctx, base)

	navigate := func(url string) <-chan result {
		done := make(chan result, 1)
		go func() { done <- f.do("POST", base+"/ops", acmeToken, map[string]any{"kind": "navigate", "url": url}) }()
		return done
	}
	nextAsk := func(origin string) engine.BrowserEvent {
		t.Helper()
		select {
		case ev := <-asks:
			if want := "waiting for approval " + ev.ApprovalID + " of " + origin; ev.ApprovalID == "" || ev.Message != want {
				t.Fatalf("approval event %+v, want message %q", ev, want)
			}
			return ev
		case <-ctx.Done():
			t.Fatal("no browser_approval_required event")
		}
		return engine.BrowserEvent{}
	}

	var rtts, loads []time.Duration
	for i, site := range sites[:rounds] {
		done := navigate(site.URL + "/")
		ev := nextAsk(site.URL)
		if i == 0 {
			// The tenant's own token cannot approve its own request.
			wantError(t, f.do("POST", base+"/approvals/"+ev.ApprovalID, acmeToken, map[string]any{"approve": true}), 403, airlock.CodeDenied, "approver")
		}
		select {
		case r := <-done:
			t.Fatalf("navigate returned before the approval: %s", r)
		default:
		}
		token := adminToken
		if i%2 == 1 {
			token = approverToken
		}
		start := time.Now()
		ar := f.do("POST", base+"/approvals/"+ev.ApprovalID, token, map[string]any{"approve": true})
		rtts = append(rtts, time.Since(start))
		if ar.StatusCode != http.StatusNoContent {
			t.Fatalf("approve: %s", ar)
		}
		select {
		case r := <-done:
			loads = append(loads, time.Since(start))
			if r.StatusCode != 200 {
				t.Fatalf("approved navigate: %s", r)
			}
		case <-time.After(30 * time.Second): // a hang guard, not a measure
			t.Fatal("the approved navigate did not finish")
		}
	}
	slices.Sort(rtts)
	slices.Sort(loads)
	t.Logf("approval round trip p50 %v (approve call), %v (approve call to the navigate's reply); %d rounds", rtts[rounds/2], loads[rounds/2], rounds)

	// A denial by the admin refuses the waiting navigate.
	done := navigate(sites[rounds].URL + "/")
	ev := nextAsk(sites[rounds].URL)
	if r := f.do("POST", base+"/approvals/"+ev.ApprovalID, adminToken, map[string]any{"approve": false}); r.StatusCode != http.StatusNoContent {
		t.Fatalf("deny: %s", r)
	}
	if r := <-done; r.StatusCode != http.StatusForbidden {
		t.Fatalf("denied navigate: %s", r)
	}
	wantError(t, f.do("POST", base+"/approvals/"+ev.ApprovalID, adminToken, map[string]any{"approve": true}), 404, airlock.CodeNotFound, "approval")
	wantError(t, f.do("POST", "/api/browser/sessions/bs_nothing/approvals/ap_x", approverToken, map[string]any{"approve": true}), 404, airlock.CodeNotFound, "no_session")
	wantError(t, f.do("POST", base+"/approvals/ap_x", otherToken, map[string]any{"approve": true}), 403, airlock.CodeDenied, "approver")
	if r := f.do("POST", base+"/approvals/ap_x", "alk_nope", map[string]any{"approve": true}); r.StatusCode != http.StatusUnauthorized {
		t.Fatalf("unknown token: %s", r)
	}
}
