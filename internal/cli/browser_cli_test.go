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

func TestBrowserRunOps(t *testing.T) {
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
	r := invoke(t, ctx, script, []string{"browser", "run", "--data-dir", dd, "--except", "127.0.0.1:" + port,
		"--allow-origin", srv.URL, "-"})
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
	}
	var out browserRunOutput
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
	if shot == "" || !strings.HasPrefix(shot, out.FilesDir) {
		t.Fatalf("screenshot file %q not under %q", shot, out.FilesDir)
	}
	if len(out.Denied) == 0 || !strings.HasPrefix(out.Denied[0].URL, denied) {
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
	out = browserRunOutput{}
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
