package brave

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	airlock "github.com/airlockhq/airlock"
	"github.com/google/go-cmp/cmp"

	"github.com/airlockhq/airlock/internal/provider/apiutil"
)

const canaryKey = "BSA-canary-9f8e7d6c5b4a"

// result is one web result in the shape of the WebSearchApiResponse model
// (https://api-dashboard.search.brave.com/docs): SearchResult fields title,
// url, description, plus the ones the provider ignores.
func result(i int) map[string]any {
	return map[string]any{
		"title":           fmt.Sprintf("Result <strong>%d</strong>", i),
		"url":             fmt.Sprintf("https://example.com/%d", i),
		"is_source_local": false,
		"is_source_both":  false,
		"description":     fmt.Sprintf("About &amp; around <strong>result</strong> %d.", i),
		"page_age":        "2025-05-01T00:00:00",
		"profile":         map[string]any{"name": "Example", "url": "https://example.com", "long_name": "example.com", "img": "https://imgs.search.brave.com/x"},
		"language":        "en",
		"family_friendly": true,
		"type":            "search_result",
		"subtype":         "generic",
		"meta_url":        map[string]any{"scheme": "https", "netloc": "example.com", "hostname": "example.com", "favicon": "https://imgs.search.brave.com/y", "path": fmt.Sprintf("› %d", i)},
		"age":             "May 1, 2025",
	}
}

// fakeAPI implements GET /res/v1/web/search: total results in pages of
// count, more_results_available while any remain.
type fakeAPI struct {
	t      *testing.T
	total  int
	dup    bool // repeat result 1 on page 0
	status int
	body   string
	header map[string]string
	got    []http.Header
	params []string
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet || r.URL.Path != SearchPath {
		http.NotFound(w, r)
		return
	}
	f.got = append(f.got, r.Header.Clone())
	f.params = append(f.params, r.URL.RawQuery)
	w.Header().Set("Content-Type", "application/json")
	if tok := r.Header.Get("X-Subscription-Token"); tok != canaryKey {
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, `{"type":"ErrorResponse","error":{"id":"0c1b","status":401,"code":"SUBSCRIPTION_TOKEN_INVALID","detail":"The provided subscription token is invalid: %s","meta":{"component":"authentication"}},"time":1748000000}`, tok)
		return
	}
	for k, v := range f.header {
		w.Header().Set(k, v)
	}
	if f.status != 0 {
		w.WriteHeader(f.status)
		fmt.Fprint(w, f.body)
		return
	}
	q := r.URL.Query()
	count, _ := strconv.Atoi(q.Get("count"))
	offset, _ := strconv.Atoi(q.Get("offset"))
	var results []map[string]any
	for i := offset*count + 1; i <= min(f.total, (offset+1)*count); i++ {
		results = append(results, result(i))
		if f.dup && i == 1 {
			results = append(results, result(1))
		}
	}
	json.NewEncoder(w).Encode(map[string]any{
		"type": "search",
		"query": map[string]any{
			"original": q.Get("q"), "show_strict_warning": false, "is_navigational": false,
			"is_news_breaking": false, "spellcheck_off": true, "country": "us", "bad_results": false,
			"should_fallback": false, "postal_code": "", "city": "", "header_country": "", "state": "",
			"more_results_available": (offset+1)*count < f.total,
		},
		"mixed": map[string]any{"type": "mixed", "main": []any{map[string]any{"type": "web", "index": 0, "all": false}}, "top": []any{}, "side": []any{}},
		"web":   map[string]any{"type": "search", "results": results, "family_friendly": true},
	})
}

func newProvider(t *testing.T, f http.Handler) (*Provider, *testDoer) {
	t.Helper()
	d := newTestDoer(t, f)
	p, err := New(Options{APIKey: canaryKey, BaseURL: d.Server.URL})
	if err != nil {
		t.Fatal(err)
	}
	return p, d
}

func TestSearch(t *testing.T) {
	f := &fakeAPI{t: t, total: 3, dup: true}
	p, d := newProvider(t, f)
	got, err := p.Search(context.Background(), d, airlock.SearchRequest{Query: "airlock", Proxy: "corp"})
	if err != nil {
		t.Fatal(err)
	}
	want := []airlock.SearchResult{
		{Title: "Result 1", URL: "https://example.com/1", Snippet: "About & around result 1.", Engine: Name, Rank: 1},
		{Title: "Result 2", URL: "https://example.com/2", Snippet: "About & around result 2.", Engine: Name, Rank: 2},
		{Title: "Result 3", URL: "https://example.com/3", Snippet: "About & around result 3.", Engine: Name, Rank: 3},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Search (-want +got):\n%s", diff)
	}
	if f.got[0].Get("Accept") != "application/json" {
		t.Errorf("Accept = %q", f.got[0].Get("Accept"))
	}
	if f.params[0] != "count=10&q=airlock&text_decorations=false" {
		t.Errorf("query = %q", f.params[0])
	}
	if r := d.Requests()[0]; r.TLSProfile != TLSProfile || r.Proxy != "corp" {
		t.Errorf("profile %q proxy %q", r.TLSProfile, r.Proxy)
	}
}

func TestSearchPages(t *testing.T) {
	f := &fakeAPI{t: t, total: 100}
	p, d := newProvider(t, f)
	got, err := p.Search(context.Background(), d, airlock.SearchRequest{Query: "q", Limit: 45})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 45 || got[44].URL != "https://example.com/45" || got[44].Rank != 45 {
		t.Fatalf("got %d results, last %+v", len(got), got[len(got)-1])
	}
	want := []string{"count=20&q=q&text_decorations=false", "count=20&offset=1&q=q&text_decorations=false", "count=20&offset=2&q=q&text_decorations=false"}
	if !slices.Equal(f.params, want) {
		t.Errorf("pages = %v, want %v", f.params, want)
	}

	// Fewer results than the limit: stop when the API says there are no more.
	f = &fakeAPI{t: t, total: 25}
	p, d = newProvider(t, f)
	got, err = p.Search(context.Background(), d, airlock.SearchRequest{Query: "q", Limit: 100})
	if err != nil || len(got) != 25 || len(f.params) != 2 {
		t.Errorf("got %d results in %d requests, %v; want 25 in 2", len(got), len(f.params), err)
	}
}

// TestCredentialRedacted: the fake API echoes a wrong key in its error
// body; with the right key refused by a proxy that echoes it, the error
// must not carry it.
func TestCredentialRedacted(t *testing.T) {
	echo := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprintf(w, `{"type":"ErrorResponse","error":{"status":403,"code":"SUBSCRIPTION_TOKEN_INVALID","detail":"token %s is not subscribed to this plan"}}`, r.Header.Get("X-Subscription-Token"))
	})
	p, d := newProvider(t, echo)
	_, err := p.Search(context.Background(), d, airlock.SearchRequest{Query: "q"})
	if airlock.CodeOf(err) != airlock.CodeUnavailable || airlock.ReasonOf(err) != airlock.ReasonProviderAuth {
		t.Fatalf("err = %v, want unavailable provider_auth", err)
	}
	if strings.Contains(err.Error(), canaryKey) || !strings.Contains(err.Error(), apiutil.Redacted) {
		t.Errorf("error %q: key not redacted", err)
	}
	var e *Error
	if !errors.As(err, &e) || e.APICode != "SUBSCRIPTION_TOKEN_INVALID" {
		t.Errorf("Error = %+v", e)
	}

	inner := airlock.Errorf(airlock.CodeDenied, "policy", "refused request carrying %s", canaryKey)
	d.Fail = func(*airlock.HTTPRequest) error { return inner }
	_, err = p.Search(context.Background(), d, airlock.SearchRequest{Query: "q"})
	if !errors.Is(err, inner) || airlock.CodeOf(err) != airlock.CodeDenied || strings.Contains(err.Error(), canaryKey) {
		t.Errorf("transport error = %v (code %q)", err, airlock.CodeOf(err))
	}
}

func TestErrors(t *testing.T) {
	tests := []struct {
		name       string
		status     int
		body       string
		header     map[string]string
		wantCode   airlock.Code
		wantReason airlock.Reason
		wantWait   time.Duration
	}{
		{"429 rate limit", 429, `{"type":"ErrorResponse","error":{"status":429,"code":"RATE_LIMITED","detail":"Request rate limit exceeded for plan."}}`, map[string]string{"X-RateLimit-Reset": "1, 1419704"}, airlock.CodeRateLimited, airlock.ReasonRateLimited, time.Second},
		{"422 bad param", 422, `{"type":"ErrorResponse","error":{"status":422,"code":"VALIDATION","detail":"Unable to validate request parameter(s)"}}`, nil, airlock.CodeUpstream, airlock.ReasonHTTPStatus, 0},
		{"502 html", 502, `<html>Bad Gateway</html>`, nil, airlock.CodeUpstream, airlock.ReasonHTTPStatus, 0},
		{"200 not json", 200, `not json`, nil, airlock.CodeUpstream, airlock.ReasonProviderError, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, d := newProvider(t, &fakeAPI{t: t, status: tt.status, body: tt.body, header: tt.header})
			_, err := p.Search(context.Background(), d, airlock.SearchRequest{Query: "q"})
			var e *Error
			if !errors.As(err, &e) || e.Status != tt.status {
				t.Fatalf("err = %v, want *Error with status %d", err, tt.status)
			}
			if airlock.CodeOf(err) != tt.wantCode || airlock.ReasonOf(err) != tt.wantReason || airlock.RetryAfter(err) != tt.wantWait {
				t.Errorf("err = %v: %q %q %v; want %q %q %v", err, airlock.CodeOf(err), airlock.ReasonOf(err), airlock.RetryAfter(err), tt.wantCode, tt.wantReason, tt.wantWait)
			}
		})
	}
	p, d := newProvider(t, &fakeAPI{t: t})
	if _, err := p.Search(context.Background(), d, airlock.SearchRequest{}); airlock.CodeOf(err) != airlock.CodeInvalid {
		t.Errorf("empty query: %v", err)
	}
	for _, o := range []Options{{}, {APIKey: " "}, {APIKey: "k", BaseURL: "ftp://x"}, {APIKey: "k", BaseURL: "https://u:p@x"}} {
		if _, err := New(o); airlock.CodeOf(err) != airlock.CodeInvalid {
			t.Errorf("New(%+v) = %v, want invalid", o, err)
		}
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
