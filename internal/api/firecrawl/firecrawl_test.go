package firecrawl_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/engine"
	"github.com/airlockhq/airlock/internal/api"
	"github.com/airlockhq/airlock/internal/api/contracttest"
	"github.com/airlockhq/airlock/internal/provider/searxng"
)

const (
	acmeToken   = "alk_acme-firecrawl-token"
	lockedToken = "alk_locked-firecrawl-token"
)

func hashToken(tok string) string {
	sum := sha256.Sum256([]byte(tok))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// sitePage is one page of the test site: a title, a paragraph long enough
// to be main content, and links.
func sitePage(title string, links ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `<!doctype html><html lang="en"><head><title>%s</title>
<meta name="description" content="About %s"><meta property="og:title" content="OG %s"></head><body>
<nav><a href="/">Home</a></nav><main><h1>%s</h1><p>`, title, title, title, title)
	b.WriteString(strings.Repeat("This is the body text of the page, long enough to be its main content. ", 6))
	b.WriteString("</p><ul>")
	for _, l := range links {
		fmt.Fprintf(&b, `<li><a href="%s">%s</a></li>`, l, l)
	}
	b.WriteString("</ul></main></body></html>")
	return b.String()
}

// newSite serves a small site on loopback: /, /docs/a, /docs/b, /blog/x,
// /blog/y, /outward, a sitemap and a 404 page with content.
func newSite(t *testing.T) *httptest.Server {
	t.Helper()
	pages := map[string]string{
		"/":       sitePage("Home", "/docs/a", "/blog/x"),
		"/docs/a": sitePage("Doc A", "/docs/b", "/blog/y"),
		"/docs/b": sitePage("Doc B", "/docs/a"),
		"/blog/x": sitePage("Blog X", "/blog/y"),
		"/blog/y": sitePage("Blog Y", "/"),
		// Linked from no page: a start URL whose one link leaves for a
		// host under the floor (127.0.0.2 is not excepted), for a crawl
		// with allowExternalLinks (nothing listens there).
		"/outward": sitePage("Outward", "http://127.0.0.2:9/"),
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/robots.txt":
			http.NotFound(w, r)
			return
		case "/slow": // answers when the client gives up (a hang guard bounds it)
			select {
			case <-r.Context().Done():
			case <-time.After(30 * time.Second):
			}
			return
		case "/search": // a SearXNG stub: its JSON API
			if r.URL.Query().Get("format") != "json" {
				http.Error(w, "format", http.StatusForbidden)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"query":%q,"results":[`, r.URL.Query().Get("q"))
			for i := 1; i <= 8; i++ {
				if i > 1 {
					io.WriteString(w, ",")
				}
				fmt.Fprintf(w, `{"url":"https://example.com/r%d","title":"Result %d","content":"Snippet %d","engine":"stub"}`, i, i, i)
			}
			io.WriteString(w, `]}`)
			return
		case "/sitemap.xml":
			w.Header().Set("Content-Type", "application/xml")
			fmt.Fprintf(w, `<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><url><loc>http://%s/docs/b</loc></url></urlset>`, r.Host)
			return
		}
		body, ok := pages[r.URL.Path]
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, sitePage("Not here"))
			return
		}
		io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// fixture is a site, an engine and the HTTP API (with the Firecrawl
// routes) on loopback.
type fixture struct {
	site, api *httptest.Server
	en        *engine.Engine
}

func newFixture(t *testing.T, change ...func(*engine.Config)) *fixture {
	t.Helper()
	site := newSite(t)
	cfg := engine.Config{
		InMemory:      true,
		DefaultTenant: "acme",
		Tenants: map[string]engine.TenantConfig{
			// acme's floor exceptions: the test site, and 127.0.0.3 (another
			// host, for external links); 127.0.0.2 stays under the floor.
			"acme": {Profile: "network", Tokens: []string{hashToken(acmeToken)}, Exceptions: []string{"127.0.0.1", "127.0.0.3"}},
			// locked may browse, but only hosts its allow-list names:
			// the loopback site is refused by policy.
			"locked": {Profile: "network", Tokens: []string{hashToken(lockedToken)}, Exceptions: []string{"127.0.0.1"}, Allow: []string{"example.com"}},
		},
		Browse: engine.BrowseConfig{SearchProvider: "searxng", SearXNGURL: site.URL},
	}
	for _, c := range change {
		c(&cfg)
	}
	// searxng on the test site: the CLI's registry is not in this test.
	searx := engine.WithProviders(engine.Provider{Name: searxng.Name, Capabilities: []string{airlock.VerbSearch},
		New: func(func(string) string) (engine.BrowseProvider, error) {
			return searxng.New(searxng.Options{URL: cfg.Browse.SearXNGURL})
		}})
	en, err := engine.New(context.Background(), cfg, searx)
	if err != nil {
		t.Fatalf("engine.New: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		en.Close(ctx)
	})
	// Every request and answer is checked against the served OpenAPI
	// document, as the native routes' are.
	srv := httptest.NewServer(served(t).Handler(t, api.New(en, api.Options{})))
	t.Cleanup(srv.Close)
	return &fixture{site: site, api: srv, en: en}
}

var (
	contractOnce sync.Once
	contractDoc  *contracttest.Contract
	contractErr  error
)

// served is the compiled OpenAPI document the API serves.
func served(t testing.TB) *contracttest.Contract {
	t.Helper()
	contractOnce.Do(func() { contractDoc, contractErr = contracttest.New(api.OpenAPI()) })
	if contractErr != nil {
		t.Fatalf("openapi.json does not compile: %v", contractErr)
	}
	return contractDoc
}

// call sends a JSON body (nil: none) with token and decodes the answer
// into a generic map.
func (f *fixture) call(t *testing.T, method, path, token string, body any) (int, map[string]any, http.Header) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	target := path
	if strings.HasPrefix(path, "/") {
		target = f.api.URL + path
	}
	req, err := http.NewRequest(method, target, rd)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("%s %s: %d, body not JSON: %q", method, path, resp.StatusCode, raw)
	}
	return resp.StatusCode, m, resp.Header
}

// errorOf checks Firecrawl's error shape and returns Airlock's typed
// error under details.
func errorOf(t *testing.T, m map[string]any) map[string]any {
	t.Helper()
	if m["success"] != false {
		t.Errorf("success = %v, want false", m["success"])
	}
	if msg, _ := m["error"].(string); msg == "" {
		t.Errorf("error = %v, want a message", m["error"])
	}
	d, _ := m["details"].(map[string]any)
	e, _ := d["error"].(map[string]any)
	if e == nil {
		t.Fatalf("no details.error in %v", m)
	}
	return e
}

func TestScrapeFormats(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	url := f.site.URL + "/docs/a"
	status, m, h := f.call(t, "POST", "/v2/scrape", acmeToken, map[string]any{
		"url": url, "formats": []any{"markdown", "links", map[string]any{"type": "rawHtml"}}, "origin": "js-sdk@test",
	})
	if status != http.StatusOK || m["success"] != true {
		t.Fatalf("scrape: %d %v", status, m)
	}
	data := m["data"].(map[string]any)
	if md, _ := data["markdown"].(string); !strings.Contains(md, "long enough to be its main content") {
		t.Errorf("markdown = %q, want the page's text", md)
	}
	if raw, _ := data["rawHtml"].(string); !strings.Contains(raw, "<title>Doc A</title>") {
		t.Errorf("rawHtml = %q, want the page as served", raw)
	}
	links, _ := data["links"].([]any)
	var got []string
	for _, l := range links {
		got = append(got, l.(string))
	}
	for _, want := range []string{f.site.URL + "/docs/b", f.site.URL + "/blog/y"} {
		if !strings.Contains(strings.Join(got, " "), want) {
			t.Errorf("links = %v, want %s among them", got, want)
		}
	}
	meta := data["metadata"].(map[string]any)
	for k, want := range map[string]any{"title": "Doc A", "description": "About Doc A", "language": "en",
		"sourceURL": url, "url": url, "statusCode": float64(200), "ogTitle": "OG Doc A", "kind": "article"} {
		if meta[k] != want {
			t.Errorf("metadata.%s = %v, want %v", k, meta[k], want)
		}
	}
	if id, _ := meta["scrapeId"].(string); id == "" || h.Get(api.HeaderDecision) != id {
		t.Errorf("scrapeId %v, decision header %q: want the same decision id", meta["scrapeId"], h.Get(api.HeaderDecision))
	}
	if _, ok := data["html"]; ok {
		t.Errorf("html present though not asked for")
	}

	// The default format is markdown alone.
	status, m, _ = f.call(t, "POST", "/v2/scrape", acmeToken, map[string]any{"url": url})
	data, _ = m["data"].(map[string]any)
	if status != http.StatusOK || data["markdown"] == nil || data["links"] != nil || data["rawHtml"] != nil {
		t.Errorf("default formats: %d %v", status, m)
	}
}

// TestScrapeErrorPage: a page answered 404 is a document with its
// statusCode and content, as Firecrawl gives it.
func TestScrapeErrorPage(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	status, m, _ := f.call(t, "POST", "/v2/scrape", acmeToken, map[string]any{"url": f.site.URL + "/missing", "formats": []string{"markdown", "rawHtml"}})
	if status != http.StatusOK || m["success"] != true {
		t.Fatalf("scrape of a 404 page: %d %v, want a document", status, m)
	}
	data := m["data"].(map[string]any)
	meta := data["metadata"].(map[string]any)
	if meta["statusCode"] != float64(404) || meta["title"] != "Not here" {
		t.Errorf("metadata = %v, want statusCode 404 and the page's title", meta)
	}
	if md, _ := data["markdown"].(string); !strings.Contains(md, "main content") {
		t.Errorf("markdown = %q, want the 404 page's content", md)
	}
	if raw, _ := data["rawHtml"].(string); !strings.Contains(raw, "<title>Not here</title>") {
		t.Errorf("rawHtml = %q, want the 404 page as served", raw)
	}
}

func TestScrapeRefusals(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	url := f.site.URL + "/"
	for _, c := range []struct {
		name       string
		body       map[string]any
		status     int
		reason     string
		msgContain string
	}{
		{"llm format", map[string]any{"url": url, "formats": []any{"summary"}}, 400, "unsupported", "LLM"},
		{"json format object", map[string]any{"url": url, "formats": []any{map[string]any{"type": "json", "prompt": "x"}}}, 400, "unsupported", "LLM"},
		{"unknown format", map[string]any{"url": url, "formats": []any{"nope"}}, 400, "body", "unknown format"},
		{"whole page markdown", map[string]any{"url": url, "onlyMainContent": false}, 400, "unsupported", "onlyMainContent"},
		{"actions", map[string]any{"url": url, "actions": []any{map[string]any{"type": "executeJavascript", "script": "1"}}}, 400, "unsupported_action", "JavaScript"},
		{"skip tls", map[string]any{"url": url, "skipTlsVerification": true}, 400, "unsupported", "certificates"},
		{"unknown field", map[string]any{"url": url, "fomats": []any{"markdown"}}, 400, "body", "fomats"},
		{"no url", map[string]any{"formats": []any{"markdown"}}, 400, "body", "url"},
		{"timeout above ceiling", map[string]any{"url": url, "timeout": 3_600_000}, 400, "limit", "ceiling"},
		{"negative timeout", map[string]any{"url": url, "timeout": -1}, 400, "limit", "timeout"},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, m, _ := f.call(t, "POST", "/v2/scrape", acmeToken, c.body)
			if status != c.status {
				t.Errorf("status = %d, want %d (%v)", status, c.status, m)
			}
			e := errorOf(t, m)
			if e["reason"] != c.reason {
				t.Errorf("reason = %v, want %s", e["reason"], c.reason)
			}
			if msg, _ := m["error"].(string); !strings.Contains(msg, c.msgContain) {
				t.Errorf("error = %q, want it to mention %q", msg, c.msgContain)
			}
		})
	}
}

func TestScrapeAuthAndPolicy(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	url := f.site.URL + "/"
	for _, tok := range []string{"", "alk_nobody"} {
		status, m, h := f.call(t, "POST", "/v2/scrape", tok, map[string]any{"url": url})
		if status != http.StatusUnauthorized || h.Get("WWW-Authenticate") == "" {
			t.Errorf("token %q: %d %v, want 401 with a challenge", tok, status, m)
		}
		if e := errorOf(t, m); e["code"] != "denied" || e["reason"] != "token" {
			t.Errorf("token %q: error %v", tok, e)
		}
	}
	// A target the tenant's policy refuses: 403 with the typed error and
	// its decision id, which the audit log holds under the tenant.
	status, m, h := f.call(t, "POST", "/v2/scrape", lockedToken, map[string]any{"url": url})
	if status != http.StatusForbidden {
		t.Fatalf("policy refusal: %d %v, want 403", status, m)
	}
	e := errorOf(t, m)
	id, _ := e["decision_id"].(string)
	if e["code"] != "denied" || id == "" || h.Get(api.HeaderDecision) != id {
		t.Errorf("policy refusal: error %v, header %q: want denied with the decision id", e, h.Get(api.HeaderDecision))
	}
	if err := f.en.FlushAudit(context.Background()); err != nil {
		t.Fatal(err)
	}
	recs, err := f.en.AuditQuery(context.Background(), airlock.AuditQuery{Principal: "locked"})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, r := range recs {
		if r.ID == id {
			found = r.Outcome == "deny"
		}
	}
	if !found {
		t.Errorf("decision %s is not in the audit log as a refusal of tenant locked: %+v", id, recs)
	}
}

func TestUnknownFirecrawlRoute(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	status, m, _ := f.call(t, "POST", "/v2/extract", acmeToken, map[string]any{"urls": []string{"x"}})
	if status != http.StatusNotFound {
		t.Errorf("status = %d, want 404", status)
	}
	errorOf(t, m)
	status, m, h := f.call(t, "PUT", "/v2/crawl/x", acmeToken, nil)
	if status != http.StatusMethodNotAllowed || h.Get("Allow") != "GET, DELETE" {
		t.Errorf("PUT /v2/crawl/x: %d, Allow %q, want 405 with GET, DELETE", status, h.Get("Allow"))
	}
	errorOf(t, m)
}

func mapURLs(t *testing.T, m map[string]any) []string {
	t.Helper()
	links, ok := m["links"].([]any)
	if !ok {
		t.Fatalf("no links in %v", m)
	}
	var out []string
	for _, l := range links {
		out = append(out, l.(map[string]any)["url"].(string))
	}
	return out
}

func TestMap(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	base := f.site.URL
	status, m, _ := f.call(t, "POST", "/v2/map", acmeToken, map[string]any{"url": base + "/", "origin": "js-sdk@test"})
	if status != http.StatusOK || m["success"] != true {
		t.Fatalf("map: %d %v", status, m)
	}
	got := mapURLs(t, m)
	// The seed first; /docs/b comes from the sitemap, /docs/a and /blog/x
	// from the seed's links, /blog/y from theirs.
	want := []string{base + "/", base + "/blog/x", base + "/blog/y", base + "/docs/a", base + "/docs/b"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("map = %v, want %v", got, want)
	}
	first := m["links"].([]any)[0].(map[string]any)
	if first["title"] != "Home" || first["description"] != "About Home" {
		t.Errorf("seed entry = %v, want its title and description", first)
	}

	status, m, _ = f.call(t, "POST", "/v2/map", acmeToken, map[string]any{"url": base + "/", "search": "DOCS", "limit": 1})
	if got := mapURLs(t, m); status != http.StatusOK || len(got) != 1 || got[0] != base+"/docs/a" {
		t.Errorf("map search docs limit 1 = %d %v, want [%s/docs/a]", status, got, base)
	}

	status, m, _ = f.call(t, "POST", "/v2/map", lockedToken, map[string]any{"url": base + "/"})
	if status != http.StatusForbidden {
		t.Errorf("map refused by policy: %d %v, want 403", status, m)
	}
	if e := errorOf(t, m); e["code"] != "denied" || e["decision_id"] == "" {
		t.Errorf("map refused by policy: error %v, want denied with a decision id", e)
	} else {
		t.Logf("refusal: %v", e)
	}

	for _, body := range []map[string]any{
		{"url": base + "/", "limit": 0},
		{"url": base + "/", "limit": MaxMapLimitPlusOne},
		{"url": base + "/", "sitemap": "everything"},
		{"url": base + "/", "serch": "x"},
	} {
		if status, m, _ := f.call(t, "POST", "/v2/map", acmeToken, body); status != http.StatusBadRequest {
			t.Errorf("map %v: %d %v, want 400", body, status, m)
		}
	}
}

// MaxMapLimitPlusOne is one above the map's bound.
const MaxMapLimitPlusOne = 100001

func TestSearch(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	status, m, h := f.call(t, "POST", "/v2/search", acmeToken, map[string]any{"query": "airlock", "limit": 3, "origin": "js-sdk@test"})
	if status != http.StatusOK || m["success"] != true || h.Get(api.HeaderDecision) == "" {
		t.Fatalf("search: %d %v", status, m)
	}
	web, _ := m["data"].(map[string]any)["web"].([]any)
	if len(web) != 3 {
		t.Fatalf("web = %v, want 3 results", web)
	}
	first := web[0].(map[string]any)
	for k, want := range map[string]any{"url": "https://example.com/r1", "title": "Result 1", "description": "Snippet 1", "position": float64(1)} {
		if first[k] != want {
			t.Errorf("web[0].%s = %v, want %v", k, first[k], want)
		}
	}
	// The default is Firecrawl's 5.
	_, m, _ = f.call(t, "POST", "/v2/search", acmeToken, map[string]any{"query": "airlock"})
	if web, _ := m["data"].(map[string]any)["web"].([]any); len(web) != DefaultSearchLimit {
		t.Errorf("default limit: %d results, want %d", len(web), DefaultSearchLimit)
	}
	for _, c := range []struct {
		body   map[string]any
		reason string
	}{
		{map[string]any{"query": "x", "sources": []any{"news"}}, "unsupported"},
		{map[string]any{"query": "x", "scrapeOptions": map[string]any{"formats": []string{"markdown"}}}, "unsupported"},
		{map[string]any{"query": "x", "limit": 1_000_000}, "limit"},
		{map[string]any{"query": ""}, "body"},
	} {
		status, m, _ := f.call(t, "POST", "/v2/search", acmeToken, c.body)
		if e := errorOf(t, m); status != http.StatusBadRequest || e["reason"] != c.reason {
			t.Errorf("search %v: %d %v, want 400 reason %s", c.body, status, e, c.reason)
		}
	}
}

// DefaultSearchLimit is Firecrawl's default result count.
const DefaultSearchLimit = 5

// waitCrawl polls a crawl until it leaves scraping (a hang guard bounds
// it) and returns the last status answer.
func (f *fixture) waitCrawl(t *testing.T, token, id string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		status, m, _ := f.call(t, "GET", "/v2/crawl/"+id, token, nil)
		if status != http.StatusOK {
			t.Fatalf("crawl status: %d %v", status, m)
		}
		if m["status"] != "scraping" {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("crawl %s still scraping after 30s: %v", id, m)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestCrawl(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *engine.Config) {
		acme := c.Tenants["acme"]
		acme.Limits = engine.CeilingsConfig{ListLimit: 2} // pages of two results: next is exercised
		c.Tenants["acme"] = acme
	})
	base := f.site.URL
	status, m, _ := f.call(t, "POST", "/v2/crawl", acmeToken, map[string]any{
		"url": base + "/", "limit": 10, "maxDiscoveryDepth": 2, "sitemap": "skip",
		"scrapeOptions": map[string]any{"formats": []string{"markdown", "links"}}, "origin": "js-sdk@test",
	})
	if status != http.StatusOK || m["success"] != true {
		t.Fatalf("start crawl: %d %v", status, m)
	}
	id, _ := m["id"].(string)
	if id == "" || m["url"] != f.api.URL+"/v2/crawl/"+id {
		t.Errorf("start crawl: id %q url %v", id, m["url"])
	}
	first := f.waitCrawl(t, acmeToken, id)
	if first["status"] != "completed" || first["completed"] != float64(5) || first["total"] != float64(5) {
		t.Errorf("crawl status = %v, want completed 5 of 5", first)
	}
	// Follow next (an absolute URL) to the end: every page once.
	seen := map[string]bool{}
	m = first
	for hops := 0; ; hops++ {
		for _, d := range m["data"].([]any) {
			meta := d.(map[string]any)["metadata"].(map[string]any)
			u := meta["url"].(string)
			if seen[u] {
				t.Errorf("page %s twice", u)
			}
			seen[u] = true
			if md, _ := d.(map[string]any)["markdown"].(string); !strings.Contains(md, "main content") {
				t.Errorf("page %s: markdown %q", u, md)
			}
		}
		next, _ := m["next"].(string)
		if next == "" {
			break
		}
		if hops > 5 {
			t.Fatalf("next never ends: %v", next)
		}
		if !strings.HasPrefix(next, f.api.URL+"/v2/crawl/"+id+"?skip=") {
			t.Fatalf("next = %q, want this job's URL with skip", next)
		}
		_, m, _ = f.call(t, "GET", next, acmeToken, nil)
	}
	if len(seen) != 5 {
		t.Errorf("pages = %v, want the site's 5", seen)
	}

	// Another tenant's job is not found; an unknown one too.
	if status, m, _ := f.call(t, "GET", "/v2/crawl/"+id, lockedToken, nil); status != http.StatusNotFound {
		t.Errorf("other tenant's job: %d %v, want 404", status, m)
	}
	for _, body := range []map[string]any{
		{"url": base + "/", "includePaths": []string{"^/docs/("}},
		{"url": base + "/", "prompt": "crawl the docs"},
		{"url": base + "/", "scrapeOptions": map[string]any{"formats": []string{"json"}}},
		{"url": base + "/", "webhook": "https://example.com/hook"},
		{"url": base + "/", "limit": 1_000_000},
		{"url": base + "/", "maxDiscoveryDepth": 1_000_000},
	} {
		if status, m, _ := f.call(t, "POST", "/v2/crawl", acmeToken, body); status != http.StatusBadRequest {
			t.Errorf("crawl %v: %d %v, want 400", body, status, m)
		}
	}
}

// TestCrawlPaths: includePaths and excludePaths are regular expressions
// on the path of discovered URLs; the seed is crawled whatever they say.
func TestCrawlPaths(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	status, m, _ := f.call(t, "POST", "/v2/crawl", acmeToken, map[string]any{
		"url": f.site.URL + "/", "includePaths": []string{"^/docs/", "^/blog/"}, "excludePaths": []string{"^/blog/y$"},
	})
	if status != http.StatusOK {
		t.Fatalf("start crawl: %d %v", status, m)
	}
	m = f.waitCrawl(t, acmeToken, m["id"].(string))
	var got []string
	for _, d := range m["data"].([]any) {
		got = append(got, strings.TrimPrefix(d.(map[string]any)["metadata"].(map[string]any)["url"].(string), f.site.URL))
	}
	slices.Sort(got)
	if want := []string{"/", "/blog/x", "/docs/a", "/docs/b"}; !slices.Equal(got, want) {
		t.Errorf("crawled %q, want %q", got, want)
	}
}

func TestCrawlCancel(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	status, m, _ := f.call(t, "POST", "/v2/crawl", acmeToken, map[string]any{"url": f.site.URL + "/slow", "sitemap": "skip"})
	if status != http.StatusOK {
		t.Fatalf("start crawl: %d %v", status, m)
	}
	id := m["id"].(string)
	status, m, _ = f.call(t, "DELETE", "/v2/crawl/"+id, acmeToken, nil)
	if status != http.StatusOK || m["status"] != "cancelled" {
		t.Fatalf("cancel: %d %v, want 200 cancelled", status, m)
	}
	if m := f.waitCrawl(t, acmeToken, id); m["status"] != "cancelled" {
		t.Errorf("after cancel: %v", m)
	}
	if status, _, _ := f.call(t, "DELETE", "/v2/crawl/01ARZ3NDEKTSV4RRFFQ69G5FAV", acmeToken, nil); status != http.StatusNotFound {
		t.Errorf("cancel unknown job: %d, want 404", status)
	}
}

func TestBatchScrape(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	base := f.site.URL
	status, m, _ := f.call(t, "POST", "/v2/batch/scrape", acmeToken, map[string]any{
		"urls": []string{base + "/docs/a", base + "/blog/x", "not a url"}, "formats": []string{"markdown"},
		"ignoreInvalidURLs": true, "origin": "js-sdk@test",
	})
	if status != http.StatusOK || m["success"] != true {
		t.Fatalf("batch scrape: %d %v", status, m)
	}
	id, _ := m["id"].(string)
	if m["url"] != f.api.URL+"/v2/batch/scrape/"+id {
		t.Errorf("url = %v", m["url"])
	}
	if inv, _ := m["invalidURLs"].([]any); len(inv) != 1 || inv[0] != "not a url" {
		t.Errorf("invalidURLs = %v", m["invalidURLs"])
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		status, m, _ = f.call(t, "GET", "/v2/batch/scrape/"+id, acmeToken, nil)
		if status != http.StatusOK || m["status"] != "scraping" || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	var got []string
	for _, d := range m["data"].([]any) {
		got = append(got, strings.TrimPrefix(d.(map[string]any)["metadata"].(map[string]any)["url"].(string), base))
	}
	slices.Sort(got)
	// A list follows no links: exactly the two URLs.
	if want := []string{"/blog/x", "/docs/a"}; m["status"] != "completed" || !slices.Equal(got, want) {
		t.Errorf("batch status = %v %q, want completed %q", m["status"], got, want)
	}
	for _, body := range []map[string]any{
		{"urls": []string{base + "/", "not a url"}},
		{"urls": []string{}},
		{"urls": []string{base + "/"}, "formats": []string{"screenshot"}},
		{"urls": []string{base + "/"}, "webhook": "https://example.com/hook"},
	} {
		if status, m, _ := f.call(t, "POST", "/v2/batch/scrape", acmeToken, body); status != http.StatusBadRequest {
			t.Errorf("batch %v: %d %v, want 400", body, status, m)
		}
	}
}

// TestCrawlExternalLinks: allowExternalLinks follows links to other hosts,
// each decided by the tenant's policy: an excepted host is crawled, a
// host under the floor is refused, never fetched, and listed by
// GET /v2/crawl/{id}/errors.
func TestCrawlExternalLinks(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.3:0")
	if err != nil {
		t.Fatalf("listen on 127.0.0.3: %v", err)
	}
	var deniedHits atomic.Int32
	other := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, sitePage("Other host"))
	}))
	other.Listener.Close()
	other.Listener = ln
	other.Start()
	defer other.Close()
	dln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatalf("listen on 127.0.0.2: %v", err)
	}
	denied := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { deniedHits.Add(1) }))
	denied.Listener.Close()
	denied.Listener = dln
	denied.Start()
	defer denied.Close()

	f := newFixture(t)
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		io.WriteString(w, sitePage("Start", other.URL+"/", denied.URL+"/"))
	})
	start := httptest.NewServer(mux)
	defer start.Close()

	for _, external := range []bool{false, true} {
		status, m, _ := f.call(t, "POST", "/v2/crawl", acmeToken, map[string]any{"url": start.URL + "/", "sitemap": "skip", "allowExternalLinks": external})
		if status != http.StatusOK {
			t.Fatalf("start crawl: %d %v", status, m)
		}
		id := m["id"].(string)
		m = f.waitCrawl(t, acmeToken, id)
		var got []string
		for _, d := range m["data"].([]any) {
			got = append(got, d.(map[string]any)["metadata"].(map[string]any)["url"].(string))
		}
		slices.Sort(got)
		want := []string{start.URL + "/"}
		if external {
			want = []string{other.URL + "/", start.URL + "/"}
			slices.Sort(want)
		}
		if !slices.Equal(got, want) {
			t.Errorf("external %v: crawled %q, want %q", external, got, want)
		}
		_, m, _ = f.call(t, "GET", "/v2/crawl/"+id+"/errors", acmeToken, nil)
		errs, _ := m["errors"].([]any)
		var refused []string
		for _, e := range errs {
			e := e.(map[string]any)
			if e["code"] == "policy" {
				refused = append(refused, e["url"].(string))
			}
		}
		if external && (len(refused) != 1 || refused[0] != denied.URL+"/") {
			t.Errorf("errors = %v, want %s/ refused by policy", m, denied.URL)
		}
		if !external && len(errs) != 0 {
			t.Errorf("errors without external links = %v, want none (off-host links are scope, not errors)", m)
		}
	}
	if n := deniedHits.Load(); n != 0 {
		t.Errorf("the refused host got %d requests", n)
	}
}

// TestSearchDefaultUnderCeiling: a tenant whose search_results ceiling is
// below Firecrawl's default of 5 gets its ceiling by default, not a
// refusal; a limit above it is refused.
func TestSearchDefaultUnderCeiling(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *engine.Config) {
		acme := c.Tenants["acme"]
		acme.Limits = engine.CeilingsConfig{SearchResults: 2}
		c.Tenants["acme"] = acme
	})
	status, m, _ := f.call(t, "POST", "/v2/search", acmeToken, map[string]any{"query": "airlock"})
	if web, _ := m["data"].(map[string]any)["web"].([]any); status != http.StatusOK || len(web) != 2 {
		t.Errorf("default limit under a ceiling of 2: %d %v, want 2 results", status, m)
	}
	status, m, _ = f.call(t, "POST", "/v2/search", acmeToken, map[string]any{"query": "airlock", "limit": 3})
	if e := errorOf(t, m); status != http.StatusBadRequest || e["reason"] != "limit" {
		t.Errorf("limit 3 above a ceiling of 2: %d %v, want 400 limit", status, e)
	}
}

// crawlPaths starts a crawl with body, waits for it to end and returns
// the paths of its pages, sorted.
func (f *fixture) crawlPaths(t *testing.T, body map[string]any) []string {
	t.Helper()
	status, m, _ := f.call(t, "POST", "/v2/crawl", acmeToken, body)
	if status != http.StatusOK {
		t.Fatalf("start crawl %v: %d %v", body, status, m)
	}
	m = f.waitCrawl(t, acmeToken, m["id"].(string))
	if m["status"] != "completed" {
		t.Fatalf("crawl %v: %v, want completed", body, m)
	}
	var got []string
	for _, d := range m["data"].([]any) {
		got = append(got, strings.TrimPrefix(d.(map[string]any)["metadata"].(map[string]any)["url"].(string), f.site.URL))
	}
	slices.Sort(got)
	return got
}

// TestCrawlDiscoveryScope: maxDiscoveryDepth 0 follows no link (the start
// URL, and its sitemap's URLs unless sitemap is skip); sitemap "only"
// crawls the start URL and its sitemap's URLs, no links; "skip" reads no
// sitemap. The test site's sitemap lists /docs/b, which no link of the
// start page reaches in one hop.
func TestCrawlDiscoveryScope(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	base := f.site.URL + "/"
	for _, c := range []struct {
		name string
		body map[string]any
		want []string
	}{
		{"depth 0, no sitemap", map[string]any{"url": base, "maxDiscoveryDepth": 0, "sitemap": "skip"}, []string{"/"}},
		{"depth 0 with the sitemap", map[string]any{"url": base, "maxDiscoveryDepth": 0}, []string{"/", "/docs/b"}},
		{"sitemap only", map[string]any{"url": base, "sitemap": "only"}, []string{"/", "/docs/b"}},
		{"sitemap only, deep", map[string]any{"url": base, "sitemap": "only", "maxDiscoveryDepth": 5}, []string{"/", "/docs/b"}},
		{"depth 1, no sitemap", map[string]any{"url": base, "maxDiscoveryDepth": 1, "sitemap": "skip"}, []string{"/", "/blog/x", "/docs/a"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := f.crawlPaths(t, c.body); !slices.Equal(got, c.want) {
				t.Errorf("crawled %q, want %q", got, c.want)
			}
		})
	}
	// A negative depth is refused.
	if status, m, _ := f.call(t, "POST", "/v2/crawl", acmeToken, map[string]any{"url": base, "maxDiscoveryDepth": -1}); status != http.StatusBadRequest {
		t.Errorf("maxDiscoveryDepth -1: %d %v, want 400", status, m)
	}
}

// TestMapSitemapOnly: map with sitemap "only" lists the start URL and its
// sitemap's URLs, not the links of the pages.
func TestMapSitemapOnly(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	base := f.site.URL
	status, m, _ := f.call(t, "POST", "/v2/map", acmeToken, map[string]any{"url": base + "/", "sitemap": "only"})
	if status != http.StatusOK {
		t.Fatalf("map sitemap only: %d %v", status, m)
	}
	if got, want := mapURLs(t, m), []string{base + "/", base + "/docs/b"}; !slices.Equal(got, want) {
		t.Errorf("map sitemap only = %v, want %v", got, want)
	}
}

// jobDocuments waits for the job at route+id to end and returns its
// documents (all of them: the test jobs fit in one answer).
func (f *fixture) jobDocuments(t *testing.T, route, id string) []map[string]any {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		status, m, _ := f.call(t, "GET", route+id, acmeToken, nil)
		if status != http.StatusOK {
			t.Fatalf("job status: %d %v", status, m)
		}
		if m["status"] != "scraping" {
			if m["status"] != "completed" || m["next"] != nil {
				t.Fatalf("job %s: %v, want completed in one answer", id, m)
			}
			var out []map[string]any
			for _, d := range m["data"].([]any) {
				out = append(out, d.(map[string]any))
			}
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s still scraping after 30s", id)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestJobFormats: a crawl's and a batch's documents carry the formats the
// request named (markdown alone by default), as a scrape's do; rawHtml
// is the page as served. The formats are kept with the job.
func TestJobFormats(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	base := f.site.URL
	for _, c := range []struct {
		name    string
		route   string
		body    map[string]any
		formats []string // the keys every document has besides metadata
	}{
		{"crawl default", "/v2/crawl/", map[string]any{"url": base + "/docs/b", "sitemap": "skip", "maxDiscoveryDepth": 0}, []string{"markdown"}},
		{"crawl links", "/v2/crawl/", map[string]any{"url": base + "/docs/b", "sitemap": "skip", "maxDiscoveryDepth": 0,
			"scrapeOptions": map[string]any{"formats": []string{"links"}}}, []string{"links"}},
		{"crawl rawHtml and markdown", "/v2/crawl/", map[string]any{"url": base + "/docs/b", "sitemap": "skip", "maxDiscoveryDepth": 0,
			"scrapeOptions": map[string]any{"formats": []any{"rawHtml", map[string]any{"type": "markdown"}}}}, []string{"markdown", "rawHtml"}},
		{"batch default", "/v2/batch/scrape/", map[string]any{"urls": []string{base + "/docs/b"}}, []string{"markdown"}},
		{"batch links and rawHtml", "/v2/batch/scrape/", map[string]any{"urls": []string{base + "/docs/b"}, "formats": []string{"links", "rawHtml"}},
			[]string{"links", "rawHtml"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, m, _ := f.call(t, "POST", strings.TrimSuffix(c.route, "/"), acmeToken, c.body)
			if status != http.StatusOK {
				t.Fatalf("start: %d %v", status, m)
			}
			docs := f.jobDocuments(t, c.route, m["id"].(string))
			if len(docs) != 1 {
				t.Fatalf("documents = %v, want /docs/b alone", docs)
			}
			d := docs[0]
			var got []string
			for k := range d {
				if k != "metadata" {
					got = append(got, k)
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, c.formats) {
				t.Errorf("document has %q, want %q", got, c.formats)
			}
			if raw, ok := d["rawHtml"].(string); ok && !strings.Contains(raw, "<title>Doc B</title>") {
				t.Errorf("rawHtml = %.200q, want the page as served", raw)
			}
			if md, ok := d["markdown"].(string); ok && !strings.Contains(md, "main content") {
				t.Errorf("markdown = %.200q", md)
			}
			if links, ok := d["links"].([]any); ok && !slices.Contains(links, any(base+"/docs/a")) {
				t.Errorf("links = %v, want %s/docs/a among them", links, base)
			}
			job, err := f.en.CrawlJob(context.Background(), airlock.Principal{Tenant: "acme"}, m["id"].(string))
			if err != nil {
				t.Fatal(err)
			}
			if len(job.Request.Formats) != len(c.formats) {
				t.Errorf("the stored job's formats = %q, want the %d asked for", job.Request.Formats, len(c.formats))
			}
		})
	}
	// What a job cannot give is refused when it starts: the formats and
	// options of the browser, which serves a scrape alone (a message that
	// says so, namesJob, where no other refusal comes first).
	for _, c := range []struct {
		route    string
		body     map[string]any
		reason   string
		namesJob bool
	}{
		{"/v2/crawl", map[string]any{"url": base + "/", "scrapeOptions": map[string]any{"formats": []string{"screenshot"}}}, "unsupported", false},
		{"/v2/crawl", map[string]any{"url": base + "/", "scrapeOptions": map[string]any{"formats": []string{"summary"}}}, "unsupported", false},
		{"/v2/crawl", map[string]any{"url": base + "/", "scrapeOptions": map[string]any{"actions": []any{map[string]any{"type": "wait", "milliseconds": 10}}}}, "unsupported_action", true},
		{"/v2/crawl", map[string]any{"url": base + "/", "scrapeOptions": map[string]any{"waitFor": 10}}, "unsupported", true},
		{"/v2/crawl", map[string]any{"url": base + "/", "scrapeOptions": map[string]any{"includeTags": []string{"main"}}}, "unsupported", true},
		{"/v2/batch/scrape", map[string]any{"urls": []string{base + "/"}, "headers": map[string]string{"X-A": "b"}}, "unsupported", true},
		{"/v2/batch/scrape", map[string]any{"urls": []string{base + "/"}, "mobile": true}, "unsupported", true},
	} {
		status, m, _ := f.call(t, "POST", c.route, acmeToken, c.body)
		if e := errorOf(t, m); status != http.StatusBadRequest || e["reason"] != c.reason {
			t.Errorf("%s %v: %d %v, want 400 reason %s", c.route, c.body, status, m, c.reason)
		}
		if msg, _ := m["error"].(string); c.namesJob && !strings.Contains(msg, "crawl") && !strings.Contains(msg, "batch") {
			t.Errorf("%s %v: error %q does not say a job cannot do it", c.route, c.body, msg)
		}
	}
}

// TestJobFormatsSurviveRestart: the formats are kept with the job in the
// store, so a crawl's documents keep them after the server restarts.
func TestJobFormatsSurviveRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	onDisk := func(c *engine.Config) { c.InMemory, c.DataDir = false, dir }
	f := newFixture(t, onDisk)
	status, m, _ := f.call(t, "POST", "/v2/crawl", acmeToken, map[string]any{"url": f.site.URL + "/docs/b", "sitemap": "skip",
		"maxDiscoveryDepth": 0, "scrapeOptions": map[string]any{"formats": []string{"links", "rawHtml"}}})
	if status != http.StatusOK {
		t.Fatalf("start crawl: %d %v", status, m)
	}
	id := m["id"].(string)
	f.jobDocuments(t, "/v2/crawl/", id)
	f.api.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := f.en.Close(ctx); err != nil {
		t.Fatal(err)
	}

	g := newFixture(t, onDisk)
	docs := g.jobDocuments(t, "/v2/crawl/", id)
	if len(docs) != 1 {
		t.Fatalf("after a restart: %v, want the one document", docs)
	}
	raw, _ := docs[0]["rawHtml"].(string)
	if _, md := docs[0]["markdown"]; md || docs[0]["links"] == nil || !strings.Contains(raw, "<title>Doc B</title>") {
		t.Errorf("after a restart: document %v, want links and rawHtml alone", docs[0])
	}
}

// TestNumbersAboveCeilings: every number a Firecrawl request carries goes
// through the tenant's limits ceilings: above one it is refused (400,
// reason limit) before anything is fetched or queued. The tenant's
// ceilings are lowered so that each is one above.
func TestNumbersAboveCeilings(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *engine.Config) {
		acme := c.Tenants["acme"]
		acme.Limits = engine.CeilingsConfig{CrawlMaxPages: 3, CrawlDepth: 2, CrawlConcurrency: 2, CrawlDelay: time.Second,
			CrawlTimeout: 2 * time.Second, CrawlURLs: 2, SearchResults: 3}
		c.Tenants["acme"] = acme
	})
	u := f.site.URL + "/"
	for _, c := range []struct {
		route string
		body  map[string]any
	}{
		{"/v2/scrape", map[string]any{"url": u, "timeout": 2001}},
		{"/v2/crawl", map[string]any{"url": u, "limit": 4}},
		{"/v2/crawl", map[string]any{"url": u, "maxDiscoveryDepth": 3}},
		{"/v2/crawl", map[string]any{"url": u, "maxConcurrency": 3}},
		{"/v2/crawl", map[string]any{"url": u, "delay": 1.5}},
		{"/v2/crawl", map[string]any{"url": u, "scrapeOptions": map[string]any{"timeout": 2001}}},
		{"/v2/batch/scrape", map[string]any{"urls": []string{u, u + "a", u + "b"}}},
		{"/v2/batch/scrape", map[string]any{"urls": []string{u}, "maxConcurrency": 3}},
		{"/v2/batch/scrape", map[string]any{"urls": []string{u}, "timeout": 2001}},
		{"/v2/map", map[string]any{"url": u, "timeout": 2001}},
		{"/v2/map", map[string]any{"url": u, "limit": MaxMapLimitPlusOne}},
		{"/v2/search", map[string]any{"query": "q", "limit": 4}},
		{"/v2/search", map[string]any{"query": "q", "timeout": 2001}},
	} {
		status, m, _ := f.call(t, "POST", c.route, acmeToken, c.body)
		if e := errorOf(t, m); status != http.StatusBadRequest || e["code"] != "invalid" || e["reason"] != "limit" {
			t.Errorf("%s %v: %d %v, want 400 reason limit", c.route, c.body, status, m)
		}
	}
	// At the ceilings, taken.
	status, m, _ := f.call(t, "POST", "/v2/crawl", acmeToken, map[string]any{"url": u, "limit": 3, "maxDiscoveryDepth": 2,
		"maxConcurrency": 2, "delay": 0.001, "scrapeOptions": map[string]any{"timeout": 2000}})
	if status != http.StatusOK {
		t.Errorf("crawl at the ceilings: %d %v", status, m)
	}
}
