package engine

import (
	"slices"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/browse"
	"github.com/airlockhq/airlock/internal/provider/chromium"
	"github.com/airlockhq/airlock/internal/provider/native"
)

// Provider is one browse provider as the composition root registers it
// (WithProviders): its name, the verbs it declares, and its constructor.
// native and chromium are the engine's own and always registered.
type Provider struct {
	Name string
	// Capabilities are the verbs it declares (airlock.VerbFetch,
	// VerbCrawl, VerbSearch); what New builds must declare the same.
	Capabilities []string
	// New builds the provider, reading its key or instance through getenv
	// (the engine's, WithGetenv). nil and no error: its key is absent, so
	// the provider is not available. The value implements
	// airlock.Fetcher, airlock.Crawler and airlock.Searcher for the verbs
	// it declares.
	New func(getenv func(string) string) (BrowseProvider, error)
}

// BrowseProvider is a built provider: it declares its verbs.
type BrowseProvider interface{ Capabilities() []string }

// WithProviders registers browse providers beyond native and chromium, in
// order. Those declaring search alone (search APIs) also serve native
// search, which asks them in this order before its keyless engines.
func WithProviders(ps ...Provider) Option {
	return func(o *options) { o.providers = append(o.providers, ps...) }
}

// crawlerUserAgent is how the crawler identifies itself.
func crawlerUserAgent() string {
	return "airlock/" + Version + " (+https://github.com/airlockhq/airlock)"
}

// dispatcher is buildDispatcher of the options' providers, for
// config.Compile (r nil: validating) and New.
func (o *options) dispatcher(r chromium.Renderer) func(BrowseConfig) (*browse.Dispatcher, error) {
	return func(bc BrowseConfig) (*browse.Dispatcher, error) {
		return buildDispatcher(bc, o.getenv, o.providers, r)
	}
}

// buildDispatcher registers native, chromium (rendering with r, the
// engine's browser sessions; nil when only validating) and every
// registered provider that getenv makes available, and checks the
// configured choices.
func buildDispatcher(bc BrowseConfig, getenv func(string) string, providers []Provider, r chromium.Renderer) (*browse.Dispatcher, error) {
	cp := chromium.New(chromium.Options{Renderer: r, UserAgent: crawlerUserAgent(), Concurrency: DefaultRenderPool})
	d := browse.New(browse.Config{Provider: bc.Provider, SearchProvider: bc.SearchProvider, Proxy: bc.Proxy})
	search := &native.WithAPIs{Keyless: &native.Search{DDGURL: bc.DuckDuckGoURL, BraveURL: bc.BraveURL, BingURL: bc.BingURL}}
	type reg struct {
		name string
		p    browse.Provider
	}
	var regs []reg
	for _, p := range providers {
		bp, err := p.New(getenv)
		if err != nil {
			return nil, err
		}
		if bp == nil {
			continue
		}
		if !slices.Equal(bp.Capabilities(), p.Capabilities) {
			return nil, airlock.Errorf(airlock.CodeInternal, airlock.ReasonProvider, "provider %s declares %v, registered as %v", p.Name, bp.Capabilities(), p.Capabilities)
		}
		regs = append(regs, reg{p.Name, bp})
		if s, ok := bp.(airlock.Searcher); ok && slices.Equal(p.Capabilities, []string{airlock.VerbSearch}) {
			search.APIs = append(search.APIs, native.API{Name: p.Name, Searcher: s})
		}
	}
	if err := d.Register(browse.NativeName, native.New(search, crawlerUserAgent())); err != nil {
		return nil, err
	}
	if err := d.Register(ChromiumProvider, cp); err != nil {
		return nil, err
	}
	for _, r := range regs {
		if err := d.Register(r.name, r.p); err != nil {
			return nil, err
		}
	}
	if err := d.Validate(); err != nil {
		return nil, err
	}
	return d, nil
}
