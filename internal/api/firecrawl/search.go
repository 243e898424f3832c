package firecrawl

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/engine"
)

// searchRequest is the body of POST /v2/search.
type searchRequest struct {
	Query             string            `json:"query"`
	Sources           []json.RawMessage `json:"sources"`
	Categories        []json.RawMessage `json:"categories"`
	IncludeDomains    []string          `json:"includeDomains"`
	ExcludeDomains    []string          `json:"excludeDomains"`
	Limit             *int              `json:"limit"`
	TBS               string            `json:"tbs"`
	Location          string            `json:"location"`
	Country           string            `json:"country"`
	IgnoreInvalidURLs *bool             `json:"ignoreInvalidURLs"`
	Timeout           *int64            `json:"timeout"`
	Highlights        *bool             `json:"highlights"`
	ScrapeOptions     json.RawMessage   `json:"scrapeOptions"`
	Enterprise        []string          `json:"enterprise"`
	Origin            string            `json:"origin"`
	Integration       string            `json:"integration"`
}

// DefaultSearchLimit is Firecrawl's default number of results.
const DefaultSearchLimit = 5 // Firecrawl's default result count

// searchWeb is one web result.
type searchWeb struct {
	URL         string `json:"url"`
	Title       string `json:"title"`
	Description string `json:"description"`
	Position    int    `json:"position"`
}

type searchResponse struct {
	Success bool `json:"success"`
	Data    struct {
		Web []searchWeb `json:"web"`
	} `json:"data"`
}

// search serves POST /v2/search through the engine's Search (the
// configured search provider); only web results, without scraping them.
func (s *server) search(w http.ResponseWriter, r *http.Request, p airlock.Principal) error {
	var req searchRequest
	if err := decodeJSON(r, &req); err != nil {
		return err
	}
	if strings.TrimSpace(req.Query) == "" {
		return badRequest("Bad Request: query is required")
	}
	for _, raw := range req.Sources {
		if name := nameOrType(raw); name != "web" {
			return unsupported("source %q is not supported: Airlock searches the web only", name)
		}
	}
	switch {
	case len(req.Categories) > 0:
		return unsupported("categories are not supported")
	case len(req.IncludeDomains) > 0 || len(req.ExcludeDomains) > 0:
		return unsupported("includeDomains and excludeDomains are not supported")
	case req.TBS != "" || req.Location != "" || req.Country != "":
		return unsupported("tbs, location and country are not supported: the configured search provider decides")
	case len(req.ScrapeOptions) > 0 && string(req.ScrapeOptions) != "null":
		return unsupported("scrapeOptions on search is not supported: scrape the results with POST /v2/scrape")
	case len(req.Enterprise) > 0:
		return unsupported("enterprise options are not supported")
	}
	// Firecrawl's default, or the tenant's ceiling when that is lower (a
	// default must not be refused); a limit the caller gives is checked.
	limit := int(min(int64(DefaultSearchLimit), s.en.Ceiling(p, engine.LimitSearchResults)))
	if req.Limit != nil {
		limit = *req.Limit
		if limit < 1 {
			return airlock.Errorf(airlock.CodeInvalid, airlock.ReasonLimit, "limit %d: want at least 1", limit)
		}
	}
	ctx, cancel, err := s.withTimeout(r.Context(), p, "search", req.Timeout)
	if err != nil {
		return err
	}
	defer cancel()
	// limit goes through the search_results ceiling in the engine.
	res, id, err := s.en.Search(ctx, p, airlock.SearchRequest{Query: req.Query, Limit: limit})
	if err != nil {
		return err
	}
	if id != "" {
		w.Header().Set(HeaderDecision, id)
	}
	resp := searchResponse{Success: true}
	resp.Data.Web = make([]searchWeb, 0, len(res))
	for i, sr := range res {
		if i == limit {
			break
		}
		resp.Data.Web = append(resp.Data.Web, searchWeb{URL: sr.URL, Title: sr.Title, Description: sr.Snippet, Position: i + 1})
	}
	writeJSON(w, http.StatusOK, resp)
	return nil
}
