package firecrawl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	airlock "github.com/airlockhq/airlock"
	"github.com/google/go-cmp/cmp"

	"github.com/airlockhq/airlock/internal/provider/apiutil"
)

const canaryKey = "fc-canary-0a1b2c3d4e5f"

// target is a page of the site the fake Firecrawl "renders".
type target struct {
	html   string
	status int    // 0: 200
	final  string // metadata.url; "": the asked URL
	err    string // metadata.error
}

func docJSON(asked string, t target) map[string]any {
	status := t.status
	if status == 0 {
		status = 200
	}
	final := t.final
	if final == "" {
		final = asked
	}
	md := map[string]any{
		"title":             "Title of " + asked,
		"description":       "About " + asked,
		"language":          "en",
		"keywords":          []string{"a", "b"},
		"ogLocaleAlternate": []string{},
		"sourceURL":         asked,
		"url":               final,
		"statusCode":        status,
		"scrapeId":          "3f0c0000-0000-4000-8000-000000000000",
		"proxyUsed":         "basic",
	}
	if t.err != "" {
		md["error"] = t.err
	}
	if t.err != "" && t.status == 0 {
		delete(md, "statusCode")
	}
	doc := map[string]any{"html": t.html, "rawHtml": "<html><head></head>" + t.html + "</html>", "metadata": md}
	if t.html == "" {
		delete(doc, "html")
		delete(doc, "rawHtml")
	}
	return doc
}

// fakeFirecrawl implements the v1 endpoints the provider uses, in the
// shapes of Firecrawl's API reference (see the package doc).
type fakeFirecrawl struct {
	t     *testing.T
	site  map[string]target
	order []string // the crawl's discovery order

	// crawl job script: the documents visible at each status poll.
	perPoll    int    // documents revealed per poll
	hang       bool   // never completes, reveals nothing
	fail       bool   // the job fails on the second poll
	pageSize   int    // documents per result page once completed (0: all)
	badNext    string // a next URL to hand out instead of the real one
	searchData string // raw JSON of the search answer's data

	mu        sync.Mutex
	bodies    []map[string]any
	polls     int
	cancelled int
	auth      []string
}

func (f *fakeFirecrawl) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.auth = append(f.auth, r.Header.Get("Authorization"))
	w.Header().Set("Content-Type", "application/json")
	if got := r.Header.Get("Authorization"); got != "Bearer "+canaryKey && got != "" {
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, `{"success":false,"error":"Unauthorized: Invalid token (%s)"}`, got)
		return
	}
	var body map[string]any
	if r.Body != nil {
		b, _ := io.ReadAll(r.Body)
		if len(b) > 0 {
			if err := json.Unmarshal(b, &body); err != nil {
				f.t.Errorf("%s %s: body %q: %v", r.Method, r.URL, b, err)
			}
			f.bodies = append(f.bodies, body)
		}
	}
	enc := json.NewEncoder(w)
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/scrape":
		u, _ := body["url"].(string)
		t, ok := f.site[u]
		if !ok {
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprint(w, `{"success":false,"error":"(Internal server error) - All scraping engines failed!"}`)
			return
		}
		enc.Encode(map[string]any{"success": true, "data": docJSON(u, t)})
	case r.Method == http.MethodPost && r.URL.Path == "/v1/crawl":
		enc.Encode(map[string]any{"success": true, "id": "1f2e3d4c-0000-4000-8000-00000000abcd", "url": "https://api.firecrawl.dev/v1/crawl/1f2e3d4c-0000-4000-8000-00000000abcd"})
	case r.Method == http.MethodGet && r.URL.Path == "/v1/crawl/1f2e3d4c-0000-4000-8000-00000000abcd":
		f.polls++
		if f.hang {
			enc.Encode(map[string]any{"status": "scraping", "total": 0, "completed": 0, "creditsUsed": 0, "expiresAt": "2030-01-01T00:00:00Z", "data": []any{}})
			return
		}
		if f.fail && f.polls >= 2 {
			enc.Encode(map[string]any{"success": true, "status": "failed", "total": 1, "completed": 0, "data": []any{}})
			return
		}
		n := min(len(f.order), f.perPoll*f.polls)
		status := "scraping"
		if n == len(f.order) {
			status = "completed"
		}
		from := 0
		if skip := r.URL.Query().Get("skip"); skip != "" {
			fmt.Sscan(skip, &from)
		}
		to := n
		var next any
		if status == "completed" && f.pageSize > 0 && from+f.pageSize < n {
			to = from + f.pageSize
			next = fmt.Sprintf("http://%s/v1/crawl/1f2e3d4c-0000-4000-8000-00000000abcd?skip=%d", r.Host, to)
			if f.badNext != "" {
				next = f.badNext
			}
		}
		var docs []any
		for _, u := range f.order[from:to] {
			docs = append(docs, docJSON(u, f.site[u]))
		}
		enc.Encode(map[string]any{"status": status, "total": len(f.order), "completed": n, "creditsUsed": n, "expiresAt": "2030-01-01T00:00:00Z", "next": next, "data": docs})
	case r.Method == http.MethodDelete && r.URL.Path == "/v1/crawl/1f2e3d4c-0000-4000-8000-00000000abcd":
		f.cancelled++
		enc.Encode(map[string]any{"status": "cancelled"})
	case r.Method == http.MethodPost && r.URL.Path == "/v1/search":
		data := f.searchData
		if data == "" {
			data = `[
			  {"url":"https://www.firecrawl.dev/","title":"Firecrawl - The Web Data API for AI","description":"The web crawling, scraping, and search API for AI.","position":1},
			  {"url":"https://github.com/mendableai/firecrawl","title":"mendableai/firecrawl","description":"Turn entire websites into LLM-ready markdown.","position":2},
			  {"url":"https://www.firecrawl.dev","title":"Firecrawl (again)","description":"Same site.","position":3},
			  {"url":"https://docs.firecrawl.dev/","title":"Quickstart | Firecrawl","description":"Firecrawl allows you to turn entire websites into LLM-ready markdown","position":4}
			]`
		}
		fmt.Fprintf(w, `{"success":true,"data":%s,"warning":null}`, data)
	default:
		http.NotFound(w, r)
	}
}

func (f *fakeFirecrawl) stats() (polls, cancelled int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.polls, f.cancelled
}

// site is the crawled site: seed, three pages, one 404, one page found twice.
func site() (map[string]target, []string) {
	s := map[string]target{
		"https://site.example/":       {html: "<h1>Home</h1>"},
		"https://site.example/a":      {html: "<h1>A</h1>"},
		"https://site.example/b":      {html: "<h1>B</h1>", final: "https://site.example/b/"},
		"https://site.example/gone":   {html: "<h1>Not found</h1>", status: 404},
		"https://site.example/broken": {err: "timeout waiting for page", status: 0},
		"https://site.example/c":      {html: "<h1>C</h1>"},
	}
	order := []string{"https://site.example/", "https://site.example/a", "https://site.example/gone", "https://site.example/a", "https://site.example/b", "https://site.example/broken", "https://site.example/c"}
	return s, order
}

// extractor is a stand-in for internal/extract: title from the <h1>.
func extractor(calls *[]string) Extractor {
	var mu sync.Mutex
	return func(_ context.Context, html []byte, pageURL, mode string) (*airlock.Page, error) {
		mu.Lock()
		*calls = append(*calls, mode+" "+pageURL)
		mu.Unlock()
		s := string(html)
		title := s
		if i, j := strings.Index(s, "<h1>"), strings.Index(s, "</h1>"); i >= 0 && j > i {
			title = s[i+4 : j]
		}
		return &airlock.Page{Title: title, Text: title}, nil
	}
}

func newProvider(t *testing.T, f *fakeFirecrawl, opts Options) (*Provider, *testDoer) {
	t.Helper()
	d := newTestDoer(t, f)
	opts.BaseURL = d.Server.URL
	if opts.APIKey == "" {
		opts.APIKey = canaryKey
	}
	if opts.PollInterval == 0 {
		opts.PollInterval = time.Millisecond
	}
	p, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return p, d
}

func TestScrape(t *testing.T) {
	s, _ := site()
	f := &fakeFirecrawl{t: t, site: s}
	p, d := newProvider(t, f, Options{})
	html, final, status, err := p.Scrape(context.Background(), d, "https://site.example/b")
	if err != nil {
		t.Fatal(err)
	}
	if string(html) != "<h1>B</h1>" || final != "https://site.example/b/" || status != 200 {
		t.Errorf("Scrape = %q, %q, %d", html, final, status)
	}
	want := map[string]any{"url": "https://site.example/b", "formats": []any{"html"}}
	if diff := cmp.Diff(want, f.bodies[0]); diff != "" {
		t.Errorf("scrape body (-want +got):\n%s", diff)
	}
	r := d.Requests()[0]
	if r.Method != http.MethodPost || r.TLSProfile != TLSProfile || r.Header["Authorization"][0] != "Bearer "+canaryKey {
		t.Errorf("request %s %s profile %q", r.Method, r.URL, r.TLSProfile)
	}

	// A target error status is data, not an error.
	_, _, status, err = p.Scrape(context.Background(), d, "https://site.example/gone")
	if err != nil || status != 404 {
		t.Errorf("gone: status %d, %v", status, err)
	}

	// rawHtml on request.
	p, d = newProvider(t, f, Options{Format: FormatRawHTML})
	html, _, _, err = p.Scrape(context.Background(), d, "https://site.example/a")
	if err != nil || string(html) != "<html><head></head><h1>A</h1></html>" {
		t.Errorf("rawHtml: %q, %v", html, err)
	}
	if got := f.bodies[len(f.bodies)-1]["formats"]; !reflect.DeepEqual(got, []any{"rawHtml"}) {
		t.Errorf("formats = %v", got)
	}
}

func TestFetch(t *testing.T) {
	s, _ := site()
	var calls []string
	p, d := newProvider(t, &fakeFirecrawl{t: t, site: s}, Options{Extract: extractor(&calls)})
	page, err := p.Fetch(context.Background(), d, airlock.FetchRequest{URL: "https://site.example/b", Proxy: "corp"})
	if err != nil {
		t.Fatal(err)
	}
	if page.URL != "https://site.example/b/" || page.RequestedURL != "https://site.example/b" || page.Status != 200 ||
		page.Provider != Name || page.Title != "B" || page.FetchedAt.IsZero() || page.ContentType == "" {
		t.Errorf("page = %+v", page)
	}
	if !slices.Equal(calls, []string{"full https://site.example/b/"}) {
		t.Errorf("extractor called with %v, want the final URL", calls)
	}
	if d.Requests()[0].Proxy != "corp" {
		t.Errorf("proxy not passed on")
	}

	_, err = p.Fetch(context.Background(), d, airlock.FetchRequest{URL: "https://site.example/gone"})
	var se *StatusError
	if !errors.As(err, &se) || se.Status != 404 || airlock.CodeOf(err) != airlock.CodeUpstream || airlock.ReasonOf(err) != airlock.ReasonHTTPStatus {
		t.Errorf("404: %v", err)
	}

	// An extractor failure is the fetch's error; in a crawl, a skipped page.
	boom := errors.New("extractor exploded")
	bad := func(context.Context, []byte, string, string) (*airlock.Page, error) { return nil, boom }
	p, d = newProvider(t, &fakeFirecrawl{t: t, site: s}, Options{Extract: bad})
	if _, err := p.Fetch(context.Background(), d, airlock.FetchRequest{URL: "https://site.example/a"}); !errors.Is(err, boom) {
		t.Errorf("extractor failure: %v", err)
	}
	sum, err := p.Crawl(context.Background(), d, airlock.CrawlRequest{URLs: []string{"https://site.example/a"}}, func(*airlock.Page) error { return nil }, nil)
	if err != nil || sum.Pages != 0 || len(sum.Skipped) != 1 || sum.Skipped[0].Reason != "error" {
		t.Errorf("extractor failure in a crawl: %+v, %v", sum, err)
	}

	// Without an extractor: Firecrawl's metadata only.
	p, d = newProvider(t, &fakeFirecrawl{t: t, site: s}, Options{})
	page, err = p.Fetch(context.Background(), d, airlock.FetchRequest{URL: "https://site.example/a"})
	if err != nil || page.Title != "Title of https://site.example/a" || page.Description != "About https://site.example/a" || page.Lang != "en" || page.Text != "" {
		t.Errorf("metadata page = %+v, %v", page, err)
	}
}

func TestCrawlSeed(t *testing.T) {
	s, order := site()
	f := &fakeFirecrawl{t: t, site: s, order: order, perPoll: 3, pageSize: 4}
	var calls []string
	p, d := newProvider(t, f, Options{Extract: extractor(&calls)})
	var pages []string
	var events []airlock.CrawlProgress
	sum, err := p.Crawl(context.Background(), d, airlock.CrawlRequest{Seed: "https://site.example/", Depth: 3, MaxPages: 10, Sitemap: true, Extract: airlock.ExtractNone},
		func(pg *airlock.Page) error { pages = append(pages, pg.URL+" "+pg.Title+" "+pg.Provider); return nil },
		func(ev airlock.CrawlProgress) { events = append(events, ev) })
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"https://site.example/ Home firecrawl",
		"https://site.example/a A firecrawl",
		"https://site.example/b/ B firecrawl",
		"https://site.example/c C firecrawl",
	}
	if !slices.Equal(pages, want) {
		t.Errorf("pages = %q, want %q", pages, want)
	}
	if sum.Pages != 4 || sum.Failed != 2 || len(sum.Skipped) != 2 || sum.Stopped != "" || sum.Queued != len(order) {
		t.Errorf("summary = %+v", sum)
	}
	if sum.Skipped[0] != (airlock.Skipped{URL: "https://site.example/gone", Reason: "http_status", Detail: "HTTP 404"}) ||
		sum.Skipped[1].Reason != "error" || !strings.Contains(sum.Skipped[1].Detail, "timeout waiting for page") {
		t.Errorf("skipped = %+v", sum.Skipped)
	}
	if len(calls) != 4 || !strings.HasPrefix(calls[0], "none ") {
		t.Errorf("extractor calls = %q, want 4 in mode none", calls)
	}
	if len(events) == 0 || events[len(events)-1].Done != 4 {
		t.Errorf("progress = %+v", events)
	}
	wantBody := map[string]any{
		"url": "https://site.example/", "limit": 10.0, "maxDepth": 3.0, "allowSubdomains": false, "ignoreSitemap": false,
		"scrapeOptions": map[string]any{"formats": []any{"html"}, "timeout": 25000.0},
	}
	if diff := cmp.Diff(wantBody, f.bodies[0]); diff != "" {
		t.Errorf("crawl body (-want +got):\n%s", diff)
	}
	if _, cancelled := f.stats(); cancelled != 0 {
		t.Errorf("a completed crawl was cancelled %d times", cancelled)
	}
}

func TestCrawlLimitCancelsJob(t *testing.T) {
	s, order := site()
	f := &fakeFirecrawl{t: t, site: s, order: order, perPoll: 2}
	p, d := newProvider(t, f, Options{})
	var n int
	sum, err := p.Crawl(context.Background(), d, airlock.CrawlRequest{Seed: "https://site.example/", MaxPages: 2},
		func(*airlock.Page) error { n++; return nil }, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 || sum.Pages != 2 || sum.Stopped != "limit" {
		t.Errorf("pages %d, summary %+v", n, sum)
	}
	if _, cancelled := f.stats(); cancelled != 1 {
		t.Errorf("job cancelled %d times, want 1", cancelled)
	}
}

func TestCrawlContextEnds(t *testing.T) {
	f := &fakeFirecrawl{t: t, hang: true}
	p, d := newProvider(t, f, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	var sum *airlock.CrawlSummary
	var err error
	go func() {
		defer close(done)
		sum, err = p.Crawl(ctx, d, airlock.CrawlRequest{Seed: "https://site.example/"}, func(*airlock.Page) error { return nil }, nil)
	}()
	for {
		if polls, _ := f.stats(); polls >= 3 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-done
	if !errors.Is(err, context.Canceled) || sum == nil || sum.Stopped != "canceled" {
		t.Errorf("Crawl = %+v, %v", sum, err)
	}
	if _, cancelled := f.stats(); cancelled != 1 {
		t.Errorf("job cancelled %d times, want 1 (even after ctx ended)", cancelled)
	}
}

func TestCrawlEmitErrorStops(t *testing.T) {
	s, order := site()
	f := &fakeFirecrawl{t: t, site: s, order: order, perPoll: 10}
	p, d := newProvider(t, f, Options{})
	stop := errors.New("consumer gone")
	sum, err := p.Crawl(context.Background(), d, airlock.CrawlRequest{Seed: "https://site.example/"}, func(*airlock.Page) error { return stop }, nil)
	if !errors.Is(err, stop) || sum.Stopped != "emit" || sum.Pages != 0 {
		t.Errorf("Crawl = %+v, %v", sum, err)
	}
}

func TestCrawlFailedJob(t *testing.T) {
	s, order := site()
	f := &fakeFirecrawl{t: t, site: s, order: order, perPoll: 1, fail: true}
	p, d := newProvider(t, f, Options{})
	sum, err := p.Crawl(context.Background(), d, airlock.CrawlRequest{Seed: "https://site.example/"}, func(*airlock.Page) error { return nil }, nil)
	if airlock.CodeOf(err) != airlock.CodeUpstream || !strings.Contains(err.Error(), "failed") || sum.Pages != 1 {
		t.Errorf("Crawl = %+v, %v", sum, err)
	}
}

// TestCrawlNextOtherOrigin: a next link to another origin is not followed
// (the key would go with it); the test Doer would report the request.
func TestCrawlNextOtherOrigin(t *testing.T) {
	s, order := site()
	f := &fakeFirecrawl{t: t, site: s, order: order, perPoll: 10, pageSize: 2, badNext: "https://collector.example/v1/crawl/x?skip=2"}
	p, d := newProvider(t, f, Options{})
	_, err := p.Crawl(context.Background(), d, airlock.CrawlRequest{Seed: "https://site.example/"}, func(*airlock.Page) error { return nil }, nil)
	if err == nil || !strings.Contains(err.Error(), "another origin") {
		t.Errorf("err = %v", err)
	}
}

func TestCrawlURLList(t *testing.T) {
	s, _ := site()
	f := &fakeFirecrawl{t: t, site: s}
	p, d := newProvider(t, f, Options{})
	urls := []string{"https://site.example/a", "https://site.example/gone", "https://site.example/missing", "https://site.example/b", "https://site.example/c"}
	var mu sync.Mutex
	var pages []string
	sum, err := p.Crawl(context.Background(), d, airlock.CrawlRequest{URLs: urls, Concurrency: 2, Timeout: 3 * time.Second},
		func(pg *airlock.Page) error { mu.Lock(); pages = append(pages, pg.URL); mu.Unlock(); return nil }, nil)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(pages)
	if want := []string{"https://site.example/a", "https://site.example/b/", "https://site.example/c"}; !slices.Equal(pages, want) {
		t.Errorf("pages = %v, want %v", pages, want)
	}
	var reasons []string
	for _, sk := range sum.Skipped {
		reasons = append(reasons, sk.URL+" "+string(sk.Reason))
	}
	slices.Sort(reasons)
	if want := []string{"https://site.example/gone http_status", "https://site.example/missing error"}; !slices.Equal(reasons, want) {
		t.Errorf("skipped = %v, want %v", reasons, want)
	}
	if sum.Pages != 3 || sum.Queued != 5 {
		t.Errorf("summary = %+v", sum)
	}
	for _, b := range f.bodies {
		if b["timeout"] != 3000.0 {
			t.Errorf("scrape body %v: timeout should be the per-page timeout", b)
		}
	}

	// The limit stops the list.
	sum, err = p.Crawl(context.Background(), d, airlock.CrawlRequest{URLs: urls, Concurrency: 1, MaxPages: 1}, func(*airlock.Page) error { return nil }, nil)
	if err != nil || sum.Pages != 1 || sum.Stopped != "limit" {
		t.Errorf("limit: %+v, %v", sum, err)
	}

	// A refused key stops it with the key's error.
	p2, err := New(Options{APIKey: "fc-wrong", BaseURL: d.Server.URL})
	if err != nil {
		t.Fatal(err)
	}
	_, err = p2.Crawl(context.Background(), d, airlock.CrawlRequest{URLs: urls}, func(*airlock.Page) error { return nil }, nil)
	if airlock.ReasonOf(err) != airlock.ReasonProviderAuth {
		t.Errorf("bad key: %v", err)
	}

	if _, err := p.Crawl(context.Background(), d, airlock.CrawlRequest{}, nil, nil); airlock.CodeOf(err) != airlock.CodeInvalid {
		t.Errorf("no target: %v", err)
	}
}

func TestSearch(t *testing.T) {
	f := &fakeFirecrawl{t: t}
	p, d := newProvider(t, f, Options{})
	got, err := p.Search(context.Background(), d, airlock.SearchRequest{Query: "firecrawl", Limit: 3})
	if err != nil {
		t.Fatal(err)
	}
	want := []airlock.SearchResult{
		{Title: "Firecrawl - The Web Data API for AI", URL: "https://www.firecrawl.dev/", Snippet: "The web crawling, scraping, and search API for AI.", Engine: Name, Rank: 1},
		{Title: "mendableai/firecrawl", URL: "https://github.com/mendableai/firecrawl", Snippet: "Turn entire websites into LLM-ready markdown.", Engine: Name, Rank: 2},
		{Title: "Quickstart | Firecrawl", URL: "https://docs.firecrawl.dev/", Snippet: "Firecrawl allows you to turn entire websites into LLM-ready markdown", Engine: Name, Rank: 3},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Search (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]any{"query": "firecrawl", "limit": 3.0}, f.bodies[0]); diff != "" {
		t.Errorf("search body (-want +got):\n%s", diff)
	}

	// The v2 answer shape (data.web[]), which newer self-hosted builds give.
	f = &fakeFirecrawl{t: t, searchData: `{"web":[{"url":"https://example.com/","title":"Example","description":"Ex.","position":1}],"images":[]}`}
	p, d = newProvider(t, f, Options{})
	got, err = p.Search(context.Background(), d, airlock.SearchRequest{Query: "x"})
	if err != nil || len(got) != 1 || got[0].URL != "https://example.com/" {
		t.Errorf("v2 shape: %+v, %v", got, err)
	}
	if _, err := p.Search(context.Background(), d, airlock.SearchRequest{Query: ""}); airlock.CodeOf(err) != airlock.CodeInvalid {
		t.Errorf("empty query: %v", err)
	}
}

func TestCredentialRedacted(t *testing.T) {
	echo := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, `{"success":false,"error":"Unauthorized: key %s is not valid"}`, strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
	})
	d := newTestDoer(t, echo)
	p, err := New(Options{APIKey: canaryKey, BaseURL: d.Server.URL})
	if err != nil {
		t.Fatal(err)
	}
	check := func(what string, err error) {
		t.Helper()
		if airlock.CodeOf(err) != airlock.CodeUnavailable || airlock.ReasonOf(err) != airlock.ReasonProviderAuth {
			t.Errorf("%s: %v, want unavailable provider_auth", what, err)
		}
		if err != nil && (strings.Contains(err.Error(), canaryKey) || !strings.Contains(err.Error(), apiutil.Redacted)) {
			t.Errorf("%s: error %q: key not redacted", what, err)
		}
	}
	_, _, _, err = p.Scrape(context.Background(), d, "https://site.example/")
	check("scrape", err)
	_, err = p.Search(context.Background(), d, airlock.SearchRequest{Query: "q"})
	check("search", err)
	_, err = p.Crawl(context.Background(), d, airlock.CrawlRequest{Seed: "https://site.example/"}, func(*airlock.Page) error { return nil }, nil)
	check("crawl", err)

	inner := airlock.Errorf(airlock.CodeTooLarge, "body_cap", "answer too large (Authorization: Bearer %s)", canaryKey)
	d.Fail = func(*airlock.HTTPRequest) error { return inner }
	_, _, _, err = p.Scrape(context.Background(), d, "https://site.example/")
	if !errors.Is(err, inner) || airlock.CodeOf(err) != airlock.CodeTooLarge || strings.Contains(err.Error(), canaryKey) {
		t.Errorf("transport error = %v", err)
	}
}

func TestErrors(t *testing.T) {
	tests := []struct {
		status     int
		body       string
		wantCode   airlock.Code
		wantReason airlock.Reason
		wantWait   time.Duration
	}{
		{429, `{"success":false,"error":"Rate limit exceeded. Consumed (req/min): 11, Remaining (req/min): 0."}`, airlock.CodeRateLimited, airlock.ReasonRateLimited, 12 * time.Second},
		{402, `{"success":false,"error":"Payment required to access this resource."}`, airlock.CodeUpstream, airlock.ReasonHTTPStatus, 0},
		{408, `{"success":false,"error":"Request timed out"}`, airlock.CodeTimeout, airlock.ReasonHTTPStatus, 0},
		{500, `<html>oops</html>`, airlock.CodeUpstream, airlock.ReasonHTTPStatus, 0},
		{200, `{"success":false,"error":"Unexpected error occurred"}`, airlock.CodeUpstream, airlock.ReasonProviderError, 0},
		{200, `not json`, airlock.CodeUpstream, airlock.ReasonProviderError, 0},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.status, tt.body), func(t *testing.T) {
			d := newTestDoer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Retry-After", "12")
				w.WriteHeader(tt.status)
				io.WriteString(w, tt.body)
			}))
			p, err := New(Options{APIKey: canaryKey, BaseURL: d.Server.URL})
			if err != nil {
				t.Fatal(err)
			}
			_, _, _, err = p.Scrape(context.Background(), d, "https://site.example/")
			var e *Error
			if !errors.As(err, &e) || e.Status != tt.status {
				t.Fatalf("err = %v, want *Error with status %d", err, tt.status)
			}
			if airlock.CodeOf(err) != tt.wantCode || airlock.ReasonOf(err) != tt.wantReason || airlock.RetryAfter(err) != tt.wantWait {
				t.Errorf("err = %v: %q %q %v", err, airlock.CodeOf(err), airlock.ReasonOf(err), airlock.RetryAfter(err))
			}
		})
	}
}

func TestNew(t *testing.T) {
	for _, o := range []Options{
		{},
		{APIKey: "  "},
		{APIKey: "k", BaseURL: "ftp://x"},
		{APIKey: "k", BaseURL: "https://u:p@x"},
		{APIKey: "k", Format: "markdown"},
	} {
		if _, err := New(o); airlock.CodeOf(err) != airlock.CodeInvalid {
			t.Errorf("New(%+v) = %v, want invalid", o, err)
		}
	}
	// A self-hosted instance may run without a key: no Authorization then.
	s, _ := site()
	f := &fakeFirecrawl{t: t, site: s}
	d := newTestDoer(t, f)
	p, err := New(Options{BaseURL: d.Server.URL + "/"})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := p.Scrape(context.Background(), d, "https://site.example/"); err != nil {
		t.Fatal(err)
	}
	if f.auth[0] != "" {
		t.Errorf("Authorization = %q, want none", f.auth[0])
	}
}

func TestCapabilities(t *testing.T) {
	p, err := New(Options{APIKey: canaryKey})
	if err != nil {
		t.Fatal(err)
	}
	checkCapabilities(t, p)
}

func checkCapabilities(t *testing.T, p interface{ Capabilities() []string }) {
	t.Helper()
	verbs := map[string]reflect.Type{
		airlock.VerbFetch:  reflect.TypeFor[airlock.Fetcher](),
		airlock.VerbCrawl:  reflect.TypeFor[airlock.Crawler](),
		airlock.VerbSearch: reflect.TypeFor[airlock.Searcher](),
	}
	declared := p.Capabilities()
	for _, v := range declared {
		if _, ok := verbs[v]; !ok {
			t.Errorf("%T declares unknown verb %q", p, v)
		}
	}
	for verb, iface := range verbs {
		implements := reflect.TypeOf(p).Implements(iface)
		if slices.Contains(declared, verb) != implements {
			t.Errorf("%T: declares %q = %v, implements %v = %v", p, verb, slices.Contains(declared, verb), iface, implements)
		}
	}
}
