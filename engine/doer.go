package engine

import (
	"context"
	"net/http"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/egress"
	"github.com/airlockhq/airlock/internal/browse"
	"github.com/airlockhq/airlock/internal/gate"
)

// callDoer is the airlock.Doer a provider gets for one broker call: every
// request goes through the tenant's guarded client, under the call's
// narrowing and proxy, and stops as soon as the principal is revoked.
type callDoer struct {
	e       *Engine
	call    *gate.Call
	narrow  *egress.Checker
	proxy   string
	profile egress.TLSProfile // default when a request names none
	header  http.Header       // default headers (the crawler's User-Agent)
	cache   bool
	timeout time.Duration // of each request, when positive (FetchRequest.Timeout)
}

var _ airlock.Doer = (*callDoer)(nil)

// Do implements airlock.Doer.
func (d *callDoer) Do(ctx context.Context, req *airlock.HTTPRequest) (*airlock.HTTPResponse, error) {
	if d.e.revs.Revoked(d.call.Principal) {
		return nil, &gate.RevokedError{Principal: d.call.Principal}
	}
	if err := context.Cause(d.call.Ctx); err != nil {
		return nil, err
	}
	h := http.Header{}
	for k, vs := range d.header {
		h[k] = vs
	}
	for k, vs := range req.Header {
		h[http.CanonicalHeaderKey(k)] = vs
	}
	profile := egress.TLSProfile(req.TLSProfile)
	if profile == "" {
		profile = d.profile
	}
	proxy := req.Proxy
	if proxy == "" {
		proxy = d.proxy
	}
	narrow := d.narrow
	if req.Narrow != nil {
		n, err := browse.Narrowing(req.Narrow)
		if err != nil {
			return nil, err
		}
		narrow = narrow.Narrow(n)
		if narrow == nil {
			narrow = n
		}
	}
	er := &egress.Request{Method: req.Method, URL: req.URL, Header: h, Body: req.Body, Profile: profile, MaxRedirects: req.MaxRedirects,
		Timeout: d.timeout, Call: egress.Call{Key: d.call.Key(), Narrow: narrow, Proxy: proxy}}
	sub := *d.call
	sub.Ctx = ctx
	var resp *airlock.HTTPResponse
	var err error
	if d.cache || req.Cache {
		resp, _, err = d.e.cachedHTTP(&sub, er)
	} else {
		resp, _, err = d.e.doHTTP(&sub, d.call.Tenant.Client, er, nil)
	}
	if err != nil {
		d.call.RefusedRequest(req.URL, err)
	}
	return resp, err
}
