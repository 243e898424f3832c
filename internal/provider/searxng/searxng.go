// Package searxng is the SearXNG search provider: a self-hosted (or
// operator-chosen) SearXNG metasearch instance queried through its JSON API.
//
// The instance is SEARXNG_URL, handed to New by the provider registry (internal/cli). It may carry
// credentials as userinfo (https://user:password@searx.example for an
// instance behind Basic authentication): they are moved into the
// Authorization header, since egress refuses userinfo in URLs, and they and
// any query parameters of SEARXNG_URL are redacted from every error. Requests
// go through the airlock.Doer the dispatcher hands the provider: the
// provider never dials, and an instance on a private address needs an
// operator floor exception like any other target.
//
// API reference: https://docs.searxng.org/dev/search_api.html (GET /search
// with q, format=json and pageno; formats other than html must be enabled
// under search.formats in settings.yml, else the instance answers 403
// Forbidden). The JSON answer (the format=json branch of searx/webapp.py)
// holds query, number_of_results, results[] with url, title, content,
// engine, engines, score and category, answers, corrections, infoboxes,
// suggestions, and unresponsive_engines as [engine, reason] pairs.
package searxng

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	airlock "github.com/airlockhq/airlock"

	"github.com/airlockhq/airlock/internal/provider/apiutil"
)

// Provider facts.
const (
	Name         = "searxng"     // the provider's name; SearchResult.Engine is "searxng:<engine>"
	EnvURL       = "SEARXNG_URL" // the environment variable the provider registry (internal/cli) reads the instance URL from
	DefaultLimit = 10            // results when SearchRequest.Limit is 0
	MaxPages     = 5             // result pages asked for at most
	// TLSProfile of API requests: an API client, not a browser.
	TLSProfile = "go"
)

// minTokenLen is the length from which a query parameter value of
// SEARXNG_URL is taken for a token and redacted.
const minTokenLen = 8

// Options configure a Provider.
type Options struct {
	// URL is SEARXNG_URL, the instance's base URL (the /search endpoint is
	// appended). Required.
	URL string
	// Categories and Language, when set, are passed as the API's
	// categories and language parameters.
	Categories, Language string
}

// Provider searches a SearXNG instance. Build it with New; it is safe for
// concurrent use.
type Provider struct {
	endpoint *url.URL   // {URL}/search, without userinfo
	params   url.Values // SEARXNG_URL's own query parameters, kept on every request
	auth     string     // Authorization header from userinfo, or ""
	secrets  []string
	opts     Options
}

// New returns a Provider. Errors (code invalid, reason provider_config)
// never contain the URL's credentials.
func New(opts Options) (*Provider, error) {
	raw := strings.TrimSpace(opts.URL)
	if raw == "" {
		return nil, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonProviderConfig, "searxng: %s is empty", EnvURL)
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonProviderConfig, "searxng: %s is not an absolute http(s) URL", EnvURL)
	}
	p := &Provider{params: u.Query(), opts: opts}
	if u.User != nil {
		pw, _ := u.User.Password()
		cred := u.User.Username() + ":" + pw
		token := base64.StdEncoding.EncodeToString([]byte(cred))
		p.auth = "Basic " + token
		p.secrets = append(p.secrets, token, cred, u.User.String())
		if pw != "" {
			p.secrets = append(p.secrets, pw, url.QueryEscape(pw), url.PathEscape(pw))
		}
		u.User = nil
	}
	for _, vs := range p.params {
		for _, v := range vs {
			if len(v) >= minTokenLen { // a token, not a setting like language=en
				p.secrets = append(p.secrets, v, url.QueryEscape(v))
			}
		}
	}
	u.RawQuery, u.Fragment = "", ""
	u.Path = strings.TrimSuffix(u.Path, "/") + "/search"
	u.RawPath = ""
	p.endpoint = u
	return p, nil
}

// Capabilities returns the verbs the provider implements: search.
func (p *Provider) Capabilities() []string { return []string{airlock.VerbSearch} }

type response struct {
	Results []struct {
		URL     string `json:"url"`
		Title   string `json:"title"`
		Content string `json:"content"`
		Engine  string `json:"engine"`
	} `json:"results"`
	// UnresponsiveEngines is read leniently: its shape is informative only.
	UnresponsiveEngines json.RawMessage `json:"unresponsive_engines"`
}

// unresponsive returns the [engine, reason] pairs, or nil when they are
// absent or shaped otherwise.
func (r *response) unresponsive() [][]string {
	var pairs [][]string
	if json.Unmarshal(r.UnresponsiveEngines, &pairs) != nil {
		return nil
	}
	return pairs
}

// Search asks the instance for req.Query, page after page (at most
// MaxPages) until req.Limit (0: DefaultLimit) results are in or a page
// brings nothing new. Results keep the instance's order, are deduplicated by
// URL and ranked from 1; Engine is "searxng:" and the instance's engine
// that found the result.
//
// Errors: code invalid for an empty query; an *Error for an HTTP error
// status (401/403: unavailable, provider_auth, which for SearXNG most
// often means format=json is not enabled; 429: rate_limited; others:
// upstream, http_status), an unreadable answer, or no results while the
// instance reports unresponsive engines (bot_wall when one of them was
// stopped by a captcha or access denial); the Doer's error, wrapped with
// its classification kept.
func (p *Provider) Search(ctx context.Context, d airlock.Doer, req airlock.SearchRequest) ([]airlock.SearchResult, error) {
	q := strings.TrimSpace(req.Query)
	if q == "" {
		return nil, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonEmptyQuery, "searxng: empty query")
	}
	limit := req.Limit
	if limit <= 0 {
		limit = DefaultLimit
	}
	out := make([]airlock.SearchResult, 0, min(limit, 64))
	seen := map[string]bool{}
	var unresponsive [][]string
	for pageno := 1; pageno <= MaxPages && len(out) < limit; pageno++ {
		r, err := p.page(ctx, d, q, pageno, req.Proxy)
		if err != nil {
			if pageno > 1 && len(out) > 0 {
				break // later pages are a bonus
			}
			return nil, err
		}
		if pageno == 1 {
			unresponsive = r.unresponsive()
		}
		added := 0
		for _, res := range r.Results {
			key := strings.TrimSuffix(strings.SplitN(res.URL, "#", 2)[0], "/")
			if res.URL == "" || seen[key] {
				continue
			}
			seen[key] = true
			added++
			engine := Name
			if res.Engine != "" {
				engine += ":" + res.Engine
			}
			out = append(out, airlock.SearchResult{
				Title:   strings.Join(strings.Fields(res.Title), " "),
				URL:     res.URL,
				Snippet: strings.Join(strings.Fields(res.Content), " "),
				Engine:  engine,
				Rank:    len(out) + 1,
			})
			if len(out) == limit {
				break
			}
		}
		if added == 0 {
			break
		}
	}
	if len(out) == 0 && len(unresponsive) > 0 {
		return nil, p.unresponsiveError(unresponsive)
	}
	return out, nil
}

func (p *Provider) page(ctx context.Context, d airlock.Doer, q string, pageno int, proxy string) (*response, error) {
	v := url.Values{}
	for k, vs := range p.params {
		v[k] = append([]string(nil), vs...)
	}
	v.Set("q", q)
	v.Set("format", "json")
	if pageno > 1 {
		v.Set("pageno", strconv.Itoa(pageno))
	}
	if p.opts.Categories != "" {
		v.Set("categories", p.opts.Categories)
	}
	if p.opts.Language != "" {
		v.Set("language", p.opts.Language)
	}
	u := *p.endpoint
	u.RawQuery = v.Encode()
	h := map[string][]string{"Accept": {"application/json"}}
	if p.auth != "" {
		h["Authorization"] = []string{p.auth}
	}
	resp, err := d.Do(ctx, &airlock.HTTPRequest{Method: http.MethodGet, URL: u.String(), Header: h, TLSProfile: TLSProfile, Proxy: proxy})
	if err != nil {
		return nil, apiutil.Transport(err, "searxng: ", p.secrets...)
	}
	if resp.Status < 200 || resp.Status > 299 {
		e := &Error{Status: resp.Status, Code: airlock.CodeUpstream, Reason: airlock.ReasonHTTPStatus, Message: p.redact(apiutil.Snippet(resp.Body))}
		switch resp.Status {
		case http.StatusUnauthorized, http.StatusForbidden:
			e.Code, e.Reason = airlock.CodeUnavailable, airlock.ReasonProviderAuth
			e.Hint = "the instance refuses format=json (enable json under search.formats in its settings.yml) or needs credentials"
		case http.StatusTooManyRequests:
			e.Code, e.Reason, e.Wait = airlock.CodeRateLimited, airlock.ReasonRateLimited, apiutil.RetryAfter(resp.Header)
		}
		return nil, e
	}
	var r response
	if err := json.Unmarshal(resp.Body, &r); err != nil {
		return nil, &Error{Status: resp.Status, Code: airlock.CodeUpstream, Reason: airlock.ReasonProviderError,
			Message: "unreadable answer (is format=json enabled?): " + p.redact(err.Error())}
	}
	return &r, nil
}

// unresponsiveError explains an empty answer from an instance whose engines
// failed.
func (p *Provider) unresponsiveError(pairs [][]string) error {
	e := &Error{Status: http.StatusOK, Code: airlock.CodeUpstream, Reason: airlock.ReasonProviderError}
	var parts []string
	for _, pr := range pairs {
		if len(pr) == 0 {
			continue
		}
		s := pr[0]
		if len(pr) > 1 {
			s += " (" + pr[1] + ")"
			l := strings.ToLower(pr[1])
			if strings.Contains(l, "captcha") || strings.Contains(l, "access denied") || strings.Contains(l, "forbidden") {
				e.Reason = airlock.ReasonBotWall
			}
		}
		parts = append(parts, s)
	}
	e.Message = p.redact("no results; unresponsive engines: " + strings.Join(parts, ", "))
	return e
}

func (p *Provider) redact(s string) string { return apiutil.Redact(s, p.secrets...) }

// Error is a failure reported by the SearXNG instance. Message never holds
// SEARXNG_URL's credentials.
type Error struct {
	Status  int // the HTTP status
	Code    airlock.Code
	Reason  airlock.Reason // airlock.ReasonProviderAuth, airlock.ReasonRateLimited, airlock.ReasonHTTPStatus, airlock.ReasonProviderError or airlock.ReasonBotWall
	Message string         // the instance's answer or the provider's explanation, redacted
	Hint    string         // what to check, when known
	Wait    time.Duration
}

func (e *Error) Error() string {
	s := "searxng: HTTP " + strconv.Itoa(e.Status)
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.Hint != "" {
		s += " (" + e.Hint + ")"
	}
	return s
}

// ErrorCode returns the vocabulary code.
func (e *Error) ErrorCode() string { return string(e.Code) }

// ErrorReason returns e.Reason.
func (e *Error) ErrorReason() string { return string(e.Reason) }

// RetryAfter returns how long the instance asked to wait, or 0.
func (e *Error) RetryAfter() time.Duration { return e.Wait }

var (
	_ airlock.Searcher = (*Provider)(nil)
	_ error            = (*Error)(nil)
)
