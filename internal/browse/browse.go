// Package browse is the provider slot: it resolves, per verb and at call
// time, which provider serves fetch, crawl and search, and which upstream
// proxy a call uses. It holds no network code: providers get an
// airlock.Doer bound to the caller's principal and policy.
package browse

import (
	"fmt"
	"slices"
	"sort"

	"github.com/airlockhq/airlock"
)

// NativeName is the built-in provider, which declares every verb.
const NativeName = "native"

// Provider is anything registered in the slot. It declares the verbs it
// serves; for each declared verb it must implement the matching interface
// (airlock.Fetcher, airlock.Crawler, airlock.Searcher), which Register
// checks.
type Provider interface {
	Capabilities() []string
}

// Config says which providers serve the verbs.
type Config struct {
	Provider       string // serves every verb it declares; "" or "native": native
	SearchProvider string // serves search, whatever Provider is
	Proxy          string // the operator's default upstream proxy name; "" none
}

// Dispatcher resolves providers. Build it with New and Register; it is
// read-only afterwards and safe for concurrent use.
type Dispatcher struct {
	cfg       Config
	providers map[string]Provider
}

// New returns a dispatcher with no providers; register native first.
func New(cfg Config) *Dispatcher {
	return &Dispatcher{cfg: cfg, providers: map[string]Provider{}}
}

// Register adds a provider under name after checking that its declared
// verbs match the interfaces it implements.
func (d *Dispatcher) Register(name string, p Provider) error {
	if err := CheckDeclarations(p); err != nil {
		return fmt.Errorf("browse: provider %s: %w", name, err)
	}
	d.providers[name] = p
	return nil
}

// CheckDeclarations verifies that a provider declares exactly the verbs it
// implements.
func CheckDeclarations(p Provider) error {
	decl := p.Capabilities()
	has := map[string]bool{}
	if _, ok := p.(airlock.Fetcher); ok {
		has[airlock.VerbFetch] = true
	}
	if _, ok := p.(airlock.Crawler); ok {
		has[airlock.VerbCrawl] = true
	}
	if _, ok := p.(airlock.Searcher); ok {
		has[airlock.VerbSearch] = true
	}
	for _, v := range decl {
		if !has[v] {
			return fmt.Errorf("declares %s but does not implement it", v)
		}
	}
	for v := range has {
		if !slices.Contains(decl, v) {
			return fmt.Errorf("implements %s but does not declare it", v)
		}
	}
	return nil
}

// Validate checks the configuration against the registered providers.
func (d *Dispatcher) Validate() error {
	for _, n := range []string{d.cfg.Provider, d.cfg.SearchProvider} {
		if n != "" {
			if _, ok := d.providers[n]; !ok {
				return airlock.Errorf(airlock.CodeInvalid, airlock.ReasonConfig, "browse: provider %q is not available (known: %v; API providers need their key in the environment)", n, d.Names())
			}
		}
	}
	if d.cfg.SearchProvider != "" && !slices.Contains(d.providers[d.cfg.SearchProvider].Capabilities(), airlock.VerbSearch) {
		return airlock.Errorf(airlock.CodeInvalid, airlock.ReasonConfig, "browse: search_provider %q does not declare search", d.cfg.SearchProvider)
	}
	return nil
}

// Names lists the registered providers.
func (d *Dispatcher) Names() []string {
	out := make([]string, 0, len(d.providers))
	for n := range d.providers {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Resolve picks the provider for verb: a provider the caller named (it must
// declare the verb); else, for search, the configured search provider; else
// the configured provider if it declares the verb; else native.
func (d *Dispatcher) Resolve(verb, requested string) (string, Provider, error) {
	if requested != "" {
		p, ok := d.providers[requested]
		if !ok {
			return "", nil, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonProvider, "unknown provider %q (known: %v)", requested, d.Names())
		}
		if !slices.Contains(p.Capabilities(), verb) {
			return "", nil, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonProvider, "provider %q does not declare %s", requested, verb)
		}
		return requested, p, nil
	}
	if verb == airlock.VerbSearch && d.cfg.SearchProvider != "" {
		if p, ok := d.providers[d.cfg.SearchProvider]; ok {
			return d.cfg.SearchProvider, p, nil
		}
	}
	if n := d.cfg.Provider; n != "" && n != NativeName {
		if p, ok := d.providers[n]; ok && slices.Contains(p.Capabilities(), verb) {
			return n, p, nil
		}
	}
	p, ok := d.providers[NativeName]
	if !ok {
		return "", nil, airlock.Errorf(airlock.CodeUnavailable, airlock.ReasonProvider, "no provider serves %s", verb)
	}
	return NativeName, p, nil
}

// Proxy merges the configured proxy into a call: the caller's pick (one of
// the operator's proxies, which egress enforces) wins, else the default.
func (d *Dispatcher) Proxy(requested string) string {
	if requested != "" {
		return requested
	}
	return d.cfg.Proxy
}
