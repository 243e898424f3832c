package firecrawl_test

import (
	"net/http"
	"slices"
	"testing"

	"github.com/airlockhq/airlock/engine"
)

const otherToken = "alk_other-firecrawl-token"

// withOther adds tenant other, with acme's policy and its own token.
func withOther(c *engine.Config) {
	o := c.Tenants["acme"]
	o.Tokens = []string{hashToken(otherToken)}
	c.Tenants["other"] = o
}

// activeCrawls calls GET /v2/crawl/active as token and returns the
// crawls listed, by id.
func (f *fixture) activeCrawls(t *testing.T, token string) map[string]map[string]any {
	t.Helper()
	status, m, _ := f.call(t, "GET", "/v2/crawl/active", token, nil)
	if status != http.StatusOK || m["success"] != true {
		t.Fatalf("GET /v2/crawl/active: %d %v, want 200 with success", status, m)
	}
	list, ok := m["crawls"].([]any)
	if !ok {
		t.Fatalf("GET /v2/crawl/active: no crawls list in %v", m)
	}
	out := map[string]map[string]any{}
	for _, c := range list {
		cm := c.(map[string]any)
		out[cm["id"].(string)] = cm
	}
	return out
}

func ids(m map[string]map[string]any) []string {
	var out []string
	for id := range m {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// TestActiveCrawls: GET /v2/crawl/active lists the caller's tenant's
// crawls still running (never another tenant's, never a batch), with
// the options they run with; a cancelled crawl is no longer listed.
func TestActiveCrawls(t *testing.T) {
	t.Parallel()
	f := newFixture(t, withOther)
	if got := f.activeCrawls(t, acmeToken); len(got) != 0 {
		t.Fatalf("active crawls before any: %v, want none", got)
	}
	start := func(token, path string, body map[string]any) string {
		t.Helper()
		status, m, _ := f.call(t, "POST", path, token, body)
		if status != http.StatusOK {
			t.Fatalf("POST %s: %d %v", path, status, m)
		}
		return m["id"].(string)
	}
	// Crawls of /slow run until cancelled (the page answers when the
	// client gives up).
	acmeID := start(acmeToken, "/v2/crawl", map[string]any{"url": f.site.URL + "/slow", "sitemap": "skip", "limit": 7,
		"includePaths": []string{"^/slow"}, "delay": 0.5, "scrapeOptions": map[string]any{"formats": []string{"markdown", "rawHtml"}, "timeout": 5000}})
	otherID := start(otherToken, "/v2/crawl", map[string]any{"url": f.site.URL + "/slow?other", "sitemap": "skip"})
	batchID := start(acmeToken, "/v2/batch/scrape", map[string]any{"urls": []string{f.site.URL + "/slow?batch"}})

	acme := f.activeCrawls(t, acmeToken)
	if got := ids(acme); !slices.Equal(got, []string{acmeID}) {
		t.Fatalf("acme's active crawls = %q, want only its crawl %s (not other's %s, not its batch %s)", got, acmeID, otherID, batchID)
	}
	c := acme[acmeID]
	if c["url"] != f.site.URL+"/slow" || c["teamId"] != "acme" {
		t.Errorf("acme's active crawl = %v, want url %s, teamId acme", c, f.site.URL+"/slow")
	}
	opts, _ := c["options"].(map[string]any)
	so, _ := opts["scrapeOptions"].(map[string]any)
	if opts["limit"] != float64(7) || opts["sitemap"] != "skip" || opts["delay"] != 0.5 ||
		!slices.Equal(toStrings(opts["includePaths"]), []string{"^/slow"}) ||
		!slices.Equal(toStrings(so["formats"]), []string{"markdown", "rawHtml"}) || so["timeout"] != float64(5000) {
		t.Errorf("acme's active crawl options = %v", opts)
	}
	if got := ids(f.activeCrawls(t, otherToken)); !slices.Equal(got, []string{otherID}) {
		t.Errorf("other's active crawls = %q, want only %s", got, otherID)
	}
	if got := f.activeCrawls(t, lockedToken); len(got) != 0 {
		t.Errorf("locked's active crawls = %v, want none", got)
	}

	for _, id := range []string{acmeID, batchID} {
		if status, m, _ := f.call(t, "DELETE", "/v2/crawl/"+id, acmeToken, nil); status != http.StatusOK {
			t.Fatalf("cancel %s: %d %v", id, status, m)
		}
	}
	if got := f.activeCrawls(t, acmeToken); len(got) != 0 {
		t.Errorf("acme's active crawls after cancelling = %v, want none", got)
	}
	if got := ids(f.activeCrawls(t, otherToken)); !slices.Equal(got, []string{otherID}) {
		t.Errorf("other's active crawls after acme cancelled = %q, want %s", got, otherID)
	}
	if status, m, _ := f.call(t, "DELETE", "/v2/crawl/"+otherID, otherToken, nil); status != http.StatusOK {
		t.Fatalf("cancel %s: %d %v", otherID, status, m)
	}

	status, m, _ := f.call(t, "GET", "/v2/crawl/active", "", nil)
	if status != http.StatusUnauthorized {
		t.Errorf("GET /v2/crawl/active without a token: %d, want 401", status)
	}
	errorOf(t, m)
}

func toStrings(v any) []string {
	l, _ := v.([]any)
	var out []string
	for _, x := range l {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}
