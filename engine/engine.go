// Package engine is Airlock's public facade: the one place every surface
// (CLI, HTTP API, MCP, WebAssembly host) and any Go program calls to reach
// the network on a principal's behalf. Each method runs the gate's cadence
// (revoked? → rate limit → capability granted? → policy → the work under
// caps → audit) and returns the one error vocabulary: an *airlock.Error
// carrying the decision id of the call.
//
//	e, err := engine.New(engine.Config{InMemory: true})
//	if err != nil { ... }
//	defer e.Close(ctx)
//	resp, err := e.HTTP(ctx, airlock.Principal{Tenant: "local"}, airlock.HTTPRequest{URL: "https://example.com/"})
package engine

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/egress"
	"github.com/airlockhq/airlock/internal/browse"
	"github.com/airlockhq/airlock/internal/extract"
	"github.com/airlockhq/airlock/internal/fleet"
	"github.com/airlockhq/airlock/internal/gate"
	"github.com/airlockhq/airlock/internal/jobs"
	"github.com/airlockhq/airlock/internal/store"
)

// Version is the build version reported in airlock_build_info.
var Version = "dev"

// Option configures New.
type Option func(*options)

type options struct {
	logger  *slog.Logger
	getenv  func(string) string
	limiter gate.RateLimiter
}

// WithLogger sets the structured logger (one record per decision). The
// default discards.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithGetenv replaces os.Getenv for reading secrets (tests).
func WithGetenv(f func(string) string) Option { return func(o *options) { o.getenv = f } }

// Engine is a running Airlock engine. Its methods are safe for concurrent
// use. Close it to drain calls and flush the audit log.
type Engine struct {
	cfg            Config
	st             *store.SQLite
	gate           *gate.Gate
	audit          *gate.Auditor
	revs           *gate.RevocationSet
	registry       *prometheus.Registry
	routes         map[string]*route
	browse         *browse.Dispatcher
	tokens         map[string]string // config token hash → tenant
	logger         *slog.Logger
	closing        atomic.Bool
	closeMu        sync.Mutex
	closed         bool
	stopBg         chan struct{}
	bgDone         chan struct{}
	budgets        *gate.Budgets   // resource budgets (budgets.go)
	jobs           *jobs.Runner    // crawl jobs (jobs.go)
	browser        *browserManager // browser sessions (browser.go)
	fleet          *fleet.Fleet    // shared state on Redis, or nil (fleet.go)
	fleetRevs      *fleet.ReplicaRevocations
	stopWatch      context.CancelFunc
	fleetBg        sync.WaitGroup
	auditStream    *fleet.AuditStream
	replica        string // this replica's name in the fleet
	streamFailures atomic.Int64
	// state.fallback_local: fallbacks so far, and when one was last audited
	fallbacks         atomic.Int64
	lastFallbackAudit atomic.Int64
}

type route struct {
	name   string
	base   egress.Target
	header string
	value  string // the header value (prefix + credential); never leaves the engine
	// redact finds the credential (alone, verbatim and percent-encoded) in
	// everything the caller receives: final URL, redirects, headers, body,
	// error text.
	redact  *gate.Redactor
	methods map[string]bool
	prefix  string
	// origin narrows every call of the route to its base's host and port,
	// so that a redirect cannot carry the credential header elsewhere
	// (egress drops only Authorization and Cookie across origins).
	origin *egress.Checker
}

func defaults(cfg Config) Config {
	if cfg.DataDir == "" {
		cfg.DataDir = DefaultDataDir
	}
	if cfg.DefaultTenant == "" {
		cfg.DefaultTenant = airlock.LocalTenant
	}
	if cfg.Limits.TenantRate == 0 {
		cfg.Limits.TenantRate = DefaultTenantRate
	}
	if cfg.Limits.TenantBurst == 0 {
		cfg.Limits.TenantBurst = DefaultTenantBurst
	}
	if cfg.Limits.ConnectAttempts == 0 {
		cfg.Limits.ConnectAttempts = DefaultConnectAttempts
	}
	if cfg.Limits.ConnectWindow == 0 {
		cfg.Limits.ConnectWindow = DefaultConnectWindow
	}
	if cfg.Audit.BatchInterval == 0 {
		cfg.Audit.BatchInterval = DefaultAuditInterval
	}
	if cfg.Audit.QueueSize == 0 {
		cfg.Audit.QueueSize = DefaultAuditQueue
	}
	if cfg.Audit.Retention == 0 {
		cfg.Audit.Retention = DefaultAuditRetention
	}
	if cfg.Audit.MaxRows == 0 {
		cfg.Audit.MaxRows = DefaultAuditMaxRows
	}
	if len(cfg.Tenants) == 0 {
		// The person at their own terminal: every route.
		cfg.Tenants = map[string]TenantConfig{airlock.LocalTenant: {Profile: gate.ProfilePosix, Routes: []string{AllRoutes}}}
	}
	cfg.Budgets = budgetDefaults(cfg.Budgets)
	return cfg
}

func configErr(format string, args ...any) error {
	return airlock.Errorf(airlock.CodeInvalid, airlock.ReasonConfig, "config: "+format, args...)
}

// New validates cfg, opens the store and starts the engine.
func New(cfg Config, opts ...Option) (*Engine, error) {
	o := options{getenv: os.Getenv}
	for _, f := range opts {
		f(&o)
	}
	if o.logger == nil {
		o.logger = slog.New(slog.DiscardHandler)
	}
	cfg = defaults(cfg)
	if err := validate(cfg, o.getenv); err != nil {
		return nil, err
	}
	specs := map[string]gate.ProfileSpec{}
	for n, p := range cfg.Profiles {
		specs[n] = gate.ProfileSpec{Capabilities: p.Capabilities, MemoryMiB: p.MemoryMiB, Deadline: p.Deadline}
	}
	profiles, err := gate.Profiles(specs)
	if err != nil {
		return nil, configErr("%v", err)
	}
	e := &Engine{cfg: cfg, logger: o.logger, registry: prometheus.NewRegistry(), tokens: map[string]string{}, stopBg: make(chan struct{}), bgDone: make(chan struct{})}

	resolver, err := buildResolver(cfg.Egress)
	if err != nil {
		return nil, err
	}
	proxies := map[string]*egress.UpstreamProxy{}
	for name, raw := range cfg.Egress.Proxies {
		p, err := egress.ParseUpstreamProxy(name, raw)
		if err != nil {
			return nil, configErr("egress.proxies.%s: %v", name, err)
		}
		proxies[name] = p
	}
	fl, err := openFleet(cfg.State, o.logger)
	if err != nil {
		return nil, err
	}
	e.fleet = fl
	e.replica = replicaName(cfg.State)
	// Pins: with egress.pin_dns, trust-on-first-use for DefaultPinTTL.
	// A fleet pins every answer for the DNS cache's bound even without
	// it, so that a name resolves the same on every replica, as it does
	// within one process through the cache.
	var pins egress.PinStore
	var pinTTL time.Duration
	switch {
	case fl != nil:
		pins = fl.Pins()
		if !cfg.Egress.PinDNS {
			pinTTL = FleetPinTTL
		}
	case cfg.Egress.PinDNS:
		pins = &egress.MemoryPins{}
	}
	profile, err := egress.ParseTLSProfile(cfg.Egress.TLSProfile)
	if err != nil {
		return nil, configErr("egress.tls_profile: %v", err)
	}

	e.budgets = newBudgets(cfg)
	tenants := map[string]*gate.Tenant{}
	for name, tc := range cfg.Tenants {
		pname := tc.Profile
		if pname == "" {
			pname = gate.ProfileCompute
			if name == airlock.LocalTenant {
				pname = gate.ProfilePosix
			}
		}
		prof, ok := profiles[pname]
		if !ok {
			return nil, configErr("tenant %q: unknown profile %q", name, pname)
		}
		chk, err := tenantChecker(cfg.Egress, tc, prof)
		if err != nil {
			return nil, configErr("tenant %q: %v", name, err)
		}
		d := &egress.Dialer{Policy: chk, Resolver: resolver, Pins: pins, PinTTL: pinTTL, Proxies: proxies,
			Logger: o.logger.With(slog.String("tenant", name))}
		t := &gate.Tenant{
			Name: name, Profile: prof, Dialer: d,
			Client: &egress.Client{Dialer: d, Timeout: cfg.Egress.FetchTimeout, MaxRedirects: cfg.Egress.MaxRedirects,
				MaxBodyBytes: cfg.Egress.MaxBodyBytes, MaxDecodedBytes: cfg.Egress.MaxDecodedBytes, Profile: profile},
			Limit:   gate.Limit{Rate: cfg.Limits.TenantRate, Burst: cfg.Limits.TenantBurst},
			Secrets: map[string][]byte{},
		}
		if tc.Rate > 0 {
			t.Limit = gate.Limit{Rate: tc.Rate, Burst: max(tc.Burst, 1)}
		}
		// Every connection the tenant opens holds a slot of its share and
		// of the process's until it closes; a full share first closes the
		// tenant's idle pooled connections.
		d.Conns = e.budgets.ConnSlots(name)
		e.budgets.OnFull(gate.BudgetConnections, name, t.Client.ReleaseIdle)
		if t.Limits, err = tenantLimits(cfg, name, tc); err != nil {
			return nil, err
		}
		t.AllowIgnoreRobots = tc.AllowIgnoreRobots
		for sname, ref := range tc.Secrets {
			v, err := readSecret(ref, o.getenv)
			if err != nil {
				return nil, configErr("tenant %q secret %q: %v", name, sname, err)
			}
			t.Secrets[sname] = v
		}
		// No list (or an empty one) grants no route; "*" grants every one.
		t.Routes = map[string]bool{}
		for _, r := range tc.Routes {
			t.Routes[r] = true
		}
		for _, h := range tc.Tokens {
			e.tokens[h] = name
		}
		tenants[name] = t
	}
	chromium := &chromiumProvider{}
	if e.browse, err = buildDispatcher(cfg.Browse, o.getenv, chromium); err != nil {
		return nil, err
	}
	e.routes = map[string]*route{}
	for name, rc := range cfg.Routes {
		r, err := buildRoute(name, rc, o.getenv)
		if err != nil {
			return nil, err
		}
		e.routes[name] = r
	}

	if cfg.InMemory {
		e.st, err = store.OpenMemory()
	} else {
		e.st, err = store.Open(filepath.Join(cfg.DataDir, "airlock.db"))
	}
	if err != nil {
		return nil, airlock.Errorf(airlock.CodeUnavailable, airlock.ReasonStore, "open the store in %s: %v", cfg.DataDir, err)
	}
	var sink store.AuditLog = e.st
	if fl != nil {
		e.auditStream = fl.AuditStream(e.replica)
		sink = &fleetAuditSink{AuditLog: e.st, stream: e.auditStream, e: e}
	}
	e.audit = gate.NewAuditor(gate.AuditorConfig{Sink: sink, Interval: cfg.Audit.BatchInterval, Queue: cfg.Audit.QueueSize, Logger: o.logger, Registry: e.registry})
	// The poller may call onChange from its goroutine before the gate
	// exists: hand the gate over through an atomic pointer.
	var gp atomic.Pointer[gate.Gate]
	var revStore store.Revocations = e.st
	limiter := o.limiter
	if fl != nil {
		revStore = e.fleetRevocations(fl, o.logger)
		if limiter == nil {
			limiter = e.fleetLimiter(fl)
		}
	}
	e.revs, err = gate.NewRevocationSet(context.Background(), revStore, DefaultRevocationPoll, o.logger, func() {
		if g := gp.Load(); g != nil {
			g.RevocationsChanged()
		}
	})
	if err != nil {
		e.audit.Close(context.Background())
		e.st.Close()
		e.closeFleet()
		return nil, airlock.Errorf(airlock.CodeUnavailable, airlock.ReasonStore, "load revocations: %v", err)
	}
	if err := e.watchFleet(); err != nil {
		e.revs.Close()
		e.audit.Close(context.Background())
		e.st.Close()
		e.closeFleet()
		return nil, err
	}
	e.budgets.OnFull(gate.BudgetConnections, "", func() {
		for _, t := range tenants {
			t.Client.ReleaseIdle()
		}
	})
	g := gate.New(gate.Config{Tenants: tenants, Limiter: limiter, Revocations: e.revs, Auditor: e.audit, Logger: o.logger,
		Connect: gate.Limit{Rate: float64(cfg.Limits.ConnectAttempts) / cfg.Limits.ConnectWindow.Seconds(), Burst: cfg.Limits.ConnectAttempts}})
	gp.Store(g)
	e.gate = g
	e.browser = newBrowserManager(e, cfg.Browser)
	chromium.m = e.browser

	bi := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "airlock_build_info", Help: "Build information; always 1."}, []string{"version", "goversion"})
	bi.WithLabelValues(Version, runtime.Version()).Set(1)
	if fl != nil {
		// A fresh registry: registering cannot collide.
		if err := fl.Register(e.registry); err != nil {
			o.logger.Error("redis metrics not registered", slog.String("error", err.Error()))
		}
	}
	e.registry.MustRegister(bi, e.budgets, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "airlock_broker_calls_in_flight", Help: "Broker calls in progress."}, func() float64 { return float64(g.Active()) }))
	e.startJobs(context.Background())
	go e.retention()
	return e, nil
}

// Validate checks a configuration without opening anything: profiles,
// tenants, token hashes, patterns, routes, the TLS profile and the browse
// providers (whose keys it reads from the process environment, as New
// does).
func Validate(cfg Config) error { return validate(cfg, os.Getenv) }

func validate(cfg Config, getenv func(string) string) error {
	cfg = defaults(cfg)
	if _, err := egress.ParseTLSProfile(cfg.Egress.TLSProfile); err != nil {
		return configErr("egress.tls_profile: %v", err)
	}
	if err := cfg.Browser.validate(); err != nil {
		return err
	}
	if err := cfg.State.validate(); err != nil {
		return err
	}
	if err := validateBudgets(cfg); err != nil {
		return err
	}
	if _, err := buildDispatcher(cfg.Browse, getenv, nil); err != nil {
		return configErr("%v", err)
	}
	specs := map[string]gate.ProfileSpec{}
	for n, p := range cfg.Profiles {
		specs[n] = gate.ProfileSpec{Capabilities: p.Capabilities, MemoryMiB: p.MemoryMiB, Deadline: p.Deadline}
	}
	profiles, err := gate.Profiles(specs)
	if err != nil {
		return configErr("%v", err)
	}
	if _, ok := cfg.Tenants[cfg.DefaultTenant]; !ok {
		return configErr("default_tenant %q is not a configured tenant", cfg.DefaultTenant)
	}
	seen := map[string]string{}
	for _, h := range cfg.AdminTokens {
		if err := store.ValidateTokenHash(h); err != nil {
			return configErr("admin_tokens: %q is not a sha256:<64 hex> hash (make one with `airlock token hash`)", redactToken(h))
		}
		seen[h] = "admin"
	}
	for _, h := range cfg.Browser.ApproverTokens {
		if err := store.ValidateTokenHash(h); err != nil {
			return configErr("browser.approver_tokens: %q is not a sha256:<64 hex> hash (make one with `airlock token hash`)", redactToken(h))
		}
		if seen[h] == "" {
			seen[h] = "browser.approver_tokens"
		}
	}
	for name, tc := range cfg.Tenants {
		if _, err := airlock.ParsePrincipal(name); err != nil || strings.Contains(name, "/") {
			return configErr("tenant name %q: letters, digits, '-', '_', '.' only", name)
		}
		if tc.Profile != "" {
			if _, ok := profiles[tc.Profile]; !ok {
				return configErr("tenant %q: unknown profile %q (known: compute, minimal, network, posix and the profiles section)", name, tc.Profile)
			}
		}
		for _, h := range tc.Tokens {
			if err := store.ValidateTokenHash(h); err != nil {
				return configErr("tenant %q: token %q is not a sha256:<64 hex> hash (create tokens with `airlock token create`)", name, redactToken(h))
			}
			if other, dup := seen[h]; dup {
				return configErr("token hash listed for both %q and %q", other, name)
			}
			seen[h] = name
		}
		if _, err := tenantChecker(cfg.Egress, tc, gate.BuiltinProfiles()[gate.ProfilePosix]); err != nil {
			return configErr("tenant %q: %v", name, err)
		}
		if _, err := tenantLimits(cfg, name, tc); err != nil {
			return err
		}
		for sname, ref := range tc.Secrets {
			if (ref.Env == "") == (ref.File == "") {
				return configErr("tenant %q secret %q: set exactly one of env and file", name, sname)
			}
		}
		for _, r := range tc.Routes {
			if _, ok := cfg.Routes[r]; !ok && r != AllRoutes {
				return configErr("tenant %q: unknown route %q", name, r)
			}
		}
	}
	for name, rc := range cfg.Routes {
		if _, err := buildRoute(name, rc, func(string) string { return "x" }); err != nil {
			return err
		}
	}
	if _, err := buildResolver(cfg.Egress); err != nil {
		return err
	}
	return nil
}

func redactToken(s string) string {
	if !strings.HasPrefix(s, "sha256:") {
		// Probably a plain token pasted by mistake: show none of it.
		return fmt.Sprintf("<%d characters, not shown>", len(s))
	}
	if len(s) > 12 {
		return s[:12] + "…"
	}
	return s
}

func tenantChecker(eg EgressConfig, tc TenantConfig, prof gate.Profile) (*egress.Checker, error) {
	exceptions := append(slices.Clone(eg.Exceptions), tc.Exceptions...)
	pol := egress.Policy{
		Lanes:              prof.Lanes(),
		Allow:              tc.Allow,
		Deny:               append(slices.Clone(eg.Deny), tc.Deny...),
		Exceptions:         exceptions,
		UnwrapEmbeddedIPv4: eg.UnwrapEmbeddedIPv4,
	}
	chk, err := pol.Compile()
	if err != nil {
		return nil, err
	}
	if len(eg.Allow) > 0 {
		global, err := egress.Policy{Lanes: egress.Lanes(), Allow: eg.Allow, Exceptions: exceptions, UnwrapEmbeddedIPv4: eg.UnwrapEmbeddedIPv4}.Compile()
		if err != nil {
			return nil, err
		}
		chk = chk.Narrow(global)
	}
	return chk, nil
}

func buildResolver(eg EgressConfig) (egress.Resolver, error) {
	var next egress.Resolver
	if eg.DNSServer != "" {
		r, err := egress.NewDNSResolver(eg.DNSServer)
		if err != nil {
			return nil, configErr("egress.dns_server: %v", err)
		}
		next = r
	}
	if len(eg.Resolve) == 0 {
		return next, nil // nil: the system resolver, loaded on first use
	}
	hosts := map[string][]netip.Addr{}
	for name, ips := range eg.Resolve {
		t, err := egress.ParseHost(name)
		if err != nil || t.IsIP() {
			return nil, configErr("egress.resolve: %q is not a host name", name)
		}
		for _, s := range ips {
			a, err := netip.ParseAddr(strings.Trim(s, "[]"))
			if err != nil {
				return nil, configErr("egress.resolve.%s: %q is not an IP address", name, s)
			}
			hosts[t.Host] = append(hosts[t.Host], a)
		}
	}
	if next == nil {
		next = lazySystem{}
	}
	return &egress.StaticResolver{Hosts: hosts, Next: next}, nil
}

// lazySystem defers reading /etc/resolv.conf until a name needs it.
type lazySystem struct{}

func (lazySystem) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	r, err := egress.SystemResolver()
	if err != nil {
		return nil, err
	}
	return r.LookupNetIP(ctx, network, host)
}

func readSecret(ref SecretRef, getenv func(string) string) ([]byte, error) {
	switch {
	case ref.Env != "" && ref.File != "":
		return nil, errors.New("set exactly one of env and file")
	case ref.Env != "":
		v := getenv(ref.Env)
		if v == "" {
			return nil, fmt.Errorf("environment variable %s is not set", ref.Env)
		}
		return []byte(v), nil
	case ref.File != "":
		b, err := os.ReadFile(ref.File)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", ref.File, errors.Unwrap(err))
		}
		v := strings.TrimRight(string(b), "\r\n")
		if v == "" {
			return nil, fmt.Errorf("%s is empty", ref.File)
		}
		return []byte(v), nil
	}
	return nil, errors.New("set env or file")
}

func buildRoute(name string, rc RouteConfig, getenv func(string) string) (*route, error) {
	base, err := egress.ParseURL(rc.BaseURL)
	if err != nil {
		return nil, configErr("routes.%s.base_url: %v", name, err)
	}
	if rc.Header == "" || strings.ContainsAny(rc.Header, " :\r\n") {
		return nil, configErr("routes.%s.header: a header name is required", name)
	}
	v, err := readSecret(SecretRef{Env: rc.ValueEnv, File: rc.ValueFile}, getenv)
	if err != nil {
		return nil, configErr("routes.%s: credential: %v", name, err)
	}
	r := &route{name: name, base: base, header: http.CanonicalHeaderKey(rc.Header), value: rc.Prefix + string(v), redact: gate.NewRedactor(string(v)), methods: map[string]bool{}, prefix: rc.PathPrefix}
	if r.prefix == "" {
		r.prefix = "/"
	}
	pol := egress.DefaultPolicy()
	pol.Allow = []string{base.HostPort()}
	pol.Exceptions = []string{"0.0.0.0/0", "::/0"} // the tenant's checker keeps the floor
	if r.origin, err = pol.Compile(); err != nil {
		return nil, configErr("routes.%s.base_url: %v", name, err)
	}
	if !strings.HasPrefix(r.prefix, "/") {
		return nil, configErr("routes.%s.path_prefix must start with /", name)
	}
	methods := rc.Methods
	if len(methods) == 0 {
		methods = []string{http.MethodGet}
	}
	for _, m := range methods {
		r.methods[strings.ToUpper(m)] = true
	}
	return r, nil
}

// Principal returns the principal of the default tenant ("local").
func (e *Engine) Principal() airlock.Principal { return airlock.Principal{Tenant: e.cfg.DefaultTenant} }

// Profile returns the profile name of a tenant, or "".
func (e *Engine) Profile(tenant string) string {
	if t := e.gate.Tenant(tenant); t != nil {
		return t.Profile.Name
	}
	return ""
}

// Grants reports whether the principal's profile grants capability c (a
// surface uses it to offer only the tools a principal can use; the gate
// still decides every call).
func (e *Engine) Grants(p airlock.Principal, c airlock.Capability) bool {
	t := e.gate.Tenant(p.Tenant)
	return t != nil && t.Profile.Has(c)
}

func errShuttingDown() *airlock.Error {
	return airlock.Errorf(airlock.CodeUnavailable, airlock.ReasonShuttingDown, "engine is shutting down")
}

func (e *Engine) begin(ctx context.Context, p airlock.Principal, c airlock.Capability, broker, target string) (*gate.Call, error) {
	if e.closing.Load() {
		return nil, errShuttingDown()
	}
	call, err := e.gate.Begin(ctx, p, c, broker, target)
	if err != nil {
		return nil, err
	}
	// Close may have started between the check above and Begin: it waits
	// only for calls it can see, so a call registered after it looked must
	// not proceed (its record still reaches the open auditor).
	if e.closing.Load() {
		return nil, call.End(errShuttingDown(), 0, 0)
	}
	// Extractions under the call share the process's extraction budget.
	call.Ctx = extract.WithBudget(call.Ctx, extractBudget{b: e.budgets, factor: int64(e.cfg.Budgets.ExtractFactor)})
	return call, nil
}

func narrowChecker(n *airlock.Narrowing) (*egress.Checker, error) {
	if n == nil || len(n.Allow) == 0 && len(n.Deny) == 0 {
		return nil, nil
	}
	pol := egress.DefaultPolicy()
	pol.Allow, pol.Deny = n.Allow, n.Deny
	// The narrowing's own floor must not deny what the tenant excepted: an
	// exception-free floor here would, so the narrowing opens the floor and
	// relies on the tenant's checker for it.
	pol.Exceptions = []string{"0.0.0.0/0", "::/0"}
	chk, err := pol.Compile()
	if err != nil {
		return nil, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonNarrow, "request narrowing: %v", err)
	}
	return chk, nil
}

// HTTP makes a generic HTTP request under the principal's policy
// (capability http). A max_redirects or body above the tenant's ceilings
// (limits.max_redirects, limits.http_body) is invalid, reason limit.
func (e *Engine) HTTP(ctx context.Context, p airlock.Principal, req airlock.HTTPRequest) (*airlock.HTTPResponse, error) {
	call, err := e.begin(ctx, p, airlock.CapabilityHTTP, "http", req.URL)
	if err != nil {
		return nil, err
	}
	if err := call.Tenant.Limits.Check(req, ""); err != nil {
		return nil, call.End(err, 0, 0)
	}
	if ceil := int(call.Tenant.Limits.Ceiling(gate.LimitMaxRedirects)); req.MaxRedirects == nil && ceil < defaultRedirects(e.cfg.Egress) {
		req.MaxRedirects = &ceil // a tenant's ceiling below the default
	}
	n, err := narrowChecker(req.Narrow)
	if err != nil {
		return nil, call.End(err, 0, 0)
	}
	er := &egress.Request{
		Method: req.Method, URL: req.URL, Header: http.Header(req.Header), Body: req.Body,
		Profile: egress.TLSProfile(req.TLSProfile), MaxRedirects: req.MaxRedirects,
		Call: egress.Call{Key: call.Key(), Narrow: n, Proxy: req.Proxy},
	}
	var resp *airlock.HTTPResponse
	var in int64
	if req.Cache {
		resp, in, err = e.cachedHTTP(call, er)
	} else {
		resp, in, err = e.doHTTP(call, call.Tenant.Client, er, nil)
	}
	if err = call.End(err, in, int64(len(req.Body))); err != nil {
		return nil, err
	}
	resp.DecisionID = call.ID
	return resp, nil
}

// doHTTP makes the request and reads the answer. A non-nil redact runs
// over every string of the answer and of the error, and refuses a redirect
// target that carries the credential.
func (e *Engine) doHTTP(call *gate.Call, c *egress.Client, r *egress.Request, redact *gate.Redactor) (*airlock.HTTPResponse, int64, error) {
	if redact != nil {
		r.CheckRedirect = redact.CheckRedirect
	}
	resp, err := c.Do(call.Ctx, r)
	if err != nil {
		return nil, 0, redact.Error(err)
	}
	// The body's bytes count against the tenant's bytes in flight while
	// they are read.
	counted, release := e.budgets.Reader(call.Ctx, gate.BudgetBytes, call.Tenant.Name, resp.Body)
	defer release()
	resp.Body = readCloser{Reader: counted, Closer: resp.Body}
	body, err := egress.ReadAll(resp)
	if err != nil {
		return nil, int64(len(body)), redact.Error(err)
	}
	out := &airlock.HTTPResponse{Status: resp.StatusCode, Header: map[string][]string(resp.Header), Body: body,
		URL: resp.URL.String(), Redirects: resp.Redirects, Proto: resp.Proto}
	if redact != nil {
		out.Body = redact.Bytes(out.Body)
		redact.Header(out.Header)
		out.URL = redact.String(out.URL)
		out.Redirects = slices.Clone(out.Redirects)
		redact.Strings(out.Redirects)
	}
	return out, int64(len(body)), nil
}

type readCloser struct {
	io.Reader
	io.Closer
}

// Exchange makes a one-shot TCP, UDP or TLS exchange (capability tcp, udp or
// tls, after the lane). A max_reply, timeout, idle or data above the
// tenant's ceilings (limits.exchange_*, limits.udp_*) is invalid, reason
// limit, refused before anything is dialled.
func (e *Engine) Exchange(ctx context.Context, p airlock.Principal, req airlock.ExchangeRequest) (*airlock.ExchangeResponse, error) {
	var capability airlock.Capability
	switch req.Lane {
	case airlock.LaneTCP:
		capability = airlock.CapabilityTCP
	case airlock.LaneUDP:
		capability = airlock.CapabilityUDP
	case airlock.LaneTLS:
		capability = airlock.CapabilityTLS
	default:
		// Still one decision, like every broker call.
		call, err := e.begin(ctx, p, "", "exchange", req.Target)
		if err != nil {
			return nil, err
		}
		return nil, call.End(airlock.Errorf(airlock.CodeInvalid, airlock.ReasonLane, "exchange lane %q: want tcp, udp or tls", req.Lane), 0, 0)
	}
	call, err := e.begin(ctx, p, capability, req.Lane, req.Target)
	if err != nil {
		return nil, err
	}
	if err := call.Tenant.Limits.Check(req, req.Lane); err != nil {
		return nil, call.End(err, 0, 0)
	}
	req = exchangeDefaults(req, call.Tenant.Limits)
	n, err := narrowChecker(req.Narrow)
	if err != nil {
		return nil, call.End(err, 0, 0)
	}
	o := &egress.ExchangeOptions{Call: egress.Call{Key: call.Key(), Narrow: n}, Timeout: req.Timeout, MaxReply: req.MaxReply, IdleAfterFirstByte: req.Idle}
	d := call.Tenant.Dialer
	var reply []byte
	switch req.Lane {
	case airlock.LaneTCP:
		reply, err = d.ExchangeTCP(call.Ctx, req.Target, req.Data, o)
	case airlock.LaneUDP:
		reply, err = d.ExchangeUDP(call.Ctx, req.Target, req.Data, o)
	case airlock.LaneTLS:
		reply, err = d.ExchangeTLS(call.Ctx, req.Target, req.Data, o)
	}
	if err = call.End(err, int64(len(reply)), int64(len(req.Data))); err != nil {
		return nil, err
	}
	return &airlock.ExchangeResponse{Data: reply, DecisionID: call.ID}, nil
}

// exchangeDefaults fills the zero values of an exchange the way egress
// would, except where the tenant's ceiling is below egress's default:
// then the ceiling is the default.
func exchangeDefaults(req airlock.ExchangeRequest, l *gate.Limits) airlock.ExchangeRequest {
	reply, timeout := egress.DefaultTCPReplyCap, egress.DefaultTCPTimeout
	replyLimit, timeoutLimit := gate.LimitExchangeMaxReply, gate.LimitExchangeTimeout
	if req.Lane == airlock.LaneUDP {
		reply, timeout = egress.DefaultUDPReplyCap, egress.DefaultUDPTimeout
		replyLimit, timeoutLimit = gate.LimitUDPMaxReply, gate.LimitUDPTimeout
	}
	if req.MaxReply == 0 {
		req.MaxReply = min(int64(reply), l.Ceiling(replyLimit))
	}
	if req.Timeout == 0 {
		req.Timeout = min(timeout, time.Duration(l.Ceiling(timeoutLimit)))
	}
	if req.Idle == 0 {
		req.Idle = min(egress.DefaultIdleAfterFirstByte, time.Duration(l.Ceiling(gate.LimitExchangeIdle)))
	}
	return req
}

// CheckLimit refuses (invalid, reason limit) a value a surface takes
// outside the root request types (MCP's max_length) above the
// principal's ceiling name; the refusal is one audited decision of
// broker. A value within the ceiling records nothing.
func (e *Engine) CheckLimit(ctx context.Context, p airlock.Principal, broker, name, field string, v int64) error {
	t := e.gate.Tenant(p.Tenant)
	if t == nil {
		return nil // Begin refuses the unknown tenant with its own call
	}
	err := t.Limits.CheckValue(name, field, v)
	if err == nil {
		return nil
	}
	call, berr := e.begin(ctx, p, "", broker, fmt.Sprintf("%s=%d", field, v))
	if berr != nil {
		return berr
	}
	return call.End(err, 0, 0)
}

// Ceiling returns the principal's ceiling name (see internal/gate's
// table), or the table's default for an unknown tenant: what a surface
// uses to make its own defaults fit under the tenant's ceilings.
func (e *Engine) Ceiling(p airlock.Principal, name string) int64 {
	var l *gate.Limits
	if t := e.gate.Tenant(p.Tenant); t != nil {
		l = t.Limits
	}
	return l.Ceiling(name)
}

// Sign returns HMAC-SHA256(secret, data) with the tenant's named secret
// (capability secrets). The secret itself is never returned, logged or
// audited.
func (e *Engine) Sign(ctx context.Context, p airlock.Principal, name string, data []byte) ([]byte, string, error) {
	call, err := e.begin(ctx, p, airlock.CapabilitySecrets, "sign", name)
	if err != nil {
		return nil, "", err
	}
	key, ok := call.Tenant.Secrets[name]
	if !ok {
		return nil, "", call.End(airlock.Errorf(airlock.CodeNotFound, airlock.ReasonSecret, "no secret named %q for tenant %s", name, p.Tenant), 0, 0)
	}
	m := hmac.New(sha256.New, key)
	m.Write(data)
	sum := m.Sum(nil)
	return sum, call.ID, call.End(nil, 0, int64(len(data)))
}

// Route calls a credentialed route (capability routes): the engine adds the
// route's credential header, the call goes through egress under the
// tenant's policy, and any echo of the credential in the response is
// redacted.
func (e *Engine) Route(ctx context.Context, p airlock.Principal, req airlock.RouteRequest) (*airlock.HTTPResponse, error) {
	call, err := e.begin(ctx, p, airlock.CapabilityRoutes, "route", req.Name+" "+req.Method+" "+req.Path)
	if err != nil {
		return nil, err
	}
	if err := call.Tenant.Limits.Check(req, ""); err != nil {
		return nil, call.End(err, 0, 0)
	}
	r, ok := e.routes[req.Name]
	if !ok || !call.Tenant.Routes[req.Name] && !call.Tenant.Routes[AllRoutes] {
		return nil, call.End(airlock.Errorf(airlock.CodeNotFound, airlock.ReasonRoute, "no route named %q for tenant %s", req.Name, p.Tenant), 0, 0)
	}
	method := strings.ToUpper(req.Method)
	if method == "" {
		method = http.MethodGet
	}
	if !r.methods[method] {
		return nil, call.End(airlock.Errorf(airlock.CodeDenied, airlock.ReasonRouteMethod, "route %s does not allow %s", r.name, method), 0, 0)
	}
	u, err := r.join(req.Path)
	if err != nil {
		return nil, call.End(err, 0, 0)
	}
	h := http.Header{}
	for k, vs := range req.Header {
		if http.CanonicalHeaderKey(k) == r.header {
			continue // the caller cannot set or see the credential header
		}
		h[k] = vs
	}
	if err := egress.CheckHeaders(h); err != nil {
		return nil, call.End(err, 0, 0)
	}
	h.Set(r.header, r.value)
	resp, in, err := e.doHTTP(call, call.Tenant.Client, &egress.Request{Method: method, URL: u, Header: h, Body: req.Body,
		Call: egress.Call{Key: call.Key(), Narrow: r.origin}}, r.redact)
	if err = call.End(err, in, int64(len(req.Body))); err != nil {
		return nil, err
	}
	resp.DecisionID = call.ID
	return resp, nil
}

func (r *route) join(path string) (string, error) {
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

// Authenticate maps an API token to its tenant's principal: tokens listed
// (as hashes) in the configuration, or created with CreateToken.
func (e *Engine) Authenticate(ctx context.Context, token string) (airlock.Principal, error) {
	if token == "" {
		return airlock.Principal{}, airlock.Errorf(airlock.CodeDenied, airlock.ReasonToken, "missing token")
	}
	h := store.HashToken(token)
	if t, ok := e.tokens[h]; ok {
		return airlock.Principal{Tenant: t}, nil
	}
	tok, err := e.st.LookupToken(ctx, h)
	if err == nil && e.gate.Tenant(tok.Tenant) != nil {
		return airlock.Principal{Tenant: tok.Tenant}, nil
	}
	return airlock.Principal{}, airlock.Errorf(airlock.CodeDenied, airlock.ReasonToken, "unknown token")
}

// AuthenticateAdmin accepts token when its hash is one of the configured
// admin tokens. The lookup is by SHA-256 hash, so comparing never touches
// the token itself; the loop compares every hash in constant time.
func (e *Engine) AuthenticateAdmin(ctx context.Context, token string) error {
	if token == "" {
		return airlock.Errorf(airlock.CodeDenied, airlock.ReasonToken, "missing admin token")
	}
	h := []byte(store.HashToken(token))
	ok := 0
	for _, a := range e.cfg.AdminTokens {
		ok |= subtle.ConstantTimeCompare(h, []byte(a))
	}
	if ok != 1 {
		return airlock.Errorf(airlock.CodeDenied, airlock.ReasonAdminToken, "not an admin token")
	}
	return nil
}

// AuthenticateApprover checks an approver token (browser.approver_tokens)
// and returns how the audit log names it: "approver sha256:<first 12
// hex>". Errors: denied (approver_token).
func (e *Engine) AuthenticateApprover(token string) (string, error) {
	h := []byte(store.HashToken(token))
	found := -1
	for i, a := range e.cfg.Browser.ApproverTokens {
		if subtle.ConstantTimeCompare(h, []byte(a)) == 1 {
			found = i
		}
	}
	if token == "" || found < 0 {
		return "", airlock.Errorf(airlock.CodeDenied, airlock.ReasonApproverToken, "not an approver token")
	}
	return "approver " + string(h[:min(len(h), len("sha256:")+12)]), nil
}

// HashToken is the form tokens are configured and stored in: "sha256:<hex>".
func HashToken(token string) string { return store.HashToken(token) }

// NewToken returns a fresh random API token ("alk_" and 256 random bits).
func NewToken() string {
	var b [32]byte
	rand.Read(b[:])
	return "alk_" + base64.RawURLEncoding.EncodeToString(b[:])
}

// CreateToken makes a new API token for tenant, stores only its hash, and
// returns the token (shown once).
func (e *Engine) CreateToken(ctx context.Context, tenant, label string) (string, error) {
	if e.gate.Tenant(tenant) == nil {
		return "", airlock.Errorf(airlock.CodeNotFound, airlock.ReasonTenant, "unknown tenant %q", tenant)
	}
	tok := NewToken()
	err := e.st.AddToken(ctx, store.Token{Hash: store.HashToken(tok), Tenant: tenant, Label: label, Created: time.Now()})
	e.gate.RecordAdmin("token_create", tenant, err)
	if err != nil {
		return "", err
	}
	return tok, nil
}

// Revoke revokes a principal ("tenant/instance") or a whole tenant: its
// next broker call fails with revoked, and its calls in flight are
// cancelled. Every process sharing the data directory sees it within a
// second.
func (e *Engine) Revoke(ctx context.Context, subject, reason string) error {
	if err := checkSubject(subject); err != nil {
		return err
	}
	err := e.revs.Revoke(ctx, subject, reason)
	e.gate.RecordAdmin("revoke", subject, err)
	return err
}

// checkSubject accepts "tenant" or "tenant/instance" in canonical form
// (ParsePrincipal also reads "tenant/" as the tenant, which the store
// refuses).
func checkSubject(subject string) error {
	p, err := airlock.ParsePrincipal(subject)
	if err != nil {
		return err
	}
	if p.String() != subject {
		return airlock.Errorf(airlock.CodeInvalid, airlock.ReasonPrincipal, "bad revocation subject %q: want tenant or tenant/instance", subject)
	}
	return nil
}

// Unrevoke lifts a revocation.
func (e *Engine) Unrevoke(ctx context.Context, subject string) error {
	if err := checkSubject(subject); err != nil {
		return err
	}
	err := e.revs.Unrevoke(ctx, subject)
	if errors.Is(err, store.ErrNotFound) {
		err = airlock.Errorf(airlock.CodeNotFound, airlock.ReasonRevocation, "%s is not revoked", subject)
	}
	e.gate.RecordAdmin("unrevoke", subject, err)
	return err
}

// Revocations lists the current revocations.
func (e *Engine) Revocations() []string {
	var out []string
	for _, r := range e.revs.List() {
		out = append(out, r.Subject)
	}
	slices.Sort(out)
	return out
}

func toPublic(r store.AuditRecord) airlock.AuditRecord {
	return airlock.AuditRecord{ID: r.ID, Time: r.Time, Tenant: r.Tenant, Instance: r.Instance, Broker: r.Broker, Outcome: r.Outcome,
		Code: r.Code, Reason: r.Reason, Target: r.Target, Detail: r.Detail, DurationMS: r.DurationMS, BytesIn: r.BytesIn, BytesOut: r.BytesOut}
}

// AuditQuery reads the persistent audit log, newest first.
func (e *Engine) AuditQuery(ctx context.Context, q airlock.AuditQuery) ([]airlock.AuditRecord, error) {
	tenant := e.cfg.DefaultTenant
	if p, err := airlock.ParsePrincipal(q.Principal); err == nil && q.Principal != "" {
		tenant = p.Tenant
	}
	var l *gate.Limits
	if t := e.gate.Tenant(tenant); t != nil {
		l = t.Limits
	}
	if err := l.Check(q, ""); err != nil {
		return nil, err
	}
	sq := store.AuditQuery{Since: q.Since, Until: q.Until, Outcome: q.Outcome, Broker: q.Broker, Reason: q.Reason, Limit: q.Limit, BeforeID: q.BeforeID}
	if q.Principal != "" {
		p, err := airlock.ParsePrincipal(q.Principal)
		if err != nil {
			return nil, err
		}
		sq.Tenant, sq.Instance = p.Tenant, p.Instance
	}
	recs, err := e.st.QueryAudit(ctx, sq)
	if err != nil {
		return nil, err
	}
	out := make([]airlock.AuditRecord, len(recs))
	for i, r := range recs {
		out[i] = toPublic(r)
	}
	return out, nil
}

// AuditStats counts persisted decisions since a time by broker, outcome and
// reason, for one tenant or ("") every tenant.
func (e *Engine) AuditStats(ctx context.Context, since time.Time, tenant string) ([]airlock.AuditStat, error) {
	st, err := e.st.AuditStats(ctx, since, tenant)
	if err != nil {
		return nil, err
	}
	out := make([]airlock.AuditStat, len(st))
	for i, s := range st {
		out[i] = airlock.AuditStat(s)
	}
	return out, nil
}

// RecentDenials returns the deny ring (the last 128 denials, strings cut to
// 512 bytes), engine-wide or for one principal.
func (e *Engine) RecentDenials(principal string, n int) []airlock.AuditRecord {
	recs := e.audit.Recent(principal, n)
	out := make([]airlock.AuditRecord, len(recs))
	for i, r := range recs {
		out[i] = toPublic(r)
	}
	return out
}

// Counters returns this process's decision counters since start.
func (e *Engine) Counters() []airlock.AuditStat {
	st := e.audit.Stats()
	out := make([]airlock.AuditStat, len(st))
	for i, s := range st {
		out[i] = airlock.AuditStat(s)
	}
	return out
}

// FlushAudit waits until every decision made so far is in the persistent
// log.
func (e *Engine) FlushAudit(ctx context.Context) error { return e.audit.Flush(ctx) }

// Metrics serves the Prometheus metrics of this engine.
func (e *Engine) Metrics() http.Handler {
	return promhttp.HandlerFor(e.registry, promhttp.HandlerOpts{})
}

// Registry returns the Prometheus registry, for surfaces that add their own
// metrics.
func (e *Engine) Registry() *prometheus.Registry { return e.registry }

func (e *Engine) retention() {
	defer close(e.bgDone)
	t := time.NewTicker(10 * time.Minute)
	defer t.Stop()
	prune := func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := e.st.PruneAudit(ctx, time.Now().Add(-e.cfg.Audit.Retention), e.cfg.Audit.MaxRows); err != nil {
			e.logger.Error("audit retention", slog.String("error", err.Error()))
		}
	}
	prune()
	for {
		select {
		case <-e.stopBg:
			return
		case <-t.C:
			prune()
		}
	}
}

// waitIdle waits until no call is in flight, or ctx ends (false).
func (e *Engine) waitIdle(ctx context.Context) bool {
	for e.gate.Active() > 0 {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(5 * time.Millisecond):
		}
	}
	return true
}

// Close stops taking calls, waits for calls in flight (until ctx ends, then
// cancels them), flushes the audit log and closes the store.
func (e *Engine) Close(ctx context.Context) error {
	e.closeMu.Lock()
	defer e.closeMu.Unlock()
	if e.closed {
		return nil
	}
	e.closed = true
	e.closing.Store(true)
	e.jobs.Close(ctx)
	if !e.waitIdle(ctx) {
		// The caller stopped waiting: cancel what is still running, and
		// give it a bounded moment to end, so that its decision records
		// reach the audit log before it closes.
		e.gate.CancelActive(errShuttingDown())
		waitCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), DefaultDrainTimeout)
		e.waitIdle(waitCtx)
		cancel()
	}
	e.browser.close(ctx)
	close(e.stopBg)
	<-e.bgDone
	e.revs.Close()
	e.stopFleet()
	flushCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), DefaultDrainTimeout)
	defer cancel()
	errA := e.audit.Close(flushCtx)
	for _, name := range e.gate.Tenants() {
		e.gate.Tenant(name).Client.CloseIdleConnections()
	}
	errS := e.st.Close()
	e.closeFleet()
	return errors.Join(errA, errS)
}
