package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlockhq/airlock/engine"
)

func TestHTTPVerbAuditTrail(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/away" {
			http.Redirect(w, r, "http://10.0.0.1/secret", http.StatusFound)
			return
		}
		fmt.Fprint(w, "hello")
	}))
	defer srv.Close()
	dd := t.TempDir()
	ctx := context.Background()

	r := invoke(t, ctx, "", []string{"http", "--data-dir", dd, "--except", "127.0.0.1", srv.URL + "/"})
	if r.code != 0 || r.stdout != "hello" {
		t.Fatalf("allowed fetch: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	r = invoke(t, ctx, "", []string{"http", "--data-dir", dd, "--except", "127.0.0.1", srv.URL + "/away"})
	if r.code != 3 || !strings.Contains(r.stderr, "private") {
		t.Fatalf("refused redirect: exit %d stderr %q", r.code, r.stderr)
	}
	r = invoke(t, ctx, "", []string{"http", "--data-dir", dd, srv.URL + "/"})
	if r.code != 3 {
		t.Fatalf("loopback without exception: exit %d", r.code)
	}

	r = invoke(t, ctx, "", []string{"audit", "query", "--data-dir", dd, "--outcome", "deny", "--format", "json"})
	if r.code != 0 {
		t.Fatalf("audit query: exit %d %s", r.code, r.stderr)
	}
	var reasons []string
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		if m["outcome"] != "deny" || m["broker"] != "http" || len(m["decision_id"].(string)) != 26 {
			t.Errorf("record %v", m)
		}
		reasons = append(reasons, m["reason"].(string))
	}
	if len(reasons) != 2 || reasons[0] != "loopback" || reasons[1] != "private" {
		t.Errorf("deny reasons newest first = %v, want [loopback private]", reasons)
	}
	r = invoke(t, ctx, "", []string{"audit", "stats", "--data-dir", dd})
	if r.code != 0 || !strings.Contains(r.stdout, "http") {
		t.Errorf("audit stats: %d %q", r.code, r.stdout)
	}
	r = invoke(t, ctx, "", []string{"audit", "tail", "--data-dir", dd, "-n", "1"})
	if r.code != 0 || strings.Count(strings.TrimSpace(r.stdout), "\n") != 0 || !strings.Contains(r.stdout, "loopback") {
		t.Errorf("audit tail -n 1: %d %q", r.code, r.stdout)
	}
}

func TestRevokeAndTokens(t *testing.T) {
	t.Parallel()
	dd := t.TempDir()
	ctx := context.Background()
	r := invoke(t, ctx, "", []string{"admin", "revoke", "--data-dir", dd, "local", "--reason", "test"})
	if r.code != 0 {
		t.Fatalf("revoke: %d %s", r.code, r.stderr)
	}
	r = invoke(t, ctx, "x", []string{"exchange", "--data-dir", dd, "tcp", "--except", "127.0.0.1", "127.0.0.1:9"})
	if r.code != 3 || !strings.Contains(r.stderr, "revoked") {
		t.Fatalf("exchange while revoked: %d %q", r.code, r.stderr)
	}
	r = invoke(t, ctx, "", []string{"admin", "revocations", "--data-dir", dd})
	if strings.TrimSpace(r.stdout) != "local" {
		t.Errorf("revocations = %q", r.stdout)
	}
	if r = invoke(t, ctx, "", []string{"admin", "unrevoke", "--data-dir", dd, "local"}); r.code != 0 {
		t.Fatalf("unrevoke: %d %s", r.code, r.stderr)
	}
	if r = invoke(t, ctx, "", []string{"admin", "unrevoke", "--data-dir", dd, "local"}); r.code != 4 {
		t.Errorf("unrevoke twice: exit %d, want 4 (not_found)", r.code)
	}
	r = invoke(t, ctx, "", []string{"token", "create", "--data-dir", dd, "--tenant", "local"})
	if r.code != 0 || !strings.HasPrefix(r.stdout, "alk_") {
		t.Fatalf("token create: %d %q %q", r.code, r.stdout, r.stderr)
	}
	if r = invoke(t, ctx, "", []string{"token", "create", "--data-dir", dd, "--tenant", "nobody"}); r.code != 4 {
		t.Errorf("token for unknown tenant: exit %d", r.code)
	}
	r = invoke(t, ctx, "", []string{"audit", "query", "--data-dir", dd, "--broker", "admin", "--format", "json"})
	if got := strings.Count(r.stdout, "\n"); got != 4 || !strings.Contains(r.stdout, `"code":"not_found"`) {
		t.Errorf("admin records = %d, want 4 (revoke, unrevoke twice, token create):\n%s", got, r.stdout)
	}
}

func TestConfigCheck(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	os.WriteFile(good, []byte(`
data_dir: `+dir+`
tenants:
  acme:
    profile: network
    allow: ["*.example.com"]
    secrets:
      hook: {env: ACME_HOOK_SECRET}
  local:
    profile: posix
egress:
  resolve:
    intranet.example: ["10.1.2.3"]
  exceptions: ["10.1.2.3:443"]
`), 0o600)
	secrets := map[string]string{"ACME_HOOK_SECRET": "hook-key"}
	r := invokeEnv(t, context.Background(), secrets, []string{"config", "check", "--config", good})
	if r.code != 0 || strings.Contains(r.stdout, "hook-key") || !strings.Contains(r.stdout, `"acme"`) || !strings.Contains(r.stdout, "ACME_HOOK_SECRET") || !strings.Contains(r.stdout, "intranet.example") {
		t.Fatalf("config check: %d %s %s", r.code, r.stdout, r.stderr)
	}
	// A secret the engine could not read fails the check as it fails a
	// start.
	if r := invokeEnv(t, context.Background(), nil, []string{"config", "check", "--config", good}); r.code != 2 || !strings.Contains(r.stderr, "ACME_HOOK_SECRET is not set") {
		t.Errorf("config check without the secret: exit %d %q, want 2 naming ACME_HOOK_SECRET", r.code, r.stderr)
	}
	for name, body := range map[string]string{
		"unknown key":       "tenants:\n  a:\n    profil: posix\n",
		"unknown profile":   "tenants:\n  a:\n    profile: superuser\n",
		"plain token":       "tenants:\n  a:\n    tokens: [hunter2]\n",
		"bad pattern":       "egress:\n  allow: ['10.0.0.0/99']\n",
		"bad yaml":          "tenants: [\n",
		"unknown serve key": "serve:\n  lisen: 127.0.0.1:1\n",
		"unknown top key":   "bogus: 1\n",
	} {
		p := filepath.Join(dir, strings.ReplaceAll(name, " ", "_")+".yaml")
		os.WriteFile(p, []byte(body), 0o600)
		if r := invoke(t, context.Background(), "", []string{"config", "check", "--config", p}); r.code != 2 {
			t.Errorf("%s: exit %d, want 2 (stderr %q)", name, r.code, r.stderr)
		}
	}
	// The environment overrides the file; flags override both.
	var out bytes.Buffer
	e := &env{stdin: strings.NewReader(""), stdout: &out, stderr: &out, environ: []string{"AIRLOCK_DATA_DIR=/from/env", "AIRLOCK_LIMITS__TENANT_RATE=7", "AIRLOCK_EGRESS__EXCEPTIONS=10.9.9.9,10.8.8.8"},
		getenv: func(k string) string { return secrets[k] }}
	if code := run(context.Background(), e, []string{"config", "check", "--config", good}, commands); code != 0 {
		t.Fatalf("env config: %d %s", code, out.String())
	}
	if s := out.String(); !strings.Contains(s, `"data_dir": "/from/env"`) || !strings.Contains(s, `"tenant_rate": 7`) || !strings.Contains(s, "10.8.8.8") {
		t.Errorf("environment not applied:\n%s", s)
	}
	out.Reset()
	e.dataDir = ""
	if code := run(context.Background(), e, []string{"config", "check", "--config", good, "--data-dir", "/from/flag"}, commands); code != 0 || !strings.Contains(out.String(), `"data_dir": "/from/flag"`) {
		t.Errorf("flag did not win: %s", out.String())
	}
}

// exampleSecrets are the secrets and credentials airlock.example.yaml
// names.
var exampleSecrets = map[string]string{"ACME_WEBHOOK_SECRET": "webhook-key", "OPENAI_API_KEY": "sk-example"}

func TestExampleConfigIsValid(t *testing.T) {
	t.Parallel()
	r := invokeEnv(t, context.Background(), exampleSecrets, []string{"config", "check", "--config", "../../airlock.example.yaml"})
	if r.code != 0 {
		t.Fatalf("airlock.example.yaml: exit %d: %s", r.code, r.stderr)
	}
}

func TestTokenHashAndGenerate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	want := engine.HashToken("alk_secret")
	for _, tc := range []struct {
		stdin string
		args  []string
	}{
		{"", []string{"token", "hash", "alk_secret"}},
		{"alk_secret\n", []string{"token", "hash"}},
	} {
		r := invoke(t, ctx, tc.stdin, tc.args)
		if r.code != 0 || strings.TrimSpace(r.stdout) != want {
			t.Errorf("%v: %d %q, want %q", tc.args, r.code, r.stdout, want)
		}
	}
	if r := invoke(t, ctx, "", []string{"token", "hash"}); r.code != 2 {
		t.Errorf("token hash with no token: exit %d, want 2", r.code)
	}
	r := invoke(t, ctx, "", []string{"token", "generate", "--format", "json"})
	var g struct{ Token, Hash string }
	if err := json.Unmarshal([]byte(r.stdout), &g); err != nil || r.code != 0 {
		t.Fatalf("token generate: %d %q %v", r.code, r.stdout, err)
	}
	if !strings.HasPrefix(g.Token, "alk_") || g.Hash != engine.HashToken(g.Token) {
		t.Errorf("token generate = %+v", g)
	}
}

func TestConfigCheckCatchesEngineErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tc := range []struct{ yaml, want string }{
		{"egress:\n  tls_profile: bogus\n", "unknown TLS profile"},
		{"browse:\n  provider: nosuch\n", "nosuch"},
		{"egress:\n  bogus: 1\n", ":2: unknown key egress.bogus"},
		{"browser:\n  policy:\n    default_action: maybe\n", "default_action"},
		{"browser:\n  policy:\n    allowed_origins: [\"ftp://x.test\"]\n", "allowed_origins: \"ftp://x.test\""},
	} {
		f := filepath.Join(dir, fmt.Sprintf("c%d.yaml", len(tc.want)))
		if err := os.WriteFile(f, []byte(tc.yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		r := invoke(t, context.Background(), "", []string{"config", "check", "--config", f})
		if r.code != 2 || !strings.Contains(r.stderr, tc.want) || strings.Contains(r.stderr, "; ;") {
			t.Errorf("%q: exit %d %q, want 2 and %q", tc.yaml, r.code, r.stderr, tc.want)
		}
	}
	r := invokeEnv(t, context.Background(), exampleSecrets, []string{"config", "check", "--config", filepath.Join("..", "..", "airlock.example.yaml")})
	if r.code != 0 || !strings.Contains(r.stdout, `"drain_timeout": "10s"`) {
		t.Errorf("durations should read like the file: %d %s", r.code, r.stdout)
	}
}
