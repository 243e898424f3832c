package engine

import (
	"fmt"
	"net/http"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/egress"
	"github.com/airlockhq/airlock/internal/crawl"
	"github.com/airlockhq/airlock/internal/gate"
)

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
