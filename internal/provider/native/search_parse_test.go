package native

import (
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	airlock "github.com/airlockhq/airlock"
	"github.com/google/go-cmp/cmp"
)

// fixturePage parses testdata/search/name as engine's answer from endpoint.
func fixturePage(t *testing.T, engine, name, endpoint string, status int) page {
	t.Helper()
	body, err := os.ReadFile(filepath.Join("testdata", "search", name))
	if err != nil {
		t.Fatal(err)
	}
	return htmlPage(t, engine, string(body), endpoint, status, nil)
}

func htmlPage(t *testing.T, engine, body, endpoint string, status int, header map[string][]string) page {
	t.Helper()
	ep, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	p, err := newPage(engine, &airlock.HTTPResponse{Status: status, Header: header, Body: []byte(body), URL: endpoint}, ep)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// brief is the part of a result the parser tests compare.
type brief struct{ Title, URL, SnippetPrefix string }

func briefs(rs []airlock.SearchResult, snippetLen int) []brief {
	out := make([]brief, len(rs))
	for i, r := range rs {
		s := []rune(r.Snippet)
		if len(s) > snippetLen {
			s = s[:snippetLen]
		}
		out[i] = brief{r.Title, r.URL, string(s)}
	}
	return out
}

func TestParseDDGCapture(t *testing.T) {
	p := fixturePage(t, EngineDDG, "ddg_foo.html", DefaultDDGURL, 200)
	got := parseDDG(p)
	want := []brief{
		{"Foo Fighters - Wikipedia", "https://en.wikipedia.org/wiki/Foo_Fighters", "Foo Fighters are a rock ban"},
		{"foo | Meaning & Origin - Dictionary.com", "https://www.dictionary.com/e/tech-science/foo/", "Foo is a term used in compu"},
		{"FOO | definition in the Cambridge English Dictionary - Cambridge Dictionary", "https://dictionary.cambridge.org/us/dictionary/english/foo", "Foo is a word for a friend "},
		{"foo - Wiktionary, the free dictionary", "https://en.wiktionary.org/wiki/foo", "Learn the meanings and orig"},
		{"Foo Fighters - Everlong (Official HD Video) - YouTube", "https://www.youtube.com/watch?v=eBG7P-K-r1Y", `"Everlong" by Foo Fighters `},
		{"Foo Fighters", "https://foofighters.com/", "Official Foo Fighters websi"},
		{"Foo Fighters - Best Of You (Official HD Video) - YouTube", "https://www.youtube.com/watch?v=h_L4Rixya64", "Watch the official music vi"},
		{"Foo Fighters Music: Greatest Hits - YouTube", "https://www.youtube.com/playlist?list=PL83F62FF359785F29", "Enjoy 16 videos of Foo Figh"},
		{"FOO Definition & Meaning - Merriam-Webster", "https://www.merriam-webster.com/dictionary/foo", "The meaning of FOO is Scott"},
		{"Foo Tokyo｜Official Website（フートウキョウ公式）", "https://footokyo.jp/", "シルクパジャマやルームウェアの高級ブランドFoo To"},
	}
	if diff := cmp.Diff(want, briefs(got, 27)); diff != "" {
		t.Errorf("parseDDG (-want +got):\n%s", diff)
	}
	for _, r := range got {
		if r.Engine != EngineDDG {
			t.Errorf("Engine = %q, want %q", r.Engine, EngineDDG)
		}
	}
}

func TestParseBingCapture2020(t *testing.T) {
	p := fixturePage(t, EngineBing, "bing_2020_test_keyword.html", DefaultBingURL, 200)
	got := parseBing(p)
	want := []brief{
		{"Keyword Tests | TestComplete Documentation", "https://support.smartbear.com/testcomplete/docs/keyword-testing/index.html", "In keyword-driven tests, every"},
		{"About Keyword Testing | TestComplete Documentation", "https://support.smartbear.com/testcomplete/docs/keyword-testing/overview.html", "Some keyword test operations ("},
		{"Keyword Tool Est La Meilleure Alternative A Google …", "https://keywordtool.io/fr", "Keyword Tool vous permet d'ext"},
		{"Keyword-driven testing - Wikipedia", "https://en.wikipedia.org/wiki/Keyword-driven_testing", "A Keyword or Action Word is a "},
		{"Choisissez les bons mots clés grâce à nos outils de ...", "https://ads.google.com/intl/fr_fr/home/tools/keyword-planner/", "Découvrez de nouveaux mots clé"},
		{"Outil d'Analyse de Site et Test SEO", "https://www.woorank.com/fr/", "Un Keyword Tool performant . V"},
	}
	if diff := cmp.Diff(want, briefs(got, 30)); diff != "" {
		t.Errorf("parseBing (-want +got):\n%s", diff)
	}
}

func TestParseBingClickTracking(t *testing.T) {
	p := fixturePage(t, EngineBing, "bing_ck.html", DefaultBingURL, 200)
	got := rank(parseBing(p), 10)
	want := []brief{
		{"Effective Go - The Go Programming Language", "https://go.dev/doc/effective_go", "This document gives tips for writing clear, idiomatic Go code."},
		{"http package - net/http - Go Packages", "https://pkg.go.dev/net/http?tab=doc", "Jun 3, 2025 · Package http provides HTTP client and server implementations."},
		{"Go (programming language) - Wikipedia", "https://en.wikipedia.org/wiki/Go_(programming_language)", "Go is a high-level general purpose programming language that is statically typed and compiled."},
	}
	if diff := cmp.Diff(want, briefs(got, 200)); diff != "" {
		t.Errorf("parseBing + rank (-want +got):\n%s", diff)
	}
	for i, r := range got {
		if r.Rank != i+1 {
			t.Errorf("result %d: Rank = %d", i, r.Rank)
		}
	}
}

func TestParseBraveCapture(t *testing.T) {
	p := fixturePage(t, EngineBrave, "brave_rust.html", DefaultBraveURL, 200)
	got := parseBrave(p)
	want := []brief{
		{"Introduction - The Rust Programming Language", "https://web.mit.edu/rust-lang_v1.25/arch/amd64_ubuntu1404/share/doc/rust/html/book/second-edition/ch01-00-introduction.html", "Rust is a programming language that helps you write faster"},
		{"GitHub - rust-lang/rust: Empowering everyone to build reliable and efficient software. · GitHub", "https://github.com/rust-lang/rust", "3 weeks ago - This is the main source code repository for "},
		{"r/learnrust on Reddit: Rust - A Living Hell - The Perspective From A Programmer Of 30 Years", "https://www.reddit.com/r/learnrust/comments/1binxlv/rust_a_living_hell_the_perspective_from_a/", "March 20, 2024 - I have been programming for 30 years. I k"},
	}
	if diff := cmp.Diff(want, briefs(got, 58)); diff != "" {
		t.Errorf("parseBrave (-want +got):\n%s", diff)
	}
}

func TestParseBraveSkipsAdsAndEngineLinks(t *testing.T) {
	body := `<html><body><main>
<div class="snippet" data-pos="0" data-type="ad"><a href="https://ads.example/x"><div class="title">An ad</div></a></div>
<div class="snippet" data-pos="1" data-type="web"><a href="https://search.brave.com/goggles?x=1">goggle</a><a href="https://example.org/a"><div class="title">Example A</div></a><div class="snippet-description">About A.</div></div>
<div class="snippet" data-pos="2" data-type="web"><a href="/search?q=related"><div class="title">Related</div></a></div>
</main></body></html>`
	got := parseBrave(htmlPage(t, EngineBrave, body, DefaultBraveURL, 200, nil))
	want := []brief{{"Example A", "https://example.org/a", "About A."}}
	if diff := cmp.Diff(want, briefs(got, 100)); diff != "" {
		t.Errorf("parseBrave (-want +got):\n%s", diff)
	}
}

// TestParseFallbackAnchorScrape: when the result blocks' markup is not
// recognised, the outbound links of the results container are used, and
// engine and furniture hosts are rejected.
func TestParseFallbackAnchorScrape(t *testing.T) {
	body := `<html><body><ol id="b_results">
<li class="new_layout"><a href="https://example.com/article">An article about things</a></li>
<li><a href="https://www.bing.com/search?q=more">More results on Bing</a></li>
<li><a href="https://go.microsoft.com/fwlink/?LinkId=521839">Privacy and Cookies</a></li>
<li><a href="https://example.net/">short</a></li>
</ol><footer><a href="https://outside.example/page">Outside the results container</a></footer></body></html>`
	got := parseBing(htmlPage(t, EngineBing, body, DefaultBingURL, 200, nil))
	want := []brief{{"An article about things", "https://example.com/article", ""}}
	if diff := cmp.Diff(want, briefs(got, 100)); diff != "" {
		t.Errorf("parseBing fallback (-want +got):\n%s", diff)
	}
}

func TestUnwrap(t *testing.T) {
	tests := []struct {
		name   string
		unwrap func(*url.URL) *url.URL
		in     string
		want   string
	}{
		{"ddg redirect", unwrapDDG, "https://duckduckgo.com/l/?uddg=https%3A%2F%2Fexample.com%2Fa%3Fb%3D1&rut=x", "https://example.com/a?b=1"},
		{"ddg redirect without slash", unwrapDDG, "https://duckduckgo.com/l?uddg=https%3A%2F%2Fexample.com%2F", "https://example.com/"},
		{"ddg subdomain redirect", unwrapDDG, "https://html.duckduckgo.com/l/?uddg=https%3A%2F%2Fexample.org%2F", "https://example.org/"},
		{"ddg direct link", unwrapDDG, "https://example.com/page", "https://example.com/page"},
		{"ddg redirect with relative target", unwrapDDG, "https://duckduckgo.com/l/?uddg=%2Flocal", "https://duckduckgo.com/l/?uddg=%2Flocal"},
		{"ddg ad link kept (rejected later by host)", unwrapDDG, "https://duckduckgo.com/y.js?ad_domain=x", "https://duckduckgo.com/y.js?ad_domain=x"},
		{"bing ck base64url", unwrapBing, "https://www.bing.com/ck/a?!&&p=1&u=a1aHR0cHM6Ly9nby5kZXYvZG9jL2VmZmVjdGl2ZV9nby8_dXRtX3NvdXJjZT1iaW5n&ntb=1", "https://go.dev/doc/effective_go/?utm_source=bing"},
		{"bing ck padded", unwrapBing, "https://www.bing.com/ck/a?u=a1aHR0cHM6Ly9leGFtcGxlLmNvbS8%3D", "https://example.com/"},
		{"bing ck not a1", unwrapBing, "https://www.bing.com/ck/a?u=b2aHR0cHM6Ly9leGFtcGxlLmNvbS8", "https://www.bing.com/ck/a?u=b2aHR0cHM6Ly9leGFtcGxlLmNvbS8"},
		{"bing ck garbage", unwrapBing, "https://www.bing.com/ck/a?u=a1%%%", "https://www.bing.com/ck/a?u=a1%%%"},
		{"bing ck not a URL", unwrapBing, "https://www.bing.com/ck/a?u=a1bm90IGEgdXJs", "https://www.bing.com/ck/a?u=a1bm90IGEgdXJs"},
		{"bing direct", unwrapBing, "https://example.com/x", "https://example.com/x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in, err := url.Parse(tt.in)
			if err != nil {
				// "a1%%%" does not parse: unwrap must then see nil and return nil.
				if got := tt.unwrap(nil); got != nil {
					t.Errorf("unwrap(nil) = %v", got)
				}
				return
			}
			if got := tt.unwrap(in).String(); got != tt.want {
				t.Errorf("unwrap(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestNormalizeURL(t *testing.T) {
	tests := []struct {
		in, want string
		ok       bool
	}{
		{"https://Example.COM/a/", "example.com/a", true},
		{"http://www.example.com/a#frag", "example.com/a", true},
		{"https://example.com:443/", "example.com", true},
		{"https://example.com:8443/x", "example.com:8443/x", true},
		{"https://example.com/a?utm_source=x&b=2&fbclid=y", "example.com/a?b=2", true},
		{"https://example.com/a?b=2&a=1", "example.com/a?a=1&b=2", true},
		{"ftp://example.com/", "", false},
		{"/relative", "", false},
	}
	for _, tt := range tests {
		got, ok := normalizeURL(tt.in)
		if got != tt.want || ok != tt.ok {
			t.Errorf("normalizeURL(%q) = %q, %v; want %q, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

// Pages that are not result pages. The DuckDuckGo challenge is a fixture
// (see its header); the others are minimal pages written for these tests in
// the shapes those walls take (no public captures of them were found).
const (
	bingCaptchaPage = `<!DOCTYPE html><html><head><title>Bing</title></head><body>
<div id="b_content"><div class="captcha" id="b_captcha"><h1>One last step</h1>
<p>Please solve the challenge below to continue</p>
<iframe src="https://www.bing.com/turing/captcha/challenge?q=x"></iframe></div></div></body></html>`
	braveCaptchaPage = `<!DOCTYPE html><html><head><title>Brave Search</title></head><body>
<main><h1>Confirm you are a human</h1><p>We have detected unusual traffic from your network.</p>
<form method="POST" action="/captcha/verify"><button>I'm not a robot</button></form></main></body></html>`
	cloudflarePage = `<!DOCTYPE html><html><head><title>Just a moment...</title></head><body>
<div class="main-wrapper"><h1>search.example</h1><p>Checking your browser.</p></div></body></html>`
	noResultsPage = `<!DOCTYPE html><html><head><title>captcha solver at DuckDuckGo</title></head><body>
<form action="/html/" method="post"><input name="q" id="search_form_input_homepage" value="captcha solver"></form>
<div class="no-results">No results.</div></body></html>`
	rateLimitText = `<!DOCTYPE html><html><head><title>Brave Search</title></head><body><p>Too many requests. Please try again later.</p></body></html>`
	plainHTML     = `<html><body><p>Service temporarily unavailable</p></body></html>`
)

func TestClassify(t *testing.T) {
	ddgChallenge, err := os.ReadFile(filepath.Join("testdata", "search", "ddg_challenge.html"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		engine     string
		status     int
		header     map[string][]string
		body       string
		wantNil    bool
		wantReason airlock.Reason
		wantKind   string
		wantCode   airlock.Code
		wantWait   int
	}{
		{name: "ddg anomaly page (202)", engine: EngineDDG, status: 202, body: string(ddgChallenge), wantReason: airlock.ReasonBotWall, wantKind: WallCaptcha, wantCode: airlock.CodeUpstream},
		{name: "bing captcha", engine: EngineBing, status: 200, body: bingCaptchaPage, wantReason: airlock.ReasonBotWall, wantKind: WallCaptcha, wantCode: airlock.CodeUpstream},
		{name: "brave captcha", engine: EngineBrave, status: 200, body: braveCaptchaPage, wantReason: airlock.ReasonBotWall, wantKind: WallCaptcha, wantCode: airlock.CodeUpstream},
		{name: "cloudflare challenge", engine: EngineBrave, status: 503, body: cloudflarePage, wantReason: airlock.ReasonBotWall, wantKind: WallChallenge, wantCode: airlock.CodeUpstream},
		{name: "429 with Retry-After", engine: EngineBrave, status: 429, header: map[string][]string{"Retry-After": {"30"}}, body: plainHTML, wantReason: airlock.ReasonRateLimited, wantCode: airlock.CodeRateLimited, wantWait: 30},
		{name: "rate-limit wording on 200", engine: EngineBrave, status: 200, body: rateLimitText, wantReason: airlock.ReasonRateLimited, wantCode: airlock.CodeRateLimited},
		{name: "plain 403", engine: EngineBing, status: 403, body: plainHTML, wantReason: airlock.ReasonBotWall, wantKind: WallAccessDenied, wantCode: airlock.CodeUpstream},
		{name: "503", engine: EngineBing, status: 503, body: plainHTML, wantReason: airlock.ReasonHTTPStatus, wantCode: airlock.CodeUpstream},
		{name: "no results for a query about captchas", engine: EngineDDG, status: 200, body: noResultsPage, wantNil: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := classify(htmlPage(t, tt.engine, tt.body, "https://engine.example/search", tt.status, tt.header))
			if tt.wantNil {
				if err != nil {
					t.Fatalf("classify = %v, want nil", err)
				}
				return
			}
			var se *SearchError
			if !errors.As(err, &se) {
				t.Fatalf("classify = %v, want a *SearchError", err)
			}
			if se.Reason != tt.wantReason || se.Kind != tt.wantKind || se.Engine != tt.engine || se.Status != tt.status {
				t.Errorf("got %+v, want reason %q kind %q engine %q status %d", se, tt.wantReason, tt.wantKind, tt.engine, tt.status)
			}
			if got := airlock.CodeOf(err); got != tt.wantCode {
				t.Errorf("CodeOf = %q, want %q", got, tt.wantCode)
			}
			if got := airlock.ReasonOf(err); got != tt.wantReason {
				t.Errorf("ReasonOf = %q, want %q", got, tt.wantReason)
			}
			if got := int(airlock.RetryAfter(err).Seconds()); got != tt.wantWait {
				t.Errorf("RetryAfter = %ds, want %ds", got, tt.wantWait)
			}
			if !strings.Contains(err.Error(), tt.engine) {
				t.Errorf("message %q does not name the engine", err)
			}
		})
	}
}

// TestResultsWinOverWallWording: a results page whose snippets mention
// captchas or unusual traffic is a results page.
func TestResultsWinOverWallWording(t *testing.T) {
	body := `<html><body><div class="results">
<div class="result results_links web-result"><h2 class="result__title"><a class="result__a" href="//duckduckgo.com/l/?uddg=https%3A%2F%2Fexample.com%2Fcaptcha">Why you see a captcha</a></h2>
<a class="result__snippet">Sites show a captcha when they detect unusual traffic. Are you a robot?</a></div>
</div></body></html>`
	p := htmlPage(t, EngineDDG, body, DefaultDDGURL, 200, nil)
	if got := parseDDG(p); len(got) != 1 || got[0].URL != "https://example.com/captcha" {
		t.Fatalf("parseDDG = %+v", got)
	}
}
