package gate

import (
	"fmt"
	"sort"
	"strings"

	"github.com/airlockhq/airlock"
)

// Identities a tenant maps an initiator to: what the engine sends when it
// fetches on the initiator's behalf.
const (
	// IdentityAirlock is Airlock's own User-Agent (product token
	// "airlock", the one robots.txt groups address) over the go TLS
	// profile: an agent that says what it is.
	IdentityAirlock = "airlock"
	// IdentityChrome is desktop Chrome's ClientHello and navigation
	// headers (the chrome TLS profile): what a person's browser sends.
	IdentityChrome = "chrome"
)

// Initiator is how a tenant's requests of one initiator are made.
type Initiator struct {
	Name     string // airlock.InitiatorModel or airlock.InitiatorPerson
	Identity string // IdentityAirlock or IdentityChrome
	// Robots: a single fetch honours robots.txt (crawls always do, unless
	// the tenant allows ignore_robots and the crawl asks).
	Robots bool
}

// Audit is the initiator as the call's audit record says it.
func (i Initiator) Audit() string { return "initiator=" + i.Name }

// DefaultInitiators are the initiators' defaults: a model is Airlock and
// honours robots.txt, as the reference MCP fetch server does; a person
// is a browser and fetches what they asked for.
func DefaultInitiators() map[string]Initiator {
	return map[string]Initiator{
		airlock.InitiatorModel:  {Name: airlock.InitiatorModel, Identity: IdentityAirlock, Robots: true},
		airlock.InitiatorPerson: {Name: airlock.InitiatorPerson, Identity: IdentityChrome, Robots: false},
	}
}

// KnownInitiator reports whether name is an initiator.
func KnownInitiator(name string) bool {
	return name == airlock.InitiatorModel || name == airlock.InitiatorPerson
}

// Initiator decides the initiator a request claims ("" is model): invalid
// (reason initiator) when it is none of model and person, denied when the
// tenant may not claim it, so that no caller lifts robots.txt by saying
// it is a person. A tenant compiled without initiators (a Go program
// building its own gate) may claim model only.
func (t *Tenant) Initiator(name string) (Initiator, error) {
	if name == "" {
		name = airlock.InitiatorModel
	}
	if !KnownInitiator(name) {
		return Initiator{}, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonInitiator, "initiator %q: want %s or %s", name, airlock.InitiatorModel, airlock.InitiatorPerson)
	}
	i, ok := t.Initiators[name]
	if !ok && name == airlock.InitiatorModel && len(t.Initiators) == 0 {
		i, ok = DefaultInitiators()[name], true
	}
	if !ok {
		return Initiator{}, airlock.Errorf(airlock.CodeDenied, airlock.ReasonInitiator,
			"tenant %s may not make requests as initiator %s (tenants.%s.initiators: %s)", t.Name, name, t.Name, t.initiatorList())
	}
	return i, nil
}

func (t *Tenant) initiatorList() string {
	names := make([]string, 0, len(t.Initiators))
	for n := range t.Initiators {
		names = append(names, n)
	}
	if len(names) == 0 {
		names = append(names, airlock.InitiatorModel)
	}
	sort.Strings(names)
	return "[" + strings.Join(names, ", ") + "]"
}

// ParseIdentity checks an identity name ("" is def).
func ParseIdentity(name, def string) (string, error) {
	switch name {
	case "":
		return def, nil
	case IdentityAirlock, IdentityChrome:
		return name, nil
	}
	return "", fmt.Errorf("identity %q: want %s or %s", name, IdentityAirlock, IdentityChrome)
}
