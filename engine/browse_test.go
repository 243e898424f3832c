package engine_test

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/engine"
)

const articleHTML = `<!doctype html><html lang="en"><head><title>A page</title>
<meta name="description" content="About things"></head><body>
<h1>Things</h1><p>%s</p><a href="/next">next</a><a href="https://other.example/">away</a></body></html>`

func siteHandler(hits *atomic.Int64, slow chan struct{}) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		switch {
		case r.URL.Path == "/robots.txt":
			http.NotFound(w, r)
		case r.URL.Path == "/missing":
			http.Error(w, "gone", http.StatusNotFound)
		case r.URL.Path == "/to-metadata":
			http.Redirect(w, r, "http://169.254.169.254/latest/", http.StatusFound)
		case strings.HasPrefix(r.URL.Path, "/slow") && slow != nil:
			select {
			case <-slow:
			case <-r.Context().Done():
			}
			fallthrough
		default:
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			body := strings.Repeat("Some words about the subject of this page. ", 20)
			n := len(r.URL.Path)
			fmt.Fprintf(w, articleHTML, body+fmt.Sprintf(`<a href="/p%d">more</a> <a href="/slow%d">slow</a>`, n, n))
		}
	})
}

func TestFetch(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(siteHandler(&hits, nil))
	defer srv.Close()
	e := newEngine(t, engine.Config{Egress: engine.EgressConfig{Exceptions: []string{"127.0.0.1"}}})
	ctx := testCtx(t)
	p := e.Principal()

	page, err := e.Fetch(ctx, p, airlock.FetchRequest{URL: srv.URL + "/a"})
	if err != nil {
		t.Fatal(err)
	}
	if page.Title != "A page" || page.Description != "About things" || page.Provider != "native" || page.Status != 200 ||
		page.RequestedURL != srv.URL+"/a" || len(page.DecisionID) != 26 || !strings.Contains(page.Text, "subject of this page") {
		t.Errorf("page = %+v", page)
	}
	if len(page.Links) == 0 || !page.Links[0].Internal {
		t.Errorf("links = %+v", page.Links)
	}
	tests := []struct {
		name, path string
		code       airlock.Code
		reason     airlock.Reason
	}{
		{"non-2xx", "/missing", airlock.CodeUpstream, "http_status"},
		{"refused redirect", "/to-metadata", airlock.CodeDenied, "metadata"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.Fetch(ctx, p, airlock.FetchRequest{URL: srv.URL + tt.path})
			if airlock.CodeOf(err) != tt.code || airlock.ReasonOf(err) != tt.reason {
				t.Errorf("Fetch(%s) = %v, want %s/%s", tt.path, err, tt.code, tt.reason)
			}
		})
	}
	if _, err := e.Fetch(ctx, p, airlock.FetchRequest{URL: "http://10.0.0.1/"}); airlock.ReasonOf(err) != "private" {
		t.Errorf("private target: %v", err)
	}
	if _, err := e.Fetch(ctx, p, airlock.FetchRequest{URL: srv.URL, Provider: "nope"}); airlock.CodeOf(err) != airlock.CodeInvalid {
		t.Errorf("unknown provider: %v", err)
	}
}

func TestBrowseCapability(t *testing.T) {
	e := newEngine(t, engine.Config{Tenants: map[string]engine.TenantConfig{"local": {Profile: "minimal"}}})
	ctx := testCtx(t)
	_, err := e.Fetch(ctx, e.Principal(), airlock.FetchRequest{URL: "https://example.com/"})
	if airlock.CodeOf(err) != airlock.CodeDenied || airlock.ReasonOf(err) != "capability" {
		t.Errorf("fetch without browse: %v", err)
	}
	e2 := newEngine(t, engine.Config{Tenants: map[string]engine.TenantConfig{"local": {Profile: "network"}}})
	_, _, err = e2.FetchMany(ctx, e2.Principal(), []string{"https://example.com/"}, airlock.FetchRequest{})
	if airlock.ReasonOf(err) != "capability" {
		t.Errorf("fetch_many without parallel: %v", err)
	}
}

func TestFetchMany(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(siteHandler(&hits, nil))
	defer srv.Close()
	e := newEngine(t, engine.Config{Egress: engine.EgressConfig{Exceptions: []string{"127.0.0.1"}}})
	ctx := testCtx(t)
	urls := []string{srv.URL + "/a", srv.URL + "/missing", "http://10.0.0.1/", srv.URL + "/b"}
	res, id, err := e.FetchMany(ctx, e.Principal(), urls, airlock.FetchRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 4 || res[0].Page == nil || res[1].Error == nil || res[1].Error.Reason != "http_status" ||
		res[2].Error == nil || res[2].Error.Reason != "private" || res[3].Page == nil || res[3].Page.DecisionID != id {
		t.Errorf("results = %+v", res)
	}
	many := make([]string, 65)
	for i := range many {
		many[i] = srv.URL + "/x"
	}
	if _, _, err := e.FetchMany(ctx, e.Principal(), many, airlock.FetchRequest{}); airlock.CodeOf(err) != airlock.CodeInvalid || airlock.ReasonOf(err) != airlock.ReasonLimit {
		t.Errorf("65 URLs: %v", err)
	}
	if err := e.FlushAudit(ctx); err != nil {
		t.Fatal(err)
	}
	// One record per batch, and one per URL the policy refused, which the
	// deny ring shows.
	recs, _ := e.AuditQuery(ctx, airlock.AuditQuery{Broker: "fetch_many"})
	var calls, refused int
	for _, r := range recs {
		switch {
		case r.Target == "http://10.0.0.1/" && r.Outcome == "deny" && r.Reason == "private":
			refused++
		case strings.HasSuffix(r.Target, " urls"):
			calls++
		}
	}
	if calls != 2 || refused != 1 || len(recs) != 3 {
		t.Errorf("fetch_many records = %+v; want one per batch and one for the refused URL", recs)
	}
	found := false
	for _, r := range e.RecentDenials("", 0) {
		found = found || r.Target == "http://10.0.0.1/" && r.Reason == "private"
	}
	if !found {
		t.Errorf("deny ring = %+v, want the refused URL", e.RecentDenials("", 0))
	}
}

func TestCrawlStreamsAndStopsOnRevoke(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(siteHandler(&hits, nil))
	defer srv.Close()
	e := newEngine(t, engine.Config{Egress: engine.EgressConfig{Exceptions: []string{"127.0.0.1"}}})
	ctx := testCtx(t)
	var pages []*airlock.Page
	sum, err := e.Crawl(ctx, e.Principal(), airlock.CrawlRequest{Seed: srv.URL + "/", MaxPages: 6, Depth: 3}, func(p *airlock.Page) error {
		pages = append(pages, p)
		return nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Pages != 6 || len(pages) != 6 || len(sum.DecisionID) != 26 {
		t.Errorf("crawl: %d pages emitted, summary %+v", len(pages), sum)
	}
	for _, s := range sum.Skipped {
		if s.Reason == "off_host" && !strings.Contains(s.URL, "other.example") {
			t.Errorf("skipped %+v", s)
		}
	}

	// A revoked principal's running crawl stops at its next fetch.
	slow := make(chan struct{})
	srv2 := httptest.NewUnstartedServer(siteHandler(&hits, slow))
	// busy counts srv2's connections with a request on its way: one the
	// crawl sent before it ended may reach the handler after.
	var connMu sync.Mutex
	conns := map[net.Conn]http.ConnState{}
	srv2.Config.ConnState = func(c net.Conn, st http.ConnState) {
		connMu.Lock()
		defer connMu.Unlock()
		if st == http.StateClosed || st == http.StateHijacked {
			delete(conns, c)
		} else {
			conns[c] = st
		}
	}
	busy := func() int {
		connMu.Lock()
		defer connMu.Unlock()
		n := 0
		for _, st := range conns {
			if st == http.StateNew || st == http.StateActive {
				n++
			}
		}
		return n
	}
	srv2.Start()
	defer srv2.Close()
	done := make(chan error, 1)
	var got atomic.Int64
	go func() {
		_, err := e.Crawl(ctx, e.Principal(), airlock.CrawlRequest{Seed: srv2.URL + "/", MaxPages: 1000, Depth: 50, Concurrency: 2},
			func(*airlock.Page) error { got.Add(1); return nil }, nil)
		done <- err
	}()
	for got.Load() == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	if err := e.Revoke(ctx, "local", "test"); err != nil {
		t.Fatal(err)
	}
	close(slow)
	select {
	case err := <-done:
		if airlock.CodeOf(err) != airlock.CodeRevoked {
			t.Errorf("revoked crawl ended with %v, want revoked", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("revoked crawl did not stop")
	}
	// Requests the crawl sent before it ended may still reach the site
	// after (a loaded machine delays their connections' accept): at most
	// its concurrency of them. A crawl still fetching sends more, from
	// a site that now answers at once, and keeps a connection busy past
	// the hang guard.
	ended := hits.Load()
	time.Sleep(300 * time.Millisecond)
	deadline := time.Now().Add(10 * time.Second)
	stillBusy := busy()
	for stillBusy > 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
		stillBusy = busy()
	}
	if late := hits.Load() - ended; late > 2 || stillBusy > 0 {
		t.Errorf("fetches continued after the crawl ended: %d requests reached the site after, %d connections busy; want at most the 2 in flight", late, stillBusy)
	}
}
