package engine

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/pquerna/cachecontrol"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/egress"
	"github.com/airlockhq/airlock/internal/gate"
	"github.com/airlockhq/airlock/internal/store"
)

// Cache outcomes reported in HTTPResponse.Cache.
const (
	CacheHit  = "hit"
	CacheMiss = "miss"
	CacheSkip = "bypass" // asked for, but the request or response may not be shared
)

// maxCachedBody bounds what one cache entry may hold.
const maxCachedBody = 5 << 20

// cacheable reports whether a request may be served from, or stored in, the
// shared cache: GET without a body or credentials.
func cacheable(r *egress.Request) bool {
	if r.Method != "" && r.Method != http.MethodGet || len(r.Body) > 0 {
		return false
	}
	for k := range r.Header {
		switch http.CanonicalHeaderKey(k) {
		case "Authorization", "Cookie":
			return false
		}
	}
	return true
}

func cacheKey(t egress.Target, r *egress.Request) string {
	return "GET " + t.String() + " profile=" + string(r.Profile) + " proxy=" + r.Call.Proxy
}

// cachedHTTP serves a GET from the tenant's partition of the shared HTTP
// cache (RFC 9111 shared-cache rules) or fetches and stores it. The policy
// runs on hits too: the target is decided again before a cached answer is
// returned.
func (e *Engine) cachedHTTP(call *gate.Call, r *egress.Request) (*airlock.HTTPResponse, int64, error) {
	if !cacheable(r) {
		resp, in, err := e.doHTTP(call, call.Tenant.Client, r, nil)
		if resp != nil {
			resp.Cache = CacheSkip
		}
		return resp, in, err
	}
	t, err := egress.ParseURL(r.URL)
	if err != nil {
		return nil, 0, err
	}
	key := cacheKey(t, r)
	part := call.Tenant.Name
	if ent, err := e.st.GetCacheEntry(call.Ctx, part, key); err == nil && varyMatches(ent, r.Header) {
		c := r.Call
		c.Key = call.Key()
		if _, err := call.Tenant.Dialer.Resolve(call.Ctx, egress.LaneHTTP, t, &c); err != nil {
			return nil, 0, err
		}
		return &airlock.HTTPResponse{Status: ent.Status, Header: ent.Header, Body: ent.Body, URL: t.String(), Proto: "cache", Cache: CacheHit}, 0, nil
	}
	resp, in, err := e.doHTTP(call, call.Tenant.Client, r, nil)
	if err != nil {
		return nil, in, err
	}
	resp.Cache = CacheMiss
	e.maybeStore(call.Ctx, part, key, r, resp)
	return resp, in, nil
}

func varyMatches(ent store.CacheEntry, h http.Header) bool {
	for k, want := range ent.RequestHeader {
		if strings.Join(h.Values(k), ",") != strings.Join(want, ",") {
			return false
		}
	}
	return true
}

func (e *Engine) maybeStore(ctx context.Context, part, key string, r *egress.Request, resp *airlock.HTTPResponse) {
	if len(resp.Body) > maxCachedBody || len(resp.Redirects) > 0 {
		return
	}
	h := http.Header(resp.Header)
	if h.Get("Set-Cookie") != "" || h.Get("Vary") == "*" {
		return
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, resp.URL, nil)
	if err != nil {
		return
	}
	req.Header = r.Header.Clone()
	if req.Header == nil {
		req.Header = http.Header{}
	}
	reasons, expires, err := cachecontrol.CachableResponse(req, &http.Response{StatusCode: resp.Status, Header: h}, cachecontrol.Options{PrivateCache: false})
	if err != nil || len(reasons) > 0 || expires.IsZero() || !expires.After(time.Now()) {
		return
	}
	ent := store.CacheEntry{Status: resp.Status, Header: h.Clone(), Body: resp.Body, Stored: time.Now(), Expires: expires, RequestHeader: http.Header{}}
	for _, v := range h.Values("Vary") {
		for _, name := range strings.Split(v, ",") {
			if name = strings.TrimSpace(name); name != "" {
				ent.RequestHeader[http.CanonicalHeaderKey(name)] = req.Header.Values(name)
			}
		}
	}
	if err := e.st.PutCacheEntry(ctx, part, key, ent); err != nil && !errors.Is(err, context.Canceled) {
		e.logger.Warn("http cache store", "error", err.Error())
	}
}
