package mcp

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// TestWebFetchHonoursRobots: web_fetch is model-initiated, so a page the
// site's robots.txt disallows to Airlock is refused before it is
// requested, with a message that says so, and allowed pages are fetched
// with Airlock's own User-Agent.
func TestWebFetchHonoursRobots(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	robots, agents := 0, map[string]string{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if r.URL.Path == "/robots.txt" {
			robots++
			fmt.Fprint(w, "User-agent: airlock\nDisallow: /private\n")
			return
		}
		agents[r.URL.Path] = r.Header.Get("User-Agent")
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<html><head><title>Open</title></head><body><main><p>Plenty of readable words on an open page for the extractor to keep.</p></main></body></html>")
	}))
	defer srv.Close()
	cs := inMemory(t, newEngine(t, loopback))

	res := call(t, cs, ToolFetch, map[string]any{"url": srv.URL + "/private/x"})
	out := text(res)
	if !res.IsError || !strings.HasPrefix(out, "denied (robots): ") || !strings.Contains(out, "disallowed by the site's robots.txt") ||
		!strings.Contains(out, "tell the user") {
		t.Errorf("web_fetch of a disallowed page: IsError %v\n%s", res.IsError, out)
	}
	mustOK(t, call(t, cs, ToolFetch, map[string]any{"url": srv.URL + "/open"}))
	mu.Lock()
	defer mu.Unlock()
	if _, asked := agents["/private/x"]; asked || robots != 1 {
		t.Errorf("disallowed page requested: %v; robots.txt requested %d times, want once", asked, robots)
	}
	if ua := agents["/open"]; !strings.HasPrefix(ua, "airlock/") {
		t.Errorf("web_fetch User-Agent %q, want Airlock's own", ua)
	}
}
