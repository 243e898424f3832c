package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMCPAllowOrigin: `airlock mcp` with no origin allowed refuses every
// navigate (default deny); --allow-origin lets the agent's browser load that
// origin, and only that one.
func TestMCPAllowOrigin(t *testing.T) {
	t.Parallel()
	srv := browseSite()
	t.Cleanup(srv.Close) // after the parallel subtests
	ctx := context.Background()
	nav := func(t *testing.T, args ...string) (string, bool) {
		t.Helper()
		cs, stderr, wait, err := startMCP(t, ctx, nil, append([]string{"--data-dir", t.TempDir(), "--except", "127.0.0.1"}, args...)...)
		if err != nil {
			t.Fatal(err)
		}
		out, isErr := mcpCall(t, ctx, cs, "browser_navigate", map[string]any{"url": srv.URL + "/"})
		mcpCall(t, ctx, cs, "browser_close", map[string]any{})
		if code := wait(); code != 0 {
			t.Fatalf("exit %d, stderr %q", code, stderr.String())
		}
		return out, isErr
	}
	// Each case starts its own airlock mcp and browser.
	t.Run("no origin allowed", func(t *testing.T) {
		t.Parallel()
		if out, isErr := nav(t); !isErr {
			t.Errorf("navigate with no origin allowed: %s", out)
		}
	})
	t.Run("allow-origin", func(t *testing.T) {
		t.Parallel()
		if out, isErr := nav(t, "--allow-origin", srv.URL); isErr || !strings.Contains(out, "Page: "+srv.URL+"/") {
			t.Errorf("navigate with --allow-origin %s: %v %s", srv.URL, isErr, out)
		}
	})
	t.Run("another origin allowed", func(t *testing.T) {
		t.Parallel()
		if out, isErr := nav(t, "--allow-origin", "http://127.0.0.1:1"); !isErr {
			t.Errorf("navigate with another origin allowed: %s", out)
		}
	})
	t.Run("browser-default allow", func(t *testing.T) {
		t.Parallel()
		if out, isErr := nav(t, "--browser-default", "allow"); isErr || !strings.Contains(out, "Page: "+srv.URL+"/") {
			t.Errorf("navigate with --browser-default allow: %v %s", isErr, out)
		}
	})
}

// TestBrowserFlagsRefused: a bad --browser-default is a usage error, and
// airlock serve refuses the browser flags once tenants are configured (they
// shape the development tenant only).
func TestBrowserFlagsRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	if r := invoke(t, ctx, "", []string{"mcp", "--browser-default", "maybe"}); r.code != 2 || !strings.Contains(r.stderr, "default_action") {
		t.Errorf("mcp --browser-default maybe: exit %d, stderr %q", r.code, r.stderr)
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "airlock.yaml")
	yaml := "tenants:\n  acme:\n    profile: posix\n    tokens: [\"sha256:" + strings.Repeat("ab", 32) + "\"]\n"
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	r := invoke(t, ctx, "", []string{"serve", "--config", cfg, "--data-dir", dir, "--listen", "127.0.0.1:0", "--allow-origin", "http://127.0.0.1:8080"})
	if r.code != 2 || !strings.Contains(r.stderr, "development tenant only") {
		t.Errorf("serve --allow-origin with tenants configured: exit %d, stderr %q", r.code, r.stderr)
	}
}
