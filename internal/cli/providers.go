package cli

import (
	"context"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/engine"
	"github.com/airlockhq/airlock/internal/extract"
	"github.com/airlockhq/airlock/internal/provider/brave"
	"github.com/airlockhq/airlock/internal/provider/dataforseo"
	"github.com/airlockhq/airlock/internal/provider/firecrawl"
	"github.com/airlockhq/airlock/internal/provider/searxng"
)

// providers is the registry of the browse providers beyond the engine's
// own (native, chromium): each reads its credential from the environment
// variable its package names, and one whose credential is absent is not
// available. The search APIs (dataforseo, brave-api, searxng) also serve
// native search, asked in this order before the keyless engines. bc
// supplies their base URLs (browse.*_url).
func providers(bc engine.BrowseConfig) []engine.Provider {
	search := []string{airlock.VerbSearch}
	return []engine.Provider{
		{Name: dataforseo.Name, Capabilities: search, New: func(getenv func(string) string) (engine.BrowseProvider, error) {
			v := getenv(dataforseo.EnvAuth)
			if v == "" {
				return nil, nil
			}
			return dataforseo.New(dataforseo.Options{Auth: v, BaseURL: bc.DataForSEOURL})
		}},
		{Name: brave.Name, Capabilities: search, New: func(getenv func(string) string) (engine.BrowseProvider, error) {
			v := getenv(brave.EnvAPIKey)
			if v == "" {
				return nil, nil
			}
			return brave.New(brave.Options{APIKey: v, BaseURL: bc.BraveAPIURL})
		}},
		{Name: searxng.Name, Capabilities: search, New: func(getenv func(string) string) (engine.BrowseProvider, error) {
			u := bc.SearXNGURL
			if u == "" {
				u = getenv(searxng.EnvURL)
			}
			if u == "" {
				return nil, nil
			}
			return searxng.New(searxng.Options{URL: u})
		}},
		{Name: firecrawl.Name, Capabilities: []string{airlock.VerbFetch, airlock.VerbCrawl, airlock.VerbSearch},
			New: func(getenv func(string) string) (engine.BrowseProvider, error) {
				// A self-hosted instance (firecrawl_url) may need no key.
				v := getenv(firecrawl.EnvAPIKey)
				if v == "" && bc.FirecrawlURL == "" {
					return nil, nil
				}
				return firecrawl.New(firecrawl.Options{APIKey: v, BaseURL: bc.FirecrawlURL, Format: firecrawl.FormatRawHTML, Extract: pageExtractor})
			}},
	}
}

// providerEnv names every environment variable the providers above read
// a credential (or an instance URL, which may carry one) from: `airlock
// exec` never passes them to its command.
var providerEnv = []string{dataforseo.EnvAuth, brave.EnvAPIKey, searxng.EnvURL, firecrawl.EnvAPIKey}

// pageExtractor is Firecrawl's HTML → Page: the extractor every other
// provider's pages go through.
func pageExtractor(ctx context.Context, html []byte, pageURL, mode string) (*airlock.Page, error) {
	return extract.Extract(ctx, extract.Input{URL: pageURL, Body: html, ContentType: "text/html; charset=utf-8"}, extract.Options{Mode: mode})
}
