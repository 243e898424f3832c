package engine

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/airlockhq/airlock"
)

func TestHTTPCacheSharedPerTenant(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		switch r.URL.Path {
		case "/fresh":
			w.Header().Set("Cache-Control", "public, max-age=60")
		case "/nostore":
			w.Header().Set("Cache-Control", "no-store")
		}
		fmt.Fprintf(w, "body of %s", r.URL.Path)
	}))
	defer srv.Close()
	e, err := New(context.Background(), Config{InMemory: true,
		Tenants: map[string]TenantConfig{"a": {Profile: "network"}, "b": {Profile: "network"}},
		Egress:  EgressConfig{Exceptions: []string{"127.0.0.1"}}, DefaultTenant: "a"})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close(context.Background())
	ctx := context.Background()
	get := func(tenant, path string, hdr map[string][]string) *airlock.HTTPResponse {
		t.Helper()
		resp, err := e.HTTP(ctx, airlock.Principal{Tenant: tenant}, airlock.HTTPRequest{URL: srv.URL + path, Cache: true, Header: hdr})
		if err != nil {
			t.Fatalf("%s %s: %v", tenant, path, err)
		}
		return resp
	}
	steps := []struct {
		tenant, path string
		hdr          map[string][]string
		wantCache    string
		wantHits     int64
	}{
		{"a", "/fresh", nil, CacheMiss, 1},
		{"a", "/fresh", nil, CacheHit, 1},
		{"b", "/fresh", nil, CacheMiss, 2}, // another tenant never sees a's entry
		{"b", "/fresh", nil, CacheHit, 2},
		{"a", "/nostore", nil, CacheMiss, 3},
		{"a", "/nostore", nil, CacheMiss, 4},
		{"a", "/fresh", map[string][]string{"Authorization": {"Bearer x"}}, CacheSkip, 5},
	}
	for i, s := range steps {
		resp := get(s.tenant, s.path, s.hdr)
		if resp.Cache != s.wantCache || hits.Load() != s.wantHits || string(resp.Body) != "body of "+s.path {
			t.Errorf("step %d %s %s: cache %q, origin hits %d, body %q; want %q, %d", i, s.tenant, s.path, resp.Cache, hits.Load(), resp.Body, s.wantCache, s.wantHits)
		}
	}
	// A hit is still decided: with a narrowing that refuses the origin, the
	// cached answer is not served.
	_, err = e.HTTP(ctx, airlock.Principal{Tenant: "a"}, airlock.HTTPRequest{URL: srv.URL + "/fresh", Cache: true, Narrow: &airlock.Narrowing{Deny: []string{"127.0.0.1"}}})
	if airlock.CodeOf(err) != airlock.CodeDenied {
		t.Errorf("narrowed cache hit: %v, want denied", err)
	}
}
