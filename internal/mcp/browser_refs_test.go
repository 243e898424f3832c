package mcp

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/airlockhq/airlock/engine"
)

// TestBrowserRefToolsTodoApp: an agent with refs only — each from the
// reply of the call before — adds, completes, edits, deletes and filters
// todos in the web-components todo app (the browser package's test app)
// through the MCP tools, and the number of tool calls each task takes is
// logged.
func TestBrowserRefToolsTodoApp(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/usr/lib/chromium/chromium"); err != nil {
		t.Fatalf("needs Debian's Chromium (apt-get install chromium): %v", err)
	}
	apps := httptest.NewServer(http.FileServer(http.Dir(filepath.Join("..", "browser", "testdata", "apps"))))
	t.Cleanup(apps.Close)
	cfg := loopback
	cfg.Browser = engine.BrowserConfig{Policy: engine.BrowserPolicy{AllowedOrigins: []string{apps.URL}}}
	cs := inMemory(t, newEngine(t, cfg))

	calls := map[string]int{}
	task := ""
	act := func(tool string, args map[string]any) string {
		t.Helper()
		calls[task]++
		return mustOK(t, call(t, cs, tool, args))
	}
	refRE := regexp.MustCompile(`@e\d+`)
	refIn := func(out, contains string) string {
		t.Helper()
		for line := range strings.SplitSeq(out, "\n") {
			if strings.Contains(line, contains) {
				if r := refRE.FindString(line); r != "" {
					return r
				}
			}
		}
		t.Fatalf("no ref on a line with %s in\n%s", contains, out)
		return ""
	}
	left := func(out string, n string) {
		t.Helper()
		if !regexp.MustCompile(`- text "` + n + `"\n\s*- text "items? left"`).MatchString(out) {
			t.Errorf("%s: not %s left:\n%s", task, n, out)
		}
	}

	task = "open"
	out := act(ToolBrowserNavigate, map[string]any{"url": apps.URL + "/todo/"})
	task = "add"
	for _, title := range []string{"buy milk", "ship it"} {
		field := refIn(out, `textbox "New todo"`)
		act(ToolBrowserFill, map[string]any{"ref": field, "text": title, "snapshot": false})
		out = act(ToolBrowserPress, map[string]any{"ref": field, "key": "Enter"})
	}
	left(out, "2")
	task = "complete"
	out = act(ToolBrowserCheck, map[string]any{"ref": refIn(out, "- checkbox @")})
	left(out, "1")
	task = "edit"
	out = act(ToolBrowserDblclick, map[string]any{"ref": refIn(out, `label "ship it"`)})
	edit := refIn(out, `textbox "Edit todo"`)
	act(ToolBrowserFill, map[string]any{"ref": edit, "text": "ship it today", "snapshot": false})
	out = act(ToolBrowserPress, map[string]any{"ref": edit, "key": "Enter"})
	if !strings.Contains(out, `label "ship it today"`) {
		t.Errorf("after the edit:\n%s", out)
	}
	task = "delete"
	out = act(ToolBrowserHover, map[string]any{"ref": refIn(out, `label "buy milk"`)})
	out = act(ToolBrowserClick, map[string]any{"ref": refIn(out, `button "Delete"`)})
	if strings.Contains(out, `"buy milk"`) {
		t.Errorf("buy milk survives its Delete:\n%s", out)
	}
	task = "filter"
	out = act(ToolBrowserClick, map[string]any{"ref": refIn(out, `link "Completed"`)})
	if !strings.Contains(out, "Page: "+apps.URL+"/todo/#/completed\n") || strings.Contains(out, `"ship it today"`) {
		t.Errorf("the Completed filter:\n%s", out)
	}
	task = "complete all"
	out = act(ToolBrowserClick, map[string]any{"ref": refIn(out, `link "All"`)})
	out = act(ToolBrowserCheck, map[string]any{"ref": refIn(out, `Mark all as complete"`)})
	left(out, "0")
	out = act(ToolBrowserCheck, map[string]any{"ref": refIn(out, `Mark all as complete"`), "checked": false})
	left(out, "1")
	t.Logf("MCP tool calls, refs only: %v", calls)
}
