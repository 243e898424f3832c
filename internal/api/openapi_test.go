package api

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/engine"
	"github.com/airlockhq/airlock/internal/api/contracttest"
	"github.com/airlockhq/airlock/internal/api/firecrawl"
)

type openAPIDoc struct {
	OpenAPI string                                `json:"openapi"`
	Paths   map[string]map[string]json.RawMessage `json:"paths"`
	Comps   struct {
		Schemas map[string]struct {
			Properties map[string]any `json:"properties"`
			Required   []string       `json:"required"`
		} `json:"schemas"`
	} `json:"components"`
}

func loadOpenAPI(t *testing.T) (openAPIDoc, map[string]any) {
	t.Helper()
	var doc openAPIDoc
	if err := json.Unmarshal(openapiJSON, &doc); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	var raw map[string]any
	if err := json.Unmarshal(openapiJSON, &raw); err != nil {
		t.Fatal(err)
	}
	return doc, raw
}

// docOperations lists "METHOD /path" for every operation of the document.
func docOperations(doc openAPIDoc) []string {
	var ops []string
	for path, item := range doc.Paths {
		for m := range item {
			switch m {
			case "get", "post", "put", "patch", "delete", "head", "options", "trace":
				ops = append(ops, strings.ToUpper(m)+" "+path)
			}
		}
	}
	sort.Strings(ops)
	return ops
}

// fill replaces path wildcards with a value, for probing the mux.
func fill(path string) string {
	var b strings.Builder
	for {
		i := strings.IndexByte(path, '{')
		if i < 0 {
			b.WriteString(path)
			return b.String()
		}
		j := strings.IndexByte(path[i:], '}')
		b.WriteString(path[:i] + "x")
		path = path[i+j+1:]
	}
}

// TestOpenAPICoversRoutes: every route the mux serves is in the document,
// and every operation of the document is served by the mux under the same
// pattern.
func TestOpenAPICoversRoutes(t *testing.T) {
	t.Parallel()
	doc, _ := loadOpenAPI(t)
	if doc.OpenAPI != "3.1.0" {
		t.Errorf("openapi = %q", doc.OpenAPI)
	}
	en := newEngine(t, testConfig("http://127.0.0.1:1"))
	s := newServer(en, Options{MCP: http.NotFoundHandler()})

	var served []string
	for _, rt := range s.routes {
		served = append(served, rt.pattern())
	}
	for _, m := range []string{"GET", "POST", "DELETE"} {
		served = append(served, m+" /mcp") // the MCP transport's methods
	}
	served = append(served, firecrawl.Routes()...) // mounted under FirecrawlPrefix
	sort.Strings(served)
	if diff := cmp.Diff(served, docOperations(doc)); diff != "" {
		t.Errorf("routes (-served +documented):\n%s", diff)
	}

	// The mux itself: each documented operation reaches the route of the
	// same pattern.
	for _, op := range docOperations(doc) {
		method, path, _ := strings.Cut(op, " ")
		req := httptest.NewRequest(method, fill(path), nil)
		_, pattern := s.mux.Handler(req)
		want := op
		switch {
		case path == "/mcp":
			want = "/mcp"
		case strings.HasPrefix(path, FirecrawlPrefix):
			want = FirecrawlPrefix // the Firecrawl handler routes on
		}
		if pattern != want {
			t.Errorf("%s is served by pattern %q, want %q", op, pattern, want)
		}
	}
}

// TestOpenAPIWellFormed: every $ref resolves, every operation documents
// its success and the error shape, and operation ids are unique.
func TestOpenAPIWellFormed(t *testing.T) {
	t.Parallel()
	doc, raw := loadOpenAPI(t)
	var refs []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if k == "$ref" {
					refs = append(refs, x.(string))
				}
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(raw)
	if len(refs) < 50 {
		t.Fatalf("only %d $refs found: the walk is broken", len(refs))
	}
	for _, ref := range refs {
		parts := strings.Split(strings.TrimPrefix(ref, "#/"), "/")
		var cur any = raw
		for _, p := range parts {
			m, ok := cur.(map[string]any)
			if !ok {
				cur = nil
				break
			}
			cur = m[p]
		}
		if cur == nil {
			t.Errorf("$ref %s does not resolve", ref)
		}
	}
	ids := map[string]string{}
	for path, item := range doc.Paths {
		for m, raw := range item {
			if m == "parameters" {
				continue
			}
			var op struct {
				OperationID string                     `json:"operationId"`
				Responses   map[string]json.RawMessage `json:"responses"`
			}
			if err := json.Unmarshal(raw, &op); err != nil {
				t.Fatalf("%s %s: %v", m, path, err)
			}
			if op.OperationID == "" {
				t.Errorf("%s %s has no operationId", m, path)
			} else if other, dup := ids[op.OperationID]; dup {
				t.Errorf("operationId %s used by %s and %s %s", op.OperationID, other, m, path)
			}
			ids[op.OperationID] = m + " " + path
			// The Firecrawl routes answer errors in Firecrawl's shape.
			errShape := `"#/components/responses/Error"`
			if strings.HasPrefix(path, FirecrawlPrefix) {
				errShape = `"#/components/responses/FirecrawlError"`
			}
			if !strings.Contains(string(op.Responses["default"]), errShape) {
				t.Errorf("%s %s does not document the error shape %s as its default response", m, path, errShape)
			}
			ok := false
			for code := range op.Responses {
				ok = ok || strings.HasPrefix(code, "2")
			}
			if !ok {
				t.Errorf("%s %s documents no success", m, path)
			}
		}
	}
	// The error schema lists the ten codes.
	var codes []string
	for _, c := range airlock.Codes() {
		codes = append(codes, string(c))
	}
	errSchema := raw["components"].(map[string]any)["schemas"].(map[string]any)["Error"].(map[string]any)
	var enum []string
	for _, c := range errSchema["properties"].(map[string]any)["code"].(map[string]any)["enum"].([]any) {
		enum = append(enum, c.(string))
	}
	if diff := cmp.Diff(codes, enum); diff != "" {
		t.Errorf("Error.code enum (-vocabulary +documented):\n%s", diff)
	}
}

// TestOpenAPISchemasMatchTypes: each schema has exactly the JSON fields of
// the Go type that reads or writes it.
func TestOpenAPISchemasMatchTypes(t *testing.T) {
	t.Parallel()
	doc, _ := loadOpenAPI(t)
	types := schemaTypes()
	// Schemas of JSON written by the renderers (extract) or composed of
	// others, checked by the round-trip tests instead.
	composed := []string{"CrawlResponse", "SearchResponse", "Duration", "BrowseRequest"}
	// The body of /api/browse, one schema per verb: each has some of
	// browseRequest's fields, and together all of them.
	variants := []string{"BrowseFetchRequest", "BrowseCrawlRequest", "BrowseSearchRequest"}
	all := contracttest.JSONFields(reflect.TypeOf(browseRequest{}))
	seen := map[string]bool{}
	for _, name := range variants {
		s, ok := doc.Comps.Schemas[name]
		if !ok {
			t.Errorf("no schema %s", name)
			continue
		}
		for p := range s.Properties {
			if !slices.Contains(all, p) {
				t.Errorf("schema %s has %s, which browseRequest does not", name, p)
			}
			seen[p] = true
		}
	}
	for _, f := range all {
		if !seen[f] {
			t.Errorf("browseRequest's %s is in no Browse*Request schema", f)
		}
	}
	composed = append(composed, variants...)
	for name, s := range doc.Comps.Schemas {
		v, ok := types[name]
		if strings.HasPrefix(name, "Firecrawl") {
			continue // internal/api/firecrawl's TestOpenAPIFirecrawlSchemas checks them
		}
		if !ok {
			if !slices.Contains(composed, name) {
				t.Errorf("schema %s has no Go type in this test", name)
			}
			continue
		}
		var props []string
		for p := range s.Properties {
			props = append(props, p)
		}
		sort.Strings(props)
		if diff := cmp.Diff(contracttest.JSONFields(reflect.TypeOf(v)), props); diff != "" {
			t.Errorf("schema %s (-Go +documented):\n%s", name, diff)
		}
		for _, r := range s.Required {
			if !slices.Contains(props, r) {
				t.Errorf("schema %s requires %s, which it does not define", name, r)
			}
		}
	}
	for name := range types {
		if _, ok := doc.Comps.Schemas[name]; !ok {
			t.Errorf("type for %s has no schema", name)
		}
	}
	// The crawl job request is the crawl options with a seed and URLs.
	want := append(contracttest.JSONFields(reflect.TypeOf(crawlOptions{})), "options", "seed", "urls")
	sort.Strings(want)
	if diff := cmp.Diff(want, contracttest.JSONFields(reflect.TypeOf(crawlJobRequest{}))); diff != "" {
		t.Errorf("crawlJobRequest (-want +got):\n%s", diff)
	}
	// The options are their request types without the top-level fields.
	for _, c := range []struct {
		opts, req any
		top       []string
	}{
		{fetchOptions{}, airlock.FetchRequest{}, []string{"url"}},
		{crawlOptions{}, airlock.CrawlRequest{}, []string{"seed", "urls"}},
		{searchOptions{}, airlock.SearchRequest{}, []string{"query"}},
	} {
		want := slices.DeleteFunc(contracttest.JSONFields(reflect.TypeOf(c.req)), func(s string) bool { return slices.Contains(c.top, s) })
		if diff := cmp.Diff(want, contracttest.JSONFields(reflect.TypeOf(c.opts))); diff != "" {
			t.Errorf("%T vs %T (-request +options):\n%s", c.opts, c.req, diff)
		}
	}
}

// schemaTypes maps each schema of the document to the Go type that reads
// or writes it.
func schemaTypes() map[string]any {
	types := map[string]any{
		"ErrorBody":          airlock.ErrorBody{},
		"Error":              airlock.Error{},
		"Narrowing":          airlock.Narrowing{},
		"CrawlJobRequest":    crawlJobRequest{},
		"FetchOptions":       fetchOptions{},
		"CrawlOptions":       crawlOptions{},
		"SearchOptions":      searchOptions{},
		"Page":               airlock.Page{},
		"Heading":            airlock.Heading{},
		"Link":               airlock.Link{},
		"SearchResult":       airlock.SearchResult{},
		"FetchResult":        airlock.FetchResult{},
		"FetchManyResponse":  fetchManyResponse{},
		"Skipped":            airlock.Skipped{},
		"CrawlSummary":       airlock.CrawlSummary{},
		"CrawlProgress":      airlock.CrawlProgress{},
		"CrawlRequest":       airlock.CrawlRequest{},
		"CrawlJob":           airlock.CrawlJob{},
		"JobPage":            airlock.JobPage{},
		"JobsResponse":       jobsResponse{},
		"JobResponse":        jobResponse{},
		"ExchangeRequest":    exchangeRequest{},
		"ExchangeResponse":   airlock.ExchangeResponse{},
		"SignRequest":        signRequest{},
		"SignResponse":       signResponse{},
		"RouteRequest":       routeRequest{},
		"HTTPRequest":        airlock.HTTPRequest{},
		"HTTPResponse":       airlock.HTTPResponse{},
		"AuditRecord":        airlock.AuditRecord{},
		"AuditResponse":      auditResponse{},
		"AuditStat":          airlock.AuditStat{},
		"StatsResponse":      statsResponse{},
		"RevokeRequest":      revokeRequest{},
		"UnrevokeRequest":    unrevokeRequest{},
		"RevocationResponse": revocationResponse{},
		"Health":             healthResponse{},
		// The browser's types (the engine's aliases; the nested result
		// types are reached through their fields).
		"BrowserPolicy":           engine.BrowserPolicy{},
		"BrowserOpenRequest":      engine.BrowserOpenRequest{},
		"BrowserSession":          engine.BrowserSessionInfo{},
		"BrowserSessionsResponse": browserSessionsResponse{},
		"BrowserOp":               engine.BrowserOp{},
		"BrowserResult":           engine.BrowserResult{},
		"BrowserAction":           engine.BrowserAction{},
		"InteractRequest":         interactRequest{},
		"InteractResult":          engine.BrowserInteractResult{},
		"ApprovalRequest":         approvalRequest{},
		"BrowserEvent":            engine.BrowserEvent{},
	}
	result := reflect.TypeOf(engine.BrowserResult{})
	field := func(t reflect.Type, name string) reflect.Type {
		f, ok := t.FieldByName(name)
		if !ok {
			panic(name)
		}
		ft := f.Type
		for ft.Kind() == reflect.Pointer || ft.Kind() == reflect.Slice {
			ft = ft.Elem()
		}
		return ft
	}
	rtypes := map[string]reflect.Type{
		"BrowserState":   field(result, "State"),
		"Snapshot":       field(result, "Snapshot"),
		"Screenshot":     field(result, "Screenshot"),
		"ConsoleLog":     field(result, "Console"),
		"ConsoleMessage": field(field(result, "Console"), "Messages"),
		"NetworkLog":     field(result, "Network"),
		"NetworkEntry":   field(field(result, "Network"), "Entries"),
		"Tab":            field(result, "Tabs"),
		"ReadResult":     field(result, "Read"),
		"Download":       field(result, "Download"),
		"PageInfo":       field(result, "Page"),
		"ActionResult":   field(reflect.TypeOf(engine.BrowserInteractResult{}), "Results"),
	}
	for name, rt := range rtypes {
		types[name] = reflect.New(rt).Elem().Interface()
	}
	return types
}

// requestSchemas are the schemas of what clients send: closed, and their
// required fields are the server's rule, not the encoding's.
var requestSchemas = []string{"ApprovalRequest", "BrowserAction", "BrowserOp", "BrowserOpenRequest", "CrawlOptions",
	"FetchOptions", "SearchOptions", "ExchangeRequest", "HTTPRequest", "InteractRequest", "RevokeRequest",
	"RouteRequest", "SignRequest", "UnrevokeRequest", "CrawlJobRequest"}

// neverNull are fields whose Go type could be nil but that the handlers
// always fill (an empty list for none).
var neverNull = []string{"AuditResponse.records", "StatsResponse.stats", "JobsResponse.jobs",
	"BrowserSessionsResponse.sessions", "JobResponse.pages", "JobResponse.job", "JobPage.page", "FetchManyResponse.results"}

// TestOpenAPISchemasTellTheTruth: every object schema of a Go type is
// closed (the server's decoder refuses unknown fields, and its encoder
// writes no others); a schema of what the server writes requires exactly
// the fields encoding/json always writes, and allows null exactly where it
// can write null.
func TestOpenAPISchemasTellTheTruth(t *testing.T) {
	t.Parallel()
	_, raw := loadOpenAPI(t)
	schemas := raw["components"].(map[string]any)["schemas"].(map[string]any)
	for name, v := range schemaTypes() {
		s := schemas[name].(map[string]any)
		if s["additionalProperties"] != false {
			t.Errorf("schema %s is not closed (additionalProperties: false)", name)
		}
		if slices.Contains(requestSchemas, name) {
			continue
		}
		var want []string
		for _, f := range contracttest.Fields(reflect.TypeOf(v)) {
			if !f.Omit {
				want = append(want, f.Name)
			}
			p, _ := s["properties"].(map[string]any)[f.Name].(map[string]any)
			js, _ := json.Marshal(p)
			null := strings.Contains(string(js), `"null"`)
			if wantNull := f.Nullable && !slices.Contains(neverNull, name+"."+f.Name); null != wantNull {
				t.Errorf("schema %s: %s allows null: %v, the server writes null: %v", name, f.Name, null, wantNull)
			}
		}
		var got []string
		req, _ := s["required"].([]any)
		for _, r := range req {
			got = append(got, r.(string))
		}
		sort.Strings(want)
		sort.Strings(got)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("schema %s required (-always written +documented):\n%s", name, diff)
		}
	}
}
