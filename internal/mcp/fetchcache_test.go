package mcp

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/engine"
)

// bigSite serves one large page and counts the fetches of it.
func bigSite(t *testing.T, hits *atomic.Int64) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/big" {
			http.NotFound(w, r)
			return
		}
		hits.Add(1)
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, `<html lang="en"><head><title>Big page</title></head><body><article><h1>Big</h1>`)
		for i := range 300 {
			fmt.Fprintf(w, "<p>Paragraph %d. %s</p>\n", i, longText)
		}
		fmt.Fprint(w, `</article></body></html>`)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestWebFetchPagesFromCache reads a large page in parts: one upstream
// fetch for all of them, each part still a fetch decision in the audit
// log; another principal, or raw, does not share the entry; and a policy
// that now refuses the URL refuses the cached page too.
func TestWebFetchPagesFromCache(t *testing.T) {
	t.Parallel()
	var hits atomic.Int64
	srv := bigSite(t, &hits)
	cfg := loopback
	cfg.Tenants = map[string]engine.TenantConfig{
		airlock.LocalTenant: {Profile: "posix"},
		"other":             {Profile: "posix"},
	}
	en := newEngine(t, cfg)
	local := connectAs(t, en, airlock.Principal{Tenant: airlock.LocalTenant})

	parts := 0
	for start := 0; ; parts++ {
		res := call(t, local, ToolFetch, map[string]any{"url": srv.URL + "/big", "start_index": start})
		out := mustOK(t, res)
		if parts > 0 && res.Meta["cache"] != "hit" {
			t.Errorf("part %d: meta %v, want cache hit", parts, res.Meta)
		}
		m := truncatedRE.FindStringSubmatch(out)
		if m == nil {
			break
		}
		fmt.Sscan(m[2], &start)
	}
	parts++
	if parts < 5 {
		t.Fatalf("%d parts: the page is too short for this test", parts)
	}
	if n := hits.Load(); n != 1 {
		t.Errorf("%d parts cost %d upstream fetches, want 1", parts, n)
	}
	ctx := testCtx(t)
	if err := en.FlushAudit(ctx); err != nil {
		t.Fatal(err)
	}
	recs, err := en.AuditQuery(ctx, airlock.AuditQuery{Principal: airlock.LocalTenant, Broker: "fetch", Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != parts {
		t.Errorf("%d fetch decisions audited for %d parts", len(recs), parts)
	}

	// Another principal: its own fetch. Another instance of the tenant too.
	mustOK(t, call(t, connectAs(t, en, airlock.Principal{Tenant: "other"}), ToolFetch, map[string]any{"url": srv.URL + "/big", "start_index": 5000}))
	if n := hits.Load(); n != 2 {
		t.Errorf("tenant other: %d upstream fetches, want 2", n)
	}
	mustOK(t, call(t, connectAs(t, en, airlock.Principal{Tenant: airlock.LocalTenant, Instance: "b"}), ToolFetch, map[string]any{"url": srv.URL + "/big"}))
	if n := hits.Load(); n != 3 {
		t.Errorf("instance local/b: %d upstream fetches, want 3", n)
	}
	// Raw is another entry: the body as it came.
	out := mustOK(t, call(t, local, ToolFetch, map[string]any{"url": srv.URL + "/big", "raw": true, "max_length": 200}))
	if !strings.HasPrefix(out, "URL: "+srv.URL+"/big\nContent-Type: text/html; charset=utf-8\nContent: characters 0 to 200 of ") ||
		!strings.Contains(out, "\n\n<html lang=\"en\"><head><title>Big page</title>") {
		t.Errorf("raw:\n%s", out)
	}
	if n := hits.Load(); n != 4 {
		t.Errorf("raw: %d upstream fetches, want 4", n)
	}
}

// TestWebFetchCacheBehindTheGate: the cache sits after the gate, so a
// principal revoked since it fetched a page gets no part of it from the
// cache.
func TestWebFetchCacheBehindTheGate(t *testing.T) {
	t.Parallel()
	var hits atomic.Int64
	srv := bigSite(t, &hits)
	en := newEngine(t, loopback)
	cs := inMemory(t, en)
	mustOK(t, call(t, cs, ToolFetch, map[string]any{"url": srv.URL + "/big"}))
	if err := en.Revoke(testCtx(t), airlock.LocalTenant, "test"); err != nil {
		t.Fatal(err)
	}
	res := call(t, cs, ToolFetch, map[string]any{"url": srv.URL + "/big", "start_index": 5000})
	if !res.IsError || !strings.HasPrefix(text(res), "revoked") {
		t.Errorf("after revocation: %v %s", res.IsError, text(res))
	}
	if n := hits.Load(); n != 1 {
		t.Errorf("%d upstream fetches, want 1", n)
	}
}
