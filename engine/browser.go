package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/browser"
	"github.com/airlockhq/airlock/internal/browser/sessions"
	"github.com/airlockhq/airlock/internal/gate"
	"github.com/airlockhq/airlock/internal/provider/chromium"
)

// ChromiumProvider is the name of the Browse provider that renders pages
// in the engine's headless Chromium before extracting them.
const ChromiumProvider = chromium.Name

// DefaultRenderPool is how many pooled browser sessions per tenant render
// pages for the chromium provider.
const DefaultRenderPool = sessions.DefaultRenderPool

// The browser's types, as the engine's API names them.
type (
	// BrowserOp is one of the 22 ops, a tagged union {"kind":"navigate",...}.
	BrowserOp = browser.Op
	// BrowserResult is what an op returns.
	BrowserResult = browser.Result
	// BrowserEvent is one event of a session: a completed op, a refused
	// request, an approval asked for, a crash.
	BrowserEvent = browser.Event
	// BrowserApprover is a channel through which a person answers asks
	// (a terminal prompt, an MCP client's elicitation).
	BrowserApprover = browser.Approver
	// BrowserApproverFunc is a BrowserApprover made of a function.
	BrowserApproverFunc = browser.ApproverFunc
	// BrowserApprovalRequest is one pending ask as an approver sees it.
	BrowserApprovalRequest = browser.ApprovalRequest
	// BrowserPolicy is a session's origin policy (allowed_origins,
	// denied_origins, default_action deny/allow/ask), on top of the
	// tenant's egress policy and the floor, enforced in the browser and at
	// the proxy.
	BrowserPolicy = browser.Policy
)

// BrowserEventApprovalRequired is the Type of the event a session emits
// while a request waits for approval; its Message says "waiting for
// approval <id> of <origin>".
const BrowserEventApprovalRequired = browser.EventApprovalRequired

// BrowserOpenRequest opens a session.
type BrowserOpenRequest struct {
	// Profile names a persistent profile of the tenant (cookies and
	// localStorage survive Close and reopening it); "" opens an ephemeral
	// session whose profile is deleted when it closes. Names are 1 to 64
	// of [A-Za-z0-9._-], not starting with a dot.
	Profile string `json:"profile,omitempty"`
	// Narrow narrows the tenant's egress policy for this session only.
	Narrow *airlock.Narrowing `json:"narrow,omitempty"`
	// Policy is the session's origin policy; nil means browser.policy of
	// the configuration.
	Policy *BrowserPolicy `json:"policy,omitempty"`
	// Approver, if set, answers this session's asks besides the engine's
	// approvers (AddBrowserApprover) and the API; ApproverName names it in
	// the audit log. Only a channel the workload does not hold qualifies:
	// the MCP surface sets the client's elicitation here.
	Approver     BrowserApprover `json:"-"`
	ApproverName string          `json:"-"`
}

// BrowserSessionInfo describes an open session.
type BrowserSessionInfo struct {
	ID        string    `json:"id"`
	Tenant    string    `json:"tenant"`
	Profile   string    `json:"profile,omitempty"` // "" for an ephemeral session
	Created   time.Time `json:"created"`
	LastUsed  time.Time `json:"last_used"`
	Crashed   bool      `json:"crashed,omitempty"`
	Ephemeral bool      `json:"ephemeral"`
	// FilesDir is the session's confined directory for uploads,
	// downloads and screenshots.
	FilesDir string `json:"files_dir,omitempty"`
}

// BrowserOpen opens a browser session for the principal (capability
// browser). Its Chromium sends every request through a forward proxy on
// the tenant's egress policy with credentials of this session alone, and
// every request is also decided in the browser (layer 1).
//
// Errors: denied (capability), invalid (a bad profile name or narrowing),
// rate_limited (the tenant's session limit), unavailable (browser_missing,
// browser_launch, or the profile is open in another session), revoked.
func (e *Engine) BrowserOpen(ctx context.Context, p airlock.Principal, req BrowserOpenRequest) (BrowserSessionInfo, error) {
	call, err := e.begin(ctx, p, airlock.CapabilityBrowser, "browser", "open "+req.Profile)
	if err != nil {
		return BrowserSessionInfo{}, err
	}
	if err := call.Tenant.Limits.Check(req, ""); err != nil {
		return BrowserSessionInfo{}, call.End(err, 0, 0)
	}
	info, err := e.browser.Open(call.Ctx, p, sessions.OpenRequest{Profile: req.Profile, Narrow: req.Narrow, Policy: req.Policy,
		Approver: req.Approver, ApproverName: req.ApproverName})
	if err != nil {
		return BrowserSessionInfo{}, call.End(err, 0, 0)
	}
	return sessionInfo(info), call.End(nil, 0, 0)
}

func sessionInfo(i sessions.Info) BrowserSessionInfo {
	return BrowserSessionInfo{ID: i.ID, Tenant: i.Tenant, Profile: i.Profile, Created: i.Created, LastUsed: i.LastUsed,
		Crashed: i.Crashed, Ephemeral: i.Ephemeral, FilesDir: i.FilesDir}
}

// BrowserSessions lists the open sessions of the principal's tenant,
// oldest first.
func (e *Engine) BrowserSessions(p airlock.Principal) []BrowserSessionInfo {
	var out []BrowserSessionInfo
	for _, i := range e.browser.List(p) {
		out = append(out, sessionInfo(i))
	}
	return out
}

// BrowserDo runs one op in a session (capability browser). Each op is one
// audited decision. A session whose browser crashed is restarted first
// (the crash is reported as an event), with its profile.
func (e *Engine) BrowserDo(ctx context.Context, p airlock.Principal, id string, op BrowserOp) (BrowserResult, error) {
	if err := op.Validate(); err != nil {
		return BrowserResult{}, err
	}
	target := op.Kind
	if op.URL != "" {
		target += " " + sessions.AuditTarget(op.URL)
	}
	var res BrowserResult
	check := func(l *gate.Limits) error { return l.Check(op, "") }
	err := e.browserCall(ctx, p, id, target, check, func(ctx context.Context, s *browser.Session) error {
		var err error
		res, err = s.Do(ctx, op)
		return err
	})
	return res, err
}

// The interact types, as the engine's API names them.
type (
	// BrowserAction is one interact step, tagged by "action".
	BrowserAction = browser.Action
	// BrowserInteractResult is what an interact sequence returns.
	BrowserInteractResult = browser.InteractResult
)

// ParseBrowserOp decodes one op strictly (browser.ParseOp). Errors:
// invalid (browser_op).
func ParseBrowserOp(data []byte) (BrowserOp, error) { return browser.ParseOp(data) }

// ParseBrowserAction decodes one interact step strictly. Errors: invalid
// (browser_action).
func ParseBrowserAction(data []byte) (BrowserAction, error) { return browser.ParseAction(data) }

// BrowserInteract runs an interact sequence in a session as one gated,
// audited call (capability browser), within a budget that scales with the
// number of steps (browser.InteractBudget) instead of the op timeout. The
// steps' failures are in the result; the error is the sequence's own
// (invalid actions, no session, a crash that could not be restarted).
func (e *Engine) BrowserInteract(ctx context.Context, p airlock.Principal, id string, actions []BrowserAction, stopOnError bool) (BrowserInteractResult, error) {
	res := BrowserInteractResult{Results: []browser.ActionResult{}}
	if err := sessions.ValidateActions(actions); err != nil {
		return res, err
	}
	check := func(l *gate.Limits) error { return sessions.CheckActions(l, actions) }
	cctx, cancel := context.WithTimeout(ctx, sessions.InteractTimeout(actions))
	defer cancel()
	err := e.browserCall(cctx, p, id, fmt.Sprintf("interact %d actions", len(actions)), check, func(ctx context.Context, s *browser.Session) error {
		var err error
		res, err = s.Interact(ctx, actions, stopOnError)
		return err
	})
	return res, err
}

// BrowserApprove answers an approval asked under default_action ask:
// approve lets the waiting requests go on and admits their origin for the
// rest of the session; otherwise they are refused. approver names who
// answers (the admin, or an approver token): an approval comes from a
// channel the workload does not hold, so there is no principal here and
// no tenant's token may call this (the API refuses them). It never waits
// for the session's op: the op that raised the ask is usually still
// running. Each answer is one audited decision (broker browser_approval)
// in the session tenant's log.
//
// Errors: not_found (no_session; approval when nothing waits on that id),
// unavailable (session_elsewhere: the session runs on another replica).
func (e *Engine) BrowserApprove(ctx context.Context, approver, id, approvalID string, approve bool) error {
	return e.browser.Approve(ctx, approver, id, approvalID, approve)
}

// ServeBrowserApprovals tells the engine that an approver channel is
// attached: the API serves the approvals route, and an admin token or
// browser.approver_tokens is configured to call it. Without one, nor an
// approver (AddBrowserApprover, BrowserOpenRequest.Approver), default_action
// ask denies at once, naming what allows the origin. It reports whether
// asks can be answered on the API.
func (e *Engine) ServeBrowserApprovals() bool {
	ok := len(e.cfg.AdminTokens) > 0 || len(e.cfg.Browser.ApproverTokens) > 0
	if ok {
		e.browser.EnableAPIApprovals()
	}
	return ok
}

// AddBrowserApprover attaches an approver channel that answers the asks
// of every browser session (the CLI's terminal prompt) until remove is
// called; name names it in the audit log ("terminal"). While one is
// attached, default_action ask waits for an answer instead of denying at
// once (no_approver). Each answer is one audited decision (broker
// browser_approval) in the session tenant's log.
func (e *Engine) AddBrowserApprover(name string, a BrowserApprover) (remove func()) {
	return e.browser.AddApprover(name, a)
}

// BrowserApproveViaElicitation is browser.approve_via_elicitation: which
// MCP clients may answer asks through elicitation (ElicitLocal, ElicitAll
// or ElicitOff).
func (e *Engine) BrowserApproveViaElicitation() string {
	return e.cfg.Browser.WithDefaults().ApproveViaElicitation
}

// browserCall runs fn on a session as one gated, audited call with the
// op timeout, after check (nil: none) passed the tenant's ceilings.
func (e *Engine) browserCall(ctx context.Context, p airlock.Principal, id, target string, check func(*gate.Limits) error, fn func(context.Context, *browser.Session) error) error {
	bs, err := e.browser.Get(p, id)
	if err != nil {
		return err
	}
	call, err := e.begin(ctx, p, airlock.CapabilityBrowser, "browser", id+" "+target)
	if err != nil {
		return err
	}
	if check != nil {
		if err := check(call.Tenant.Limits); err != nil {
			return call.End(err, 0, 0)
		}
	}
	return call.End(e.browser.Run(call.Ctx, bs, fn), 0, 0)
}

// BrowserClose closes a session gracefully (its profile's cookies and
// localStorage are flushed). With wipe, or for an ephemeral session, the
// profile and the session's files are deleted.
func (e *Engine) BrowserClose(ctx context.Context, p airlock.Principal, id string, wipe bool) error {
	bs, err := e.browser.Get(p, id)
	if err != nil {
		return err
	}
	call, err := e.begin(ctx, p, airlock.CapabilityBrowser, "browser", id+" close")
	if err != nil {
		return err
	}
	return call.End(e.browser.CloseSession(call.Ctx, bs, wipe), 0, 0)
}

// BrowserEvents subscribes to a session's events until cancel is called
// or the session closes (the channel is then closed). A subscriber that
// does not keep up loses events rather than stalling the browser.
func (e *Engine) BrowserEvents(p airlock.Principal, id string) (<-chan BrowserEvent, func(), error) {
	bs, err := e.browser.Get(p, id)
	if err != nil {
		return nil, nil, err
	}
	ch, cancel := e.browser.Subscribe(bs)
	return ch, cancel, nil
}
