package sessions

import (
	"context"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/browser"
	"github.com/airlockhq/airlock/internal/gate"
)

// namedApprover is an approver channel with the name the audit log gives
// its answers.
type namedApprover struct {
	name string
	a    browser.Approver
}

// NoApproverHint ends the refusal of an ask no one can answer.
const NoApproverHint = "allow the origin with --allow-origin ORIGIN, the session's policy.allowed_origins or browser.policy.allowed_origins, " +
	"or let a person answer asks: run at a terminal (a prompt on /dev/tty), from an MCP client that supports elicitation, " +
	"or serve the API with an admin token or browser.approver_tokens"

// noApprover is the session's Options.NoApprover: "" when someone can
// answer its asks.
func (m *Manager) noApprover() string {
	if m.approvers.Load() {
		return ""
	}
	return NoApproverHint
}

// EnableAPIApprovals says that asks can be answered through Approve (an
// approvals route is served): default_action ask then waits for an answer
// instead of denying at once.
func (m *Manager) EnableAPIApprovals() { m.approvers.Store(true) }

// AddApprover attaches an approver channel that answers the asks of every
// session until remove is called; name names it in the audit log.
func (m *Manager) AddApprover(name string, a browser.Approver) (remove func()) {
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
// the manager's, each telling the request whose session asks and auditing
// its answer.
func (m *Manager) sessionApprovers(bs *Session) []browser.Approver {
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
			m.deps.Audit(gate.Record{Time: time.Now(), Tenant: bs.principal.Tenant,
				Instance: bs.principal.Instance, Broker: "browser_approval", Outcome: gate.OutcomeAllow,
				Target: AuditTarget(bs.id + " " + req.ID), Detail: verb + " by " + c.name + ": " + req.Origin})
			return ok, nil
		}))
	}
	return out
}

// Approve answers an approval asked under default_action ask: approve
// lets the waiting requests go on and admits their origin for the rest of
// the session; otherwise they are refused. approver names who answers. It
// never waits for the session's op. Each answer is one audited decision
// (broker browser_approval) in the session tenant's log.
//
// Errors: not_found (no_session; approval when nothing waits on that id),
// unavailable (session_elsewhere, from Owners).
func (m *Manager) Approve(ctx context.Context, approver, id, approvalID string, approve bool) error {
	m.mu.Lock()
	bs := m.sessions[id]
	var s *browser.Session
	if bs != nil && !bs.pooled {
		s = bs.s
	}
	m.mu.Unlock()
	if bs == nil {
		return m.elsewhere(ctx, id)
	}
	if s == nil {
		return errNoSession(id)
	}
	verb, answer := "denied", s.Deny
	if approve {
		verb, answer = "approved", s.Approve
	}
	err := answer(approvalID)
	rec := gate.Record{Time: time.Now(), Tenant: bs.principal.Tenant, Instance: bs.principal.Instance,
		Broker: "browser_approval", Outcome: gate.OutcomeAllow, Target: AuditTarget(id + " " + approvalID),
		Detail: verb + " by " + approver}
	if err != nil {
		rec.Outcome, rec.Code, rec.Reason = gate.OutcomeError, string(airlock.CodeOf(err)), string(airlock.ReasonOf(err))
		rec.Detail = "answer by " + approver + ": " + airlock.PublicMessageOf(err)
	}
	m.deps.Audit(rec)
	return err
}
