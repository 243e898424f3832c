package engine

import (
	"context"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/gate"
)

// GuestProfile is what a WebAssembly guest running for a tenant may do: the
// capabilities of the tenant's profile (the imports it may link) and the
// resource limits of one invocation.
type GuestProfile struct {
	Name         string
	Capabilities []airlock.Capability
	Memory       int64         // linear memory cap in bytes
	Deadline     time.Duration // wall-clock deadline of one invocation
}

// Has reports whether the profile grants c.
func (g GuestProfile) Has(c airlock.Capability) bool {
	for _, x := range g.Capabilities {
		if x == c {
			return true
		}
	}
	return false
}

// GuestProfile returns the guest profile of a tenant. An unknown tenant is
// a denied error (reason unknown_tenant), as every broker call would be.
func (e *Engine) GuestProfile(tenant string) (GuestProfile, error) {
	t := e.gate.Tenant(tenant)
	if t == nil {
		return GuestProfile{}, airlock.Errorf(airlock.CodeDenied, airlock.ReasonUnknownTenant, "unknown tenant %q", tenant)
	}
	p := t.Profile
	return GuestProfile{Name: p.Name, Capabilities: p.Capabilities(), Memory: p.Memory, Deadline: p.Deadline}, nil
}

// GuestCall is one step of a WebAssembly guest under the gate: loading a
// module, one run, one request to a served guest. It is one decision: End
// records it.
type GuestCall struct{ call *gate.Call }

// ID returns the call's decision id.
func (c *GuestCall) ID() string { return c.call.ID }

// Context is the context the step runs under: it is cancelled when the
// principal is revoked (context.Cause is then a revoked error) or the
// engine shuts down, and End then reports that cause.
func (c *GuestCall) Context() context.Context { return c.call.Ctx }

// End records the call's decision, with err's code and reason (nil: ok),
// and returns err in the public shape carrying the decision id. Call it
// exactly once.
func (c *GuestCall) End(err error) error { return c.call.End(err, 0, 0) }

// BeginGuest runs the gate's cadence for one step of a guest (broker
// "guest" for loading and running a module, "serve" for a request to a
// served guest; no capability): the principal is known, not revoked and
// within its tenant's rate. A refusal is recorded and returned as an
// *airlock.Error (revoked, rate_limited, denied); otherwise the caller does
// the step under the call's Context and Ends it, so that a link-time
// refusal, a deadline or a memory cap is audited like any broker call.
func (e *Engine) BeginGuest(ctx context.Context, p airlock.Principal, broker, target string) (*GuestCall, error) {
	call, err := e.begin(ctx, p, "", broker, target)
	if err != nil {
		return nil, err
	}
	return &GuestCall{call: call}, nil
}
