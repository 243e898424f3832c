// Package chromium is the Browse provider that renders pages in a headless
// Chromium before extracting them, so that a page that exists only after
// JavaScript runs yields the same Page shape as a natively fetched one.
//
// It serves fetch and crawl for the caller whose principal the call's
// context carries (airlock.PrincipalFromContext): each page is rendered by
// a Renderer in a browser session of that caller's tenant (the engine's
// browser sessions manager, whose sessions go through the tenant's egress
// proxy and policy). robots.txt, sitemaps and documents the browser does
// not render as HTML are fetched through the call's airlock.Doer.
package chromium

import (
	"context"
	"net/http"
	"strings"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/browser"
	"github.com/airlockhq/airlock/internal/crawl"
	"github.com/airlockhq/airlock/internal/provider/native"
)

// Name is the provider's name in the dispatcher.
const Name = "chromium"

// Renderer renders one URL in a browser session of p's tenant.
type Renderer interface {
	Render(ctx context.Context, p airlock.Principal, url string) (browser.Rendered, error)
}

// Options configure a Provider.
type Options struct {
	// Renderer renders the pages; nil makes a provider that only declares
	// its verbs (for validating a configuration): every call fails.
	Renderer Renderer
	// UserAgent is the crawler's User-Agent for robots.txt and sitemaps.
	UserAgent string
	// Concurrency bounds a crawl's concurrent renders (the render pool's
	// size per tenant); a crawl asking for more, or for the default, gets
	// this [1].
	Concurrency int
}

// Provider renders pages. Build it with New; it is safe for concurrent
// use.
type Provider struct{ opts Options }

// New returns a provider.
func New(opts Options) *Provider {
	if opts.Concurrency <= 0 {
		opts.Concurrency = 1
	}
	return &Provider{opts: opts}
}

// Capabilities implements browse.Provider.
func (*Provider) Capabilities() []string {
	return []string{airlock.VerbFetch, airlock.VerbCrawl}
}

// Scrape renders url and returns its HTML, final URL and status: the
// engine checks the final URL before extracting.
func (c *Provider) Scrape(ctx context.Context, d airlock.Doer, url string) ([]byte, string, int, error) {
	r, err := c.render(ctx, url)
	if err != nil {
		return nil, "", 0, err
	}
	return r.HTML, r.URL, r.Status, nil
}

// Fetch implements airlock.Fetcher (the engine uses Scrape, which lets it
// check the final URL before extracting).
func (c *Provider) Fetch(ctx context.Context, d airlock.Doer, req airlock.FetchRequest) (*airlock.Page, error) {
	r, err := c.render(ctx, req.URL)
	if err != nil {
		return nil, err
	}
	if r.Status < 200 || r.Status > 299 {
		return nil, &native.StatusError{URL: r.URL, Status: r.Status}
	}
	return native.ExtractResponse(ctx, &airlock.HTTPResponse{Status: r.Status, URL: r.URL, Body: r.HTML,
		Header: map[string][]string{"Content-Type": {"text/html; charset=utf-8"}}}, airlock.ExtractFull)
}

func (c *Provider) render(ctx context.Context, url string) (browser.Rendered, error) {
	p, ok := airlock.PrincipalFromContext(ctx)
	if !ok || c.opts.Renderer == nil {
		return browser.Rendered{}, airlock.Errorf(airlock.CodeInternal, airlock.ReasonChromium, "chromium provider: not an engine call")
	}
	return c.opts.Renderer.Render(ctx, p, url)
}

// Crawl runs the polite crawler with a Doer that renders HTML pages.
func (c *Provider) Crawl(ctx context.Context, d airlock.Doer, req airlock.CrawlRequest, emit func(*airlock.Page) error, progress func(airlock.CrawlProgress)) (*airlock.CrawlSummary, error) {
	if req.Concurrency == 0 || req.Concurrency > c.opts.Concurrency {
		req.Concurrency = c.opts.Concurrency
	}
	cfg := crawl.Config{Doer: renderDoer{c: c, d: d}, UserAgent: c.opts.UserAgent, TLSProfile: req.TLSProfile, Page: native.PageFunc}
	return crawl.Run(ctx, cfg, req, func(pg *airlock.Page) error {
		pg.Provider = Name
		return emit(pg)
	}, progress)
}

// renderDoer renders GET requests for pages in the browser and passes
// robots.txt, sitemaps and anything else to the call's Doer.
type renderDoer struct {
	c *Provider
	d airlock.Doer
}

func (r renderDoer) Do(ctx context.Context, req *airlock.HTTPRequest) (*airlock.HTTPResponse, error) {
	if req.Method != "" && req.Method != http.MethodGet || !renderable(req.URL) {
		return r.d.Do(ctx, req)
	}
	out, err := r.c.render(ctx, req.URL)
	if err != nil {
		return nil, err
	}
	ct := "text/html; charset=utf-8"
	if out.MIMEType != "" && !strings.Contains(out.MIMEType, "html") {
		// Not a document the browser rendered (a PDF, an image): fetch it
		// as the native crawler would.
		return r.d.Do(ctx, req)
	}
	return &airlock.HTTPResponse{Status: out.Status, URL: out.URL, Header: map[string][]string{"Content-Type": {ct}}, Body: out.HTML}, nil
}

// renderable reports whether a URL names a page rather than robots.txt or
// a sitemap.
func renderable(u string) bool {
	path := u
	if i := strings.IndexAny(path, "?#"); i >= 0 {
		path = path[:i]
	}
	path = strings.ToLower(path)
	return !strings.HasSuffix(path, "/robots.txt") && !strings.HasSuffix(path, ".xml") && !strings.HasSuffix(path, ".xml.gz")
}

var (
	_ airlock.Fetcher = (*Provider)(nil)
	_ airlock.Crawler = (*Provider)(nil)
)
