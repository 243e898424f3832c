package config

import (
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/egress"
	"github.com/airlockhq/airlock/internal/browse"
	"github.com/airlockhq/airlock/internal/browser"
	"github.com/airlockhq/airlock/internal/fleet"
	"github.com/airlockhq/airlock/internal/gate"
	"github.com/airlockhq/airlock/internal/pagecache"
)

// Effective returns cfg with every default filled in, as New would run it:
// the value of each key a start uses, for `airlock config check` to show.
// It reads the same defaults the compile and the components read (no
// second table), so what it says is what runs. Each tenant's limits and
// budgets are its own with the global ones filled in. A key whose default
// depends on the caller or on the machine at start (the guests' budget,
// budgets.connections under a low descriptor limit, a provider's base URL)
// keeps its configured value. It holds no secret values: secrets are
// references (env, file). Feed New the configuration as written, not this:
// Effective's tenant limits would read as the tenant's own overrides.
func Effective(cfg Config) Config {
	cfg = Defaults(cfg)

	eg := &cfg.Egress
	orDefault(&eg.FetchTimeout, egress.DefaultFetchTimeout)
	if eg.MaxRedirects == 0 { // negative (none followed) stays as set
		eg.MaxRedirects = DefaultRedirects(*eg)
	}
	orDefault(&eg.MaxBodyBytes, egress.DefaultMaxBodyBytes)
	orDefault(&eg.MaxDecodedBytes, egress.DefaultMaxDecodedBytes)
	if eg.TLSProfile == "" {
		eg.TLSProfile = string(egress.DefaultTLSProfile)
	}

	b := &cfg.Browse
	if b.Provider == "" {
		b.Provider = browse.NativeName
	}
	orDefault(&b.BatchMax, airlock.DefaultBatchMax)
	orDefault(&b.BatchConcurrency, airlock.DefaultBatchConcurrency)
	orDefault(&b.BatchTimeout, airlock.DefaultBatchTimeout)
	orDefault(&b.PageCacheBytes, pagecache.DefaultMaxBytes)
	orDefault(&b.PageCacheTTL, pagecache.DefaultTTL)

	cfg.Browser = cfg.Browser.WithDefaults()
	if cfg.Browser.Policy.DefaultAction == "" {
		cfg.Browser.Policy.DefaultAction = browser.ActionDeny
	}
	orDefault(&cfg.State.CrawlLease, fleet.DefaultCrawlLease)

	if l, err := gate.NewLimits("", globalCeilings(cfg), nil); err == nil {
		setCeilings(&cfg.Limits.CeilingsConfig, l)
	}
	// defaults filled budgets.tenant: each tenant's share starts from it.
	tenants := make(map[string]TenantConfig, len(cfg.Tenants))
	for name, tc := range cfg.Tenants {
		tenants[name] = effectiveTenant(cfg, name, tc)
	}
	cfg.Tenants = tenants

	profiles := maps.Clone(cfg.Profiles)
	if compiled, err := compileProfiles(cfg); err == nil {
		for name, pc := range profiles {
			pc.MemoryMiB = int(compiled[name].Memory >> 20)
			pc.Deadline = compiled[name].Deadline
			profiles[name] = pc
		}
	}
	cfg.Profiles = profiles
	return cfg
}

// effectiveTenant is tc as compileTenant reads it.
func effectiveTenant(cfg Config, name string, tc TenantConfig) TenantConfig {
	if tc.Profile == "" {
		tc.Profile = gate.ProfileCompute
		if name == airlock.LocalTenant {
			tc.Profile = gate.ProfilePosix
		}
	}
	if tc.Rate > 0 {
		tc.Burst = max(tc.Burst, 1)
	} else {
		tc.Rate, tc.Burst = cfg.Limits.TenantRate, cfg.Limits.TenantBurst
	}
	t := cfg.Budgets.Tenant
	orDefault(&tc.Budgets.Connections, t.Connections)
	orDefault(&tc.Budgets.BytesInFlight, t.BytesInFlight)
	orDefault(&tc.Budgets.Crawls, t.Crawls)
	orDefault(&tc.Budgets.BrowserSessions, t.BrowserSessions)
	if l, err := tenantLimits(cfg, name, tc); err == nil {
		setCeilings(&tc.Limits, l)
	}
	if ini, err := tenantInitiators(name, tc); err == nil {
		if len(tc.Initiators) == 0 {
			tc.Initiators = nil
			for _, a := range []string{airlock.InitiatorModel, airlock.InitiatorPerson} {
				if _, ok := ini[a]; ok {
					tc.Initiators = append(tc.Initiators, a)
				}
			}
		}
		ids := make(map[string]IdentityConfig, len(ini))
		for a, i := range ini {
			robots := RobotsIgnore
			if i.Robots {
				robots = RobotsObey
			}
			ids[a] = IdentityConfig{Identity: i.Identity, Robots: robots}
		}
		tc.Identities = ids
	}
	tc.Routes = slices.Clone(tc.Routes)
	return tc
}

// setCeilings writes l's compiled values into c's fields, which carry the
// ceilings' names as their keys (durations in nanoseconds both ways).
func setCeilings(c *CeilingsConfig, l *gate.Limits) {
	v := reflect.ValueOf(c).Elem()
	for i := range v.NumField() {
		key, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("koanf"), ",")
		if _, ok := gate.LookupCeiling(key); ok {
			v.Field(i).SetInt(l.Ceiling(key))
		}
	}
}
