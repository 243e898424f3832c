package browser

import (
	"context"
	"time"
)

// ApprovalRequest is one pending ask as an Approver sees it.
type ApprovalRequest struct {
	// ID names the approval (Session.Approve / Deny take it).
	ID string `json:"id"`
	// Origin is what an approval admits for the rest of the session:
	// scheme://host:port.
	Origin string `json:"origin"`
	// URL is the request that waits (more requests to Origin may wait on
	// the same approval).
	URL string `json:"url"`
	// ResourceType is the request's (Document, Image, Fetch, ...).
	ResourceType string `json:"resource_type,omitempty"`
	// InitiatingOp is the op that was running when the request was made.
	InitiatingOp string `json:"initiating_op,omitempty"`
	// Deadline is when silence denies (the ask timeout).
	Deadline time.Time `json:"deadline"`
	// Session and Tenant name whose browser asks; the Session's owner
	// sets them (Options.Approvers), the browser package does not know
	// them.
	Session string `json:"session,omitempty"`
	Tenant  string `json:"tenant,omitempty"`
}

// Approver is a channel through which a person answers asks: a terminal
// prompt, an MCP client's elicitation. It must be a channel the workload
// driving the session does not hold.
//
// Ask puts req to a person and returns the answer: true approves, false
// denies. ctx ends when the approval is answered through another channel,
// when the ask timeout passes, or when the session closes; an Ask that
// returns an error (ctx's included) gives no answer, and the other
// channels or the timeout decide. Ask is called on its own goroutine, at
// most once per approval and approver.
type Approver interface {
	Ask(ctx context.Context, req ApprovalRequest) (approve bool, err error)
}

// ApproverFunc is an Approver made of a function.
type ApproverFunc func(ctx context.Context, req ApprovalRequest) (bool, error)

// Ask calls f.
func (f ApproverFunc) Ask(ctx context.Context, req ApprovalRequest) (bool, error) { return f(ctx, req) }

// approvers returns the approvers attached now (Options.Approvers).
func (s *Session) approvers() []Approver {
	if s.opts.Approvers == nil {
		return nil
	}
	return s.opts.Approvers()
}

// dispatch puts a new approval to every attached approver, each on its own
// goroutine; the first answer resolves it (resolve1 answers once). The
// approvers' context ends with the approval, at the deadline, or with ctx
// (the session's).
func (s *Session) dispatch(ctx context.Context, a *approval, req ApprovalRequest) {
	aps := s.approvers()
	if len(aps) == 0 {
		return
	}
	actx, cancel := context.WithDeadline(ctx, req.Deadline)
	go func() {
		select {
		case <-a.done:
		case <-actx.Done():
		}
		cancel()
	}()
	for _, ap := range aps {
		go func() {
			defer func() {
				// An approver's failure is no answer, never a crash.
				if v := recover(); v != nil && s.opts.Logger != nil {
					s.opts.Logger.Error("browser approver panicked", "approval", req.ID, "panic", v)
				}
			}()
			ok, err := ap.Ask(actx, req)
			if err != nil || actx.Err() != nil {
				return
			}
			s.resolve1(a.id, ok)
		}()
	}
}

// WaitingMessage is what every surface says while an approval is pending.
func WaitingMessage(id, origin string) string { return "waiting for approval " + id + " of " + origin }
