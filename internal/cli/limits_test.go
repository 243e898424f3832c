package cli

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// TestExchangeMaxReplyCeiling is issue 14's finding 1 on the CLI:
// `exchange --max-reply 2000000000` is refused (exit 2, reason limit)
// before the peer is dialled; so is a 1000h timeout.
func TestExchangeMaxReplyCeiling(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var accepted atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	dd := t.TempDir()
	for _, flags := range [][]string{{"--max-reply", "2000000000"}, {"--timeout", "1000h"}} {
		args := append([]string{"exchange", "--data-dir", dd, "tcp", "--except", "127.0.0.1"}, flags...)
		r := invoke(t, context.Background(), "ping", append(args, ln.Addr().String()))
		if r.code != 2 || !strings.Contains(r.stderr, "is above the ceiling") || !strings.Contains(r.stderr, "(limits.exchange_") {
			t.Errorf("%v: exit %d stderr %q, want 2 and the ceiling", flags, r.code, r.stderr)
		}
	}
	if n := accepted.Load(); n != 0 {
		t.Errorf("the peer was dialled %d times", n)
	}
}

// TestHTTPMaxRedirectsCeiling is issue 14's finding 2 on the CLI: with
// egress.max_redirects 3, `--max-redirects 1000000000` is refused before
// any request.
func TestHTTPMaxRedirectsCeiling(t *testing.T) {
	t.Parallel()
	var hits atomic.Int64
	loop := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.Redirect(w, r, "/", http.StatusFound)
	}))
	defer loop.Close()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "airlock.yaml")
	os.WriteFile(cfg, []byte("data_dir: "+dir+"\negress:\n  max_redirects: 3\n  exceptions: [127.0.0.1]\n"), 0o600)
	r := invoke(t, context.Background(), "", []string{"http", "--config", cfg, "--max-redirects", "1000000000", loop.URL})
	if r.code != 2 || !strings.Contains(r.stderr, "max_redirects 1000000000 is above the ceiling 3 (limits.max_redirects)") {
		t.Errorf("exit %d stderr %q", r.code, r.stderr)
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("upstream saw %d requests", n)
	}
}

// TestConfigLimits: limits.* keys (beside the rate limits) and
// tenants.<t>.limits.* load and show in config check; a misspelt one is
// refused.
func TestConfigLimits(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	os.WriteFile(good, []byte("data_dir: "+dir+"\nlimits:\n  tenant_rate: 5\n  exchange_max_reply: 4096\n  crawl_delay: 2s\ntenants:\n  local:\n    allow_ignore_robots: true\n    limits:\n      crawl_per_host_concurrency: 2\n"), 0o600)
	r := invoke(t, context.Background(), "", []string{"config", "check", "--config", good})
	if r.code != 0 || !strings.Contains(r.stdout, `"exchange_max_reply": 4096`) || !strings.Contains(r.stdout, `"crawl_delay": "2s"`) ||
		!strings.Contains(r.stdout, `"crawl_per_host_concurrency": 2`) || !strings.Contains(r.stdout, `"allow_ignore_robots": true`) {
		t.Fatalf("config check: %d %s %s", r.code, r.stdout, r.stderr)
	}
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("limits:\n  exchange_max_replies: 4096\n"), 0o600)
	if r := invoke(t, context.Background(), "", []string{"config", "check", "--config", bad}); r.code != 2 || !strings.Contains(r.stderr, "exchange_max_replies") {
		t.Errorf("misspelt limit: exit %d stderr %q", r.code, r.stderr)
	}
}
