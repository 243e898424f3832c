package dataforseo

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	airlock "github.com/airlockhq/airlock"
	"github.com/google/go-cmp/cmp"

	"github.com/airlockhq/airlock/internal/provider/apiutil"
)

// The canary credential: tests make the fake API echo it back and check
// that it never comes out of the provider.
const (
	canaryLogin    = "airlock-login"
	canaryPassword = "canary-Pa55w0rd-7f3e9b"
	canaryAuth     = canaryLogin + ":" + canaryPassword
)

var canaryToken = base64.StdEncoding.EncodeToString([]byte(canaryAuth))

// liveAnswer is a Live Google Organic SERP Regular answer in the shape of the
// API reference (https://docs.dataforseo.com/v3/serp/google/organic/live/regular/):
// the envelope (version, status_code, status_message, time, cost,
// tasks_count, tasks_error), one task with its data echo, one result with
// check_url, item_types and items of several types. Items are out of order
// and one organic URL repeats, to test ordering and deduplication.
const liveAnswer = `{
  "version": "0.1.20250526",
  "status_code": 20000,
  "status_message": "Ok.",
  "time": "5.1253 sec.",
  "cost": 0.002,
  "tasks_count": 1,
  "tasks_error": 0,
  "tasks": [{
    "id": "06021512-1535-0139-0000-5a2a8b5f05cc",
    "status_code": 20000,
    "status_message": "Ok.",
    "time": "5.0524 sec.",
    "cost": 0.002,
    "result_count": 1,
    "path": ["v3", "serp", "google", "organic", "live", "regular"],
    "data": {"api": "serp", "function": "live", "se": "google", "se_type": "organic",
             "keyword": "airlock sandbox", "location_code": 2840, "language_code": "en", "depth": 10,
             "device": "desktop", "os": "windows"},
    "result": [{
      "keyword": "airlock sandbox",
      "type": "organic",
      "se_domain": "google.com",
      "location_code": 2840,
      "language_code": "en",
      "check_url": "https://www.google.com/search?q=airlock%20sandbox&num=10&hl=en&gl=US",
      "datetime": "2025-06-02 12:15:35 +00:00",
      "spell": null,
      "refinement_chips": null,
      "item_types": ["paid", "organic", "people_also_ask"],
      "se_results_count": 1350000,
      "items_count": 5,
      "items": [
        {"type": "organic", "rank_group": 2, "rank_absolute": 3, "domain": "example.org",
         "title": "Second organic", "description": "The  second\n result.",
         "url": "https://example.org/second", "breadcrumb": "https://example.org › second"},
        {"type": "paid", "rank_group": 1, "rank_absolute": 1, "domain": "ads.example",
         "title": "An ad", "description": "Buy now", "url": "https://ads.example/"},
        {"type": "organic", "rank_group": 1, "rank_absolute": 2, "domain": "example.com",
         "title": "First organic", "description": "The first result.",
         "url": "https://example.com/first", "breadcrumb": "https://example.com › first"},
        {"type": "people_also_ask", "rank_group": 1, "rank_absolute": 4, "items": []},
        {"type": "organic", "rank_group": 3, "rank_absolute": 5, "domain": "example.com",
         "title": "First organic, again", "description": "Same page.",
         "url": "https://example.com/first/", "breadcrumb": "https://example.com › first"}
      ]
    }]
  }]
}`

// fakeAPI implements the Live endpoint: it checks the Basic credential
// and the task, then answers with answer (or an error envelope).
type fakeAPI struct {
	t      *testing.T
	status int
	answer string
	header map[string]string
	got    []task
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != LivePath {
		http.NotFound(w, r)
		return
	}
	if got := r.Header.Get("Authorization"); got != "Basic "+canaryToken {
		// The real API answers 401 with its message; this one also echoes
		// what it was sent, like a careless proxy would.
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, `{"status_code":40100,"status_message":"You are not authorized to access this resource (got %s)."}`, got)
		return
	}
	body, _ := io.ReadAll(r.Body)
	var tasks []task
	if err := json.Unmarshal(body, &tasks); err != nil {
		f.t.Errorf("request body %q: %v", body, err)
	}
	f.got = append(f.got, tasks...)
	for k, v := range f.header {
		w.Header().Set(k, v)
	}
	w.Header().Set("Content-Type", "application/json")
	if f.status != 0 {
		w.WriteHeader(f.status)
	}
	io.WriteString(w, f.answer)
}

func newProvider(t *testing.T, f *fakeAPI, auth string) (*Provider, *testDoer) {
	t.Helper()
	d := newTestDoer(t, f)
	p, err := New(Options{Auth: auth, BaseURL: d.Server.URL})
	if err != nil {
		t.Fatal(err)
	}
	return p, d
}

// assertNoSecret fails when any form of the canary credential is in s.
func assertNoSecret(t *testing.T, what, s string) {
	t.Helper()
	for _, sec := range []string{canaryPassword, canaryToken, canaryAuth} {
		if strings.Contains(s, sec) {
			t.Errorf("%s contains the credential %q: %s", what, sec, s)
		}
	}
}

func TestSearch(t *testing.T) {
	f := &fakeAPI{t: t, answer: liveAnswer}
	p, d := newProvider(t, f, canaryAuth)
	got, err := p.Search(context.Background(), d, airlock.SearchRequest{Query: " airlock sandbox ", Limit: 5, Proxy: "corp"})
	if err != nil {
		t.Fatal(err)
	}
	want := []airlock.SearchResult{
		{Title: "First organic", URL: "https://example.com/first", Snippet: "The first result.", Engine: Name, Rank: 1},
		{Title: "Second organic", URL: "https://example.org/second", Snippet: "The second result.", Engine: Name, Rank: 2},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Search (-want +got):\n%s", diff)
	}
	wantTask := []task{{Keyword: "airlock sandbox", LocationCode: DefaultLocationCode, LanguageCode: DefaultLanguageCode, Depth: 10}}
	if diff := cmp.Diff(wantTask, f.got); diff != "" {
		t.Errorf("task sent (-want +got):\n%s", diff)
	}
	r := d.Requests()[0]
	if r.Method != http.MethodPost || r.TLSProfile != TLSProfile || r.Proxy != "corp" {
		t.Errorf("request = %s, profile %q, proxy %q", r.Method, r.TLSProfile, r.Proxy)
	}

	// Limit cuts, depth follows the limit.
	got, err = p.Search(context.Background(), d, airlock.SearchRequest{Query: "q", Limit: 1})
	if err != nil || len(got) != 1 || got[0].Rank != 1 {
		t.Errorf("Limit 1: %+v, %v", got, err)
	}
	got, err = p.Search(context.Background(), d, airlock.SearchRequest{Query: "q", Limit: 50})
	if err != nil || len(got) != 2 || f.got[len(f.got)-1].Depth != 50 {
		t.Errorf("Limit 50: %d results, depth %d, %v", len(got), f.got[len(f.got)-1].Depth, err)
	}
}

func TestAuthForms(t *testing.T) {
	f := &fakeAPI{t: t, answer: liveAnswer}
	for _, auth := range []string{
		canaryAuth,
		canaryToken,
		strings.TrimRight(canaryToken, "="),
		base64.URLEncoding.EncodeToString([]byte(canaryAuth)),
		"  " + canaryToken + "\n",
	} {
		p, d := newProvider(t, f, auth)
		if _, err := p.Search(context.Background(), d, airlock.SearchRequest{Query: "q"}); err != nil {
			t.Errorf("auth form %q: %v", auth, err)
		}
	}
	for _, auth := range []string{"", "   ", "no-colon-and-not-base64!", base64.StdEncoding.EncodeToString([]byte("nocolon")), ":" + canaryPassword, canaryLogin + ":"} {
		_, err := New(Options{Auth: auth})
		if airlock.CodeOf(err) != airlock.CodeInvalid || airlock.ReasonOf(err) != airlock.ReasonProviderConfig {
			t.Errorf("New(%q) = %v, want invalid provider_config", auth, err)
		}
		if err != nil {
			assertNoSecret(t, "New error", err.Error())
		}
	}
	for _, base := range []string{"ftp://x", "/relative", "https://user:pw@api.example"} {
		if _, err := New(Options{Auth: canaryAuth, BaseURL: base}); airlock.CodeOf(err) != airlock.CodeInvalid {
			t.Errorf("BaseURL %q: %v, want invalid", base, err)
		}
	}
}

// TestCredentialRedacted: a fake API that echoes the credential in its
// error body; the error must not carry it.
func TestCredentialRedacted(t *testing.T) {
	echo := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, `{"status_code":40100,"status_message":"bad credentials %s (%s)"}`, r.Header.Get("Authorization"), canaryPassword)
	})
	d := newTestDoer(t, echo)
	p, err := New(Options{Auth: canaryAuth, BaseURL: d.Server.URL})
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Search(context.Background(), d, airlock.SearchRequest{Query: "q"})
	if airlock.CodeOf(err) != airlock.CodeUnavailable || airlock.ReasonOf(err) != airlock.ReasonProviderAuth {
		t.Fatalf("err = %v, want unavailable provider_auth", err)
	}
	assertNoSecret(t, "error", err.Error())
	assertNoSecret(t, "public error", fmt.Sprint(airlock.Public(err, "")))
	if !strings.Contains(err.Error(), apiutil.Redacted) {
		t.Errorf("error %q: the echoed credential should show as %s", err, apiutil.Redacted)
	}

	// A Doer error that somehow carries the credential is redacted too,
	// and keeps its classification.
	inner := airlock.Errorf(airlock.CodeTimeout, "timeout", "fetch timed out, Authorization was %s", "Basic "+canaryToken)
	d.Fail = func(*airlock.HTTPRequest) error { return inner }
	_, err = p.Search(context.Background(), d, airlock.SearchRequest{Query: "q"})
	if !errors.Is(err, inner) || airlock.CodeOf(err) != airlock.CodeTimeout {
		t.Errorf("err = %v, want the Doer's timeout kept", err)
	}
	assertNoSecret(t, "transport error", err.Error())
}

func TestErrors(t *testing.T) {
	tests := []struct {
		name       string
		status     int
		answer     string
		header     map[string]string
		wantCode   airlock.Code
		wantReason airlock.Reason
		wantWait   time.Duration
		wantAPI    int
	}{
		{"401", 401, `{"status_code":40100,"status_message":"You are not authorized to access this resource."}`, nil, airlock.CodeUnavailable, airlock.ReasonProviderAuth, 0, 40100},
		{"403 html", 403, `<html>Forbidden</html>`, nil, airlock.CodeUnavailable, airlock.ReasonProviderAuth, 0, 0},
		{"429", 429, `{}`, map[string]string{"Retry-After": "7"}, airlock.CodeRateLimited, airlock.ReasonRateLimited, 7 * time.Second, 0},
		{"402", 402, `{"status_code":40200,"status_message":"Payment Required."}`, nil, airlock.CodeUpstream, airlock.ReasonHTTPStatus, 0, 40200},
		{"500", 500, `oops`, nil, airlock.CodeUpstream, airlock.ReasonHTTPStatus, 0, 0},
		{"200 with auth status", 200, `{"status_code":40104,"status_message":"Please verify your account before using the API.","tasks":[]}`, nil, airlock.CodeUnavailable, airlock.ReasonProviderAuth, 0, 40104},
		{"200 with rate limit", 200, `{"status_code":40202,"status_message":"Rate-limit/minute exceeded. Please contact support.","tasks":[]}`, nil, airlock.CodeRateLimited, airlock.ReasonRateLimited, 0, 40202},
		{"200 with task error", 200, `{"status_code":20000,"status_message":"Ok.","tasks":[{"status_code":40501,"status_message":"Invalid Field: 'location_code'.","result":null}]}`, nil, airlock.CodeUpstream, airlock.ReasonProviderError, 0, 40501},
		{"200 not json", 200, `<html>maintenance</html>`, nil, airlock.CodeUpstream, airlock.ReasonProviderError, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, d := newProvider(t, &fakeAPI{t: t, status: tt.status, answer: tt.answer, header: tt.header}, canaryAuth)
			_, err := p.Search(context.Background(), d, airlock.SearchRequest{Query: "q"})
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("err = %v, want *Error", err)
			}
			if airlock.CodeOf(err) != tt.wantCode || airlock.ReasonOf(err) != tt.wantReason || e.APICode != tt.wantAPI || e.Status != tt.status {
				t.Errorf("err = %v: code %q reason %q api %d; want %q %q %d", err, airlock.CodeOf(err), airlock.ReasonOf(err), e.APICode, tt.wantCode, tt.wantReason, tt.wantAPI)
			}
			if got := airlock.RetryAfter(err); got != tt.wantWait {
				t.Errorf("RetryAfter = %v, want %v", got, tt.wantWait)
			}
		})
	}
	p, d := newProvider(t, &fakeAPI{t: t, answer: liveAnswer}, canaryAuth)
	if _, err := p.Search(context.Background(), d, airlock.SearchRequest{Query: " "}); airlock.CodeOf(err) != airlock.CodeInvalid {
		t.Errorf("empty query: %v", err)
	}
	if n := len(d.Requests()); n != 0 {
		t.Errorf("%d requests for an empty query", n)
	}
}

func TestCapabilities(t *testing.T) {
	p, err := New(Options{Auth: canaryAuth})
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
