package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlockhq/airlock"
)

func TestExtractCommand(t *testing.T) {
	t.Parallel()
	page := `<html lang="en"><head><title>Saved page</title></head><body><article><h1>Saved page</h1>` +
		strings.Repeat(`<p>A paragraph of the saved article, long enough to be taken for content by the extractor. <a href="/more">More</a></p>`, 5) +
		`</article></body></html>`
	dir := t.TempDir()
	file := filepath.Join(dir, "page.html")
	if err := os.WriteFile(file, []byte(page), 0o600); err != nil {
		t.Fatal(err)
	}

	r := invoke(t, context.Background(), "", []string{"extract", "--url", "https://example.com/a/", "--format", "json", file})
	if r.code != 0 {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	var p airlock.Page
	if err := json.Unmarshal([]byte(r.stdout), &p); err != nil {
		t.Fatalf("stdout is not one Page: %v\n%s", err, r.stdout)
	}
	if p.Title != "Saved page" || p.Lang != "en" || !strings.Contains(p.Text, "A paragraph of the saved article") ||
		len(p.Links) != 1 || p.Links[0].URL != "https://example.com/more" || !p.Links[0].Internal {
		t.Errorf("page = %+v", p)
	}

	r = invoke(t, context.Background(), page, []string{"extract", "--format", "markdown", "-"})
	if r.code != 0 || !strings.Contains(r.stdout, "A paragraph of the saved article") {
		t.Errorf("markdown from stdin: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}

	wall := `<html><head><title>Just a moment...</title></head><body><div id="challenge-stage"></div><script>window._cf_chl_opt={cType:'managed'};</script></body></html>`
	r = invoke(t, context.Background(), wall, []string{"extract", "--format", "json", "-"})
	var body airlock.ErrorBody
	if r.code != 4 || json.Unmarshal([]byte(r.stderr), &body) != nil || body.Error.Reason != "bot_wall" || body.Error.Code != airlock.CodeUpstream {
		t.Errorf("bot wall: exit %d, stderr %q; want 4 and a JSON upstream/bot_wall error", r.code, r.stderr)
	}

	r = invoke(t, context.Background(), strings.Repeat("x", 2000), []string{"extract", "--max-bytes", "1000", "-"})
	if r.code != 4 || !strings.Contains(r.stderr, "larger than") {
		t.Errorf("too large: exit %d, stderr %q", r.code, r.stderr)
	}

	r = invoke(t, context.Background(), page, []string{"extract", "--format", "yaml", "-"})
	if r.code != 2 {
		t.Errorf("bad format: exit %d, want 2", r.code)
	}
	r = invoke(t, context.Background(), "", []string{"extract", filepath.Join(dir, "missing.html")})
	if r.code != 2 {
		t.Errorf("missing file: exit %d, want 2 (a bad argument)", r.code)
	}
}
