// Package httpcache holds the rules of the HTTP verb's shared cache (RFC
// 9111, shared-cache semantics): which requests may use it, the key of an
// entry, whether an entry fits a request's Vary headers, and what of a
// response may be stored. The entries live in internal/store, one
// partition per tenant; the engine decides the target again on every hit.
package httpcache

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/pquerna/cachecontrol"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/egress"
	"github.com/airlockhq/airlock/internal/store"
)

// MaxBody bounds what one cache entry may hold.
const MaxBody = 5 << 20

// Cacheable reports whether a request may be served from, or stored in,
// the shared cache: GET without a body or credentials.
func Cacheable(r *egress.Request) bool {
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

// Key is the entry key of a cacheable request for target t.
func Key(t egress.Target, r *egress.Request) string {
	return "GET " + t.String() + " profile=" + string(r.Profile) + " proxy=" + r.Call.Proxy
}

// Matches reports whether ent was stored for a request with the same
// values of the headers its response varies on as h.
func Matches(ent store.CacheEntry, h http.Header) bool {
	for k, want := range ent.RequestHeader {
		if strings.Join(h.Values(k), ",") != strings.Join(want, ",") {
			return false
		}
	}
	return true
}

// Entry returns the entry to store for resp, the answer to r, at now; false
// when a shared cache may not keep it (too large, redirected, setting a
// cookie, Vary: *, not fresh under its Cache-Control and Expires).
func Entry(ctx context.Context, r *egress.Request, resp *airlock.HTTPResponse, now time.Time) (store.CacheEntry, bool) {
	if len(resp.Body) > MaxBody || len(resp.Redirects) > 0 {
		return store.CacheEntry{}, false
	}
	h := http.Header(resp.Header)
	if h.Get("Set-Cookie") != "" || h.Get("Vary") == "*" {
		return store.CacheEntry{}, false
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, resp.URL, nil)
	if err != nil {
		return store.CacheEntry{}, false
	}
	req.Header = r.Header.Clone()
	if req.Header == nil {
		req.Header = http.Header{}
	}
	reasons, expires, err := cachecontrol.CachableResponse(req, &http.Response{StatusCode: resp.Status, Header: h}, cachecontrol.Options{PrivateCache: false})
	if err != nil || len(reasons) > 0 || expires.IsZero() || !expires.After(now) {
		return store.CacheEntry{}, false
	}
	ent := store.CacheEntry{Status: resp.Status, Header: h.Clone(), Body: resp.Body, Stored: now, Expires: expires, RequestHeader: http.Header{}}
	for _, v := range h.Values("Vary") {
		for _, name := range strings.Split(v, ",") {
			if name = strings.TrimSpace(name); name != "" {
				ent.RequestHeader[http.CanonicalHeaderKey(name)] = req.Header.Values(name)
			}
		}
	}
	return ent, true
}
