package firecrawl

import (
	"encoding/json"
	"os"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/airlockhq/airlock/internal/api/contracttest"
)

// openapiPath is the API's document (internal/api serves it; this package
// cannot import internal/api, which mounts it).
const openapiPath = "../openapi.json"

// schemaTypes maps each Firecrawl schema of the document to the Go type
// that reads or writes it.
var schemaTypes = map[string]any{
	"FirecrawlErrorBody":           errorBody{},
	"FirecrawlScrapeFields":        scrapeOptions{},
	"FirecrawlScrapeOptions":       scrapeOptions{},
	"FirecrawlScrapeRequest":       scrapeRequest{},
	"FirecrawlDocument":            document{},
	"FirecrawlActionResults":       actionResults{},
	"FirecrawlScrapeResponse":      scrapeResponse{},
	"FirecrawlCrawlRequest":        crawlRequest{},
	"FirecrawlCrawlStarted":        crawlStarted{},
	"FirecrawlCrawlStatus":         crawlStatusResponse{},
	"FirecrawlCancelResponse":      cancelResponse{},
	"FirecrawlCrawlError":          crawlError{},
	"FirecrawlCrawlErrors":         crawlErrorsResponse{},
	"FirecrawlActiveCrawls":        activeCrawlsResponse{},
	"FirecrawlActiveCrawl":         activeCrawl{},
	"FirecrawlActiveCrawlOptions":  activeOptions{},
	"FirecrawlActiveScrapeOptions": activeScrapeOptions{},
	"FirecrawlBatchRequest":        batchRequest{},
	"FirecrawlBatchStarted":        batchStarted{},
	"FirecrawlMapRequest":          mapRequest{},
	"FirecrawlMapLink":             mapLink{},
	"FirecrawlMapResponse":         mapResponse{},
	"FirecrawlSearchRequest":       searchRequest{},
	"FirecrawlSearchWeb":           searchWeb{},
	"FirecrawlSearchResponse":      searchResponse{},
}

// requestSchemas are read, not written: closed, their required fields the
// handlers' rule.
var requestSchemas = []string{"FirecrawlScrapeFields", "FirecrawlScrapeOptions", "FirecrawlScrapeRequest",
	"FirecrawlCrawlRequest", "FirecrawlBatchRequest", "FirecrawlMapRequest", "FirecrawlSearchRequest"}

// neverNull are fields whose Go type could be nil but that the handlers
// always fill.
var neverNull = []string{"FirecrawlCrawlStatus.data", "FirecrawlCrawlErrors.errors", "FirecrawlCrawlErrors.robotsBlocked",
	"FirecrawlActiveCrawls.crawls", "FirecrawlActiveScrapeOptions.formats",
	"FirecrawlMapResponse.links", "FirecrawlSearchResponse.data", "FirecrawlDocument.metadata",
	"FirecrawlActionResults.screenshots", "FirecrawlActionResults.scrapes", "FirecrawlActionResults.javascriptReturns", "FirecrawlActionResults.pdfs"}

// others are the Firecrawl schemas with no Go struct: a format or an
// action (read as raw JSON), the metadata (a map).
var others = []string{"FirecrawlFormat", "FirecrawlAction", "FirecrawlMetadata"}

func loadSchemas(t *testing.T) map[string]map[string]any {
	t.Helper()
	b, err := os.ReadFile(openapiPath)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Components struct {
			Schemas map[string]map[string]any `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	return doc.Components.Schemas
}

// properties lists a schema's properties, those of the schemas its allOf
// refers to included.
func properties(schemas map[string]map[string]any, s map[string]any) map[string]any {
	out := map[string]any{}
	all, _ := s["allOf"].([]any)
	for _, part := range all {
		p, _ := part.(map[string]any)
		if ref, ok := p["$ref"].(string); ok {
			p = schemas[strings.TrimPrefix(ref, "#/components/schemas/")]
		}
		for k, v := range properties(schemas, p) {
			out[k] = v
		}
	}
	props, _ := s["properties"].(map[string]any)
	for k, v := range props {
		out[k] = v
	}
	return out
}

// TestOpenAPIFirecrawlSchemas: each Firecrawl schema of the API's document
// has exactly the JSON fields of the Go type that reads or writes it, is
// closed, and (for what the handlers write) requires exactly the fields
// encoding/json always writes and allows null exactly where it can write
// null; the metadata schema names every key pageDocument writes.
func TestOpenAPIFirecrawlSchemas(t *testing.T) {
	t.Parallel()
	schemas := loadSchemas(t)
	for name := range schemas {
		if strings.HasPrefix(name, "Firecrawl") && schemaTypes[name] == nil && !slices.Contains(others, name) {
			t.Errorf("schema %s has no Go type in this test", name)
		}
	}
	for name, v := range schemaTypes {
		s, ok := schemas[name]
		if !ok {
			t.Errorf("type for %s has no schema", name)
			continue
		}
		props := properties(schemas, s)
		var got []string
		for p := range props {
			got = append(got, p)
		}
		sort.Strings(got)
		if diff := cmp.Diff(contracttest.JSONFields(reflect.TypeOf(v)), got); diff != "" {
			t.Errorf("schema %s (-Go +documented):\n%s", name, diff)
		}
		if name == "FirecrawlScrapeFields" {
			continue // composed into the closed request schemas
		}
		if s["additionalProperties"] != false && s["unevaluatedProperties"] != false {
			t.Errorf("schema %s is not closed (additionalProperties or unevaluatedProperties false)", name)
		}
		if slices.Contains(requestSchemas, name) {
			continue
		}
		var want []string
		for _, f := range contracttest.Fields(reflect.TypeOf(v)) {
			if !f.Omit {
				want = append(want, f.Name)
			}
			null := allowsNull(props[f.Name])
			if wantNull := f.Nullable && !slices.Contains(neverNull, name+"."+f.Name); null != wantNull {
				t.Errorf("schema %s: %s allows null: %v, the server writes null: %v", name, f.Name, null, wantNull)
			}
		}
		var req []string
		r, _ := s["required"].([]any)
		for _, x := range r {
			req = append(req, x.(string))
		}
		sort.Strings(want)
		sort.Strings(req)
		if diff := cmp.Diff(want, req); diff != "" {
			t.Errorf("schema %s required (-always written +documented):\n%s", name, diff)
		}
	}
	meta := properties(schemas, schemas["FirecrawlMetadata"])
	keys := []string{"title", "description", "language", "sourceURL", "url", "statusCode", "contentType", "scrapeId", "kind"}
	for _, k := range metaKeys {
		keys = append(keys, k)
	}
	for _, k := range keys {
		if meta[k] == nil {
			t.Errorf("FirecrawlMetadata lacks %s, which pageDocument writes", k)
		}
	}
}

// allowsNull says whether a property's schema itself (not its fields)
// takes null.
func allowsNull(v any) bool {
	s, _ := v.(map[string]any)
	switch t := s["type"].(type) {
	case string:
		if t == "null" {
			return true
		}
	case []any:
		if slices.Contains(t, any("null")) {
			return true
		}
	}
	for _, k := range []string{"oneOf", "anyOf"} {
		alts, _ := s[k].([]any)
		if slices.ContainsFunc(alts, allowsNull) {
			return true
		}
	}
	return false
}
