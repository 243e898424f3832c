package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFetchCLIIsAPerson: the CLI fetches for a person, so a page the
// site's robots.txt disallows is fetched (a model's fetch of it is
// refused), also as a configured default tenant that does not list its
// initiators; a tenant whose configuration says model only is refused.
func TestFetchCLIIsAPerson(t *testing.T) {
	t.Parallel()
	srv := browseSite()
	defer srv.Close()
	dir := t.TempDir()
	ctx := context.Background()

	r := invoke(t, ctx, "", []string{"fetch", "--data-dir", dir, "--except", "127.0.0.1", srv.URL + "/private/x"})
	if r.code != 0 || !strings.Contains(r.stdout, "Page /private/x") {
		t.Fatalf("fetch of a robots-disallowed page: %d %q %q", r.code, r.stdout, r.stderr)
	}
	cfg := func(name, extra string) string {
		p := filepath.Join(dir, name+".yaml")
		os.WriteFile(p, []byte("data_dir: "+dir+"\ndefault_tenant: desk\ntenants:\n  desk:\n    profile: posix\n    exceptions: [127.0.0.1]\n"+extra), 0o600)
		return p
	}
	r = invoke(t, ctx, "", []string{"fetch", "--config", cfg("desk", ""), srv.URL + "/private/x"})
	if r.code != 0 || !strings.Contains(r.stdout, "Page /private/x") {
		t.Errorf("fetch as a configured default tenant: %d %q %q", r.code, r.stdout, r.stderr)
	}
	r = invoke(t, ctx, "", []string{"fetch", "--config", cfg("model", "    initiators: [model]\n"), srv.URL + "/private/x"})
	if r.code != 3 || !strings.Contains(r.stderr, "initiator") {
		t.Errorf("fetch as a model-only tenant: %d %q", r.code, r.stderr)
	}
	r = invoke(t, ctx, "", []string{"crawl", "--data-dir", dir, "--except", "127.0.0.1", "--max-pages", "10", srv.URL + "/"})
	if r.code != 0 || strings.Contains(r.stdout, `"title":"Page /private/x"`) || !strings.Contains(r.stderr, "/private/x: robots") {
		t.Errorf("crawl still obeys robots.txt: %d %q %q", r.code, r.stdout, r.stderr)
	}
}
