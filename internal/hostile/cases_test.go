package hostile

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/egress"
	"github.com/airlockhq/airlock/egress/egresstest"
	"github.com/airlockhq/airlock/engine"
	"github.com/airlockhq/airlock/internal/crawl"
	"github.com/airlockhq/airlock/internal/extract"
)

// bombSize is what each decompression bomb decodes to: 16 times the
// decoded cap, from less than the wire cap.
const bombSize = 64 << 20

func bomb(codings ...string) func() http.Handler {
	return func() http.Handler { return egresstest.Bomb(bombSize, codings...) }
}

// extractCap is the extractor's input cap, the cap of the cases whose
// page reaches extraction whole.
const extractCap = extract.DefaultMaxInputBytes

func withDecodedCap(n int64) func(*engine.EgressConfig) {
	return func(eg *engine.EgressConfig) { eg.MaxDecodedBytes = n }
}

// cases lists the suite. Counts and seeds are fixed; the caps are the
// constants of harness_test.go unless a case says otherwise.
func cases() []hcase {
	tooLarge := airlock.CodeTooLarge
	decoded := string(egress.ReasonDecodedTooLarge)
	var cs []hcase
	// The baseline: one small page, nothing hostile. Its peak RSS is what
	// baseRSS is measured from.
	cs = append(cs, hcase{
		name:   "baseline",
		server: func() http.Handler { return site(nil) },
		call:   callFetch, path: "/",
		capBytes: bodyCap, k: 0,
	})

	// Decompression bombs: each decodes to 16 × the decoded cap.
	for _, codings := range [][]string{{"gzip"}, {"deflate"}, {"br"}, {"zstd"}, {"gzip", "br"}, {"zstd", "gzip"}} {
		cs = append(cs, hcase{
			name:   "bomb_" + strings.Join(codings, "_"),
			server: bomb(codings...),
			call:   callFetch, path: "/",
			code: tooLarge, reason: airlock.Reason(decoded),
			// The decoders' windows (br's is 16 MiB) and the read buffer's
			// doublings; about 19 × under the race detector.
			capBytes: decodedCap, k: 12,
		})
	}
	cs = append(cs,
		hcase{
			name:   "bomb_three_codings",
			server: bomb("gzip", "gzip", "gzip"),
			call:   callFetch, path: "/",
			code: airlock.CodeUpstream, reason: airlock.Reason(string(egress.ReasonEncoding)),
			capBytes: bodyCap, k: 4,
		},

		// Bodies without end: fast (the wire cap) and trickled (the timeout).
		hcase{
			name:   "endless_body",
			server: func() http.Handler { return endless("text/html") },
			call:   callFetch, path: "/",
			code: tooLarge, reason: airlock.Reason(string(egress.ReasonBodyTooLarge)),
			capBytes: bodyCap, k: 8,
		},
		hcase{
			// A model's fetch reads robots.txt first: an endless one is
			// cut at the body cap, counts as unreachable, and the page is
			// refused without being requested.
			name:   "endless_robots",
			server: func() http.Handler { return endless("text/plain") },
			call:   callModelFetch, path: "/",
			code: airlock.CodeDenied, reason: airlock.ReasonRobots,
			capBytes: bodyCap, k: 8,
		},
		hcase{
			name:   "endless_body_http",
			server: func() http.Handler { return endless("application/octet-stream") },
			call:   callHTTP, path: "/",
			code: tooLarge, reason: airlock.Reason(string(egress.ReasonBodyTooLarge)),
			capBytes: bodyCap, k: 8,
		},
		hcase{
			name:   "trickled_body",
			server: func() http.Handler { return egresstest.Trickle(10*time.Millisecond, 1<<20) },
			call:   callFetch, path: "/",
			timeout: shortTimeout, minElapsed: shortTimeout,
			code: airlock.CodeTimeout, reason: airlock.Reason(string(egress.ReasonTimeout)),
			capBytes: bodyCap, k: 4,
		},

		// Response headers: one byte a second, 100,000 of them, one huge.
		hcase{
			name:   "slowloris_headers",
			server: func() http.Handler { return egresstest.TrickleHeader(time.Second, 10*time.Second) },
			call:   callFetch, path: "/",
			timeout: shortTimeout, minElapsed: shortTimeout,
			code: airlock.CodeTimeout, reason: airlock.Reason(string(egress.ReasonTimeout)),
			capBytes: bodyCap, k: 4,
		},
		hcase{
			name:   "100k_headers",
			server: func() http.Handler { return manyHeaders(100_000) },
			call:   callFetch, path: "/",
			code: tooLarge, reason: airlock.Reason(string(egress.ReasonHeaderTooLarge)),
			capBytes: egress.DefaultMaxHeaderBytes, k: 16,
		},
		hcase{
			name:   "huge_header",
			server: func() http.Handler { return egresstest.HugeHeader(16 << 20) },
			call:   callFetch, path: "/",
			code: tooLarge, reason: airlock.Reason(string(egress.ReasonHeaderTooLarge)),
			capBytes: egress.DefaultMaxHeaderBytes, k: 16,
		},

		// Redirects: a loop and an endless chain, under max_redirects 3.
		hcase{
			name:   "redirect_loop",
			server: func() http.Handler { return egresstest.RedirectLoop(http.StatusFound) },
			call:   callFetch, path: "/",
			code: airlock.CodeUpstream, reason: airlock.Reason(string(egress.ReasonRedirectLimit)),
			capBytes: bodyCap, k: 1,
			check: func(t *testing.T, r result, h *hits) {
				if n := h.all(); n != maxRedirects+1 {
					t.Errorf("the server got %d requests, want %d (the first and %d redirects)", n, maxRedirects+1, maxRedirects)
				}
			},
		},
		hcase{
			name:   "redirect_chain",
			server: func() http.Handler { return egresstest.RedirectChain(http.StatusMovedPermanently) },
			call:   callHTTP, path: "/0",
			code: airlock.CodeUpstream, reason: airlock.Reason(string(egress.ReasonRedirectLimit)),
			capBytes: bodyCap, k: 1,
			check: func(t *testing.T, r result, h *hits) {
				if n := h.all(); n != maxRedirects+1 {
					t.Errorf("the server got %d requests, want %d", n, maxRedirects+1)
				}
				if n := h.count("/4"); n != 0 {
					t.Errorf("hop 4 was requested %d times past the cap", n)
				}
			},
		},

		// A connection reset part way through a long body.
		hcase{
			name:   "reset_mid_body",
			server: func() http.Handler { return egresstest.ResetMidBody(8<<20, 256<<10) },
			call:   callFetch, path: "/",
			code: airlock.CodeUpstream, reason: airlock.Reason(string(egress.ReasonProtocol)),
			capBytes: bodyCap, k: 4,
		},

		// Lying content types: HTML declared as an image, binary declared
		// as HTML. Neither is an error; neither may cost more than its size.
		hcase{
			name: "html_declared_image",
			server: func() http.Handler {
				return static("image/png", "", []byte(strings.Repeat("<p>not an image <a href=/x>x</a></p>", 20000)))
			},
			// The declared type wins: a type the extractor cannot read is
			// unsupported_content, never an empty page.
			call: callFetch, path: "/",
			code: airlock.CodeUpstream, reason: airlock.ReasonUnsupportedContent,
			capBytes: bodyCap, k: 16,
		},
		hcase{
			name:   "binary_declared_html",
			server: func() http.Handler { return static("text/html", "", seededBytes(bodyCap)) },
			call:   callFetch, path: "/",
			// Random bytes parse into thousands of elements, all of them
			// through both content extractors: about 70 × the input.
			capBytes: bodyCap, k: 96,
		},

		// Hostile HTML: 100,000 nested elements; a 900 KB attribute.
		hcase{
			name: "html_deep_nesting",
			server: func() http.Handler {
				return static("text/html", "gzip", gzipped([]byte(strings.Repeat("<div>", 100_000)+"<p>deep</p>"+strings.Repeat("</div>", 100_000))))
			},
			call: callFetch, path: "/",
			capBytes: decodedCap, k: 16,
			check: func(t *testing.T, r result, h *hits) {
				if r.TextBytes == 0 {
					t.Errorf("no text from the deep page")
				}
			},
		},
		hcase{
			name: "html_huge_attribute",
			server: func() http.Handler {
				v := strings.Repeat("x", 900<<10)
				return static("text/html", "", []byte(`<title>attr</title><div class="`+v[:len(v)/2]+`"><a href="/`+v[:len(v)/2]+`">long</a><p>text after</p></div>`))
			},
			call: callFetch, path: "/",
			capBytes: bodyCap, k: 16,
		},

		// A page of a million links, fetched and crawled: the extractor keeps
		// airlock.MaxPageLinks and marks the page truncated; the crawl follows
		// no more than that.
		hcase{
			name:   "million_links_fetch",
			server: func() http.Handler { return static("text/html", "gzip", millionLinksGzipped()) },
			egress: withDecodedCap(extractCap),
			call:   callFetch, path: "/",
			// Extraction takes seconds of CPU; the hang guard allows for a
			// loaded machine.
			timeout:  10 * time.Second * timeScale,
			capBytes: extractCap, k: 72,
			check: func(t *testing.T, r result, h *hits) {
				if r.Links != airlock.MaxPageLinks || !slices.Contains(r.Truncated, "links") {
					t.Errorf("got %d links, truncated %q: want %d and links truncated", r.Links, r.Truncated, airlock.MaxPageLinks)
				}
			},
		},
		hcase{
			name: "million_links_crawl",
			server: func() http.Handler {
				return site(map[string]http.Handler{"/": static("text/html", "gzip", millionLinksGzipped())})
			},
			egress: withDecodedCap(extractCap),
			call:   callCrawl, path: "/",
			// Discovery mode (links and metadata), as a crawl for URLs runs;
			// the extraction of the seed takes seconds of CPU, the task
			// timeout leaves room for that on a loaded machine.
			crawl:    airlock.CrawlRequest{MaxPages: 5, Depth: 1, Concurrency: 2, Extract: airlock.ExtractNone, Timeout: 20 * time.Second * timeScale},
			capBytes: extractCap, k: 72,
			check: func(t *testing.T, r result, h *hits) {
				// Of the page's links, /a and /b exist; the rest are 404.
				if r.Pages != 3 {
					t.Errorf("%d pages, want 3: the seed, /a and /b", r.Pages)
				}
				if n := len(r.Skipped); n > airlock.MaxPageLinks {
					t.Errorf("%d URLs listed as skipped: more than the %d links a page keeps", n, airlock.MaxPageLinks)
				}
				if n := h.count("/"); n != 1 {
					t.Errorf("the seed was fetched %d times", n)
				}
				// Failed fetches do not count towards max_pages, but a crawl
				// makes at most 4 × max_pages page requests, failures
				// included, plus robots.txt and sitemaps.
				if n, capped := h.all(), 4*5+2; n > capped {
					t.Errorf("a crawl of max_pages 5 made %d requests, want at most %d", n, capped)
				}
				if r.Stopped != "request_limit" {
					t.Errorf("stopped %q, want request_limit", r.Stopped)
				}
			},
		},

		// robots.txt of 50 MB.
		hcase{
			name:   "robots_50mb",
			server: func() http.Handler { return site(map[string]http.Handler{"/robots.txt": bigRobots(50 << 20)}) },
			call:   callCrawl, path: "/",
			crawl:    airlock.CrawlRequest{MaxPages: 3, Depth: 1, Timeout: longTimeout},
			capBytes: bodyCap, k: 8,
			check: func(t *testing.T, r result, h *hits) {
				if h.count("/robots.txt") != 1 {
					t.Errorf("robots.txt fetched %d times, want once", h.count("/robots.txt"))
				}
				// A robots.txt past the body cap is unreachable, and the
				// crawl fails closed: the origin is refused. (RFC 9309 §2.5
				// would have the first crawl.MaxRobotsBytes parsed; that
				// needs a per-request read limit the Doer does not have.)
				if r.Pages != 0 || r.skippedFor(string(airlock.ReasonRobots)) != 1 {
					t.Errorf("%d pages, skipped %v: want none, the seed refused for robots.txt", r.Pages, r.Skipped)
				}
			},
		},

		// robots.txt at one byte a second: unreachable within the timeout,
		// so the origin is refused (fail closed).
		hcase{
			name: "robots_slowloris",
			server: func() http.Handler {
				return site(map[string]http.Handler{"/robots.txt": egresstest.TrickleHeader(time.Second, 10*time.Second)})
			},
			call: callCrawl, path: "/",
			timeout: shortTimeout, minElapsed: shortTimeout,
			crawl:    airlock.CrawlRequest{MaxPages: 3, Depth: 1, Timeout: shortTimeout},
			capBytes: bodyCap, k: 8,
			check: func(t *testing.T, r result, h *hits) {
				if r.Pages != 0 || r.skippedFor(string(airlock.ReasonRobots)) != 1 || h.count("/") != 0 {
					t.Errorf("%d pages, skipped %v, seed fetched %d times: want the seed refused for robots.txt, unfetched", r.Pages, r.Skipped, h.count("/"))
				}
			},
		},
		// robots.txt redirecting in a loop: past the redirect cap it is
		// unavailable (RFC 9309 §2.3.1.2), which allows everything.
		hcase{
			name: "robots_redirect_loop",
			server: func() http.Handler {
				return site(map[string]http.Handler{"/robots.txt": egresstest.Redirect(http.StatusFound, "/robots.txt")})
			},
			call: callCrawl, path: "/",
			crawl:    airlock.CrawlRequest{MaxPages: 3, Depth: 1, Timeout: longTimeout},
			capBytes: bodyCap, k: 8,
			check: func(t *testing.T, r result, h *hits) {
				if n := h.count("/robots.txt"); n != maxRedirects+1 {
					t.Errorf("robots.txt requested %d times, want %d (the first and %d redirects)", n, maxRedirects+1, maxRedirects)
				}
				if r.Pages != 3 {
					t.Errorf("%d pages (skipped %v), want 3", r.Pages, r.Skipped)
				}
			},
		},

		// Sitemap bombs.
		hcase{
			name:   "sitemap_endless",
			server: func() http.Handler { return site(map[string]http.Handler{"/sitemap.xml": endlessSitemap()}) },
			call:   callCrawl, path: "/",
			crawl:    airlock.CrawlRequest{MaxPages: 3, Depth: 1, Sitemap: true, Timeout: longTimeout},
			capBytes: bodyCap, k: 8,
			check: func(t *testing.T, r result, h *hits) {
				if r.Pages != 3 {
					t.Errorf("%d pages, want 3 (the site's own, the sitemap refused)", r.Pages)
				}
			},
		},
		hcase{
			name: "sitemap_nested_index",
			server: func() http.Handler {
				return site(map[string]http.Handler{"/sitemap.xml": nestedSitemaps(1000), "/sm/": nestedSitemaps(1000)})
			},
			call: callCrawl, path: "/",
			crawl:    airlock.CrawlRequest{MaxPages: 3, Depth: 1, Sitemap: true, Timeout: longTimeout},
			capBytes: bodyCap, k: 8,
			check: func(t *testing.T, r result, h *hits) {
				n := h.all() - h.count("/") - h.count("/a") - h.count("/b") - h.count("/robots.txt")
				if n > crawl.MaxSitemaps {
					t.Errorf("%d sitemap files fetched, over crawl.MaxSitemaps (%d)", n, crawl.MaxSitemaps)
				}
			},
		},
		hcase{
			name: "sitemap_gzip_bomb",
			server: func() http.Handler {
				body := gzipRepeat(`<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><url><loc>`, strings.Repeat(" ", 1024), "", 64<<10) // 64 MiB of whitespace: past the 50 MB the crawl used to buffer
				return site(map[string]http.Handler{"/sitemap.xml": static("application/x-gzip", "", body)})
			},
			call: callCrawl, path: "/",
			crawl:    airlock.CrawlRequest{MaxPages: 3, Depth: 1, Sitemap: true, Timeout: longTimeout},
			capBytes: decodedCap, k: 8,
			check: func(t *testing.T, r result, h *hits) {
				if r.Pages != 3 {
					t.Errorf("%d pages, want 3", r.Pages)
				}
			},
		},

		// Hostile PDFs, through the real PDF child.
		hcase{
			name:   "pdf_cyclic_page_tree",
			server: func() http.Handler { return static("application/pdf", "", cyclicPDF()) },
			call:   callFetch, path: "/",
			pdfTimeout: time.Second, minElapsed: time.Second,
			code: airlock.CodeTimeout, reason: airlock.ReasonCPUDeadline,
			capBytes: bodyCap, k: 48,
		},
		hcase{
			name:   "pdf_huge_declared_stream",
			server: func() http.Handler { return static("application/pdf", "", hugeStreamPDF()) },
			call:   callFetch, path: "/",
			pdfTimeout: 5 * time.Second * timeScale, // the child's start-up included
			capBytes:   bodyCap, k: 48,
		},
		hcase{
			name:   "pdf_content_bomb",
			server: func() http.Handler { return static("application/pdf", "", contentBombPDF(16<<20)) },
			call:   callFetch, path: "/",
			// 112 MB of content takes the reader about 5 s: past the limit.
			pdfTimeout: time.Second, minElapsed: time.Second,
			code: airlock.CodeTimeout, reason: airlock.ReasonCPUDeadline,
			capBytes: extract.MaxPDFTextBytes, k: 8,
		},
	)
	return cs
}
