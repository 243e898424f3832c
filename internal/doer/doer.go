// Package doer runs the HTTP requests of one broker call: the
// airlock.Doer a provider gets for the call (the tenant's guarded client,
// the call's narrowing and proxy, stopped by a revocation), the request
// execution that counts the body against the tenant's bytes in flight and
// redacts a route's credential, the shared HTTP cache, and the initiator's
// identity and robots.txt check of a single fetch. It sits below the
// engine facade and above internal/gate and internal/browse, which it
// joins: internal/browse may not import the gate.
package doer

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/egress"
	"github.com/airlockhq/airlock/internal/browse"
	"github.com/airlockhq/airlock/internal/crawl"
	"github.com/airlockhq/airlock/internal/gate"
	"github.com/airlockhq/airlock/internal/httpcache"
	"github.com/airlockhq/airlock/internal/pagecache"
	"github.com/airlockhq/airlock/internal/provider/native"
)

// Env is what every call's requests share: one per engine.
type Env struct {
	Revoked   func(airlock.Principal) bool
	Budgets   *gate.Budgets
	Cache     httpcache.Entries // the shared HTTP cache's store
	Robots    *crawl.RobotsCache
	Proxy     func(string) string // the configured proxy a request's choice resolves to
	UserAgent string              // the airlock identity's User-Agent
	Logger    *slog.Logger
}

// Call is the airlock.Doer a provider gets for one broker call: every
// request goes through the tenant's guarded client, under the call's
// narrowing and proxy, and stops as soon as the principal is revoked.
type Call struct {
	env     *Env
	call    *gate.Call
	narrow  *egress.Checker
	Proxy   string
	Profile egress.TLSProfile // default when a request names none
	Header  http.Header       // default headers (the crawler's User-Agent)
	cache   bool
	Timeout time.Duration // of each request, when positive (FetchRequest.Timeout)
}

var _ airlock.Doer = (*Call)(nil)

// Do implements airlock.Doer.
func (d *Call) Do(ctx context.Context, req *airlock.HTTPRequest) (*airlock.HTTPResponse, error) {
	if d.env.Revoked(d.call.Principal) {
		return nil, &gate.RevokedError{Principal: d.call.Principal}
	}
	if err := context.Cause(d.call.Ctx); err != nil {
		return nil, err
	}
	h := http.Header{}
	for k, vs := range d.Header {
		h[k] = vs
	}
	for k, vs := range req.Header {
		h[http.CanonicalHeaderKey(k)] = vs
	}
	profile := egress.TLSProfile(req.TLSProfile)
	if profile == "" {
		profile = d.Profile
	}
	proxy := req.Proxy
	if proxy == "" {
		proxy = d.Proxy
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
		Timeout: d.Timeout, Call: egress.Call{Key: d.call.Key(), Narrow: narrow, Proxy: proxy}}
	sub := *d.call
	sub.Ctx = ctx
	var resp *airlock.HTTPResponse
	var err error
	if d.cache || req.Cache {
		resp, _, err = d.env.Cached(&sub, er)
	} else {
		resp, _, err = d.env.Do(&sub, d.call.Tenant.Client, er, nil)
	}
	if err != nil {
		d.call.RefusedRequest(req.URL, err)
	}
	return resp, err
}

// Counting is a Call that counts the body bytes the call received.
type Counting struct {
	*Call
	in atomic.Int64
}

// Do implements airlock.Doer.
func (c *Counting) Do(ctx context.Context, req *airlock.HTTPRequest) (*airlock.HTTPResponse, error) {
	resp, err := c.Call.Do(ctx, req)
	if resp != nil {
		c.in.Add(int64(len(resp.Body)))
	}
	return resp, err
}

// In returns the body bytes received so far.
func (c *Counting) In() int64 { return c.in.Load() }

// New returns the doer of call under narrowing n, with the request's proxy
// choice resolved, the default TLS profile and, with cache, the shared
// HTTP cache for every request.
func (x *Env) New(call *gate.Call, n *egress.Checker, proxy string, profile egress.TLSProfile, cache bool) *Counting {
	return &Counting{Call: &Call{env: x, call: call, narrow: n, Proxy: x.Proxy(proxy), Profile: profile, cache: cache}}
}

// CheckURL runs the policy on a URL without fetching it: what a remote
// provider is asked for, and every final URL it reports.
func CheckURL(call *gate.Call, n *egress.Checker, raw string) error {
	t, err := egress.ParseRequestURL(raw)
	if err != nil {
		return err
	}
	_, err = call.Tenant.Dialer.Resolve(call.Ctx, egress.LaneHTTP, t, &egress.Call{Key: call.Key(), Narrow: n})
	return err
}

// Do makes the request and reads the answer. A non-nil redact runs over
// every string of the answer and of the error, and refuses a redirect
// target that carries the credential.
func (x *Env) Do(call *gate.Call, c *egress.Client, r *egress.Request, redact *gate.Redactor) (*airlock.HTTPResponse, int64, error) {
	if redact != nil {
		r.CheckRedirect = redact.CheckRedirect
	}
	resp, err := c.Do(call.Ctx, r)
	if err != nil {
		return nil, 0, redact.Error(err)
	}
	// The body's bytes count against the tenant's bytes in flight while
	// they are read.
	counted, release := x.Budgets.Reader(call.Ctx, gate.BudgetBytes, call.Tenant.Name, resp.Body)
	defer release()
	resp.Body = readCloser{Reader: counted, Closer: resp.Body}
	body, err := egress.ReadAll(resp)
	if err != nil {
		return nil, int64(len(body)), redact.Error(err)
	}
	out := &airlock.HTTPResponse{Status: resp.StatusCode, Header: map[string][]string(resp.Header), Body: body,
		URL: resp.URL.String(), Redirects: resp.Redirects, Proto: resp.Proto}
	if redact != nil {
		out.Body = redact.Bytes(out.Body)
		redact.Header(out.Header)
		out.URL = redact.String(out.URL)
		out.Redirects = slices.Clone(out.Redirects)
		redact.Strings(out.Redirects)
	}
	return out, int64(len(body)), nil
}

type readCloser struct {
	io.Reader
	io.Closer
}

// Cached serves a GET from the tenant's partition of the shared HTTP cache
// (internal/httpcache's rules) or fetches and stores it. The policy runs
// on hits too: the target is decided again before a cached answer is
// returned.
func (x *Env) Cached(call *gate.Call, r *egress.Request) (*airlock.HTTPResponse, int64, error) {
	return httpcache.Serve(call.Ctx, x.Cache, call.Tenant.Name, r,
		func() (*airlock.HTTPResponse, int64, error) { return x.Do(call, call.Tenant.Client, r, nil) },
		func(t egress.Target) error {
			c := r.Call
			c.Key = call.Key()
			_, err := call.Tenant.Dialer.Resolve(call.Ctx, egress.LaneHTTP, t, &c)
			return err
		}, x.Logger)
}

// Identify gives a fetch's doer and request the initiator's identity: the
// airlock identity sends Airlock's own User-Agent, over the go TLS
// profile unless the request names one; chrome is the doer's default.
func (x *Env) Identify(ini gate.Initiator, d *Counting, req *airlock.FetchRequest) {
	if ini.Identity != gate.IdentityAirlock {
		return
	}
	d.Header = http.Header{"User-Agent": {x.UserAgent}}
	d.Profile = egress.ProfileGo
	if req.TLSProfile == "" {
		req.TLSProfile = string(egress.ProfileGo)
	}
}

// CheckRobots refuses (denied, reason robots) a single fetch that the
// site's robots.txt disallows, when the initiator honours robots.txt. The
// robots.txt request goes through d (the call's guarded doer, with the
// initiator's identity); verdicts are cached per tenant and origin.
func (x *Env) CheckRobots(call *gate.Call, ini gate.Initiator, d *Counting, req airlock.FetchRequest) error {
	if !ini.Robots {
		return nil
	}
	// A robots.txt the policy refuses is not a decision of its own: the
	// fetch that follows is refused with the policy's reason.
	sub := *call
	sub.Batch = false
	cd := *d.Call
	cd.call = &sub
	rd := &Counting{Call: &cd}
	err := crawl.CheckRobots(call.Ctx, rd, x.Robots, crawl.RobotsCheck{Target: req.URL, Partition: call.Tenant.Name,
		TLSProfile: req.TLSProfile, Proxy: d.Proxy, Narrow: req.Narrow})
	d.in.Add(rd.in.Load())
	return err
}

// FetchRaw fetches req's page as ini without extracting it: the body as
// text (invalid UTF-8 replaced), through the call's doer under narrowing
// n, after robots.txt when ini honours it. A non-2xx answer is an error
// unless req.ErrorPages. It returns the body bytes received.
func (x *Env) FetchRaw(call *gate.Call, ini gate.Initiator, n *egress.Checker, req airlock.FetchRequest) (pagecache.Entry, int64, error) {
	d := x.New(call, n, req.Proxy, egress.ProfileChrome, req.Cache)
	x.Identify(ini, d, &req)
	if err := x.CheckRobots(call, ini, d, req); err != nil {
		return pagecache.Entry{}, d.In(), err
	}
	resp, err := d.Do(call.Ctx, &airlock.HTTPRequest{URL: req.URL, TLSProfile: req.TLSProfile, Proxy: d.Proxy, Cache: req.Cache, Narrow: req.Narrow})
	if err != nil {
		return pagecache.Entry{}, d.In(), err
	}
	if (resp.Status < 200 || resp.Status > 299) && !req.ErrorPages {
		return pagecache.Entry{}, d.In(), &native.StatusError{URL: resp.URL, Status: resp.Status}
	}
	body := string(resp.Body)
	if !utf8.ValidString(body) {
		body = strings.ToValidUTF8(body, "\uFFFD")
	}
	return pagecache.Entry{URL: resp.URL, ContentType: http.Header(resp.Header).Get("Content-Type"), Content: body}, d.In(), nil
}
