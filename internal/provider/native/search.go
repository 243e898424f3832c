// Keyless search: the native provider scrapes the result pages of real search
// engines (DuckDuckGo's HTML endpoint, then Brave, then Bing) through the
// Doer it is given, as a browser would, and turns them into SearchResults.

package native

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	airlock "github.com/airlockhq/airlock"
)

// Keyless engines, as SearchRequest.Engine names them and as
// SearchResult.Engine reports them.
const (
	EngineDDG   = "ddg"   // DuckDuckGo's HTML endpoint
	EngineBrave = "brave" // search.brave.com's result page
	EngineBing  = "bing"  // www.bing.com's result page
)

// The engines' endpoints.
const (
	DefaultDDGURL   = "https://html.duckduckgo.com/html/"
	DefaultBraveURL = "https://search.brave.com/search"
	DefaultBingURL  = "https://www.bing.com/search"
)

// Search defaults.
const (
	DefaultSearchLimit = 10  // results when SearchRequest.Limit is 0
	MaxSearchLimit     = 100 // larger limits are cut to this
	// SearchTLSProfile is the TLS profile (and header set) of every engine
	// request: the result pages are what a browser is shown.
	SearchTLSProfile = "chrome"
)

// Kinds of bot walls (SearchError.Kind).
const (
	WallCaptcha      = "captcha"
	WallChallenge    = "challenge"
	WallAccessDenied = "access_denied"
)

// DefaultEngines is the keyless cascade, in the order it is tried: the
// DuckDuckGo HTML endpoint first because it is the most scrape-stable.
var DefaultEngines = []string{EngineDDG, EngineBrave, EngineBing}

// Search is the native provider's keyless search. It tries each engine of
// the cascade in turn through the Doer and returns the results of the first
// that gives any; SearchRequest.Engine forces one engine.
//
// The zero value uses the real endpoints and DefaultEngines. A Search is
// safe for concurrent use once configured; it holds no state between calls.
type Search struct {
	// DDGURL, BraveURL and BingURL replace the engines' endpoints (tests,
	// mirrors); "" means DefaultDDGURL, DefaultBraveURL and DefaultBingURL.
	DDGURL, BraveURL, BingURL string
	// Engines is the cascade order; nil means DefaultEngines.
	Engines []string
}

// Capabilities returns the verbs Search implements: search.
func (s *Search) Capabilities() []string { return []string{airlock.VerbSearch} }

// Search runs the keyless cascade for req. The first engine that answers
// with results wins; a bot wall, rate limit or HTTP error moves on to the
// next engine. Results are deduplicated by normalised URL, cut to req.Limit
// (0: DefaultSearchLimit) and ranked from 1.
//
// Errors: an *airlock.Error with code invalid for an empty query or an
// engine that is not keyless; with a forced engine, that engine's error
// (a *SearchError, or the Doer's error wrapped); when no engine gave results
// and at least one failed, a *CascadeError holding every failure. No results
// and no failure is an empty slice and a nil error.
func (s *Search) Search(ctx context.Context, d airlock.Doer, req airlock.SearchRequest) ([]airlock.SearchResult, error) {
	q := strings.TrimSpace(req.Query)
	if q == "" {
		return nil, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonEmptyQuery, "search: empty query")
	}
	limit := req.Limit
	switch {
	case limit <= 0:
		limit = DefaultSearchLimit
	case limit > MaxSearchLimit:
		limit = MaxSearchLimit
	}
	engines := s.Engines
	if engines == nil {
		engines = DefaultEngines
	}
	if req.Engine != "" {
		if !slices.Contains([]string{EngineDDG, EngineBrave, EngineBing}, req.Engine) {
			return nil, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonEngine,
				"search: engine %q is not a keyless engine (ddg, brave, bing)", req.Engine)
		}
		res, err := s.engine(ctx, d, req.Engine, q, req.Proxy)
		if err != nil {
			return nil, err
		}
		return rank(res, limit), nil
	}
	var errs []error
	for _, e := range engines {
		res, err := s.engine(ctx, d, e, q, req.Proxy)
		if ctx.Err() != nil {
			return nil, fmt.Errorf("search: %w", ctx.Err())
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if len(res) > 0 {
			return rank(res, limit), nil
		}
	}
	if len(errs) > 0 {
		return nil, &CascadeError{Errs: errs}
	}
	return []airlock.SearchResult{}, nil
}

// engine asks one engine and parses its answer.
func (s *Search) engine(ctx context.Context, d airlock.Doer, name, q, proxy string) ([]airlock.SearchResult, error) {
	var (
		configured, def string
		parse           func(page) []airlock.SearchResult
	)
	switch name {
	case EngineDDG:
		configured, def, parse = s.DDGURL, DefaultDDGURL, parseDDG
	case EngineBrave:
		configured, def, parse = s.BraveURL, DefaultBraveURL, parseBrave
	case EngineBing:
		configured, def, parse = s.BingURL, DefaultBingURL, parseBing
	default:
		return nil, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonEngine, "search: unknown engine %q", name)
	}
	base := endpoint(configured, def)
	if base == nil {
		return nil, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonEngine, "search %s: endpoint is not an absolute http(s) URL", name)
	}
	var hr *airlock.HTTPRequest
	switch name {
	case EngineDDG:
		hr = ddgRequest(base, q)
	case EngineBrave:
		hr = getRequest(base, url.Values{"q": {q}, "source": {"web"}})
	default:
		hr = getRequest(base, url.Values{"q": {q}})
	}
	hr.TLSProfile = SearchTLSProfile
	hr.Proxy = proxy
	resp, err := d.Do(ctx, hr)
	if err != nil {
		return nil, fmt.Errorf("search %s: %w", name, err)
	}
	p, err := newPage(name, resp, base)
	if err != nil {
		return nil, fmt.Errorf("search %s: parse result page: %w", name, err)
	}
	var res []airlock.SearchResult
	if resp.Status >= 200 && resp.Status < 300 {
		res = parse(p)
	}
	if len(res) > 0 {
		return res, nil
	}
	if err := classify(p); err != nil {
		return nil, err
	}
	return nil, nil
}

// endpoint parses the configured endpoint, or def when it is empty; nil
// when it is not an absolute http(s) URL.
func endpoint(configured, def string) *url.URL {
	raw := configured
	if raw == "" {
		raw = def
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil
	}
	return u
}

func getRequest(base *url.URL, q url.Values) *airlock.HTTPRequest {
	u := *base
	u.RawQuery = q.Encode()
	return &airlock.HTTPRequest{Method: http.MethodGet, URL: u.String()}
}

// ddgRequest is the POST the DuckDuckGo HTML page's own search form sends
// (<form action="/html/" method="post"> with fields q, b and kl), with the
// headers a browser adds to a same-origin form submission.
func ddgRequest(base *url.URL, q string) *airlock.HTTPRequest {
	origin := base.Scheme + "://" + base.Host
	form := url.Values{"q": {q}, "b": {""}, "kl": {""}}
	return &airlock.HTTPRequest{
		Method: http.MethodPost,
		URL:    base.String(),
		Header: map[string][]string{
			"Content-Type":   {"application/x-www-form-urlencoded"},
			"Origin":         {origin},
			"Referer":        {origin + "/"},
			"Sec-Fetch-Site": {"same-origin"},
			"Cache-Control":  {"max-age=0"},
		},
		Body: []byte(form.Encode()),
	}
}

// rank deduplicates results by normalised URL, keeps the first limit and
// numbers them from 1.
func rank(in []airlock.SearchResult, limit int) []airlock.SearchResult {
	seen := make(map[string]bool, len(in))
	out := make([]airlock.SearchResult, 0, min(len(in), limit))
	for _, r := range in {
		key, ok := normalizeURL(r.URL)
		if !ok || seen[key] {
			continue
		}
		seen[key] = true
		r.Rank = len(out) + 1
		out = append(out, r)
		if len(out) == limit {
			break
		}
	}
	return out
}

// SearchError is the failure of one keyless engine: a bot wall (captcha,
// challenge or access-denied page), a rate limit, or an unexpected HTTP
// status. Its code is upstream, or rate_limited for a rate limit.
type SearchError struct {
	Engine string         // ddg, brave or bing
	Reason airlock.Reason // airlock.ReasonBotWall, airlock.ReasonRateLimited or airlock.ReasonHTTPStatus
	Kind   string         // for a bot wall: WallCaptcha, WallChallenge or WallAccessDenied
	Status int            // the HTTP status of the engine's answer
	Wait   time.Duration
}

func (e *SearchError) Error() string {
	switch e.Reason {
	case airlock.ReasonBotWall:
		return fmt.Sprintf("search %s: bot wall (%s) instead of results, HTTP %d", e.Engine, e.Kind, e.Status)
	case airlock.ReasonRateLimited:
		return fmt.Sprintf("search %s: rate limited, HTTP %d", e.Engine, e.Status)
	default:
		return fmt.Sprintf("search %s: HTTP %d %s", e.Engine, e.Status, http.StatusText(e.Status))
	}
}

// ErrorCode returns rate_limited for a rate limit and upstream otherwise.
func (e *SearchError) ErrorCode() string {
	if e.Reason == airlock.ReasonRateLimited {
		return string(airlock.CodeRateLimited)
	}
	return string(airlock.CodeUpstream)
}

// ErrorReason returns e.Reason.
func (e *SearchError) ErrorReason() string { return string(e.Reason) }

// RetryAfter returns how long the engine asked to wait, or 0.
func (e *SearchError) RetryAfter() time.Duration { return e.Wait }

// CascadeError is returned when no engine of the cascade gave results and
// at least one failed. Its code and reason are those of the first failure.
type CascadeError struct {
	Errs []error // one per failed engine, in cascade order
}

func (e *CascadeError) Error() string {
	msgs := make([]string, len(e.Errs))
	for i, err := range e.Errs {
		msgs[i] = err.Error()
	}
	return "search: no engine returned results: " + strings.Join(msgs, "; ")
}

// Unwrap returns the engines' errors.
func (e *CascadeError) Unwrap() []error { return e.Errs }

// ErrorCode returns the code of the first failure.
func (e *CascadeError) ErrorCode() string {
	if len(e.Errs) == 0 {
		return string(airlock.CodeUpstream)
	}
	return string(airlock.CodeOf(e.Errs[0]))
}

// ErrorReason returns the reason of the first failure.
func (e *CascadeError) ErrorReason() string {
	if len(e.Errs) == 0 {
		return ""
	}
	return string(airlock.ReasonOf(e.Errs[0]))
}

var (
	_ interface{ Capabilities() []string } = (*Search)(nil)
	_ airlock.Searcher                     = (*Search)(nil)
	_ error                                = (*SearchError)(nil)
	_ error                                = (*CascadeError)(nil)
)
