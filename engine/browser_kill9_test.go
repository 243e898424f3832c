package engine_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/engine"
	proc "github.com/airlockhq/airlock/internal/child"
)

// browserHelperEnv carries "DATADIR PAGEURL" to the child process of
// TestBrowserDiesWithEngine.
const browserHelperEnv = "AIRLOCK_ENGINE_TEST_BROWSER_HELPER"

// TestBrowserHelperProcess is the child of TestBrowserDiesWithEngine: an
// engine on DATADIR opens a browser session on PAGEURL, says "ready" and
// waits to be killed.
func TestBrowserHelperProcess(t *testing.T) {
	dir, pageURL, ok := strings.Cut(os.Getenv(browserHelperEnv), " ")
	if !ok {
		t.Skip("the child process of TestBrowserDiesWithEngine")
	}
	fail := func(err error) { fmt.Println("error", err); os.Exit(2) }
	e, err := engine.New(context.Background(), engine.Config{
		DataDir: dir,
		Tenants: map[string]engine.TenantConfig{"local": {Profile: "posix", Exceptions: []string{"127.0.0.1"}}},
		Browser: engine.BrowserConfig{Policy: engine.BrowserPolicy{AllowedOrigins: []string{"127.0.0.1"}}},
	})
	if err != nil {
		fail(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p := airlock.Principal{Tenant: "local"}
	for _, profile := range []string{"", "kept"} { // an ephemeral session and a persistent one
		info, err := e.BrowserOpen(ctx, p, engine.BrowserOpenRequest{Profile: profile})
		if err != nil {
			fail(err)
		}
		if _, err := e.BrowserDo(ctx, p, info.ID, engine.BrowserOp{Kind: "navigate", URL: pageURL}); err != nil {
			fail(err)
		}
	}
	fmt.Println("ready")
	<-ctx.Done() // never outlive a lost parent by long
	os.Exit(0)
}

// userDataDirUnder matches the command line of a Chromium process whose
// --user-data-dir is under dir (the helpers rewrite their title: their
// arguments are separated by spaces, not NULs).
func userDataDirUnder(dir string) func(string) bool {
	prefix := "--user-data-dir=" + dir + string(filepath.Separator)
	return func(cmdline string) bool {
		i := strings.Index(cmdline, prefix)
		return i == 0 || i > 0 && (cmdline[i-1] == 0 || cmdline[i-1] == ' ')
	}
}

// TestBrowserDiesWithEngine: a process whose engine has two browser
// sessions open on a loopback page is killed with SIGKILL; no process whose
// command line carries one of their --user-data-dir may remain (the
// browser, its zygotes, renderers, GPU and network services), not even a
// renderer too wedged to notice that its browser is gone.
func TestBrowserDiesWithEngine(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process with two browsers")
	}
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte(`<!doctype html><title>Busy</title><iframe src="/frame"></iframe>
<script>onload = () => setTimeout(() => { for (;;) {} }, 300)</script>`))
	}))
	t.Cleanup(page.Close)
	dir := t.TempDir()
	kid := startChild(t, "TestBrowserHelperProcess", browserHelperEnv+"="+dir+" "+page.URL, os.Stderr)
	ours := userDataDirUnder(dir)
	t.Cleanup(func() {
		for _, p := range proc.Find(ours) {
			p.Kill()
		}
	})

	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(kid.stdout)
		for sc.Scan() {
			if l := sc.Text(); l == "ready" || strings.HasPrefix(l, "error") {
				ready <- l
			}
		}
		close(ready)
	}()
	select {
	case l := <-ready:
		if l != "ready" {
			t.Fatalf("the child: %s", l)
		}
	case <-time.After(90 * time.Second): // hang guard
		t.Fatal("the child never got ready")
	}
	before := proc.Find(ours)
	if len(before) < 4 {
		t.Fatalf("%d Chromium processes with a --user-data-dir under %s; want two browsers and their helpers", len(before), dir)
	}

	// A wedged renderer never notices that its browser is gone: stop
	// the renderers, so that only the kernel can end them.
	stopped := 0
	for _, p := range before {
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p.PID))
		if strings.Contains(string(cmdline), "--type=renderer") && syscall.Kill(p.PID, syscall.SIGSTOP) == nil {
			stopped++
		}
	}
	if stopped == 0 {
		t.Fatal("no renderer to stop")
	}

	kid.kill9(t)
	killed := time.Now()
	kid.cmd.Wait()
	for {
		left := proc.Find(ours)
		if len(left) == 0 {
			break
		}
		if time.Since(killed) > 30*time.Second { // hang guard
			var desc []string
			for _, p := range left {
				desc = append(desc, fmt.Sprintf("%d (parent %d)", p.PID, p.PPID))
			}
			t.Fatalf("%d of %d Chromium processes outlived the engine by 30 s: %s", len(left), len(before), strings.Join(desc, ", "))
		}
		time.Sleep(time.Millisecond)
	}
	t.Logf("all %d Chromium processes of the engine (%d of them stopped renderers) were gone %s after its SIGKILL",
		len(before), stopped, time.Since(killed).Round(time.Microsecond))

	// The dead engine's records of its browsers stay until the next engine
	// on the data directory sweeps them at its start.
	run := filepath.Join(dir, "browser", "run")
	if ents, _ := os.ReadDir(run); len(ents) != 2 {
		t.Fatalf("%d records in %s after the kill, want the two sessions'", len(ents), run)
	}
	newEngine(t, engine.Config{DataDir: dir, Tenants: map[string]engine.TenantConfig{"local": {Profile: "posix"}}})
	if ents, _ := os.ReadDir(run); len(ents) != 0 {
		t.Errorf("%d records in %s after the next start's sweep", len(ents), run)
	}
}
