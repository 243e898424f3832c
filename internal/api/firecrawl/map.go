package firecrawl

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/engine"
)

// Map bounds.
const (
	// MaxMapLimit is the most URLs a map answers (Firecrawl's own bound).
	MaxMapLimit = 100000
	// DefaultMapLimit is Firecrawl's default limit.
	DefaultMapLimit = 5000
	// MapPages is the most pages a map fetches (one level of links from
	// the seed and its sitemap); the tenant's crawl_max_pages ceiling
	// lowers it.
	MapPages = 50
)

// mapRequest is the body of POST /v2/map.
type mapRequest struct {
	URL                   string          `json:"url"`
	Search                string          `json:"search"`
	Sitemap               string          `json:"sitemap"`
	IncludeSubdomains     *bool           `json:"includeSubdomains"`
	IgnoreQueryParameters *bool           `json:"ignoreQueryParameters"`
	Limit                 *int            `json:"limit"`
	Timeout               *int64          `json:"timeout"`
	Location              json.RawMessage `json:"location"`
	Origin                string          `json:"origin"`
	Integration           string          `json:"integration"`
}

// mapLink is one URL of a map answer.
type mapLink struct {
	URL         string `json:"url"`
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`
}

type mapResponse struct {
	Success bool      `json:"success"`
	Links   []mapLink `json:"links"`
}

// mapSite serves POST /v2/map: a crawl (the engine's Crawl, so the gate
// and the policy decide every fetch) of the seed, its sitemap and one level
// of links in discovery mode (no content extraction). The answer is the
// pages fetched and the same-host links they hold: a URL on a host the
// policy refused is never in it.
func (s *server) mapSite(w http.ResponseWriter, r *http.Request, p airlock.Principal) error {
	var req mapRequest
	if err := decodeJSON(r, &req); err != nil {
		return err
	}
	if strings.TrimSpace(req.URL) == "" {
		return badRequest("Bad Request: url is required")
	}
	limit := DefaultMapLimit
	if req.Limit != nil {
		limit = *req.Limit
		if limit < 1 || limit > MaxMapLimit {
			return airlock.Errorf(airlock.CodeInvalid, airlock.ReasonLimit, "limit %d: want 1 to %d", limit, MaxMapLimit)
		}
	}
	sitemap, noLinks := true, false
	switch req.Sitemap {
	case "", "include":
	case "skip":
		sitemap = false
	case "only": // the start URL and its sitemap's URLs, not the pages' links
		noLinks = true
	default:
		return badRequest("Bad Request: sitemap %q: want include, skip or only", req.Sitemap)
	}
	if len(req.Location) > 0 && string(req.Location) != "null" {
		return unsupported("location is not supported")
	}
	ctx, cancel, err := s.withTimeout(r.Context(), p, "crawl", req.Timeout)
	if err != nil {
		return err
	}
	defer cancel()
	pages := int(min(int64(min(limit, MapPages)), s.en.Ceiling(p, engine.LimitCrawlMaxPages)))
	creq := airlock.CrawlRequest{
		Seed: req.URL, Depth: 1, MaxPages: pages, Extract: airlock.ExtractNone, Sitemap: sitemap,
		Subdomains: req.IncludeSubdomains != nil && *req.IncludeSubdomains, NoLinks: noLinks,
	}
	var mu sync.Mutex
	var got []*airlock.Page
	sum, err := s.en.Crawl(ctx, p, creq, func(pg *airlock.Page) error {
		mu.Lock()
		got = append(got, pg)
		mu.Unlock()
		return nil
	}, nil)
	if err != nil {
		return err
	}
	if sum != nil && sum.DecisionID != "" {
		w.Header().Set(HeaderDecision, sum.DecisionID)
	}
	if len(got) == 0 {
		if err := seedError(sum); err != nil {
			return err
		}
	}
	dropQuery := req.IgnoreQueryParameters == nil || *req.IgnoreQueryParameters
	links := mapLinks(req.URL, got, dropQuery, !noLinks, req.Search, limit)
	writeJSON(w, http.StatusOK, mapResponse{Success: true, Links: links})
	return nil
}

// mapLinks merges the pages fetched (with their titles) and, when
// withLinks, their same-host links, deduplicated (without the query when dropQuery),
// filtered by search (a case-insensitive substring of the URL or title),
// the seed first, then in URL order, at most limit.
func mapLinks(seed string, pages []*airlock.Page, dropQuery, withLinks bool, search string, limit int) []mapLink {
	key := func(u string) string {
		pu, err := url.Parse(u)
		if err != nil {
			return u
		}
		pu.Fragment = ""
		if dropQuery {
			pu.RawQuery = ""
		}
		return pu.String()
	}
	byURL := map[string]*mapLink{}
	add := func(u, title, desc string) {
		k := key(u)
		if l, ok := byURL[k]; ok {
			if l.Title == "" {
				l.Title, l.Description = title, desc
			}
			return
		}
		byURL[k] = &mapLink{URL: k, Title: title, Description: desc}
	}
	for _, pg := range pages {
		add(pg.URL, docTitle(pg), pg.Description)
	}
	for _, pg := range pages {
		if !withLinks {
			break
		}
		for _, l := range pg.Links {
			if l.Internal {
				add(l.URL, "", "")
			}
		}
	}
	search = strings.ToLower(search)
	seedKey := key(seed)
	out := make([]mapLink, 0, len(byURL))
	for _, l := range byURL {
		if search != "" && !strings.Contains(strings.ToLower(l.URL), search) && !strings.Contains(strings.ToLower(l.Title), search) {
			continue
		}
		out = append(out, *l)
	}
	slices.SortFunc(out, func(a, b mapLink) int {
		switch {
		case a.URL == seedKey:
			return -1
		case b.URL == seedKey:
			return 1
		}
		return strings.Compare(a.URL, b.URL)
	})
	if len(out) > limit {
		out = out[:limit]
	}
	return out
}

// seedError is the error of a crawl that fetched nothing because its
// first URL was skipped: a refusal by the policy is denied (403, with the
// crawl's decision id), any other skip an upstream failure. nil when the
// summary lists no skip.
func seedError(sum *airlock.CrawlSummary) error {
	if sum == nil || len(sum.Skipped) == 0 {
		return nil
	}
	sk := sum.Skipped[0]
	var e *airlock.Error
	if sk.Reason == airlock.ReasonPolicy {
		// The policy's own reason, when the detail is one.
		reason := airlock.Reason(sk.Detail)
		if reason == "" || strings.ContainsAny(sk.Detail, " :") {
			reason = airlock.ReasonPolicy
		}
		e = airlock.Errorf(airlock.CodeDenied, reason, "%s is refused by the tenant's policy", sk.URL)
	} else {
		e = airlock.Errorf(airlock.CodeUpstream, sk.Reason, "%s could not be fetched (%s)", sk.URL, sk.Reason)
	}
	e.DecisionID = sum.DecisionID
	return e
}

// docTitle is the page's <title>, Firecrawl's title (Page.Title is the
// headline, which extraction prefers), else Page.Title.
func docTitle(p *airlock.Page) string {
	if t := p.Meta["html:title"]; t != "" {
		return t
	}
	return p.Title
}
