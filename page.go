package airlock

import (
	"context"
	"time"
)

// Extraction caps (ARCHITECTURE.md "Defaults").
const (
	MaxHeadings    = 60   // headings kept in a Page
	OrgMaxLinks    = 40   // links rendered in org output
	OrgMaxText     = 4000 // characters of text rendered in org output
	MaxPageLinks   = 2000 // links kept in a Page
	MaxTableRows   = 1000 // rows kept per table
	MaxPageTables  = 50   // tables kept in a Page
	MinMainContent = 250  // main content shorter than this falls back to the readable body text
)

// Page is a fetched page as structured data. Every provider returns exactly
// this shape; only Provider tells them apart. JSON keys are stable.
type Page struct {
	URL          string    `json:"url"`           // the final URL, after redirects
	RequestedURL string    `json:"requested_url"` // what the caller asked for
	Status       int       `json:"status"`
	ContentType  string    `json:"content_type"`
	FetchedAt    time.Time `json:"fetched_at"`
	Provider     string    `json:"provider"`
	ElapsedMS    int64     `json:"elapsed_ms"`
	Title        string    `json:"title"` // the article's headline when the page marks one, else <title> without the site name (ExtractNone crawls: the declared title)
	// Kind says what the page is: "article" (one main text), "listing"
	// (repeated items: a home page, a category, search results) or
	// "other" (a form, an app shell, a short page); "" when it was not
	// extracted from HTML, including pages a crawl with ExtractNone read
	// for discovery only (docs/metadata.md).
	Kind        string            `json:"kind"`
	Description string            `json:"description"`
	Lang        string            `json:"lang"`
	Canonical   string            `json:"canonical"`
	SiteName    string            `json:"site_name"`
	Author      string            `json:"author"`
	Published   string            `json:"published"` // ISO 8601: a date, or a date and time
	Meta        map[string]string `json:"meta"`      // OpenGraph, Twitter and other meta, by name/property
	Headings    []Heading         `json:"headings"`  // levels 1-3, at most MaxHeadings
	Links       []Link            `json:"links"`     // absolute, deduplicated
	Text        string            `json:"text"`      // main content as plain text, a newline between blocks
	Markdown    string            `json:"markdown"`  // main content with lists, tables, code and links
	Tables      [][][]string      `json:"tables"`    // each table as rows of cells
	Truncated   []string          `json:"truncated"` // names of fields that were cut
	Cache       string            `json:"cache,omitempty"`
	DecisionID  string            `json:"decision_id,omitempty"`

	// RawHTML is the body as served (as text, invalid UTF-8 replaced):
	// kept only by a crawl whose Formats name FormatRawHTML.
	RawHTML string `json:"raw_html,omitempty"`
}

// Heading is one h1-h3 of a page.
type Heading struct {
	Level int    `json:"level"`
	Text  string `json:"text"`
}

// Link is one link of a page.
type Link struct {
	URL      string `json:"url"`
	Text     string `json:"text"`
	Rel      string `json:"rel,omitempty"`
	Internal bool   `json:"internal"` // same host as the page
}

// SearchResult is one search hit.
type SearchResult struct {
	Title   string `json:"title"`
	URL     string `json:"url"`
	Snippet string `json:"snippet"`
	Engine  string `json:"engine"`
	Rank    int    `json:"rank"` // 1-based, after deduplication
}

// Skipped is a URL a crawl did not turn into a page, with why: robots,
// policy, http_status, timeout, off_host, depth, type, duplicate, limit,
// error, bot_wall.
type Skipped struct {
	URL    string `json:"url"`
	Reason Reason `json:"reason"`
	Detail string `json:"detail,omitempty"`
}

// CrawlSummary ends a crawl.
type CrawlSummary struct {
	Pages      int       `json:"pages"`
	Skipped    []Skipped `json:"skipped"`
	Queued     int       `json:"queued"`
	Fetched    int       `json:"fetched"`
	Failed     int       `json:"failed"`
	Bytes      int64     `json:"bytes"`
	ElapsedMS  int64     `json:"elapsed_ms"`
	PagesPerS  float64   `json:"pages_per_second"`
	Stopped    string    `json:"stopped,omitempty"` // why the crawl ended early (revoked, canceled, ...)
	DecisionID string    `json:"decision_id,omitempty"`
}

// CrawlProgress is a progress event of a running crawl.
type CrawlProgress struct {
	Done      int     `json:"done"`
	Queued    int     `json:"queued"`
	Failed    int     `json:"failed"`
	PagesPerS float64 `json:"rate"`
}

// Extract modes of a crawl.
const (
	ExtractFull = "full" // the whole Page
	ExtractNone = "none" // links and metadata only, for discovery
)

// Initiators: who asked for a fetch or a crawl. The tenant's
// configuration maps each to an identity (the User-Agent and headers sent)
// and to whether a single fetch honours robots.txt; a tenant claims
// InitiatorPerson only when its configuration allows it.
const (
	InitiatorModel  = "model"  // an agent or program decided to fetch (MCP tools; the API's default)
	InitiatorPerson = "person" // a person asked for this URL (the CLI)
)

// FetchRequest asks for one page.
type FetchRequest struct {
	URL string `json:"url"`
	// Initiator is InitiatorModel or InitiatorPerson; "": model.
	Initiator  string     `json:"initiator,omitempty"`
	Provider   string     `json:"provider,omitempty"`    // "": the configured resolution
	TLSProfile string     `json:"tls_profile,omitempty"` // "": the initiator's identity (chrome or go)
	Proxy      string     `json:"proxy,omitempty"`       // an operator-configured upstream proxy name
	Cache      bool       `json:"cache,omitempty"`
	Narrow     *Narrowing `json:"narrow,omitempty"`
	// Timeout bounds each request of the fetch, redirects included
	// (0: egress.fetch_timeout, 20 s); at most limits.fetch_timeout.
	Timeout Duration `json:"timeout,omitempty"`
	// ErrorPages returns a page answered with a status outside 2xx as a
	// Page with that Status (its content extracted) instead of an
	// upstream http_status error. Providers that cannot see the page of
	// an error status still return the error.
	ErrorPages bool `json:"error_pages,omitempty"`
}

// CrawlRequest asks for many pages: URLs fetched concurrently, or Seed
// walked breadth-first on its host.
type CrawlRequest struct {
	// Initiator is InitiatorModel or InitiatorPerson; "": model. A crawl
	// honours robots.txt whoever asks (see IgnoreRobots).
	Initiator          string   `json:"initiator,omitempty"`
	URLs               []string `json:"urls,omitempty"`
	Seed               string   `json:"seed,omitempty"`
	Depth              int      `json:"depth,omitempty"`                // 0: 2
	MaxPages           int      `json:"max_pages,omitempty"`            // 0: 25
	Concurrency        int      `json:"concurrency,omitempty"`          // 0: 8
	PerHostConcurrency int      `json:"per_host_concurrency,omitempty"` // 0: 2; at most limits.crawl_per_host_concurrency
	Timeout            Duration `json:"timeout,omitempty"`              // per page; 0: 25 s
	// Delay is the least time between two requests to one origin. It
	// lengthens robots.txt's Crawl-delay, never shortens it; 0: none but
	// Crawl-delay's. An origin with a delay takes one request at a time.
	Delay      Duration `json:"delay,omitempty"`
	Extract    string   `json:"extract,omitempty"` // full (default) or none
	Subdomains bool     `json:"subdomains,omitempty"`
	// IncludePaths and ExcludePaths are regular expressions (RE2) on the
	// path of each discovered URL (links and sitemap entries, not the
	// seed): with IncludePaths, only a path one of them matches is
	// followed; a path an ExcludePaths entry matches never is.
	IncludePaths []string `json:"include_paths,omitempty"`
	ExcludePaths []string `json:"exclude_paths,omitempty"`
	// External follows links to other hosts too (a seed crawl otherwise
	// stays on the seed's host); each is decided by the policy when it is
	// fetched, and a refused one is skipped (reason policy), not fetched.
	External     bool       `json:"external,omitempty"`
	IgnoreRobots bool       `json:"ignore_robots,omitempty"` // audited; only for tenants with allow_ignore_robots
	Sitemap      bool       `json:"sitemap,omitempty"`       // seed from /sitemap.xml too
	TLSProfile   string     `json:"tls_profile,omitempty"`   // "": go; chrome is audited
	Provider     string     `json:"provider,omitempty"`
	Proxy        string     `json:"proxy,omitempty"`
	Cache        bool       `json:"cache,omitempty"`
	Narrow       *Narrowing `json:"narrow,omitempty"`

	// NoLinks follows no link: a seed crawl fetches the seed (and, with
	// Sitemap, its sitemap's URLs) and nothing its pages link to.
	NoLinks bool `json:"no_links,omitempty"`
	// Formats are the renderings the reader of a crawl job's pages asked
	// for (Format* names), kept with the job; empty: every field of the
	// Page but RawHTML. FormatRawHTML makes the crawl keep each page's
	// body (Page.RawHTML).
	Formats []string `json:"formats,omitempty"`
}

// Formats of a crawl's pages (CrawlRequest.Formats).
const (
	FormatMarkdown = "markdown" // Page.Markdown
	FormatLinks    = "links"    // Page.Links
	FormatRawHTML  = "raw_html" // Page.RawHTML: the body as served
)

// CrawlFormats lists the Format* names.
func CrawlFormats() []string { return []string{FormatMarkdown, FormatLinks, FormatRawHTML} }

// SearchRequest asks for search results.
type SearchRequest struct {
	Query    string `json:"query"`
	Engine   string `json:"engine,omitempty"` // dataforseo, brave-api, searxng, ddg, brave, bing
	Limit    int    `json:"limit,omitempty"`  // 0: 10
	Provider string `json:"provider,omitempty"`
	Proxy    string `json:"proxy,omitempty"`
}

// Duration is a time.Duration that reads "25s" or nanoseconds from JSON.
type Duration = time.Duration

// Doer makes HTTP requests on a provider's behalf. The dispatcher hands each
// provider one bound to the caller's principal and policy: a provider
// cannot choose an unguarded client. The context a provider's method gets
// carries that principal too (PrincipalFromContext), for a provider that
// keeps per-caller state (the chromium provider's browser sessions).
type Doer interface {
	Do(ctx context.Context, req *HTTPRequest) (*HTTPResponse, error)
}

// Fetcher is a provider that fetches one page.
type Fetcher interface {
	Fetch(ctx context.Context, d Doer, req FetchRequest) (*Page, error)
}

// Crawler is a provider that crawls. It sends each page to emit as it
// arrives and returns the summary; emit returning an error stops the crawl.
type Crawler interface {
	Crawl(ctx context.Context, d Doer, req CrawlRequest, emit func(*Page) error, progress func(CrawlProgress)) (*CrawlSummary, error)
}

// Searcher is a provider that searches.
type Searcher interface {
	Search(ctx context.Context, d Doer, req SearchRequest) ([]SearchResult, error)
}

// Verb names.
const (
	VerbFetch  = "fetch"
	VerbCrawl  = "crawl"
	VerbSearch = "search"
)

// FetchResult is one URL of a batched fetch: a Page or an Error.
type FetchResult struct {
	URL   string `json:"url"`
	Page  *Page  `json:"page,omitempty"`
	Error *Error `json:"error,omitempty"`
}

// Batched fetch defaults.
const (
	DefaultBatchMax         = 64
	DefaultBatchConcurrency = 16
	DefaultBatchTimeout     = 15 * time.Second
)
