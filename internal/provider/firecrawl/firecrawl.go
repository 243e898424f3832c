// Package firecrawl is the Firecrawl provider: fetch, crawl and search
// delegated to a Firecrawl service (api.firecrawl.dev, or a self-hosted
// instance at a configured base URL), which renders JavaScript and gets past
// bot walls that the native provider cannot.
//
// Firecrawl's own requests to the target site happen on Firecrawl's machines,
// outside Airlock's egress floor: Airlock's policy applies to the call to the
// Firecrawl API, and the dispatcher runs the policy on the target URL before
// delegating and on every final URL the provider reports, but nothing
// Airlock does can stop the remote service from following a redirect into,
// or loading a subresource from, an address Airlock would refuse. A
// self-hosted Firecrawl must be given its own network guard.
//
// Pages keep the one Page shape: the provider asks Firecrawl for the page's
// HTML (format "html", or "rawHtml" when configured) and runs it through the
// Extractor the engine passes in, the same extractor the native provider
// uses; only Page.Provider tells them apart.
//
// The credential is FIRECRAWL_API_KEY, handed to New by the provider registry (internal/cli); it is
// sent only as a Bearer token and never appears in results or errors.
// Requests go through the airlock.Doer the dispatcher hands the provider: the
// provider never dials.
//
// API reference (v1): https://docs.firecrawl.dev/api-reference/v1-endpoint/scrape
// (POST /v1/scrape {url, formats} → {success, data: {html, rawHtml,
// metadata: {title, description, language, sourceURL, url, statusCode,
// error}}}), .../v1-endpoint/crawl-post (POST /v1/crawl {url, limit,
// maxDepth, allowSubdomains, ignoreSitemap, scrapeOptions} → {success, id,
// url}), .../v1-endpoint/crawl-get (GET /v1/crawl/{id} → {status:
// scraping|completed|failed, total, completed, creditsUsed, expiresAt,
// next, data: [documents]}), .../v1-endpoint/crawl-delete, and
// .../v1-endpoint/search (POST /v1/search {query, limit} → {success, data:
// [{url, title, description}]}); errors are {success: false, error} with
// 401, 402, 408, 429 and 5xx statuses.
package firecrawl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	airlock "github.com/airlockhq/airlock"

	"github.com/airlockhq/airlock/internal/provider/apiutil"
)

// Provider facts.
const (
	Name           = "firecrawl"         // Page.Provider and SearchResult.Engine
	EnvAPIKey      = "FIRECRAWL_API_KEY" // the environment variable the provider registry (internal/cli) reads the key from
	DefaultBaseURL = "https://api.firecrawl.dev"

	FormatHTML    = "html"    // Firecrawl's cleaned HTML of the page
	FormatRawHTML = "rawHtml" // the page's HTML as rendered, head included

	DefaultPollInterval = 2 * time.Second  // between crawl status requests
	DefaultSearchLimit  = 10               // results when SearchRequest.Limit is 0
	MaxSearchLimit      = 100              // the API's largest search limit
	DefaultMaxPages     = 25               // crawl pages when CrawlRequest.MaxPages is 0
	DefaultDepth        = 2                // crawl depth when CrawlRequest.Depth is 0
	DefaultConcurrency  = 8                // scrapes at once for a URL-list crawl
	DefaultPageTimeout  = 25 * time.Second // per page when CrawlRequest.Timeout is 0
	// TLSProfile of API requests: an API client, not a browser.
	TLSProfile = "go"
	// maxNextPages bounds the result pages (of up to 10 MB each) read
	// from a finished crawl.
	maxNextPages = 1000
)

// Extractor turns the HTML of pageURL into a Page, in mode
// airlock.ExtractFull or airlock.ExtractNone. The engine passes the same
// extractor the native provider uses (internal/extract.Extract with an
// Input of URL pageURL, Body html and an HTML content type). The provider
// fills in the fetch fields (URL, RequestedURL, Status, FetchedAt,
// Provider, ElapsedMS) afterwards.
type Extractor func(ctx context.Context, html []byte, pageURL, mode string) (*airlock.Page, error)

// Options configure a Provider.
type Options struct {
	// APIKey is FIRECRAWL_API_KEY. Required for the hosted service; a
	// self-hosted instance without authentication may leave it empty.
	APIKey string
	// BaseURL replaces DefaultBaseURL, for a self-hosted instance.
	BaseURL string
	// Format is the scrape format: FormatHTML (the default, as "" means) or
	// FormatRawHTML.
	Format string
	// PollInterval is the wait between crawl status requests; 0 means
	// DefaultPollInterval.
	PollInterval time.Duration
	// Extract builds Pages from HTML. Nil gives pages with Firecrawl's
	// metadata only (title, description, language), no text.
	Extract Extractor
}

// Provider is the Firecrawl provider. Build it with New; it is safe for
// concurrent use.
type Provider struct {
	base    *url.URL
	key     string
	format  string
	poll    time.Duration
	extract Extractor
}

// New returns a Provider. Errors (code invalid, reason provider_config)
// never contain the key.
func New(opts Options) (*Provider, error) {
	raw := opts.BaseURL
	if raw == "" {
		raw = DefaultBaseURL
	}
	u, err := url.Parse(strings.TrimSuffix(raw, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" {
		return nil, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonProviderConfig, "firecrawl: base URL %q is not an absolute http(s) URL without userinfo or query", raw)
	}
	key := strings.TrimSpace(opts.APIKey)
	if key == "" && opts.BaseURL == "" {
		return nil, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonProviderConfig, "firecrawl: %s is empty (only a self-hosted base URL may go without a key)", EnvAPIKey)
	}
	format := opts.Format
	switch format {
	case "":
		format = FormatHTML
	case FormatHTML, FormatRawHTML:
	default:
		return nil, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonProviderConfig, "firecrawl: format %q is neither %s nor %s", format, FormatHTML, FormatRawHTML)
	}
	poll := opts.PollInterval
	if poll <= 0 {
		poll = DefaultPollInterval
	}
	return &Provider{base: u, key: key, format: format, poll: poll, extract: opts.Extract}, nil
}

// Capabilities returns the verbs the provider implements: fetch, crawl and
// search.
func (p *Provider) Capabilities() []string {
	return []string{airlock.VerbFetch, airlock.VerbCrawl, airlock.VerbSearch}
}

// ---------------------------------------------------------------------------
// API shapes

// document is a scraped page as the API returns it.
type document struct {
	HTML     string          `json:"html"`
	RawHTML  string          `json:"rawHtml"`
	Metadata json.RawMessage `json:"metadata"`
	meta     metadata
}

// metadata is the part of a document's metadata the provider reads. The
// API's metadata also carries every meta tag of the page, some as arrays,
// hence the lenient decoding.
type metadata struct {
	Title, Description, Language string
	SourceURL                    string // the URL asked for
	URL                          string // the final URL, after redirects
	StatusCode                   int
	Error                        string
}

func (d *document) decode() {
	var m map[string]json.RawMessage
	if json.Unmarshal(d.Metadata, &m) != nil {
		return
	}
	d.meta = metadata{
		Title: str(m["title"]), Description: str(m["description"]), Language: str(m["language"]),
		SourceURL: str(m["sourceURL"]), URL: str(m["url"]), Error: str(m["error"]),
	}
	json.Unmarshal(m["statusCode"], &d.meta.StatusCode)
}

// str reads a JSON string, or the first string of an array.
func str(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var a []string
	if json.Unmarshal(raw, &a) == nil && len(a) > 0 {
		return a[0]
	}
	return ""
}

// html returns the document's HTML in the configured format, else the
// other one.
func (d *document) html(format string) string {
	if (format == FormatRawHTML && d.RawHTML != "") || d.HTML == "" {
		return d.RawHTML
	}
	return d.HTML
}

// finalURL is where the page was in the end.
func (d *document) finalURL(asked string) string {
	for _, u := range []string{d.meta.URL, d.meta.SourceURL} {
		if u != "" {
			return u
		}
	}
	return asked
}

type envelope struct {
	Success *bool  `json:"success"`
	Error   string `json:"error"`
}

// ---------------------------------------------------------------------------
// Scrape and fetch

// Scrape asks Firecrawl for one page: its HTML (in the configured format),
// the final URL Firecrawl reports (metadata.url, else metadata.sourceURL,
// else url) and the status the target answered with (metadata.statusCode).
// A target's error status is not an error of Scrape: it is in status.
//
// Errors: an *Error when the API refuses (401/403: unavailable,
// provider_auth; 429: rate_limited; others: upstream, http_status) or
// answers success false (upstream, provider_error); the Doer's error,
// wrapped with its classification kept. No message contains the key.
func (p *Provider) Scrape(ctx context.Context, d airlock.Doer, pageURL string) (html []byte, finalURL string, status int, err error) {
	doc, err := p.scrape(ctx, d, pageURL, "", 0)
	if err != nil {
		return nil, "", 0, err
	}
	html, finalURL, status = []byte(doc.html(p.format)), doc.finalURL(pageURL), doc.meta.StatusCode
	if status == 0 {
		status = http.StatusOK
	}
	return html, finalURL, status, nil
}

func (p *Provider) scrape(ctx context.Context, d airlock.Doer, pageURL, proxy string, timeout time.Duration) (*document, error) {
	body := map[string]any{"url": pageURL, "formats": []string{p.format}}
	if timeout > 0 {
		body["timeout"] = timeout.Milliseconds()
	}
	var r struct {
		envelope
		Data *document `json:"data"`
	}
	if err := p.call(ctx, d, http.MethodPost, p.endpoint("/v1/scrape"), body, proxy, &r); err != nil {
		return nil, err
	}
	if (r.Success != nil && !*r.Success) || r.Data == nil {
		return nil, p.apiError(http.StatusOK, r.Error, "scrape answered without data")
	}
	r.Data.decode()
	return r.Data, nil
}

// Fetch implements airlock.Fetcher through Scrape: Firecrawl renders the
// page, the Extractor turns its HTML into the Page. A target status outside
// 2xx is a *StatusError (code upstream, reason http_status).
func (p *Provider) Fetch(ctx context.Context, d airlock.Doer, req airlock.FetchRequest) (*airlock.Page, error) {
	start := time.Now()
	doc, err := p.scrape(ctx, d, req.URL, req.Proxy, 0)
	if err != nil {
		return nil, err
	}
	final, status := doc.finalURL(req.URL), doc.meta.StatusCode
	if status == 0 {
		status = http.StatusOK
	}
	if status < 200 || status > 299 {
		return nil, &StatusError{URL: final, Status: status, Detail: p.redact(doc.meta.Error)}
	}
	page, err := p.page(ctx, doc, final, airlock.ExtractFull)
	if err != nil {
		return nil, err
	}
	page.RequestedURL, page.Status, page.FetchedAt = req.URL, status, start.UTC()
	page.ElapsedMS = time.Since(start).Milliseconds()
	return page, nil
}

// page builds the Page of a document found at final.
func (p *Provider) page(ctx context.Context, doc *document, final, mode string) (*airlock.Page, error) {
	html := doc.html(p.format)
	var page *airlock.Page
	if p.extract != nil {
		var err error
		if page, err = p.extract(ctx, []byte(html), final, mode); err != nil {
			return nil, fmt.Errorf("firecrawl: extract %s: %w", final, err)
		}
	}
	if page == nil {
		page = &airlock.Page{Title: doc.meta.Title, Description: doc.meta.Description, Lang: doc.meta.Language}
	}
	page.URL, page.Provider = final, Name
	if page.ContentType == "" {
		page.ContentType = "text/html; charset=utf-8"
	}
	return page, nil
}

// StatusError is a target page's error status, as Firecrawl reports it.
type StatusError struct {
	URL    string
	Status int
	Detail string // Firecrawl's metadata.error, if any
}

func (e *StatusError) Error() string {
	s := fmt.Sprintf("firecrawl: %s answered HTTP %d %s", e.URL, e.Status, http.StatusText(e.Status))
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

// ErrorCode returns upstream.
func (e *StatusError) ErrorCode() string { return string(airlock.CodeUpstream) }

// ErrorReason returns http_status.
func (e *StatusError) ErrorReason() string { return string(airlock.ReasonHTTPStatus) }

// ---------------------------------------------------------------------------
// Crawl

// Crawl implements airlock.Crawler. A seed is crawled by Firecrawl (POST
// /v1/crawl with the request's limits, then GET /v1/crawl/{id} every poll
// interval); a URL list is scraped page by page, req.Concurrency at a time.
// Pages are sent to emit as they arrive, deduplicated by URL; target error
// statuses and Firecrawl's per-page errors go to the summary's Skipped.
// The crawl stops, and a running Firecrawl job is cancelled (DELETE
// /v1/crawl/{id}), at req.MaxPages pages, when ctx ends (the context's error
// is returned with the summary) or when emit fails (its error is returned).
//
// robots.txt, politeness and the egress floor on the target site are
// Firecrawl's to apply, not Airlock's; IgnoreRobots and PerHostConcurrency
// are not passed on.
func (p *Provider) Crawl(ctx context.Context, d airlock.Doer, req airlock.CrawlRequest, emit func(*airlock.Page) error, progress func(airlock.CrawlProgress)) (*airlock.CrawlSummary, error) {
	c := &crawler{p: p, d: d, req: req, emit: emit, progress: progress, start: time.Now(), seen: map[string]bool{}}
	c.max = req.MaxPages
	if c.max <= 0 {
		c.max = DefaultMaxPages
	}
	c.mode = req.Extract
	if c.mode == "" {
		c.mode = airlock.ExtractFull
	}
	c.timeout = time.Duration(req.Timeout)
	if c.timeout <= 0 {
		c.timeout = DefaultPageTimeout
	}
	var err error
	switch {
	case req.Seed != "":
		err = c.seed(ctx)
	case len(req.URLs) > 0:
		err = c.list(ctx)
	default:
		return nil, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonCrawlTarget, "firecrawl: crawl needs a seed or URLs")
	}
	return c.summary(), err
}

type crawler struct {
	p        *Provider
	d        airlock.Doer
	req      airlock.CrawlRequest
	emit     func(*airlock.Page) error
	progress func(airlock.CrawlProgress)
	start    time.Time
	max      int
	timeout  time.Duration
	mode     string // airlock.ExtractFull or airlock.ExtractNone

	mu      sync.Mutex
	seen    map[string]bool
	sum     airlock.CrawlSummary
	stopped bool
}

func (c *crawler) summary() *airlock.CrawlSummary {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.sum
	s.Skipped = append([]airlock.Skipped{}, c.sum.Skipped...)
	el := time.Since(c.start)
	s.ElapsedMS = el.Milliseconds()
	if el > 0 {
		s.PagesPerS = float64(s.Pages) / el.Seconds()
	}
	return &s
}

// errLimit stops a crawl that has its pages.
var errLimit = errors.New("firecrawl: page limit reached")

// take handles one document: a skipped URL, a page to emit, or a duplicate.
// It returns errLimit once the crawl has its pages, or emit's error.
// Extraction runs outside the lock; emit calls never overlap.
func (c *crawler) take(ctx context.Context, doc *document, asked string) error {
	doc.decode()
	final := doc.finalURL(asked)
	key := doc.meta.SourceURL
	if key == "" {
		key = final
	}
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return errLimit
	}
	if c.seen[key] {
		c.mu.Unlock()
		return nil
	}
	c.seen[key] = true
	c.sum.Fetched++
	if st := doc.meta.StatusCode; st >= 400 || (doc.meta.Error != "" && doc.html(c.p.format) == "") {
		reason, detail := airlock.ReasonHTTPStatus, "HTTP "+strconv.Itoa(st)
		if st < 400 {
			reason, detail = airlock.ReasonError, ""
		}
		if doc.meta.Error != "" {
			detail = strings.TrimSpace(detail + " " + c.p.redact(doc.meta.Error))
		}
		c.skip(final, reason, detail)
		c.mu.Unlock()
		return nil
	}
	c.mu.Unlock()

	page, err := c.p.page(ctx, doc, final, c.mode)
	if err != nil {
		c.mu.Lock()
		c.skip(final, airlock.ReasonError, airlock.PublicMessageOf(err))
		c.mu.Unlock()
		return nil
	}
	page.RequestedURL = asked
	if page.RequestedURL == "" {
		page.RequestedURL = key
	}
	page.Status = doc.meta.StatusCode
	if page.Status == 0 {
		page.Status = http.StatusOK
	}
	page.FetchedAt = time.Now().UTC()

	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return errLimit
	}
	if err := c.emit(page); err != nil {
		c.stopped, c.sum.Stopped = true, "emit"
		return err
	}
	c.sum.Pages++
	c.sum.Bytes += int64(len(doc.html(c.p.format)))
	if c.sum.Pages >= c.max {
		c.stopped, c.sum.Stopped = true, "limit"
		return errLimit
	}
	return nil
}

// skip records a URL that gave no page; c.mu is held.
func (c *crawler) skip(u string, reason airlock.Reason, detail string) {
	c.sum.Failed++
	c.sum.Skipped = append(c.sum.Skipped, airlock.Skipped{URL: u, Reason: reason, Detail: detail})
}

func (c *crawler) report(queued int) {
	if c.progress == nil {
		return
	}
	c.mu.Lock()
	ev := airlock.CrawlProgress{Done: c.sum.Pages, Queued: queued, Failed: c.sum.Failed}
	if el := time.Since(c.start).Seconds(); el > 0 {
		ev.PagesPerS = float64(c.sum.Pages) / el
	}
	c.mu.Unlock()
	c.progress(ev)
}

// stop records why the crawl ended early.
func (c *crawler) stop(why string) {
	c.mu.Lock()
	if c.sum.Stopped == "" {
		c.sum.Stopped = why
	}
	c.stopped = true
	c.mu.Unlock()
}

// seed runs a Firecrawl crawl job from req.Seed.
func (c *crawler) seed(ctx context.Context) error {
	depth := c.req.Depth
	if depth <= 0 {
		depth = DefaultDepth
	}
	body := map[string]any{
		"url":             c.req.Seed,
		"limit":           c.max,
		"maxDepth":        depth,
		"allowSubdomains": c.req.Subdomains,
		"ignoreSitemap":   !c.req.Sitemap,
		"scrapeOptions":   map[string]any{"formats": []string{c.p.format}, "timeout": c.timeout.Milliseconds()},
	}
	var started struct {
		envelope
		ID string `json:"id"`
	}
	if err := c.p.call(ctx, c.d, http.MethodPost, c.p.endpoint("/v1/crawl"), body, c.req.Proxy, &started); err != nil {
		return err
	}
	if (started.Success != nil && !*started.Success) || started.ID == "" {
		return c.p.apiError(http.StatusOK, started.Error, "crawl answered without a job id")
	}
	statusURL := c.p.endpoint("/v1/crawl/" + url.PathEscape(started.ID))
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			c.stop("canceled")
			c.cancelJob(ctx, statusURL)
			return ctx.Err()
		case <-timer.C:
		}
		st, err := c.status(ctx, statusURL)
		if err != nil {
			if ctx.Err() != nil {
				c.stop("canceled")
				c.cancelJob(ctx, statusURL)
				return ctx.Err()
			}
			c.cancelJob(ctx, statusURL)
			return err
		}
		err = c.takeAll(ctx, st.Data, "")
		for pages := 0; err == nil && st.Status == "completed" && st.Next != ""; pages++ {
			if pages == maxNextPages {
				err = c.p.apiError(http.StatusOK, "", "too many result pages")
				break
			}
			next, nerr := c.p.sameOrigin(st.Next)
			if nerr != nil {
				return nerr
			}
			if st, err = c.status(ctx, next); err == nil {
				err = c.takeAll(ctx, st.Data, "")
			}
		}
		switch {
		case errors.Is(err, errLimit):
			c.cancelJob(ctx, statusURL)
			return nil
		case err != nil:
			c.cancelJob(ctx, statusURL)
			return err
		}
		c.mu.Lock()
		c.sum.Queued = max(c.sum.Queued, st.Total)
		c.mu.Unlock()
		c.report(max(st.Total-st.Completed, 0))
		switch st.Status {
		case "completed":
			return nil
		case "failed", "cancelled":
			return &Error{Status: http.StatusOK, Code: airlock.CodeUpstream, Reason: airlock.ReasonProviderError,
				Message: c.p.redact(strings.TrimSpace("crawl job " + st.Status + " " + st.Error))}
		}
		timer.Reset(c.p.poll)
	}
}

type crawlStatus struct {
	envelope
	Status    string      `json:"status"`
	Total     int         `json:"total"`
	Completed int         `json:"completed"`
	Next      string      `json:"next"`
	Data      []*document `json:"data"`
}

func (c *crawler) status(ctx context.Context, u string) (*crawlStatus, error) {
	var st crawlStatus
	if err := c.p.call(ctx, c.d, http.MethodGet, u, nil, c.req.Proxy, &st); err != nil {
		return nil, err
	}
	if st.Success != nil && !*st.Success {
		return nil, c.p.apiError(http.StatusOK, st.Error, "crawl status failed")
	}
	return &st, nil
}

func (c *crawler) takeAll(ctx context.Context, docs []*document, asked string) error {
	for _, doc := range docs {
		if doc == nil {
			continue
		}
		if err := c.take(ctx, doc, asked); err != nil {
			return err
		}
	}
	return nil
}

// cancelJob asks Firecrawl to stop the job, best effort, even after ctx
// ended, for a few seconds at most.
func (c *crawler) cancelJob(ctx context.Context, statusURL string) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	c.p.call(cctx, c.d, http.MethodDelete, statusURL, nil, c.req.Proxy, nil)
}

// list scrapes req.URLs, Concurrency at a time.
func (c *crawler) list(parent context.Context) error {
	n := c.req.Concurrency
	if n <= 0 {
		n = DefaultConcurrency
	}
	ctx, cancel := context.WithCancelCause(parent)
	defer cancel(nil)
	c.mu.Lock()
	c.sum.Queued = len(c.req.URLs)
	c.mu.Unlock()
	remaining := len(c.req.URLs)
	var wg sync.WaitGroup
	sem := make(chan struct{}, n)
loop:
	for _, u := range c.req.URLs {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			break loop
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			doc, err := c.p.scrape(ctx, c.d, u, c.req.Proxy, c.timeout)
			switch {
			case err != nil && ctx.Err() != nil:
				return
			case err != nil:
				var ae *Error
				if errors.As(err, &ae) && ae.Reason == airlock.ReasonProviderAuth {
					cancel(err) // every other page would fail the same way
					return
				}
				c.mu.Lock()
				c.skip(u, airlock.ReasonError, airlock.PublicMessageOf(err))
				c.mu.Unlock()
			default:
				if err := c.take(ctx, doc, u); err != nil {
					cancel(err) // errLimit, or emit's error
					return
				}
			}
			c.mu.Lock()
			remaining--
			left := remaining
			c.mu.Unlock()
			c.report(left)
		}()
	}
	wg.Wait()
	if err := parent.Err(); err != nil {
		c.stop("canceled")
		return err
	}
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, errLimit) && !errors.Is(cause, context.Canceled) {
		return cause
	}
	return nil
}

// ---------------------------------------------------------------------------
// Search

// Search implements airlock.Searcher with POST /v1/search: Firecrawl's web
// search results (url, title, description), deduplicated by URL, cut to
// req.Limit (0: DefaultSearchLimit, at most MaxSearchLimit) and ranked
// from 1.
func (p *Provider) Search(ctx context.Context, d airlock.Doer, req airlock.SearchRequest) ([]airlock.SearchResult, error) {
	q := strings.TrimSpace(req.Query)
	if q == "" {
		return nil, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonEmptyQuery, "firecrawl: empty query")
	}
	limit := req.Limit
	if limit <= 0 {
		limit = DefaultSearchLimit
	}
	limit = min(limit, MaxSearchLimit)
	var r struct {
		envelope
		Data json.RawMessage `json:"data"`
	}
	if err := p.call(ctx, d, http.MethodPost, p.endpoint("/v1/search"), map[string]any{"query": q, "limit": limit}, req.Proxy, &r); err != nil {
		return nil, err
	}
	if r.Success != nil && !*r.Success {
		return nil, p.apiError(http.StatusOK, r.Error, "search failed")
	}
	type hit struct{ URL, Title, Description string }
	var hits []hit
	if json.Unmarshal(r.Data, &hits) != nil {
		// The v2 shape: data.web[].
		var v2 struct{ Web []hit }
		if err := json.Unmarshal(r.Data, &v2); err != nil && len(r.Data) > 0 && string(r.Data) != "null" {
			return nil, p.apiError(http.StatusOK, "", "unreadable search results")
		}
		hits = v2.Web
	}
	out := make([]airlock.SearchResult, 0, min(len(hits), limit))
	seen := map[string]bool{}
	for _, h := range hits {
		key := strings.TrimSuffix(strings.SplitN(h.URL, "#", 2)[0], "/")
		if h.URL == "" || seen[key] {
			continue
		}
		seen[key] = true
		out = append(out, airlock.SearchResult{
			Title:   strings.Join(strings.Fields(h.Title), " "),
			URL:     h.URL,
			Snippet: strings.Join(strings.Fields(h.Description), " "),
			Engine:  Name,
			Rank:    len(out) + 1,
		})
		if len(out) == limit {
			break
		}
	}
	return out, nil
}

// ---------------------------------------------------------------------------
// HTTP

func (p *Provider) endpoint(path string) string { return p.base.String() + path }

// sameOrigin accepts a URL the API handed back (a crawl's next page) only
// on the API's own origin: the key must not follow it anywhere else.
func (p *Provider) sameOrigin(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err == nil && !u.IsAbs() {
		u = p.base.ResolveReference(u)
	}
	if err != nil || u.Scheme != p.base.Scheme || !strings.EqualFold(u.Host, p.base.Host) {
		return "", &Error{Status: http.StatusOK, Code: airlock.CodeUpstream, Reason: airlock.ReasonProviderError,
			Message: "the API pointed the next page of a crawl at another origin; refused"}
	}
	return u.String(), nil
}

// call sends one API request and decodes the JSON answer into out (nil:
// the answer is read for errors only).
func (p *Provider) call(ctx context.Context, d airlock.Doer, method, u string, body any, proxy string, out any) error {
	h := map[string][]string{"Accept": {"application/json"}}
	if p.key != "" {
		h["Authorization"] = []string{"Bearer " + p.key}
	}
	var b []byte
	if body != nil {
		var err error
		if b, err = json.Marshal(body); err != nil {
			return err
		}
		h["Content-Type"] = []string{"application/json"}
	}
	resp, err := d.Do(ctx, &airlock.HTTPRequest{Method: method, URL: u, Header: h, Body: b, TLSProfile: TLSProfile, Proxy: proxy})
	if err != nil {
		return apiutil.Transport(err, "firecrawl: ", p.key)
	}
	if resp.Status < 200 || resp.Status > 299 {
		return p.httpError(resp)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(resp.Body, out); err != nil {
		return &Error{Status: resp.Status, Code: airlock.CodeUpstream, Reason: airlock.ReasonProviderError,
			Message: "unreadable answer: " + p.redact(err.Error())}
	}
	return nil
}

func (p *Provider) httpError(resp *airlock.HTTPResponse) error {
	e := &Error{Status: resp.Status, Code: airlock.CodeUpstream, Reason: airlock.ReasonHTTPStatus}
	var env envelope
	if json.Unmarshal(resp.Body, &env) == nil && env.Error != "" {
		e.Message = p.redact(env.Error)
	} else {
		e.Message = p.redact(apiutil.Snippet(resp.Body))
	}
	switch resp.Status {
	case http.StatusUnauthorized, http.StatusForbidden:
		e.Code, e.Reason = airlock.CodeUnavailable, airlock.ReasonProviderAuth
	case http.StatusTooManyRequests:
		e.Code, e.Reason, e.Wait = airlock.CodeRateLimited, airlock.ReasonRateLimited, apiutil.RetryAfter(resp.Header)
	case http.StatusRequestTimeout:
		e.Code = airlock.CodeTimeout
	}
	return e
}

func (p *Provider) apiError(status int, msg, fallback string) error {
	if msg == "" {
		msg = fallback
	}
	return &Error{Status: status, Code: airlock.CodeUpstream, Reason: airlock.ReasonProviderError, Message: p.redact(msg)}
}

func (p *Provider) redact(s string) string { return apiutil.Redact(s, p.key) }

// Error is a failure reported by the Firecrawl API: an HTTP error status or
// success false. Message never holds the key.
type Error struct {
	Status  int // the HTTP status of the API's answer
	Code    airlock.Code
	Reason  airlock.Reason // airlock.ReasonProviderAuth, airlock.ReasonRateLimited, airlock.ReasonHTTPStatus or airlock.ReasonProviderError
	Message string         // the API's error, the key redacted
	Wait    time.Duration
}

func (e *Error) Error() string {
	s := "firecrawl: HTTP " + strconv.Itoa(e.Status)
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// ErrorCode returns the vocabulary code.
func (e *Error) ErrorCode() string { return string(e.Code) }

// ErrorReason returns e.Reason.
func (e *Error) ErrorReason() string { return string(e.Reason) }

// RetryAfter returns how long the API asked to wait, or 0.
func (e *Error) RetryAfter() time.Duration { return e.Wait }

var (
	_ airlock.Fetcher  = (*Provider)(nil)
	_ airlock.Crawler  = (*Provider)(nil)
	_ airlock.Searcher = (*Provider)(nil)
	_ error            = (*Error)(nil)
	_ error            = (*StatusError)(nil)
)
