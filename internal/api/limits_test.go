package api

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/engine"
)

// newConfigFixture is newFixture with the configuration changed by edit.
func newConfigFixture(t *testing.T, edit func(*engine.Config)) *fixture {
	t.Helper()
	f := &fixture{t: t, site: newSite(t), logs: &syncBuffer{}}
	cfg := testConfig(f.site.URL)
	edit(&cfg)
	f.en = newEngine(t, cfg)
	f.api = httptest.NewServer(validating(t, newServer(f.en, Options{Version: "v1.2.3-test"})))
	t.Cleanup(f.api.Close)
	return f
}

// wantAudited checks that the refusal with decision id is in the audit
// log, with its reason.
func (f *fixture) wantAudited(id, reason string) {
	f.t.Helper()
	if err := f.en.FlushAudit(f.t.Context()); err != nil {
		f.t.Fatal(err)
	}
	recs, err := f.en.AuditQuery(f.t.Context(), airlock.AuditQuery{Reason: reason, Limit: 100})
	if err != nil {
		f.t.Fatal(err)
	}
	for _, r := range recs {
		if r.ID == id {
			return
		}
	}
	f.t.Errorf("decision %s (reason %s) is not in the audit log: %+v", id, reason, recs)
}

// streamingPeer accepts TCP connections and writes n bytes to each, then
// closes it. It counts the connections it accepted.
func streamingPeer(t *testing.T, n int) (addr string, accepted *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted = new(atomic.Int64)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(10 * time.Second))
				// Read the request first and, after the reply, wait for
				// the client to close: closing with unread bytes would
				// reset the connection, and the reset would discard what
				// the client has not read yet.
				drained := make(chan struct{})
				go func() { io.Copy(io.Discard, c); close(drained) }()
				chunk := bytes.Repeat([]byte("x"), 64<<10)
				for sent := 0; sent < n; sent += len(chunk) {
					if _, err := c.Write(chunk); err != nil {
						return
					}
				}
				<-drained
			}()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	return ln.Addr().String(), accepted
}

// TestExchangeCeilings is issue 14's finding 1: a max_reply of 2 GB, or a
// timeout or idle of 1000 h, is refused (invalid, limit) before the peer
// is even dialled, and the refusal is audited.
func TestExchangeCeilings(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	addr, accepted := streamingPeer(t, 4<<20)
	tests := []struct {
		name string
		body map[string]any
		msg  string
	}{
		{"max_reply 2 GB", map[string]any{"max_reply": 2_000_000_000},
			"max_reply 2000000000 is above the ceiling 1048576 (limits.exchange_max_reply)"},
		{"timeout 1000h", map[string]any{"timeout": "1000h"},
			"timeout 1000h0m0s is above the ceiling 10s (limits.exchange_timeout)"},
		{"idle 1000h", map[string]any{"idle": "1000h"},
			"idle 1000h0m0s is above the ceiling 10s (limits.exchange_idle)"},
		{"negative max_reply", map[string]any{"max_reply": -1},
			"max_reply -1 is negative; the ceiling is 1048576 (limits.exchange_max_reply)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.body["target"], tt.body["data"] = addr, []byte("GET")
			e := wantError(t, f.do("POST", "/api/exchange/tcp", acmeToken, tt.body), 400, airlock.CodeInvalid, airlock.ReasonLimit)
			if e.Message != tt.msg {
				t.Errorf("message = %q, want %q", e.Message, tt.msg)
			}
			f.wantAudited(e.DecisionID, string(airlock.ReasonLimit))
		})
	}
	if n := accepted.Load(); n != 0 {
		t.Errorf("the peer was dialled %d times; a refused exchange must not connect", n)
	}
	// Within the ceiling the exchange runs, and the reply cap holds.
	r := f.do("POST", "/api/exchange/tcp", acmeToken, map[string]any{"target": addr, "data": []byte("GET"), "max_reply": 1 << 20, "timeout": "5s"})
	wantError(t, r, 413, airlock.CodeTooLarge, "")
	if n := accepted.Load(); n != 1 {
		t.Errorf("the peer was dialled %d times, want 1", n)
	}
}

// TestRedirectCeiling is issue 14's finding 2: with egress.max_redirects
// at 3, a request asking for 1e9 redirects is refused before any request
// is made; 3 or fewer work, and the upstream sees at most that many hops.
func TestRedirectCeiling(t *testing.T) {
	t.Parallel()
	var hits atomic.Int64
	loop := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.Redirect(w, r, "/loop", http.StatusFound)
	}))
	t.Cleanup(loop.Close)
	f := newConfigFixture(t, func(cfg *engine.Config) {
		cfg.Egress.MaxRedirects = 3
		cfg.Egress.FetchTimeout = 5 * time.Second
	})
	ask := func(n *int) result {
		return f.do("POST", "/api/http", acmeToken, airlock.HTTPRequest{URL: loop.URL + "/loop", MaxRedirects: n})
	}
	big := 1_000_000_000
	e := wantError(t, ask(&big), 400, airlock.CodeInvalid, airlock.ReasonLimit)
	if want := "max_redirects 1000000000 is above the ceiling 3 (limits.max_redirects)"; e.Message != want {
		t.Errorf("message = %q, want %q", e.Message, want)
	}
	f.wantAudited(e.DecisionID, string(airlock.ReasonLimit))
	if n := hits.Swap(0); n != 0 {
		t.Fatalf("upstream saw %d requests for a refused call", n)
	}
	for _, n := range []int{3, 2, 0} {
		r := ask(&n)
		if r.StatusCode == 400 {
			t.Fatalf("max_redirects %d refused: %s", n, r)
		}
		if got := hits.Swap(0); got != int64(n)+1 {
			t.Errorf("max_redirects %d: upstream saw %d requests, want %d", n, got, n+1)
		}
	}
	ask(nil) // the default: egress.max_redirects
	if got := hits.Swap(0); got != 4 {
		t.Errorf("default redirects: upstream saw %d requests, want 4", got)
	}
}

// TestCrawlCeilings is issue 14's finding 3 on the API: concurrency and
// per_host_concurrency of 100,000 are refused, for crawl jobs and for
// crawls through /api/browse, before any request is made.
func TestCrawlCeilings(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	before := f.site.hits.Load()
	for _, tt := range []struct {
		name, path string
		body       map[string]any
		msg        string
	}{
		{"job concurrency", "/api/crawls", map[string]any{"seed": f.site.URL + "/", "concurrency": 100000},
			"concurrency 100000 is above the ceiling 64 (limits.crawl_concurrency)"},
		{"job per host", "/api/crawls", map[string]any{"seed": f.site.URL + "/", "per_host_concurrency": 100000},
			"per_host_concurrency 100000 is above the ceiling 8 (limits.crawl_per_host_concurrency)"},
		{"browse per host", "/api/browse", map[string]any{"verb": "crawl", "seed": f.site.URL + "/", "options": map[string]any{"per_host_concurrency": 9}},
			"per_host_concurrency 9 is above the ceiling 8 (limits.crawl_per_host_concurrency)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := wantError(t, f.do("POST", tt.path, acmeToken, tt.body), 400, airlock.CodeInvalid, airlock.ReasonLimit)
			if e.Message != tt.msg {
				t.Errorf("message = %q, want %q", e.Message, tt.msg)
			}
			f.wantAudited(e.DecisionID, string(airlock.ReasonLimit))
		})
	}
	// ignore_robots needs the tenant's permission.
	e := wantError(t, f.do("POST", "/api/crawls", acmeToken, map[string]any{"seed": f.site.URL + "/", "ignore_robots": true}), 403, airlock.CodeDenied, "ignore_robots")
	f.wantAudited(e.DecisionID, "ignore_robots")
	if n := f.site.hits.Load() - before; n != 0 {
		t.Errorf("the site saw %d requests from refused crawls", n)
	}
}

// TestListLimitsRefusedNotReduced: a page size above its ceiling is
// refused (invalid, limit), where it used to be cut silently.
func TestListLimitsRefusedNotReduced(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for _, path := range []string{"/api/crawls?limit=501", "/api/audit?limit=10001"} {
		r := f.do("GET", path, acmeToken, nil)
		if r.StatusCode != 400 || !bytes.Contains(r.body, []byte(`"reason":"limit"`)) || !bytes.Contains(r.body, []byte("is above the ceiling")) {
			t.Errorf("GET %s: %s", path, r)
		}
	}
	for _, path := range []string{"/api/crawls?limit=500", "/api/audit?limit=10000", "/api/crawls", "/api/audit"} {
		if r := f.do("GET", path, acmeToken, nil); r.StatusCode != 200 {
			t.Errorf("GET %s: %s", path, r)
		}
	}
}
