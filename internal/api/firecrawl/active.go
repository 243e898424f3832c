package firecrawl

import (
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/engine"
)

// activeCrawl is one crawl of GET /v2/crawl/active.
type activeCrawl struct {
	ID      string        `json:"id"`
	TeamID  string        `json:"teamId"`
	URL     string        `json:"url"`
	Options activeOptions `json:"options"`
}

// activeOptions are the Firecrawl crawl options a running crawl was
// started with; a number left out is the tenant's default. It is built
// field by field from the job's request: what Firecrawl has no field for
// (the provider, the upstream proxy, the TLS profile, the narrowing) is
// never echoed.
type activeOptions struct {
	IncludePaths       []string            `json:"includePaths,omitempty"`
	ExcludePaths       []string            `json:"excludePaths,omitempty"`
	MaxDiscoveryDepth  *int                `json:"maxDiscoveryDepth,omitempty"`
	Sitemap            string              `json:"sitemap"`
	Limit              int                 `json:"limit,omitempty"`
	AllowExternalLinks bool                `json:"allowExternalLinks"`
	AllowSubdomains    bool                `json:"allowSubdomains"`
	IgnoreRobotsTxt    bool                `json:"ignoreRobotsTxt"`
	Delay              float64             `json:"delay,omitempty"` // seconds
	MaxConcurrency     int                 `json:"maxConcurrency,omitempty"`
	ScrapeOptions      activeScrapeOptions `json:"scrapeOptions"`
}

// activeScrapeOptions are the scrape options of a running crawl.
type activeScrapeOptions struct {
	Formats []string `json:"formats"`
	Timeout int64    `json:"timeout,omitempty"` // milliseconds
}

// activeCrawlsResponse is the answer of GET /v2/crawl/active.
type activeCrawlsResponse struct {
	Success bool          `json:"success"`
	Crawls  []activeCrawl `json:"crawls"`
}

// activeCrawlOf is job's entry. Its URL is the seed the caller gave, a
// password in it masked.
func activeCrawlOf(job airlock.CrawlJob) activeCrawl {
	req := job.Request
	seed := req.Seed
	if u, err := url.Parse(seed); err == nil {
		seed = u.Redacted()
	}
	o := activeOptions{IncludePaths: req.IncludePaths, ExcludePaths: req.ExcludePaths,
		Sitemap: "include", Limit: req.MaxPages, AllowExternalLinks: req.External, AllowSubdomains: req.Subdomains,
		IgnoreRobotsTxt: req.IgnoreRobots, Delay: time.Duration(req.Delay).Seconds(), MaxConcurrency: req.Concurrency,
		ScrapeOptions: activeScrapeOptions{Formats: []string{}, Timeout: time.Duration(req.Timeout).Milliseconds()}}
	switch {
	case req.NoLinks: // sitemap "only" and maxDiscoveryDepth 0 both follow no link
		o.MaxDiscoveryDepth = new(0)
	case req.Depth > 0:
		o.MaxDiscoveryDepth = new(req.Depth)
	}
	if !req.Sitemap {
		o.Sitemap = "skip"
	}
	fs := documentFormats(req.Formats)
	for _, f := range []string{formatMarkdown, formatLinks, formatRawHTML} {
		if fs[f] {
			o.ScrapeOptions.Formats = append(o.ScrapeOptions.Formats, f)
		}
	}
	return activeCrawl{ID: job.ID, TeamID: job.Tenant, URL: seed, Options: o}
}

// activeCrawls serves GET /v2/crawl/active: the caller's tenant's crawls
// (seed crawls, not batch scrapes) still queued or running, oldest first.
// They are found among the tenant's newest jobs, as many as its list
// ceiling (limits.list_limit) lets one read at most (engine.
// MaxJobPageLimit): a tenant runs at most engine.MaxRunningJobs at once
// per process, so the answer is short, but a crawl started before that
// many newer jobs is not listed.
func (s *server) activeCrawls(w http.ResponseWriter, r *http.Request, p airlock.Principal) error {
	if len(r.URL.Query()) > 0 {
		return badRequest("Bad Request: GET /v2/crawl/active takes no query parameter")
	}
	limit := int(min(int64(engine.MaxJobPageLimit), s.en.Ceiling(p, engine.LimitListLimit)))
	jobs, err := s.en.CrawlJobs(r.Context(), p, limit)
	if err != nil {
		return err
	}
	resp := activeCrawlsResponse{Success: true, Crawls: []activeCrawl{}}
	for _, job := range slices.Backward(jobs) {
		if airlock.JobFinished(job.State) || job.Request.Seed == "" || job.Tenant != p.Tenant {
			continue
		}
		resp.Crawls = append(resp.Crawls, activeCrawlOf(job))
	}
	writeJSON(w, http.StatusOK, resp)
	return nil
}
