package engine

import (
	"fmt"
	"net/http"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/egress"
	"github.com/airlockhq/airlock/internal/crawl"
	"github.com/airlockhq/airlock/internal/gate"
)

// Robots values of an IdentityConfig.
const (
	RobotsObey   = "obey"
	RobotsIgnore = "ignore"
)

// IdentityConfig is how one initiator's requests are made
// (tenants.<t>.identities.<initiator>).
type IdentityConfig struct {
	// Identity is airlock (Airlock's own User-Agent over the go TLS
	// profile) or chrome (desktop Chrome's ClientHello and headers);
	// "": airlock for model, chrome for person.
	Identity string `koanf:"identity" json:"identity"`
	// Robots is obey (a single fetch honours the site's robots.txt) or
	// ignore; "": obey for model, ignore for person. Crawls obey
	// robots.txt whatever this says, unless allow_ignore_robots.
	Robots string `koanf:"robots" json:"robots"`
}

// tenantInitiators compiles a tenant's initiators and their identities.
func tenantInitiators(name string, tc TenantConfig) (map[string]gate.Initiator, error) {
	allowed := tc.Initiators
	if len(allowed) == 0 {
		allowed = []string{airlock.InitiatorModel}
		if name == airlock.LocalTenant {
			allowed = append(allowed, airlock.InitiatorPerson)
		}
	}
	for i, a := range allowed {
		if !gate.KnownInitiator(a) {
			return nil, configErr("tenants.%s.initiators[%d] %q: want %s or %s", name, i, a, airlock.InitiatorModel, airlock.InitiatorPerson)
		}
	}
	for k := range tc.Identities {
		if !gate.KnownInitiator(k) {
			return nil, configErr("tenants.%s.identities.%s: want the initiator %s or %s", name, k, airlock.InitiatorModel, airlock.InitiatorPerson)
		}
	}
	all := gate.DefaultInitiators()
	for a, ini := range all {
		ic := tc.Identities[a]
		id, err := gate.ParseIdentity(ic.Identity, ini.Identity)
		if err != nil {
			return nil, configErr("tenants.%s.identities.%s.identity: %v", name, a, err)
		}
		ini.Identity = id
		switch ic.Robots {
		case "":
		case RobotsObey:
			ini.Robots = true
		case RobotsIgnore:
			ini.Robots = false
		default:
			return nil, configErr("tenants.%s.identities.%s.robots %q: want %s or %s", name, a, ic.Robots, RobotsObey, RobotsIgnore)
		}
		all[a] = ini
	}
	out := map[string]gate.Initiator{}
	for _, a := range allowed {
		out[a] = all[a]
	}
	return out, nil
}

// initiator decides the initiator a request of call claims (the tenant
// may claim it, or denied) and notes it in the call's audit record.
func (e *Engine) initiator(call *gate.Call, name string) (gate.Initiator, error) {
	switch {
	case name == "":
		call.Note = "initiator=" + airlock.InitiatorModel
	case gate.KnownInitiator(name):
		call.Note = "initiator=" + name
	default:
		call.Note = fmt.Sprintf("initiator=%.40q", name)
	}
	return call.Tenant.Initiator(name)
}

// identify gives a fetch's doer and request the initiator's identity: the
// airlock identity sends Airlock's own User-Agent, over the go TLS
// profile unless the request names one; chrome is the doer's default.
func identify(ini gate.Initiator, d *countingDoer, req *airlock.FetchRequest) {
	if ini.Identity != gate.IdentityAirlock {
		return
	}
	d.header = http.Header{"User-Agent": {crawlerUserAgent()}}
	d.profile = egress.ProfileGo
	if req.TLSProfile == "" {
		req.TLSProfile = string(egress.ProfileGo)
	}
}

// checkRobots refuses (denied, reason robots) a single fetch that the
// site's robots.txt disallows, when the initiator honours robots.txt. The
// robots.txt request goes through d (the call's guarded doer, with the
// initiator's identity); verdicts are cached per tenant and origin.
func (e *Engine) checkRobots(call *gate.Call, ini gate.Initiator, d *countingDoer, req airlock.FetchRequest) error {
	if !ini.Robots {
		return nil
	}
	// A robots.txt the policy refuses is not a decision of its own: the
	// fetch that follows is refused with the policy's reason.
	sub := *call
	sub.Batch = false
	cd := *d.callDoer
	cd.call = &sub
	rd := &countingDoer{callDoer: &cd}
	err := crawl.CheckRobots(call.Ctx, rd, e.robots, crawl.RobotsCheck{Target: req.URL, Partition: call.Tenant.Name,
		TLSProfile: req.TLSProfile, Proxy: d.proxy, Narrow: req.Narrow})
	d.in.Add(rd.in.Load())
	return err
}
