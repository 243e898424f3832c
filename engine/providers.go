package engine

import (
	"context"
	"slices"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/browse"
	"github.com/airlockhq/airlock/internal/extract"
	"github.com/airlockhq/airlock/internal/provider/brave"
	"github.com/airlockhq/airlock/internal/provider/dataforseo"
	"github.com/airlockhq/airlock/internal/provider/firecrawl"
	"github.com/airlockhq/airlock/internal/provider/native"
	"github.com/airlockhq/airlock/internal/provider/searxng"
)

// Environment variables holding provider credentials.
const (
	EnvFirecrawlKey = "FIRECRAWL_API_KEY"
	EnvDataForSEO   = "DATAFORSEO_AUTH"
	EnvBraveKey     = "BRAVE_SEARCH_API_KEY"
	EnvSearXNGURL   = "SEARXNG_URL"
)

// crawlerUserAgent is how the crawler identifies itself.
func crawlerUserAgent() string {
	return "airlock/" + Version + " (+https://github.com/airlockhq/airlock)"
}

type namedSearcher struct {
	name string
	s    airlock.Searcher
}

// searchCascade is native search: the search APIs whose keys are
// configured, in the order DataForSEO, Brave Search API, SearXNG, then the
// keyless engines; the first non-empty answer wins. Engine picks one.
type searchCascade struct {
	apis    []namedSearcher
	keyless *native.Search
}

func (c *searchCascade) Search(ctx context.Context, d airlock.Doer, req airlock.SearchRequest) ([]airlock.SearchResult, error) {
	if req.Engine != "" {
		for _, a := range c.apis {
			if a.name == req.Engine {
				r := req
				r.Engine = ""
				return a.s.Search(ctx, d, r)
			}
		}
		if !slices.Contains(native.DefaultEngines, req.Engine) {
			return nil, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonEngine, "search engine %q is not available (keyless: ddg, brave, bing; APIs need their key: dataforseo, brave-api, searxng)", req.Engine)
		}
		return c.keyless.Search(ctx, d, req)
	}
	var firstErr error
	for _, a := range c.apis {
		res, err := a.s.Search(ctx, d, req)
		if err == nil && len(res) > 0 {
			return res, nil
		}
		if err != nil && firstErr == nil {
			firstErr = err
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	res, err := c.keyless.Search(ctx, d, req)
	if err != nil && firstErr != nil && len(res) == 0 {
		return nil, err
	}
	return res, err
}

func pageExtractor(ctx context.Context, html []byte, pageURL, mode string) (*airlock.Page, error) {
	return extract.Extract(ctx, extract.Input{URL: pageURL, Body: html, ContentType: "text/html; charset=utf-8"}, extract.Options{Mode: mode})
}

// buildDispatcher registers native and every API provider whose key is in
// the environment, and checks the configured choices.
//
// The chromium provider is always registered; cp is the engine's (whose
// browser manager New sets after building the dispatcher), nil when only
// validating.
func buildDispatcher(bc BrowseConfig, getenv func(string) string, cp *chromiumProvider) (*browse.Dispatcher, error) {
	if cp == nil {
		cp = &chromiumProvider{}
	}
	d := browse.New(browse.Config{Provider: bc.Provider, SearchProvider: bc.SearchProvider, Proxy: bc.Proxy})
	cascade := &searchCascade{keyless: &native.Search{DDGURL: bc.DuckDuckGoURL, BraveURL: bc.BraveURL, BingURL: bc.BingURL}}
	type reg struct {
		name string
		p    browse.Provider
	}
	var regs []reg
	if v := getenv(EnvDataForSEO); v != "" {
		p, err := dataforseo.New(dataforseo.Options{Auth: v, BaseURL: bc.DataForSEOURL})
		if err != nil {
			return nil, err
		}
		regs = append(regs, reg{dataforseo.Name, p})
		cascade.apis = append(cascade.apis, namedSearcher{dataforseo.Name, p})
	}
	if v := getenv(EnvBraveKey); v != "" {
		p, err := brave.New(brave.Options{APIKey: v, BaseURL: bc.BraveAPIURL})
		if err != nil {
			return nil, err
		}
		regs = append(regs, reg{brave.Name, p})
		cascade.apis = append(cascade.apis, namedSearcher{brave.Name, p})
	}
	surl := bc.SearXNGURL
	if surl == "" {
		surl = getenv(EnvSearXNGURL)
	}
	if surl != "" {
		p, err := searxng.New(searxng.Options{URL: surl})
		if err != nil {
			return nil, err
		}
		regs = append(regs, reg{searxng.Name, p})
		cascade.apis = append(cascade.apis, namedSearcher{searxng.Name, p})
	}
	if v := getenv(EnvFirecrawlKey); v != "" || bc.FirecrawlURL != "" {
		p, err := firecrawl.New(firecrawl.Options{APIKey: v, BaseURL: bc.FirecrawlURL, Format: firecrawl.FormatRawHTML, Extract: pageExtractor})
		if err != nil {
			return nil, err
		}
		regs = append(regs, reg{firecrawl.Name, p})
	}
	if err := d.Register(browse.NativeName, native.New(cascade, crawlerUserAgent())); err != nil {
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
