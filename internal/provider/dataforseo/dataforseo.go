// Package dataforseo is the DataForSEO search provider: real Google organic
// results from DataForSEO's SERP API (the Live "Google Organic SERP Regular"
// endpoint, POST /v3/serp/google/organic/live/regular), for hosts whose
// datacenter IP addresses get captchas from the keyless engines.
//
// The credential is DATAFORSEO_AUTH, handed to New by the provider registry (internal/cli); it is sent
// only as the Basic Authorization header and never appears in results or
// errors. Requests go through the airlock.Doer the dispatcher hands the
// provider: the provider never dials.
//
// API reference: https://docs.dataforseo.com/v3/serp/google/organic/live/regular/
// (request array of one task: keyword, location_code, language_code, depth;
// answer: status_code 20000 when fine, tasks[].status_code,
// tasks[].result[].items[] with type "organic", title, url, description,
// rank_absolute) and https://docs.dataforseo.com/v3/appendix/errors
// (HTTP 401 and 402, internal status codes 4xxxx and 5xxxx).
package dataforseo

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	airlock "github.com/airlockhq/airlock"

	"github.com/airlockhq/airlock/internal/provider/apiutil"
)

// Provider facts.
const (
	Name           = "dataforseo"      // the provider's name, and SearchResult.Engine
	EnvAuth        = "DATAFORSEO_AUTH" // the environment variable the provider registry (internal/cli) reads the credential from
	DefaultBaseURL = "https://api.dataforseo.com"
	// LivePath is the Live Google Organic SERP (regular) endpoint.
	LivePath = "/v3/serp/google/organic/live/regular"
	// DefaultLocationCode is DataForSEO's location code of the United States.
	DefaultLocationCode = 2840
	DefaultLanguageCode = "en"
	DefaultLimit        = 10  // results when SearchRequest.Limit is 0
	MaxDepth            = 700 // the API's largest depth
	// TLSProfile of API requests: an API client, not a browser.
	TLSProfile = "go"
)

// Options configure a Provider.
type Options struct {
	// Auth is DATAFORSEO_AUTH: either "login:password" (the API access
	// credentials from app.dataforseo.com/api-access) or the base64 encoding
	// of it, as `printf 'login:password' | base64` prints. Required.
	Auth string
	// BaseURL replaces DefaultBaseURL (tests, proxies).
	BaseURL string
	// LocationCode and LanguageCode are the search's location and
	// language; 0 and "" mean DefaultLocationCode and DefaultLanguageCode.
	LocationCode int
	LanguageCode string
}

// Provider searches Google through DataForSEO. Build it with New; it is safe
// for concurrent use.
type Provider struct {
	endpoint string
	auth     string   // the Authorization header value
	secrets  []string // strings redacted from every error message
	location int
	language string
}

// New returns a Provider. Errors (code invalid, reason provider_config) name
// what is wrong with opts and never contain the credential.
func New(opts Options) (*Provider, error) {
	auth, secrets, err := basicAuth(opts.Auth)
	if err != nil {
		return nil, err
	}
	base := opts.BaseURL
	if base == "" {
		base = DefaultBaseURL
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return nil, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonProviderConfig, "dataforseo: base URL %q is not an absolute http(s) URL without userinfo", base)
	}
	p := &Provider{
		endpoint: strings.TrimSuffix(u.String(), "/") + LivePath,
		auth:     auth,
		secrets:  secrets,
		location: opts.LocationCode,
		language: opts.LanguageCode,
	}
	if p.location == 0 {
		p.location = DefaultLocationCode
	}
	if p.language == "" {
		p.language = DefaultLanguageCode
	}
	return p, nil
}

// basicAuth turns DATAFORSEO_AUTH into a Basic Authorization header value,
// accepting "login:password" or its base64 encoding (standard or URL
// alphabet, padded or not), and lists the strings to redact.
func basicAuth(s string) (string, []string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", nil, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonProviderConfig, "dataforseo: %s is empty", EnvAuth)
	}
	raw := s
	if !strings.Contains(s, ":") {
		raw = ""
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
			if b, err := enc.DecodeString(s); err == nil && strings.Contains(string(b), ":") {
				raw = string(b)
				break
			}
		}
		if raw == "" {
			return "", nil, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonProviderConfig, "dataforseo: %s is neither login:password nor the base64 of it", EnvAuth)
		}
	}
	login, password, _ := strings.Cut(raw, ":")
	if login == "" || password == "" {
		return "", nil, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonProviderConfig, "dataforseo: %s needs both a login and a password", EnvAuth)
	}
	token := base64.StdEncoding.EncodeToString([]byte(raw))
	return "Basic " + token, []string{s, raw, token, password}, nil
}

// Capabilities returns the verbs the provider implements: search.
func (p *Provider) Capabilities() []string { return []string{airlock.VerbSearch} }

// task is one Live SERP task.
type task struct {
	Keyword      string `json:"keyword"`
	LocationCode int    `json:"location_code"`
	LanguageCode string `json:"language_code"`
	Depth        int    `json:"depth"`
}

// response is the part of the API's answer the provider reads.
type response struct {
	StatusCode    int    `json:"status_code"`
	StatusMessage string `json:"status_message"`
	Tasks         []struct {
		StatusCode    int    `json:"status_code"`
		StatusMessage string `json:"status_message"`
		Result        []struct {
			Items []item `json:"items"`
		} `json:"result"`
	} `json:"tasks"`
}

type item struct {
	Type         string `json:"type"`
	RankAbsolute int    `json:"rank_absolute"`
	Title        string `json:"title"`
	URL          string `json:"url"`
	Description  string `json:"description"`
}

// statusOK is the API's "Ok." status code.
const statusOK = 20000

// Search asks DataForSEO for Google's organic results for req.Query, with a
// depth matched to req.Limit (0: DefaultLimit). Results keep Google's
// order (rank_absolute), are deduplicated by URL and ranked from 1.
//
// Errors: code invalid for an empty query; an *Error for an HTTP error
// status (401/403: unavailable, provider_auth; 429: rate_limited; others:
// upstream, http_status) or an error status_code in the answer; the Doer's
// error, wrapped with its classification kept. No message contains the
// credential.
func (p *Provider) Search(ctx context.Context, d airlock.Doer, req airlock.SearchRequest) ([]airlock.SearchResult, error) {
	q := strings.TrimSpace(req.Query)
	if q == "" {
		return nil, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonEmptyQuery, "dataforseo: empty query")
	}
	limit := req.Limit
	if limit <= 0 {
		limit = DefaultLimit
	}
	limit = min(limit, MaxDepth)
	body, err := json.Marshal([]task{{Keyword: q, LocationCode: p.location, LanguageCode: p.language, Depth: max(limit, 10)}})
	if err != nil {
		return nil, err
	}
	resp, err := d.Do(ctx, &airlock.HTTPRequest{
		Method: http.MethodPost,
		URL:    p.endpoint,
		Header: map[string][]string{
			"Authorization": {p.auth},
			"Content-Type":  {"application/json"},
			"Accept":        {"application/json"},
		},
		Body:       body,
		TLSProfile: TLSProfile,
		Proxy:      req.Proxy,
	})
	if err != nil {
		return nil, apiutil.Transport(err, "dataforseo: ", p.secrets...)
	}
	if resp.Status < 200 || resp.Status > 299 {
		return nil, p.httpError(resp)
	}
	var r response
	if err := json.Unmarshal(resp.Body, &r); err != nil {
		return nil, &Error{Status: resp.Status, Code: airlock.CodeUpstream, Reason: airlock.ReasonProviderError,
			Message: "unreadable answer: " + apiutil.Redact(err.Error(), p.secrets...)}
	}
	if r.StatusCode != statusOK {
		return nil, p.apiError(resp.Status, r.StatusCode, r.StatusMessage)
	}
	var items []item
	for _, t := range r.Tasks {
		if t.StatusCode != statusOK {
			return nil, p.apiError(resp.Status, t.StatusCode, t.StatusMessage)
		}
		for _, res := range t.Result {
			for _, it := range res.Items {
				if it.Type == "organic" && it.URL != "" {
					items = append(items, it)
				}
			}
		}
	}
	sort.SliceStable(items, func(i, j int) bool { return items[i].RankAbsolute < items[j].RankAbsolute })
	out := make([]airlock.SearchResult, 0, min(len(items), limit))
	seen := map[string]bool{}
	for _, it := range items {
		key := strings.TrimSuffix(strings.SplitN(it.URL, "#", 2)[0], "/")
		if seen[key] {
			continue
		}
		seen[key] = true
		out = append(out, airlock.SearchResult{
			Title:   strings.TrimSpace(it.Title),
			URL:     it.URL,
			Snippet: strings.Join(strings.Fields(it.Description), " "),
			Engine:  Name,
			Rank:    len(out) + 1,
		})
		if len(out) == limit {
			break
		}
	}
	return out, nil
}

// httpError classifies a non-2xx answer.
func (p *Provider) httpError(resp *airlock.HTTPResponse) error {
	e := &Error{Status: resp.Status, Code: airlock.CodeUpstream, Reason: airlock.ReasonHTTPStatus}
	var r response
	if json.Unmarshal(resp.Body, &r) == nil && r.StatusMessage != "" {
		e.APICode, e.Message = r.StatusCode, apiutil.Redact(r.StatusMessage, p.secrets...)
	} else {
		e.Message = apiutil.Redact(apiutil.Snippet(resp.Body), p.secrets...)
	}
	switch resp.Status {
	case http.StatusUnauthorized, http.StatusForbidden:
		e.Code, e.Reason = airlock.CodeUnavailable, airlock.ReasonProviderAuth
	case http.StatusTooManyRequests:
		e.Code, e.Reason, e.Wait = airlock.CodeRateLimited, airlock.ReasonRateLimited, apiutil.RetryAfter(resp.Header)
	}
	return e
}

// apiError classifies an error status_code of the API (appendix/errors):
// 401xx refused credentials, 402xx account and rate-limit problems.
func (p *Provider) apiError(status, code int, msg string) error {
	e := &Error{Status: status, APICode: code, Code: airlock.CodeUpstream, Reason: airlock.ReasonProviderError, Message: apiutil.Redact(msg, p.secrets...)}
	lower := strings.ToLower(msg)
	switch {
	case code >= 40100 && code < 40200:
		e.Code, e.Reason = airlock.CodeUnavailable, airlock.ReasonProviderAuth
	case strings.Contains(lower, "rate-limit") || strings.Contains(lower, "rate limit") || strings.Contains(lower, "too many requests"):
		e.Code, e.Reason = airlock.CodeRateLimited, airlock.ReasonRateLimited
	}
	return e
}

// Error is a failure reported by the DataForSEO API: an HTTP error status
// or an error status_code in its answer. Message never holds the
// credential.
type Error struct {
	Status  int // the HTTP status
	APICode int // the API's status_code, 0 when none was read
	Code    airlock.Code
	Reason  airlock.Reason // airlock.ReasonProviderAuth, airlock.ReasonRateLimited, airlock.ReasonHTTPStatus or airlock.ReasonProviderError
	Message string         // the API's message, credentials redacted
	Wait    time.Duration
}

func (e *Error) Error() string {
	s := "dataforseo: HTTP " + strconv.Itoa(e.Status)
	if e.APICode != 0 {
		s += ", status_code " + strconv.Itoa(e.APICode)
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

var (
	_ airlock.Searcher = (*Provider)(nil)
	_ error            = (*Error)(nil)
)
