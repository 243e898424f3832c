package api

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/render"
)

// duration reads a JSON string in time.ParseDuration form ("25s", "1m30s")
// or a number of nanoseconds (how encoding/json writes a time.Duration),
// and writes the string form.
type duration time.Duration

func (d *duration) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		v, err := time.ParseDuration(s)
		if err != nil || v < 0 {
			return airlock.Errorf(airlock.CodeInvalid, airlock.ReasonBody, "duration %q: want a non-negative Go duration such as \"25s\"", s)
		}
		*d = duration(v)
		return nil
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil || n < 0 {
		return airlock.Errorf(airlock.CodeInvalid, airlock.ReasonBody, "duration %s: want a string such as \"25s\" or non-negative nanoseconds", b)
	}
	*d = duration(n)
	return nil
}

func (d duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// browseRequest is the body of POST /api/browse.
type browseRequest struct {
	Verb    string          `json:"verb"`
	URL     string          `json:"url,omitempty"`
	URLs    []string        `json:"urls,omitempty"`
	Seed    string          `json:"seed,omitempty"`
	Query   string          `json:"query,omitempty"`
	Options json.RawMessage `json:"options,omitempty"`
	As      string          `json:"as,omitempty"`
}

// fetchOptions are the options of a fetch: airlock.FetchRequest without
// its URL.
type fetchOptions struct {
	Initiator  string             `json:"initiator,omitempty"` // "": model; the engine decides what it may claim
	Provider   string             `json:"provider,omitempty"`
	TLSProfile string             `json:"tls_profile,omitempty"`
	Proxy      string             `json:"proxy,omitempty"`
	Cache      bool               `json:"cache,omitempty"`
	Narrow     *airlock.Narrowing `json:"narrow,omitempty"`
	Timeout    duration           `json:"timeout,omitempty"`
	ErrorPages bool               `json:"error_pages,omitempty"`
}

func (o fetchOptions) request(url string) airlock.FetchRequest {
	return airlock.FetchRequest{URL: url, Initiator: o.Initiator, Provider: o.Provider, TLSProfile: o.TLSProfile, Proxy: o.Proxy, Cache: o.Cache, Narrow: o.Narrow,
		Timeout: time.Duration(o.Timeout), ErrorPages: o.ErrorPages}
}

// crawlOptions are the options of a crawl: airlock.CrawlRequest without
// its seed and URLs.
type crawlOptions struct {
	Initiator          string             `json:"initiator,omitempty"` // "": model
	Depth              int                `json:"depth,omitempty"`
	MaxPages           int                `json:"max_pages,omitempty"`
	Concurrency        int                `json:"concurrency,omitempty"`
	PerHostConcurrency int                `json:"per_host_concurrency,omitempty"`
	Timeout            duration           `json:"timeout,omitempty"`
	Delay              duration           `json:"delay,omitempty"`
	Extract            string             `json:"extract,omitempty"`
	Subdomains         bool               `json:"subdomains,omitempty"`
	IncludePaths       []string           `json:"include_paths,omitempty"`
	ExcludePaths       []string           `json:"exclude_paths,omitempty"`
	External           bool               `json:"external,omitempty"`
	IgnoreRobots       bool               `json:"ignore_robots,omitempty"`
	Sitemap            bool               `json:"sitemap,omitempty"`
	NoLinks            bool               `json:"no_links,omitempty"`
	Formats            []string           `json:"formats,omitempty"`
	TLSProfile         string             `json:"tls_profile,omitempty"`
	Provider           string             `json:"provider,omitempty"`
	Proxy              string             `json:"proxy,omitempty"`
	Cache              bool               `json:"cache,omitempty"`
	Narrow             *airlock.Narrowing `json:"narrow,omitempty"`
}

func (o crawlOptions) request(seed string, urls []string) airlock.CrawlRequest {
	return airlock.CrawlRequest{Initiator: o.Initiator, URLs: urls, Seed: seed, Depth: o.Depth, MaxPages: o.MaxPages, Concurrency: o.Concurrency,
		PerHostConcurrency: o.PerHostConcurrency, Timeout: time.Duration(o.Timeout), Delay: time.Duration(o.Delay), Extract: o.Extract, Subdomains: o.Subdomains,
		IncludePaths: o.IncludePaths, ExcludePaths: o.ExcludePaths, External: o.External, IgnoreRobots: o.IgnoreRobots, Sitemap: o.Sitemap, NoLinks: o.NoLinks, Formats: o.Formats, TLSProfile: o.TLSProfile, Provider: o.Provider, Proxy: o.Proxy,
		Cache: o.Cache, Narrow: o.Narrow}
}

// searchOptions are the options of a search: airlock.SearchRequest without
// its query.
type searchOptions struct {
	Engine   string `json:"engine,omitempty"`
	Limit    int    `json:"limit,omitempty"`
	Provider string `json:"provider,omitempty"`
	Proxy    string `json:"proxy,omitempty"`
}

// fetchManyResponse is the json answer of a fetch of several URLs.
type fetchManyResponse struct {
	Results    []airlock.FetchResult `json:"results"`
	DecisionID string                `json:"decision_id"`
}

// contentTypes are the Content-Type of each output format.
var contentTypes = map[string]string{
	render.FormatJSON:     "application/json",
	render.FormatJSONL:    "application/x-ndjson",
	render.FormatMarkdown: "text/markdown; charset=utf-8",
	render.FormatText:     "text/plain; charset=utf-8",
	render.FormatOrg:      "text/org; charset=utf-8",
}

// MaxBrowseCrawlPages caps a synchronous crawl (POST /api/browse, verb
// crawl), whose pages are held until the answer is written; crawl jobs
// keep theirs in the store.
const MaxBrowseCrawlPages = 1000

// HeaderFailed counts the URLs of a batched fetch that gave no page, in
// the text formats (json lists each one's error).
const HeaderFailed = "X-Airlock-Failed"

func badRequest(format string, args ...any) error {
	return airlock.Errorf(airlock.CodeInvalid, airlock.ReasonRequest, format, args...)
}

// browse serves POST /api/browse: one verb, its target, its options and
// the output format.
func (s *server) browse(w http.ResponseWriter, r *http.Request, c caller) error {
	var req browseRequest
	if err := decodeJSON(r, &req); err != nil {
		return err
	}
	as := req.As
	if as == "" {
		as = render.FormatJSON
	}
	format, err := render.ParseFormat(as)
	if err != nil {
		return err
	}
	if len(req.Options) == 0 || string(req.Options) == "null" {
		req.Options = json.RawMessage("{}")
	}
	ctx := r.Context()
	var b bytes.Buffer
	switch req.Verb {
	case airlock.VerbFetch:
		if req.Seed != "" || req.Query != "" {
			return badRequest("fetch takes url or urls, not seed or query")
		}
		var o fetchOptions
		if err := decodeStrict(req.Options, &o); err != nil {
			return err
		}
		switch {
		case req.URL != "" && req.URLs != nil:
			return badRequest("fetch takes url or urls, not both")
		case req.URL != "":
			page, err := s.en.Fetch(ctx, c.principal, o.request(req.URL))
			if err != nil {
				return err
			}
			setDecision(w, page.DecisionID)
			if err := render.Render(&b, format, page); err != nil {
				return err
			}
		case len(req.URLs) > 0:
			res, id, err := s.en.FetchMany(ctx, c.principal, req.URLs, o.request(""))
			if err != nil {
				return err
			}
			setDecision(w, id)
			if format == render.FormatJSON {
				writeJSON(w, http.StatusOK, fetchManyResponse{Results: res, DecisionID: id})
				return nil
			}
			var pages []*airlock.Page
			for _, fr := range res {
				if fr.Page != nil {
					pages = append(pages, fr.Page)
				}
			}
			w.Header().Set(HeaderFailed, strconv.Itoa(len(res)-len(pages)))
			if err := render.RenderCrawl(&b, format, pages, nil); err != nil {
				return err
			}
		default:
			return badRequest("fetch needs url (one page) or urls (a batch)")
		}
	case airlock.VerbCrawl:
		if req.URL != "" || req.Query != "" {
			return badRequest("crawl takes seed or urls, not url or query")
		}
		if (req.Seed == "") == (len(req.URLs) == 0) {
			return badRequest("crawl needs seed or urls, exactly one of them")
		}
		var o crawlOptions
		if err := decodeStrict(req.Options, &o); err != nil {
			return err
		}
		if o.MaxPages > MaxBrowseCrawlPages {
			return airlock.Errorf(airlock.CodeTooLarge, airlock.ReasonMaxPages, "a crawl through /api/browse returns at most %d pages at once; start a crawl job (POST /api/crawls) for more", MaxBrowseCrawlPages)
		}
		var mu sync.Mutex
		var pages []*airlock.Page
		sum, err := s.en.Crawl(ctx, c.principal, o.request(req.Seed, req.URLs), func(p *airlock.Page) error {
			mu.Lock()
			pages = append(pages, p)
			mu.Unlock()
			return nil
		}, nil)
		if err != nil {
			return err
		}
		if sum == nil {
			return airlock.Errorf(airlock.CodeInternal, airlock.ReasonNone, "crawl returned no summary")
		}
		setDecision(w, sum.DecisionID)
		if err := render.RenderCrawl(&b, format, pages, sum); err != nil {
			return err
		}
	case airlock.VerbSearch:
		if req.URL != "" || req.URLs != nil || req.Seed != "" {
			return badRequest("search takes query, not url, urls or seed")
		}
		var o searchOptions
		if err := decodeStrict(req.Options, &o); err != nil {
			return err
		}
		res, id, err := s.en.Search(ctx, c.principal, airlock.SearchRequest{Query: req.Query, Engine: o.Engine, Limit: o.Limit, Provider: o.Provider, Proxy: o.Proxy})
		if err != nil {
			return err
		}
		setDecision(w, id)
		if err := render.RenderSearch(&b, format, req.Query, res); err != nil {
			return err
		}
	case "":
		return badRequest("verb is required: fetch, crawl or search")
	default:
		return badRequest("unknown verb %q: want fetch, crawl or search", req.Verb)
	}
	writeBody(w, http.StatusOK, contentTypes[format], b.Bytes())
	return nil
}
