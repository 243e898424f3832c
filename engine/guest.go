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
		return GuestProfile{}, airlock.Errorf(airlock.CodeDenied, gate.ReasonUnknownTenant, "unknown tenant %q", tenant)
	}
	p := t.Profile
	return GuestProfile{Name: p.Name, Capabilities: p.Capabilities(), Memory: p.Memory, Deadline: p.Deadline}, nil
}

// Admit runs the gate's cadence for one inbound request to a served guest
// (broker "serve", no capability): the principal is known, not revoked and
// within its tenant's rate. It records one decision and returns its id; a
// refusal is an *airlock.Error (revoked, rate_limited, denied).
func (e *Engine) Admit(ctx context.Context, p airlock.Principal, target string) (string, error) {
	call, err := e.begin(ctx, p, "", "serve", target)
	if err != nil {
		return "", err
	}
	return call.ID, call.End(nil, 0, 0)
}
