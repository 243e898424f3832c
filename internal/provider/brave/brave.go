// Package brave is the Brave Search API search provider (the paid web
// search API, not the scraped result page the native provider reads).
//
// The credential is BRAVE_SEARCH_API_KEY, handed to New by the provider registry (internal/cli); it is
// sent only in the X-Subscription-Token header and never appears in results
// or errors. Requests go through the airlock.Doer the dispatcher hands the
// provider: the provider never dials.
//
// API reference: https://api-dashboard.search.brave.com/docs (Web Search
// API and its WebSearchApiResponse model): GET
// https://api.search.brave.com/res/v1/web/search with q, count (at most 20),
// offset (at most 9, in pages of count) and text_decorations; headers
// Accept: application/json and X-Subscription-Token. The answer's
// web.results[] carry title, url and description, and
// query.more_results_available says whether another page exists. Errors
// are {"type":"ErrorResponse","error":{"status","code","detail"}}; a rate
// limit is a 429 with X-RateLimit-Reset.
package brave

import (
	"context"
	"encoding/json"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	airlock "github.com/airlockhq/airlock"

	"github.com/airlockhq/airlock/internal/provider/apiutil"
)

// Provider facts.
const (
	Name           = "brave-api"            // the provider's name, and SearchResult.Engine
	EnvAPIKey      = "BRAVE_SEARCH_API_KEY" // the environment variable the provider registry (internal/cli) reads the key from
	DefaultBaseURL = "https://api.search.brave.com"
	SearchPath     = "/res/v1/web/search"
	DefaultLimit   = 10 // results when SearchRequest.Limit is 0
	MaxCount       = 20 // the API's largest page
	MaxOffset      = 9  // the API's largest page offset
	// TLSProfile of API requests: an API client, not a browser.
	TLSProfile = "go"
)

// Options configure a Provider.
type Options struct {
	// APIKey is BRAVE_SEARCH_API_KEY, the subscription token. Required.
	APIKey string
	// BaseURL replaces DefaultBaseURL (tests, proxies).
	BaseURL string
}

// Provider searches with the Brave Search API. Build it with New; it is safe
// for concurrent use.
type Provider struct {
	endpoint *url.URL
	key      string
}

// New returns a Provider. Errors (code invalid, reason provider_config)
// never contain the key.
func New(opts Options) (*Provider, error) {
	key := strings.TrimSpace(opts.APIKey)
	if key == "" {
		return nil, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonProviderConfig, "brave-api: %s is empty", EnvAPIKey)
	}
	base := opts.BaseURL
	if base == "" {
		base = DefaultBaseURL
	}
	u, err := url.Parse(strings.TrimSuffix(base, "/") + SearchPath)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return nil, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonProviderConfig, "brave-api: base URL %q is not an absolute http(s) URL without userinfo", base)
	}
	return &Provider{endpoint: u, key: key}, nil
}

// Capabilities returns the verbs the provider implements: search.
func (p *Provider) Capabilities() []string { return []string{airlock.VerbSearch} }

type response struct {
	Query struct {
		MoreResultsAvailable bool `json:"more_results_available"`
	} `json:"query"`
	Web struct {
		Results []struct {
			Title       string `json:"title"`
			URL         string `json:"url"`
			Description string `json:"description"`
		} `json:"results"`
	} `json:"web"`
}

type errorResponse struct {
	Error struct {
		Status int    `json:"status"`
		Code   string `json:"code"`
		Detail string `json:"detail"`
	} `json:"error"`
}

// Search asks the Brave Search API for web results for req.Query: one page
// of up to MaxCount, and further pages (offset 1…MaxOffset) when the limit
// needs them and the API says more exist. Results are deduplicated by URL,
// cut to req.Limit (0: DefaultLimit) and ranked from 1.
//
// Errors: code invalid for an empty query; an *Error for an HTTP error
// status (401/403: unavailable, provider_auth; 429: rate_limited; others:
// upstream, http_status) or an unreadable answer; the Doer's error, wrapped
// with its classification kept. No message contains the key.
func (p *Provider) Search(ctx context.Context, d airlock.Doer, req airlock.SearchRequest) ([]airlock.SearchResult, error) {
	q := strings.TrimSpace(req.Query)
	if q == "" {
		return nil, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonEmptyQuery, "brave-api: empty query")
	}
	limit := req.Limit
	if limit <= 0 {
		limit = DefaultLimit
	}
	limit = min(limit, MaxCount*(MaxOffset+1))
	count := min(limit, MaxCount)
	out := make([]airlock.SearchResult, 0, limit)
	seen := map[string]bool{}
	for offset := 0; offset <= MaxOffset && len(out) < limit; offset++ {
		r, err := p.page(ctx, d, q, count, offset, req.Proxy)
		if err != nil {
			return nil, err
		}
		for _, w := range r.Web.Results {
			key := strings.TrimSuffix(strings.SplitN(w.URL, "#", 2)[0], "/")
			if w.URL == "" || seen[key] {
				continue
			}
			seen[key] = true
			out = append(out, airlock.SearchResult{
				Title:   plain(w.Title),
				URL:     w.URL,
				Snippet: plain(w.Description),
				Engine:  Name,
				Rank:    len(out) + 1,
			})
			if len(out) == limit {
				break
			}
		}
		if len(r.Web.Results) < count || !r.Query.MoreResultsAvailable {
			break
		}
	}
	return out, nil
}

func (p *Provider) page(ctx context.Context, d airlock.Doer, q string, count, offset int, proxy string) (*response, error) {
	u := *p.endpoint
	v := url.Values{"q": {q}, "count": {strconv.Itoa(count)}, "text_decorations": {"false"}}
	if offset > 0 {
		v.Set("offset", strconv.Itoa(offset))
	}
	u.RawQuery = v.Encode()
	resp, err := d.Do(ctx, &airlock.HTTPRequest{
		Method: http.MethodGet,
		URL:    u.String(),
		Header: map[string][]string{
			"Accept":               {"application/json"},
			"X-Subscription-Token": {p.key},
		},
		TLSProfile: TLSProfile,
		Proxy:      proxy,
	})
	if err != nil {
		return nil, apiutil.Transport(err, "brave-api: ", p.key)
	}
	if resp.Status < 200 || resp.Status > 299 {
		return nil, p.httpError(resp)
	}
	var r response
	if err := json.Unmarshal(resp.Body, &r); err != nil {
		return nil, &Error{Status: resp.Status, Code: airlock.CodeUpstream, Reason: airlock.ReasonProviderError,
			Message: "unreadable answer: " + p.redact(err.Error())}
	}
	return &r, nil
}

func (p *Provider) httpError(resp *airlock.HTTPResponse) error {
	e := &Error{Status: resp.Status, Code: airlock.CodeUpstream, Reason: airlock.ReasonHTTPStatus}
	var er errorResponse
	if json.Unmarshal(resp.Body, &er) == nil && (er.Error.Code != "" || er.Error.Detail != "") {
		e.APICode, e.Message = er.Error.Code, p.redact(er.Error.Detail)
	} else {
		e.Message = p.redact(apiutil.Snippet(resp.Body))
	}
	switch resp.Status {
	case http.StatusUnauthorized, http.StatusForbidden:
		e.Code, e.Reason = airlock.CodeUnavailable, airlock.ReasonProviderAuth
	case http.StatusTooManyRequests:
		e.Code, e.Reason, e.Wait = airlock.CodeRateLimited, airlock.ReasonRateLimited, apiutil.RetryAfter(resp.Header, "X-RateLimit-Reset")
	}
	return e
}

func (p *Provider) redact(s string) string { return apiutil.Redact(s, p.key) }

// Error is a failure reported by the Brave Search API. Message never holds
// the key.
type Error struct {
	Status  int    // the HTTP status
	APICode string // the API's error code (e.g. SUBSCRIPTION_TOKEN_INVALID), "" when none
	Code    airlock.Code
	Reason  airlock.Reason // airlock.ReasonProviderAuth, airlock.ReasonRateLimited, airlock.ReasonHTTPStatus or airlock.ReasonProviderError
	Message string         // the API's detail, the key redacted
	Wait    time.Duration
}

func (e *Error) Error() string {
	s := "brave-api: HTTP " + strconv.Itoa(e.Status)
	if e.APICode != "" {
		s += " " + e.APICode
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// ErrorCode returns the vocabulary code.
func (e *Error) ErrorCode() string { return string(e.Code) }

// ErrorReason returns e.Reason.
func (e *Error) ErrorReason() string { return string(e.Reason) }

// RetryAfter returns how long the API asked to wait, or 0.
func (e *Error) RetryAfter() time.Duration { return e.Wait }

var tags = regexp.MustCompile(`<[^>]*>`)

// plain strips markup (the API's <strong> decorations, should they be on)
// and entities, and collapses white space.
func plain(s string) string {
	return strings.Join(strings.Fields(html.UnescapeString(tags.ReplaceAllString(s, ""))), " ")
}

var (
	_ airlock.Searcher = (*Provider)(nil)
	_ error            = (*Error)(nil)
)
