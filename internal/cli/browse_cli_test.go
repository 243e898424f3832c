package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

func browseSite() *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/robots.txt":
			fmt.Fprint(w, "User-agent: *\nDisallow: /private\n")
		case "/missing":
			http.NotFound(w, r)
		case "/away":
			http.Redirect(w, r, "http://192.168.1.1/", http.StatusFound)
		default:
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprintf(w, `<html><head><title>Page %s</title></head><body><h1>Heading %s</h1><p>%s</p>
<a href="/one">one</a> <a href="/two">two</a> <a href="/private/x">private</a></body></html>`,
				r.URL.Path, r.URL.Path, strings.Repeat("Plenty of readable words on this page. ", 15))
		}
	}))
}

func TestFetchCLI(t *testing.T) {
	t.Parallel()
	srv := browseSite()
	defer srv.Close()
	dd := t.TempDir()
	ctx := context.Background()
	base := []string{"fetch", "--data-dir", dd, "--except", "127.0.0.1"}

	r := invoke(t, ctx, "", append(base, srv.URL+"/"))
	if r.code != 0 || !strings.HasPrefix(r.stdout, "# Page /") || !strings.Contains(r.stdout, "readable words") {
		t.Fatalf("fetch md: %d %q %q", r.code, r.stdout, r.stderr)
	}
	r = invoke(t, ctx, "", append(base, "--format", "org", srv.URL+"/"))
	if r.code != 0 || !strings.HasPrefix(r.stdout, "* Page / :source:point:\n:PROPERTIES:\n:URL: ") || !strings.Contains(r.stdout, "** links") {
		t.Errorf("fetch org: %d %q", r.code, r.stdout)
	}
	r = invoke(t, ctx, "", append(base, "--format", "json", srv.URL+"/"))
	var page map[string]any
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &page) != nil || page["title"] != "Page /" || page["provider"] != "native" {
		t.Errorf("fetch json: %d %q", r.code, r.stdout)
	}
	for _, k := range []string{"url", "requested_url", "status", "content_type", "fetched_at", "provider", "elapsed_ms", "title", "description", "lang", "canonical", "site_name", "author", "published", "meta", "headings", "links", "text", "markdown", "tables", "truncated"} {
		if _, ok := page[k]; !ok {
			t.Errorf("Page JSON lacks %q", k)
		}
	}
	if r = invoke(t, ctx, "", append(base, srv.URL+"/missing")); r.code != 4 || !strings.Contains(r.stderr, "404") {
		t.Errorf("404: %d %q", r.code, r.stderr)
	}
	r = invoke(t, ctx, "", append(base, "--format", "json", srv.URL+"/away"))
	var ebody struct {
		Error struct{ Code, Reason, DecisionID string }
	}
	if r.code != 3 || json.Unmarshal([]byte(r.stderr), &ebody) != nil || ebody.Error.Reason != "private" {
		t.Errorf("refused redirect: %d %q", r.code, r.stderr)
	}
}

func TestCrawlCLI(t *testing.T) {
	t.Parallel()
	srv := browseSite()
	defer srv.Close()
	dd := t.TempDir()
	ctx := context.Background()
	r := invoke(t, ctx, "", []string{"crawl", "--data-dir", dd, "--except", "127.0.0.1", "--max-pages", "5", srv.URL + "/"})
	if r.code != 0 {
		t.Fatalf("crawl: %d %q", r.code, r.stderr)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 3 {
		t.Errorf("jsonl lines = %d, want 3:\n%s", len(lines), r.stdout)
	}
	for _, l := range lines {
		var p map[string]any
		if err := json.Unmarshal([]byte(l), &p); err != nil || p["url"] == nil {
			t.Errorf("jsonl line %q: %v", l, err)
		}
	}
	if !strings.Contains(r.stderr, "robots") || !strings.Contains(r.stderr, "crawl: 3 pages") {
		t.Errorf("stderr lacks the robots skip or the summary: %q", r.stderr)
	}
	r = invoke(t, ctx, "", []string{"crawl", "--data-dir", dd, "--except", "127.0.0.1", "--max-pages", "2", "--format", "org", srv.URL + "/"})
	if r.code != 0 || !strings.HasPrefix(r.stdout, "#+TITLE: browse crawl — 2 pages\n") {
		t.Errorf("crawl org: %d %q", r.code, r.stdout)
	}
	list := filepath.Join(t.TempDir(), "urls.txt")
	os.WriteFile(list, []byte(srv.URL+"/a\n"+srv.URL+"/missing\nhttp://10.0.0.1/\n"), 0o600)
	r = invoke(t, ctx, "", []string{"crawl", "--data-dir", dd, "--except", "127.0.0.1", "--urls", list, "--extract", "none"})
	if r.code != 0 || strings.Count(r.stdout, "\n") != 1 || !strings.Contains(r.stderr, "http_status") || !strings.Contains(r.stderr, "policy") {
		t.Errorf("crawl --urls: %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	if r = invoke(t, ctx, "", []string{"crawl", "--data-dir", dd}); r.code != 2 {
		t.Errorf("crawl without seed: exit %d", r.code)
	}
}

func TestSearchCLI(t *testing.T) {
	t.Parallel()
	page, err := os.ReadFile("../provider/native/testdata/search/ddg_foo.html")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Write(page)
	}))
	defer srv.Close()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "airlock.yaml")
	os.WriteFile(cfg, []byte("browse:\n  duckduckgo_url: "+srv.URL+"/html/\n"), 0o600)
	r := invoke(t, context.Background(), "", []string{"search", "--config", cfg, "--data-dir", dir, "--except", "127.0.0.1", "--engine", "ddg", "--limit", "3", "--format", "json", "foo"})
	var out struct {
		Query   string
		Results []struct {
			Title, URL, Engine string
			Rank               int
		}
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &out) != nil || len(out.Results) != 3 || out.Results[0].Rank != 1 || out.Results[0].Engine == "" {
		t.Fatalf("search: %d %q %q", r.code, r.stdout, r.stderr)
	}
	if r := invoke(t, context.Background(), "", []string{"search", "--config", cfg, "--data-dir", dir, "--engine", "altavista", "x"}); r.code != 2 {
		t.Errorf("unknown engine: exit %d %q", r.code, r.stderr)
	}
}

// gcPercent reads the collector's target.
func gcPercent() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

// A crawl raises the collector's target for its run, unless GOGC is set,
// and puts it back; the more is live at its start, the less.
func TestCrawlGCPercent(t *testing.T) {
	for _, tc := range []struct {
		live uint64
		want int
	}{
		{0, crawlGCPercent},
		{4 << 20, crawlGCPercent},
		{16 << 20, 200},
		{64 << 20, 100},
		{1 << 30, 100},
	} {
		if got := crawlGCPercentFor(tc.live); got != tc.want {
			t.Errorf("crawlGCPercentFor(%d MiB) = %d, want %d", tc.live>>20, got, tc.want)
		}
	}
	before := gcPercent()
	restore := crawlGC([]string{"HOME=/nonexistent"}, 4<<20)
	if got := gcPercent(); got != crawlGCPercent {
		t.Errorf("during a crawl GOGC is %d, want %d", got, crawlGCPercent)
	}
	restore()
	if got := gcPercent(); got != before {
		t.Errorf("after a crawl GOGC is %d, want %d again", got, before)
	}
	restore = crawlGC([]string{"GOGC=50"}, 4<<20)
	if got := gcPercent(); got != before {
		t.Errorf("with GOGC=50 in the environment, a crawl set GOGC to %d; want it left at %d", got, before)
	}
	restore()
}
