// Package firecrawl serves Firecrawl's v2 REST API (the one the current
// Firecrawl SDKs speak) in front of the engine facade, so that an existing
// Firecrawl client moves to Airlock by changing its base URL. It is part of
// the HTTP API surface: it translates each Firecrawl request into the
// engine's root request types and calls the same engine methods as the
// native routes, so the gate (revocation, rate limits, capabilities,
// policy, limits ceilings and audit) applies unchanged. It holds no policy.
//
// What is refused, and why, is in docs/firecrawl.md: a field Airlock
// cannot honour is an error (code invalid, reason unsupported), never
// silently ignored.
package firecrawl

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/engine"
)

// HeaderDecision carries the decision id of the broker call a response
// belongs to, as on the native routes.
const HeaderDecision = "X-Airlock-Decision"

// headerInstance names the instance of the tenant a call is made for, as
// on the native routes.
const headerInstance = "X-Airlock-Instance"

// Options configures New. The zero Options is usable.
type Options struct {
	// Logger receives the detail of internal errors; nil discards.
	Logger *slog.Logger
	// OnCaller, when set, is told the principal of each authenticated
	// request (the access log's tenant).
	OnCaller func(r *http.Request, p airlock.Principal)
}

// server is the handler New returns.
type server struct {
	en   *engine.Engine
	opts Options
	log  *slog.Logger
	mux  *http.ServeMux
	// paths has each route's path without its method, to tell a wrong
	// method (405) from no route (404); allow lists the methods of each.
	paths *http.ServeMux
	allow map[string][]string
}

// route is one Firecrawl route.
type route struct {
	method, path string
	handle       func(w http.ResponseWriter, r *http.Request, p airlock.Principal) error
}

// New returns the Firecrawl v2 API of en, to be mounted at /v2/. Every
// route needs a tenant's bearer token (the native API's). The handler is
// safe for concurrent use. The caller applies the body limit and the
// write deadline (internal/api does).
func New(en *engine.Engine, opts Options) http.Handler {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	s := &server{en: en, opts: opts, log: opts.Logger, mux: http.NewServeMux(), paths: http.NewServeMux(), allow: map[string][]string{}}
	for _, rt := range s.routes() {
		s.mux.Handle(rt.method+" "+rt.path, s.wrap(rt))
		if s.allow[rt.path] == nil {
			s.paths.Handle(rt.path, http.NotFoundHandler())
		}
		s.allow[rt.path] = append(s.allow[rt.path], rt.method)
	}
	return s
}

// routes is the route table: New registers exactly these.
func (s *server) routes() []route {
	return []route{
		{"POST", "/v2/scrape", s.scrape},
		{"POST", "/v2/map", s.mapSite},
		{"POST", "/v2/search", s.search},
		{"POST", "/v2/crawl", s.startCrawl},
		{"GET", "/v2/crawl/active", s.activeCrawls},
		{"GET", "/v2/crawl/{id}", s.crawlStatus},
		{"DELETE", "/v2/crawl/{id}", s.cancelCrawl},
		{"GET", "/v2/crawl/{id}/errors", s.crawlErrors},
		{"POST", "/v2/batch/scrape", s.startBatch},
		{"GET", "/v2/batch/scrape/{id}", s.batchStatus},
		{"DELETE", "/v2/batch/scrape/{id}", s.cancelCrawl},
	}
}

// Routes lists the patterns New serves ("METHOD /path").
func Routes() []string {
	var out []string
	for _, rt := range (*server)(nil).routes() {
		out = append(out, rt.method+" "+rt.path)
	}
	return out
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if _, pattern := s.mux.Handler(r); pattern == "" {
		if _, path := s.paths.Handler(r); path != "" {
			allow := strings.Join(s.allow[path], ", ")
			w.Header().Set("Allow", allow)
			writeError(w, &statusError{airlock.Errorf(airlock.CodeInvalid, airlock.ReasonMethod, "method %s not allowed on %s; allowed: %s", r.Method, r.URL.Path, allow), http.StatusMethodNotAllowed})
			return
		}
		writeError(w, airlock.Errorf(airlock.CodeNotFound, airlock.ReasonRoute, "no Firecrawl route %s %s: Airlock serves /v2/scrape, /v2/map, /v2/search, /v2/crawl and /v2/batch/scrape", r.Method, r.URL.Path))
		return
	}
	s.mux.ServeHTTP(w, r)
}

func (s *server) wrap(rt route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := s.authenticate(r)
		if err != nil {
			writeError(w, err)
			return
		}
		if s.opts.OnCaller != nil {
			s.opts.OnCaller(r, p)
		}
		if err := rt.handle(w, r, p); err != nil {
			if airlock.CodeOf(err) == airlock.CodeInternal {
				s.log.Error("internal error", slog.String("method", r.Method), slog.String("path", r.URL.Path),
					slog.String("tenant", p.Tenant), slog.String("error", err.Error()))
			}
			writeError(w, err)
		}
	})
}

// statusError overrides the status of the code table (405).
type statusError struct {
	err    *airlock.Error
	status int
}

func (e *statusError) Error() string { return e.err.Error() }
func (e *statusError) Unwrap() error { return e.err }

// authError is a refused credential: 401, unlike a policy denial's 403.
type authError struct{ err *airlock.Error }

func (e *authError) Error() string { return e.err.Error() }
func (e *authError) Unwrap() error { return e.err }

// authenticate finds the tenant principal of r's bearer token, as the
// native routes do (engine.Authenticate).
func (s *server) authenticate(r *http.Request) (airlock.Principal, error) {
	scheme, token, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	token = strings.TrimSpace(token)
	if !strings.EqualFold(scheme, "Bearer") || token == "" {
		return airlock.Principal{}, &authError{airlock.Errorf(airlock.CodeDenied, airlock.ReasonToken, "Unauthorized: an Authorization: Bearer <token> header is required")}
	}
	p, err := s.en.Authenticate(r.Context(), token)
	if err != nil {
		if airlock.CodeOf(err) != airlock.CodeDenied {
			return airlock.Principal{}, err // the token store is down
		}
		return airlock.Principal{}, &authError{airlock.Errorf(airlock.CodeDenied, airlock.ReasonToken, "Unauthorized: unknown token")}
	}
	if inst := r.Header.Get(headerInstance); inst != "" {
		pp, err := airlock.ParsePrincipal(p.Tenant + "/" + inst)
		if err != nil || pp.Instance != inst {
			return airlock.Principal{}, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonPrincipal, "bad %s header %q: letters, digits, '-', '_', '.', ':' only, at most 128", headerInstance, inst)
		}
		p = pp
	}
	return p, nil
}

// statusOf is this surface's table from error codes to HTTP statuses,
// Firecrawl's where they differ from the native API's: a timeout is 408
// and an upstream failure 500 (Firecrawl's SDKs retry a 502, which would
// repeat the fetch).
var statusOf = map[airlock.Code]int{
	airlock.CodeDenied:      http.StatusForbidden,
	airlock.CodeInvalid:     http.StatusBadRequest,
	airlock.CodeNotFound:    http.StatusNotFound,
	airlock.CodeRateLimited: http.StatusTooManyRequests,
	airlock.CodeRevoked:     http.StatusForbidden,
	airlock.CodeTooLarge:    http.StatusRequestEntityTooLarge,
	airlock.CodeTimeout:     http.StatusRequestTimeout,
	airlock.CodeUpstream:    http.StatusInternalServerError,
	airlock.CodeUnavailable: http.StatusServiceUnavailable,
	airlock.CodeInternal:    http.StatusInternalServerError,
}

// errorBody is Firecrawl's error shape, with Airlock's typed error (and
// its decision id) under details, where the SDKs expose it
// (SdkError.details).
type errorBody struct {
	Success bool   `json:"success"`
	Error   string `json:"error"`
	Code    string `json:"code"`
	Details struct {
		Error *airlock.Error `json:"error"`
	} `json:"details"`
}

// writeError writes err in Firecrawl's {success: false, error} shape.
func writeError(w http.ResponseWriter, err error) {
	pub := airlock.Public(err, "")
	status, ok := statusOf[pub.Code]
	if !ok {
		status = http.StatusInternalServerError
	}
	var ae *authError
	var se *statusError
	switch {
	case errors.As(err, &ae):
		status = http.StatusUnauthorized
		w.Header().Set("WWW-Authenticate", `Bearer realm="airlock"`)
	case errors.As(err, &se):
		status = se.status
	}
	if pub.Code == airlock.CodeRateLimited {
		secs := int64(1)
		if d := airlock.RetryAfter(err); d > 0 {
			secs = int64((d + time.Second - 1) / time.Second)
		}
		w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
	}
	if pub.DecisionID != "" {
		w.Header().Set(HeaderDecision, pub.DecisionID)
	} else {
		w.Header().Del(HeaderDecision)
	}
	b := errorBody{Error: pub.Message, Code: string(pub.Code)}
	b.Details.Error = &pub
	writeJSON(w, status, b)
}

// writeJSON writes v as compact JSON without HTML escaping.
func writeJSON(w http.ResponseWriter, status int, v any) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		status = http.StatusInternalServerError
		b.Reset()
		enc.Encode(errorBody{Error: "internal error", Code: string(airlock.CodeInternal)})
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(b.Len()))
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	w.Write(b.Bytes())
}

// decodeJSON reads r's body, one JSON object, into v; unknown fields are
// refused (Firecrawl's API refuses them too), so a misspelt option is an
// error rather than a silent default.
func decodeJSON(r *http.Request, v any) error {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var mbe *http.MaxBytesError
		var ae *airlock.Error
		switch {
		case errors.As(err, &mbe):
			return airlock.Errorf(airlock.CodeTooLarge, airlock.ReasonBody, "request body is larger than %d bytes", mbe.Limit)
		case errors.As(err, &ae):
			return ae
		case errors.Is(err, io.EOF):
			return airlock.Errorf(airlock.CodeInvalid, airlock.ReasonBody, "Bad Request: a JSON object is required")
		}
		return airlock.Errorf(airlock.CodeInvalid, airlock.ReasonBody, "Bad Request: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return airlock.Errorf(airlock.CodeInvalid, airlock.ReasonBody, "Bad Request: one JSON object expected")
	}
	return nil
}

func unsupported(format string, args ...any) error {
	return airlock.Errorf(airlock.CodeInvalid, airlock.ReasonUnsupported, format, args...)
}

func badRequest(format string, args ...any) error {
	return airlock.Errorf(airlock.CodeInvalid, airlock.ReasonBody, format, args...)
}

// withTimeout narrows ctx to a Firecrawl timeout in milliseconds (0: none)
// after checking it against the tenant's per-page ceiling (crawl_timeout).
func (s *server) withTimeout(ctx context.Context, p airlock.Principal, broker string, ms *int64) (context.Context, context.CancelFunc, error) {
	if ms == nil || *ms == 0 {
		return ctx, func() {}, nil
	}
	d := time.Duration(*ms) * time.Millisecond
	if *ms < 0 || *ms > int64(time.Duration(1<<62)/time.Millisecond) {
		return nil, nil, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonLimit, "timeout %d ms: want a positive number of milliseconds", *ms)
	}
	if err := s.en.CheckLimit(ctx, p, broker, engine.LimitCrawlTimeout, "timeout", int64(d)); err != nil {
		return nil, nil, err
	}
	c, cancel := context.WithTimeout(ctx, d)
	return c, cancel, nil
}

// nameOrType reads a Firecrawl option given as a name ("pdf") or as an
// object with a type ({"type": "pdf", ...}); "" when it is neither.
func nameOrType(raw json.RawMessage) string {
	var name string
	if json.Unmarshal(raw, &name) == nil {
		return name
	}
	var obj struct {
		Type string `json:"type"`
	}
	json.Unmarshal(raw, &obj)
	return obj.Type
}
