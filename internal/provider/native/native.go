// Package native is Airlock's built-in, keyless browse provider: fetch
// through the engine's guarded client with a browser TLS profile, a polite
// crawler, and a cascade of keyless search engines. It never dials: every
// request goes through the airlock.Doer the dispatcher hands it.
package native

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/crawl"
	"github.com/airlockhq/airlock/internal/extract"
)

// Name is the provider's name in Page.Provider.
const Name = "native"

// Provider serves fetch, crawl and search.
type Provider struct {
	Searcher  airlock.Searcher
	UserAgent string // the crawler's User-Agent; "" uses crawl's default
}

// New returns the native provider with the given searcher (nil: the
// keyless cascade with default engines).
func New(s airlock.Searcher, userAgent string) *Provider {
	if s == nil {
		s = &Search{}
	}
	return &Provider{Searcher: s, UserAgent: userAgent}
}

// Capabilities implements browse.Provider.
func (p *Provider) Capabilities() []string {
	return []string{airlock.VerbFetch, airlock.VerbCrawl, airlock.VerbSearch}
}

// StatusError is a non-2xx answer to a fetch.
type StatusError struct {
	URL    string
	Status int
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("fetch %s: HTTP status %d %s", e.URL, e.Status, http.StatusText(e.Status))
}

// ErrorCode and ErrorReason place it in the error vocabulary.
func (e *StatusError) ErrorCode() string   { return string(airlock.CodeUpstream) }
func (e *StatusError) ErrorReason() string { return string(airlock.ReasonHTTPStatus) }

// Fetch implements airlock.Fetcher: one page a caller asked for, with the
// chrome TLS profile and headers unless the request names another.
func (p *Provider) Fetch(ctx context.Context, d airlock.Doer, req airlock.FetchRequest) (*airlock.Page, error) {
	start := time.Now()
	profile := req.TLSProfile
	if profile == "" {
		profile = "chrome"
	}
	resp, err := d.Do(ctx, &airlock.HTTPRequest{URL: req.URL, TLSProfile: profile, Proxy: req.Proxy, Cache: req.Cache, Narrow: req.Narrow})
	if err != nil {
		return nil, err
	}
	if (resp.Status < 200 || resp.Status > 299) && !req.ErrorPages {
		return nil, &StatusError{URL: resp.URL, Status: resp.Status}
	}
	page, err := ExtractResponse(ctx, resp, airlock.ExtractFull)
	if err != nil {
		return nil, err
	}
	page.RequestedURL = req.URL
	page.Provider = Name
	page.ElapsedMS = time.Since(start).Milliseconds()
	page.Cache = resp.Cache
	return page, nil
}

// ExtractResponse turns a response into a Page with the fetch fields set.
func ExtractResponse(ctx context.Context, resp *airlock.HTTPResponse, mode string) (*airlock.Page, error) {
	h := http.Header(resp.Header)
	page, err := extract.Extract(ctx, extract.Input{URL: resp.URL, Body: resp.Body, ContentType: h.Get("Content-Type"), Header: h}, extract.Options{Mode: mode})
	if err != nil {
		return nil, err
	}
	page.URL = resp.URL
	page.Status = resp.Status
	if page.ContentType == "" {
		page.ContentType = h.Get("Content-Type")
	}
	page.FetchedAt = time.Now().UTC()
	return page, nil
}

// Crawl implements airlock.Crawler with the polite crawler: robots.txt,
// crawl-delay and per-host limits, the go TLS profile and an identifying
// User-Agent unless the request asks otherwise.
func (p *Provider) Crawl(ctx context.Context, d airlock.Doer, req airlock.CrawlRequest, emit func(*airlock.Page) error, progress func(airlock.CrawlProgress)) (*airlock.CrawlSummary, error) {
	cfg := crawl.Config{Doer: d, UserAgent: p.UserAgent, TLSProfile: req.TLSProfile, Page: pageFunc}
	return crawl.Run(ctx, cfg, req, func(pg *airlock.Page) error {
		pg.Provider = Name
		if emit == nil { // a crawl for its summary only
			return nil
		}
		return emit(pg)
	}, progress)
}

// PageFunc is the native crawler's extractor (the Browse extractor, its
// links and robots directives), for crawlers that fetch pages another way,
// such as the chromium provider.
var PageFunc crawl.PageFunc = pageFunc

func pageFunc(ctx context.Context, resp *airlock.HTTPResponse, mode string) (crawl.Extracted, error) {
	if mode == airlock.ExtractNone {
		// Discovery reads links and meta tags in one tokenizer pass; what
		// it cannot read the same way goes to the extractor. It takes the
		// extractor's turn and memory budget, and ends with ctx, as the
		// extractor does; the extractor takes its own after it.
		release, err := extract.Admit(ctx, len(resp.Body))
		if err != nil {
			return crawl.Extracted{}, err
		}
		ex, ok, err := crawl.Discover(ctx, resp)
		release()
		if err != nil {
			return crawl.Extracted{}, err
		}
		if ok {
			return ex, nil
		}
	}
	page, err := ExtractResponse(ctx, resp, mode)
	if err != nil {
		return crawl.Extracted{}, err
	}
	links := make([]string, 0, len(page.Links))
	for _, l := range page.Links {
		links = append(links, l.URL)
	}
	noindex, nofollow := extract.Robots(extract.Input{URL: resp.URL, Body: resp.Body}, page)
	return crawl.Extracted{Page: page, Links: links, NoIndex: noindex, NoFollow: nofollow}, nil
}

// Search implements airlock.Searcher with the keyless cascade.
func (p *Provider) Search(ctx context.Context, d airlock.Doer, req airlock.SearchRequest) ([]airlock.SearchResult, error) {
	return p.Searcher.Search(ctx, d, req)
}

var (
	_ airlock.Fetcher  = (*Provider)(nil)
	_ airlock.Crawler  = (*Provider)(nil)
	_ airlock.Searcher = (*Provider)(nil)
)
