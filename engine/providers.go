package engine

import (
	"github.com/airlockhq/airlock/internal/browse"
	"github.com/airlockhq/airlock/internal/provider/chromium"
	"github.com/airlockhq/airlock/internal/provider/native"
)

// Provider is one browse provider as the composition root registers it
// (WithProviders): its name, the verbs it declares, and its constructor,
// which reads its key or instance through the engine's getenv
// (WithGetenv). native and chromium are the engine's own and always
// registered.
type Provider = browse.Registration

// BrowseProvider is a built provider: it declares its verbs.
type BrowseProvider = browse.Provider

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
	return browse.Build(browse.Config{Provider: bc.Provider, SearchProvider: bc.SearchProvider, Proxy: bc.Proxy},
		browse.Own{Keyless: native.Search{DDGURL: bc.DuckDuckGoURL, BraveURL: bc.BraveURL, BingURL: bc.BingURL},
			UserAgent: crawlerUserAgent(), ChromiumName: ChromiumProvider,
			Chromium: chromium.New(chromium.Options{Renderer: r, UserAgent: crawlerUserAgent(), Concurrency: DefaultRenderPool})},
		getenv, providers)
}
