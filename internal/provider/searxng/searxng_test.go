package searxng

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

	airlock "github.com/airlockhq/airlock"
	"github.com/google/go-cmp/cmp"

	"github.com/airlockhq/airlock/internal/provider/apiutil"
)

const (
	canaryUser     = "searx-user"
	canaryPassword = "canary-s3arx-b4c0"
	canaryToken    = "tok-0123456789abcdef"
)

// fakeInstance is a SearXNG instance under /searx with Basic auth and
// format=json enabled. Its answers follow the JSON format of
// https://docs.searxng.org/dev/search_api.html (searx/webapp.py): query,
// number_of_results, results[] (url, title, content, engine, engines,
// score, category, positions, parsed_url, template, publishedDate),
// answers, corrections, infoboxes, suggestions, unresponsive_engines.
type fakeInstance struct {
	t            *testing.T
	perPage      int
	total        int
	dupAcross    bool // page 2 repeats the last result of page 1
	unresponsive [][]string
	noJSON       bool
	queries      []string
}

func (f *fakeInstance) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/searx/search" {
		http.NotFound(w, r)
		return
	}
	f.queries = append(f.queries, r.URL.RawQuery)
	if u, pw, ok := r.BasicAuth(); !ok || u != canaryUser || pw != canaryPassword {
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, "<html>401 Unauthorized: bad credentials %q %q (%s)</html>", u, pw, r.URL.RawQuery)
		return
	}
	q := r.URL.Query()
	if q.Get("format") != "json" || f.noJSON {
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprint(w, "<html><head><title>403 Forbidden</title></head><body><h1>Forbidden</h1></body></html>")
		return
	}
	pageno, _ := strconv.Atoi(q.Get("pageno"))
	if pageno == 0 {
		pageno = 1
	}
	var results []map[string]any
	first := (pageno-1)*f.perPage + 1
	if f.dupAcross && pageno > 1 {
		first--
	}
	for i := first; i <= min(f.total, pageno*f.perPage); i++ {
		engine := []string{"google", "duckduckgo", "brave"}[i%3]
		results = append(results, map[string]any{
			"url":           fmt.Sprintf("https://example.com/%d", i),
			"title":         fmt.Sprintf("Result %d", i),
			"content":       fmt.Sprintf("Snippet\n %d.", i),
			"engine":        engine,
			"engines":       []string{engine},
			"score":         1.0 / float64(i),
			"category":      "general",
			"positions":     []int{i},
			"parsed_url":    []string{"https", "example.com", fmt.Sprintf("/%d", i), "", "", ""},
			"template":      "default.html",
			"publishedDate": nil,
		})
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{
		"query":                q.Get("q"),
		"number_of_results":    0,
		"results":              results,
		"answers":              []any{},
		"corrections":          []any{},
		"infoboxes":            []any{},
		"suggestions":          []string{"airlock sandboxes"},
		"unresponsive_engines": f.unresponsive,
	})
}

func newProvider(t *testing.T, f *fakeInstance, opts Options) (*Provider, *testDoer) {
	t.Helper()
	d := newTestDoer(t, f)
	if opts.URL == "" {
		opts.URL = strings.Replace(d.Server.URL, "http://", "http://"+canaryUser+":"+canaryPassword+"@", 1) + "/searx/?token=" + canaryToken + "&safesearch=0"
	}
	p, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return p, d
}

func TestSearch(t *testing.T) {
	f := &fakeInstance{t: t, perPage: 4, total: 6, dupAcross: true}
	p, d := newProvider(t, f, Options{Language: "en"})
	got, err := p.Search(context.Background(), d, airlock.SearchRequest{Query: "airlock", Limit: 6, Proxy: "corp"})
	if err != nil {
		t.Fatal(err)
	}
	var want []airlock.SearchResult
	for i := 1; i <= 6; i++ {
		want = append(want, airlock.SearchResult{
			Title: fmt.Sprintf("Result %d", i), URL: fmt.Sprintf("https://example.com/%d", i),
			Snippet: fmt.Sprintf("Snippet %d.", i), Engine: "searxng:" + []string{"google", "duckduckgo", "brave"}[i%3], Rank: i,
		})
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Search (-want +got):\n%s", diff)
	}
	wantQ := []string{
		"format=json&language=en&q=airlock&safesearch=0&token=" + canaryToken,
		"format=json&language=en&pageno=2&q=airlock&safesearch=0&token=" + canaryToken,
	}
	if !slices.Equal(f.queries, wantQ) {
		t.Errorf("queries = %q, want %q", f.queries, wantQ)
	}
	for _, r := range d.Requests() {
		if strings.Contains(r.URL, "@") || r.TLSProfile != TLSProfile || r.Proxy != "corp" {
			t.Errorf("request %s: profile %q proxy %q (userinfo must move to a header)", r.URL, r.TLSProfile, r.Proxy)
		}
	}

	// The default limit needs one page here.
	f = &fakeInstance{t: t, perPage: 20, total: 30}
	p, d = newProvider(t, f, Options{})
	got, err = p.Search(context.Background(), d, airlock.SearchRequest{Query: "q"})
	if err != nil || len(got) != DefaultLimit || len(f.queries) != 1 {
		t.Errorf("default: %d results in %d requests, %v", len(got), len(f.queries), err)
	}

	// Fewer results than the limit: stop at the first page that adds nothing.
	f = &fakeInstance{t: t, perPage: 5, total: 3}
	p, d = newProvider(t, f, Options{})
	got, err = p.Search(context.Background(), d, airlock.SearchRequest{Query: "q", Limit: 50})
	if err != nil || len(got) != 3 || len(f.queries) != 2 {
		t.Errorf("short: %d results in %d requests, %v", len(got), len(f.queries), err)
	}
}

func TestCredentialRedacted(t *testing.T) {
	f := &fakeInstance{t: t, perPage: 5, total: 5}
	d := newTestDoer(t, f)
	// Wrong user, right password and token: the instance echoes them all.
	url := strings.Replace(d.Server.URL, "http://", "http://someone:"+canaryPassword+"@", 1) + "/searx?token=" + canaryToken
	p, err := New(Options{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Search(context.Background(), d, airlock.SearchRequest{Query: "q"})
	if airlock.CodeOf(err) != airlock.CodeUnavailable || airlock.ReasonOf(err) != airlock.ReasonProviderAuth {
		t.Fatalf("err = %v, want unavailable provider_auth", err)
	}
	for _, sec := range []string{canaryPassword, canaryToken} {
		if strings.Contains(err.Error(), sec) {
			t.Errorf("error %q contains %q", err, sec)
		}
	}
	if !strings.Contains(err.Error(), apiutil.Redacted) {
		t.Errorf("error %q: nothing redacted", err)
	}

	inner := airlock.Errorf(airlock.CodeDenied, "loopback", "egress: %s refused", url)
	d.Fail = func(*airlock.HTTPRequest) error { return inner }
	_, err = p.Search(context.Background(), d, airlock.SearchRequest{Query: "q"})
	if !errors.Is(err, inner) || airlock.CodeOf(err) != airlock.CodeDenied || strings.Contains(err.Error(), canaryPassword) || strings.Contains(err.Error(), canaryToken) {
		t.Errorf("transport error = %v", err)
	}
}

func TestErrors(t *testing.T) {
	p, d := newProvider(t, &fakeInstance{t: t, noJSON: true}, Options{})
	_, err := p.Search(context.Background(), d, airlock.SearchRequest{Query: "q"})
	var e *Error
	if !errors.As(err, &e) || e.Status != 403 || airlock.ReasonOf(err) != airlock.ReasonProviderAuth || !strings.Contains(err.Error(), "format=json") {
		t.Errorf("403: %v", err)
	}

	p, d = newProvider(t, &fakeInstance{t: t, perPage: 5, total: 0, unresponsive: [][]string{{"google", "CAPTCHA"}, {"brave", "timeout"}}}, Options{})
	_, err = p.Search(context.Background(), d, airlock.SearchRequest{Query: "q"})
	if airlock.CodeOf(err) != airlock.CodeUpstream || airlock.ReasonOf(err) != airlock.ReasonBotWall || !strings.Contains(err.Error(), "google (CAPTCHA), brave (timeout)") {
		t.Errorf("unresponsive: %v", err)
	}
	p, d = newProvider(t, &fakeInstance{t: t, perPage: 5, total: 0, unresponsive: [][]string{{"brave", "timeout"}}}, Options{})
	_, err = p.Search(context.Background(), d, airlock.SearchRequest{Query: "q"})
	if airlock.ReasonOf(err) != airlock.ReasonProviderError {
		t.Errorf("unresponsive, timeout: %v", err)
	}
	p, d = newProvider(t, &fakeInstance{t: t, perPage: 5, total: 0}, Options{})
	got, err := p.Search(context.Background(), d, airlock.SearchRequest{Query: "q"})
	if err != nil || got == nil || len(got) != 0 {
		t.Errorf("no results: %v, %v", got, err)
	}

	for _, tt := range []struct {
		status int
		code   airlock.Code
		reason airlock.Reason
	}{{429, airlock.CodeRateLimited, airlock.ReasonRateLimited}, {500, airlock.CodeUpstream, airlock.ReasonHTTPStatus}, {200, airlock.CodeUpstream, airlock.ReasonProviderError}} {
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", "3")
			w.WriteHeader(tt.status)
			fmt.Fprint(w, "<html>not json</html>")
		})
		d := newTestDoer(t, h)
		p, err := New(Options{URL: d.Server.URL})
		if err != nil {
			t.Fatal(err)
		}
		_, err = p.Search(context.Background(), d, airlock.SearchRequest{Query: "q"})
		if airlock.CodeOf(err) != tt.code || airlock.ReasonOf(err) != tt.reason {
			t.Errorf("HTTP %d: %v, want %q %q", tt.status, err, tt.code, tt.reason)
		}
	}

	for _, o := range []Options{{}, {URL: "searx.example"}, {URL: "ftp://searx.example"}} {
		if _, err := New(o); airlock.CodeOf(err) != airlock.CodeInvalid {
			t.Errorf("New(%+v) = %v, want invalid", o, err)
		}
	}
	if _, err := p.Search(context.Background(), d, airlock.SearchRequest{Query: "\t"}); airlock.CodeOf(err) != airlock.CodeInvalid {
		t.Errorf("empty query: %v", err)
	}
}

func TestCapabilities(t *testing.T) {
	p, err := New(Options{URL: "https://searx.example"})
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
