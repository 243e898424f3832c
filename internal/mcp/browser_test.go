package mcp

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	sdkmcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlockhq/airlock/engine"
)

// TestBrowserTools drives the browser tools as an agent would: navigate,
// snapshot, fill and click by ref, read, screenshot as an image, an
// interact sequence, a refused navigation, close. A principal without the
// browser gets no browser tools.
func TestBrowserTools(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/usr/lib/chromium/chromium"); err != nil {
		t.Fatalf("needs Debian's Chromium (apt-get install chromium): %v", err)
	}
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/file.bin" {
			w.Header().Set("Content-Type", "application/octet-stream")
			w.Header().Set("Content-Disposition", `attachment; filename="file.bin"`)
			io.WriteString(w, "0123456789")
			return
		}
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, `<!doctype html><title>Agent page</title><h1>Agent page</h1>
<input aria-label="Name" id="name"><button onclick="document.getElementById('out').textContent = 'Hello ' + document.getElementById('name').value">Greet</button>
<p id="out"></p>`)
	}))
	t.Cleanup(page.Close)
	cfg := loopback
	cfg.Browser = engine.BrowserConfig{Policy: engine.BrowserPolicy{AllowedOrigins: []string{page.URL}}}
	en := newEngine(t, cfg)
	cs := inMemory(t, en)

	out := mustOK(t, call(t, cs, ToolBrowserNavigate, map[string]any{"url": page.URL + "/"}))
	if !strings.Contains(out, "Title: Agent page") {
		t.Fatalf("navigate: %s", out)
	}
	snap := mustOK(t, call(t, cs, ToolBrowserSnapshot, map[string]any{}))
	ref := func(prefix string) string {
		for line := range strings.SplitSeq(snap, "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), prefix) {
				return regexp.MustCompile(`@e\d+`).FindString(line)
			}
		}
		t.Fatalf("no %s in\n%s", prefix, snap)
		return ""
	}
	mustOK(t, call(t, cs, ToolBrowserFill, map[string]any{"ref": ref(`- textbox "Name"`), "text": "agent"}))
	mustOK(t, call(t, cs, ToolBrowserClick, map[string]any{"ref": ref(`- button "Greet"`)}))
	if snap2 := mustOK(t, call(t, cs, ToolBrowserSnapshot, map[string]any{})); !strings.Contains(snap2, "Hello agent") {
		t.Errorf("after fill and click:\n%s", snap2)
	}
	if read := mustOK(t, call(t, cs, ToolBrowserRead, map[string]any{})); !strings.Contains(read, "Agent page") {
		t.Errorf("read:\n%s", read)
	}
	shot := call(t, cs, ToolBrowserScreenshot, map[string]any{})
	if shot.IsError || len(shot.Content) != 1 {
		t.Fatalf("screenshot: %+v", shot)
	}
	img, ok := shot.Content[0].(*sdkmcp.ImageContent)
	if !ok || img.MIMEType != "image/png" || len(img.Data) < 8 || string(img.Data[1:4]) != "PNG" {
		t.Fatalf("screenshot content %T", shot.Content[0])
	}
	out = mustOK(t, call(t, cs, ToolBrowserInteract, map[string]any{"actions": []map[string]any{
		{"action": "fill", "selector": "#name", "text": "steps"},
		{"action": "click", "selector": "button"},
		{"action": "extract_text", "selector": "#out"},
	}}))
	if !strings.Contains(out, `"text": "Hello steps"`) {
		t.Errorf("interact:\n%s", out)
	}
	// A sequence with a failed step is an error result naming the step.
	res := call(t, cs, ToolBrowserInteract, map[string]any{"actions": []map[string]any{
		{"action": "click", "selector": "#no-such-element", "timeout_ms": 300},
	}})
	if !res.IsError || !strings.HasPrefix(text(res), "step 0 (click) failed: ") {
		t.Errorf("interact with a failed step: isError %v\n%s", res.IsError, text(res))
	}
	// A stale ref is an error, never a click on something else.
	mustOK(t, call(t, cs, ToolBrowserNavigate, map[string]any{"url": page.URL + "/again"}))
	if res := call(t, cs, ToolBrowserClick, map[string]any{"ref": ref(`- button "Greet"`)}); !res.IsError || !strings.Contains(text(res), "stale_ref") {
		t.Errorf("stale ref: %s", text(res))
	}
	// Off the origin policy: a tool error with the code and reason.
	if res := call(t, cs, ToolBrowserNavigate, map[string]any{"url": "http://127.0.0.1:1/"}); !res.IsError || !strings.Contains(text(res), "denied (default_deny)") {
		t.Errorf("off-policy navigate: %s", text(res))
	}
	// Every op is a tool: state, history, logs, tabs, downloads.
	if out := mustOK(t, call(t, cs, ToolBrowserGetState, map[string]any{})); !strings.Contains(out, "Page: "+page.URL+"/again (Agent page)") {
		t.Errorf("get_state: %s", out)
	}
	mustOK(t, call(t, cs, ToolBrowserBack, map[string]any{}))
	if out := mustOK(t, call(t, cs, ToolBrowserForward, map[string]any{})); !strings.Contains(out, page.URL+"/again") {
		t.Errorf("forward: %s", out)
	}
	if out := mustOK(t, call(t, cs, ToolBrowserNetworkLog, map[string]any{})); !strings.Contains(out, "allowed GET "+page.URL+"/again") {
		t.Errorf("network_log:\n%s", out)
	}
	mustOK(t, call(t, cs, ToolBrowserConsole, map[string]any{}))
	if out := mustOK(t, call(t, cs, ToolBrowserNewTab, map[string]any{"url": page.URL + "/tab"})); strings.Count(out, "\n") != 3 || !strings.Contains(out, "* tab-2: "+page.URL+"/tab") {
		t.Errorf("new_tab:\n%s", out)
	}
	if out := mustOK(t, call(t, cs, ToolBrowserCloseTab, map[string]any{})); strings.Count(out, "\n") != 2 {
		t.Errorf("close_tab:\n%s", out)
	}
	if out := mustOK(t, call(t, cs, ToolBrowserDownload, map[string]any{"url": page.URL + "/file.bin", "dest_path": "file.bin"})); out != "Saved file.bin: 10 bytes of application/octet-stream (the server named it file.bin)" {
		t.Errorf("download: %s", out)
	}
	mustOK(t, call(t, cs, ToolBrowserClose, map[string]any{}))
	if n := len(en.BrowserSessions(en.Principal())); n != 0 {
		t.Errorf("%d sessions after browser_close", n)
	}

	// A principal whose profile lacks the browser sees only the web tools.
	cfg2 := loopback
	cfg2.Tenants = map[string]engine.TenantConfig{"local": {Profile: "network"}}
	en2 := newEngine(t, cfg2)
	cr, sw := io.Pipe()
	sr, cw := io.Pipe()
	go func() {
		ServeStdio(testCtx(t), en2, en2.Principal(), sr, sw, Options{})
		sw.Close()
	}()
	cs2, err := newClient().Connect(testCtx(t), &sdkmcp.IOTransport{Reader: cr, Writer: cw}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs2.Close()
	tools, err := cs2.ListTools(testCtx(t), nil)
	if err != nil || len(tools.Tools) != 3 {
		t.Fatalf("network principal: %d tools, %v", len(tools.Tools), err)
	}
}

// Issue #15, item 2: a click's reply names the page the click led to, with
// its HTTP status and a fresh snapshot whose refs work, not the page
// before it.
func TestBrowserActionRepliesNameThePage(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/usr/lib/chromium/chromium"); err != nil {
		t.Fatalf("needs Debian's Chromium (apt-get install chromium): %v", err)
	}
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		switch r.URL.Path {
		case "/next":
			time.Sleep(150 * time.Millisecond)
			io.WriteString(w, `<!doctype html><title>Next page</title><h1>Arrived</h1><button onclick="this.textContent='Pressed'">Press me</button>`)
		default:
			io.WriteString(w, `<!doctype html><title>Start page</title><a href="/next">Go next</a>`)
		}
	}))
	t.Cleanup(page.Close)
	cfg := loopback
	cfg.Browser = engine.BrowserConfig{Policy: engine.BrowserPolicy{AllowedOrigins: []string{page.URL}}}
	cs := inMemory(t, newEngine(t, cfg))

	refIn := func(out, prefix string) string {
		for line := range strings.SplitSeq(out, "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), prefix) {
				return regexp.MustCompile(`@e\d+`).FindString(line)
			}
		}
		t.Fatalf("no %s in\n%s", prefix, out)
		return ""
	}
	out := mustOK(t, call(t, cs, ToolBrowserNavigate, map[string]any{"url": page.URL + "/"}))
	if !strings.Contains(out, "Page: "+page.URL+"/\n") || !strings.Contains(out, "HTTP 200") {
		t.Fatalf("navigate reply:\n%s", out)
	}
	out = mustOK(t, call(t, cs, ToolBrowserClick, map[string]any{"ref": refIn(out, `- link "Go next"`)}))
	if !strings.Contains(out, "Page: "+page.URL+"/next\n") || !strings.Contains(out, "Title: Next page") ||
		!strings.Contains(out, "HTTP 200") || !strings.Contains(out, `heading "Arrived"`) {
		t.Fatalf("click reply does not name the new page:\n%s", out)
	}
	// The reply's refs are live: no browser_snapshot call is needed.
	out = mustOK(t, call(t, cs, ToolBrowserClick, map[string]any{"ref": refIn(out, `- button "Press me"`), "snapshot": false}))
	if !strings.Contains(out, "Navigated: no") || strings.Contains(out, "Snapshot") {
		t.Errorf("click with snapshot false:\n%s", out)
	}
}
