package config

import (
	"github.com/airlockhq/airlock"
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
