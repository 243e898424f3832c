// Package gate is the cadence every broker call passes, whatever surface it
// came through: revoked? → rate limit → capability granted? → (the caller
// applies the policy and does the work under caps) → audit. It owns
// principals and tenants, capability profiles, the revocation set, the rate
// limiters and the audit pipeline.
package gate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/egress"
)

// Outcomes of an audit record.
const (
	OutcomeAllow = "allow"
	OutcomeDeny  = "deny"
	OutcomeError = "error"
)

// Tenant is a compiled tenant: its profile, the egress client and dialer
// built on its effective policy, and what it may sign and route.
type Tenant struct {
	Name    string
	Profile Profile
	Limit   Limit
	Dialer  *egress.Dialer
	Client  *egress.Client
	Secrets map[string][]byte // never leaves the engine
	Routes  map[string]bool   // the routes it may call; "*": every route; nil or empty: none
	// Limits are the tenant's ceilings on caller-supplied values
	// (limits.go); nil: the table's defaults.
	Limits *Limits
	// AllowIgnoreRobots lets the tenant's crawls ignore robots.txt.
	AllowIgnoreRobots bool
	// Initiators are the initiators the tenant may claim and how each is
	// fetched (initiator.go); empty: model only, with its defaults.
	Initiators map[string]Initiator

	limitKey string // the rate limiter key, set by New
}

// Gate applies the cadence. Create it with New; it is safe for concurrent
// use.
type Gate struct {
	tenants map[string]*Tenant
	limiter RateLimiter
	revs    *RevocationSet
	audit   *Auditor
	connect Limit
	logger  *slog.Logger
	ids     ulidGen

	mu     sync.Mutex
	active map[*Call]struct{}
}

// Config wires a Gate.
type Config struct {
	Tenants     map[string]*Tenant
	Limiter     RateLimiter // nil: a MemoryLimiter
	Revocations *RevocationSet
	Auditor     *Auditor
	Connect     Limit // connect attempts per instance
	Logger      *slog.Logger
}

// New builds a Gate. It installs the connect-attempt limiter on every
// tenant's dialer.
func New(cfg Config) *Gate {
	g := &Gate{tenants: cfg.Tenants, limiter: cfg.Limiter, revs: cfg.Revocations, audit: cfg.Auditor, connect: cfg.Connect, logger: cfg.Logger, active: map[*Call]struct{}{}}
	if g.limiter == nil {
		g.limiter = &MemoryLimiter{}
	}
	for name, t := range g.tenants {
		t.limitKey = "tenant:" + name
		if t.Dialer != nil {
			t.Dialer.Limiter = g.connectLimiter
		}
	}
	return g
}

func (g *Gate) connectLimiter(ctx context.Context, key string) error {
	ok, retry, err := g.limiter.Allow(ctx, "connect:"+key, g.connect)
	if err != nil {
		return &egress.Error{Code: egress.CodeUnavailable, Reason: egress.Reason(airlock.ReasonConnectRate), Op: "limit", Err: err}
	}
	if !ok {
		// Err carries the retry-after, so airlock.RetryAfter finds it through
		// the egress error and the call's *airlock.Error.
		return &egress.Error{Code: egress.CodeRateLimited, Reason: egress.Reason(airlock.ReasonConnectRate), Op: "limit",
			Detail: fmt.Sprintf("connect attempts over %d per %s", g.connect.Burst, limitWindow(g.connect)),
			Err:    &RateLimitedError{Reason: airlock.ReasonConnectRate, After: retry}}
	}
	return nil
}

func limitWindow(l Limit) time.Duration {
	if l.Rate <= 0 {
		return 0
	}
	return time.Duration(float64(l.Burst) / l.Rate * float64(time.Second))
}

// Tenant returns the compiled tenant, or nil.
func (g *Gate) Tenant(name string) *Tenant { return g.tenants[name] }

// Tenants returns the tenant names.
func (g *Gate) Tenants() []string {
	out := make([]string, 0, len(g.tenants))
	for n := range g.tenants {
		out = append(out, n)
	}
	return out
}

// Auditor returns the audit pipeline.
func (g *Gate) Auditor() *Auditor { return g.audit }

// Revocations returns the revocation set.
func (g *Gate) Revocations() *RevocationSet { return g.revs }

// NewID returns a fresh decision id (a ULID).
func (g *Gate) NewID() string { return g.ids.next(time.Now()) }

// Call is one broker call in progress. Its Ctx carries the principal
// (airlock.PrincipalFromContext) and is cancelled when the call's
// principal is revoked mid-flight (context.Cause is then a revoked error).
// End it exactly once.
type Call struct {
	ID        string
	Principal airlock.Principal
	Tenant    *Tenant
	Broker    string
	Target    string
	Ctx       context.Context
	// Batch marks a call that makes many requests (a crawl, a batch of
	// fetches): each request refused by policy is recorded as a decision
	// of its own (RefusedRequest), so that the audit log and the deny
	// ring show what was tried, not only the call.
	Batch bool
	// Note is added to the call's audit record (its detail): the
	// initiator of a fetch or a crawl.
	Note   string
	start  time.Time
	cancel context.CancelCauseFunc
	g      *Gate
	ended  bool
}

// RevokedError is the cause of a revoked call.
type RevokedError struct{ Principal airlock.Principal }

func (e *RevokedError) Error() string       { return "gate: " + e.Principal.String() + " is revoked" }
func (e *RevokedError) ErrorCode() string   { return string(airlock.CodeRevoked) }
func (e *RevokedError) ErrorReason() string { return string(airlock.ReasonRevoked) }

// RateLimitedError carries the time after which a retry can succeed.
type RateLimitedError struct {
	Reason airlock.Reason
	After  time.Duration
}

func (e *RateLimitedError) Error() string {
	return fmt.Sprintf("gate: rate limited (%s); retry after %s", e.Reason, e.After.Round(time.Millisecond))
}
func (e *RateLimitedError) ErrorCode() string         { return string(airlock.CodeRateLimited) }
func (e *RateLimitedError) ErrorReason() string       { return string(e.Reason) }
func (e *RateLimitedError) RetryAfter() time.Duration { return e.After }

// Begin runs the cadence up to the policy: principal known, not revoked,
// within its tenant's rate, capability granted (cap "" skips the check, for
// calls every profile has). On refusal it records the decision and returns
// an *airlock.Error carrying the decision id; otherwise the caller does the
// work under call.Ctx and calls End.
func (g *Gate) Begin(ctx context.Context, p airlock.Principal, capability airlock.Capability, broker, target string) (*Call, error) {
	now := time.Now()
	c := &Call{ID: g.ids.next(now), Principal: p, Broker: broker, Target: target, start: now, g: g}
	if !p.Valid() {
		return nil, c.refuse(airlock.CodeInvalid, airlock.ReasonPrincipal, "bad principal "+fmt.Sprintf("%q", p.String()), nil)
	}
	t := g.tenants[p.Tenant]
	if t == nil {
		return nil, c.refuse(airlock.CodeDenied, airlock.ReasonUnknownTenant, "unknown tenant "+fmt.Sprintf("%q", p.Tenant), nil)
	}
	c.Tenant = t
	if g.revs != nil && g.revs.Stale() {
		return nil, c.refuse(airlock.CodeUnavailable, airlock.ReasonRevocationsStale, "the revocation set cannot be refreshed from the shared store", nil)
	}
	if g.revs != nil && g.revs.Revoked(p) {
		return nil, c.refuse(airlock.CodeRevoked, airlock.ReasonRevoked, p.String()+" is revoked", &RevokedError{Principal: p})
	}
	ok, retry, err := g.limiter.Allow(ctx, t.limitKey, t.Limit)
	if err != nil {
		return nil, c.refuse(airlock.CodeUnavailable, airlock.ReasonTenantRate, "rate limiter unavailable", err)
	}
	if !ok {
		rl := &RateLimitedError{Reason: airlock.ReasonTenantRate, After: retry}
		return nil, c.refuse(airlock.CodeRateLimited, airlock.ReasonTenantRate, rl.Error(), rl)
	}
	if capability != "" && !t.Profile.Has(capability) {
		return nil, c.refuse(airlock.CodeDenied, airlock.ReasonCapability,
			fmt.Sprintf("capability %s is not granted by profile %s", capability, t.Profile.Name), nil)
	}
	// The call's context names its principal for whatever serves the call
	// (a provider learns its caller from it).
	c.Ctx, c.cancel = context.WithCancelCause(airlock.ContextWithPrincipal(ctx, p))
	g.mu.Lock()
	g.active[c] = struct{}{}
	g.mu.Unlock()
	return c, nil
}

func (c *Call) refuse(code airlock.Code, reason airlock.Reason, msg string, cause error) error {
	c.ended = true
	c.g.audit.Record(Record{ID: c.ID, Time: c.start, Tenant: c.Principal.Tenant, Instance: c.Principal.Instance,
		Broker: c.Broker, Outcome: OutcomeDeny, Code: string(code), Reason: string(reason), Target: c.Target, Detail: msg,
		DurationMS: time.Since(c.start).Milliseconds()})
	return &airlock.Error{Code: code, Reason: reason, Message: msg, DecisionID: c.ID, Err: cause}
}

// End records the call's one decision and returns err in the public shape
// (an *airlock.Error with the decision id), or nil. The record's Detail is
// err's full text; the returned error's Message is its public text
// (airlock.PublicMessageOf). A call cancelled by a
// revocation reports revoked, whatever error the work returned.
func (c *Call) End(err error, bytesIn, bytesOut int64) error {
	if c.ended {
		return err
	}
	c.ended = true
	c.g.mu.Lock()
	delete(c.g.active, c)
	c.g.mu.Unlock()
	if err != nil {
		// A call the gate cancelled (a revocation, a shutdown) reports why,
		// whatever error the work returned.
		var cl interface{ ErrorCode() string }
		if cause := context.Cause(c.Ctx); errors.As(cause, &cl) {
			err = fmt.Errorf("%w (mid-flight: %w)", cause, err)
		}
	}
	c.cancel(nil)
	rec := Record{ID: c.ID, Time: c.start, Tenant: c.Principal.Tenant, Instance: c.Principal.Instance,
		Broker: c.Broker, Outcome: OutcomeAllow, Target: c.Target,
		DurationMS: time.Since(c.start).Milliseconds(), BytesIn: bytesIn, BytesOut: bytesOut}
	if err == nil {
		rec.Reason = string(airlock.ReasonOK)
		rec.Detail = c.Note
		c.g.audit.Record(rec)
		return nil
	}
	code := airlock.CodeOf(err)
	rec.Code, rec.Reason, rec.Detail = string(code), string(airlock.ReasonOf(err)), err.Error()
	if c.Note != "" {
		rec.Detail += " (" + c.Note + ")"
	}
	rec.Outcome = OutcomeError
	switch code {
	case airlock.CodeDenied, airlock.CodeRevoked, airlock.CodeRateLimited:
		rec.Outcome = OutcomeDeny
	}
	c.g.audit.Record(rec)
	if code == airlock.CodeInternal && c.g.logger != nil {
		c.g.logger.Error("internal error in broker call", slog.String("decision_id", c.ID), slog.String("broker", c.Broker), slog.String("error", rec.Detail))
	}
	// The audit record has the full detail; the caller gets the public
	// text (no resolved address, resolver answer or DNS server).
	return &airlock.Error{Code: code, Reason: airlock.ReasonOf(err), Message: airlock.PublicMessageOf(err), DecisionID: c.ID, Err: err}
}

// RefusedRequest records a request of a Batch call that the policy
// refused (denied), with an id of its own, as a decision under the call's
// principal and broker; the call's own record comes with End. Other
// errors (a revocation or a rate limit ends or slows the whole call, and
// is the call's record), and requests of calls that are not Batch, are
// not recorded here.
func (c *Call) RefusedRequest(target string, err error) {
	code := airlock.CodeOf(err)
	if !c.Batch || code != airlock.CodeDenied {
		return
	}
	now := time.Now()
	c.g.audit.Record(Record{ID: c.g.ids.next(now), Time: now, Tenant: c.Principal.Tenant, Instance: c.Principal.Instance,
		Broker: c.Broker, Outcome: OutcomeDeny, Code: string(code), Reason: string(airlock.ReasonOf(err)), Target: target,
		Detail: err.Error() + " (in call " + c.ID + ")"})
}

// Key is the caller key egress uses for this call's connect attempts.
func (c *Call) Key() string { return c.Principal.String() }

// RevocationsChanged cancels every in-flight call whose principal is now
// revoked. The revocation set calls it after each change.
func (g *Gate) RevocationsChanged() {
	if g.revs == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for c := range g.active {
		if g.revs.Revoked(c.Principal) {
			c.cancel(&RevokedError{Principal: c.Principal})
		}
	}
}

// CancelActive cancels every call in flight with cause (an error with an
// ErrorCode, such as an *airlock.Error, which End then reports).
func (g *Gate) CancelActive(cause error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for c := range g.active {
		c.cancel(cause)
	}
}

// Active returns how many calls are in flight.
func (g *Gate) Active() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.active)
}

// RecordAdmin audits an administrative action (revoke, unrevoke, token).
func (g *Gate) RecordAdmin(action, subject string, err error) string {
	id := g.NewID()
	rec := Record{ID: id, Time: time.Now(), Tenant: "admin", Broker: "admin", Outcome: OutcomeAllow, Reason: action, Target: subject}
	if err != nil {
		rec.Outcome, rec.Code, rec.Detail = OutcomeError, string(airlock.CodeOf(err)), err.Error()
	}
	g.audit.Record(rec)
	return id
}

// Drain waits for the calls in flight until ctx ends, then cancels them
// with cause and gives them up to grace to end, so that their decision
// records reach the audit log before it closes.
func (g *Gate) Drain(ctx context.Context, cause error, grace time.Duration) {
	if g.waitIdle(ctx) {
		return
	}
	g.CancelActive(cause)
	waitCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
	defer cancel()
	g.waitIdle(waitCtx)
}

// waitIdle waits until no call is in flight, or ctx ends (false).
func (g *Gate) waitIdle(ctx context.Context) bool {
	for g.Active() > 0 {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(5 * time.Millisecond):
		}
	}
	return true
}

// CheckReader checks a principal that reads or cancels what its tenant
// owns (crawl jobs): the checks of Begin that do not spend its rate.
func (g *Gate) CheckReader(p airlock.Principal) error {
	switch {
	case !p.Valid():
		return airlock.Errorf(airlock.CodeInvalid, airlock.ReasonPrincipal, "bad principal %q", p.String())
	case g.Tenant(p.Tenant) == nil:
		return airlock.Errorf(airlock.CodeDenied, airlock.ReasonUnknownTenant, "unknown tenant %q", p.Tenant)
	case g.revs.Revoked(p):
		return airlock.Errorf(airlock.CodeRevoked, airlock.ReasonRevoked, "%s is revoked", p.String())
	}
	return nil
}

// Limits returns a tenant's ceilings, or nil for an unknown tenant.
func (g *Gate) Limits(tenant string) *Limits {
	if t := g.Tenant(tenant); t != nil {
		return t.Limits
	}
	return nil
}
