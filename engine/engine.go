// Package engine is Airlock's public facade: the one place every surface
// (CLI, HTTP API, MCP, WebAssembly host) and any Go program calls to reach
// the network on a principal's behalf. Each method runs the gate's cadence
// (revoked? → rate limit → capability granted? → policy → the work under
// caps → audit) and returns the one error vocabulary: an *airlock.Error
// carrying the decision id of the call.
//
//	e, err := engine.New(ctx, engine.Config{InMemory: true})
//	if err != nil { ... }
//	defer e.Close(ctx)
//	resp, err := e.HTTP(ctx, airlock.Principal{Tenant: "local"}, airlock.HTTPRequest{URL: "https://example.com/"})
package engine

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"fmt"
	"net/http"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/egress"
	"github.com/airlockhq/airlock/internal/browse"
	"github.com/airlockhq/airlock/internal/config"
	"github.com/airlockhq/airlock/internal/extract"
	"github.com/airlockhq/airlock/internal/gate"
)

// Version is the build version reported in airlock_build_info.
var Version = "dev"

// Principal returns the principal of the default tenant ("local").
func (e *Engine) Principal() airlock.Principal { return airlock.Principal{Tenant: e.cfg.DefaultTenant} }

// Profile returns the profile name of a tenant, or "".
func (e *Engine) Profile(tenant string) string {
	if t := e.gate.Tenant(tenant); t != nil {
		return t.Profile.Name
	}
	return ""
}

// Grants reports whether the principal's profile grants capability c (a
// surface uses it to offer only the tools a principal can use; the gate
// still decides every call).
func (e *Engine) Grants(p airlock.Principal, c airlock.Capability) bool {
	t := e.gate.Tenant(p.Tenant)
	return t != nil && t.Profile.Has(c)
}

func errShuttingDown() *airlock.Error {
	return airlock.Errorf(airlock.CodeUnavailable, airlock.ReasonShuttingDown, "engine is shutting down")
}

func (e *Engine) begin(ctx context.Context, p airlock.Principal, c airlock.Capability, broker, target string) (*gate.Call, error) {
	if e.closing.Load() {
		return nil, errShuttingDown()
	}
	call, err := e.gate.Begin(ctx, p, c, broker, target)
	if err != nil {
		return nil, err
	}
	// Close may have started between the check above and Begin: it waits
	// only for calls it can see, so a call registered after it looked must
	// not proceed (its record still reaches the open auditor).
	if e.closing.Load() {
		return nil, call.End(errShuttingDown(), 0, 0)
	}
	// Extractions under the call share the process's extraction budget.
	call.Ctx = extract.WithBudget(call.Ctx, extractBudget{b: e.budgets, factor: int64(e.cfg.Budgets.ExtractFactor)})
	return call, nil
}

// HTTP makes a generic HTTP request under the principal's policy
// (capability http). A max_redirects or body above the tenant's ceilings
// (limits.max_redirects, limits.http_body) is invalid, reason limit.
func (e *Engine) HTTP(ctx context.Context, p airlock.Principal, req airlock.HTTPRequest) (*airlock.HTTPResponse, error) {
	call, err := e.begin(ctx, p, airlock.CapabilityHTTP, "http", req.URL)
	if err != nil {
		return nil, err
	}
	if err := call.Tenant.Limits.Check(req, ""); err != nil {
		return nil, call.End(err, 0, 0)
	}
	if ceil := int(call.Tenant.Limits.Ceiling(gate.LimitMaxRedirects)); req.MaxRedirects == nil && ceil < config.DefaultRedirects(e.cfg.Egress) {
		req.MaxRedirects = &ceil // a tenant's ceiling below the default
	}
	n, err := browse.Narrowing(req.Narrow)
	if err != nil {
		return nil, call.End(err, 0, 0)
	}
	er := &egress.Request{
		Method: req.Method, URL: req.URL, Header: http.Header(req.Header), Body: req.Body,
		Profile: egress.TLSProfile(req.TLSProfile), MaxRedirects: req.MaxRedirects,
		Call: egress.Call{Key: call.Key(), Narrow: n, Proxy: req.Proxy},
	}
	var resp *airlock.HTTPResponse
	var in int64
	if req.Cache {
		resp, in, err = e.doers.Cached(call, er)
	} else {
		resp, in, err = e.doers.Do(call, call.Tenant.Client, er, nil)
	}
	if err = call.End(err, in, int64(len(req.Body))); err != nil {
		return nil, err
	}
	resp.DecisionID = call.ID
	return resp, nil
}

// Exchange makes a one-shot TCP, UDP or TLS exchange (capability tcp, udp or
// tls, after the lane). A max_reply, timeout, idle or data above the
// tenant's ceilings (limits.exchange_*, limits.udp_*) is invalid, reason
// limit, refused before anything is dialled.
func (e *Engine) Exchange(ctx context.Context, p airlock.Principal, req airlock.ExchangeRequest) (*airlock.ExchangeResponse, error) {
	var capability airlock.Capability
	switch req.Lane {
	case airlock.LaneTCP:
		capability = airlock.CapabilityTCP
	case airlock.LaneUDP:
		capability = airlock.CapabilityUDP
	case airlock.LaneTLS:
		capability = airlock.CapabilityTLS
	default:
		// Still one decision, like every broker call.
		call, err := e.begin(ctx, p, "", "exchange", req.Target)
		if err != nil {
			return nil, err
		}
		return nil, call.End(airlock.Errorf(airlock.CodeInvalid, airlock.ReasonLane, "exchange lane %q: want tcp, udp or tls", req.Lane), 0, 0)
	}
	call, err := e.begin(ctx, p, capability, req.Lane, req.Target)
	if err != nil {
		return nil, err
	}
	if err := call.Tenant.Limits.Check(req, req.Lane); err != nil {
		return nil, call.End(err, 0, 0)
	}
	req = call.Tenant.Limits.ExchangeDefaults(req)
	n, err := browse.Narrowing(req.Narrow)
	if err != nil {
		return nil, call.End(err, 0, 0)
	}
	o := &egress.ExchangeOptions{Call: egress.Call{Key: call.Key(), Narrow: n}, Timeout: req.Timeout, MaxReply: req.MaxReply, IdleAfterFirstByte: req.Idle}
	d := call.Tenant.Dialer
	var reply []byte
	switch req.Lane {
	case airlock.LaneTCP:
		reply, err = d.ExchangeTCP(call.Ctx, req.Target, req.Data, o)
	case airlock.LaneUDP:
		reply, err = d.ExchangeUDP(call.Ctx, req.Target, req.Data, o)
	case airlock.LaneTLS:
		reply, err = d.ExchangeTLS(call.Ctx, req.Target, req.Data, o)
	}
	if err = call.End(err, int64(len(reply)), int64(len(req.Data))); err != nil {
		return nil, err
	}
	return &airlock.ExchangeResponse{Data: reply, DecisionID: call.ID}, nil
}

// CheckLimit refuses (invalid, reason limit) a value a surface takes
// outside the root request types (MCP's max_length) above the
// principal's ceiling name; the refusal is one audited decision of
// broker. A value within the ceiling records nothing.
func (e *Engine) CheckLimit(ctx context.Context, p airlock.Principal, broker, name, field string, v int64) error {
	t := e.gate.Tenant(p.Tenant)
	if t == nil {
		return nil // Begin refuses the unknown tenant with its own call
	}
	err := t.Limits.CheckValue(name, field, v)
	if err == nil {
		return nil
	}
	call, berr := e.begin(ctx, p, "", broker, fmt.Sprintf("%s=%d", field, v))
	if berr != nil {
		return berr
	}
	return call.End(err, 0, 0)
}

// Ceiling returns the principal's ceiling name (see internal/gate's
// table), or the table's default for an unknown tenant: what a surface
// uses to make its own defaults fit under the tenant's ceilings.
func (e *Engine) Ceiling(p airlock.Principal, name string) int64 {
	return e.gate.Limits(p.Tenant).Ceiling(name)
}

// Sign returns HMAC-SHA256(secret, data) with the tenant's named secret
// (capability secrets). The secret itself is never returned, logged or
// audited.
func (e *Engine) Sign(ctx context.Context, p airlock.Principal, name string, data []byte) ([]byte, string, error) {
	call, err := e.begin(ctx, p, airlock.CapabilitySecrets, "sign", name)
	if err != nil {
		return nil, "", err
	}
	key, ok := call.Tenant.Secrets[name]
	if !ok {
		return nil, "", call.End(airlock.Errorf(airlock.CodeNotFound, airlock.ReasonSecret, "no secret named %q for tenant %s", name, p.Tenant), 0, 0)
	}
	m := hmac.New(sha256.New, key)
	m.Write(data)
	sum := m.Sum(nil)
	return sum, call.ID, call.End(nil, 0, int64(len(data)))
}

// Route calls a credentialed route (capability routes): the engine adds the
// route's credential header, the call goes through egress under the
// tenant's policy, and any echo of the credential in the response is
// redacted.
func (e *Engine) Route(ctx context.Context, p airlock.Principal, req airlock.RouteRequest) (*airlock.HTTPResponse, error) {
	call, err := e.begin(ctx, p, airlock.CapabilityRoutes, "route", req.Name+" "+req.Method+" "+req.Path)
	if err != nil {
		return nil, err
	}
	if err := call.Tenant.Limits.Check(req, ""); err != nil {
		return nil, call.End(err, 0, 0)
	}
	r, ok := e.routes[req.Name]
	if !ok || !call.Tenant.Routes[req.Name] && !call.Tenant.Routes[AllRoutes] {
		return nil, call.End(airlock.Errorf(airlock.CodeNotFound, airlock.ReasonRoute, "no route named %q for tenant %s", req.Name, p.Tenant), 0, 0)
	}
	method, u, h, err := r.Request(req.Method, req.Path, req.Header)
	if err != nil {
		return nil, call.End(err, 0, 0)
	}
	resp, in, err := e.doers.Do(call, call.Tenant.Client, &egress.Request{Method: method, URL: u, Header: h, Body: req.Body,
		Call: egress.Call{Key: call.Key(), Narrow: r.Origin()}}, r.Redactor())
	if err = call.End(err, in, int64(len(req.Body))); err != nil {
		return nil, err
	}
	resp.DecisionID = call.ID
	return resp, nil
}
