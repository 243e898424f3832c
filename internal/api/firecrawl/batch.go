package firecrawl

import (
	"encoding/json"
	"math"
	"net/http"
	"net/url"
	"time"

	"github.com/airlockhq/airlock"
)

// batchRequest is the body of POST /v2/batch/scrape: the URLs and, at the
// top level, the scrape options.
type batchRequest struct {
	URLs []string `json:"urls"`
	scrapeOptions
	Webhook           json.RawMessage `json:"webhook"`
	AppendToID        *string         `json:"appendToId"`
	IgnoreInvalidURLs *bool           `json:"ignoreInvalidURLs"`
	MaxConcurrency    *int            `json:"maxConcurrency"`
}

// batchStarted is the answer of POST /v2/batch/scrape.
type batchStarted struct {
	Success     bool     `json:"success"`
	ID          string   `json:"id"`
	URL         string   `json:"url"`
	InvalidURLs []string `json:"invalidURLs,omitempty"`
}

// absoluteHTTP reports whether u is an absolute http(s) URL with a host
// (the policy decides the rest when it is fetched).
func absoluteHTTP(u string) bool {
	p, err := url.Parse(u)
	return err == nil && (p.Scheme == "http" || p.Scheme == "https") && p.Host != ""
}

// startBatch serves POST /v2/batch/scrape: a crawl job over a list of
// URLs (the engine's StartCrawlJob; a list crawl follows no links), so it
// is stored, audited and survives a restart like a crawl. Its status is
// GET /v2/batch/scrape/{id}.
func (s *server) startBatch(w http.ResponseWriter, r *http.Request, p airlock.Principal) error {
	var req batchRequest
	if err := decodeJSON(r, &req); err != nil {
		return err
	}
	if len(req.URLs) == 0 {
		return badRequest("Bad Request: urls is required")
	}
	switch {
	case len(req.Webhook) > 0 && string(req.Webhook) != "null":
		return unsupported("webhook is not supported: poll GET /v2/batch/scrape/{id}")
	case req.AppendToID != nil && *req.AppendToID != "":
		return unsupported("appendToId is not supported: start a new batch")
	}
	formats, err := req.jobFormats("batch")
	if err != nil {
		return err
	}
	var urls, invalid []string
	for _, u := range req.URLs {
		if absoluteHTTP(u) {
			urls = append(urls, u)
			continue
		}
		if !isTrue(req.IgnoreInvalidURLs) {
			return badRequest("Bad Request: %q is not an absolute http(s) URL (ignoreInvalidURLs: true skips such URLs)", u)
		}
		invalid = append(invalid, u)
	}
	if len(urls) == 0 {
		return badRequest("Bad Request: no valid URL in urls")
	}
	creq := airlock.CrawlRequest{URLs: urls, Cache: req.cache(), Formats: formats}
	if req.MaxConcurrency != nil {
		if *req.MaxConcurrency < 1 {
			return airlock.Errorf(airlock.CodeInvalid, airlock.ReasonLimit, "maxConcurrency %d: want at least 1", *req.MaxConcurrency)
		}
		creq.Concurrency = *req.MaxConcurrency
	}
	if req.Timeout != nil {
		if *req.Timeout < 0 || *req.Timeout > int64(math.MaxInt64/time.Millisecond) {
			return airlock.Errorf(airlock.CodeInvalid, airlock.ReasonLimit, "timeout %d ms: want a positive number of milliseconds", *req.Timeout)
		}
		creq.Timeout = time.Duration(*req.Timeout) * time.Millisecond
	}
	// The number of URLs and the numbers above go through the limits
	// ceilings in the engine (crawl_urls, crawl_concurrency, crawl_timeout).
	job, err := s.en.StartCrawlJob(r.Context(), p, creq)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, batchStarted{Success: true, ID: job.ID, URL: baseURL(r) + "/v2/batch/scrape/" + url.PathEscape(job.ID), InvalidURLs: invalid})
	return nil
}
