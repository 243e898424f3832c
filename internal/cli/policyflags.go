package cli

import (
	"net/netip"
	"strings"

	"github.com/spf13/cobra"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/egress"
	"github.com/airlockhq/airlock/engine"
)

// policyFlags are the egress policy flags shared by every command that
// reaches the network (policy check, exchange, and later serve and mcp).
type policyFlags struct {
	resolve   []string
	dnsServer string
	allow     []string
	deny      []string
	except    []string
	unwrap    bool
	// browser, when set, are the browser origin flags of the command
	// (mcp, serve, browser run).
	browser *browserFlags
	// person marks a command a person runs at their terminal (fetch,
	// crawl): its default tenant may claim the person initiator unless
	// the configuration lists the tenant's initiators.
	person bool
}

func (p *policyFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringArrayVar(&p.resolve, "resolve", nil, "answer a name offline: host=ip[,ip...] (repeatable, like curl's --resolve)")
	f.StringVar(&p.dnsServer, "dns-server", "", "DNS server ip:port for names (default: /etc/resolv.conf)")
	f.StringArrayVar(&p.allow, "allow", nil, "allow-list pattern: host, *.suffix, IP, CIDR, with optional :PORT or :LO-HI (repeatable); when given, everything else is denied")
	f.StringArrayVar(&p.deny, "deny", nil, "deny-list pattern, same forms as --allow (repeatable)")
	f.StringArrayVar(&p.except, "except", nil, "floor exception for an intranet address: CIDR, IP or IP:PORT (repeatable; never cloud metadata)")
	f.BoolVar(&p.unwrap, "unwrap-embedded-ipv4", false, "re-check the IPv4 address inside mapped/NAT64/6to4/Teredo IPv6 addresses instead of denying them as a class")
}

// dialer compiles the flags into a guarded dialer.
func (p *policyFlags) dialer() (*egress.Dialer, error) {
	pol := egress.DefaultPolicy()
	pol.Allow, pol.Deny, pol.Exceptions, pol.UnwrapEmbeddedIPv4 = p.allow, p.deny, p.except, p.unwrap
	chk, err := pol.Compile()
	if err != nil {
		return nil, usageErrorf("policy: %v", err)
	}
	d := &egress.Dialer{Policy: chk}
	var next egress.Resolver
	if p.dnsServer != "" {
		r, err := egress.NewDNSResolver(p.dnsServer)
		if err != nil {
			return nil, usageErrorf("--dns-server: %v", err)
		}
		next = r
	}
	if len(p.resolve) > 0 {
		hosts := map[string][]netip.Addr{}
		for _, kv := range p.resolve {
			name, ips, ok := strings.Cut(kv, "=")
			if !ok || name == "" || ips == "" {
				return nil, usageErrorf("--resolve %q: want host=ip[,ip...]", kv)
			}
			t, err := egress.ParseHost(name)
			if err != nil || t.IsIP() {
				return nil, usageErrorf("--resolve %q: %q is not a host name", kv, name)
			}
			for _, s := range strings.Split(ips, ",") {
				a, err := netip.ParseAddr(strings.Trim(strings.TrimSpace(s), "[]"))
				if err != nil {
					return nil, usageErrorf("--resolve %q: %q is not an IP address", kv, s)
				}
				hosts[t.Host] = append(hosts[t.Host], a)
			}
		}
		if next == nil {
			sys, err := egress.SystemResolver()
			if err == nil {
				next = sys
			}
		}
		d.Resolver = &egress.StaticResolver{Hosts: hosts, Next: next}
	} else if next != nil {
		d.Resolver = next
	}
	return d, nil
}

// applyTo folds the policy flags into a configuration: --resolve,
// --dns-server and --unwrap-embedded-ipv4 into the global egress settings;
// --allow, --deny and --except into the default tenant.
func (p *policyFlags) applyTo(cfg *engine.Config) error {
	if p.browser != nil {
		if err := p.browser.applyTo(cfg, len(cfg.Tenants) == 0); err != nil {
			return err
		}
	}
	for _, kv := range p.resolve {
		name, ips, ok := strings.Cut(kv, "=")
		if !ok || name == "" || ips == "" {
			return usageErrorf("--resolve %q: want host=ip[,ip...]", kv)
		}
		if cfg.Egress.Resolve == nil {
			cfg.Egress.Resolve = map[string][]string{}
		}
		for _, s := range strings.Split(ips, ",") {
			cfg.Egress.Resolve[name] = append(cfg.Egress.Resolve[name], strings.TrimSpace(s))
		}
	}
	if p.dnsServer != "" {
		cfg.Egress.DNSServer = p.dnsServer
	}
	if p.unwrap {
		cfg.Egress.UnwrapEmbeddedIPv4 = true
	}
	if p.person && len(cfg.Tenants) > 0 {
		tenant, tc, err := defaultTenant(cfg)
		if err != nil {
			return err
		}
		if len(tc.Initiators) == 0 {
			tc.Initiators = []string{airlock.InitiatorModel, airlock.InitiatorPerson}
			cfg.Tenants[tenant] = tc
		}
	}
	if len(p.allow)+len(p.deny)+len(p.except) == 0 {
		return nil
	}
	tenant, tc, err := defaultTenant(cfg)
	if err != nil {
		return err
	}
	tc.Allow = append(tc.Allow, p.allow...)
	tc.Deny = append(tc.Deny, p.deny...)
	tc.Exceptions = append(tc.Exceptions, p.except...)
	cfg.Tenants[tenant] = tc
	return nil
}

// defaultTenant returns the configuration's default tenant (the one CLI
// verbs act as) and its entry, which a flag may then change; with no
// tenant configured it is a new entry for "local", granted every route
// (as the engine's implicit tenant is). cfg.Tenants is made
// non-nil. A default tenant missing from configured tenants is a usage
// error.
func defaultTenant(cfg *engine.Config) (string, engine.TenantConfig, error) {
	tenant := cfg.DefaultTenant
	if tenant == "" {
		tenant = airlock.LocalTenant
	}
	if cfg.Tenants == nil {
		cfg.Tenants = map[string]engine.TenantConfig{}
	}
	tc, ok := cfg.Tenants[tenant]
	if !ok && len(cfg.Tenants) > 0 {
		return "", tc, usageErrorf("default tenant %q is not configured", tenant)
	}
	if !ok {
		// The implicit tenant of a person at their own terminal, as the
		// engine's default: every route.
		tc.Routes = []string{engine.AllRoutes}
	}
	return tenant, tc, nil
}
