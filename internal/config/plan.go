package config

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/egress"
	"github.com/airlockhq/airlock/internal/browse"
	"github.com/airlockhq/airlock/internal/gate"
	"github.com/airlockhq/airlock/internal/store"
)

// Plan is a Config compiled: everything an engine needs that opens
// nothing (no store, no Redis, no socket, no goroutine). Validate is
// compile alone; New is compile, then the resources. Once built, a plan
// is not changed. Its dispatcher validates the providers; New builds the
// one it uses from the same inputs, with the chromium provider rendering
// through the engine's browser sessions.
type Plan struct {
	Cfg      Config // with every default filled in
	Profiles map[string]gate.Profile
	Tenants  map[string]*TenantPlan
	Tokens   map[string]string // config token hash → tenant
	Routes   map[string]*gate.Route
	Resolver egress.Resolver
	Proxies  map[string]*egress.UpstreamProxy
	TLS      egress.TLSProfile
	Browse   *browse.Dispatcher
	Connect  gate.Limit         // connect attempts per instance
	Budgets  gate.BudgetsConfig // the process's and each tenant's
}

// TenantPlan is one tenant compiled: its profile, checker, ceilings and
// secrets (read).
type TenantPlan struct {
	Name              string
	Profile           gate.Profile
	Checker           *egress.Checker
	Limit             gate.Limit
	Limits            *gate.Limits
	Secrets           map[string][]byte
	Routes            map[string]bool
	AllowIgnoreRobots bool
	Initiators        map[string]gate.Initiator
}

// Errorf is a configuration error: invalid, reason config.
func Errorf(format string, args ...any) error { return configErr(format, args...) }

func configErr(format string, args ...any) error {
	return airlock.Errorf(airlock.CodeInvalid, airlock.ReasonConfig, "config: "+format, args...)
}

// compile checks cfg and compiles it: profiles, tenants (checkers,
// ceilings, secrets read through getenv or from their files), budgets,
// routes (credentials read), the resolver, the upstream proxies, the TLS
// profile and the browse dispatcher with the registered providers whose
// keys getenv has. Every refusal is invalid (reason config). Validate and
// New both call it: they cannot disagree on a configuration.
func Compile(cfg Config, getenv func(string) string, dispatcher func(BrowseConfig) (*browse.Dispatcher, error)) (*Plan, error) {
	cfg = Defaults(cfg)
	if err := check(cfg); err != nil {
		return nil, err
	}
	p := &Plan{Cfg: cfg, Tenants: map[string]*TenantPlan{}, Tokens: map[string]string{}, Routes: map[string]*gate.Route{},
		Proxies: map[string]*egress.UpstreamProxy{},
		Connect: gate.Limit{Rate: float64(cfg.Limits.ConnectAttempts) / cfg.Limits.ConnectWindow.Seconds(), Burst: cfg.Limits.ConnectAttempts},
		Budgets: budgetLimits(cfg)}
	var err error
	if p.TLS, err = egress.ParseTLSProfile(cfg.Egress.TLSProfile); err != nil {
		return nil, configErr("egress.tls_profile: %v", err)
	}
	if p.Browse, err = dispatcher(cfg.Browse); err != nil {
		return nil, configErr("%v", err)
	}
	if p.Profiles, err = compileProfiles(cfg); err != nil {
		return nil, err
	}
	for name, tc := range cfg.Tenants {
		t, err := compileTenant(cfg, p.Profiles, name, tc, getenv)
		if err != nil {
			return nil, err
		}
		p.Tenants[name] = t
		for _, h := range tc.Tokens {
			p.Tokens[h] = name
		}
	}
	for name, rc := range cfg.Routes {
		if p.Routes[name], err = buildRoute(name, rc, getenv); err != nil {
			return nil, err
		}
	}
	if p.Resolver, err = buildResolver(cfg.Egress); err != nil {
		return nil, err
	}
	for name, raw := range cfg.Egress.Proxies {
		if p.Proxies[name], err = egress.ParseUpstreamProxy(name, raw); err != nil {
			return nil, configErr("egress.proxies.%s: %v", name, err)
		}
	}
	return p, nil
}

// check makes the checks of cfg (after defaults) that build nothing: the
// sections, token hashes, tenant names and references.
func check(cfg Config) error {
	if err := cfg.Browser.validate(); err != nil {
		return err
	}
	if err := cfg.State.validate(); err != nil {
		return err
	}
	if err := validateBudgets(cfg); err != nil {
		return err
	}
	if err := validatePageCache(cfg); err != nil {
		return err
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
		for _, h := range tc.Tokens {
			if err := store.ValidateTokenHash(h); err != nil {
				return configErr("tenant %q: token %q is not a sha256:<64 hex> hash (create tokens with `airlock token create`)", name, redactToken(h))
			}
			if other, dup := seen[h]; dup {
				return configErr("token hash listed for both %q and %q", other, name)
			}
			seen[h] = name
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
	return nil
}

func compileProfiles(cfg Config) (map[string]gate.Profile, error) {
	specs := map[string]gate.ProfileSpec{}
	for n, p := range cfg.Profiles {
		specs[n] = gate.ProfileSpec{Capabilities: p.Capabilities, MemoryMiB: p.MemoryMiB, Deadline: p.Deadline,
			TunnelBytes: p.TunnelBytes, TunnelDuration: p.TunnelDuration}
	}
	profiles, err := gate.Profiles(specs)
	if err != nil {
		return nil, configErr("%v", err)
	}
	return profiles, nil
}

// compileTenant compiles one tenant: an unset profile is posix for
// "local" and compute otherwise.
func compileTenant(cfg Config, profiles map[string]gate.Profile, name string, tc TenantConfig, getenv func(string) string) (*TenantPlan, error) {
	pname := tc.Profile
	if pname == "" {
		pname = gate.ProfileCompute
		if name == airlock.LocalTenant {
			pname = gate.ProfilePosix
		}
	}
	prof, ok := profiles[pname]
	if !ok {
		return nil, configErr("tenant %q: unknown profile %q (known: compute, minimal, network, posix and the profiles section)", name, pname)
	}
	t := &TenantPlan{Name: name, Profile: prof, Secrets: map[string][]byte{}, Routes: map[string]bool{},
		Limit: gate.Limit{Rate: cfg.Limits.TenantRate, Burst: cfg.Limits.TenantBurst}, AllowIgnoreRobots: tc.AllowIgnoreRobots}
	if tc.Rate > 0 {
		t.Limit = gate.Limit{Rate: tc.Rate, Burst: max(tc.Burst, 1)}
	}
	var err error
	if t.Checker, err = TenantChecker(cfg.Egress, tc, prof); err != nil {
		return nil, configErr("tenant %q: %v", name, err)
	}
	if t.Limits, err = tenantLimits(cfg, name, tc); err != nil {
		return nil, err
	}
	if t.Initiators, err = tenantInitiators(name, tc); err != nil {
		return nil, err
	}
	for sname, ref := range tc.Secrets {
		v, err := gate.ReadSecret(ref.Env, ref.File, getenv)
		if err != nil {
			return nil, configErr("tenant %q secret %q: %v", name, sname, err)
		}
		t.Secrets[sname] = v
	}
	// No list (or an empty one) grants no route; "*" grants every one.
	for _, r := range tc.Routes {
		t.Routes[r] = true
	}
	return t, nil
}

// Defaults returns cfg with every default filled in, as New would run it.
// It holds no secret values: secrets are references (env, file).
func Defaults(cfg Config) Config {
	if cfg.DataDir == "" {
		cfg.DataDir = DefaultDataDir
	}
	if cfg.DefaultTenant == "" {
		cfg.DefaultTenant = airlock.LocalTenant
	}
	orDefault(&cfg.Limits.TenantRate, DefaultTenantRate)
	orDefault(&cfg.Limits.TenantBurst, DefaultTenantBurst)
	orDefault(&cfg.Limits.ConnectAttempts, DefaultConnectAttempts)
	orDefault(&cfg.Limits.ConnectWindow, DefaultConnectWindow)
	orDefault(&cfg.Audit.BatchInterval, DefaultAuditInterval)
	orDefault(&cfg.Audit.QueueSize, DefaultAuditQueue)
	orDefault(&cfg.Audit.Retention, DefaultAuditRetention)
	orDefault(&cfg.Audit.MaxRows, DefaultAuditMaxRows)
	if len(cfg.Tenants) == 0 {
		// The person at their own terminal: every route.
		cfg.Tenants = map[string]TenantConfig{airlock.LocalTenant: {Profile: gate.ProfilePosix, Routes: []string{AllRoutes}}}
	}
	cfg.Budgets = budgetDefaults(cfg.Budgets)
	return cfg
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

// TenantChecker compiles a tenant's egress policy on the global one.
func TenantChecker(eg EgressConfig, tc TenantConfig, prof gate.Profile) (*egress.Checker, error) {
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

// buildRoute reads a route's credential and compiles the route.
func buildRoute(name string, rc RouteConfig, getenv func(string) string) (*gate.Route, error) {
	v, err := gate.ReadSecret(rc.ValueEnv, rc.ValueFile, getenv)
	if err != nil {
		return nil, configErr("routes.%s: credential: %v", name, err)
	}
	r, err := gate.NewRoute(name, gate.RouteSpec{BaseURL: rc.BaseURL, Header: rc.Header, ValuePrefix: rc.Prefix, Credential: string(v),
		Methods: rc.Methods, PathPrefix: rc.PathPrefix})
	if err != nil {
		return nil, configErr("routes.%s.%v", name, err)
	}
	return r, nil
}

// GateTenants builds the gate's tenants of p: each tenant's dialer on the
// plan's checker, resolver and proxies, with pins (nil: none) kept for
// pinTTL, holding slots of budgets' connection budget.
func (p *Plan) GateTenants(pins egress.PinStore, pinTTL time.Duration, budgets *gate.Budgets, logger *slog.Logger) map[string]*gate.Tenant {
	eg := p.Cfg.Egress
	tenants := map[string]*gate.Tenant{}
	for name, tp := range p.Tenants {
		d := &egress.Dialer{Policy: tp.Checker, Resolver: p.Resolver, Pins: pins, PinTTL: pinTTL, Proxies: p.Proxies,
			Logger: logger.With(slog.String("tenant", name))}
		t := &gate.Tenant{
			Name: name, Profile: tp.Profile, Dialer: d,
			Client: &egress.Client{Dialer: d, Timeout: eg.FetchTimeout, MaxRedirects: eg.MaxRedirects,
				MaxBodyBytes: eg.MaxBodyBytes, MaxDecodedBytes: eg.MaxDecodedBytes, Profile: p.TLS},
			Limit: tp.Limit, Limits: tp.Limits, Secrets: tp.Secrets, Routes: tp.Routes, AllowIgnoreRobots: tp.AllowIgnoreRobots,
			Initiators: tp.Initiators,
		}
		// Every connection the tenant opens holds a slot of its share and
		// of the process's until it closes; a full share first closes the
		// tenant's idle pooled connections.
		d.Conns = budgets.ConnSlots(name)
		budgets.OnFull(gate.BudgetConnections, name, t.Client.ReleaseIdle)
		tenants[name] = t
	}
	return tenants
}
