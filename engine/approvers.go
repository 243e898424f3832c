package engine

import (
	"context"
	"time"

	"github.com/airlockhq/airlock/internal/browser"
	"github.com/airlockhq/airlock/internal/gate"
)

// namedApprover is an approver channel with the name the audit log gives
// its answers.
type namedApprover struct {
	name string
	a    browser.Approver
}

// AddBrowserApprover attaches an approver channel that answers the asks
// of every browser session (the CLI's terminal prompt) until remove is
// called; name names it in the audit log ("terminal"). While one is
// attached, default_action ask waits for an answer instead of denying at
// once (no_approver). Each answer is one audited decision (broker
// browser_approval) in the session tenant's log.
func (e *Engine) AddBrowserApprover(name string, a BrowserApprover) (remove func()) {
	m := e.browser
	m.apMu.Lock()
	defer m.apMu.Unlock()
	if m.channels == nil {
		m.channels = map[int]namedApprover{}
	}
	m.apSeq++
	id := m.apSeq
	m.channels[id] = namedApprover{name: name, a: a}
	return func() {
		m.apMu.Lock()
		delete(m.channels, id)
		m.apMu.Unlock()
	}
}

// sessionApprovers is a session's Options.Approvers: its own approver and
// the engine's, each telling the request whose session asks and auditing
// its answer.
func (m *browserManager) sessionApprovers(bs *browserSession) []browser.Approver {
	m.apMu.Lock()
	all := make([]namedApprover, 0, len(m.channels)+1)
	for _, c := range m.channels {
		all = append(all, c)
	}
	m.apMu.Unlock()
	if bs.approver.a != nil {
		all = append(all, bs.approver)
	}
	out := make([]browser.Approver, 0, len(all))
	for _, c := range all {
		out = append(out, browser.ApproverFunc(func(ctx context.Context, req browser.ApprovalRequest) (bool, error) {
			req.Session, req.Tenant = bs.id, bs.principal.Tenant
			ok, err := c.a.Ask(ctx, req)
			if err != nil || ctx.Err() != nil {
				return ok, err
			}
			verb := "denied"
			if ok {
				verb = "approved"
			}
			m.e.audit.Record(gate.Record{ID: m.e.gate.NewID(), Time: time.Now(), Tenant: bs.principal.Tenant,
				Instance: bs.principal.Instance, Broker: "browser_approval", Outcome: gate.OutcomeAllow,
				Target: browserTarget(bs.id + " " + req.ID), Detail: verb + " by " + c.name + ": " + req.Origin})
			return ok, nil
		}))
	}
	return out
}

// BrowserApproveViaElicitation is browser.approve_via_elicitation: which
// MCP clients may answer asks through elicitation (ElicitLocal, ElicitAll
// or ElicitOff).
func (e *Engine) BrowserApproveViaElicitation() string { return e.browser.cfg.ApproveViaElicitation }
