package mcp

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/airlockhq/airlock/engine"
)

// TestToolDefaultsUnderLowerCeilings: where a tenant's ceiling is below a
// tool's default, a call that asks for nothing gets the ceiling, not a
// refusal; asking for more than the ceiling is refused.
func TestToolDefaultsUnderLowerCeilings(t *testing.T) {
	t.Parallel()
	srv := site(t)
	cfg := loopback
	cfg.Tenants = map[string]engine.TenantConfig{"local": {Profile: "posix",
		Limits: engine.CeilingsConfig{MCPMaxLength: 100, SearchResults: 3, MCPCrawlPages: 2}}}
	cs := inMemory(t, newEngine(t, cfg))

	out := mustOK(t, call(t, cs, ToolFetch, map[string]any{"url": srv.URL + "/a"}))
	_, body, _ := strings.Cut(out, "\n\n")
	content, _, _ := strings.Cut(body, "\n\n<content truncated")
	if n := utf8.RuneCountInString(content); n != 100 {
		t.Errorf("web_fetch returned %d characters, want the ceiling, 100:\n%s", n, out)
	}
	if res := call(t, cs, ToolFetch, map[string]any{"url": srv.URL + "/a", "max_length": 101}); !res.IsError ||
		!strings.HasPrefix(text(res), "invalid (limit): max_length 101 is above the ceiling 100 (tenants.local.limits.mcp_max_length)") {
		t.Errorf("max_length 101: %s", text(res))
	}

	out = mustOK(t, call(t, cs, ToolSearch, map[string]any{"query": "q"}))
	if n := strings.Count(out, "\n- "); n != 3 {
		t.Errorf("web_search listed %d results, want the ceiling, 3:\n%s", n, out)
	}

	out = mustOK(t, call(t, cs, ToolCrawl, map[string]any{"seed": srv.URL + "/a"}))
	if !strings.HasPrefix(out, "Crawled 2 pages") {
		t.Errorf("web_crawl: want 2 pages (the ceiling):\n%.300s", out)
	}
}
