package mcp

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	sdkmcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/engine"
)

// DefaultSessionIdle closes an HTTP session after this long without a
// request from its client.
const DefaultSessionIdle = 30 * time.Minute

// requestPrincipalKey holds the principal authenticated for one HTTP
// request, for the token verifier of the SDK's bearer middleware;
// callPrincipalKey holds the principal of one tool call. They differ
// because a session's context keeps the values of the request that opened
// it.
type (
	requestPrincipalKey struct{}
	callPrincipalKey    struct{}
)

// tokenPrincipal is the TokenInfo.Extra key of the principal.
const tokenPrincipal = "airlock_principal"

// HTTPHandler is the streamable HTTP transport (mounted at /mcp by `airlock
// serve`): every request needs `Authorization: Bearer <token>` resolved by
// en.Authenticate to a tenant principal; failures are 401 with the error
// body {"error":{"code","reason","message","decision_id"}} and
// WWW-Authenticate: Bearer. Each tool call runs as the principal of the
// request that carries it; a session belongs to the tenant that opened it
// (another tenant's token gets 403 on it). Idle sessions close after
// DefaultSessionIdle.
func HTTPHandler(en *engine.Engine, opts Options) http.Handler {
	servers := &serversByGrant{en: en, opts: opts, m: map[string]*sdkmcp.Server{}}
	h := sdkmcp.NewStreamableHTTPHandler(servers.forRequest,
		&sdkmcp.StreamableHTTPOptions{Logger: opts.logger(), SessionTimeout: DefaultSessionIdle})
	verified := auth.RequireBearerToken(func(ctx context.Context, _ string, r *http.Request) (*auth.TokenInfo, error) {
		p, ok := r.Context().Value(requestPrincipalKey{}).(airlock.Principal)
		if !ok {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: p.String(), Extra: map[string]any{tokenPrincipal: p}}, nil
	}, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(h)
	logger := opts.logger()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := en.Authenticate(r.Context(), bearer(r))
		if err != nil {
			status := http.StatusUnauthorized
			switch airlock.CodeOf(err) {
			case airlock.CodeDenied, airlock.CodeRevoked:
			case airlock.CodeUnavailable:
				status = http.StatusServiceUnavailable
			default:
				status = http.StatusInternalServerError
				logger.Error("mcp authenticate", "error", err.Error())
			}
			if status == http.StatusUnauthorized {
				w.Header().Set("WWW-Authenticate", `Bearer realm="airlock"`)
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			json.NewEncoder(w).Encode(airlock.ErrorBody{Error: airlock.Public(err, "")})
			return
		}
		verified.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), requestPrincipalKey{}, p)))
	})
}

// serversByGrant holds one server per set of granted toolsets: a session is
// served by the server of the principal that opened it, so tools/list
// offers a tenant only the tools its profile can call. Sessions belong to
// their tenant (another tenant's token gets 403 on them), so the server
// chosen at a session's start stays right for all its calls.
type serversByGrant struct {
	en   *engine.Engine
	opts Options

	mu sync.Mutex
	m  map[string]*sdkmcp.Server // by the granted toolsets' capabilities
}

// forRequest is the SDK's getServer: it is called for new sessions, with
// the request whose context holds the authenticated principal.
func (sg *serversByGrant) forRequest(r *http.Request) *sdkmcp.Server {
	p, ok := r.Context().Value(requestPrincipalKey{}).(airlock.Principal)
	if !ok {
		return nil // 400: HTTPHandler authenticates before the SDK runs
	}
	var key strings.Builder
	for _, ts := range toolsets {
		if sg.en.Grants(p, ts.capability) {
			key.WriteString(string(ts.capability) + ",")
		}
	}
	sg.mu.Lock()
	defer sg.mu.Unlock()
	if s, ok := sg.m[key.String()]; ok {
		return s
	}
	opts := sg.opts
	opts.http = true
	opts.Grants = func(c airlock.Capability) bool { return sg.en.Grants(p, c) }
	s := NewServer(sg.en, func(ctx context.Context) airlock.Principal {
		p, _ := ctx.Value(callPrincipalKey{}).(airlock.Principal)
		return p
	}, opts)
	// The SDK's sessions outlive the HTTP request that opened them, so the
	// principal travels with each request's token info, not its context.
	s.AddReceivingMiddleware(func(next sdkmcp.MethodHandler) sdkmcp.MethodHandler {
		return func(ctx context.Context, method string, req sdkmcp.Request) (sdkmcp.Result, error) {
			if x := req.GetExtra(); x != nil && x.TokenInfo != nil {
				if p, ok := x.TokenInfo.Extra[tokenPrincipal].(airlock.Principal); ok {
					ctx = context.WithValue(ctx, callPrincipalKey{}, p)
				}
			}
			return next(ctx, method, req)
		}
	})
	sg.m[key.String()] = s
	return s
}

// bearer returns the token of an "Authorization: Bearer <token>" header, or
// "".
func bearer(r *http.Request) string {
	scheme, tok, ok := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(tok)
}
