package api

import (
	"context"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strings"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/engine"
)

// Defaults of Options.
const (
	// DefaultMaxBody is the request body limit: past it a request gets 413
	// too_large.
	DefaultMaxBody = 1 << 20
	// DefaultWriteTimeout is the time a handler has to write its response.
	DefaultWriteTimeout = 60 * time.Second
	// HeartbeatInterval is how often an idle event stream gets a comment
	// line, so that proxies and clients do not time it out.
	HeartbeatInterval = 15 * time.Second
)

// Headers of the API.
const (
	// HeaderDecision carries the decision id of the broker call a response
	// (or an error) belongs to.
	HeaderDecision = "X-Airlock-Decision"
	// HeaderInstance names the instance of the tenant a call is made for
	// (an agent, a session); it goes into the principal and the audit log.
	HeaderInstance = "X-Airlock-Instance"
)

// responseMargin is the part of a route's write deadline kept for writing
// the response: the engine call gets the rest, so that a slow call ends as
// a 504 in the error shape rather than as a cut connection.
const responseMargin = 5 * time.Second

// Options configures New. The zero Options is usable: no MCP, /metrics
// behind a token, a 1 MiB body limit and a 60 s write deadline.
type Options struct {
	// MCP is mounted at /mcp (every method) when non-nil. It authenticates
	// its own calls; this package adds only the access log, the body limit
	// and panic recovery.
	MCP http.Handler
	// PublicMetrics serves GET /metrics without a token (loopback, or when
	// configured); otherwise any tenant or admin token may read it.
	PublicMetrics bool
	// MaxBody is the request body limit in bytes; 0 means DefaultMaxBody.
	MaxBody int64
	// WriteTimeout is the write deadline of every response except event
	// streams, which extend theirs as they write; the engine call gets it
	// minus a margin. 0 means DefaultWriteTimeout. Set it above the
	// engine's fetch and crawl timeouts when synchronous crawls are long.
	WriteTimeout time.Duration
	// Logger receives the access log (method, path, status, duration,
	// tenant; never a token) and the detail of internal errors. nil
	// discards.
	Logger *slog.Logger
	// Version is shown by /healthz and in the OpenAPI document.
	Version string
	// Ready reports whether the server can take calls (/readyz); nil means
	// always ready.
	Ready func(ctx context.Context) error
	// Streams, when done, ends the event streams (a graceful shutdown
	// cancels it so that long-lived streams do not hold up the drain of
	// ordinary calls). nil: streams end only with their request.
	Streams context.Context
}

// authKind says who may call a route.
type authKind int

const (
	authNone     authKind = iota // anyone
	authTenant                   // a tenant token: the call is made for its principal
	authAny                      // a tenant or the admin token
	authAdmin                    // the admin token only
	authMetrics                  // authNone with PublicMetrics, else authAny
	authApprover                 // the admin token or a browser.approver_tokens token, never a tenant's
)

// caller is who an authenticated request is from: a tenant's principal,
// or the admin.
type caller struct {
	principal airlock.Principal
	admin     bool
	approver  string // authApprover: who answers, for the audit log ("admin", "approver sha256:...")
}

// route is one entry of the route table: New registers exactly these with
// the mux, and the OpenAPI test walks them.
type route struct {
	method, path string
	auth         authKind
	stream       bool // an event stream: no overall deadline, the handler extends it
	handle       func(w http.ResponseWriter, r *http.Request, c caller) error
}

func (rt route) pattern() string { return rt.method + " " + rt.path }

// server is the handler New returns.
type server struct {
	en      *engine.Engine
	opts    Options
	log     *slog.Logger
	mux     *http.ServeMux
	routes  []route
	openapi []byte
	// heartbeat is HeartbeatInterval; tests shorten it.
	heartbeat time.Duration
}

// New returns the HTTP API of en. The handler is safe for concurrent use;
// it does not close en. Serving it attaches an approver channel for the
// browser's asks when en has an admin or approver token
// (engine.ServeBrowserApprovals).
func New(en *engine.Engine, opts Options) http.Handler {
	return newServer(en, opts)
}

func newServer(en *engine.Engine, opts Options) *server {
	en.ServeBrowserApprovals()
	if opts.MaxBody <= 0 {
		opts.MaxBody = DefaultMaxBody
	}
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = DefaultWriteTimeout
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	s := &server{en: en, opts: opts, log: opts.Logger, mux: http.NewServeMux(), heartbeat: HeartbeatInterval}
	s.routes = []route{
		{"POST", "/api/browse", authTenant, false, s.browse},
		{"POST", "/api/crawls", authTenant, false, s.startCrawl},
		{"GET", "/api/crawls", authTenant, false, s.listCrawls},
		{"GET", "/api/crawls/{id}", authTenant, false, s.getCrawl},
		{"GET", "/api/crawls/{id}/events", authTenant, true, s.crawlEvents},
		{"DELETE", "/api/crawls/{id}", authTenant, false, s.cancelCrawl},
		{"POST", "/api/browser/sessions", authTenant, false, s.browserOpen},
		{"GET", "/api/browser/sessions", authTenant, false, s.browserSessions},
		{"DELETE", "/api/browser/sessions/{id}", authTenant, false, s.browserClose},
		{"POST", "/api/browser/sessions/{id}/ops", authTenant, false, s.browserOp},
		{"POST", "/api/browser/sessions/{id}/interact", authTenant, false, s.browserInteract},
		{"POST", "/api/browser/sessions/{id}/approvals/{approval}", authApprover, false, s.browserApproval},
		{"GET", "/api/browser/sessions/{id}/events", authTenant, true, s.browserEvents},
		{"POST", "/api/exchange/{lane}", authTenant, false, s.exchange},
		{"POST", "/api/sign", authTenant, false, s.sign},
		{"POST", "/api/routes/{name}", authTenant, false, s.callRoute},
		{"POST", "/api/http", authTenant, false, s.httpRequest},
		{"GET", "/api/audit", authAny, false, s.audit},
		{"GET", "/api/audit/stats", authAny, false, s.auditStats},
		{"POST", "/api/admin/revoke", authAdmin, false, s.revoke},
		{"POST", "/api/admin/unrevoke", authAdmin, false, s.unrevoke},
		{"GET", "/healthz", authNone, false, s.healthz},
		{"GET", "/readyz", authNone, false, s.readyz},
		{"GET", "/metrics", authMetrics, false, s.metrics},
		{"GET", "/api/openapi.json", authNone, false, s.openAPI},
	}
	for _, rt := range s.routes {
		s.mux.Handle(rt.pattern(), s.wrap(rt))
	}
	s.mountFirecrawl()
	if opts.MCP != nil {
		mcp := opts.MCP
		s.mux.Handle("/mcp", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			r.Body = http.MaxBytesReader(w, r.Body, s.opts.MaxBody)
			mcp.ServeHTTP(w, r)
		}))
	}
	s.openapi = openAPIDocument(opts.Version)
	return s
}

// ServeHTTP logs, recovers panics, and answers the requests the mux has no
// route for (404) or no method for (405) in the error shape.
func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	info := &logInfo{}
	sw := &statusWriter{ResponseWriter: w}
	r = r.WithContext(context.WithValue(r.Context(), logInfoKey{}, info))
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			s.log.Error("panic in handler", slog.String("method", r.Method), slog.String("path", r.URL.Path),
				slog.Any("panic", v), slog.String("stack", string(debug.Stack())))
			if !sw.wrote {
				writeError(sw, airlock.Errorf(airlock.CodeInternal, airlock.ReasonPanic, "panic: %v", v))
			}
		}
		attrs := []slog.Attr{
			slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.Int("status", sw.status()),
			slog.Duration("duration", time.Since(start)), slog.Int64("bytes", sw.n),
		}
		if info.tenant != "" {
			attrs = append(attrs, slog.String("tenant", info.tenant))
		}
		if info.instance != "" {
			attrs = append(attrs, slog.String("instance", info.instance))
		}
		if info.admin {
			attrs = append(attrs, slog.Bool("admin", true))
		}
		s.log.LogAttrs(r.Context(), slog.LevelInfo, "http", attrs...)
	}()
	if _, pattern := s.mux.Handler(r); pattern == "" {
		// The mux's own answers (404, 405, a redirect to the clean path):
		// 404 and 405 are rewritten into the error shape.
		s.mux.ServeHTTP(&muxErrorWriter{statusWriter: sw, path: r.URL.Path}, r)
		return
	}
	s.mux.ServeHTTP(sw, r)
}

// wrap applies a route's authentication, body limit and deadlines, and
// writes the error its handler returns.
func (s *server) wrap(rt route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		if !rt.stream {
			// Not every ResponseWriter supports deadlines (httptest's
			// recorder does not): the context deadline below still holds.
			_ = rc.SetWriteDeadline(time.Now().Add(s.opts.WriteTimeout))
			ctx, cancel := context.WithTimeout(r.Context(), s.callTimeout())
			defer cancel()
			r = r.WithContext(ctx)
		}
		r.Body = http.MaxBytesReader(w, r.Body, s.opts.MaxBody)
		c, err := s.authenticate(r, rt.auth)
		if err != nil {
			writeError(w, err)
			return
		}
		if info, ok := r.Context().Value(logInfoKey{}).(*logInfo); ok {
			info.tenant, info.instance, info.admin = c.principal.Tenant, c.principal.Instance, c.admin
		}
		if err := rt.handle(w, r, c); err != nil {
			if airlock.CodeOf(err) == airlock.CodeInternal {
				s.log.Error("internal error", slog.String("method", r.Method), slog.String("path", r.URL.Path),
					slog.String("tenant", c.principal.Tenant), slog.String("decision_id", airlock.Public(err, "").DecisionID),
					slog.String("error", err.Error()))
			}
			writeError(w, err)
		}
	})
}

// callTimeout is the engine's share of an ordinary route's write deadline.
func (s *server) callTimeout() time.Duration {
	margin := min(responseMargin, s.opts.WriteTimeout/10)
	return s.opts.WriteTimeout - margin
}

// authError is a refused credential: 401 with WWW-Authenticate, unlike the
// 403 of a policy denial.
type authError struct {
	err       *airlock.Error
	challenge string
}

func (e *authError) Error() string { return e.err.Error() }
func (e *authError) Unwrap() error { return e.err }

func unauthorized(msg, challenge string) error {
	return &authError{err: airlock.Errorf(airlock.CodeDenied, airlock.ReasonToken, "%s", msg), challenge: challenge}
}

// authenticate finds who r is from. Tokens are compared by their SHA-256
// hash: engine.Authenticate looks the hash up in a map (and the store), and
// engine.AuthenticateAdmin compares hashes with subtle.ConstantTimeCompare.
// A hash lookup leaks nothing useful through its timing: the caller
// chooses the token, not its hash, so how far two hashes agree says
// nothing about any real token.
func (s *server) authenticate(r *http.Request, kind authKind) (caller, error) {
	if kind == authMetrics {
		kind = authAny
		if s.opts.PublicMetrics {
			kind = authNone
		}
	}
	if kind == authNone {
		return caller{}, nil
	}
	token, ok := bearer(r)
	if !ok {
		return caller{}, unauthorized("an Authorization: Bearer <token> header is required", `Bearer realm="airlock"`)
	}
	ctx := r.Context()
	if kind != authTenant && s.en.AuthenticateAdmin(ctx, token) == nil {
		return caller{admin: true, approver: "admin"}, nil
	}
	p, err := s.en.Authenticate(ctx, token)
	if err != nil {
		if airlock.CodeOf(err) != airlock.CodeDenied {
			return caller{}, err // the token store is down: not the caller's fault
		}
		if kind == authApprover {
			// Only a token that is no tenant's is an approver.
			if name, err := s.en.AuthenticateApprover(token); err == nil {
				return caller{approver: name}, nil
			}
		}
		return caller{}, unauthorized("unknown token", `Bearer realm="airlock", error="invalid_token"`)
	}
	switch kind {
	case authAdmin:
		return caller{}, airlock.Errorf(airlock.CodeDenied, airlock.ReasonAdmin, "this route needs the admin token")
	case authApprover:
		// The workload holds its tenant's token: it must not answer its
		// own session's asks.
		return caller{}, airlock.Errorf(airlock.CodeDenied, airlock.ReasonApprover, "approvals need the admin token or a browser.approver_tokens token, not a tenant's")
	}
	if inst := r.Header.Get(HeaderInstance); inst != "" {
		pp, err := airlock.ParsePrincipal(p.Tenant + "/" + inst)
		if err != nil || pp.Instance != inst {
			return caller{}, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonPrincipal, "bad %s header %q: letters, digits, '-', '_', '.', ':' only, at most 128", HeaderInstance, inst)
		}
		p = pp
	}
	return caller{principal: p}, nil
}

// bearer returns the token of an "Authorization: Bearer <token>" header.
func bearer(r *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// logInfo is what a route tells the access log about its caller.
type logInfo struct {
	tenant, instance string
	admin            bool
}

type logInfoKey struct{}

// statusWriter records the status and size of a response for the access
// log. Unwrap lets http.ResponseController reach the connection.
type statusWriter struct {
	http.ResponseWriter
	code  int
	n     int64
	wrote bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.code, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if !w.wrote {
		w.code, w.wrote = http.StatusOK, true
	}
	n, err := w.ResponseWriter.Write(b)
	w.n += int64(n)
	return n, err
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *statusWriter) status() int {
	if !w.wrote {
		return http.StatusOK
	}
	return w.code
}

// muxErrorWriter turns the mux's plain-text 404 and 405 into the error
// shape; other answers (redirects to a cleaned path) pass through.
type muxErrorWriter struct {
	*statusWriter
	path    string
	swallow bool
}

func (w *muxErrorWriter) WriteHeader(code int) {
	var err error
	switch code {
	case http.StatusNotFound:
		err = airlock.Errorf(airlock.CodeNotFound, airlock.ReasonRoute, "no route %s", w.path)
	case http.StatusMethodNotAllowed:
		err = &statusError{err: airlock.Errorf(airlock.CodeInvalid, airlock.ReasonMethod, "method not allowed here; allowed: %s", w.Header().Get("Allow")), status: code}
	default:
		w.statusWriter.WriteHeader(code)
		return
	}
	w.swallow = true
	w.Header().Del("X-Content-Type-Options")
	writeError(w.statusWriter, err)
}

func (w *muxErrorWriter) Write(b []byte) (int, error) {
	if w.swallow {
		return len(b), nil
	}
	return w.statusWriter.Write(b)
}

// statusError overrides the status of the code table, for the one answer
// that has its own (405).
type statusError struct {
	err    *airlock.Error
	status int
}

func (e *statusError) Error() string { return e.err.Error() }
func (e *statusError) Unwrap() error { return e.err }
