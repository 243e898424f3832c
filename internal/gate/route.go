package gate

import (
	"net/http"
	"strings"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/egress"
)

// RouteSpec is a credentialed route as configured: calls under BaseURL,
// with Methods (none: GET) and under PathPrefix ("": /), carry the header
// Header: ValuePrefix + Credential.
type RouteSpec struct {
	BaseURL     string
	Header      string
	ValuePrefix string
	Credential  string
	Methods     []string
	PathPrefix  string
}

// RouteError is a RouteSpec refused: Field is the spec's key
// (base_url, header, path_prefix).
type RouteError struct {
	Field string
	Err   error
}

func (e *RouteError) Error() string { return e.Field + ": " + e.Err.Error() }
func (e *RouteError) Unwrap() error { return e.Err }

// Route is a credentialed route compiled. It is immutable and safe for
// concurrent use.
type Route struct {
	name    string
	base    egress.Target
	header  string
	value   string // the header value (prefix + credential); never leaves the engine
	redact  *Redactor
	methods map[string]bool
	prefix  string
	origin  *egress.Checker
}

// NewRoute compiles spec. Errors: *RouteError.
func NewRoute(name string, spec RouteSpec) (*Route, error) {
	base, err := egress.ParseURL(spec.BaseURL)
	if err != nil {
		return nil, &RouteError{"base_url", err}
	}
	if spec.Header == "" || strings.ContainsAny(spec.Header, " :\r\n") {
		return nil, &RouteError{"header", errString("a header name is required")}
	}
	r := &Route{name: name, base: base, header: http.CanonicalHeaderKey(spec.Header), value: spec.ValuePrefix + spec.Credential,
		redact: NewRedactor(spec.Credential), methods: map[string]bool{}, prefix: spec.PathPrefix}
	if r.prefix == "" {
		r.prefix = "/"
	}
	pol := egress.DefaultPolicy()
	pol.Allow = []string{base.HostPort()}
	pol.Exceptions = []string{"0.0.0.0/0", "::/0"} // the tenant's checker keeps the floor
	if r.origin, err = pol.Compile(); err != nil {
		return nil, &RouteError{"base_url", err}
	}
	if !strings.HasPrefix(r.prefix, "/") {
		return nil, &RouteError{"path_prefix", errString("must start with /")}
	}
	methods := spec.Methods
	if len(methods) == 0 {
		methods = []string{http.MethodGet}
	}
	for _, m := range methods {
		r.methods[strings.ToUpper(m)] = true
	}
	return r, nil
}

type errString string

func (e errString) Error() string { return string(e) }

// Redactor finds the credential (alone, verbatim and percent-encoded) in
// everything the caller receives: final URL, redirects, headers, body,
// error text.
func (r *Route) Redactor() *Redactor { return r.redact }

// Origin narrows every call of the route to its base's host and port, so
// that a redirect cannot carry the credential header elsewhere (egress
// drops only Authorization and Cookie across origins).
func (r *Route) Origin() *egress.Checker { return r.origin }

// Request makes the URL and header of a call of the route: method ("":
// GET) must be one of the route's, path must stay under its prefix and
// origin, and the caller's header may neither set nor see the credential
// header, which Request adds. Errors: denied (route_method), invalid
// (route_path), and egress's refusals of the URL and headers.
func (r *Route) Request(method, path string, header map[string][]string) (string, string, http.Header, error) {
	method = strings.ToUpper(method)
	if method == "" {
		method = http.MethodGet
	}
	if !r.methods[method] {
		return "", "", nil, airlock.Errorf(airlock.CodeDenied, airlock.ReasonRouteMethod, "route %s does not allow %s", r.name, method)
	}
	u, err := r.join(path)
	if err != nil {
		return "", "", nil, err
	}
	h := http.Header{}
	for k, vs := range header {
		if http.CanonicalHeaderKey(k) == r.header {
			continue // the caller cannot set or see the credential header
		}
		h[k] = vs
	}
	if err := egress.CheckHeaders(h); err != nil {
		return "", "", nil, err
	}
	h.Set(r.header, r.value)
	return method, u, h, nil
}

func (r *Route) join(path string) (string, error) {
	bad := func(why string) error {
		return airlock.Errorf(airlock.CodeInvalid, airlock.ReasonRoutePath, "route %s: path %q %s", r.name, path, why)
	}
	if !strings.HasPrefix(path, "/") || strings.HasPrefix(path, "//") {
		return "", bad("must start with a single /")
	}
	p, _, _ := strings.Cut(path, "?")
	for _, seg := range strings.Split(p, "/") {
		if seg == ".." || seg == "." || strings.Contains(strings.ToLower(seg), "%2e") || strings.Contains(strings.ToLower(seg), "%2f") {
			return "", bad("may not contain dot segments or encoded slashes")
		}
	}
	// The prefix matches whole segments: /v1 admits /v1 and /v1/x, not /v10.
	if !strings.HasPrefix(p, r.prefix) || !strings.HasSuffix(r.prefix, "/") && len(p) > len(r.prefix) && p[len(r.prefix)] != '/' {
		return "", bad("is outside the route's path prefix " + r.prefix)
	}
	base := strings.TrimSuffix(r.base.URL.String(), "/")
	if r.base.URL.Path != "/" {
		base = strings.TrimSuffix(r.base.String(), "/")
	}
	u := base + path
	t, err := egress.ParseURL(u)
	if err != nil {
		return "", err
	}
	if t.Origin() != r.base.Origin() {
		return "", bad("leaves the route's origin")
	}
	return u, nil
}
