package browser

import "time"

// Event types, the Type of an Event.
const (
	// EventOp is a BrowserEvent: one op (or interact sub-action) completed,
	// successfully or not.
	EventOp = "browser_event"
	// EventPolicyDenied is a BrowserPolicyDenied: one request refused by
	// layer 1 (scheme, origin lists, default action, the egress floor, the
	// redirect cap, an unanswered ask).
	EventPolicyDenied = "browser_policy_denied"
	// EventApprovalRequired: a request is paused under default_action ask
	// until Approve/Deny or the ask timeout (which denies).
	EventApprovalRequired = "browser_approval_required"
	// EventCrashed: the browser process died without Close.
	EventCrashed = "browser_crashed"
)

// Event is what a Session reports to Options.OnEvent: completed ops,
// refused requests, approvals asked for, crashes. Only the fields of its
// Type are set.
type Event struct {
	Type string    `json:"type"`
	Time time.Time `json:"time"`
	Tab  string    `json:"tab,omitempty"` // the tab (target) concerned

	// EventOp: the op kind, the page URL after it, a one-line summary, and
	// the error's code and reason when it failed.
	Op      string `json:"op,omitempty"`
	URL     string `json:"url,omitempty"`
	Summary string `json:"summary,omitempty"`
	Code    string `json:"code,omitempty"`

	// EventPolicyDenied / EventApprovalRequired: the request's resource
	// type (Document, Image, Fetch, XHR, Script, WebSocket, ...), the op
	// that was running when it was made ("" when none), the refusal's
	// reason and message.
	ResourceType string `json:"resource_type,omitempty"`
	InitiatingOp string `json:"initiating_op,omitempty"`
	Reason       string `json:"reason,omitempty"`
	Message      string `json:"message,omitempty"`

	// EventApprovalRequired: the id to pass to Session.Approve / Deny.
	ApprovalID string `json:"approval_id,omitempty"`
}

// emit hands ev to Options.OnEvent, stamping its time. OnEvent runs on the
// session's goroutines and must not block for long.
func (s *Session) emit(ev Event) {
	if s.opts.OnEvent == nil {
		return
	}
	if ev.Time.IsZero() {
		ev.Time = time.Now()
	}
	s.opts.OnEvent(ev)
}
