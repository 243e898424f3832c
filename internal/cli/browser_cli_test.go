package cli

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockhq/airlock/internal/browser"
)

func requireChromium(t *testing.T) {
	t.Helper()
	if _, err := os.Stat("/usr/lib/chromium/chromium"); err != nil {
		t.Fatalf("these tests need Debian's Chromium (apt-get install chromium): %v", err)
	}
}

// counterPage serves a page with a button that counts clicks, and a
// request toward deniedURL.
func counterPage(deniedURL string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte(`<!doctype html><title>Counter</title>
<button id="inc" onclick="document.getElementById('n').textContent = +document.getElementById('n').textContent + 1">Add one</button>
<p>Count: <span id="n">0</span></p>
<img src="` + deniedURL + `/leak.png">`))
	})
}

func deniedListener(t *testing.T) (string, *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	var hits atomic.Int64
	srv := &httptest.Server{Listener: ln, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) })}}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL, &hits
}

// opsOutput decodes the output of an ops script.
type opsOutput struct {
	browserRunOutput
	Results []browserStepResult `json:"results"`
}

func TestBrowserRunOps(t *testing.T) {
	t.Parallel()
	requireChromium(t)
	denied, hits := deniedListener(t)
	srv := httptest.NewServer(counterPage(denied))
	defer srv.Close()
	dd := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	script := `{"ops":[
		{"kind":"navigate","url":"` + srv.URL + `/"},
		{"kind":"snapshot"},
		{"kind":"screenshot"},
		{"kind":"get_state"}]}`
	port := strings.TrimPrefix(srv.URL, "http://127.0.0.1:")
	outDir := t.TempDir()
	r := invoke(t, ctx, script, []string{"browser", "run", "--data-dir", dd, "--except", "127.0.0.1:" + port,
		"--allow-origin", srv.URL, "--out-dir", outDir, "-"})
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
	}
	var out opsOutput
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("output: %v\n%s", err, r.stdout)
	}
	if len(out.Results) != 4 || out.Title != "Counter" || out.FinalURL != srv.URL+"/" {
		t.Fatalf("output: %+v", out)
	}
	if snap := out.Results[1].Result.Snapshot; snap == nil || !strings.Contains(snap.Text, "Add one") {
		t.Fatalf("snapshot: %+v", out.Results[1])
	}
	shot := out.Results[2].File
	if fi, err := os.Stat(shot); err != nil || fi.Size() == 0 || !strings.HasPrefix(shot, outDir) {
		t.Fatalf("screenshot file %q not under %q: %v", shot, outDir, err)
	}
	// Chromium's own background requests may be refused too: look for the
	// page's.
	var pageDenied bool
	for _, d := range out.Denied {
		pageDenied = pageDenied || strings.HasPrefix(d.URL, denied)
	}
	if !pageDenied {
		t.Fatalf("denied: %+v", out.Denied)
	}
	if hits.Load() != 0 {
		t.Fatalf("the denied server got %d requests", hits.Load())
	}
	if _, err := os.Stat(filepath.Join(dd, "browser", "ephemeral")); err == nil {
		entries, _ := os.ReadDir(filepath.Join(dd, "browser", "ephemeral"))
		if len(entries) != 0 {
			t.Fatalf("the ephemeral session was not removed: %v", entries)
		}
	}

	// A navigation failure aborts the rest and sets the exit status.
	script = `{"ops":[{"kind":"navigate","url":"` + denied + `/"},{"kind":"snapshot"}]}`
	r = invoke(t, ctx, script, []string{"browser", "run", "--data-dir", dd, "--except", "127.0.0.1:" + port, "-"})
	if r.code != 3 {
		t.Fatalf("denied navigation: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	out = opsOutput{}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || !out.Aborted || len(out.Results) != 1 || out.Results[0].Error == nil {
		t.Fatalf("abort: %v %+v", err, out)
	}

	// Bad scripts are usage errors.
	for _, bad := range []string{`{"ops":[]}`, `{"ops":[{"kind":"eval"}]}`, `{"ops":[{"kind":"snapshot"}],"actions":[{}]}`, `{"bogus":1}`} {
		if r := invoke(t, ctx, bad, []string{"browser", "run", "--data-dir", dd, "-"}); r.code != 2 {
			t.Errorf("%s: exit %d %s", bad, r.code, r.stderr)
		}
	}
}

// actionsOutput decodes the output of an interact script.
type actionsOutput struct {
	browserRunOutput
	Results []browser.ActionResult `json:"results"`
}

// TestBrowserRunTodoApp drives the web-components todo app of
// internal/browser/testdata/apps end to end, served on loopback: add three
// todos, complete one, read the counter. interact's CSS selectors do not
// pierce shadow roots, so the script loads the app's light-DOM rendering
// (?light: the same components without shadow roots). Nothing may leave
// toward the denied address.
func TestBrowserRunTodoApp(t *testing.T) {
	t.Parallel()
	requireChromium(t)
	var served atomic.Int64
	fs := http.FileServer(http.Dir("../browser/testdata/apps"))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		fs.ServeHTTP(w, r)
	}))
	defer srv.Close()
	denied, hits := deniedListener(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	outDir := t.TempDir()
	script := `{"allowed_origins": ["` + srv.URL + `"], "actions": [
		{"action": "goto", "url": "` + srv.URL + `/todo/?light"},
		{"action": "wait_for_selector", "selector": "#new-todo"},
		{"action": "fill", "selector": "#new-todo", "text": "buy milk"},
		{"action": "press", "selector": "#new-todo", "key": "Enter"},
		{"action": "fill", "selector": "#new-todo", "text": "write the note"},
		{"action": "press", "selector": "#new-todo", "key": "Enter"},
		{"action": "fill", "selector": "#new-todo", "text": "ship it"},
		{"action": "press", "selector": "#new-todo", "key": "Enter"},
		{"action": "wait_for_selector", "selector": "#todo-list li:nth-child(3)", "state": "attached"},
		{"action": "click", "selector": "#todo-list li:nth-child(2) .toggle"},
		{"action": "extract_text", "selector": "#todo-count"},
		{"action": "extract_text", "selector": "#todo-list"},
		{"action": "goto", "url": "` + denied + `/"},
		{"action": "extract_text"}
	], "stop_on_error": false}`
	port := strings.TrimPrefix(srv.URL, "http://127.0.0.1:")
	r := invoke(t, ctx, script, []string{"browser", "run", "--data-dir", t.TempDir(), "--except", "127.0.0.1:" + port, "--out-dir", outDir, "-"})
	var out actionsOutput
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("output: %v\nstdout %s\nstderr %s", err, r.stdout, r.stderr)
	}
	// The goto toward the denied address fails and aborts the rest: exit 3
	// (denied), 13 results, the last not run.
	if r.code != 3 || !out.Aborted || out.AbortReason != "goto_failed" || len(out.Results) != 13 {
		t.Fatalf("exit %d, aborted %v %q, %d results\n%s\n%s", r.code, out.Aborted, out.AbortReason, len(out.Results), r.stdout, r.stderr)
	}
	for _, res := range out.Results[:12] {
		if !res.OK {
			t.Fatalf("step %d %s failed: %+v", res.Index, res.Action, res.Error)
		}
	}
	if got := *out.Results[10].Text; got != "2 items left" {
		t.Errorf("counter %q, want \"2 items left\"", got)
	}
	if got := *out.Results[11].Text; !strings.Contains(got, "buy milk") || !strings.Contains(got, "ship it") {
		t.Errorf("list %q", got)
	}
	if out.Title != "Todos · Airlock test app" {
		t.Errorf("title %q", out.Title)
	}
	if hits.Load() != 0 {
		t.Fatalf("the denied server got %d requests", hits.Load())
	}
	if served.Load() < 3 {
		t.Errorf("the app's server saw %d requests, want its page, stylesheet and script", served.Load())
	}
}
