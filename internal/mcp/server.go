// Package mcp is Airlock's Model Context Protocol surface: the web tools
// (web_fetch, web_search, web_crawl) an agent calls, served over stdio
// (`airlock mcp`) and over streamable HTTP (`/mcp` on `airlock serve`),
// built on the official Go SDK.
//
// Like every surface it translates and holds no policy: each tool call is
// one engine call for the principal of the connection, and whatever the
// engine refuses comes back as a tool error (IsError) carrying the public
// code, reason, message and decision id, never as a protocol failure.
//
//	s := mcp.NewServer(en, func(context.Context) airlock.Principal { return en.Principal() }, mcp.Options{})
//	err := s.Run(ctx, &sdkmcp.StdioTransport{})
//
// Tools come in toolsets, each needing one capability: a server lists only
// the toolsets its principal's profile grants (Options.Grants), so an agent
// is never offered a tool that would always be refused.
package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	sdkmcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/engine"
)

// ServerName is the implementation name the server reports at
// initialization.
const ServerName = "airlock"

// instructions tell the agent, at initialization, how the tools behave.
const instructions = `Airlock reaches the web for you under an egress policy: web_fetch reads one page, web_search searches, web_crawl reads a site or a list of URLs. Long pages come in parts: when a web_fetch reply ends with "<content truncated: ...>", call web_fetch again with the start_index it names. A refused target (private address, deny list, robots.txt) is an error result with a code and a reason; do not retry it unchanged.`

// Options configures the servers this package builds. The zero Options is
// usable.
type Options struct {
	// Version is the version reported at initialization; "" reports "dev".
	Version string
	// Logger receives internal errors with their detail (their public
	// message is generic) and the SDK's own log; nil discards.
	Logger *slog.Logger
	// Grants says which capabilities the server's principal has; only the
	// toolsets whose capability it grants are listed. nil grants all
	// (ServeStdio and HTTPHandler set it from the principal's profile).
	Grants func(airlock.Capability) bool

	http bool // served over streamable HTTP (HTTPHandler), not stdio
}

func (o Options) grants(c airlock.Capability) bool { return o.Grants == nil || o.Grants(c) }

func (o Options) logger() *slog.Logger {
	if o.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return o.Logger
}

// state is what the tool handlers of one server need; NewServer's
// middleware puts it in the context of every request.
type state struct {
	en        *engine.Engine
	principal func(context.Context) airlock.Principal
	logger    *slog.Logger

	mu        sync.Mutex
	browsers  map[string]string          // principal + MCP session → browser session id
	approvers map[string]*elicitApprover // browser session id → its client's elicitation
	parked    map[string]*parkedOp       // RequestState → a browser op waiting for its client's answer
	http      bool                       // Options.http
}

type stateKey struct{}

// sessionKey carries the MCP session id in a request's context.
type sessionKey struct{}

// toolset is a group of tools that all need one capability.
type toolset struct {
	capability airlock.Capability
	add        func(s *sdkmcp.Server)
}

// toolsets are every tool this package serves, by the capability each
// needs.
var toolsets = []toolset{
	{airlock.CapabilityBrowse, addBrowseTools},
	{airlock.CapabilityBrowser, addBrowserTools},
	{airlock.CapabilityBrowser, addBrowserOpTools},
	{airlock.CapabilityBrowser, addBrowserRefTools},
}

// NewServer builds the MCP server whose tools call en on behalf of the
// principal that principal(ctx) returns. principal is called once per tool
// call, with the context of the request (for the HTTP transport it holds
// the authenticated principal). The server can serve many sessions at once.
func NewServer(en *engine.Engine, principal func(context.Context) airlock.Principal, opts Options) *sdkmcp.Server {
	version := opts.Version
	if version == "" {
		version = "dev"
	}
	st := &state{en: en, principal: principal, logger: opts.logger(), browsers: map[string]string{},
		approvers: map[string]*elicitApprover{}, parked: map[string]*parkedOp{}, http: opts.http}
	s := sdkmcp.NewServer(&sdkmcp.Implementation{Name: ServerName, Title: "Airlock", Version: version},
		&sdkmcp.ServerOptions{Instructions: instructions, Logger: sdkLogger(st.logger), Capabilities: &sdkmcp.ServerCapabilities{}})
	s.AddReceivingMiddleware(func(next sdkmcp.MethodHandler) sdkmcp.MethodHandler {
		return func(ctx context.Context, method string, req sdkmcp.Request) (sdkmcp.Result, error) {
			ctx = withRequest(context.WithValue(ctx, stateKey{}, st), req)
			if req != nil && req.GetSession() != nil {
				ctx = context.WithValue(ctx, sessionKey{}, req.GetSession().ID())
			}
			return next(ctx, method, req)
		}
	})
	for _, ts := range toolsets {
		if opts.grants(ts.capability) {
			ts.add(s)
		}
	}
	return s
}

// Handler is the work of one tool for principal p with the decoded input
// in. Its result is sent as is; an error becomes a tool error (IsError)
// with the error's public code, reason, message and decision id.
type Handler[In any] func(ctx context.Context, en *engine.Engine, p airlock.Principal, in In) (*sdkmcp.CallToolResult, error)

// AddTool adds the tool t to s, a server built by NewServer. The input
// schema is inferred from In (property descriptions from jsonschema struct
// tags) unless t.InputSchema is set. Input that does not match the schema
// is an invalid tool error whose message is a sentence (decodeArgs), and
// errors h returns are tool errors; a panic in h is an internal tool
// error, logged with its stack. On a server not built by NewServer the
// tool answers every call with an internal error.
func AddTool[In any](s *sdkmcp.Server, t *sdkmcp.Tool, h Handler[In]) {
	tt := *t
	if tt.InputSchema == nil {
		tt.InputSchema = schema[In](func(map[string]*jsonschema.Schema) {})
	}
	sch, ok := tt.InputSchema.(*jsonschema.Schema)
	if !ok {
		panic(fmt.Sprintf("mcp: tool %s: input schema %T, want *jsonschema.Schema", t.Name, tt.InputSchema))
	}
	resolved, err := sch.Resolve(nil)
	if err != nil {
		panic(fmt.Sprintf("mcp: tool %s: input schema: %v", t.Name, err))
	}
	s.AddTool(&tt, func(ctx context.Context, req *sdkmcp.CallToolRequest) (res *sdkmcp.CallToolResult, _ error) {
		st, _ := ctx.Value(stateKey{}).(*state)
		if st == nil {
			return toolError(nil, errors.New("mcp: tool called on a server not built by NewServer")), nil
		}
		defer func() {
			if v := recover(); v != nil {
				res = toolError(st.logger, fmt.Errorf("tool %s: panic: %v\n%s", t.Name, v, debug.Stack()))
			}
		}()
		var in In
		var raw json.RawMessage
		if req.Params != nil {
			raw = req.Params.Arguments
		}
		if err := decodeArgs(t.Name, sch, resolved, raw, &in); err != nil {
			return toolError(st.logger, err), nil
		}
		p := st.principal(ctx)
		if !p.Valid() {
			return toolError(st.logger, airlock.Errorf(airlock.CodeDenied, airlock.ReasonPrincipal, "no principal for this connection")), nil
		}
		res, err := h(ctx, st.en, p, in)
		if ir, ok := err.(*inputRequired); ok {
			return ir.res, nil
		}
		if err != nil {
			return toolError(st.logger, err), nil
		}
		if res == nil {
			res = &sdkmcp.CallToolResult{}
		}
		if res.Content == nil {
			res.Content = []sdkmcp.Content{}
		}
		return res, nil
	})
}

// Text returns a result holding one text content.
func Text(s string) *sdkmcp.CallToolResult {
	return &sdkmcp.CallToolResult{Content: []sdkmcp.Content{&sdkmcp.TextContent{Text: s}}}
}

// hints tell an agent what to do about an error of a code.
var hints = map[airlock.Code]string{
	airlock.CodeDenied:      "Refused by Airlock's policy: retrying the same target will fail again.",
	airlock.CodeRevoked:     "Access has been revoked: every call will fail until an operator restores it.",
	airlock.CodeRateLimited: "Too many calls: wait, then retry.",
	airlock.CodeTimeout:     "No answer in time: retrying later may work.",
}

// reasonHints replace the hint of a code for a reason that says more.
var reasonHints = map[airlock.Reason]string{
	airlock.ReasonRobots: "The site's robots.txt does not allow automated fetching of this page: tell the user, who can open it themselves; retrying will fail again.",
}

// sdkLogger passes on the SDK's warnings and errors only: its info records
// (a line per session) are noise in an operator's log.
func sdkLogger(l *slog.Logger) *slog.Logger {
	return slog.New(minLevel{l.Handler(), slog.LevelWarn})
}

type minLevel struct {
	slog.Handler
	min slog.Level
}

func (m minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= m.min && m.Handler.Enabled(ctx, l)
}

func (m minLevel) WithAttrs(a []slog.Attr) slog.Handler {
	return minLevel{m.Handler.WithAttrs(a), m.min}
}
func (m minLevel) WithGroup(n string) slog.Handler { return minLevel{m.Handler.WithGroup(n), m.min} }

// toolError turns err into a tool error: the text "code (reason): message",
// a hint for the agent, the decision id, and the structured
// {"error": {...}} body. Internal errors show a generic message; their
// detail goes to logger only.
func toolError(logger *slog.Logger, err error) *sdkmcp.CallToolResult {
	pub := airlock.Public(err, "")
	if pub.Code == airlock.CodeInternal && logger != nil {
		logger.Error("mcp tool", slog.String("error", err.Error()), slog.String("decision_id", pub.DecisionID))
	}
	var b strings.Builder
	b.WriteString(string(pub.Code))
	if pub.Reason != "" {
		fmt.Fprintf(&b, " (%s)", pub.Reason)
	}
	b.WriteString(": ")
	b.WriteString(pub.Message)
	if d := airlock.RetryAfter(err); d > 0 {
		fmt.Fprintf(&b, "; retry after %s", d.Round(100*time.Millisecond))
	}
	if h := reasonHints[pub.Reason]; h != "" && pub.Code == airlock.CodeDenied {
		b.WriteString("\n" + h)
	} else if h := hints[pub.Code]; h != "" {
		b.WriteString("\n" + h)
	}
	if pub.DecisionID != "" {
		fmt.Fprintf(&b, "\ndecision_id: %s", pub.DecisionID)
	}
	res := Text(b.String())
	res.IsError = true
	res.StructuredContent = airlock.ErrorBody{Error: pub}
	return res
}

// ServeStdio serves one client over in/out as principal p until ctx is done
// or the client goes away (in reaches EOF). Every request read before EOF
// is answered before it returns, and a line that is not a JSON-RPC message
// is answered with a JSON-RPC error (-32700 for one that is not JSON) while
// the session goes on. It returns nil when ctx is done or at EOF, and the
// error of the connection otherwise. It does not close en, in or out.
func ServeStdio(ctx context.Context, en *engine.Engine, p airlock.Principal, in io.Reader, out io.Writer, opts Options) error {
	opts.Grants = func(c airlock.Capability) bool { return en.Grants(p, c) }
	s := NewServer(en, func(context.Context) airlock.Principal { return p }, opts)
	ss, err := s.Connect(ctx, &stdioTransport{in: in, out: out}, nil)
	if err != nil {
		return fmt.Errorf("mcp: connect: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- ss.Wait() }()
	select {
	case <-ctx.Done():
		ss.Close()
		<-done
		return nil
	case err := <-done:
		if err == nil || errors.Is(err, io.EOF) || errors.Is(err, io.ErrClosedPipe) {
			return nil
		}
		return fmt.Errorf("mcp: %w", err)
	}
}
