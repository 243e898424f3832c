package api

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/api/contracttest"
)

// The contract: every request the API tests send and every response they
// get is checked against the served OpenAPI document (package
// contracttest says how); validating wraps the handler of every test
// server.

var (
	contractOnce sync.Once
	contractDoc  *contracttest.Contract
	contractErr  error
)

// servedContract compiles the document the server serves (openapiJSON).
func servedContract() (*contracttest.Contract, error) {
	contractOnce.Do(func() { contractDoc, contractErr = contracttest.New(openapiJSON) })
	return contractDoc, contractErr
}

// validating wraps h for a test server: a mismatch fails t.
func validating(t testing.TB, h http.Handler) http.Handler {
	t.Helper()
	k, err := servedContract()
	if err != nil {
		t.Fatalf("openapi.json does not compile: %v", err)
	}
	return k.Handler(t, h)
}

// TestContractValidatorFails: the checker reports a response that does not
// match its schema (with the instance's JSON pointer), an undocumented
// status or media type, and a request the document refuses that the
// server took; and stays quiet on a matching exchange.
func TestContractValidatorFails(t *testing.T) {
	t.Parallel()
	k, err := servedContract()
	if err != nil {
		t.Fatal(err)
	}
	pb, err := json.Marshal(airlock.Page{URL: "http://127.0.0.1/", RequestedURL: "http://127.0.0.1/", Status: 200, ContentType: "text/html",
		FetchedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), Provider: "direct", Text: "hi", Markdown: "hi", DecisionID: "d1"})
	if err != nil {
		t.Fatal(err)
	}
	page := string(pb)
	errBody := `{"error":{"code":"invalid","reason":"body","message":"m","decision_id":""}}`
	fcErr := `{"success":false,"error":"m","code":"denied","details":{"error":{"code":"denied","reason":"policy","message":"m","decision_id":"d1"}}}`
	for _, c := range []struct {
		name        string
		method      string
		path        string
		reqBody     string
		status      int
		contentType string
		body        string
		want        string // in the report; "" for none
	}{
		{"a page", "POST", "/api/browse", `{"verb":"fetch","url":"http://127.0.0.1/"}`, 200, "application/json", page, ""},
		{"an error", "POST", "/api/browse", `{"verb":"fetch","url":"http://127.0.0.1/"}`, 400, "application/json", errBody, ""},
		{"a field of the wrong type", "POST", "/api/browse", `{"verb":"fetch","url":"http://127.0.0.1/"}`, 200, "application/json",
			strings.Replace(page, `"status":200`, `"status":"200"`, 1), `"/status"`},
		{"an unknown field", "POST", "/api/browse", `{"verb":"fetch","url":"http://127.0.0.1/"}`, 200, "application/json",
			strings.Replace(page, `{`, `{"bogus":1,`, 1), "bogus"},
		{"an error without its code", "GET", "/api/crawls", "", 400, "application/json", `{"error":{"reason":"r","message":"m","decision_id":""}}`, "code"},
		{"an error with the wrong code for its status", "GET", "/api/crawls", "", 400, "application/json",
			`{"error":{"code":"denied","reason":"r","message":"m","decision_id":""}}`, `at "/error/code"`},
		{"json lines", "POST", "/api/browse", `{"verb":"fetch","url":"http://127.0.0.1/","as":"jsonl"}`, 200, "application/x-ndjson", page + "\n" + page + "\n", ""},
		{"a json line of the wrong shape", "POST", "/api/browse", `{"verb":"fetch","url":"http://127.0.0.1/","as":"jsonl"}`, 200, "application/x-ndjson",
			page + "\n" + strings.Replace(page, `"status":200`, `"status":true`, 1) + "\n", `line 2: at "/status"`},
		{"a query parameter the document does not name, taken", "GET", "/api/crawls?bogus=1", "", 200, "application/json", `{"jobs":[]}`, `query parameter "bogus" is not documented`},
		{"a query parameter out of its bounds, taken", "GET", "/api/crawls?limit=501", "", 200, "application/json", `{"jobs":[]}`, `limit="501"`},
		{"a query parameter of the wrong type, taken", "DELETE", "/api/browser/sessions/bs_1?wipe=yes", "", 204, "", "", `wipe="yes"`},
		{"documented query parameters", "GET", "/api/crawls/j1?after=3&limit=10", "", 400, "application/json", errBody, ""},
		{"an undocumented status", "GET", "/api/crawls", "", 418, "application/json", errBody, "status 418 is not documented"},
		{"an undocumented media type", "GET", "/api/crawls", "", 200, "text/html", "<p>", "text/html"},
		{"a request the document refuses, taken", "POST", "/api/browse", `{"verb":"fetch","url":"http://127.0.0.1/","bogus":true}`, 200, "application/json", page, "refuses the request"},
		{"a request the document refuses, refused", "POST", "/api/browse", `{"verb":"fetch","url":"http://127.0.0.1/","bogus":true}`, 400, "application/json", errBody, ""},
		{"an event stream", "GET", "/api/crawls/j1/events", "", 200, "text/event-stream",
			": hi\n\nevent: progress\ndata: {\"done\":1,\"queued\":0,\"failed\":0,\"rate\":0.5}\n\n", ""},
		{"an event of the wrong shape", "GET", "/api/crawls/j1/events", "", 200, "text/event-stream",
			"event: progress\ndata: {\"done\":\"1\",\"queued\":0,\"failed\":0,\"rate\":0.5}\n\n", `at "/done"`},
		{"an undocumented event", "GET", "/api/crawls/j1/events", "", 200, "text/event-stream",
			"event: surprise\ndata: {}\n\n", "does not name this event"},
		{"an unknown route's answer", "GET", "/nope", "", 404, "application/json", `{"error":{}}`, "error body"},
		{"a Firecrawl error", "POST", "/v2/scrape", `{"url":"http://127.0.0.1/"}`, 403, "application/json", fcErr, ""},
		{"a Firecrawl error in the native shape", "POST", "/v2/scrape", `{"url":"http://127.0.0.1/"}`, 403, "application/json", errBody, `at ""`},
		{"a Firecrawl error with the wrong code for its status", "POST", "/v2/scrape", `{"url":"http://127.0.0.1/"}`, 400, "application/json", fcErr, `at "/code"`},
		{"a Firecrawl document with an unknown field", "POST", "/v2/scrape", `{"url":"http://127.0.0.1/"}`, 200, "application/json",
			`{"success":true,"data":{"metadata":{"sourceURL":"u","url":"u","contentType":"text/html"},"bogus":1}}`, "bogus"},
		{"a Firecrawl request with an unknown field, taken", "POST", "/v2/scrape", `{"url":"http://127.0.0.1/","fomats":["markdown"]}`, 200, "application/json",
			`{"success":true,"data":{"metadata":{"sourceURL":"u","url":"u","contentType":"text/html"}}}`, "refuses the request"},
		{"an unknown Firecrawl route's answer in Firecrawl's shape", "POST", "/v2/extract", "{}", 404, "application/json",
			strings.ReplaceAll(fcErr, "denied", "not_found"), ""},
		{"an unknown Firecrawl route's answer in the native shape", "POST", "/v2/extract", "{}", 404, "application/json", errBody, "error body"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var got []string
			cc := k.Checker(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", c.contentType)
				w.WriteHeader(c.status)
				io.WriteString(w, c.body)
			}), func(format string, args ...any) {
				got = append(got, fmt.Sprintf(format, args...))
			})
			var rd io.Reader
			if c.reqBody != "" {
				rd = strings.NewReader(c.reqBody)
			}
			req := httptest.NewRequest(c.method, c.path, rd)
			if rd != nil {
				req.Header.Set("Content-Type", "application/json")
			}
			cc.ServeHTTP(httptest.NewRecorder(), req)
			report := strings.Join(got, "\n")
			switch {
			case c.want == "" && report != "":
				t.Errorf("reported a matching exchange:\n%s", report)
			case c.want != "" && !strings.Contains(report, c.want):
				t.Errorf("report %q lacks %q", report, c.want)
			}
		})
	}
}

// TestBrowseSchemasUnambiguous: issue #17's report. Each verb's request,
// with options (even {}), and each of /api/browse's four JSON answers
// validate against the served document: before, their oneOf branches
// overlapped (no required fields, open objects), so none did.
func TestBrowseSchemasUnambiguous(t *testing.T) {
	t.Parallel()
	k, err := servedContract()
	if err != nil {
		t.Fatal(err)
	}
	const op = "/paths/~1api~1browse/post"
	for _, body := range []string{
		`{"verb":"fetch","url":"http://127.0.0.1/","options":{}}`,
		`{"verb":"fetch","urls":["http://127.0.0.1/a","http://127.0.0.1/b"],"options":{"cache":true},"as":"md"}`,
		`{"verb":"crawl","seed":"http://127.0.0.1/","options":{}}`,
		`{"verb":"crawl","urls":["http://127.0.0.1/"],"options":{"max_pages":3,"timeout":"5s"}}`,
		`{"verb":"search","query":"airlock","options":{}}`,
		`{"verb":"search","query":"airlock","options":{"limit":3}}`,
	} {
		if err := k.CheckRequest(op, "application/json", []byte(body)); err != nil {
			t.Errorf("request %s: %v", body, err)
		}
	}
	// The document refuses what the server refuses: options of another
	// verb, a target of another verb, both url and urls.
	for _, body := range []string{
		`{"verb":"fetch","url":"http://127.0.0.1/","options":{"max_pages":3}}`,
		`{"verb":"search","query":"q","options":{"cache":true}}`,
		`{"verb":"crawl","seed":"http://127.0.0.1/","query":"q"}`,
		`{"verb":"fetch","url":"http://127.0.0.1/","urls":["http://127.0.0.1/"]}`,
		`{"verb":"fetch"}`,
		`{"verb":"browse","url":"http://127.0.0.1/"}`,
	} {
		if err := k.CheckRequest(op, "application/json", []byte(body)); err == nil {
			t.Errorf("request %s: valid, want refused", body)
		}
	}
	page := airlock.Page{URL: "http://127.0.0.1/", RequestedURL: "http://127.0.0.1/", Status: 200, ContentType: "text/html",
		FetchedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), Provider: "native", Text: "hi", DecisionID: "d1"}
	mustJSON := func(v any) []byte {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	both := fetchManyResponse{Results: []airlock.FetchResult{{URL: page.URL, Page: &page, Error: &airlock.Error{Code: airlock.CodeDenied}}}, DecisionID: "d1"}
	if _, err := k.CheckResponse(op, 200, "application/json", mustJSON(both)); err == nil {
		t.Errorf("a batch result with a page and an error validates")
	}
	for name, body := range map[string][]byte{
		"page":       mustJSON(page),
		"fetch many": mustJSON(fetchManyResponse{Results: []airlock.FetchResult{{URL: page.URL, Page: &page}, {URL: "http://127.0.0.1/x", Error: &airlock.Error{Code: airlock.CodeDenied, Reason: "private", Message: "m"}}}, DecisionID: "d1"}),
		"crawl":      mustJSON(map[string]any{"pages": []airlock.Page{page}, "summary": airlock.CrawlSummary{Pages: 1, DecisionID: "d1"}}),
		"search":     mustJSON(map[string]any{"query": "q", "results": []airlock.SearchResult{{Title: "t", URL: "http://127.0.0.1/", Engine: "e", Rank: 1}}}),
	} {
		if _, err := k.CheckResponse(op, 200, "application/json", body); err != nil {
			t.Errorf("%s answer: %v", name, err)
		}
	}
}
