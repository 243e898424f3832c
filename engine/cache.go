package engine

import (
	"context"
	"errors"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/egress"
	"github.com/airlockhq/airlock/internal/gate"
	"github.com/airlockhq/airlock/internal/httpcache"
)

// Cache outcomes reported in HTTPResponse.Cache.
const (
	CacheHit  = "hit"
	CacheMiss = "miss"
	CacheSkip = "bypass" // asked for, but the request or response may not be shared
)

// cachedHTTP serves a GET from the tenant's partition of the shared HTTP
// cache (internal/httpcache's rules) or fetches and stores it. The policy
// runs on hits too: the target is decided again before a cached answer is
// returned.
func (e *Engine) cachedHTTP(call *gate.Call, r *egress.Request) (*airlock.HTTPResponse, int64, error) {
	if !httpcache.Cacheable(r) {
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
	key := httpcache.Key(t, r)
	part := call.Tenant.Name
	if ent, err := e.st.GetCacheEntry(call.Ctx, part, key); err == nil && httpcache.Matches(ent, r.Header) {
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

func (e *Engine) maybeStore(ctx context.Context, part, key string, r *egress.Request, resp *airlock.HTTPResponse) {
	ent, ok := httpcache.Entry(ctx, r, resp, time.Now())
	if !ok {
		return
	}
	if err := e.st.PutCacheEntry(ctx, part, key, ent); err != nil && !errors.Is(err, context.Canceled) {
		e.logger.Warn("http cache store", "error", err.Error())
	}
}
