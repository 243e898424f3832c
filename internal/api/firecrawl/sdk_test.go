package firecrawl_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/engine"
)

// sdkDir holds the pinned official Firecrawl JS SDK (package.json and
// package-lock.json; node_modules is installed by .ci/run with npm ci).
const sdkDir = "testdata/sdk"

// envInner marks the test process that runs inside the network namespace.
const envInner = "AIRLOCK_FIRECRAWL_SDK_INNER"

// TestSDK runs the official Firecrawl JS SDK against the Firecrawl routes.
// The outer run re-executes this test binary in a new user and network
// namespace (unshare -rn) whose only interface is loopback; there the
// inner run starts the test site, the engine and the API on 127.0.0.1
// and runs node as its child, so that neither the SDK nor the server can
// reach anything but loopback (the hosted service included).
func TestSDK(t *testing.T) {
	t.Parallel()
	if os.Getenv(envInner) == "1" {
		runSDK(t)
		return
	}
	if _, err := os.Stat(filepath.Join(sdkDir, "node_modules", "@mendable", "firecrawl-js")); err != nil {
		t.Skipf("the Firecrawl JS SDK is not installed: run `npm ci` in internal/api/firecrawl/%s (.ci/run does)", sdkDir)
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatalf("node is not installed (apt-get install nodejs): %v", err)
	}
	for _, tool := range []string{"unshare", "ip"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed (util-linux, iproute2): %v", tool, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute) // hang guard
	defer cancel()
	cmd := exec.CommandContext(ctx, "unshare", "-rn", "sh", "-c",
		`ip link set lo up && exec "$0" -test.run='^TestSDK$' -test.count=1 -test.v`, os.Args[0])
	cmd.Env = append(os.Environ(), envInner+"=1")
	out, err := cmd.CombinedOutput()
	t.Logf("inner run:\n%s", out)
	if err != nil {
		t.Fatalf("inner run in a network namespace (unshare -rn): %v", err)
	}
	if !bytes.Contains(out, []byte("--- PASS: TestSDK")) {
		t.Fatalf("inner run did not pass TestSDK")
	}
}

// runSDK is the inner run: inside the namespace.
func runSDK(t *testing.T) {
	// The namespace must have loopback as its only interface, or the
	// isolation this test relies on is missing.
	links, err := exec.Command("ip", "-o", "link", "show").Output()
	if err != nil {
		t.Fatalf("ip link show: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(links)), "\n") {
		if fields := strings.Fields(line); len(fields) < 2 || fields[1] != "lo:" {
			t.Fatalf("the namespace has an interface other than loopback (%q); refusing to run the SDK", line)
		}
	}
	// acme on posix: the actions scrape needs the browser.
	f := newFixture(t, func(c *engine.Config) {
		tc := c.Tenants["acme"]
		tc.Profile = "posix"
		c.Tenants["acme"] = tc
	})
	script, err := filepath.Abs(filepath.Join(sdkDir, "run.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", script)
	cmd.Dir = sdkDir
	cmd.Env = append(os.Environ(), "FC_API="+f.api.URL, "FC_SITE="+f.site.URL,
		"FC_TOKEN="+acmeToken, "FC_LOCKED_TOKEN="+lockedToken, "FIRECRAWL_API_URL="+f.api.URL)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	if err != nil {
		t.Fatalf("node run.mjs: %v\nstderr: %s\nstdout: %s", err, stderr.Bytes(), stdout)
	}
	var res map[string]struct {
		OK      json.RawMessage `json:"ok"`
		Error   string          `json:"error"`
		Status  *int            `json:"status"`
		Details map[string]any  `json:"details"`
	}
	if err := json.Unmarshal(stdout, &res); err != nil {
		t.Fatalf("run.mjs output: %v\n%s", err, stdout)
	}
	ok := func(name string, v any) {
		t.Helper()
		r := res[name]
		if r.OK == nil {
			t.Errorf("%s: SDK threw %q (status %v)", name, r.Error, r.Status)
			return
		}
		if err := json.Unmarshal(r.OK, v); err != nil {
			t.Errorf("%s: %v in %s", name, err, r.OK)
		}
	}
	failed := func(name string, status int, code string) {
		t.Helper()
		r := res[name]
		if r.OK != nil || r.Status == nil || *r.Status != status {
			t.Errorf("%s: %s, status %v, error %q: want the SDK to throw with status %d", name, r.OK, r.Status, r.Error, status)
			return
		}
		e, _ := r.Details["error"].(map[string]any)
		if e["code"] != code {
			t.Errorf("%s: details %v, want Airlock's error with code %s", name, r.Details, code)
		}
	}

	var scrape struct {
		Markdown, RawHTML string
		Links             []string
		Metadata          map[string]any
	}
	ok("scrape", &scrape)
	if !strings.Contains(scrape.Markdown, "main content") || !strings.Contains(scrape.RawHTML, "<title>Doc A</title>") ||
		!strings.Contains(strings.Join(scrape.Links, " "), f.site.URL+"/docs/b") ||
		scrape.Metadata["statusCode"] != float64(200) || scrape.Metadata["sourceURL"] != f.site.URL+"/docs/a" || scrape.Metadata["title"] != "Doc A" {
		t.Errorf("scrape through the SDK = %+v", scrape)
	}
	var html struct {
		HTML     string
		Markdown *string
		Metadata map[string]any
	}
	ok("scrapeHtml", &html)
	if !strings.Contains(html.HTML, "<h1>Doc A</h1>") || !strings.Contains(html.HTML, "main content") ||
		strings.Contains(html.HTML, "/docs/b") || strings.Contains(html.HTML, "<nav") || html.Markdown != nil || html.Metadata["title"] != "Doc A" {
		t.Errorf("html scrape (excludeTags ul) through the SDK = %+v", html)
	}
	var acted struct {
		Markdown, Screenshot string
		Actions              struct{ Screenshots []string }
		Metadata             map[string]any
	}
	ok("scrapeActions", &acted)
	// The click followed the link: the document is /docs/b's.
	if !strings.Contains(acted.Markdown, "main content") || acted.Metadata["title"] != "Doc B" || acted.Metadata["url"] != f.site.URL+"/docs/b" || acted.Metadata["sourceURL"] != f.site.URL+"/docs/a" ||
		!strings.HasPrefix(acted.Screenshot, "data:image/png;base64,") ||
		len(acted.Actions.Screenshots) != 1 || !strings.HasPrefix(acted.Actions.Screenshots[0], "data:image/png;base64,") {
		t.Errorf("actions scrape through the SDK: markdown %q, metadata %v, screenshot %.40q, actions %d screenshots",
			acted.Markdown, acted.Metadata, acted.Screenshot, len(acted.Actions.Screenshots))
	}
	failed("scrapeJavascript", http.StatusBadRequest, "invalid")
	if e, _ := res["scrapeJavascript"].Details["error"].(map[string]any); e["reason"] != "unsupported_action" {
		t.Errorf("executeJavascript through the SDK: %v, want reason unsupported_action", res["scrapeJavascript"].Details)
	}
	var notFound struct {
		Markdown string
		Metadata map[string]any
	}
	ok("scrape404", &notFound)
	if notFound.Metadata["statusCode"] != float64(404) || !strings.Contains(notFound.Markdown, "main content") {
		t.Errorf("scrape of a 404 page through the SDK = %+v, want its content with statusCode 404", notFound)
	}
	failed("scrapeSummary", http.StatusBadRequest, "invalid")

	var mapped struct {
		Links []struct{ URL string }
	}
	ok("map", &mapped)
	if len(mapped.Links) != 5 || mapped.Links[0].URL != f.site.URL+"/" {
		t.Errorf("map through the SDK = %+v, want the site's 5 URLs, the seed first", mapped)
	}

	var search struct {
		Web []struct {
			URL, Title string
			Position   int
		}
	}
	ok("search", &search)
	if len(search.Web) != 3 || search.Web[0].URL != "https://example.com/r1" || search.Web[0].Position != 1 {
		t.Errorf("search through the SDK = %+v", search)
	}

	var crawled struct {
		Status    string
		Completed int
		Data      []struct{ Markdown string }
	}
	ok("crawl", &crawled)
	if crawled.Status != "completed" || crawled.Completed != 5 || len(crawled.Data) != 5 {
		t.Errorf("crawl through the SDK = %s %d pages, %d documents; want completed, 5", crawled.Status, crawled.Completed, len(crawled.Data))
	}
	var paths struct {
		Status string
		Data   []struct{ Metadata map[string]any }
	}
	ok("crawlPaths", &paths)
	var urls []string
	for _, d := range paths.Data {
		u, _ := d.Metadata["url"].(string)
		urls = append(urls, strings.TrimPrefix(u, f.site.URL))
	}
	slices.Sort(urls)
	if want := []string{"/", "/docs/a"}; paths.Status != "completed" || !slices.Equal(urls, want) {
		t.Errorf("crawl with includePaths ^/docs/ and excludePaths /b$ through the SDK = %s %q, want completed %q", paths.Status, urls, want)
	}

	var formats struct {
		Status string
		Data   []struct {
			Markdown *string
			RawHTML  string
			Links    []string
		}
	}
	ok("crawlFormats", &formats)
	if formats.Status != "completed" || len(formats.Data) != 1 || formats.Data[0].Markdown != nil ||
		!strings.Contains(formats.Data[0].RawHTML, "<title>Doc B</title>") || !slices.Contains(formats.Data[0].Links, f.site.URL+"/docs/a") {
		t.Errorf("crawl of /docs/b, depth 0, formats links and rawHtml, through the SDK = %+v, want one document with links and rawHtml alone", formats)
	}
	var sitemapOnly struct {
		Status string
		Data   []struct{ Metadata map[string]any }
	}
	ok("crawlSitemapOnly", &sitemapOnly)
	urls = nil
	for _, d := range sitemapOnly.Data {
		u, _ := d.Metadata["url"].(string)
		urls = append(urls, strings.TrimPrefix(u, f.site.URL))
	}
	slices.Sort(urls)
	if want := []string{"/", "/docs/b"}; sitemapOnly.Status != "completed" || !slices.Equal(urls, want) {
		t.Errorf("crawl with sitemap only through the SDK = %s %q, want completed %q", sitemapOnly.Status, urls, want)
	}

	var crawlErrs struct {
		Status string
		Errors struct {
			Errors []struct {
				URL, Code, Error string
			}
			RobotsBlocked []string
		}
	}
	ok("crawlErrors", &crawlErrs)
	if e := crawlErrs.Errors.Errors; crawlErrs.Status != "completed" || len(e) != 1 || e[0].URL != "http://127.0.0.2:9/" || e[0].Code != "policy" {
		t.Errorf("errors of a crawl with allowExternalLinks through the SDK = %+v, want http://127.0.0.2:9/ refused by the policy", crawlErrs)
	}

	var batch struct {
		Status    string
		Completed int
		Data      []struct{ Markdown string }
	}
	ok("batch", &batch)
	if batch.Status != "completed" || batch.Completed != 2 || len(batch.Data) != 2 || !strings.Contains(batch.Data[0].Markdown, "main content") {
		t.Errorf("batch scrape through the SDK = %+v, want 2 documents", batch)
	}

	type activeCrawls struct {
		Success bool
		Crawls  []struct {
			ID, TeamID, URL string
			Options         map[string]any
		}
	}
	var cancelled struct {
		ID        string
		During    activeCrawls
		Cancelled bool
		Status    string
		After     activeCrawls
	}
	ok("cancel", &cancelled)
	if !cancelled.Cancelled || cancelled.Status != "cancelled" {
		t.Errorf("cancel through the SDK = %+v", cancelled)
	}
	// The earlier crawls have finished: the running one is the only
	// active crawl, and once cancelled there is none.
	if d := cancelled.During; !d.Success || len(d.Crawls) != 1 || d.Crawls[0].ID != cancelled.ID || d.Crawls[0].URL != f.site.URL+"/slow" ||
		d.Crawls[0].TeamID != "acme" || d.Crawls[0].Options["limit"] != float64(3) || d.Crawls[0].Options["sitemap"] != "skip" {
		t.Errorf("active crawls through the SDK while %s runs = %+v, want it alone, with its URL and options", cancelled.ID, d)
	}
	if a := cancelled.After; !a.Success || a.Crawls == nil || len(a.Crawls) != 0 {
		t.Errorf("active crawls through the SDK after the cancel = %+v, want none", a)
	}

	failed("refused", http.StatusForbidden, "denied")
	failed("unauthorized", http.StatusUnauthorized, "denied")

	// Every call is in the audit log under the tenant that made it.
	if err := f.en.FlushAudit(context.Background()); err != nil {
		t.Fatal(err)
	}
	brokers := func(tenant, outcome string) map[string]bool {
		recs, err := f.en.AuditQuery(context.Background(), airlock.AuditQuery{Principal: tenant, Outcome: outcome, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]bool{}
		for _, r := range recs {
			out[r.Broker] = true
		}
		return out
	}
	acme := brokers("acme", "allow")
	for _, b := range []string{"fetch", "crawl", "search"} {
		if !acme[b] {
			t.Errorf("no allowed %s decision of tenant acme in the audit log: %v", b, acme)
		}
	}
	if locked := brokers("locked", "deny"); !locked["fetch"] {
		t.Errorf("the refused scrape is not in the audit log as tenant locked's denied fetch: %v", locked)
	}
}
