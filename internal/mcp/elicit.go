package mcp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	sdkmcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/engine"
)

// requestKey carries the MCP request being served in its context: the
// client session to elicit from and notify, and the call's progress token.
type requestKey struct{}

func withRequest(ctx context.Context, req sdkmcp.Request) context.Context {
	if req == nil {
		return ctx
	}
	return context.WithValue(ctx, requestKey{}, req)
}

func requestOf(ctx context.Context) (*sdkmcp.ServerSession, sdkmcp.Request) {
	req, _ := ctx.Value(requestKey{}).(sdkmcp.Request)
	if req == nil {
		return nil, nil
	}
	ss, _ := req.GetSession().(*sdkmcp.ServerSession)
	return ss, req
}

// serverInitiatedElicitation is the first protocol version that forbids
// elicitation/create requests from the server (they travel inside a tool
// result instead, SEP-2322).
const serverInitiatedElicitation = "2026-07-28"

// canElicit reports whether ss's client declared elicitation (form mode)
// on a protocol version where the server may send elicitation/create.
func canElicit(ss *sdkmcp.ServerSession) bool {
	if ss == nil {
		return false
	}
	ip := ss.InitializeParams()
	if ip == nil || ip.Capabilities == nil || ip.Capabilities.Elicitation == nil {
		return false
	}
	if e := ip.Capabilities.Elicitation; e.Form == nil && e.URL != nil {
		return false // URL mode only
	}
	return ip.ProtocolVersion < serverInitiatedElicitation
}

// elicitOK reports whether this server may take approvals from its
// clients' elicitation (browser.approve_via_elicitation: local means
// airlock mcp over stdio only, all also /mcp on airlock serve).
func (st *state) elicitOK() bool {
	switch st.en.BrowserApproveViaElicitation() {
	case engine.ElicitAll:
		return true
	case engine.ElicitLocal:
		return !st.http
	}
	return false
}

// elicitApprover answers a browser session's asks with the person behind
// the MCP client: an elicitation/create request to the client session
// that opened the browser session. An elicitation sent while a tool call
// of that session runs travels with the call (on streamable HTTP, on the
// call's stream).
type elicitApprover struct {
	ss       *sdkmcp.ServerSession
	inResult bool // the client elicits through tool results: the call that waits asks (elicitInResult)

	mu    sync.Mutex
	calls []context.Context // the tool calls running now, newest last
}

// approvalSchema is the form an approval elicits: one required boolean.
var approvalSchema = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"allow": map[string]any{"type": "boolean", "title": "Allow",
			"description": "Allow the browser to load this origin for the rest of the session."},
	},
	"required": []any{"allow"},
}

// Ask sends the elicitation and reads the answer: accept with allow true
// approves; accept with false, decline and cancel deny. A failed request
// (the client went away, the ask ended) is no answer.
func (a *elicitApprover) Ask(ctx context.Context, req engine.BrowserApprovalRequest) (bool, error) {
	if a.inResult {
		// The answer comes with the client's retry of the call
		// (elicitInResult), through BrowserApprove.
		<-ctx.Done()
		return false, ctx.Err()
	}
	ectx := ctx
	a.mu.Lock()
	if n := len(a.calls); n > 0 {
		// The call's values (its stream), the ask's end.
		c, cancel := context.WithCancel(context.WithoutCancel(a.calls[n-1]))
		stop := context.AfterFunc(ctx, cancel)
		defer stop()
		defer cancel()
		ectx = c
	}
	a.mu.Unlock()
	msg := fmt.Sprintf("Allow the browser to open %s?\n\nThe page requests %s", req.Origin, req.URL)
	if req.InitiatingOp != "" {
		msg += " (during " + req.InitiatingOp + ")"
	}
	msg += fmt.Sprintf(".\nApproval %s, tenant %s, browser session %s. Allowing admits this origin for the rest of the session; "+
		"no answer by %s denies.", req.ID, req.Tenant, req.Session, req.Deadline.UTC().Format("15:04:05 UTC"))
	res, err := a.ss.Elicit(ectx, &sdkmcp.ElicitParams{Mode: "form", Message: msg, RequestedSchema: approvalSchema})
	if err != nil {
		return false, err
	}
	allow, _ := res.Content["allow"].(bool)
	return res.Action == "accept" && allow, nil
}

// during marks a tool call as running on a browser session: its
// elicitations travel with it, and while an approval waits the call says
// so (a progress notification when the call asked for progress, and a
// warning in the server's log). done ends it.
func (st *state) during(ctx context.Context, en *engine.Engine, p airlock.Principal, id string) (done func()) {
	st.mu.Lock()
	ap := st.approvers[id]
	st.mu.Unlock()
	if ap != nil {
		ap.mu.Lock()
		ap.calls = append(ap.calls, ctx)
		ap.mu.Unlock()
	}
	events, cancel, err := en.BrowserEvents(p, id)
	finished := make(chan struct{})
	if err == nil {
		go func() {
			defer close(finished)
			ss, req := requestOf(ctx)
			var token any
			if rp, ok := req.(interface{ GetParams() sdkmcp.Params }); ok {
				if tp, ok := rp.GetParams().(sdkmcp.RequestParams); ok {
					token = tp.GetProgressToken()
				}
			}
			n := 0
			for ev := range events {
				if ev.Type != engine.BrowserEventApprovalRequired {
					continue
				}
				st.logger.Warn("browser ask", slog.String("browser_session", id), slog.String("message", ev.Message))
				if ss != nil && token != nil {
					n++
					ss.NotifyProgress(ctx, &sdkmcp.ProgressNotificationParams{ProgressToken: token, Progress: float64(n), Message: ev.Message})
				}
			}
		}()
	} else {
		close(finished)
	}
	return func() {
		if cancel != nil {
			cancel()
		}
		<-finished
		if ap != nil {
			ap.mu.Lock()
			for i, c := range ap.calls {
				if c == ctx {
					ap.calls = append(ap.calls[:i], ap.calls[i+1:]...)
					break
				}
			}
			ap.mu.Unlock()
		}
	}
}

// sessionApprover is the approver to open a browser session with for the
// client of ctx's request, or nil when it cannot or may not answer asks.
func (st *state) sessionApprover(ctx context.Context) *elicitApprover {
	ss, _ := requestOf(ctx)
	switch {
	case !st.elicitOK():
		return nil
	case canElicit(ss):
		return &elicitApprover{ss: ss}
	case canElicitInResult(ss):
		return &elicitApprover{ss: ss, inResult: true}
	}
	return nil
}

// canElicitInResult reports whether ss's client declared elicitation
// (form) on a protocol version where elicitation travels inside the tool
// result (input required, SEP-2322) instead of a request of the server.
func canElicitInResult(ss *sdkmcp.ServerSession) bool {
	if ss == nil {
		return false
	}
	ip := ss.InitializeParams()
	if ip == nil || ip.Capabilities == nil || ip.Capabilities.Elicitation == nil || ip.ProtocolVersion < serverInitiatedElicitation {
		return false
	}
	e := ip.Capabilities.Elicitation
	return e.Form != nil || e.URL == nil
}

// inputRequired is what a tool handler returns to ask its client for
// input: AddTool sends res (InputRequests and RequestState) as the
// call's result, and the client calls again with the answers.
type inputRequired struct{ res *sdkmcp.CallToolResult }

func (*inputRequired) Error() string { return "mcp: input required" }

// parkedOp is a browser op whose call returned input required for an
// approval: it goes on running, and the client's retry (RequestState)
// answers the approval and waits for it.
type parkedOp struct {
	key      string // principal + MCP session: only they resume it
	session  string // the browser session
	approval string // the approval put to the client
	done     chan opOutcome
	events   <-chan engine.BrowserEvent
	stop     func() // ends the events subscription
}

type opOutcome struct {
	v   any
	err error
}

// parkedTTL is how long a parked op waits for its client's retry.
const parkedTTL = 2 * time.Minute

// elicitInResult runs fn, the op of a browser tool call, for a client that
// elicits through input-required results: when the op raises an ask, the
// call returns an input request ("Allow the browser to open <origin>?")
// while the op waits, and the client's retry answers the approval (accept
// with allow true approves; anything else denies) and waits for the op.
// Other clients run fn as is.
func elicitInResult[T any](ctx context.Context, st *state, en *engine.Engine, p airlock.Principal, id string, fn func(context.Context) (T, error)) (T, error) {
	var zero T
	ss, req := requestOf(ctx)
	if st == nil || !st.elicitOK() || !canElicitInResult(ss) {
		return fn(ctx)
	}
	_, key := browserKey(ctx, p)
	var po *parkedOp
	if state, answers := retryOf(req); state != "" {
		st.mu.Lock()
		po = st.parked[state]
		if po != nil && po.key == key && po.session == id {
			delete(st.parked, state)
		} else {
			po = nil
		}
		st.mu.Unlock()
		if po == nil {
			return zero, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonRequestState, "mcp: requestState names no waiting browser call of this session (expired or answered)")
		}
		allow := false
		if r, ok := answers["approval"].(*sdkmcp.ElicitResult); ok && r.Action == "accept" {
			allow, _ = r.Content["allow"].(bool)
		}
		// not_found: answered through another channel, or timed out; the
		// op's outcome says which.
		en.BrowserApprove(ctx, "mcp elicitation", id, po.approval, allow)
	} else {
		events, stop, err := en.BrowserEvents(p, id)
		if err != nil {
			return fn(ctx)
		}
		po = &parkedOp{key: key, session: id, done: make(chan opOutcome, 1), events: events, stop: stop}
		// The op outlives this call when it parks; the engine bounds it
		// with the op timeout.
		opCtx := context.WithoutCancel(ctx)
		go func() {
			v, err := fn(opCtx)
			po.done <- opOutcome{v, err}
		}()
	}
	for {
		select {
		case o := <-po.done:
			po.stop()
			v, _ := o.v.(T)
			return v, o.err
		case ev, ok := <-po.events:
			if !ok {
				po.events = nil // the session closed: the op's outcome follows
				continue
			}
			if ev.Type != engine.BrowserEventApprovalRequired {
				continue
			}
			po.approval = ev.ApprovalID
			state := "rs_" + randomToken()
			st.mu.Lock()
			st.parked[state] = po
			st.mu.Unlock()
			time.AfterFunc(parkedTTL, func() {
				st.mu.Lock()
				abandoned := st.parked[state] == po
				delete(st.parked, state)
				st.mu.Unlock()
				if abandoned {
					go func() { <-po.done; po.stop() }()
				}
			})
			origin := strings.TrimPrefix(ev.Message, "waiting for approval "+ev.ApprovalID+" of ")
			msg := fmt.Sprintf("Allow the browser to open %s?\n\nThe page requests %s", origin, ev.URL)
			if ev.InitiatingOp != "" {
				msg += " (during " + ev.InitiatingOp + ")"
			}
			msg += fmt.Sprintf(".\nApproval %s, tenant %s, browser session %s. Allowing admits this origin for the rest of the session.",
				ev.ApprovalID, p.Tenant, id)
			return zero, &inputRequired{res: &sdkmcp.CallToolResult{Content: []sdkmcp.Content{}, RequestState: state,
				InputRequests: sdkmcp.InputRequestMap{"approval": &sdkmcp.ElicitParams{Mode: "form", Message: msg, RequestedSchema: approvalSchema}}}}
		case <-ctx.Done():
			go func() { <-po.done; po.stop() }()
			return zero, airlock.Errorf(airlock.CodeTimeout, airlock.ReasonCanceled, "mcp: the call was cancelled while the browser op ran")
		}
	}
}

// retryOf returns the RequestState and InputResponses of a retried call.
func retryOf(req sdkmcp.Request) (string, sdkmcp.InputResponseMap) {
	if req == nil {
		return "", nil
	}
	switch p := req.GetParams().(type) {
	case *sdkmcp.CallToolParamsRaw:
		return p.RequestState, p.InputResponses
	case *sdkmcp.CallToolParams:
		return p.RequestState, p.InputResponses
	}
	return "", nil
}

func randomToken() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
