package firecrawl_test

import (
	"bytes"
	"encoding/base64"
	"html"
	"image/png"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/engine"
)

// chromiumPath is the browser the tests drive.
const chromiumPath = "/usr/lib/chromium/chromium"

// browserPages are the pages of the browser tests' site.
var browserPages = map[string]string{
	// The content appears 1.5 s after load: later than the render's
	// settling (the DOM stays unchanged for 150 ms well before), so only
	// waitFor sees it.
	"/timer": `<!doctype html><html><head><title>Timer</title></head><body><main><h1>Timer</h1><p id="p">Waiting for the timer.</p></main>
<script>setTimeout(() => { document.getElementById("p").textContent = "The timer fired and wrote this late paragraph of text."; }, 1500);</script></body></html>`,
	// A form: clicking the input focuses it, writing fills it, Enter
	// submits it (the handler writes what was typed); the button writes
	// "clicked".
	"/form": `<!doctype html><html><head><title>Form</title></head><body><main><h1>Form</h1>
<form id="f"><input id="q" name="q" autocomplete="off"></form><button id="b" type="button">Press</button>
<p id="out">Nothing submitted yet.</p><p id="clicks">Not clicked.</p></main>
<script>
document.getElementById("f").addEventListener("submit", (e) => { e.preventDefault(); document.getElementById("out").textContent = "Submitted: " + document.getElementById("q").value; });
document.getElementById("b").addEventListener("click", () => { setTimeout(() => { const d = document.createElement("div"); d.id = "late"; d.textContent = "Late element after the click."; document.body.appendChild(d); }, 300); document.getElementById("clicks").textContent = "The button was clicked."; });
</script></body></html>`,
	// A tall page that records how far it was scrolled.
	"/scroll": `<!doctype html><html><head><title>Scroll</title></head><body><main><h1>Scroll</h1><p id="y">Not scrolled.</p>
<div style="height:5000px">tall</div></main>
<script>addEventListener("scroll", () => { document.getElementById("y").textContent = scrollY > 0 ? "Scrolled down to " + Math.round(scrollY) : "Back at the top"; });</script></body></html>`,
	// Writes the viewport width and the User-Agent into the page.
	"/device": `<!doctype html><html><head><title>Device</title></head><body><main><h1>Device</h1><p id="d"></p></main>
<script>document.getElementById("d").textContent = "width=" + innerWidth + " ua=" + navigator.userAgent + " touch=" + ("ontouchstart" in window);</script></body></html>`,
	// Boilerplate around the main content, a script and a style.
	"/layout": `<!doctype html><html lang="en"><head><title>Layout</title><style>p{color:red}</style><script>var x = 1;</script></head><body>
<header class="site">Site header text</header><nav><a href="/">Home nav link</a></nav>
<main><h1>Layout</h1><p class="keep">` + strings.Repeat("The kept paragraph of the main content, long enough to matter. ", 5) + `</p>
<div class="ad">An advertisement block</div><aside id="side">Sidebar text</aside></main>
<footer>Footer text</footer><script>console.log("tail")</script></body></html>`,
}

// browserFixture is newFixture with acme on the posix profile (which
// grants the browser) and a second site of browser pages; headers records
// the request headers each path was fetched with.
type browserFixture struct {
	*fixture
	pages   *httptest.Server
	mu      sync.Mutex
	headers map[string]http.Header
}

func newBrowserFixture(t *testing.T, change ...func(*engine.Config)) *browserFixture {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Fatalf("these tests need Chromium at %s (apt-get install chromium): %v", chromiumPath, err)
	}
	posix := func(c *engine.Config) {
		tc := c.Tenants["acme"]
		tc.Profile = "posix"
		c.Tenants["acme"] = tc
	}
	bf := &browserFixture{fixture: newFixture(t, append([]func(*engine.Config){posix}, change...)...), headers: map[string]http.Header{}}
	bf.pages = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		bf.mu.Lock()
		bf.headers[r.URL.Path] = r.Header.Clone()
		bf.mu.Unlock()
		if r.URL.Path == "/redirect" {
			http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusFound)
			return
		}
		if r.URL.Path == "/mixed" { // an image of this origin and one of ?other
			w.Header().Set("Content-Type", "text/html")
			io.WriteString(w, `<!doctype html><html><head><title>Mixed</title></head><body><main><p>Mixed page.</p><img src="`+
				html.EscapeString(r.URL.Query().Get("other"))+`/pixel.png"><img src="/own.png"></main></body></html>`)
			return
		}
		if r.URL.Path == "/own.png" {
			w.Header().Set("Content-Type", "image/png")
			return
		}
		if r.URL.Path == "/echo" {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			io.WriteString(w, `<!doctype html><html><head><title>Echo</title></head><body><main><h1>Echo</h1><p>X-Test was `+
				strings.ReplaceAll(r.Header.Get("X-Test"), "<", "")+`; a paragraph long enough to be the page's main content.</p></main></body></html>`)
			return
		}
		body, ok := browserPages[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		io.WriteString(w, body)
	}))
	t.Cleanup(bf.pages.Close)
	return bf
}

// scrape posts body to /v2/scrape as acme and returns the status and the
// answer's data (nil on an error: then the answer itself is returned as
// data too, for the message).
func (bf *browserFixture) scrape(t *testing.T, body map[string]any) (int, map[string]any, map[string]any) {
	t.Helper()
	status, m, _ := bf.call(t, "POST", "/v2/scrape", acmeToken, body)
	data, _ := m["data"].(map[string]any)
	return status, data, m
}

func (bf *browserFixture) okScrape(t *testing.T, body map[string]any) map[string]any {
	t.Helper()
	status, data, m := bf.scrape(t, body)
	if status != http.StatusOK || m["success"] != true || data == nil {
		t.Fatalf("scrape %v: %d %v", body, status, m)
	}
	return data
}

func str(m map[string]any, k string) string {
	s, _ := m[k].(string)
	return s
}

// decodePNG checks a data: URL of a PNG and returns the image's size.
func decodePNG(t *testing.T, url string) (w, h int) {
	t.Helper()
	const prefix = "data:image/png;base64,"
	if !strings.HasPrefix(url, prefix) {
		t.Fatalf("screenshot %.60q: want a %s URL", url, prefix)
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(url, prefix))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	img, err := png.Decode(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("screenshot is not a PNG: %v", err)
	}
	return img.Bounds().Dx(), img.Bounds().Dy()
}

// TestScrapeHTMLFormat: html is the cleaned page (no scripts, styles or
// head), the main content alone under onlyMainContent (the default), the
// whole body without it; rawHtml stays the page as served.
func TestScrapeHTMLFormat(t *testing.T) {
	t.Parallel()
	bf := newBrowserFixture(t)
	url := bf.pages.URL + "/layout"
	data := bf.okScrape(t, map[string]any{"url": url, "formats": []any{"html", "rawHtml", "markdown"}})
	html := str(data, "html")
	for _, want := range []string{"The kept paragraph", "<h1>Layout</h1>"} {
		if !strings.Contains(html, want) {
			t.Errorf("html lacks %q: %q", want, html)
		}
	}
	for _, bad := range []string{"<script", "<style", "console.log", "Site header text", "Home nav link", "Footer text", "Sidebar text", "<title>"} {
		if strings.Contains(html, bad) {
			t.Errorf("html (onlyMainContent) has %q: %q", bad, html)
		}
	}
	if raw := str(data, "rawHtml"); !strings.Contains(raw, "<script>var x = 1;</script>") {
		t.Errorf("rawHtml = %q, want the page as served", raw)
	}
	if md := str(data, "markdown"); !strings.Contains(md, "The kept paragraph") {
		t.Errorf("markdown = %q", md)
	}
	if meta, _ := data["metadata"].(map[string]any); meta["title"] != "Layout" || meta["statusCode"] != float64(200) {
		t.Errorf("metadata = %v", data["metadata"])
	}

	data = bf.okScrape(t, map[string]any{"url": url, "formats": []any{"html"}, "onlyMainContent": false})
	html = str(data, "html")
	for _, want := range []string{"Site header text", "Footer text", "The kept paragraph"} {
		if !strings.Contains(html, want) {
			t.Errorf("html (whole page) lacks %q: %q", want, html)
		}
	}
	for _, bad := range []string{"<script", "<style", "console.log"} {
		if strings.Contains(html, bad) {
			t.Errorf("html (whole page) has %q: %q", bad, html)
		}
	}
}

// TestScrapeIncludeExcludeTags: the selectors apply before extraction, to
// markdown, html and links alike.
func TestScrapeIncludeExcludeTags(t *testing.T) {
	t.Parallel()
	bf := newBrowserFixture(t)
	url := bf.pages.URL + "/layout"
	data := bf.okScrape(t, map[string]any{"url": url, "formats": []any{"html", "markdown"}, "excludeTags": []string{".ad", "#side"}})
	for _, k := range []string{"html", "markdown"} {
		if s := str(data, k); strings.Contains(s, "advertisement") || strings.Contains(s, "Sidebar") || !strings.Contains(s, "kept paragraph") {
			t.Errorf("%s with excludeTags = %q", k, s)
		}
	}
	data = bf.okScrape(t, map[string]any{"url": url, "formats": []any{"html", "markdown", "links"}, "includeTags": []string{"nav", "aside"}})
	html := str(data, "html")
	if !strings.Contains(html, "Home nav link") || !strings.Contains(html, "Sidebar text") || strings.Contains(html, "kept paragraph") {
		t.Errorf("html with includeTags nav, aside = %q", html)
	}
	if md := str(data, "markdown"); strings.Contains(md, "kept paragraph") || !strings.Contains(md, "Sidebar text") {
		t.Errorf("markdown with includeTags = %q", md)
	}
	if links, _ := data["links"].([]any); len(links) != 1 || links[0] != bf.pages.URL+"/" {
		t.Errorf("links with includeTags nav = %v, want the nav's link alone", data["links"])
	}
	status, _, m := bf.scrape(t, map[string]any{"url": url, "includeTags": []string{"p["}})
	if e := errorOf(t, m); status != http.StatusBadRequest || e["reason"] != "bad_selector" {
		t.Errorf("bad selector: %d %v", status, e)
	}
}

// TestScrapeHeaders: caller headers reach the server; the floor's
// forbidden headers are refused before any request.
func TestScrapeHeaders(t *testing.T) {
	t.Parallel()
	bf := newBrowserFixture(t)
	data := bf.okScrape(t, map[string]any{"url": bf.pages.URL + "/echo", "headers": map[string]string{"X-Test": "hello-header", "Accept-Language": "fr"}})
	if md := str(data, "markdown"); !strings.Contains(md, "X-Test was hello-header") {
		t.Errorf("markdown = %q, want the echoed header", md)
	}
	bf.mu.Lock()
	got := bf.headers["/echo"]
	bf.mu.Unlock()
	if got.Get("Accept-Language") != "fr" {
		t.Errorf("Accept-Language = %q, want fr", got.Get("Accept-Language"))
	}
	for _, c := range []struct {
		name   string
		h      map[string]string
		status int
		reason string
	}{
		{"hop-by-hop", map[string]string{"Connection": "close"}, 403, "header_floor"},
		{"proxy credentials", map[string]string{"Proxy-Authorization": "Basic eDp5"}, 403, "header_floor"},
		{"identity", map[string]string{"User-Agent": "other"}, 400, "header_identity"},
	} {
		bf.mu.Lock()
		delete(bf.headers, "/echo")
		bf.mu.Unlock()
		status, _, m := bf.scrape(t, map[string]any{"url": bf.pages.URL + "/echo", "headers": c.h})
		if e := errorOf(t, m); status != c.status || e["reason"] != c.reason {
			t.Errorf("%s: %d %v, want %d %s", c.name, status, e, c.status, c.reason)
		}
		bf.mu.Lock()
		_, reached := bf.headers["/echo"]
		bf.mu.Unlock()
		if reached {
			t.Errorf("%s: the request reached the server", c.name)
		}
	}
	many := map[string]string{}
	for i := range 40 {
		many["X-H"+strings.Repeat("a", i)] = "v"
	}
	if status, _, m := bf.scrape(t, map[string]any{"url": bf.pages.URL + "/echo", "headers": many}); status != 400 || errorOf(t, m)["reason"] != "limit" {
		t.Errorf("40 headers: %d %v, want 400 limit", status, m)
	}
}

// TestScrapeWaitFor: content a timer writes after the page settled is
// there only with waitFor.
func TestScrapeWaitFor(t *testing.T) {
	t.Parallel()
	bf := newBrowserFixture(t)
	url := bf.pages.URL + "/timer"
	// The scrapes are independent (each its own browser session): they
	// run at once.
	t.Run("without waitFor", func(t *testing.T) {
		t.Parallel()
		data := bf.okScrape(t, map[string]any{"url": url, "formats": []any{"markdown"}})
		if md := str(data, "markdown"); strings.Contains(md, "timer fired") {
			t.Fatalf("without waitFor the late paragraph is there: the test page is not late enough: %q", md)
		}
	})
	t.Run("waitFor", func(t *testing.T) {
		t.Parallel()
		data := bf.okScrape(t, map[string]any{"url": url, "formats": []any{"markdown", "html"}, "waitFor": 2500})
		if md := str(data, "markdown"); !strings.Contains(md, "timer fired") {
			t.Errorf("markdown with waitFor = %q, want the late paragraph", md)
		}
		if html := str(data, "html"); !strings.Contains(html, "timer fired") || strings.Contains(html, "<script") {
			t.Errorf("html with waitFor = %q", html)
		}
		if meta, _ := data["metadata"].(map[string]any); meta["statusCode"] != float64(200) || meta["title"] != "Timer" {
			t.Errorf("metadata = %v", data["metadata"])
		}
	})
	// A page answered 404 is a document with its statusCode, through the
	// browser too.
	t.Run("404", func(t *testing.T) {
		t.Parallel()
		data := bf.okScrape(t, map[string]any{"url": bf.pages.URL + "/missing", "waitFor": 10, "formats": []any{"markdown", "rawHtml"}})
		if meta, _ := data["metadata"].(map[string]any); meta["statusCode"] != float64(404) || !strings.Contains(str(data, "rawHtml"), "404 page not found") {
			t.Errorf("404 through the browser: %v", data)
		}
	})
	status, _, m := bf.scrape(t, map[string]any{"url": url, "waitFor": 3_600_000})
	if e := errorOf(t, m); status != 400 || e["reason"] != "limit" {
		t.Errorf("waitFor above the ceiling: %d %v", status, e)
	}
}

// TestScrapeActions: click, wait (selector and milliseconds), write,
// press, scroll and screenshot, then the formats of the page as the
// actions left it.
func TestScrapeActions(t *testing.T) {
	t.Parallel()
	bf := newBrowserFixture(t)
	// The four scrapes are independent (each its own browser session):
	// they run at once.
	t.Run("form", func(t *testing.T) {
		t.Parallel()
		scrapeFormActions(t, bf)
	})
	t.Run("scroll down", func(t *testing.T) {
		t.Parallel()
		data := bf.okScrape(t, map[string]any{"url": bf.pages.URL + "/scroll", "actions": []any{
			map[string]any{"type": "scroll", "direction": "down"},
			map[string]any{"type": "wait", "milliseconds": 200},
		}})
		if md := str(data, "markdown"); !strings.Contains(md, "Scrolled down to") {
			t.Errorf("markdown after scroll = %q", md)
		}
	})
	t.Run("scroll down and up", func(t *testing.T) {
		t.Parallel()
		data := bf.okScrape(t, map[string]any{"url": bf.pages.URL + "/scroll", "actions": []any{
			map[string]any{"type": "scroll"},
			map[string]any{"type": "scroll", "direction": "up", "selector": "html"},
			map[string]any{"type": "wait", "milliseconds": 200},
		}})
		if md := str(data, "markdown"); !strings.Contains(md, "Back at the top") {
			t.Errorf("markdown after scroll down and up = %q", md)
		}
	})
	// A step that fails fails the scrape, as Firecrawl's do. (The wait
	// runs out at the browser's default step timeout, 10 s.)
	t.Run("failing step", func(t *testing.T) {
		t.Parallel()
		status, _, m := bf.scrape(t, map[string]any{"url": bf.pages.URL + "/form", "timeout": 20000, "actions": []any{
			map[string]any{"type": "wait", "selector": "#never"},
		}})
		if e := errorOf(t, m); status < 400 || e["reason"] != "wait_for_timeout" {
			t.Errorf("wait for a missing element: %d %v", status, e)
		}
	})
}

// scrapeFormActions is TestScrapeActions on the form: click, wait for a
// selector, click, write, press, wait, screenshot; and the audit record.
func scrapeFormActions(t *testing.T, bf *browserFixture) {
	data := bf.okScrape(t, map[string]any{"url": bf.pages.URL + "/form", "formats": []any{"markdown"}, "actions": []any{
		map[string]any{"type": "click", "selector": "#b"},
		map[string]any{"type": "wait", "selector": "#late"},
		map[string]any{"type": "click", "selector": "#q"},
		map[string]any{"type": "write", "text": "typed words"},
		map[string]any{"type": "press", "key": "Enter"},
		map[string]any{"type": "wait", "milliseconds": 100},
		map[string]any{"type": "screenshot"},
	}})
	md := str(data, "markdown")
	for _, want := range []string{"The button was clicked.", "Late element after the click.", "Submitted: typed words"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q: %q", want, md)
		}
	}
	acts, _ := data["actions"].(map[string]any)
	shots, _ := acts["screenshots"].([]any)
	if len(shots) != 1 {
		t.Fatalf("actions = %v, want one screenshot", acts)
	}
	if w, _ := decodePNG(t, shots[0].(string)); w == 0 {
		t.Errorf("empty screenshot")
	}
	// One audited fetch decision, which says the browser ran the actions.
	meta, _ := data["metadata"].(map[string]any)
	id, _ := meta["scrapeId"].(string)
	if err := bf.en.FlushAudit(t.Context()); err != nil {
		t.Fatal(err)
	}
	recs, err := bf.en.AuditQuery(t.Context(), airlock.AuditQuery{Principal: "acme", Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, r := range recs {
		if r.ID == id {
			found = r.Broker == "fetch" && r.Outcome == "allow" && strings.Contains(r.Detail, "browser actions=7")
			if !found {
				t.Errorf("audit record %+v, want an allowed fetch noting the browser and its 7 actions", r)
			}
		}
	}
	if id == "" || !found {
		t.Errorf("the scrape %q is not in the audit log", id)
	}
	for _, k := range []string{"scrapes", "javascriptReturns", "pdfs"} {
		if l, ok := acts[k].([]any); !ok || len(l) != 0 {
			t.Errorf("actions.%s = %v, want []", k, acts[k])
		}
	}
}

// TestScrapeActionRefusals: executeJavascript and the other actions
// Airlock does not run are invalid (unsupported_action); bad action
// fields are invalid; numbers go through the ceilings.
func TestScrapeActionRefusals(t *testing.T) {
	t.Parallel()
	bf := newBrowserFixture(t)
	url := bf.pages.URL + "/form"
	many := make([]any, 201)
	for i := range many {
		many[i] = map[string]any{"type": "wait", "milliseconds": 1}
	}
	for _, c := range []struct {
		name    string
		actions []any
		reason  string
	}{
		{"javascript", []any{map[string]any{"type": "executeJavascript", "script": "document.title"}}, "unsupported_action"},
		{"pdf", []any{map[string]any{"type": "pdf"}}, "unsupported_action"},
		{"scrape", []any{map[string]any{"type": "scrape"}}, "unsupported_action"},
		{"no type", []any{map[string]any{"selector": "#b"}}, "unsupported_action"},
		{"click without selector", []any{map[string]any{"type": "click"}}, "browser_action"},
		{"click all", []any{map[string]any{"type": "click", "selector": "a", "all": true}}, "unsupported"},
		{"wait both", []any{map[string]any{"type": "wait", "selector": "#b", "milliseconds": 10}}, "browser_action"},
		{"wait too long", []any{map[string]any{"type": "wait", "milliseconds": 3_600_000}}, "limit"},
		{"bad key", []any{map[string]any{"type": "press", "key": "NoSuchKey"}}, "browser_action"},
		{"bad direction", []any{map[string]any{"type": "scroll", "direction": "left"}}, "browser_action"},
		{"unknown field", []any{map[string]any{"type": "write", "text": "x", "script": "1"}}, "browser_action"},
		{"too many", many, "limit"},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, _, m := bf.scrape(t, map[string]any{"url": url, "actions": c.actions})
			if e := errorOf(t, m); status != http.StatusBadRequest || e["reason"] != c.reason {
				t.Errorf("%d %v, want 400 %s", status, e, c.reason)
			}
		})
	}
}

// TestScrapeMobile: mobile emulates a phone's viewport, User-Agent and
// touch.
func TestScrapeMobile(t *testing.T) {
	t.Parallel()
	bf := newBrowserFixture(t)
	url := bf.pages.URL + "/device"
	// The scrapes are independent (each its own browser session): they
	// run at once.
	t.Run("mobile", func(t *testing.T) {
		t.Parallel()
		data := bf.okScrape(t, map[string]any{"url": url, "mobile": true, "formats": []any{"markdown", "screenshot"}})
		md := str(data, "markdown")
		if !strings.Contains(md, "Mobile") || !strings.Contains(md, "touch=true") || strings.Contains(md, "width=1") && !strings.Contains(md, "width=3") {
			t.Errorf("mobile markdown = %q, want a phone's User-Agent, touch and width", md)
		}
		if w, _ := decodePNG(t, str(data, "screenshot")); w > 500*3 || w < 300 {
			t.Errorf("mobile screenshot is %d pixels wide", w)
		}
	})
	t.Run("desktop", func(t *testing.T) {
		t.Parallel()
		data := bf.okScrape(t, map[string]any{"url": url, "formats": []any{"markdown", map[string]any{"type": "screenshot", "fullPage": true}}})
		if md := str(data, "markdown"); strings.Contains(md, "Mobile") || strings.Contains(md, "touch=true") {
			t.Errorf("desktop markdown = %q", md)
		}
		if w, _ := decodePNG(t, str(data, "screenshot")); w < 700 {
			t.Errorf("desktop screenshot is %d pixels wide", w)
		}
	})
	t.Run("full page", func(t *testing.T) {
		t.Parallel()
		data := bf.okScrape(t, map[string]any{"url": bf.pages.URL + "/scroll", "formats": []any{"screenshot@fullPage"}})
		if _, h := decodePNG(t, str(data, "screenshot")); h < 5000 {
			t.Errorf("full-page screenshot is %d pixels high, want the whole 5000 px page", h)
		}
	})
}

// TestScrapeBrowserNeedsProfile: a tenant whose profile lacks the browser
// is refused the browser options (denied, capability), and nothing is
// fetched.
func TestScrapeBrowserNeedsProfile(t *testing.T) {
	t.Parallel()
	bf := newBrowserFixture(t, func(c *engine.Config) {
		tc := c.Tenants["acme"]
		tc.Profile = "network"
		c.Tenants["acme"] = tc
	})
	url := bf.pages.URL + "/form"
	for _, body := range []map[string]any{
		{"url": url, "waitFor": 100},
		{"url": url, "mobile": true},
		{"url": url, "formats": []any{"screenshot"}},
		{"url": url, "actions": []any{map[string]any{"type": "click", "selector": "#b"}}},
	} {
		status, _, m := bf.scrape(t, body)
		if e := errorOf(t, m); status != http.StatusForbidden || e["code"] != "denied" || e["reason"] != "capability" {
			t.Errorf("%v: %d %v, want 403 denied capability", body, status, e)
		}
	}
	bf.mu.Lock()
	fetched := len(bf.headers)
	bf.mu.Unlock()
	if fetched != 0 {
		t.Errorf("fetched %d paths though every scrape was refused", fetched)
	}
	// Without browser options the same tenant scrapes html.
	data := bf.okScrape(t, map[string]any{"url": url, "formats": []any{"html"}})
	if !strings.Contains(str(data, "html"), "Nothing submitted yet.") {
		t.Errorf("html = %q", str(data, "html"))
	}
}

// TestScrapeBrowserDeniedOrigins: browser.policy's denied_origins hold
// for a scrape's browser too; the native path is the egress policy's.
func TestScrapeBrowserDeniedOrigins(t *testing.T) {
	t.Parallel()
	bf := newBrowserFixture(t, func(c *engine.Config) {
		c.Browser.Policy.DeniedOrigins = []string{"127.0.0.1"}
	})
	origin := bf.pages.URL
	status, _, m := bf.scrape(t, map[string]any{"url": origin + "/form", "waitFor": 10})
	if e := errorOf(t, m); status != http.StatusForbidden || e["code"] != "denied" {
		t.Errorf("browser scrape of a denied origin: %d %v, want 403 denied", status, e)
	}
	bf.mu.Lock()
	_, reached := bf.headers["/form"]
	bf.mu.Unlock()
	if reached {
		t.Errorf("the browser loaded a page of a denied origin")
	}
}

// TestScrapeBrowserPolicyRefusal: a browser scrape of a target the
// tenant's policy refuses is a 403 with the decision id, decided before
// any browser starts, and audited under the tenant.
func TestScrapeBrowserPolicyRefusal(t *testing.T) {
	t.Parallel()
	bf := newBrowserFixture(t, func(c *engine.Config) {
		tc := c.Tenants["locked"]
		tc.Profile = "posix"
		c.Tenants["locked"] = tc
	})
	for _, body := range []map[string]any{
		{"url": bf.pages.URL + "/form", "waitFor": 10},
		{"url": bf.pages.URL + "/form", "formats": []any{"html"}, "headers": map[string]string{"X-Test": "1"}},
	} {
		status, m, h := bf.call(t, "POST", "/v2/scrape", lockedToken, body)
		e := errorOf(t, m)
		if status != http.StatusForbidden || e["code"] != "denied" || e["decision_id"] == "" || h.Get("X-Airlock-Decision") != e["decision_id"] {
			t.Errorf("%v: %d %v, want 403 denied with the decision id", body, status, e)
		}
	}
	bf.mu.Lock()
	defer bf.mu.Unlock()
	if len(bf.headers) != 0 {
		t.Errorf("a refused scrape reached the site: %v", bf.headers)
	}
}

// TestScrapeCeilingsConfigured: the tenant's limits.scrape_headers,
// scrape_header_bytes and scrape_selectors hold.
func TestScrapeCeilingsConfigured(t *testing.T) {
	t.Parallel()
	bf := newBrowserFixture(t, func(c *engine.Config) {
		tc := c.Tenants["acme"]
		tc.Limits.ScrapeHeaders, tc.Limits.ScrapeHeaderBytes, tc.Limits.ScrapeSelectors = 2, 20, 1
		c.Tenants["acme"] = tc
	})
	url := bf.pages.URL + "/echo"
	for _, c := range []struct {
		name string
		body map[string]any
		ok   bool
	}{
		{"two headers", map[string]any{"url": url, "headers": map[string]string{"X-A": "1", "X-B": "2"}}, true},
		{"three headers", map[string]any{"url": url, "headers": map[string]string{"X-A": "1", "X-B": "2", "X-C": "3"}}, false},
		{"header bytes", map[string]any{"url": url, "headers": map[string]string{"X-A": strings.Repeat("v", 20)}}, false},
		{"one selector", map[string]any{"url": url, "excludeTags": []string{"nav"}}, true},
		{"two selectors", map[string]any{"url": url, "includeTags": []string{"main", "p"}}, false},
	} {
		status, _, m := bf.scrape(t, c.body)
		if c.ok != (status == http.StatusOK) {
			t.Errorf("%s: %d %v", c.name, status, m)
		}
		if !c.ok && (status != http.StatusBadRequest || errorOf(t, m)["reason"] != "limit") {
			t.Errorf("%s: %d %v, want 400 limit", c.name, status, m)
		}
	}
}

// TestScrapeBrowserHeaders: through the browser, caller headers go to the
// page's origin (the document and its same-origin requests) and to no
// other origin: not to another origin's image, nor across a redirect.
func TestScrapeBrowserHeaders(t *testing.T) {
	t.Parallel()
	bf := newBrowserFixture(t)
	ln, err := net.Listen("tcp", "127.0.0.3:0")
	if err != nil {
		t.Fatalf("listen on 127.0.0.3: %v", err)
	}
	var mu sync.Mutex
	other := map[string]http.Header{}
	srv := &httptest.Server{Listener: ln, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		other[r.URL.Path] = r.Header.Clone()
		mu.Unlock()
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, `<!doctype html><title>Other</title><main><p>The other origin's page, long enough to be content.</p></main>`)
	})}}
	srv.Start()
	t.Cleanup(srv.Close)

	// The four scrapes are independent (each its own browser session, and
	// each looks at paths of its own): they run at once.
	t.Run("echo", func(t *testing.T) {
		t.Parallel()
		data := bf.okScrape(t, map[string]any{"url": bf.pages.URL + "/echo", "waitFor": 10, "headers": map[string]string{"X-Test": "via-browser"}})
		if md := str(data, "markdown"); !strings.Contains(md, "X-Test was via-browser") {
			t.Errorf("markdown = %q, want the header echoed by the page", md)
		}
	})
	t.Run("images", func(t *testing.T) {
		t.Parallel()
		bf.okScrape(t, map[string]any{"url": bf.pages.URL + "/mixed?other=" + srv.URL, "waitFor": 300, "headers": map[string]string{"X-Test": "via-browser"}})
		bf.mu.Lock()
		own := bf.headers["/own.png"]
		bf.mu.Unlock()
		if own.Get("X-Test") != "via-browser" {
			t.Errorf("same-origin image request headers = %v, want X-Test", own)
		}
		mu.Lock()
		pixel, fetched := other["/pixel.png"]
		mu.Unlock()
		if !fetched {
			t.Fatalf("the other origin's image was not requested: the test proves nothing")
		}
		if pixel.Get("X-Test") != "" {
			t.Errorf("the other origin got the caller's header: %v", pixel)
		}
	})
	t.Run("redirect", func(t *testing.T) {
		t.Parallel()
		data := bf.okScrape(t, map[string]any{"url": bf.pages.URL + "/redirect?to=" + srv.URL + "/landing", "waitFor": 10, "headers": map[string]string{"X-Test": "via-browser"}})
		mu.Lock()
		landing, fetched := other["/landing"]
		mu.Unlock()
		if !fetched || landing.Get("X-Test") != "" {
			t.Errorf("redirect to another origin: fetched %v, headers %v: want fetched without X-Test", fetched, landing)
		}
		if meta, _ := data["metadata"].(map[string]any); meta["url"] != srv.URL+"/landing" {
			t.Errorf("metadata.url = %v, want the redirect's target", meta["url"])
		}
	})
	status, _, m := bf.scrape(t, map[string]any{"url": bf.pages.URL + "/echo", "waitFor": 10, "headers": map[string]string{"Proxy-Authorization": "Basic eDp5"}})
	if e := errorOf(t, m); status != http.StatusForbidden || e["reason"] != "header_floor" {
		t.Errorf("a floor header through the browser: %d %v, want 403 header_floor", status, e)
	}
}
