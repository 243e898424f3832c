package engine

import (
	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/egress"
	"github.com/airlockhq/airlock/internal/gate"
	"github.com/airlockhq/airlock/internal/httpcache"
)

// Cache outcomes reported in HTTPResponse.Cache.
const (
	CacheHit  = httpcache.Hit
	CacheMiss = httpcache.Miss
	CacheSkip = httpcache.Skip // asked for, but the request or response may not be shared
)

// cachedHTTP serves a GET from the tenant's partition of the shared HTTP
// cache (internal/httpcache's rules) or fetches and stores it. The policy
// runs on hits too: the target is decided again before a cached answer is
// returned.
func (e *Engine) cachedHTTP(call *gate.Call, r *egress.Request) (*airlock.HTTPResponse, int64, error) {
	return httpcache.Serve(call.Ctx, e.st, call.Tenant.Name, r,
		func() (*airlock.HTTPResponse, int64, error) { return e.doHTTP(call, call.Tenant.Client, r, nil) },
		func(t egress.Target) error {
			c := r.Call
			c.Key = call.Key()
			_, err := call.Tenant.Dialer.Resolve(call.Ctx, egress.LaneHTTP, t, &c)
			return err
		}, e.logger)
}
