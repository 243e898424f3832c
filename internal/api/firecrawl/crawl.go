package firecrawl

import (
	"encoding/json"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/engine"
)

// crawlRequest is the body of POST /v2/crawl.
type crawlRequest struct {
	URL                    string          `json:"url"`
	Prompt                 *string         `json:"prompt"`
	ExcludePaths           []string        `json:"excludePaths"`
	IncludePaths           []string        `json:"includePaths"`
	MaxDiscoveryDepth      *int            `json:"maxDiscoveryDepth"`
	Sitemap                string          `json:"sitemap"`
	IgnoreQueryParameters  *bool           `json:"ignoreQueryParameters"`
	DeduplicateSimilarURLs *bool           `json:"deduplicateSimilarURLs"`
	Limit                  *int            `json:"limit"`
	CrawlEntireDomain      *bool           `json:"crawlEntireDomain"`
	AllowExternalLinks     *bool           `json:"allowExternalLinks"`
	AllowSubdomains        *bool           `json:"allowSubdomains"`
	IgnoreRobotsTxt        *bool           `json:"ignoreRobotsTxt"`
	RobotsUserAgent        *string         `json:"robotsUserAgent"`
	Delay                  *float64        `json:"delay"`
	MaxConcurrency         *int            `json:"maxConcurrency"`
	Webhook                json.RawMessage `json:"webhook"`
	ScrapeOptions          *scrapeOptions  `json:"scrapeOptions"`
	RegexOnFullURL         *bool           `json:"regexOnFullURL"`
	ZeroDataRetention      *bool           `json:"zeroDataRetention"`
	Origin                 string          `json:"origin"`
	Integration            string          `json:"integration"`
}

func isTrue(b *bool) bool { return b != nil && *b }

// request maps a Firecrawl crawl into the engine's CrawlRequest, refusing
// what Airlock's crawler cannot do. Numeric fields reach the engine as
// they are: its limits ceilings refuse values above them.
func (c *crawlRequest) request() (airlock.CrawlRequest, error) {
	req := airlock.CrawlRequest{Seed: c.URL, Sitemap: true, IncludePaths: c.IncludePaths, ExcludePaths: c.ExcludePaths,
		External:   isTrue(c.AllowExternalLinks),
		Subdomains: isTrue(c.AllowSubdomains), IgnoreRobots: isTrue(c.IgnoreRobotsTxt)}
	switch {
	case strings.TrimSpace(c.URL) == "":
		return req, badRequest("Bad Request: url is required")
	case c.Prompt != nil && *c.Prompt != "":
		return req, unsupported("prompt is not supported: Airlock runs no model")
	case isTrue(c.IgnoreQueryParameters):
		return req, unsupported("ignoreQueryParameters is not supported")
	case isTrue(c.RegexOnFullURL):
		return req, unsupported("regexOnFullURL is not supported")
	case c.RobotsUserAgent != nil && *c.RobotsUserAgent != "":
		return req, unsupported("robotsUserAgent is not supported: Airlock reads robots.txt as its own user agent")
	case len(c.Webhook) > 0 && string(c.Webhook) != "null":
		return req, unsupported("webhook is not supported: poll GET /v2/crawl/{id}, or stream GET /api/crawls/{id}/events")
	case isTrue(c.ZeroDataRetention):
		return req, unsupported("zeroDataRetention is not supported: Airlock keeps crawl pages in its job store and audits every call")
	}
	switch c.Sitemap {
	case "", "include":
	case "skip":
		req.Sitemap = false
	case "only": // the start URL and its sitemap's URLs
		req.NoLinks = true
	default:
		return req, badRequest("Bad Request: sitemap %q: want include, skip or only", c.Sitemap)
	}
	if c.Limit != nil {
		if *c.Limit < 1 {
			return req, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonLimit, "limit %d: want at least 1", *c.Limit)
		}
		req.MaxPages = *c.Limit
	}
	if c.MaxDiscoveryDepth != nil {
		switch d := *c.MaxDiscoveryDepth; {
		case d < 0:
			return req, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonLimit, "maxDiscoveryDepth %d: want at least 0", d)
		case d == 0: // the start URL and its sitemap's URLs: no link
			req.NoLinks = true
		default:
			req.Depth = d
		}
	}
	if c.Delay != nil {
		if *c.Delay < 0 || *c.Delay > math.MaxInt64/float64(time.Second) || math.IsNaN(*c.Delay) {
			return req, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonLimit, "delay %v: want a non-negative number of seconds", *c.Delay)
		}
		req.Delay = time.Duration(*c.Delay * float64(time.Second))
	}
	if c.MaxConcurrency != nil {
		if *c.MaxConcurrency < 1 {
			return req, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonLimit, "maxConcurrency %d: want at least 1", *c.MaxConcurrency)
		}
		req.Concurrency = *c.MaxConcurrency
	}
	req.Formats = []string{airlock.FormatMarkdown} // Firecrawl's default
	if o := c.ScrapeOptions; o != nil {
		var err error
		if req.Formats, err = o.jobFormats("crawl"); err != nil {
			return req, err
		}
		if o.Timeout != nil {
			if *o.Timeout < 0 || *o.Timeout > int64(math.MaxInt64/time.Millisecond) {
				return req, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonLimit, "scrapeOptions.timeout %d ms: want a positive number of milliseconds", *o.Timeout)
			}
			req.Timeout = time.Duration(*o.Timeout) * time.Millisecond
		}
		req.Cache = o.cache()
	}
	return req, nil
}

// crawlStarted is the answer of POST /v2/crawl.
type crawlStarted struct {
	Success bool   `json:"success"`
	ID      string `json:"id"`
	URL     string `json:"url"`
}

// crawlStatusResponse is the answer of GET /v2/crawl/{id}.
type crawlStatusResponse struct {
	Success   bool       `json:"success"`
	Status    string     `json:"status"`
	Total     int        `json:"total"`
	Completed int        `json:"completed"`
	Next      *string    `json:"next"`
	Data      []document `json:"data"`
	Error     string     `json:"error,omitempty"`
}

// Firecrawl's job states.
const (
	statusScraping  = "scraping"
	statusCompleted = "completed"
	statusFailed    = "failed"
	statusCancelled = "cancelled"
)

// statusOfJob maps an Airlock job state to Firecrawl's.
func statusOfJob(state string) string {
	switch state {
	case airlock.JobDone:
		return statusCompleted
	case airlock.JobFailed, airlock.JobInterrupted:
		return statusFailed
	case airlock.JobCancelled:
		return statusCancelled
	}
	return statusScraping // queued, running
}

// baseURL is the scheme and host r reached, for the URLs an answer
// gives back.
func baseURL(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// startCrawl serves POST /v2/crawl: a crawl job (the engine's
// StartCrawlJob: stored, audited, run under the tenant's policy).
func (s *server) startCrawl(w http.ResponseWriter, r *http.Request, p airlock.Principal) error {
	var req crawlRequest
	if err := decodeJSON(r, &req); err != nil {
		return err
	}
	creq, err := req.request()
	if err != nil {
		return err
	}
	job, err := s.en.StartCrawlJob(r.Context(), p, creq)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, crawlStarted{Success: true, ID: job.ID, URL: baseURL(r) + "/v2/crawl/" + url.PathEscape(job.ID)})
	return nil
}

// crawlStatus serves GET /v2/crawl/{id}: the job's state and its pages
// after ?skip=N, a page of results at a time; next is the URL of the
// following page of results while one may follow.
func (s *server) crawlStatus(w http.ResponseWriter, r *http.Request, p airlock.Principal) error {
	return s.jobStatus(w, r, p, "/v2/crawl/")
}

// batchStatus serves GET /v2/batch/scrape/{id}, as crawlStatus.
func (s *server) batchStatus(w http.ResponseWriter, r *http.Request, p airlock.Principal) error {
	return s.jobStatus(w, r, p, "/v2/batch/scrape/")
}

// jobStatus answers the status of a crawl job; prefix is the route of
// the next URL.
func (s *server) jobStatus(w http.ResponseWriter, r *http.Request, p airlock.Principal, prefix string) error {
	skip := 0
	for k, v := range r.URL.Query() {
		if k != "skip" || len(v) != 1 {
			return badRequest("Bad Request: query parameter %q: only one skip is taken", k)
		}
		n, err := strconv.Atoi(v[0])
		if err != nil || n < 0 {
			return badRequest("Bad Request: skip %q: want a non-negative integer", v[0])
		}
		skip = n
	}
	id := r.PathValue("id")
	// The job first: when it has ended, every page is already stored.
	job, err := s.en.CrawlJob(r.Context(), p, id)
	if err != nil {
		return err
	}
	limit := int(min(int64(engine.DefaultJobPageLimit), s.en.Ceiling(p, engine.LimitListLimit)))
	pages, err := s.en.CrawlJobPages(r.Context(), p, id, skip, limit)
	if err != nil {
		return err
	}
	resp := crawlStatusResponse{Success: true, Status: statusOfJob(job.State), Completed: job.Pages, Data: make([]document, 0, len(pages))}
	resp.Total = job.Pages
	if !airlock.JobFinished(job.State) {
		resp.Total += job.Progress.Queued
	}
	if job.Error != nil {
		resp.Error = job.Error.Message
	}
	fs := documentFormats(job.Request.Formats)
	for _, jp := range pages {
		if jp.Page == nil {
			continue
		}
		src := jp.Page.RequestedURL
		if src == "" {
			src = jp.Page.URL
		}
		d := pageDocument(jp.Page, src, fs)
		if fs[formatRawHTML] {
			raw := jp.Page.RawHTML
			d.RawHTML = &raw
		}
		resp.Data = append(resp.Data, d)
	}
	if len(pages) == limit && limit > 0 {
		next := baseURL(r) + prefix + url.PathEscape(id) + "?skip=" + strconv.Itoa(pages[len(pages)-1].Seq)
		resp.Next = &next
	}
	writeJSON(w, http.StatusOK, resp)
	return nil
}

// cancelResponse is the answer of DELETE /v2/crawl/{id}.
type cancelResponse struct {
	Success bool   `json:"success"`
	Status  string `json:"status"`
}

// cancelCrawl serves DELETE /v2/crawl/{id}: the engine's CancelCrawlJob,
// which waits for the crawl to stop.
func (s *server) cancelCrawl(w http.ResponseWriter, r *http.Request, p airlock.Principal) error {
	id := r.PathValue("id")
	if err := s.en.CancelCrawlJob(r.Context(), p, id); err != nil {
		return err
	}
	job, err := s.en.CrawlJob(r.Context(), p, id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, cancelResponse{Success: true, Status: statusOfJob(job.State)})
	return nil
}

// crawlError is one URL a crawl did not get, with why.
type crawlError struct {
	ID    string `json:"id"`
	URL   string `json:"url"`
	Code  string `json:"code"`
	Error string `json:"error"`
}

// crawlErrorsResponse is the answer of GET /v2/crawl/{id}/errors.
type crawlErrorsResponse struct {
	Success       bool         `json:"success"`
	Errors        []crawlError `json:"errors"`
	RobotsBlocked []string     `json:"robotsBlocked"`
}

// crawlErrors serves GET /v2/crawl/{id}/errors: the URLs the job skipped
// (refused by the policy, failed, blocked by robots.txt), from its summary
// once it has ended; empty while it runs. URLs left out by the crawl's
// scope (off host, depth, paths, page limit) are not errors.
func (s *server) crawlErrors(w http.ResponseWriter, r *http.Request, p airlock.Principal) error {
	job, err := s.en.CrawlJob(r.Context(), p, r.PathValue("id"))
	if err != nil {
		return err
	}
	resp := crawlErrorsResponse{Success: true, Errors: []crawlError{}, RobotsBlocked: []string{}}
	if job.Summary != nil {
		for i, sk := range job.Summary.Skipped {
			switch sk.Reason {
			case airlock.ReasonRobots:
				resp.RobotsBlocked = append(resp.RobotsBlocked, sk.URL)
			case airlock.ReasonOffHost, airlock.ReasonDepth, airlock.ReasonPath, airlock.ReasonLimit, airlock.ReasonDuplicate, airlock.ReasonTruncated:
			default:
				msg := string(sk.Reason)
				if sk.Detail != "" {
					msg += ": " + sk.Detail
				}
				resp.Errors = append(resp.Errors, crawlError{ID: job.ID + "-" + strconv.Itoa(i), URL: sk.URL, Code: string(sk.Reason), Error: msg})
			}
		}
	}
	writeJSON(w, http.StatusOK, resp)
	return nil
}

// documentFormats are the formats a job's documents carry: those kept with
// it, or markdown and links for a job started without any (before they
// were kept).
func documentFormats(formats []string) formatSet {
	if len(formats) == 0 {
		return formatSet{formatMarkdown: true, formatLinks: true}
	}
	fs := formatSet{}
	for _, f := range formats {
		switch f {
		case airlock.FormatMarkdown:
			fs[formatMarkdown] = true
		case airlock.FormatLinks:
			fs[formatLinks] = true
		case airlock.FormatRawHTML:
			fs[formatRawHTML] = true
		}
	}
	return fs
}
