package api

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/engine"
	"github.com/airlockhq/airlock/internal/leakcheck"
	"github.com/airlockhq/airlock/internal/provider/searxng"
)

// TestMain fails the package when tests leave goroutines behind (servers,
// event streams, engines).
func TestMain(m *testing.M) {
	os.Exit(leakcheck.Main(m, "api", leakcheck.Options{}))
}

// ---------------------------------------------------------------------------
// Fixture

const (
	acmeToken  = "alk_acme-test-token"
	otherToken = "alk_other-test-token"
	slowToken  = "alk_slow-test-token"
	adminToken = "alk_admin-test-token"
	signingKey = "sign-me-CANARY"
	// routeSecret has bytes that percent-encoding changes, so that an
	// encoded echo differs from the verbatim one.
	routeSecret = "route/secret+CANARY=&x y"
)

func hashToken(tok string) string {
	sum := sha256.Sum256([]byte(tok))
	return "sha256:" + hex.EncodeToString(sum[:])
}

const pageHTML = `<!doctype html><html lang="en"><head><title>Page %[1]s</title>
<meta name="description" content="About %[1]s"></head><body>
<h1>Heading %[1]s</h1><p>%[2]s</p>
<a href="%[1]s/1">one</a> <a href="%[1]s/2">two</a> <a href="https://other.example/">away</a></body></html>`

// site is a loopback web site: HTML pages that link deeper, a 404, a page
// that answers only when released, a SearXNG-like /search and an /echo of
// the request headers (for routes).
type site struct {
	*httptest.Server
	hits    atomic.Int64
	release chan struct{}
	once    sync.Once
}

func (s *site) open() { s.once.Do(func() { close(s.release) }) }

func newSite(t *testing.T) *site {
	t.Helper()
	s := &site{release: make(chan struct{})}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		switch {
		case r.URL.Path == "/robots.txt", r.URL.Path == "/missing":
			http.NotFound(w, r)
		case r.URL.Path == "/search":
			w.Header().Set("Content-Type", "application/json")
			if r.URL.Query().Get("pageno") != "" {
				io.WriteString(w, `{"results": []}`)
				return
			}
			fmt.Fprintf(w, `{"results": [
{"url": "https://example.com/a", "title": "First result", "content": "About %[1]s", "engine": "test"},
{"url": "https://example.com/b", "title": "Second result", "content": "More on %[1]s", "engine": "test"}]}`, r.URL.Query().Get("q"))
		case r.URL.Path == "/echo/redirect":
			// A same-origin redirect whose target carries the credential.
			cred := strings.TrimPrefix(r.Header.Get("X-Key")+r.Header.Get("Authorization"), "Bearer ")
			http.Redirect(w, r, "/echo/cb?token="+url.QueryEscape(cred), http.StatusFound)
		case r.URL.Path == "/echo/encoded":
			// Echoes of the credential in other forms: percent-encoded
			// (query and path escaping, lower-case hex) and without its
			// prefix.
			cred := strings.TrimPrefix(r.Header.Get("X-Key")+r.Header.Get("Authorization"), "Bearer ")
			w.Header().Set("X-Echo-Query", url.QueryEscape(cred))
			w.Header().Set("X-Echo-Path", url.PathEscape(cred))
			lower := regexp.MustCompile(`%[0-9A-F]{2}`).ReplaceAllStringFunc(url.QueryEscape(cred), strings.ToLower)
			fmt.Fprintf(w, "q=%s p=%s lower=%s bare=%s", url.QueryEscape(cred), url.PathEscape(cred), lower, cred)
		case strings.HasPrefix(r.URL.Path, "/echo"):
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(map[string]any{"path": r.URL.Path, "key": r.Header.Get("X-Key"), "method": r.Method})
		case strings.HasPrefix(r.URL.Path, "/slow"):
			select {
			case <-s.release:
			case <-r.Context().Done():
				return
			}
			fallthrough
		default:
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			body := strings.Repeat("Some words about the subject of this page. ", 20)
			fmt.Fprintf(w, pageHTML, strings.TrimSuffix(r.URL.Path, "/"), body)
		}
	}))
	t.Cleanup(func() { s.open(); s.Close() })
	return s
}

type fixture struct {
	t    *testing.T
	site *site
	en   *engine.Engine
	api  *httptest.Server
	logs *syncBuffer
}

// syncBuffer collects the access log.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// testConfig has three tenants (acme: posix with a signing secret; other:
// network; slow: one call per 100 s), an admin token, a route to the
// site's /echo and SearXNG at the site's /search.
func testConfig(siteURL string) engine.Config {
	return engine.Config{
		InMemory:      true,
		DefaultTenant: "acme",
		AdminTokens:   []string{hashToken(adminToken)},
		Tenants: map[string]engine.TenantConfig{
			"acme": {Profile: "posix", Tokens: []string{hashToken(acmeToken)}, Exceptions: []string{"127.0.0.1"},
				Secrets: map[string]engine.SecretRef{"k": {Env: "SIGNING_KEY"}}, Routes: []string{"*"}},
			"other": {Profile: "network", Tokens: []string{hashToken(otherToken)}, Exceptions: []string{"127.0.0.1"}},
			"slow":  {Profile: "network", Tokens: []string{hashToken(slowToken)}, Exceptions: []string{"127.0.0.1"}, Rate: 0.01, Burst: 1},
		},
		Routes: map[string]engine.RouteConfig{
			"echo":   {BaseURL: siteURL + "/echo", Header: "X-Key", ValueEnv: "ROUTE_KEY", Methods: []string{"GET", "POST"}},
			"bearer": {BaseURL: siteURL + "/echo", Header: "Authorization", Prefix: "Bearer ", ValueEnv: "ROUTE_KEY"},
		},
		Browse: engine.BrowseConfig{SearchProvider: "searxng", SearXNGURL: siteURL},
	}
}

func newEngine(t *testing.T, cfg engine.Config) *engine.Engine {
	t.Helper()
	env := map[string]string{"SIGNING_KEY": signingKey, "ROUTE_KEY": routeSecret}
	// SearXNG at browse.searxng_url, as the CLI's registry has it.
	searx := engine.Provider{Name: searxng.Name, Capabilities: []string{airlock.VerbSearch},
		New: func(func(string) string) (engine.BrowseProvider, error) {
			if cfg.Browse.SearXNGURL == "" {
				return nil, nil
			}
			return searxng.New(searxng.Options{URL: cfg.Browse.SearXNGURL})
		}}
	en, err := engine.New(context.Background(), cfg, engine.WithGetenv(func(k string) string { return env[k] }), engine.WithProviders(searx))
	if err != nil {
		t.Fatalf("engine.New: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := en.Close(ctx); err != nil {
			t.Errorf("engine Close: %v", err)
		}
	})
	return en
}

// newFixture starts a site, an engine and the API on loopback. Each
// change is a func(*engine.Config), applied to testConfig, a
// func(*Options), applied before New, or a func(*server), applied after it.
func newFixture(t *testing.T, change ...any) *fixture {
	t.Helper()
	f := &fixture{t: t, site: newSite(t), logs: &syncBuffer{}}
	cfg := testConfig(f.site.URL)
	for _, c := range change {
		if c, ok := c.(func(*engine.Config)); ok {
			c(&cfg)
		}
	}
	f.en = newEngine(t, cfg)
	opts := Options{Version: "v1.2.3-test", Logger: slog.New(slog.NewJSONHandler(f.logs, nil))}
	for _, c := range change {
		if c, ok := c.(func(*Options)); ok {
			c(&opts)
		}
	}
	s := newServer(f.en, opts)
	for _, c := range change {
		switch c := c.(type) {
		case func(*server):
			c(s)
		case func(*Options), func(*engine.Config):
		default:
			t.Fatalf("newFixture: %T is not a change", c)
		}
	}
	f.api = httptest.NewServer(validating(t, s))
	t.Cleanup(f.api.Close)
	return f
}

// result is a response with its body read.
type result struct {
	*http.Response
	body []byte
}

func (r result) String() string { return fmt.Sprintf("%d %s", r.StatusCode, r.body) }

// decode unmarshals the body into v.
func (r result) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decode %s: %v", r, err)
	}
}

// do sends a request with a token ("" for none) and a body (a string or
// []byte as is, anything else as JSON), and extra headers in pairs.
func (f *fixture) do(method, path, token string, body any, header ...string) result {
	f.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		js, err := json.Marshal(b)
		if err != nil {
			f.t.Fatal(err)
		}
		rd = bytes.NewReader(js)
	}
	req, err := http.NewRequestWithContext(f.t.Context(), method, f.api.URL+path, rd)
	if err != nil {
		f.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := f.api.Client().Do(req)
	if err != nil {
		f.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		f.t.Fatalf("%s %s: read: %v", method, path, err)
	}
	return result{resp, b}
}

// wantError checks an error response: status, code, reason, the error
// shape with every key, and the decision header matching the body.
func wantError(t *testing.T, r result, status int, code airlock.Code, reason airlock.Reason) airlock.Error {
	t.Helper()
	if r.StatusCode != status {
		t.Errorf("status = %d, want %d (%s)", r.StatusCode, status, r.body)
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q, want application/json", ct)
	}
	var raw map[string]map[string]any
	if err := json.Unmarshal(r.body, &raw); err != nil {
		t.Fatalf("error body %s: %v", r.body, err)
	}
	for _, k := range []string{"code", "reason", "message", "decision_id"} {
		if _, ok := raw["error"][k]; !ok {
			t.Errorf("error body %s lacks %q", r.body, k)
		}
	}
	var eb airlock.ErrorBody
	r.decode(t, &eb)
	if eb.Error.Code != code || (reason != "" && eb.Error.Reason != reason) {
		t.Errorf("error = %s/%s (%s), want %s/%s", eb.Error.Code, eb.Error.Reason, eb.Error.Message, code, reason)
	}
	if eb.Error.Message == "" {
		t.Errorf("error without a message: %s", r.body)
	}
	if got := r.Header.Get(HeaderDecision); got != eb.Error.DecisionID {
		t.Errorf("%s = %q, body decision_id %q", HeaderDecision, got, eb.Error.DecisionID)
	}
	return eb.Error
}

// ---------------------------------------------------------------------------
// Browse

func TestBrowseFetchFormats(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	url := f.site.URL + "/doc"
	tests := []struct {
		as, contentType string
		want            []string
	}{
		{"", "application/json", []string{`"title": "Page /doc"`}},
		{"json", "application/json", []string{`"title": "Page /doc"`, `"provider": "native"`}},
		{"jsonl", "application/x-ndjson", []string{`"title":"Page /doc"`}},
		{"org", "text/org; charset=utf-8", []string{"* Page /doc :source:point:\n", ":URL: " + url, "** text\n"}},
		{"md", "text/markdown; charset=utf-8", []string{"# Page /doc\n", "subject of this page"}},
		{"markdown", "text/markdown; charset=utf-8", []string{"# Page /doc\n"}},
		{"text", "text/plain; charset=utf-8", []string{"Page /doc\n" + url + "\n", "subject of this page"}},
	}
	for _, tt := range tests {
		t.Run("as="+tt.as, func(t *testing.T) {
			r := f.do("POST", "/api/browse", acmeToken, map[string]any{"verb": "fetch", "url": url, "as": tt.as})
			if r.StatusCode != 200 {
				t.Fatalf("fetch: %s", r)
			}
			if got := r.Header.Get("Content-Type"); got != tt.contentType {
				t.Errorf("Content-Type = %q, want %q", got, tt.contentType)
			}
			for _, w := range tt.want {
				if !bytes.Contains(r.body, []byte(w)) {
					t.Errorf("body lacks %q:\n%s", w, r.body)
				}
			}
			id := r.Header.Get(HeaderDecision)
			if len(id) != 26 {
				t.Errorf("%s = %q, want a ULID", HeaderDecision, id)
			}
			if tt.as == "json" {
				var p airlock.Page
				r.decode(t, &p)
				if p.DecisionID != id || p.URL != url || p.Status != 200 {
					t.Errorf("page = %+v, header decision %s", p, id)
				}
			}
		})
	}
}

func TestBrowseFetchOptions(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	// A request narrowing refuses what the tenant allows.
	r := f.do("POST", "/api/browse", acmeToken, map[string]any{"verb": "fetch", "url": f.site.URL + "/a",
		"options": map[string]any{"narrow": map[string]any{"deny": []string{"127.0.0.1"}}, "tls_profile": "go"}})
	wantError(t, r, 403, airlock.CodeDenied, "")
	r = f.do("POST", "/api/browse", acmeToken, map[string]any{"verb": "fetch", "url": f.site.URL + "/a", "options": map[string]any{"provider": "native", "cache": true}})
	if r.StatusCode != 200 {
		t.Errorf("fetch with options: %s", r)
	}
}

func TestBrowseFetchMany(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	urls := []string{f.site.URL + "/a", f.site.URL + "/missing", "http://10.0.0.1/"}
	r := f.do("POST", "/api/browse", acmeToken, map[string]any{"verb": "fetch", "urls": urls})
	if r.StatusCode != 200 {
		t.Fatalf("batch: %s", r)
	}
	var got fetchManyResponse
	r.decode(t, &got)
	if len(got.Results) != 3 || got.Results[0].Page == nil || got.Results[1].Error == nil || got.Results[1].Error.Reason != "http_status" ||
		got.Results[2].Error == nil || got.Results[2].Error.Reason != "private" || got.DecisionID != r.Header.Get(HeaderDecision) || got.DecisionID == "" {
		t.Errorf("batch = %s", r.body)
	}
	for _, as := range []string{"org", "md", "text"} {
		r := f.do("POST", "/api/browse", acmeToken, map[string]any{"verb": "fetch", "urls": urls, "as": as})
		if r.StatusCode != 200 || r.Header.Get(HeaderFailed) != "2" || !bytes.Contains(r.body, []byte("Page /a")) {
			t.Errorf("batch as %s: %s (failed %q)", as, r, r.Header.Get(HeaderFailed))
		}
	}
	// The network profile has no parallel capability.
	r = f.do("POST", "/api/browse", otherToken, map[string]any{"verb": "fetch", "urls": urls})
	wantError(t, r, 403, airlock.CodeDenied, "capability")
	// Past the batch cap.
	many := make([]string, 65)
	for i := range many {
		many[i] = f.site.URL + "/x"
	}
	r = f.do("POST", "/api/browse", acmeToken, map[string]any{"verb": "fetch", "urls": many})
	wantError(t, r, 400, airlock.CodeInvalid, airlock.ReasonLimit)
}

func TestBrowseCrawl(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	body := map[string]any{"verb": "crawl", "seed": f.site.URL + "/", "options": map[string]any{"max_pages": 3, "depth": 2, "timeout": "5s"}}
	r := f.do("POST", "/api/browse", acmeToken, body)
	if r.StatusCode != 200 || r.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("crawl: %s", r)
	}
	var got struct {
		Pages   []airlock.Page       `json:"pages"`
		Summary airlock.CrawlSummary `json:"summary"`
	}
	r.decode(t, &got)
	if len(got.Pages) != 3 || got.Summary.Pages != 3 || got.Summary.DecisionID != r.Header.Get(HeaderDecision) || got.Summary.DecisionID == "" {
		t.Errorf("crawl = %d pages, summary %+v, header %q", len(got.Pages), got.Summary, r.Header.Get(HeaderDecision))
	}
	formats := map[string]string{"org": "#+TITLE: browse crawl — 3 pages\n", "md": "\n---\n", "text": "\n---\n", "jsonl": `"url":"` + f.site.URL}
	for as, want := range formats {
		body["as"] = as
		r := f.do("POST", "/api/browse", acmeToken, body)
		if r.StatusCode != 200 || !strings.Contains(string(r.body), want) {
			t.Errorf("crawl as %s: %s", as, r)
		}
	}
	// A list of URLs, numeric timeout (nanoseconds, as Go marshals it).
	r = f.do("POST", "/api/browse", acmeToken, map[string]any{"verb": "crawl", "urls": []string{f.site.URL + "/x", f.site.URL + "/y"},
		"options": map[string]any{"timeout": int64(5 * time.Second)}, "as": "text"})
	if r.StatusCode != 200 || !bytes.Contains(r.body, []byte("Page /x")) || !bytes.Contains(r.body, []byte("Page /y")) {
		t.Errorf("crawl urls: %s", r)
	}
	r = f.do("POST", "/api/browse", acmeToken, map[string]any{"verb": "crawl", "seed": f.site.URL + "/", "options": map[string]any{"max_pages": MaxBrowseCrawlPages + 1}})
	wantError(t, r, 413, airlock.CodeTooLarge, "max_pages")
	r = f.do("POST", "/api/browse", acmeToken, map[string]any{"verb": "crawl", "seed": f.site.URL + "/", "options": map[string]any{"timeout": "soon"}})
	wantError(t, r, 400, airlock.CodeInvalid, airlock.ReasonBody)
	// A refused seed is reported as skipped by policy.
	r = f.do("POST", "/api/browse", acmeToken, map[string]any{"verb": "crawl", "seed": "http://169.254.169.254/"})
	r.decode(t, &got)
	if r.StatusCode != 200 || len(got.Pages) != 0 || len(got.Summary.Skipped) != 1 || got.Summary.Skipped[0].Reason != "policy" {
		t.Errorf("crawl of the metadata address: %s", r)
	}
}

func TestBrowseSearch(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	formats := []struct{ as, contentType, want string }{
		{"json", "application/json", `"query": "rfc 9309"`},
		{"org", "text/org; charset=utf-8", "#+TITLE: browse search — rfc 9309"},
		{"md", "text/markdown; charset=utf-8", "# Search: rfc 9309"},
		{"text", "text/plain; charset=utf-8", "Second result"},
	}
	for _, tt := range formats {
		r := f.do("POST", "/api/browse", acmeToken, map[string]any{"verb": "search", "query": "rfc 9309", "as": tt.as, "options": map[string]any{"limit": 5}})
		if r.StatusCode != 200 || r.Header.Get("Content-Type") != tt.contentType || !strings.Contains(string(r.body), tt.want) || len(r.Header.Get(HeaderDecision)) != 26 {
			t.Errorf("search as %s: %s (Content-Type %q)", tt.as, r, r.Header.Get("Content-Type"))
		}
	}
	var got struct {
		Results []airlock.SearchResult `json:"results"`
	}
	r := f.do("POST", "/api/browse", acmeToken, map[string]any{"verb": "search", "query": "rfc 9309"})
	r.decode(t, &got)
	if len(got.Results) != 2 || got.Results[0].Title != "First result" || got.Results[0].Rank != 1 {
		t.Errorf("results = %+v", got.Results)
	}
	r = f.do("POST", "/api/browse", acmeToken, map[string]any{"verb": "search", "query": "  "})
	wantError(t, r, 400, airlock.CodeInvalid, "query")
}

func TestBrowseBadRequests(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	u := f.site.URL + "/a"
	tests := []struct {
		name   string
		body   any
		status int
		code   airlock.Code
		reason airlock.Reason
	}{
		{"empty body", "", 400, airlock.CodeInvalid, airlock.ReasonBody},
		{"not JSON", "verb=fetch", 400, airlock.CodeInvalid, airlock.ReasonBody},
		{"truncated", `{"verb": "fetch"`, 400, airlock.CodeInvalid, airlock.ReasonBody},
		{"two objects", `{"verb": "fetch", "url": "` + u + `"} {}`, 400, airlock.CodeInvalid, airlock.ReasonBody},
		{"unknown field", map[string]any{"verb": "fetch", "url": u, "format": "org"}, 400, airlock.CodeInvalid, airlock.ReasonBody},
		{"unknown option", map[string]any{"verb": "fetch", "url": u, "options": map[string]any{"max_pages": 3}}, 400, airlock.CodeInvalid, airlock.ReasonBody},
		{"wrong type", map[string]any{"verb": "fetch", "url": 7}, 400, airlock.CodeInvalid, airlock.ReasonBody},
		{"no verb", map[string]any{"url": u}, 400, airlock.CodeInvalid, airlock.ReasonRequest},
		{"unknown verb", map[string]any{"verb": "get", "url": u}, 400, airlock.CodeInvalid, airlock.ReasonRequest},
		{"fetch without url", map[string]any{"verb": "fetch"}, 400, airlock.CodeInvalid, airlock.ReasonRequest},
		{"fetch url and urls", map[string]any{"verb": "fetch", "url": u, "urls": []string{u}}, 400, airlock.CodeInvalid, airlock.ReasonRequest},
		{"fetch with query", map[string]any{"verb": "fetch", "url": u, "query": "x"}, 400, airlock.CodeInvalid, airlock.ReasonRequest},
		{"crawl seed and urls", map[string]any{"verb": "crawl", "seed": u, "urls": []string{u}}, 400, airlock.CodeInvalid, airlock.ReasonRequest},
		{"crawl with url", map[string]any{"verb": "crawl", "url": u}, 400, airlock.CodeInvalid, airlock.ReasonRequest},
		{"search with url", map[string]any{"verb": "search", "query": "x", "url": u}, 400, airlock.CodeInvalid, airlock.ReasonRequest},
		{"unknown format", map[string]any{"verb": "fetch", "url": u, "as": "pdf"}, 400, airlock.CodeInvalid, "unknown_format"},
		{"ambiguous host", map[string]any{"verb": "fetch", "url": "http://2130706433/"}, 403, airlock.CodeDenied, "numeric_host"},
		{"bad narrowing", map[string]any{"verb": "fetch", "url": u, "options": map[string]any{"narrow": map[string]any{"allow": []string{"http://["}}}}, 400, airlock.CodeInvalid, "narrow"},
		{"too large", map[string]any{"verb": "fetch", "url": u + "?" + strings.Repeat("x", DefaultMaxBody)}, 413, airlock.CodeTooLarge, airlock.ReasonBody},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantError(t, f.do("POST", "/api/browse", acmeToken, tt.body), tt.status, tt.code, tt.reason)
		})
	}
}

// ---------------------------------------------------------------------------
// Errors, auth, routing

// TestErrorStatuses produces every code of the table through the API.
func TestErrorStatuses(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	fetch := func(f *fixture, token, url string, header ...string) result {
		return f.do("POST", "/api/browse", token, map[string]any{"verb": "fetch", "url": url}, header...)
	}
	t.Run("denied 403", func(t *testing.T) {
		t.Parallel()
		f := f.with(t)
		e := wantError(t, fetch(f, acmeToken, "http://10.0.0.1/"), 403, airlock.CodeDenied, "private")
		if len(e.DecisionID) != 26 {
			t.Errorf("a denial without a decision id: %+v", e)
		}
		wantError(t, fetch(f, acmeToken, "http://169.254.169.254/latest/"), 403, airlock.CodeDenied, "metadata")
	})
	t.Run("invalid 400", func(t *testing.T) {
		t.Parallel()
		f := f.with(t)
		wantError(t, f.do("POST", "/api/exchange/sctp", acmeToken, map[string]any{"target": "127.0.0.1:1"}), 400, airlock.CodeInvalid, "lane")
		wantError(t, f.do("POST", "/api/browse", acmeToken, map[string]any{"verb": "crawl", "seed": f.site.URL, "options": map[string]any{"extract": "some"}}), 400, airlock.CodeInvalid, "")
	})
	t.Run("not_found 404", func(t *testing.T) {
		t.Parallel()
		f := f.with(t)
		wantError(t, f.do("POST", "/api/sign", acmeToken, map[string]any{"name": "nope", "data": []byte("x")}), 404, airlock.CodeNotFound, "secret")
		wantError(t, f.do("POST", "/api/routes/nope", acmeToken, map[string]any{"path": "/"}), 404, airlock.CodeNotFound, "route")
	})
	t.Run("rate_limited 429", func(t *testing.T) {
		t.Parallel()
		f := f.with(t)
		if r := fetch(f, slowToken, f.site.URL+"/a"); r.StatusCode != 200 {
			t.Fatalf("first call: %s", r)
		}
		r := fetch(f, slowToken, f.site.URL+"/a")
		wantError(t, r, 429, airlock.CodeRateLimited, "tenant_rate")
		if ra := r.Header.Get("Retry-After"); ra == "" || ra == "0" {
			t.Errorf("Retry-After = %q", ra)
		}
	})
	t.Run("too_large 413", func(t *testing.T) {
		t.Parallel()
		f := f.with(t)
		wantError(t, f.do("POST", "/api/http", acmeToken, `{"url": "`+strings.Repeat("a", 2<<20)+`"}`), 413, airlock.CodeTooLarge, airlock.ReasonBody)
	})
	t.Run("upstream 502", func(t *testing.T) {
		t.Parallel()
		f := f.with(t)
		wantError(t, fetch(f, acmeToken, f.site.URL+"/missing"), 502, airlock.CodeUpstream, "http_status")
	})
	t.Run("revoked 403", func(t *testing.T) {
		t.Parallel()
		f := f.with(t)
		if r := f.do("POST", "/api/admin/revoke", adminToken, map[string]any{"subject": "acme/rogue", "reason": "test"}); r.StatusCode != 200 {
			t.Fatalf("revoke: %s", r)
		}
		wantError(t, fetch(f, acmeToken, f.site.URL+"/a", HeaderInstance, "rogue"), 403, airlock.CodeRevoked, "")
		if r := fetch(f, acmeToken, f.site.URL+"/a", HeaderInstance, "fine"); r.StatusCode != 200 {
			t.Errorf("another instance: %s", r)
		}
	})
	t.Run("timeout 504", func(t *testing.T) {
		t.Parallel()
		g := newFixture(t, func(o *Options) { o.WriteTimeout = 2 * time.Second })
		r := g.do("POST", "/api/browse", acmeToken, map[string]any{"verb": "fetch", "url": g.site.URL + "/slow"})
		wantError(t, r, 504, airlock.CodeTimeout, "")
	})
	t.Run("unavailable 503", func(t *testing.T) {
		t.Parallel()
		g := newFixture(t, func(o *Options) {
			o.Ready = func(context.Context) error { return airlock.Errorf(airlock.CodeUnavailable, "draining", "draining") }
		})
		wantError(t, g.do("GET", "/readyz", "", nil), 503, airlock.CodeUnavailable, airlock.ReasonNotReady)
		// An engine that is shutting down.
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		if err := g.en.Close(ctx); err != nil {
			t.Fatal(err)
		}
		wantError(t, g.do("POST", "/api/browse", acmeToken, map[string]any{"verb": "fetch", "url": g.site.URL + "/a"}), 503, airlock.CodeUnavailable, "shutting_down")
	})
	t.Run("internal 500", func(t *testing.T) {
		t.Parallel()
		g := newFixture(t, func(o *Options) {
			o.Ready = func(context.Context) error { panic("ready check blew up: secret detail") }
		})
		r := g.do("GET", "/readyz", "", nil)
		e := wantError(t, r, 500, airlock.CodeInternal, "")
		if e.Message != "internal error" || bytes.Contains(r.body, []byte("secret detail")) {
			t.Errorf("internal error leaks its detail: %s", r.body)
		}
		if !strings.Contains(g.logs.String(), "secret detail") {
			t.Errorf("the panic is not logged: %s", g.logs)
		}
		// The server still answers.
		if r := g.do("GET", "/healthz", "", nil); r.StatusCode != 200 {
			t.Errorf("after a panic: %s", r)
		}
	})
}

func TestStatusTable(t *testing.T) {
	t.Parallel()
	want := map[airlock.Code]int{"denied": 403, "invalid": 400, "not_found": 404, "rate_limited": 429, "revoked": 403,
		"too_large": 413, "timeout": 504, "upstream": 502, "unavailable": 503, "internal": 500}
	for _, c := range airlock.Codes() {
		if got := statusFor(c); got != want[c] {
			t.Errorf("statusFor(%s) = %d, want %d", c, got, want[c])
		}
	}
	if got := statusFor("bogus"); got != 500 {
		t.Errorf("statusFor(bogus) = %d", got)
	}
}

func TestAuth(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	body := map[string]any{"verb": "fetch", "url": f.site.URL + "/a"}
	tests := []struct {
		name   string
		header []string
		status int
		code   airlock.Code
		reason airlock.Reason
	}{
		{"no header", nil, 401, airlock.CodeDenied, airlock.ReasonToken},
		{"unknown token", []string{"Authorization", "Bearer alk_nope"}, 401, airlock.CodeDenied, airlock.ReasonToken},
		{"empty bearer", []string{"Authorization", "Bearer "}, 401, airlock.CodeDenied, airlock.ReasonToken},
		{"basic scheme", []string{"Authorization", "Basic " + base64.StdEncoding.EncodeToString([]byte("a:"+acmeToken))}, 401, airlock.CodeDenied, airlock.ReasonToken},
		{"admin token is not a tenant", []string{"Authorization", "Bearer " + adminToken}, 401, airlock.CodeDenied, airlock.ReasonToken},
		{"lower-case scheme", []string{"Authorization", "bearer " + acmeToken}, 200, "", ""},
		{"bad instance", []string{"Authorization", "Bearer " + acmeToken, HeaderInstance, "a/b"}, 400, airlock.CodeInvalid, "principal"},
		{"instance with spaces", []string{"Authorization", "Bearer " + acmeToken, HeaderInstance, "a b"}, 400, airlock.CodeInvalid, "principal"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := f.do("POST", "/api/browse", "", body, tt.header...)
			if tt.status == 200 {
				if r.StatusCode != 200 {
					t.Errorf("got %s", r)
				}
				return
			}
			wantError(t, r, tt.status, tt.code, airlock.Reason(string(tt.reason)))
			if tt.status == 401 && !strings.HasPrefix(r.Header.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("WWW-Authenticate = %q", r.Header.Get("WWW-Authenticate"))
			}
		})
	}
	// A tenant token on an admin route is forbidden, not unauthenticated.
	wantError(t, f.do("POST", "/api/admin/revoke", acmeToken, map[string]any{"subject": "other"}), 403, airlock.CodeDenied, airlock.ReasonAdmin)
	wantError(t, f.do("POST", "/api/admin/revoke", "", map[string]any{"subject": "other"}), 401, airlock.CodeDenied, airlock.ReasonToken)
	// The access log: one line per request, with the tenant once known,
	// and never a token.
	logs := f.logs.String()
	if strings.Contains(logs, acmeToken) || strings.Contains(logs, adminToken) || strings.Contains(logs, "alk_nope") {
		t.Errorf("a token is in the access log:\n%s", logs)
	}
	var lines, withTenant int
	for _, line := range strings.Split(strings.TrimSpace(logs), "\n") {
		var rec struct {
			Msg, Method, Path, Tenant string
			Status                    int
			Duration                  int64
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if rec.Msg != "http" || rec.Method != "POST" || rec.Status == 0 || rec.Duration <= 0 {
			t.Errorf("access log line %s", line)
		}
		lines++
		if rec.Tenant == "acme" && rec.Status == 200 && rec.Path == "/api/browse" {
			withTenant++
		}
	}
	if lines != len(tests)+2 || withTenant != 1 {
		t.Errorf("%d access log lines (want %d), %d for acme's fetch (want 1):\n%s", lines, len(tests)+2, withTenant, logs)
	}
}

func TestRoutingErrors(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	e := wantError(t, f.do("GET", "/api/browse", acmeToken, nil), 405, airlock.CodeInvalid, airlock.ReasonMethod)
	if !strings.Contains(e.Message, "POST") {
		t.Errorf("405 message %q does not say what is allowed", e.Message)
	}
	r := f.do("DELETE", "/healthz", "", nil)
	wantError(t, r, 405, airlock.CodeInvalid, airlock.ReasonMethod)
	if allow := r.Header.Get("Allow"); !strings.Contains(allow, "GET") {
		t.Errorf("Allow = %q", allow)
	}
	wantError(t, f.do("GET", "/nope", "", nil), 404, airlock.CodeNotFound, airlock.ReasonRoute)
	wantError(t, f.do("GET", "/api/crawls/x/y/z", acmeToken, nil), 404, airlock.CodeNotFound, airlock.ReasonRoute)
	wantError(t, f.do("GET", "/mcp", "", nil), 404, airlock.CodeNotFound, airlock.ReasonRoute) // no MCP configured
}

func TestMCPMount(t *testing.T) {
	t.Parallel()
	var methods sync.Map
	mcp := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		methods.Store(r.Method, true)
		if _, err := io.ReadAll(r.Body); err != nil {
			http.Error(w, "too large", http.StatusRequestEntityTooLarge)
			return
		}
		io.WriteString(w, "mcp here")
	})
	f := newFixture(t, func(o *Options) { o.MCP = mcp; o.MaxBody = 1024 })
	for _, m := range []string{"GET", "POST", "DELETE"} {
		r := f.do(m, "/mcp", "", "{}")
		if r.StatusCode != 200 || string(r.body) != "mcp here" {
			t.Errorf("%s /mcp: %s", m, r)
		}
		if _, ok := methods.Load(m); !ok {
			t.Errorf("%s did not reach the MCP handler", m)
		}
	}
	if r := f.do("POST", "/mcp", "", strings.Repeat("x", 2048)); r.StatusCode != 413 {
		t.Errorf("MCP body past the limit: %s", r)
	}
}

// ---------------------------------------------------------------------------
// Brokers

func TestExchange(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		buf := make([]byte, 64)
		n, _ := c.Read(buf)
		c.Write(append([]byte("echo:"), buf[:n]...))
	}()
	defer wg.Wait()
	r := f.do("POST", "/api/exchange/tcp", acmeToken, map[string]any{"target": ln.Addr().String(), "data": []byte("ping"), "timeout": "5s", "idle": "100ms"})
	if r.StatusCode != 200 {
		t.Fatalf("exchange: %s", r)
	}
	var got airlock.ExchangeResponse
	r.decode(t, &got)
	if string(got.Data) != "echo:ping" || got.DecisionID == "" || got.DecisionID != r.Header.Get(HeaderDecision) {
		t.Errorf("exchange = %+v (%s)", got, r.body)
	}
	wantError(t, f.do("POST", "/api/exchange/tcp", acmeToken, map[string]any{"target": "10.0.0.1:80", "data": []byte("x")}), 403, airlock.CodeDenied, "private")
	wantError(t, f.do("POST", "/api/exchange/sctp", acmeToken, map[string]any{"target": ln.Addr().String()}), 400, airlock.CodeInvalid, "lane")
	wantError(t, f.do("POST", "/api/exchange/tcp", acmeToken, map[string]any{"target": ln.Addr().String(), "lane": "udp"}), 400, airlock.CodeInvalid, airlock.ReasonBody)
}

func TestSign(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	r := f.do("POST", "/api/sign", acmeToken, map[string]any{"name": "k", "data": []byte("message")})
	if r.StatusCode != 200 {
		t.Fatalf("sign: %s", r)
	}
	var got signResponse
	r.decode(t, &got)
	m := hmac.New(sha256.New, []byte(signingKey))
	m.Write([]byte("message"))
	want := m.Sum(nil)
	if !bytes.Equal(got.Signature, want) || got.SignatureHex != hex.EncodeToString(want) || got.DecisionID != r.Header.Get(HeaderDecision) {
		t.Errorf("sign = %+v", got)
	}
	if bytes.Contains(r.body, []byte(signingKey)) {
		t.Error("the secret is in the answer")
	}
	wantError(t, f.do("POST", "/api/sign", acmeToken, map[string]any{"data": []byte("x")}), 400, airlock.CodeInvalid, airlock.ReasonRequest)
	// Secrets belong to their tenant.
	wantError(t, f.do("POST", "/api/sign", otherToken, map[string]any{"name": "k", "data": []byte("x")}), 404, airlock.CodeNotFound, "secret")
}

func TestRoutes(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	r := f.do("POST", "/api/routes/echo", acmeToken, map[string]any{"method": "POST", "path": "/x", "body": []byte("hi")})
	if r.StatusCode != 200 {
		t.Fatalf("route: %s", r)
	}
	var got airlock.HTTPResponse
	r.decode(t, &got)
	var echo map[string]string
	if err := json.Unmarshal(got.Body, &echo); err != nil {
		t.Fatalf("echo body %q: %v", got.Body, err)
	}
	// The credential reached the site, and its echo is redacted.
	if got.Status != 200 || echo["path"] != "/echo/x" || echo["key"] != "[REDACTED]" || echo["method"] != "POST" || got.DecisionID != r.Header.Get(HeaderDecision) {
		t.Errorf("route = %+v, echo %v", got, echo)
	}
	if bytes.Contains(r.body, []byte(routeSecret)) {
		t.Error("the route credential is in the answer")
	}
	wantError(t, f.do("POST", "/api/routes/echo", acmeToken, map[string]any{"method": "DELETE", "path": "/x"}), 403, airlock.CodeDenied, "route_method")
	wantError(t, f.do("POST", "/api/routes/echo", acmeToken, map[string]any{"path": "/../admin"}), 400, airlock.CodeInvalid, "route_path")
}

func TestHTTP(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	r := f.do("POST", "/api/http", acmeToken, airlock.HTTPRequest{URL: f.site.URL + "/echo/raw", Header: map[string][]string{"X-Key": {"mine"}}})
	if r.StatusCode != 200 {
		t.Fatalf("http: %s", r)
	}
	var got airlock.HTTPResponse
	r.decode(t, &got)
	if got.Status != 200 || !bytes.Contains(got.Body, []byte(`"key":"mine"`)) || got.URL != f.site.URL+"/echo/raw" || got.DecisionID != r.Header.Get(HeaderDecision) {
		t.Errorf("http = %+v", got)
	}
	// The upstream status is data, not the API's status.
	r = f.do("POST", "/api/http", acmeToken, airlock.HTTPRequest{URL: f.site.URL + "/missing"})
	r.decode(t, &got)
	if r.StatusCode != 200 || got.Status != 404 {
		t.Errorf("http 404 upstream: %s", r)
	}
	wantError(t, f.do("POST", "/api/http", acmeToken, airlock.HTTPRequest{URL: "http://[::1]:1/"}), 403, airlock.CodeDenied, "loopback")
}

// ---------------------------------------------------------------------------
// Audit, metrics, admin

// TestDenialVisible: a denial through the API is in the tenant's audit
// log, under its decision id, and in the metrics counters.
func TestDenialVisible(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	r := f.do("POST", "/api/browse", acmeToken, map[string]any{"verb": "fetch", "url": "http://10.0.0.1/"}, HeaderInstance, "agent-7")
	denial := wantError(t, r, 403, airlock.CodeDenied, "private")
	if r := f.do("POST", "/api/browse", otherToken, map[string]any{"verb": "fetch", "url": f.site.URL + "/a"}); r.StatusCode != 200 {
		t.Fatalf("other's fetch: %s", r)
	}

	r = f.do("GET", "/api/audit?outcome=deny&broker=fetch", acmeToken, nil)
	var got auditResponse
	r.decode(t, &got)
	if r.StatusCode != 200 || len(got.Records) != 1 {
		t.Fatalf("audit: %s", r)
	}
	rec := got.Records[0]
	if rec.ID != denial.DecisionID || rec.Tenant != "acme" || rec.Instance != "agent-7" || rec.Reason != "private" || rec.Outcome != "deny" || rec.Target != "http://10.0.0.1/" {
		t.Errorf("audit record = %+v, want decision %s", rec, denial.DecisionID)
	}
	// A tenant sees only its own records; the admin sees both tenants'.
	r = f.do("GET", "/api/audit", acmeToken, nil)
	r.decode(t, &got)
	for _, rec := range got.Records {
		if rec.Tenant != "acme" {
			t.Errorf("acme sees %+v", rec)
		}
	}
	wantError(t, f.do("GET", "/api/audit?principal=other", acmeToken, nil), 403, airlock.CodeDenied, airlock.ReasonTenant)
	r = f.do("GET", "/api/audit?principal=acme/agent-7", acmeToken, nil)
	r.decode(t, &got)
	if len(got.Records) != 1 || got.Records[0].ID != denial.DecisionID {
		t.Errorf("acme/agent-7: %s", r)
	}
	r = f.do("GET", "/api/audit", adminToken, nil)
	r.decode(t, &got)
	tenants := map[string]bool{}
	for _, rec := range got.Records {
		tenants[rec.Tenant] = true
	}
	if !tenants["acme"] || !tenants["other"] {
		t.Errorf("admin sees tenants %v", tenants)
	}
	r = f.do("GET", "/api/audit?principal=other&limit=1", adminToken, nil)
	r.decode(t, &got)
	if len(got.Records) != 1 || got.Records[0].Tenant != "other" || got.NextBeforeID != got.Records[0].ID {
		t.Errorf("admin, principal=other, limit=1: %s", r)
	}
	for _, q := range []string{"limit=-1", "since=yesterday", "colour=red", "outcome=deny&outcome=allow", "principal=a/b/c"} {
		wantError(t, f.do("GET", "/api/audit?"+q, acmeToken, nil), 400, airlock.CodeInvalid, "")
	}
	since := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	if r := f.do("GET", "/api/audit?since="+since+"&reason=private", acmeToken, nil); !bytes.Contains(r.body, []byte(denial.DecisionID)) {
		t.Errorf("audit since an hour ago: %s", r)
	}

	// Metrics: a token is needed, and the denial is counted.
	wantError(t, f.do("GET", "/metrics", "", nil), 401, airlock.CodeDenied, airlock.ReasonToken)
	r = f.do("GET", "/metrics", acmeToken, nil)
	for _, want := range []string{`airlock_broker_calls_total{broker="fetch",outcome="deny",reason="private"} 1`, "airlock_build_info{"} {
		if !bytes.Contains(r.body, []byte(want)) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if r := f.do("GET", "/metrics", adminToken, nil); r.StatusCode != 200 {
		t.Errorf("metrics with the admin token: %s", r)
	}
}

func TestPublicMetrics(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(o *Options) { o.PublicMetrics = true })
	if r := f.do("GET", "/metrics", "", nil); r.StatusCode != 200 || !bytes.Contains(r.body, []byte("airlock_build_info")) {
		t.Errorf("public metrics: %s", r)
	}
}

func TestAuditStats(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for range 2 {
		f.do("POST", "/api/browse", acmeToken, map[string]any{"verb": "fetch", "url": "http://10.0.0.1/"})
	}
	f.do("POST", "/api/browse", otherToken, map[string]any{"verb": "fetch", "url": "http://10.0.0.2/"})
	count := func(token string) map[string]int64 {
		t.Helper()
		r := f.do("GET", "/api/audit/stats", token, nil)
		var got statsResponse
		r.decode(t, &got)
		if r.StatusCode != 200 || time.Since(got.Since) < DefaultStatsWindow-time.Minute {
			t.Errorf("stats: %s", r)
		}
		m := map[string]int64{}
		for _, s := range got.Stats {
			m[s.Broker+"/"+s.Outcome+"/"+s.Reason] += s.Count
		}
		return m
	}
	if got := count(acmeToken)["fetch/deny/private"]; got != 2 {
		t.Errorf("acme's private denials = %d, want 2", got)
	}
	if got := count(otherToken)["fetch/deny/private"]; got != 1 {
		t.Errorf("other's private denials = %d, want 1", got)
	}
	if got := count(adminToken)["fetch/deny/private"]; got != 3 {
		t.Errorf("all private denials = %d, want 3", got)
	}
	future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	r := f.do("GET", "/api/audit/stats?since="+future, acmeToken, nil)
	if r.StatusCode != 200 || !bytes.Contains(r.body, []byte(`"stats":[]`)) {
		t.Errorf("stats since the future: %s", r)
	}
	wantError(t, f.do("GET", "/api/audit/stats?until=x", acmeToken, nil), 400, airlock.CodeInvalid, airlock.ReasonQuery)
}

func TestAdminRevocation(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	fetch := func(token string) result {
		return f.do("POST", "/api/browse", token, map[string]any{"verb": "fetch", "url": f.site.URL + "/a"})
	}
	r := f.do("POST", "/api/admin/revoke", adminToken, map[string]any{"subject": "other", "reason": "compromised"})
	var rr revocationResponse
	r.decode(t, &rr)
	if r.StatusCode != 200 || rr.Subject != "other" || !rr.Revoked {
		t.Fatalf("revoke: %s", r)
	}
	wantError(t, fetch(otherToken), 403, airlock.CodeRevoked, "")
	if r := fetch(acmeToken); r.StatusCode != 200 {
		t.Errorf("acme after other's revocation: %s", r)
	}
	r = f.do("POST", "/api/admin/unrevoke", adminToken, map[string]any{"subject": "other"})
	r.decode(t, &rr)
	if r.StatusCode != 200 || rr.Revoked {
		t.Fatalf("unrevoke: %s", r)
	}
	if r := fetch(otherToken); r.StatusCode != 200 {
		t.Errorf("other after unrevoke: %s", r)
	}
	wantError(t, f.do("POST", "/api/admin/unrevoke", adminToken, map[string]any{"subject": "other"}), 404, airlock.CodeNotFound, "")
	wantError(t, f.do("POST", "/api/admin/revoke", adminToken, map[string]any{"subject": "a/b/c"}), 400, airlock.CodeInvalid, "")
	wantError(t, f.do("POST", "/api/admin/unrevoke", adminToken, map[string]any{"subject": "other", "reason": "x"}), 400, airlock.CodeInvalid, airlock.ReasonBody)
	// The admin actions are audited.
	r = f.do("GET", "/api/audit?broker=admin&reason=revoke&outcome=allow", adminToken, nil)
	var got auditResponse
	r.decode(t, &got)
	if len(got.Records) != 1 || got.Records[0].Target != "other" {
		t.Errorf("admin revoke records: %s", r)
	}
}

func TestHealth(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var h healthResponse
	r := f.do("GET", "/healthz", "", nil)
	r.decode(t, &h)
	if r.StatusCode != 200 || h.Status != "ok" || h.Version != "v1.2.3-test" {
		t.Errorf("healthz: %s", r)
	}
	r = f.do("GET", "/readyz", "", nil)
	r.decode(t, &h)
	if r.StatusCode != 200 || h.Status != "ready" {
		t.Errorf("readyz: %s", r)
	}
	r = f.do("GET", "/api/openapi.json", "", nil)
	var doc struct {
		OpenAPI string `json:"openapi"`
		Info    struct {
			Version string `json:"version"`
		} `json:"info"`
	}
	r.decode(t, &doc)
	if r.StatusCode != 200 || doc.OpenAPI != "3.1.0" || doc.Info.Version != "v1.2.3-test" {
		t.Errorf("openapi: %d %+v", r.StatusCode, doc)
	}
	// HEAD works on GET routes.
	if r := f.do("HEAD", "/healthz", "", nil); r.StatusCode != 200 {
		t.Errorf("HEAD /healthz: %s", r)
	}
}

// with returns a copy of f whose helpers report to t (a subtest of f's
// test) and whose requests end with it.
func (f *fixture) with(t *testing.T) *fixture {
	c := *f
	c.t = t
	return &c
}
