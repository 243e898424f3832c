package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConfigErrorsNameLine: a configuration problem names the file and
// the line of the key (the environment variable, for one from the
// environment), an unknown key suggests the closest known one, and a
// value of the wrong type is a sentence naming the key and the type.
func TestConfigErrorsNameLine(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tt := range []struct {
		name, yaml string
		env        []string
		want       []string
		notWant    []string
	}{
		{
			name: "top level",
			yaml: "bogus: 1\negres:\n  max_redirects: 3\n",
			want: []string{":2: unknown key egres (did you mean egress?)", ":1: unknown key bogus"},
			// bogus is nothing like a known key: no suggestion.
			notWant: []string{"bogus (did you mean"},
		},
		{
			name: "nested",
			yaml: "egress:\n  fetch_timeout: 5s\n  max_redirectz: 3\n",
			want: []string{":3: unknown key egress.max_redirectz (did you mean egress.max_redirects?)"},
		},
		{
			name: "under a map",
			yaml: "tenants:\n  acme:\n    profile: posix\n    limits:\n      exchange_max_replies: 4096\n",
			want: []string{":5: unknown key tenants.acme.limits.exchange_max_replies (did you mean tenants.acme.limits.exchange_max_reply?)"},
		},
		{
			name:    "type",
			yaml:    "egress:\n  max_redirects: \"x\"\n",
			want:    []string{`:2: egress.max_redirects must be a whole number, not "x"`},
			notWant: []string{"strconv", "ParseInt"},
		},
		{
			name: "duration",
			yaml: "\n\nlimits:\n  fetch_timeout: soon\n",
			want: []string{`:4: limits.fetch_timeout must be a duration such as 20s or 1m30s, not "soon"`},
		},
		{
			name: "wrong level",
			yaml: "fetch_timeout: 5s\npin_dns: true\n",
			want: []string{
				":1: unknown key fetch_timeout (did you mean egress.fetch_timeout or limits.fetch_timeout?)",
				":2: unknown key pin_dns (did you mean egress.pin_dns?)",
			},
		},
		{
			name: "not a mapping",
			yaml: "- egress\n",
			want: []string{":1: the configuration must be a mapping of keys to values, not a list"},
		},
		{
			// Each anchor is checked once: 9^11 expansions would hang.
			name: "aliases",
			yaml: laughs(11),
			want: []string{":1: unknown key tenants.t.rote (did you mean tenants.t.rate?)"},
		},
		{
			name: "environment",
			env:  []string{"AIRLOCK_EGRESS__MAX_REDIRECTZ=3", "AIRLOCK_LIMITS__TENANT_RATE=fast"},
			want: []string{
				"AIRLOCK_EGRESS__MAX_REDIRECTZ: unknown key egress.max_redirectz (did you mean egress.max_redirects?)",
				`AIRLOCK_LIMITS__TENANT_RATE: limits.tenant_rate must be a number, not "fast"`,
			},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := ""
			if tt.yaml != "" {
				path = filepath.Join(dir, strings.ReplaceAll(tt.name, " ", "_")+".yaml")
				if err := os.WriteFile(path, []byte(tt.yaml), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			_, _, err := loadConfig(path, tt.env)
			if err == nil {
				t.Fatalf("loadConfig: no error, want %q", tt.want)
			}
			got := err.Error()
			for _, w := range tt.want {
				if path != "" && strings.HasPrefix(w, ":") {
					w = path + w
				}
				if !strings.Contains(got, w) {
					t.Errorf("got %q\nwant it to contain %q", got, w)
				}
			}
			for _, nw := range tt.notWant {
				if strings.Contains(got, nw) {
					t.Errorf("got %q, want no %q", got, nw)
				}
			}
		})
	}
	// The command line says the same, in one line, exit 2.
	f := filepath.Join(dir, "cli.yaml")
	os.WriteFile(f, []byte("bogus: 1\negres:\n  max_redirects: 3\n"), 0o600)
	r := invoke(t, context.Background(), "", []string{"config", "check", "--config", f})
	if r.code != 2 || !strings.Contains(r.stderr, f+":2: unknown key egres (did you mean egress?)") {
		t.Errorf("config check: exit %d, stderr %q", r.code, r.stderr)
	}
}

// laughs is a file whose tenant t merges 9^n mappings (the last one
// with an unknown key).
func laughs(n int) string {
	var b strings.Builder
	b.WriteString("a0: &a0 {profile: posix, rote: 1}\n")
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "a%d: &a%d {<<: [%s]}\n", i, i, strings.Repeat(fmt.Sprintf("*a%d, ", i-1), 8)+fmt.Sprintf("*a%d", i-1))
	}
	fmt.Fprintf(&b, "tenants:\n  t: *a%d\n", n)
	return b.String()
}

func TestLevenshtein(t *testing.T) {
	for _, tt := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"", "abc", 3}, {"egres", "egress", 1}, {"kitten", "sitting", 3},
		{"max_redirectz", "max_redirects", 1}, {"flaw", "lawn", 2}, {"é", "e", 1},
	} {
		if got := levenshtein(tt.a, tt.b); got != tt.want {
			t.Errorf("levenshtein(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
		if got := levenshtein(tt.b, tt.a); got != tt.want {
			t.Errorf("levenshtein(%q, %q) = %d, want %d", tt.b, tt.a, got, tt.want)
		}
	}
}

// TestConfigCheckEffective: config check of an empty configuration prints
// the values a start would use (the defaults of docs/configuration.md),
// durations in Go's format, never 0 or "0s" for an unset key.
func TestConfigCheckEffective(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	f := filepath.Join(dir, "empty.yaml")
	if err := os.WriteFile(f, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	r := invoke(t, context.Background(), "", []string{"config", "check", "--config", f})
	if r.code != 0 {
		t.Fatalf("config check: exit %d, stderr %q", r.code, r.stderr)
	}
	var out struct{ Config map[string]any }
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatal(err)
	}
	// The defaults docs/configuration.md states, by key.
	want := map[string]any{
		"data_dir":                                 "./airlock-data",
		"egress.fetch_timeout":                     "20s",
		"egress.max_redirects":                     5.0,
		"egress.max_body_bytes":                    10485760.0,
		"egress.max_decoded_bytes":                 52428800.0,
		"egress.tls_profile":                       "chrome",
		"limits.tenant_rate":                       2000.0,
		"limits.connect_window":                    "10s",
		"limits.exchange_max_reply":                1048576.0,
		"limits.exchange_timeout":                  "10s",
		"limits.udp_max_reply":                     65535.0,
		"limits.udp_timeout":                       "5s",
		"limits.max_redirects":                     5.0,
		"limits.http_body":                         10485760.0,
		"limits.crawl_concurrency":                 64.0,
		"limits.crawl_max_pages":                   10000.0,
		"limits.crawl_timeout":                     "2m0s",
		"limits.crawl_delay":                       "1m0s",
		"limits.fetch_timeout":                     "2m0s",
		"limits.fetch_many_urls":                   64.0,
		"limits.search_results":                    100.0,
		"limits.list_limit":                        500.0,
		"limits.mcp_max_length":                    1000000.0,
		"limits.page_cache_bytes":                  16777216.0,
		"budgets.tenant.crawls":                    16.0,
		"audit.retention":                          "720h0m0s",
		"browse.provider":                          "native",
		"browse.batch_max":                         64.0,
		"browse.batch_concurrency":                 16.0,
		"browse.batch_timeout":                     "15s",
		"browse.page_cache_bytes":                  67108864.0,
		"browse.page_cache_ttl":                    "5m0s",
		"browser.exec_path":                        "/usr/lib/chromium/chromium",
		"browser.max_sessions":                     4.0,
		"browser.idle_timeout":                     "10m0s",
		"browser.op_timeout":                       "1m0s",
		"browser.ask_timeout":                      "30s",
		"browser.approve_via_elicitation":          "local",
		"browser.policy.default_action":            "deny",
		"state.crawl_lease":                        "15s",
		"serve.listen":                             "127.0.0.1:8080",
		"serve.max_body_bytes":                     1048576.0,
		"serve.drain_timeout":                      "10s",
		"tenants.local.profile":                    "posix",
		"tenants.local.rate":                       2000.0,
		"tenants.local.burst":                      2000.0,
		"tenants.local.budgets.crawls":             16.0,
		"tenants.local.limits.crawl_delay":         "1m0s",
		"tenants.local.limits.max_redirects":       5.0,
		"tenants.local.identities.model.identity":  "airlock",
		"tenants.local.identities.model.robots":    "obey",
		"tenants.local.identities.person.identity": "chrome",
		"tenants.local.identities.person.robots":   "ignore",
	}
	got := map[string]any{}
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		if m, ok := v.(map[string]any); ok {
			for k, e := range m {
				walk(joinKey(prefix, k), e)
			}
			return
		}
		got[prefix] = v
	}
	walk("", out.Config)
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s = %v, want %v", k, got[k], w)
		}
	}
	// No numeric or duration leaf is left at zero unless its documented
	// default is zero or none.
	zeroOK := map[string]bool{
		"guests.client_instances": true, // a quarter of the served guest's instances: known per guest
	}
	for k, v := range got {
		if (v == 0.0 || v == "0s") && !zeroOK[k] {
			t.Errorf("%s = %v: an unset key shows 0, not its default", k, v)
		}
	}
}

// TestConfigCheckEffectiveTenant: a tenant's printed limits are its own
// overrides over the global values, and what it leaves out shows the
// defaults of a tenant that is not local.
func TestConfigCheckEffectiveTenant(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	f := filepath.Join(dir, "acme.yaml")
	yaml := "egress:\n  max_redirects: -1\nlimits:\n  crawl_delay: 2s\ndefault_tenant: acme\ntenants:\n  acme:\n    rate: 5\n    limits:\n      crawl_max_pages: 7\n"
	if err := os.WriteFile(f, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	r := invoke(t, context.Background(), "", []string{"config", "check", "--config", f})
	if r.code != 0 {
		t.Fatalf("config check: exit %d, stderr %q", r.code, r.stderr)
	}
	var out struct {
		Config struct {
			Egress struct {
				MaxRedirects int `json:"max_redirects"`
			}
			Tenants map[string]struct {
				Profile    string
				Rate       float64
				Burst      int
				Initiators []string
				Identities map[string]struct{ Identity, Robots string }
				Limits     map[string]any
			}
		}
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatal(err)
	}
	if got := out.Config.Egress.MaxRedirects; got != -1 {
		t.Errorf("egress.max_redirects = %d, want -1 (none followed) as set", got)
	}
	acme := out.Config.Tenants["acme"]
	if acme.Profile != "compute" || acme.Rate != 5 || acme.Burst != 1 || len(acme.Initiators) != 1 || acme.Initiators[0] != "model" {
		t.Errorf("acme = %+v, want profile compute, rate 5, burst 1, initiators [model]", acme)
	}
	if id := acme.Identities["model"]; id.Identity != "airlock" || id.Robots != "obey" || len(acme.Identities) != 1 {
		t.Errorf("acme identities = %+v, want model only: airlock, obey", acme.Identities)
	}
	for k, want := range map[string]any{"crawl_max_pages": 7.0, "crawl_delay": "2s", "crawl_depth": 100.0, "fetch_timeout": "2m0s"} {
		if got := acme.Limits[k]; got != want {
			t.Errorf("tenants.acme.limits.%s = %v, want %v", k, got, want)
		}
	}
}

// FuzzCheckConfig: no file and no variable makes the checks panic or
// hang, and whatever they refuse names where.
func FuzzCheckConfig(f *testing.F) {
	for _, s := range []string{"", "bogus: 1\n", "egress:\n  max_redirects: x\n", "- a\n", laughs(2), "a: &a\n  b: *a\n",
		"tenants:\n  t:\n    <<: [*x]\n", "egress: [1, {a: b}]\n", "limits: {fetch_timeout: 1.5, tenant_rate: 1e3}\n"} {
		f.Add(s, "EGRESS__MAX_REDIRECTS=3")
	}
	f.Fuzz(func(t *testing.T, file, env string) {
		for _, p := range checkYAML("f.yaml", []byte(file)) {
			if !strings.HasPrefix(p.where, "f.yaml") || p.msg == "" {
				t.Errorf("problem %+v names no place or says nothing", p)
			}
		}
		for _, p := range checkEnv([]string{"AIRLOCK_" + env}) {
			if !strings.HasPrefix(p.where, "AIRLOCK_") || p.msg == "" {
				t.Errorf("problem %+v names no variable or says nothing", p)
			}
		}
	})
}
