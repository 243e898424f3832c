package mcp

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	sdkmcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/engine"
	"github.com/airlockhq/airlock/internal/browser"
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
	ss *sdkmcp.ServerSession

	mu    sync.Mutex
	calls []context.Context // the tool calls running now, newest last
}

// ApprovalSchema is the form an approval elicits: one required boolean.
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
func (a *elicitApprover) Ask(ctx context.Context, req browser.ApprovalRequest) (bool, error) {
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
				if ev.Type != browser.EventApprovalRequired {
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
	if !st.elicitOK() || !canElicit(ss) {
		return nil
	}
	return &elicitApprover{ss: ss}
}
