package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestRunGuest(t *testing.T) {
	t.Parallel() // waits for the guests TestMain builds: overlaps the other tests
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "<html><head><title>Guest target</title></head><body><h1>Heading</h1><p>First sentence here. Second one. Third.</p></body></html>")
	}))
	defer srv.Close()
	dir := t.TempDir()
	data := filepath.Join(dir, "data") // shared: the compilation cache lives here
	summarise, compiledOnce := guestIn(t, "examples/guests/summarise", data)
	defer compiledOnce()
	ctx := context.Background()

	t.Run("compute does not link a fetching guest", func(t *testing.T) {
		r := invoke(t, ctx, "", []string{"--data-dir", data, "run", summarise, "--", srv.URL})
		if r.code != 3 || !strings.Contains(r.stderr, "airlock.browse_fetch is not granted by profile compute") {
			t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
		}
		if r.stdout != "" {
			t.Fatalf("the guest ran: %q", r.stdout)
		}
	})
	t.Run("network fetches an excepted loopback page", func(t *testing.T) {
		r := invoke(t, ctx, "", []string{"--data-dir", data, "run", summarise, "--profile", "network", "--except", "127.0.0.1", "--", srv.URL, "2"})
		if r.code != 0 || !strings.HasPrefix(r.stdout, "# Guest target\n") || !strings.Contains(r.stdout, "First sentence here. Second one.\n") {
			t.Fatalf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
		}
	})
	t.Run("the floor still applies: the guest's own exit code", func(t *testing.T) {
		r := invoke(t, ctx, "", []string{"--data-dir", data, "run", summarise, "--profile", "network", "--", srv.URL})
		// The guest exits 3 on a denial; airlock reports it as a guest exit.
		if r.code != 3 || !strings.Contains(r.stderr, "loopback") || !strings.Contains(r.stderr, "the guest exited with code 3") {
			t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
		}
	})
	t.Run("unknown profile is a configuration error", func(t *testing.T) {
		r := invoke(t, ctx, "", []string{"--data-dir", data, "run", summarise, "--profile", "nope"})
		if r.code != 2 || !strings.Contains(r.stderr, `unknown profile "nope"`) {
			t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
		}
	})
	t.Run("missing file", func(t *testing.T) {
		r := invoke(t, ctx, "", []string{"--data-dir", data, "run", filepath.Join(dir, "absent.wasm")})
		if r.code != 2 {
			t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
		}
	})
}

func TestGuestExitStatus(t *testing.T) {
	var err error = &guestExitError{code: 7}
	var s interface{ ExitStatus() int }
	if !errors.As(err, &s) || s.ExitStatus() != 7 {
		t.Fatalf("ExitStatus of %v", err)
	}
}

func TestServeGuest(t *testing.T) {
	t.Parallel() // waits for the guests TestMain builds: overlaps the other tests
	dir := t.TempDir()
	handler, compiledOnce := guestIn(t, "examples/guests/handler", filepath.Join(dir, "data"))
	defer compiledOnce()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan result, 1)
	go func() {
		var stderr strings.Builder
		e := &env{stdin: strings.NewReader(""), stdout: pw, stderr: &stderr}
		code := run(ctx, e, []string{"--data-dir", filepath.Join(dir, "data"), "serve-guest", handler, "--listen", "127.0.0.1:0", "--profile", "network"}, commands)
		pw.Close()
		done <- result{code: code, stderr: stderr.String()}
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("no banner: %v (%+v)", err, <-done)
	}
	go io.Copy(io.Discard, pr)
	_, rest, _ := strings.Cut(line, "http://")
	base := "http://" + strings.Fields(rest)[0]
	resp, err := http.Get(base + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(string(body), "hello from a guest") || resp.Header.Get("X-Airlock-Decision") == "" {
		t.Fatalf("GET /: %d %q %v", resp.StatusCode, body, resp.Header)
	}
	resp, err = http.Get(base + "/title?url=http://169.254.169.254/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 502 || !strings.HasPrefix(string(body), "outbound=blocked code=denied reason=metadata") {
		t.Fatalf("pivot: %d %q", resp.StatusCode, body)
	}
	cancel()
	select {
	case r := <-done:
		if r.code != 0 {
			t.Fatalf("serve-guest exited %d: %s", r.code, r.stderr)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve-guest did not stop")
	}
}

// A negative budget, from a flag or the config file, is refused before
// any guest is compiled.
func TestServeGuestBudgetConfig(t *testing.T) {
	dir := t.TempDir()
	wasm := filepath.Join(dir, "any.wasm")
	if err := os.WriteFile(wasm, []byte("\x00asm\x01\x00\x00\x00"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "airlock.yaml")
	if err := os.WriteFile(cfg, []byte("guests:\n  memory_mib: -1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"serve-guest", wasm, "--data-dir", filepath.Join(dir, "data"), "--listen", "127.0.0.1:0", "--instances", "-1"},
		{"serve-guest", wasm, "--data-dir", filepath.Join(dir, "data"), "--listen", "127.0.0.1:0", "--config", cfg},
	} {
		if r := invoke(t, context.Background(), "", args); r.code != 2 || !strings.Contains(r.stderr, "negative") {
			t.Fatalf("%v: exit %d %s, want 2 naming the negative budget", args, r.code, r.stderr)
		}
	}
}
