package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	sdkmcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/engine"
	"github.com/airlockhq/airlock/internal/leakcheck"
	"github.com/airlockhq/airlock/internal/provider/searxng"
	"github.com/airlockhq/airlock/internal/render"
)

// TestMain fails the package when the tests leave goroutines behind
// (engines, sessions, servers).
func TestMain(m *testing.M) {
	os.Exit(leakcheck.Main(m, "mcp", leakcheck.Options{}))
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// longText is a paragraph with multi-byte characters, so that a page cut
// by bytes instead of characters would show.
const longText = "Ünïcode wörds 日本語のテキスト and plain words about the subject, repeated to make the page long. "

// site serves a small site: / links to /a, /b and /private/x (disallowed
// by robots.txt); /long is a long page; /missing is a 404.
func site(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/robots.txt":
			fmt.Fprint(w, "User-agent: *\nDisallow: /private\n")
		case r.URL.Path == "/missing":
			http.NotFound(w, r)
		case strings.HasPrefix(r.URL.Path, "/long"):
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprintf(w, `<html lang="en"><head><title>Long page %s</title></head><body><article><h1>Long</h1>`, r.URL.Path)
			for i := range 60 {
				fmt.Fprintf(w, "<p>Paragraph %d. %s</p>\n", i, strings.Repeat(longText, 3))
			}
			fmt.Fprint(w, `</article></body></html>`)
		default:
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprintf(w, `<html lang="en"><head><title>Page %s</title></head><body><h1>Heading %s</h1><p>%s</p>
<a href="/a">a</a> <a href="/b">b</a> <a href="/private/x">private</a></body></html>`,
				r.URL.Path, r.URL.Path, strings.Repeat("Plenty of readable words on this page. ", 15))
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// searx serves the SearXNG JSON search API: n results for any query.
func searx(t testing.TB, n int) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/search" || r.URL.Query().Get("format") != "json" {
			http.NotFound(w, r)
			return
		}
		var results []map[string]any
		for i := 1; i <= n; i++ {
			results = append(results, map[string]any{
				"url":     fmt.Sprintf("https://example.com/%d", i),
				"title":   fmt.Sprintf("Result %d for %s", i, r.URL.Query().Get("q")),
				"content": fmt.Sprintf("Snippet\n number %d.", i),
				"engine":  "duckduckgo",
			})
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"query": r.URL.Query().Get("q"), "results": results})
	}))
	t.Cleanup(srv.Close)
	return srv
}

// searxngAt registers the SearXNG instance at url, as the CLI's registry
// does with browse.searxng_url: native search asks it first.
func searxngAt(url string) engine.Option {
	return engine.WithProviders(engine.Provider{Name: searxng.Name, Capabilities: []string{airlock.VerbSearch},
		New: func(func(string) string) (engine.BrowseProvider, error) {
			return searxng.New(searxng.Options{URL: url})
		}})
}

// newEngine starts an in-memory engine whose search goes to a local
// SearXNG (and whose keyless engines point at it too, so nothing leaves
// the machine), closed at the end of the test.
func newEngine(t testing.TB, cfg engine.Config) *engine.Engine {
	t.Helper()
	search := searx(t, 12)
	cfg.InMemory = true
	cfg.Browse.DuckDuckGoURL, cfg.Browse.BraveURL, cfg.Browse.BingURL = search.URL, search.URL, search.URL
	en, err := engine.New(context.Background(), cfg, engine.WithGetenv(func(string) string { return "" }), searxngAt(search.URL))
	if err != nil {
		t.Fatalf("engine.New: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := en.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return en
}

// loopback is the configuration that lets the engine reach the test
// servers.
var loopback = engine.Config{Egress: engine.EgressConfig{Exceptions: []string{"127.0.0.1"}}}

func newClient() *sdkmcp.Client {
	return sdkmcp.NewClient(&sdkmcp.Implementation{Name: "test-agent", Version: "1"}, nil)
}

// inMemory connects the SDK's client to NewServer over an in-memory pipe,
// as the engine's default principal.
func inMemory(t testing.TB, en *engine.Engine) *sdkmcp.ClientSession {
	t.Helper()
	return connectAs(t, en, en.Principal())
}

// connectAs connects the SDK's client to NewServer over an in-memory
// pipe, its tools running as p.
func connectAs(t testing.TB, en *engine.Engine, p airlock.Principal) *sdkmcp.ClientSession {
	t.Helper()
	ctx := testCtx(t)
	s := NewServer(en, func(context.Context) airlock.Principal { return p }, Options{Version: "test"})
	st, ct := sdkmcp.NewInMemoryTransports()
	ss, err := s.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := newClient().Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.Close()
		ss.Wait()
	})
	return cs
}

func call(t testing.TB, cs *sdkmcp.ClientSession, name string, args any) *sdkmcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(testCtx(t), &sdkmcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("CallTool(%s, %v): protocol error %v", name, args, err)
	}
	return res
}

func text(res *sdkmcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*sdkmcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// mustOK returns the text of a successful result.
func mustOK(t testing.TB, res *sdkmcp.CallToolResult) string {
	t.Helper()
	if res.IsError {
		t.Fatalf("tool error: %s", text(res))
	}
	return text(res)
}

// ---------------------------------------------------------------------------
// The tools, over the in-memory transport

func TestListTools(t *testing.T) {
	t.Parallel()
	cs := inMemory(t, newEngine(t, loopback))
	init := cs.InitializeResult()
	if init.ServerInfo.Name != ServerName || init.ServerInfo.Version != "test" || init.Instructions == "" || init.Capabilities.Tools == nil {
		t.Errorf("initialize: %+v", init)
	}
	res, err := cs.ListTools(testCtx(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		ToolFetch:  {"url", "format", "max_length", "start_index", "raw"},
		ToolSearch: {"query", "limit"},
		ToolCrawl:  {"seed", "urls", "max_pages", "depth", "format"},
	}
	wantRequired := map[string][]string{ToolFetch: {"url"}, ToolSearch: {"query"}, ToolCrawl: nil}
	var browse []*sdkmcp.Tool
	browserTools := 0
	for _, tool := range res.Tools {
		if strings.HasPrefix(tool.Name, "browser_") {
			browserTools++ // checked by TestBrowserTools
			continue
		}
		browse = append(browse, tool)
	}
	if len(browse) != len(want) || browserTools != 23 {
		t.Errorf("%d browse tools, want %d; %d browser tools, want 23", len(browse), len(want), browserTools)
	}
	for _, tool := range browse {
		props, ok := want[tool.Name]
		if !ok {
			t.Errorf("unexpected tool %q", tool.Name)
			continue
		}
		a := tool.Annotations
		if a == nil || !a.ReadOnlyHint || a.OpenWorldHint == nil || !*a.OpenWorldHint || a.Title == "" || tool.Title == "" {
			t.Errorf("%s: annotations %+v, title %q", tool.Name, a, tool.Title)
		}
		if len(tool.Description) < 80 {
			t.Errorf("%s: description too thin for an agent: %q", tool.Name, tool.Description)
		}
		var schema struct {
			Type       string
			Required   []string
			Properties map[string]struct {
				Type        any
				Description string
				Enum        []any
				Default     any
				Maximum     *float64
			}
		}
		b, _ := json.Marshal(tool.InputSchema)
		if err := json.Unmarshal(b, &schema); err != nil || schema.Type != "object" {
			t.Fatalf("%s: schema %s: %v", tool.Name, b, err)
		}
		if fmt.Sprint(schema.Required) != fmt.Sprint(wantRequired[tool.Name]) {
			t.Errorf("%s: required %v, want %v", tool.Name, schema.Required, wantRequired[tool.Name])
		}
		if len(schema.Properties) != len(props) {
			t.Errorf("%s: properties %s, want %v", tool.Name, b, props)
		}
		for _, p := range props {
			if len(schema.Properties[p].Description) < 20 {
				t.Errorf("%s.%s: no useful description in %s", tool.Name, p, b)
			}
			// One plain type (not ["null","array"]) that every client reads.
			if _, ok := schema.Properties[p].Type.(string); !ok {
				t.Errorf("%s.%s: type %v, want one type", tool.Name, p, schema.Properties[p].Type)
			}
		}
		// The ceilings' built-in bounds are the schema's maximums.
		for p, want := range map[string]float64{"max_length": 1000000, "limit": 100, "max_pages": 100} {
			if prop, ok := schema.Properties[p]; ok && (prop.Maximum == nil || *prop.Maximum != want) {
				t.Errorf("%s.%s: maximum %v, want %v", tool.Name, p, prop.Maximum, want)
			}
		}
		if f, ok := schema.Properties["format"]; ok && (len(f.Enum) == 0 || f.Default != "markdown") {
			t.Errorf("%s.format: enum %v default %v", tool.Name, f.Enum, f.Default)
		}
	}
}

func TestWebFetch(t *testing.T) {
	t.Parallel()
	srv := site(t)
	cs := inMemory(t, newEngine(t, loopback))
	out := mustOK(t, call(t, cs, ToolFetch, map[string]any{"url": srv.URL + "/a"}))
	// The page's own heading and URL, not a header repeating them.
	if !strings.HasPrefix(out, "# Page /a\n\n<"+srv.URL+"/a>\n\nKind: article · Language: en\n") || !strings.Contains(out, "readable words") ||
		strings.Contains(out, "truncated") || strings.Contains(out, "Content: characters") {
		t.Errorf("web_fetch /a:\n%s", out)
	}
	formats := []struct{ format, prefix string }{
		{"text", "Page /a\n" + srv.URL + "/a\nKind: article · Language: en\n\nHeading /a\nPlenty of readable words"},
		{"org", "* Page /a :source:point:\n:PROPERTIES:\n:URL: " + srv.URL + "/a\n:HOST: 127.0.0.1\n:KIND: article\n"},
		{"json", "{\n  \"url\": \"" + srv.URL + "/a\""},
		{"md", "# Page /a\n"},
	}
	for _, f := range formats {
		body := mustOK(t, call(t, cs, ToolFetch, map[string]any{"url": srv.URL + "/a", "format": f.format, "max_length": 100000}))
		if !strings.HasPrefix(body, f.prefix) {
			t.Errorf("format %s: got\n%.300s\nwant prefix %q", f.format, body, f.prefix)
		}
	}
}

var truncatedRE = regexp.MustCompile(`\n\n<content truncated: ([0-9,]+) characters remain; call web_fetch with start_index=(\d+) to continue>$`)

// TestWebFetchPaging reads a long page in parts and checks that the parts
// put together are the whole rendered page: nothing lost, nothing twice,
// every part valid UTF-8 and headed by where it is (the first by the
// page's own title and URL, the others by the URL).
func TestWebFetchPaging(t *testing.T) {
	t.Parallel()
	srv := site(t)
	en := newEngine(t, loopback)
	cs := inMemory(t, en)
	ctx := testCtx(t)
	page, err := en.Fetch(ctx, en.Principal(), airlock.FetchRequest{URL: srv.URL + "/long"})
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	if err := render.Render(&want, "md", page); err != nil {
		t.Fatal(err)
	}
	total := utf8.RuneCountInString(want.String())
	for _, maxLen := range []int{0, 777, 4999} {
		t.Run(strconv.Itoa(maxLen), func(t *testing.T) {
			step := maxLen
			if step == 0 {
				step = DefaultFetchLength
			}
			if total < 3*step {
				t.Fatalf("the page is %d characters: too short to test paging by %d", total, step)
			}
			var got strings.Builder
			start, calls := 0, 0
			for {
				args := map[string]any{"url": srv.URL + "/long"}
				if maxLen != 0 {
					args["max_length"] = maxLen
				}
				if start != 0 {
					args["start_index"] = start
				}
				out := mustOK(t, call(t, cs, ToolFetch, args))
				calls++
				header, body, ok := strings.Cut(out, "\n\n")
				wantHeader := fmt.Sprintf("Content: characters %d to %d of %s (markdown)", start, min(start+step, total), thousands(total))
				if start > 0 {
					wantHeader = "URL: " + srv.URL + "/long\n" + wantHeader
				}
				if !ok || header != wantHeader {
					t.Fatalf("header %q, want %q", header, wantHeader)
				}
				m := truncatedRE.FindStringSubmatch(body)
				if m != nil {
					body = strings.TrimSuffix(body, m[0])
				}
				if !utf8.ValidString(body) || utf8.RuneCountInString(body) > step {
					t.Fatalf("part at %d: %d characters, valid UTF-8 %v", start, utf8.RuneCountInString(body), utf8.ValidString(body))
				}
				got.WriteString(body)
				if m == nil {
					break
				}
				next, _ := strconv.Atoi(m[2])
				remain, _ := strconv.Atoi(strings.ReplaceAll(m[1], ",", ""))
				if next != start+step || remain != total-next {
					t.Fatalf("continuation start_index=%d remain=%d after start %d, want %d and %d", next, remain, start, start+step, total-start-step)
				}
				start = next
			}
			if got.String() != want.String() {
				t.Errorf("the parts put together differ from the page (%d vs %d characters)", utf8.RuneCountInString(got.String()), total)
			}
			if wantCalls := (total + step - 1) / step; calls != wantCalls {
				t.Errorf("%d calls, want %d", calls, wantCalls)
			}
		})
	}
	res := call(t, cs, ToolFetch, map[string]any{"url": srv.URL + "/long", "start_index": total})
	if !res.IsError || !strings.HasPrefix(text(res), "invalid (start_index): start_index "+strconv.Itoa(total)+" is past the end") {
		t.Errorf("start_index at the end: %v %s", res.IsError, text(res))
	}
}

func TestWebSearch(t *testing.T) {
	t.Parallel()
	cs := inMemory(t, newEngine(t, loopback))
	out := mustOK(t, call(t, cs, ToolSearch, map[string]any{"query": "airlock sandboxes", "limit": 3}))
	want := `Search results for "airlock sandboxes": 3

- Result 1 for airlock sandboxes
  URL: https://example.com/1
  Snippet number 1.

- Result 2 for airlock sandboxes
  URL: https://example.com/2
  Snippet number 2.

- Result 3 for airlock sandboxes
  URL: https://example.com/3
  Snippet number 3.
`
	if out != want {
		t.Errorf("web_search:\n%s\nwant\n%s", out, want)
	}
	out = mustOK(t, call(t, cs, ToolSearch, map[string]any{"query": "x"}))
	if n := strings.Count(out, "\n- "); n != DefaultSearchLimit {
		t.Errorf("default limit: %d results, want %d", n, DefaultSearchLimit)
	}
}

func TestWebCrawl(t *testing.T) {
	t.Parallel()
	srv := site(t)
	cs := inMemory(t, newEngine(t, loopback))
	out := mustOK(t, call(t, cs, ToolCrawl, map[string]any{"seed": srv.URL + "/"}))
	for _, want := range []string{"Crawled 3 pages from " + srv.URL + "/: 1 skipped, 0 failed", "# Page /\n", "# Page /a\n", "# Page /b\n",
		"\n---\n", "Skipped:\n- " + srv.URL + "/private/x: robots"} {
		if !strings.Contains(out, want) {
			t.Errorf("web_crawl seed: no %q in\n%s", want, out)
		}
	}
	out = mustOK(t, call(t, cs, ToolCrawl, map[string]any{"urls": []string{srv.URL + "/a", srv.URL + "/missing"}, "format": "org"}))
	if !strings.Contains(out, "Crawled 1 pages from 2 URLs: 1 skipped") || !strings.Contains(out, "#+TITLE: browse crawl — 1 pages") ||
		!strings.Contains(out, "* Page /a :source:point:") || !strings.Contains(out, srv.URL+"/missing: http_status") {
		t.Errorf("web_crawl urls org:\n%s", out)
	}
	out = mustOK(t, call(t, cs, ToolCrawl, map[string]any{"seed": srv.URL + "/", "max_pages": 1}))
	if !strings.HasPrefix(out, "Crawled 1 pages") {
		t.Errorf("max_pages 1:\n%.200s", out)
	}

	// Long pages are cut to fair shares; the reply says so, stays under
	// the cap, and each cut says how to read the page whole.
	var urls []string
	for i := range 12 {
		urls = append(urls, fmt.Sprintf("%s/long%d", srv.URL, i))
	}
	for _, format := range []string{"markdown", "text", "json"} {
		out = mustOK(t, call(t, cs, ToolCrawl, map[string]any{"urls": urls, "max_pages": 12, "format": format}))
		if n := utf8.RuneCountInString(out); n > MaxCrawlReply {
			t.Errorf("%s: reply of %d characters", format, n)
		}
		if !strings.Contains(out, "Crawled 12 pages") || !strings.Contains(out, "12 long pages were cut to fit the reply") ||
			strings.Count(out, "<page truncated: ") < 12 || !strings.Contains(out, "call web_fetch with url="+srv.URL+"/long") {
			t.Errorf("%s: long pages not cut as expected:\n%.600s", format, out)
		}
	}
}

func TestFairShare(t *testing.T) {
	t.Parallel()
	tests := []struct {
		sizes  []int
		budget int
		want   int
	}{
		{nil, 100, 100},
		{[]int{10, 20}, 100, 20},       // everything fits
		{[]int{10, 100, 100}, 100, 45}, // the short one stays whole
		{[]int{50, 50}, 100, 50},
		{[]int{300, 300, 300, 300}, 100, 25},
	}
	for _, tt := range tests {
		if got := fairShare(append([]int(nil), tt.sizes...), tt.budget); got != tt.want {
			t.Errorf("fairShare(%v, %d) = %d, want %d", tt.sizes, tt.budget, got, tt.want)
		}
	}
}

// TestToolErrors checks that refusals, upstream failures and bad input
// come back as tool errors with the public code, reason and decision id,
// never as protocol errors.
func TestToolErrors(t *testing.T) {
	t.Parallel()
	srv := site(t)
	cs := inMemory(t, newEngine(t, loopback))
	strict := inMemory(t, newEngine(t, engine.Config{})) // no loopback exception
	tests := []struct {
		name     string
		cs       *sdkmcp.ClientSession
		tool     string
		args     map[string]any
		prefix   string // of the text
		decision bool
	}{
		{"private address", cs, ToolFetch, map[string]any{"url": "http://10.0.0.5/"}, "denied (private): ", true},
		{"loopback without exception", strict, ToolFetch, map[string]any{"url": srv.URL + "/a"}, "denied (loopback): ", true},
		{"metadata", cs, ToolFetch, map[string]any{"url": "http://169.254.169.254/latest/"}, "denied (metadata): ", true},
		{"http status", cs, ToolFetch, map[string]any{"url": srv.URL + "/missing"}, "upstream (http_status): ", true},
		{"ambiguous host", cs, ToolFetch, map[string]any{"url": "http://0x7f.1/"}, "denied (", true},
		{"missing url", cs, ToolFetch, map[string]any{}, "invalid (arguments): The argument url is required.", false},
		{"empty url", cs, ToolFetch, map[string]any{"url": " "}, "invalid (url): url is required", false},
		{"bad format", cs, ToolFetch, map[string]any{"url": srv.URL, "format": "html"}, `invalid (arguments): The argument format must be one of markdown, md, text, org or json, not "html".`, false},
		{"negative start", cs, ToolFetch, map[string]any{"url": srv.URL, "start_index": -1}, "invalid (arguments): The argument start_index must be at least 0, not -1.", false},
		{"wrong type", cs, ToolFetch, map[string]any{"url": srv.URL, "max_length": "many"}, `invalid (arguments): The argument max_length must be a whole number, not "many".`, false},
		{"unknown argument", cs, ToolFetch, map[string]any{"url": srv.URL, "maxLength": 10}, `invalid (arguments): web_fetch has no argument "maxLength"; its arguments are url, format, max_length, start_index and raw.`, false},
		{"url not a string in urls", cs, ToolCrawl, map[string]any{"urls": []any{srv.URL, 3}}, "invalid (arguments): Item 2 of urls must be a string, not 3.", false},
		{"urls null", cs, ToolCrawl, map[string]any{"urls": nil}, "invalid (arguments): The argument urls must be a list, not null.", false},
		{"empty query", cs, ToolSearch, map[string]any{"query": ""}, "invalid (query): query is required", false},
		{"seed and urls", cs, ToolCrawl, map[string]any{"seed": srv.URL, "urls": []string{srv.URL}}, "invalid (crawl_input): give seed or urls, not both", false},
		{"no seed or urls", cs, ToolCrawl, map[string]any{}, "invalid (crawl_input): seed or urls is required", false},
		{"crawl denied seed", strict, ToolCrawl, map[string]any{"seed": "http://10.0.0.5/"}, "", false},
		// Above a ceiling is refused, never reduced (issue 14); above the
		// schema's maximum (the ceiling's built-in bound) before any call.
		{"max_length above the ceiling", cs, ToolFetch, map[string]any{"url": srv.URL + "/a", "max_length": 1000001},
			"invalid (limit): The argument max_length is 1000001, above the most this tool takes, 1000000.", false},
		{"search limit above the ceiling", cs, ToolSearch, map[string]any{"query": "q", "limit": 101},
			"invalid (limit): The argument limit is 101, above the most this tool takes, 100.", false},
		{"crawl pages above the ceiling", cs, ToolCrawl, map[string]any{"seed": srv.URL + "/a", "max_pages": 101},
			"invalid (limit): The argument max_pages is 101, above the most this tool takes, 100.", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := call(t, tt.cs, tt.tool, tt.args)
			out := text(res)
			if tt.prefix == "" { // a crawl reports what it skipped
				if !strings.Contains(out, "Crawled 0 pages") || !strings.Contains(out, "http://10.0.0.5/: policy") {
					t.Errorf("crawl of a refused seed:\n%s", out)
				}
				return
			}
			if !res.IsError || !strings.HasPrefix(out, tt.prefix) {
				t.Fatalf("IsError %v, text %q, want prefix %q", res.IsError, out, tt.prefix)
			}
			if strings.Contains(out, "goroutine") || strings.Contains(out, ".go:") {
				t.Errorf("internal detail in %q", out)
			}
			if !tt.decision {
				return
			}
			var body airlock.ErrorBody
			b, _ := json.Marshal(res.StructuredContent)
			if err := json.Unmarshal(b, &body); err != nil || len(body.Error.DecisionID) != 26 || !strings.HasPrefix(tt.prefix, string(body.Error.Code)+" (") ||
				!strings.HasSuffix(out, "\ndecision_id: "+body.Error.DecisionID) || !strings.Contains(out, body.Error.Message) {
				t.Errorf("structured error %s (%v) for %q", b, err, out)
			}
		})
	}
}

// TestToolErrorMessage pins the text of a refusal.
func TestToolErrorMessage(t *testing.T) {
	t.Parallel()
	cs := inMemory(t, newEngine(t, loopback))
	out := text(call(t, cs, ToolFetch, map[string]any{"url": "http://10.0.0.5/"}))
	first, _, _ := strings.Cut(out, "\n")
	if !regexp.MustCompile(`^denied \(private\): .*10\.0\.0\.5`).MatchString(first) || !strings.Contains(out, "\nRefused by Airlock's policy") {
		t.Errorf("refusal text %q", out)
	}
}

func TestToolPanicIsInternalError(t *testing.T) {
	t.Parallel()
	en := newEngine(t, loopback)
	var logged bytes.Buffer
	s := NewServer(en, func(context.Context) airlock.Principal { return en.Principal() },
		Options{Logger: slogTo(&logged)})
	type in struct {
		X string `json:"x,omitempty" jsonschema:"anything"`
	}
	AddTool(s, &sdkmcp.Tool{Name: "boom", Description: "panics"}, func(context.Context, *engine.Engine, airlock.Principal, in) (*sdkmcp.CallToolResult, error) {
		panic("secret detail")
	})
	AddTool(s, &sdkmcp.Tool{Name: "who", Description: "says who calls"}, func(_ context.Context, _ *engine.Engine, p airlock.Principal, _ in) (*sdkmcp.CallToolResult, error) {
		return Text(p.String()), nil
	})
	ctx := testCtx(t)
	st, ct := sdkmcp.NewInMemoryTransports()
	ss, err := s.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := newClient().Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { cs.Close(); ss.Wait() }()
	res := call(t, cs, "boom", map[string]any{})
	if !res.IsError || text(res) != "internal: internal error" || !strings.Contains(logged.String(), "secret detail") {
		t.Errorf("panic: %v %q; log %q", res.IsError, text(res), logged.String())
	}
	if out := mustOK(t, call(t, cs, "who", map[string]any{})); out != "local" {
		t.Errorf("principal %q, want local", out)
	}
}

// ---------------------------------------------------------------------------
// stdio

func TestServeStdio(t *testing.T) {
	t.Parallel()
	srv := site(t)
	en := newEngine(t, loopback)
	ctx := testCtx(t)
	cr, sw := io.Pipe() // server → client
	sr, cw := io.Pipe() // client → server
	done := make(chan error, 1)
	go func() {
		done <- ServeStdio(ctx, en, en.Principal(), sr, sw, Options{})
		sw.Close()
	}()
	cs, err := newClient().Connect(ctx, &sdkmcp.IOTransport{Reader: cr, Writer: cw}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The default principal (posix) gets the browser tools too.
	tools, err := cs.ListTools(ctx, nil)
	if err != nil || len(tools.Tools) != 26 {
		t.Fatalf("ListTools: %v %v", tools, err)
	}
	if out := mustOK(t, call(t, cs, ToolFetch, map[string]any{"url": srv.URL + "/b"})); !strings.Contains(out, "# Page /b") {
		t.Errorf("web_fetch over stdio:\n%s", out)
	}
	cs.Close() // closes cw: the server reads EOF
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("ServeStdio after the client left: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ServeStdio did not return after the client left")
	}

	// Cancelling the context ends it too, even with the client still there.
	ctx2, cancel := context.WithCancel(ctx)
	r2, w2 := io.Pipe()
	defer w2.Close()
	go func() { done <- ServeStdio(ctx2, en, en.Principal(), r2, io.Discard, Options{}) }()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("ServeStdio after cancel: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ServeStdio did not return after cancel")
	}
}
