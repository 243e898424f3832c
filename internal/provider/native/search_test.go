package native

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	airlock "github.com/airlockhq/airlock"
)

// engineServer serves one answer per engine path (/ddg, /brave, /bing).
type answer struct {
	status int
	body   string
	header map[string]string
}

func fixture(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "search", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// newEngines starts a loopback server answering each engine's path and
// returns a Search pointed at it and the Doer that reaches it.
func newEngines(t *testing.T, answers map[string]answer) (*Search, *searchDoer) {
	t.Helper()
	mux := http.NewServeMux()
	for path, a := range answers {
		mux.HandleFunc("/"+path, func(w http.ResponseWriter, r *http.Request) {
			for k, v := range a.header {
				w.Header().Set(k, v)
			}
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.WriteHeader(a.status)
			w.Write([]byte(a.body))
		})
	}
	d := newSearchDoer(t, mux)
	s := &Search{DDGURL: d.Server.URL + "/ddg", BraveURL: d.Server.URL + "/brave", BingURL: d.Server.URL + "/bing"}
	return s, d
}

func paths(reqs []airlock.HTTPRequest) []string {
	var out []string
	for _, r := range reqs {
		u, _ := url.Parse(r.URL)
		out = append(out, r.Method+" "+u.Path)
	}
	return out
}

func TestSearchCascadeMovesPastWalls(t *testing.T) {
	s, d := newEngines(t, map[string]answer{
		"ddg":   {status: 202, body: fixture(t, "ddg_challenge.html")},
		"brave": {status: 429, body: rateLimitText, header: map[string]string{"Retry-After": "5"}},
		"bing":  {status: 200, body: fixture(t, "bing_2020_test_keyword.html")},
	})
	got, err := s.Search(context.Background(), d, airlock.SearchRequest{Query: "test keyword"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 6 {
		t.Fatalf("got %d results, want 6: %+v", len(got), got)
	}
	for i, r := range got {
		if r.Engine != EngineBing || r.Rank != i+1 {
			t.Errorf("result %d: engine %q rank %d", i, r.Engine, r.Rank)
		}
	}
	if want := []string{"POST /ddg", "GET /brave", "GET /bing"}; !slices.Equal(paths(d.Requests()), want) {
		t.Errorf("requests = %v, want %v", paths(d.Requests()), want)
	}
	for _, r := range d.Requests() {
		if r.TLSProfile != "chrome" {
			t.Errorf("%s: TLSProfile = %q, want chrome", r.URL, r.TLSProfile)
		}
	}
}

func TestSearchRequestsLookLikeTheBrowser(t *testing.T) {
	var ddgForm url.Values
	var ddgHeader http.Header
	var braveQuery, bingQuery url.Values
	mux := http.NewServeMux()
	mux.HandleFunc("POST /ddg", func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		ddgForm, ddgHeader = r.PostForm, r.Header.Clone()
		w.Write([]byte(noResultsPage))
	})
	mux.HandleFunc("GET /brave", func(w http.ResponseWriter, r *http.Request) {
		braveQuery = r.URL.Query()
		w.Write([]byte(noResultsPage))
	})
	mux.HandleFunc("GET /bing", func(w http.ResponseWriter, r *http.Request) {
		bingQuery = r.URL.Query()
		w.Write([]byte(noResultsPage))
	})
	d := newSearchDoer(t, mux)
	s := &Search{DDGURL: d.Server.URL + "/ddg", BraveURL: d.Server.URL + "/brave", BingURL: d.Server.URL + "/bing"}
	got, err := s.Search(context.Background(), d, airlock.SearchRequest{Query: "  go & rust  ", Proxy: "corp"})
	if err != nil || got == nil || len(got) != 0 {
		t.Fatalf("Search = %v, %v; want an empty non-nil slice and no error", got, err)
	}
	if ddgForm.Get("q") != "go & rust" || !ddgForm.Has("b") || !ddgForm.Has("kl") {
		t.Errorf("DuckDuckGo form = %v", ddgForm)
	}
	if ct := ddgHeader.Get("Content-Type"); ct != "application/x-www-form-urlencoded" {
		t.Errorf("DuckDuckGo Content-Type = %q", ct)
	}
	if o := ddgHeader.Get("Origin"); o != d.Server.URL {
		t.Errorf("DuckDuckGo Origin = %q, want %q", o, d.Server.URL)
	}
	if braveQuery.Get("q") != "go & rust" || braveQuery.Get("source") != "web" {
		t.Errorf("Brave query = %v", braveQuery)
	}
	if bingQuery.Get("q") != "go & rust" {
		t.Errorf("Bing query = %v", bingQuery)
	}
	for _, r := range d.Requests() {
		if r.Proxy != "corp" {
			t.Errorf("%s: Proxy = %q, want the request's proxy", r.URL, r.Proxy)
		}
	}
}

func TestSearchFirstNonEmptyWins(t *testing.T) {
	s, d := newEngines(t, map[string]answer{
		"ddg":   {status: 200, body: fixture(t, "ddg_foo.html")},
		"brave": {status: 200, body: fixture(t, "brave_rust.html")},
		"bing":  {status: 200, body: fixture(t, "bing_ck.html")},
	})
	got, err := s.Search(context.Background(), d, airlock.SearchRequest{Query: "foo", Limit: 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0].Engine != EngineDDG || got[2].Rank != 3 {
		t.Fatalf("got %+v", got)
	}
	if want := []string{"POST /ddg"}; !slices.Equal(paths(d.Requests()), want) {
		t.Errorf("requests = %v, want %v", paths(d.Requests()), want)
	}
}

func TestSearchDefaultLimitAndDedupe(t *testing.T) {
	s, d := newEngines(t, map[string]answer{"bing": {status: 200, body: fixture(t, "bing_ck.html")}})
	got, err := s.Search(context.Background(), d, airlock.SearchRequest{Query: "effective go", Engine: EngineBing})
	if err != nil {
		t.Fatal(err)
	}
	var urls []string
	for _, r := range got {
		urls = append(urls, r.URL)
	}
	want := []string{"https://go.dev/doc/effective_go", "https://pkg.go.dev/net/http?tab=doc", "https://en.wikipedia.org/wiki/Go_(programming_language)"}
	if !slices.Equal(urls, want) {
		t.Errorf("urls = %v, want %v", urls, want)
	}

	s, d = newEngines(t, map[string]answer{"ddg": {status: 200, body: fixture(t, "ddg_foo.html")}})
	got, err = s.Search(context.Background(), d, airlock.SearchRequest{Query: "foo", Engine: EngineDDG})
	if err != nil || len(got) != DefaultSearchLimit {
		t.Errorf("default limit: %d results, %v; want %d", len(got), err, DefaultSearchLimit)
	}
}

func TestSearchForcedEngine(t *testing.T) {
	s, d := newEngines(t, map[string]answer{
		"ddg":   {status: 200, body: fixture(t, "ddg_foo.html")},
		"brave": {status: 200, body: fixture(t, "brave_rust.html")},
	})
	got, err := s.Search(context.Background(), d, airlock.SearchRequest{Query: "rust", Engine: EngineBrave})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0].Engine != EngineBrave {
		t.Fatalf("got %+v", got)
	}
	if want := []string{"GET /brave"}; !slices.Equal(paths(d.Requests()), want) {
		t.Errorf("requests = %v, want %v", paths(d.Requests()), want)
	}

	// A forced engine's wall is returned as is.
	s, d = newEngines(t, map[string]answer{"ddg": {status: 202, body: fixture(t, "ddg_challenge.html")}})
	_, err = s.Search(context.Background(), d, airlock.SearchRequest{Query: "rust", Engine: EngineDDG})
	var se *SearchError
	if !errors.As(err, &se) || se.Reason != airlock.ReasonBotWall || se.Engine != EngineDDG {
		t.Fatalf("err = %v, want a DuckDuckGo bot wall", err)
	}
}

func TestSearchEveryEngineWalled(t *testing.T) {
	s, d := newEngines(t, map[string]answer{
		"ddg":   {status: 202, body: fixture(t, "ddg_challenge.html")},
		"brave": {status: 200, body: braveCaptchaPage},
		"bing":  {status: 200, body: bingCaptchaPage},
	})
	_, err := s.Search(context.Background(), d, airlock.SearchRequest{Query: "datacenter"})
	var ce *CascadeError
	if !errors.As(err, &ce) || len(ce.Errs) != 3 {
		t.Fatalf("err = %v, want a CascadeError of 3", err)
	}
	if airlock.CodeOf(err) != airlock.CodeUpstream || airlock.ReasonOf(err) != airlock.ReasonBotWall {
		t.Errorf("code, reason = %q, %q; want upstream, bot_wall", airlock.CodeOf(err), airlock.ReasonOf(err))
	}
	var se *SearchError
	if !errors.As(err, &se) || se.Engine != EngineDDG {
		t.Errorf("errors.As SearchError = %+v", se)
	}
	for _, e := range []string{"search ddg: bot wall (captcha)", "search brave: bot wall (captcha)", "search bing: bot wall (captcha)"} {
		if !strings.Contains(err.Error(), e) {
			t.Errorf("message %q lacks %q", err, e)
		}
	}
	if airlock.ExitCode(err) != 4 {
		t.Errorf("ExitCode = %d, want 4", airlock.ExitCode(err))
	}
}

// TestSearchDoerErrorMovesOn: a refused or failed request to one engine
// (the Doer's own typed error) moves on; its classification is kept.
func TestSearchDoerErrorMovesOn(t *testing.T) {
	s, d := newEngines(t, map[string]answer{"brave": {status: 200, body: fixture(t, "brave_rust.html")}, "bing": {status: 500, body: plainHTML}})
	denied := airlock.Errorf(airlock.CodeDenied, "deny_list", "egress: host denied")
	d.Fail = func(r *airlock.HTTPRequest) error {
		if u, _ := url.Parse(r.URL); u.Path == "/ddg" {
			return denied
		}
		return nil
	}
	got, err := s.Search(context.Background(), d, airlock.SearchRequest{Query: "rust"})
	if err != nil || len(got) != 3 {
		t.Fatalf("Search = %d results, %v", len(got), err)
	}

	s.Engines = []string{EngineDDG, EngineBing}
	_, err = s.Search(context.Background(), d, airlock.SearchRequest{Query: "rust"})
	if !errors.Is(err, denied) || airlock.CodeOf(err) != airlock.CodeDenied {
		t.Errorf("err = %v (code %q), want the denial first", err, airlock.CodeOf(err))
	}
	var se *SearchError
	if !errors.As(err, &se) || se.Reason != airlock.ReasonHTTPStatus || se.Status != 500 {
		t.Errorf("Bing's failure = %+v, want http_status 500", se)
	}
}

func TestSearchInvalid(t *testing.T) {
	s, d := newEngines(t, nil)
	for _, req := range []airlock.SearchRequest{
		{Query: "   "},
		{Query: "x", Engine: "google"},
		{Query: "x", Engine: "brave-api"},
	} {
		_, err := s.Search(context.Background(), d, req)
		if airlock.CodeOf(err) != airlock.CodeInvalid {
			t.Errorf("Search(%+v) = %v, want code invalid", req, err)
		}
	}
	if n := len(d.Requests()); n != 0 {
		t.Errorf("%d requests sent for invalid searches", n)
	}
	bad := &Search{DDGURL: "not a url"}
	if _, err := bad.Search(context.Background(), d, airlock.SearchRequest{Query: "x", Engine: EngineDDG}); airlock.CodeOf(err) != airlock.CodeInvalid {
		t.Errorf("bad endpoint: %v", err)
	}
}

func TestSearchCanceled(t *testing.T) {
	s, d := newEngines(t, map[string]answer{"ddg": {status: 200, body: noResultsPage}})
	ctx, cancel := context.WithCancel(context.Background())
	d.Fail = func(*airlock.HTTPRequest) error { cancel(); return context.Canceled }
	_, err := s.Search(ctx, d, airlock.SearchRequest{Query: "x"})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if n := len(d.Requests()); n != 1 {
		t.Errorf("%d requests after cancellation, want 1", n)
	}
}

// TestSearchCapabilities: the declared verbs match the interfaces.
func TestSearchCapabilities(t *testing.T) {
	checkCapabilities(t, &Search{})
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
