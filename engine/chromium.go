package engine

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/browser"
	"github.com/airlockhq/airlock/internal/crawl"
	"github.com/airlockhq/airlock/internal/provider/native"
)

// ChromiumProvider is the name of the Browse provider that renders pages
// in the engine's headless Chromium before extracting them.
const ChromiumProvider = "chromium"

// DefaultRenderPool is how many pooled browser sessions per tenant render
// pages for the chromium provider.
const DefaultRenderPool = 2

// chromiumProvider serves fetch and crawl by rendering each page in a
// pooled browser session of the caller's tenant (the same proxy and layer-1
// policy as browser sessions, with default action allow: the egress policy
// decides), then extracting the rendered DOM with the Browse extractor, so
// a page that exists only after JavaScript runs yields the same Page shape.
// robots.txt and sitemaps are fetched without the browser.
type chromiumProvider struct{ m *browserManager }

func (*chromiumProvider) Capabilities() []string {
	return []string{airlock.VerbFetch, airlock.VerbCrawl}
}

// principalOf is the principal of the call a Doer belongs to.
func principalOf(d airlock.Doer) (airlock.Principal, bool) {
	switch d := d.(type) {
	case *countingDoer:
		return d.call.Principal, true
	case *callDoer:
		return d.call.Principal, true
	}
	return airlock.Principal{}, false
}

// Scrape renders url; fetchIn checks the URL before and the final URL
// after, and extracts the HTML.
func (c *chromiumProvider) Scrape(ctx context.Context, d airlock.Doer, url string) ([]byte, string, int, error) {
	r, err := c.render(ctx, d, url)
	if err != nil {
		return nil, "", 0, err
	}
	return r.HTML, r.URL, r.Status, nil
}

// Fetch implements airlock.Fetcher (the engine uses Scrape, which lets it
// check the final URL before extracting).
func (c *chromiumProvider) Fetch(ctx context.Context, d airlock.Doer, req airlock.FetchRequest) (*airlock.Page, error) {
	r, err := c.render(ctx, d, req.URL)
	if err != nil {
		return nil, err
	}
	if r.Status < 200 || r.Status > 299 {
		return nil, &native.StatusError{URL: r.URL, Status: r.Status}
	}
	return native.ExtractResponse(ctx, &airlock.HTTPResponse{Status: r.Status, URL: r.URL, Body: r.HTML,
		Header: map[string][]string{"Content-Type": {"text/html; charset=utf-8"}}}, airlock.ExtractFull)
}

func (c *chromiumProvider) render(ctx context.Context, d airlock.Doer, url string) (browser.Rendered, error) {
	p, ok := principalOf(d)
	if !ok || c.m == nil {
		return browser.Rendered{}, airlock.Errorf(airlock.CodeInternal, airlock.ReasonChromium, "chromium provider: not an engine call")
	}
	bs, release, err := c.m.pool.get(ctx, c.m, p)
	if err != nil {
		return browser.Rendered{}, err
	}
	defer release()
	bs.lastUsed.Store(time.Now().UnixNano())
	defer func() { bs.lastUsed.Store(time.Now().UnixNano()) }()
	if bs.s.Crashed() {
		if err := bs.s.Restart(ctx); err != nil {
			return browser.Rendered{}, err
		}
	}
	return bs.s.Render(ctx, url)
}

// Crawl runs the polite crawler with a Doer that renders HTML pages.
func (c *chromiumProvider) Crawl(ctx context.Context, d airlock.Doer, req airlock.CrawlRequest, emit func(*airlock.Page) error, progress func(airlock.CrawlProgress)) (*airlock.CrawlSummary, error) {
	if req.Concurrency == 0 || req.Concurrency > DefaultRenderPool {
		req.Concurrency = DefaultRenderPool
	}
	cfg := crawl.Config{Doer: renderDoer{c: c, d: d}, UserAgent: crawlerUserAgent(), TLSProfile: req.TLSProfile, Page: native.PageFunc}
	return crawl.Run(ctx, cfg, req, func(pg *airlock.Page) error {
		pg.Provider = ChromiumProvider
		return emit(pg)
	}, progress)
}

// renderDoer renders GET requests for pages in the browser and passes
// robots.txt, sitemaps and anything else to the call's Doer.
type renderDoer struct {
	c *chromiumProvider
	d airlock.Doer
}

func (r renderDoer) Do(ctx context.Context, req *airlock.HTTPRequest) (*airlock.HTTPResponse, error) {
	if req.Method != "" && req.Method != http.MethodGet || !renderable(req.URL) {
		return r.d.Do(ctx, req)
	}
	out, err := r.c.render(ctx, r.d, req.URL)
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

// renderPool holds up to DefaultRenderPool ephemeral sessions per tenant
// for the chromium provider. They are not listed among the tenant's
// sessions and do not count against browser.max_sessions.
type renderPool struct {
	mu    sync.Mutex
	free  map[string][]*browserSession
	total map[string]int
	wake  map[string]chan struct{}
}

func (rp *renderPool) get(ctx context.Context, m *browserManager, p airlock.Principal) (*browserSession, func(), error) {
	key := p.Tenant
	for {
		rp.mu.Lock()
		if rp.free == nil {
			rp.free, rp.total, rp.wake = map[string][]*browserSession{}, map[string]int{}, map[string]chan struct{}{}
		}
		if n := len(rp.free[key]); n > 0 {
			bs := rp.free[key][n-1]
			rp.free[key] = rp.free[key][:n-1]
			rp.mu.Unlock()
			return bs, func() { rp.put(key, bs) }, nil
		}
		if rp.total[key] < DefaultRenderPool {
			rp.total[key]++
			rp.mu.Unlock()
			bs, err := m.openPooled(ctx, airlock.Principal{Tenant: p.Tenant})
			if err != nil {
				rp.mu.Lock()
				rp.total[key]--
				rp.signal(key)
				rp.mu.Unlock()
				return nil, nil, err
			}
			return bs, func() { rp.put(key, bs) }, nil
		}
		w := rp.wake[key]
		if w == nil {
			w = make(chan struct{})
			rp.wake[key] = w
		}
		rp.mu.Unlock()
		select {
		case <-w:
		case <-ctx.Done():
			return nil, nil, airlock.Errorf(airlock.CodeTimeout, airlock.ReasonRenderPool, "chromium provider: waiting for a browser: %v", ctx.Err())
		}
	}
}

// signal wakes the waiters of key; rp.mu is held.
func (rp *renderPool) signal(key string) {
	if w := rp.wake[key]; w != nil {
		close(w)
		delete(rp.wake, key)
	}
}

func (rp *renderPool) put(key string, bs *browserSession) {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	rp.free[key] = append(rp.free[key], bs)
	rp.signal(key)
}

// remove takes an idle session out of the pool for closing; false when
// it is rendering.
func (rp *renderPool) remove(bs *browserSession) bool {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	key := bs.principal.Tenant
	for i, f := range rp.free[key] {
		if f == bs {
			rp.free[key] = append(rp.free[key][:i], rp.free[key][i+1:]...)
			rp.total[key]--
			rp.signal(key)
			return true
		}
	}
	return false
}
