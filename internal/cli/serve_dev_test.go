package cli

import (
	"context"
	"net"
	"regexp"
	"strings"
	"testing"
	"time"
)

// stopServe stops s as SIGINT would and waits for it to exit.
func stopServe(t *testing.T, s *served) {
	t.Helper()
	s.stop()
	select {
	case c := <-s.code:
		s.code <- c // for the cleanup of startServe
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop")
	}
}

var tokenIDRe = regexp.MustCompile(`(?m)^(sha256:[0-9a-f]{12})\s+local\s+`)

func TestServeDevTokensDoNotPileUp(t *testing.T) {
	t.Parallel()
	dd := t.TempDir()
	first := startServe(t, "--data-dir", dd, "--listen", "127.0.0.1:0")
	stopServe(t, first)

	second := startServe(t, "--data-dir", dd, "--listen", "127.0.0.1:0")
	if second.token == first.token {
		t.Fatal("the same token twice")
	}
	banner := second.stdout.String()
	if !strings.Contains(banner, "revoked 1 earlier development token") || !strings.Contains(banner, "airlock token list") || !strings.Contains(banner, "airlock token revoke") {
		t.Errorf("the banner does not say the earlier development token was revoked, nor how to manage tokens:\n%s", banner)
	}
	if code, _, out := second.do(t, "GET", "/api/crawls", first.token, ""); code != 401 {
		t.Errorf("the first run's token after a restart: %d %s, want 401", code, out)
	}
	if code, _, out := second.do(t, "GET", "/api/crawls", second.token, ""); code != 200 {
		t.Errorf("the new token: %d %s", code, out)
	}

	// token list and token revoke work on the same store, while serve runs.
	r := invoke(t, context.Background(), "", []string{"token", "list", "--data-dir", dd})
	ids := tokenIDRe.FindAllStringSubmatch(r.stdout, -1)
	if r.code != 0 || len(ids) != 1 || !strings.Contains(r.stdout, "development token") {
		t.Fatalf("token list: exit %d, %d tokens, want 1 development token:\n%s%s", r.code, len(ids), r.stdout, r.stderr)
	}
	r = invoke(t, context.Background(), "", []string{"token", "revoke", "--data-dir", dd, ids[0][1]})
	if r.code != 0 || !strings.Contains(r.stdout, "revoked "+ids[0][1]) {
		t.Fatalf("token revoke: %d %q %q", r.code, r.stdout, r.stderr)
	}
	if code, _, out := second.do(t, "GET", "/api/crawls", second.token, ""); code != 401 {
		t.Errorf("a revoked token: %d %s, want 401", code, out)
	}
	if r = invoke(t, context.Background(), "", []string{"token", "revoke", "--data-dir", dd, ids[0][1]}); r.code != 4 || !strings.Contains(r.stderr, "not_found") && !strings.Contains(r.stderr, "no stored API token") {
		t.Errorf("revoking it again: %d %q", r.code, r.stderr)
	}
	if r = invoke(t, context.Background(), "", []string{"token", "revoke", "--data-dir", dd, "sha256:ab"}); r.code != 2 {
		t.Errorf("a short id: %d %q, want 2", r.code, r.stderr)
	}
}

func TestServeChecksPortBeforeMinting(t *testing.T) {
	t.Parallel()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	dd := t.TempDir()
	r := invoke(t, context.Background(), "", []string{"serve", "--data-dir", dd, "--listen", taken.Addr().String()})
	if r.code == 0 || !strings.Contains(r.stderr, "listen") {
		t.Fatalf("serve on a taken port: exit %d %q", r.code, r.stderr)
	}
	if strings.Contains(r.stdout, "token") {
		t.Errorf("a token was printed although serve could not listen: %q", r.stdout)
	}
	r = invoke(t, context.Background(), "", []string{"token", "list", "--data-dir", dd})
	if tokenIDRe.MatchString(r.stdout) {
		t.Errorf("serve minted a token before finding its port taken:\n%s", r.stdout)
	}
}

func TestServeBannerTryWorksOffline(t *testing.T) {
	t.Parallel()
	s := startServe(t, "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0")
	banner := s.stdout.String()
	try := banner[strings.Index(banner, "  try"):strings.Index(banner, "MCP (streamable HTTP)")]
	if strings.Contains(try, "https://example.com/") && !strings.Contains(try, "needs the internet") {
		t.Errorf("the try example needs the internet and does not say so:\n%s", try)
	}
	// With a loopback page excepted from the floor, the example fetches it.
	s = startServe(t, "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--except", "127.0.0.1:8000")
	m := bannerCurl.FindStringSubmatch(s.stdout.String())
	if m == nil || !strings.Contains(m[1], `"url":"http://127.0.0.1:8000/"`) {
		t.Errorf("with --except 127.0.0.1:8000 the try example should fetch it:\n%s", s.stdout.String())
	}
}
