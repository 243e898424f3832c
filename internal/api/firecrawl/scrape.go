package firecrawl

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/engine"
)

// Firecrawl formats Airlock produces.
const (
	formatMarkdown = "markdown"
	formatHTML     = "html"
	formatRawHTML  = "rawHtml"
	formatLinks    = "links"
)

// whyNot says why each Firecrawl format Airlock does not produce is
// refused.
var whyNot = map[string]string{
	formatHTML:       "Airlock's extractor produces no cleaned HTML; ask for rawHtml (the page as served) or markdown",
	"json":           "LLM-based formats are not offered: Airlock runs no model",
	"summary":        "LLM-based formats are not offered: Airlock runs no model",
	"changeTracking": "change tracking needs Firecrawl's hosted index",
	"branding":       "LLM-based formats are not offered: Airlock runs no model",
	"product":        "LLM-based formats are not offered: Airlock runs no model",
	"menu":           "LLM-based formats are not offered: Airlock runs no model",
	"attributes":     "selector attributes are not extracted",
	"images":         "image lists are not extracted",
	"screenshot":     "screenshots are taken only in browser sessions (POST /api/browser/sessions)",
	"audio":          "audio is not extracted",
	"video":          "video is not extracted",
}

// scrapeOptions are the fields of Firecrawl's ScrapeOptions that a request
// may carry; those Airlock cannot honour are refused by check.
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

// check refuses what Airlock cannot do and returns the formats asked for
// (markdown when none is named, as Firecrawl does). timeoutOK says whether
// the caller handles timeout itself.
func (o *scrapeOptions) check() (formatSet, error) {
	fs := formatSet{}
	for _, raw := range o.Formats {
		var name string
		if err := json.Unmarshal(raw, &name); err != nil {
			var obj struct {
				Type string `json:"type"`
			}
			if err := json.Unmarshal(raw, &obj); err != nil || obj.Type == "" {
				return nil, badRequest("Bad Request: each format is a name or an object with a type")
			}
			name = obj.Type
		}
		switch name {
		case formatMarkdown, formatRawHTML, formatLinks:
			fs[name] = true
		default:
			if why, ok := whyNot[name]; ok {
				return nil, unsupported("format %q is not supported by Airlock: %s", name, why)
			}
			return nil, badRequest("Bad Request: unknown format %q", name)
		}
	}
	if len(fs) == 0 {
		fs[formatMarkdown] = true
	}
	switch {
	case len(o.IncludeTags) > 0 || len(o.ExcludeTags) > 0:
		return nil, unsupported("includeTags and excludeTags are not supported: Airlock's extractor picks the main content itself and cannot filter by tag")
	case len(o.Headers) > 0:
		return nil, unsupported("headers are not supported on scrape: Airlock's fetch sends its own request headers; use POST /api/http for a request with chosen headers")
	case o.OnlyMainContent != nil && !*o.OnlyMainContent && fs[formatMarkdown]:
		return nil, unsupported("onlyMainContent: false is not supported with markdown: Airlock's markdown is always the page's main content; ask for rawHtml for the whole page")
	case o.WaitFor != nil && *o.WaitFor != 0:
		return nil, unsupported("waitFor is not supported: scrape fetches without a browser; drive one through /api/browser/sessions")
	case o.Mobile != nil && *o.Mobile:
		return nil, unsupported("mobile is not supported")
	case len(o.Actions) > 0:
		return nil, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonUnsupportedAction, "actions are not supported on scrape: drive a browser through /api/browser/sessions (Airlock's browser evaluates no caller JavaScript)")
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
		var name string
		if json.Unmarshal(raw, &name) != nil {
			var obj struct {
				Type string `json:"type"`
			}
			json.Unmarshal(raw, &obj)
			name = obj.Type
		}
		if name != "pdf" {
			return nil, unsupported("parser %q is not supported: Airlock reads PDFs only", name)
		}
	}
	return fs, nil
}

// cache says whether the engine's response cache may serve the fetch:
// Firecrawl's maxAge (0 asks for a fresh page).
func (o *scrapeOptions) cache() bool { return o.MaxAge != nil && *o.MaxAge > 0 }

// document is Firecrawl's Document: the formats asked for and metadata.
type document struct {
	Markdown *string        `json:"markdown,omitempty"`
	RawHTML  *string        `json:"rawHtml,omitempty"`
	Links    *[]string      `json:"links,omitempty"`
	Metadata map[string]any `json:"metadata"`
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
// rawHtml from FetchRendered's raw body (each an audited fetch call).
func (s *server) scrape(w http.ResponseWriter, r *http.Request, p airlock.Principal) error {
	var req scrapeRequest
	if err := decodeJSON(r, &req); err != nil {
		return err
	}
	if strings.TrimSpace(req.URL) == "" {
		return badRequest("Bad Request: url is required")
	}
	fs, err := req.check()
	if err != nil {
		return err
	}
	ctx, cancel, err := s.withTimeout(r.Context(), p, "fetch", req.Timeout)
	if err != nil {
		return err
	}
	defer cancel()
	// Firecrawl answers a 404 page as a document with its statusCode.
	fr := airlock.FetchRequest{URL: req.URL, Cache: req.cache(), ErrorPages: true}
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
