package engine

import (
	"fmt"

	"github.com/airlockhq/airlock"
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
