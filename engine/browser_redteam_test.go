package engine_test

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/engine"
)

// TestBrowserRedTeam loads a page that tries every way a page has to reach
// a denied address: subresources, an iframe, fetch, XHR, WebSocket,
// EventSource, sendBeacon, a dedicated worker, a service worker, a redirect
// chain, a meta refresh and window.open. The denied server must see
// nothing, and every attempt must be reported as a policy denial.
func TestBrowserRedTeam(t *testing.T) {
	t.Parallel()
	e, p := browserEngine(t, nil)
	ctx := testCtx(t)
	denied, hits := deniedServer(t)
	ws := "ws" + strings.TrimPrefix(denied, "http")
	mux := http.NewServeMux()
	page := httptest.NewServer(mux)
	t.Cleanup(page.Close)
	htmlOf := func(body string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			w.Write([]byte(body))
		}
	}
	js := func(body string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/javascript")
			w.Write([]byte(body))
		}
	}
	mux.HandleFunc("/{$}", htmlOf(`<!doctype html><title>Red team</title><h1>Red team</h1>
<img src="`+denied+`/img">
<iframe src="`+denied+`/iframe"></iframe>
<iframe src="/redirect/1"></iframe>
<iframe src="/meta"></iframe>
<script>
fetch("`+denied+`/fetch").catch(() => {});
const x = new XMLHttpRequest(); x.open("GET", "`+denied+`/xhr"); x.send();
try { new WebSocket("`+ws+`/ws"); } catch (e) {}
try { new EventSource("`+denied+`/es"); } catch (e) {}
navigator.sendBeacon("`+denied+`/beacon", "data");
new Worker("/worker.js");
navigator.serviceWorker.register("/sw.js").catch(() => {});
window.open("`+denied+`/popup");
</script>`))
	mux.HandleFunc("/worker.js", js(`fetch("`+denied+`/worker").catch(() => {});`))
	mux.HandleFunc("/sw.js", js(`self.addEventListener("install", e => e.waitUntil(fetch("`+denied+`/sw").catch(() => {})));`))
	mux.HandleFunc("/redirect/1", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/redirect/2", http.StatusFound)
	})
	mux.HandleFunc("/redirect/2", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, denied+"/redirect", http.StatusFound)
	})
	mux.HandleFunc("/meta", htmlOf(`<meta http-equiv="refresh" content="0;url=`+denied+`/meta">`))

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

	want := []string{"/img", "/iframe", "/fetch", "/xhr", "/ws", "/es", "/beacon", "/worker", "/sw", "/redirect", "/meta", "/popup"}
	seen := map[string]string{}
	deadline := time.After(20 * time.Second)
	for len(seen) < len(want) {
		select {
		case ev := <-events:
			if ev.Type != "browser_policy_denied" {
				continue
			}
			for _, w := range want {
				if strings.Contains(ev.URL, strings.TrimPrefix(denied, "http://")+w) {
					seen[w] = ev.ResourceType
				}
			}
			// CDP cannot pause a WebSocket handshake: the proxy (layer 2)
			// refuses its tunnel, and reports it without the path it
			// cannot see.
			if ev.ResourceType == "proxy" && strings.Contains(ev.URL, strings.TrimPrefix(denied, "http://")) {
				seen["/ws"] = ev.ResourceType
			}
		case <-deadline:
			var missing []string
			for _, w := range want {
				if _, ok := seen[w]; !ok {
					missing = append(missing, w)
				}
			}
			slices.Sort(missing)
			t.Fatalf("no denial event for %v; seen %v", missing, seen)
		}
	}
	t.Logf("denials by resource type: %v", seen)
	if n := hits.Load(); n != 0 {
		t.Fatalf("the denied server got %d requests", n)
	}
}

// TestBrowserOriginPolicyHoldsAtBothLayers: an origin the tenant's egress
// policy allows but the session's allowed_origins does not is refused for
// the page's own requests (layer 1) and for a WebSocket, which CDP cannot
// pause (layer 2, the proxy asks the session's policy too).
func TestBrowserOriginPolicyHoldsAtBothLayers(t *testing.T) {
	t.Parallel()
	e, p := browserEngine(t, nil)
	ctx := testCtx(t)
	var otherHits atomic.Int64
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		otherHits.Add(1)
	}))
	t.Cleanup(other.Close)
	ws := "ws" + strings.TrimPrefix(other.URL, "http")
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte(`<!doctype html><title>Origins</title><img src="` + other.URL + `/img">
<script>fetch("` + other.URL + `/fetch").catch(() => {}); try { new WebSocket("` + ws + `/ws"); } catch (e) {}</script>`))
	}))
	t.Cleanup(page.Close)

	info, err := e.BrowserOpen(ctx, p, engine.BrowserOpenRequest{Policy: &engine.BrowserPolicy{AllowedOrigins: []string{page.URL}}})
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
	host := strings.TrimPrefix(other.URL, "http://")
	seen := map[string]string{}
	wsURL := ""
	deadline := time.After(20 * time.Second)
	for len(seen) < 3 {
		select {
		case ev := <-events:
			if ev.Type != "browser_policy_denied" || !strings.Contains(ev.URL, host) {
				continue
			}
			switch {
			case strings.HasSuffix(ev.URL, "/img"), strings.HasSuffix(ev.URL, "/fetch"):
				seen[ev.URL[strings.LastIndex(ev.URL, "/"):]] = ev.Reason
			case ev.ResourceType == "proxy":
				seen["/ws"], wsURL = ev.Reason, ev.URL
			}
		case <-deadline:
			t.Fatalf("denials seen: %v", seen)
		}
	}
	if seen["/img"] != "default_deny" || seen["/ws"] != "default_deny" {
		t.Errorf("reasons %v, want default_deny at both layers", seen)
	}
	// The proxy sees a CONNECT tunnel; the refusal names the WebSocket's
	// own scheme, not https.
	if want := "ws://" + host; wsURL != want {
		t.Errorf("the WebSocket's refusal is labelled %q, want %q", wsURL, want)
	}
	if n := otherHits.Load(); n != 0 {
		t.Fatalf("the origin outside allowed_origins got %d requests", n)
	}
	// A navigation there is refused before the browser is asked.
	_, err = e.BrowserDo(ctx, p, info.ID, engine.BrowserOp{Kind: "navigate", URL: other.URL})
	if airlock.ReasonOf(err) != "default_deny" {
		t.Fatalf("navigate off-policy: %v", err)
	}
}
