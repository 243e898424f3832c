package cli

import (
	"context"
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
