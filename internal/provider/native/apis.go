package native

import (
	"context"
	"slices"

	"github.com/airlockhq/airlock"
)

// API is a search API that native search asks before its keyless
// engines, and that a request may pick by Name (SearchRequest.Engine).
type API struct {
	Name     string
	Searcher airlock.Searcher
}

// WithAPIs is native search: the search APIs whose keys are configured,
// in order, then the keyless engines; the first non-empty answer wins. A
// request naming an engine gets that API or keyless engine alone.
type WithAPIs struct {
	APIs    []API
	Keyless *Search
}

// Search implements airlock.Searcher.
func (c *WithAPIs) Search(ctx context.Context, d airlock.Doer, req airlock.SearchRequest) ([]airlock.SearchResult, error) {
	if req.Engine != "" {
		for _, a := range c.APIs {
			if a.Name == req.Engine {
				r := req
				r.Engine = ""
				return a.Searcher.Search(ctx, d, r)
			}
		}
		if !slices.Contains(DefaultEngines, req.Engine) {
			return nil, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonEngine, "search engine %q is not available (keyless: ddg, brave, bing; APIs need their key: dataforseo, brave-api, searxng)", req.Engine)
		}
		return c.Keyless.Search(ctx, d, req)
	}
	var firstErr error
	for _, a := range c.APIs {
		res, err := a.Searcher.Search(ctx, d, req)
		if err == nil && len(res) > 0 {
			return res, nil
		}
		if err != nil && firstErr == nil {
			firstErr = err
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	res, err := c.Keyless.Search(ctx, d, req)
	if err != nil && firstErr != nil && len(res) == 0 {
		return nil, err
	}
	return res, err
}

var _ airlock.Searcher = (*WithAPIs)(nil)
