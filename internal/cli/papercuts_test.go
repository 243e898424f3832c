package cli

import (
	"context"
	"strings"
	"testing"
)

// TestAuditOutcomeValidated: an outcome that no record can have ("denied";
// the stored value is "deny") is a usage error naming the valid ones, not
// an empty answer.
func TestAuditOutcomeValidated(t *testing.T) {
	data := t.TempDir()
	ctx := context.Background()
	for _, sub := range []string{"query", "tail"} {
		r := invoke(t, ctx, "", []string{"--data-dir", data, "audit", sub, "--outcome", "denied"})
		if r.code != 2 || !strings.Contains(r.stderr, `"denied"`) || !strings.Contains(r.stderr, "allow, deny or error") {
			t.Errorf("audit %s --outcome denied: exit %d, stderr %q; want 2 and the valid outcomes", sub, r.code, r.stderr)
		}
	}
	if r := invoke(t, ctx, "", []string{"--data-dir", data, "audit", "query", "--outcome", "deny"}); r.code != 0 {
		t.Errorf("audit query --outcome deny: exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestUnknownCommandSuggests: a mistyped command gets cobra's "did you
// mean", at the root and below it.
func TestUnknownCommandSuggests(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"fetc", "https://example.com/"}, "did you mean fetch?"},
		{[]string{"serach"}, "did you mean search?"},
		{[]string{"audit", "qurey"}, "did you mean query?"},
	} {
		r := invoke(t, context.Background(), "", tt.args)
		if r.code != 2 || !strings.Contains(r.stderr, tt.want) {
			t.Errorf("%q: exit %d, stderr %q; want 2 and %q", tt.args, r.code, r.stderr, tt.want)
		}
	}
}

// TestFormatHelpDefault: each verb's help states its real --format default.
func TestFormatHelpDefault(t *testing.T) {
	for _, tt := range []struct{ cmd, def string }{
		{"fetch", "md"}, {"crawl", "jsonl"}, {"search", "text"}, {"audit", "text"},
	} {
		r := invoke(t, context.Background(), "", []string{tt.cmd, "--help"})
		var line string
		for _, l := range strings.Split(r.stdout, "\n") {
			if strings.Contains(l, "--format") && strings.Contains(l, "output format") {
				line = l
			}
		}
		if r.code != 0 || !strings.HasSuffix(line, "(default "+tt.def+")") {
			t.Errorf("%s --help: exit %d, --format line %q; want default %s", tt.cmd, r.code, line, tt.def)
		}
	}
	// The help of one command does not change another's.
	r := invoke(t, context.Background(), "", []string{"--help"})
	if !strings.Contains(r.stdout, "(default text)") {
		t.Errorf("airlock --help: %q", r.stdout)
	}
}

// TestExtractMissingFile: a file that is not there is a usage error (exit
// 2), like any other bad argument.
func TestExtractMissingFile(t *testing.T) {
	r := invoke(t, context.Background(), "", []string{"extract", t.TempDir() + "/missing.html"})
	if r.code != 2 || !strings.Contains(r.stderr, "missing.html") {
		t.Errorf("extract of a missing file: exit %d, stderr %q; want 2", r.code, r.stderr)
	}
}

// TestFetchTimeoutFlag: fetch takes --timeout, refused above its ceiling.
func TestFetchTimeoutFlag(t *testing.T) {
	r := invoke(t, context.Background(), "", []string{"--data-dir", t.TempDir(), "fetch", "--timeout", "1h", "http://127.0.0.1:1/"})
	if r.code != 2 || !strings.Contains(r.stderr, "fetch_timeout") {
		t.Errorf("fetch --timeout 1h: exit %d, stderr %q; want 2 naming limits.fetch_timeout", r.code, r.stderr)
	}
}
