package firecrawl

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/engine"
)

// Firecrawl formats Airlock produces.
const (
	formatMarkdown   = "markdown"
	formatHTML       = "html"
	formatRawHTML    = "rawHtml"
	formatLinks      = "links"
	formatScreenshot = "screenshot"
	// formatFullPage is the screenshot of the whole page, which v1 named
	// "screenshot@fullPage" and v2 asks for as {type: screenshot,
	// fullPage: true}.
	formatFullPage = "screenshot@fullPage"
)

// whyNot says why each Firecrawl format Airlock does not produce is
// refused.
var whyNot = map[string]string{
	"json":           "LLM-based formats are not offered: Airlock runs no model",
	"summary":        "LLM-based formats are not offered: Airlock runs no model",
	"changeTracking": "change tracking needs Firecrawl's hosted index",
	"branding":       "LLM-based formats are not offered: Airlock runs no model",
	"product":        "LLM-based formats are not offered: Airlock runs no model",
	"menu":           "LLM-based formats are not offered: Airlock runs no model",
	"attributes":     "selector attributes are not extracted",
	"images":         "image lists are not extracted",
	"audio":          "audio is not extracted",
	"video":          "video is not extracted",
}

// scrapeOptions are the fields of Firecrawl's ScrapeOptions that a request
// may carry; those Airlock cannot honour are refused by check (crawls and
// batches) and checkScrape (POST /v2/scrape).
type scrapeOptions struct {
	Formats             []json.RawMessage `json:"formats"`
	Headers             map[string]string `json:"headers"`
	IncludeTags         []string          `json:"includeTags"`
	ExcludeTags         []string          `json:"excludeTags"`
	OnlyMainContent     *bool             `json:"onlyMainContent"`
	Timeout             *int64            `json:"timeout"`
	WaitFor             *int64            `json:"waitFor"`
	Mobile              *bool             `json:"mobile"`
	Parsers             []json.RawMessage `json:"parsers"`
	Actions             []json.RawMessage `json:"actions"`
	Location            json.RawMessage   `json:"location"`
	SkipTLSVerification *bool             `json:"skipTlsVerification"`
	RemoveBase64Images  *bool             `json:"removeBase64Images"`
	FastMode            *bool             `json:"fastMode"`
	BlockAds            *bool             `json:"blockAds"`
	Proxy               string            `json:"proxy"`
	MaxAge              *int64            `json:"maxAge"`
	StoreInCache        *bool             `json:"storeInCache"`
	ZeroDataRetention   *bool             `json:"zeroDataRetention"`
	Origin              string            `json:"origin"`
	Integration         string            `json:"integration"`
}

// scrapeRequest is the body of POST /v2/scrape.
type scrapeRequest struct {
	URL string `json:"url"`
	scrapeOptions
}

// formatSet is the formats a request asked for.
type formatSet map[string]bool

// jobFormats checks the scrape options of a crawl or a batch (what names
// it) and returns the formats its job keeps (markdown when none is named,
// as Firecrawl does). A job's pages are fetched without the browser and
// kept as extracted pages, so browser actions, waits, device emulation,
// chosen headers, tag filters and the html and screenshot formats are a
// scrape's alone.
func (o *scrapeOptions) jobFormats(what string) ([]string, error) {
	fs, err := o.parse()
	if err != nil {
		return nil, err
	}
	onlyScrape := func(option string) error {
		return unsupported("%s is not supported in a %s: its pages are fetched without the browser and kept as extracted pages (markdown, links, rawHtml); use POST /v2/scrape", option, what)
	}
	switch {
	case len(o.Actions) > 0:
		return nil, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonUnsupportedAction, "actions are not supported in a %s: its pages are fetched without the browser; use POST /v2/scrape (which never runs executeJavascript: Airlock's browser evaluates no caller JavaScript)", what)
	case o.WaitFor != nil && *o.WaitFor != 0:
		return nil, onlyScrape("waitFor")
	case o.Mobile != nil && *o.Mobile:
		return nil, onlyScrape("mobile")
	case len(o.Headers) > 0:
		return nil, onlyScrape("headers")
	case len(o.IncludeTags) > 0 || len(o.ExcludeTags) > 0:
		return nil, onlyScrape("includeTags and excludeTags")
	case o.OnlyMainContent != nil && !*o.OnlyMainContent && fs[formatMarkdown]:
		return nil, unsupported(mainContentOnly)
	}
	var out []string
	for name := range fs {
		if !slices.Contains([]string{formatMarkdown, formatLinks, formatRawHTML}, name) {
			return nil, onlyScrape(fmt.Sprintf("format %q", name))
		}
	}
	// In a fixed order: the job keeps them.
	for _, f := range []struct{ fc, airlock string }{{formatMarkdown, airlock.FormatMarkdown}, {formatLinks, airlock.FormatLinks}, {formatRawHTML, airlock.FormatRawHTML}} {
		if fs[f.fc] {
			out = append(out, f.airlock)
		}
	}
	return out, nil
}

// mainContentOnly refuses onlyMainContent: false with markdown.
const mainContentOnly = "onlyMainContent: false is not supported with markdown: Airlock's markdown is always the page's main content; ask for rawHtml (or, on POST /v2/scrape, html) for the whole page"

// parse reads the formats and refuses what no route does.
func (o *scrapeOptions) parse() (formatSet, error) {
	fs := formatSet{}
	for _, raw := range o.Formats {
		var name string
		if err := json.Unmarshal(raw, &name); err != nil {
			var obj struct {
				Type     string          `json:"type"`
				FullPage *bool           `json:"fullPage"`
				Quality  json.RawMessage `json:"quality"`
				Viewport json.RawMessage `json:"viewport"`
			}
			if err := json.Unmarshal(raw, &obj); err != nil || obj.Type == "" {
				return nil, badRequest("Bad Request: each format is a name or an object with a type")
			}
			name = obj.Type
			if name == formatScreenshot {
				if len(obj.Quality) > 0 && string(obj.Quality) != "null" || len(obj.Viewport) > 0 && string(obj.Viewport) != "null" {
					return nil, unsupported("screenshot quality and viewport are not supported: Airlock's screenshots are PNGs of its own viewport (or, with mobile, a phone's)")
				}
				if obj.FullPage != nil && *obj.FullPage {
					name = formatFullPage
				}
			}
		}
		switch name {
		case formatMarkdown, formatRawHTML, formatLinks, formatHTML, formatScreenshot, formatFullPage:
			fs[name] = true
		default:
			if why, ok := whyNot[name]; ok {
				return nil, unsupported("format %q is not supported by Airlock: %s", name, why)
			}
			return nil, badRequest("Bad Request: unknown format %q", name)
		}
	}
	if fs[formatScreenshot] && fs[formatFullPage] {
		return nil, badRequest("Bad Request: one screenshot format: the viewport or the full page")
	}
	if len(fs) == 0 {
		fs[formatMarkdown] = true
	}
	switch {
	case len(o.Location) > 0 && string(o.Location) != "null":
		return nil, unsupported("location is not supported")
	case o.SkipTLSVerification != nil && *o.SkipTLSVerification:
		return nil, unsupported("skipTlsVerification is not supported: Airlock always verifies certificates")
	case o.ZeroDataRetention != nil && *o.ZeroDataRetention:
		return nil, unsupported("zeroDataRetention is not supported: Airlock audits every call")
	}
	switch o.Proxy {
	case "", "basic", "auto":
	default:
		return nil, unsupported("proxy %q is not supported: Airlock's upstream proxies are chosen by its operator", o.Proxy)
	}
	for _, raw := range o.Parsers {
		if name := nameOrType(raw); name != "pdf" {
			return nil, unsupported("parser %q is not supported: Airlock reads PDFs only", name)
		}
	}
	return fs, nil
}

// fcAction is one of Firecrawl's actions, as far as Airlock reads them.
type fcAction struct {
	Type         string          `json:"type"`
	Milliseconds *int64          `json:"milliseconds"`
	Selector     *string         `json:"selector"`
	Text         *string         `json:"text"`
	Key          *string         `json:"key"`
	Direction    *string         `json:"direction"`
	FullPage     *bool           `json:"fullPage"`
	All          *bool           `json:"all"`
	Quality      json.RawMessage `json:"quality"`
	Viewport     json.RawMessage `json:"viewport"`
}

// driven are the action types Airlock runs.
var driven = map[string]bool{airlock.PageWait: true, airlock.PageClick: true, airlock.PageWrite: true,
	airlock.PagePress: true, airlock.PageScroll: true, airlock.PageScreenshot: true}

// pageActions maps Firecrawl's actions to the engine's. A type Airlock
// does not drive is invalid (unsupported_action) whatever its fields; a
// field no action has is invalid (browser_action).
func pageActions(raws []json.RawMessage) ([]airlock.PageAction, error) {
	var out []airlock.PageAction
	for i, raw := range raws {
		var head struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(raw, &head); err != nil {
			return nil, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonBrowserAction, "actions[%d]: an object with a type is expected", i)
		}
		if !driven[head.Type] {
			return nil, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonUnsupportedAction,
				"actions[%d]: action %q is not supported: Airlock drives wait, click, write, press, scroll and screenshot (its browser evaluates no caller JavaScript)", i, head.Type)
		}
		var a fcAction
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&a); err != nil {
			return nil, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonBrowserAction, "actions[%d] (%s): %v", i, a.Type, err)
		}
		switch {
		case a.All != nil && *a.All:
			return nil, unsupported("actions[%d]: click all is not supported: click one element per action", i)
		case len(a.Quality) > 0 && string(a.Quality) != "null" || len(a.Viewport) > 0 && string(a.Viewport) != "null":
			return nil, unsupported("actions[%d]: screenshot quality and viewport are not supported", i)
		}
		pa := airlock.PageAction{Type: a.Type, Selector: deref(a.Selector), Text: deref(a.Text), Key: deref(a.Key), Direction: deref(a.Direction)}
		if a.FullPage != nil {
			pa.FullPage = *a.FullPage
		}
		if a.Milliseconds != nil {
			ms := *a.Milliseconds
			if ms > math.MaxInt32 {
				ms = math.MaxInt32 // above every ceiling: refused by the engine's check
			}
			pa.Milliseconds = int(ms)
		}
		out = append(out, pa)
	}
	return out, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// checkScrape checks a scrape's options and returns its formats and the
// engine request; needsScrape says whether the request needs the engine's
// Scrape (html, tag filters, headers, the browser) rather than a plain
// fetch.
func (o *scrapeOptions) checkScrape(url string) (formatSet, airlock.ScrapeRequest, bool, error) {
	fs, err := o.parse()
	if err != nil {
		return nil, airlock.ScrapeRequest{}, false, err
	}
	whole := o.OnlyMainContent != nil && !*o.OnlyMainContent
	if whole && fs[formatMarkdown] {
		return nil, airlock.ScrapeRequest{}, false, unsupported(mainContentOnly)
	}
	req := airlock.ScrapeRequest{FetchRequest: airlock.FetchRequest{URL: url, Cache: o.cache(), ErrorPages: true},
		Headers: o.Headers, IncludeTags: o.IncludeTags, ExcludeTags: o.ExcludeTags, HTML: fs[formatHTML], WholePage: whole}
	var b airlock.BrowserScrape
	useBrowser := false
	if o.WaitFor != nil && *o.WaitFor != 0 {
		if *o.WaitFor < 0 || *o.WaitFor > int64(math.MaxInt64/time.Millisecond) {
			return nil, req, false, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonLimit, "waitFor %d ms: want a positive number of milliseconds", *o.WaitFor)
		}
		b.WaitFor, useBrowser = time.Duration(*o.WaitFor)*time.Millisecond, true
	}
	if o.Mobile != nil && *o.Mobile {
		b.Mobile, useBrowser = true, true
	}
	if len(o.Actions) > 0 {
		if b.Actions, err = pageActions(o.Actions); err != nil {
			return nil, req, false, err
		}
		useBrowser = true
	}
	if fs[formatScreenshot] || fs[formatFullPage] {
		b.Screenshot, b.FullPage, useBrowser = true, fs[formatFullPage], true
	}
	if useBrowser {
		req.Browser = &b
	}
	needs := useBrowser || fs[formatHTML] || len(o.Headers) > 0 || len(o.IncludeTags) > 0 || len(o.ExcludeTags) > 0
	return fs, req, needs, nil
}

// cache says whether the engine's response cache may serve the fetch:
// Firecrawl's maxAge (0 asks for a fresh page).
func (o *scrapeOptions) cache() bool { return o.MaxAge != nil && *o.MaxAge > 0 }

// document is Firecrawl's Document: the formats asked for and metadata.
type document struct {
	Markdown   *string        `json:"markdown,omitempty"`
	HTML       *string        `json:"html,omitempty"`
	RawHTML    *string        `json:"rawHtml,omitempty"`
	Links      *[]string      `json:"links,omitempty"`
	Screenshot *string        `json:"screenshot,omitempty"`
	Actions    *actionResults `json:"actions,omitempty"`
	Metadata   map[string]any `json:"metadata"`
}

// actionResults are Firecrawl's results of a scrape's actions: Airlock's
// fill screenshots alone (the other lists come from actions it does not
// run, and are always empty).
type actionResults struct {
	Screenshots       []string `json:"screenshots"`
	Scrapes           []any    `json:"scrapes"`
	JavascriptReturns []any    `json:"javascriptReturns"`
	PDFs              []any    `json:"pdfs"`
}

// pngURL is a screenshot as Firecrawl's screenshot URL: a data: URL, so
// that the image travels in the answer and Airlock keeps no copy to serve
// (docs/firecrawl.md).
func pngURL(b []byte) string {
	return "data:image/png;base64," + base64.StdEncoding.EncodeToString(b)
}

// scrapeResponse is the answer of POST /v2/scrape.
type scrapeResponse struct {
	Success bool     `json:"success"`
	Data    document `json:"data"`
}

// metaKeys maps the page's meta names to Firecrawl's metadata keys.
var metaKeys = map[string]string{
	"keywords": "keywords", "robots": "robots",
	"og:title": "ogTitle", "og:description": "ogDescription", "og:url": "ogUrl", "og:image": "ogImage",
	"og:audio": "ogAudio", "og:determiner": "ogDeterminer", "og:locale": "ogLocale", "og:site_name": "ogSiteName",
	"og:video": "ogVideo", "article:published_time": "publishedTime", "article:modified_time": "modifiedTime",
	"article:section": "articleSection", "article:tag": "articleTag",
}

// pageDocument builds the Document of a page for the formats fs.
func pageDocument(p *airlock.Page, sourceURL string, fs formatSet) document {
	md := map[string]any{
		"title": docTitle(p), "description": p.Description, "language": p.Lang,
		"sourceURL": sourceURL, "url": p.URL, "statusCode": p.Status, "contentType": p.ContentType,
	}
	if p.Kind != "" {
		md["kind"] = p.Kind // article, listing or other: Airlock's, not Firecrawl's
	}
	for k, v := range p.Meta {
		if key, ok := metaKeys[strings.ToLower(k)]; ok && v != "" {
			md[key] = v
		}
	}
	if p.DecisionID != "" {
		md["scrapeId"] = p.DecisionID
	}
	d := document{Metadata: md}
	if fs[formatMarkdown] {
		d.Markdown = &p.Markdown
	}
	if fs[formatLinks] {
		links := make([]string, 0, len(p.Links))
		for _, l := range p.Links {
			links = append(links, l.URL)
		}
		d.Links = &links
	}
	return d
}

// scrape serves POST /v2/scrape: markdown and links from one engine Fetch,
// rawHtml from FetchRendered's raw body (each an audited fetch call); html,
// tag filters, headers and the browser's options from one engine Scrape.
func (s *server) scrape(w http.ResponseWriter, r *http.Request, p airlock.Principal) error {
	var req scrapeRequest
	if err := decodeJSON(r, &req); err != nil {
		return err
	}
	if strings.TrimSpace(req.URL) == "" {
		return badRequest("Bad Request: url is required")
	}
	fs, sreq, needsScrape, err := req.checkScrape(req.URL)
	if err != nil {
		return err
	}
	ctx, cancel, err := s.withTimeout(r.Context(), p, "fetch", req.Timeout)
	if err != nil {
		return err
	}
	defer cancel()
	if needsScrape {
		res, err := s.en.Scrape(ctx, p, sreq)
		if err != nil {
			return err
		}
		d := pageDocument(res.Page, req.URL, fs)
		if fs[formatHTML] {
			d.HTML = &res.HTML
		}
		if fs[formatRawHTML] {
			d.RawHTML = &res.RawHTML
		}
		if res.Screenshot != nil {
			u := pngURL(res.Screenshot)
			d.Screenshot = &u
		}
		if sreq.Browser != nil && len(sreq.Browser.Actions) > 0 {
			a := &actionResults{Screenshots: []string{}, Scrapes: []any{}, JavascriptReturns: []any{}, PDFs: []any{}}
			for _, shot := range res.ActionScreenshots {
				a.Screenshots = append(a.Screenshots, pngURL(shot))
			}
			d.Actions = a
		}
		w.Header().Set(HeaderDecision, res.Page.DecisionID)
		writeJSON(w, http.StatusOK, scrapeResponse{Success: true, Data: d})
		return nil
	}
	// Firecrawl answers a 404 page as a document with its statusCode.
	fr := sreq.FetchRequest
	var d document
	var decision string
	if fs[formatMarkdown] || fs[formatLinks] {
		page, err := s.en.Fetch(ctx, p, fr)
		if err != nil {
			return err
		}
		d, decision = pageDocument(page, req.URL, fs), page.DecisionID
	}
	if fs[formatRawHTML] {
		rp, err := s.en.FetchRendered(ctx, p, fr, engine.RenderOptions{Raw: true})
		if err != nil {
			return err
		}
		raw := rp.Content
		d.RawHTML = &raw
		if d.Metadata == nil {
			// Only the raw body was fetched: FetchRendered says the final
			// URL and type, not the exact 2xx status, so statusCode is left
			// out rather than guessed.
			d.Metadata = map[string]any{"sourceURL": req.URL, "url": rp.URL, "contentType": rp.ContentType, "scrapeId": rp.DecisionID}
			decision = rp.DecisionID
		}
	}
	if decision != "" {
		w.Header().Set(HeaderDecision, decision)
	}
	writeJSON(w, http.StatusOK, scrapeResponse{Success: true, Data: d})
	return nil
}
