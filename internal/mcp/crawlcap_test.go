package mcp

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestWebCrawlReplyCap: a web_crawl reply stays under MaxCrawlReply
// characters in every format, even with link-heavy pages (json renders
// every link) and many skipped URLs with long paths. The pages are only
// as long as crossing the cap needs (each is cut to its share, and the
// json reply's links alone pass the cap): extracting them is most of the
// test's CPU under the race detector.
func TestWebCrawlReplyCap(t *testing.T) {
	const crawlCapLinks = 24 // paragraphs, each with a link, per page
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/gone") {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<html lang="en"><head><title>Links %s</title></head><body><article><h1>Links</h1>`, r.URL.Path)
		for i := range crawlCapLinks {
			fmt.Fprintf(w, `<p>Paragraph %d with <a href="/elsewhere/%d/%s">a link of some length</a>. %s</p>`, i, i, strings.Repeat("x", 60), longText)
		}
		fmt.Fprint(w, `</article></body></html>`)
	}))
	t.Cleanup(srv.Close)
	cs := inMemory(t, newEngine(t, loopback))
	var urls []string
	for i := range 30 {
		urls = append(urls, fmt.Sprintf("%s/page%d", srv.URL, i))
	}
	for i := range 40 {
		urls = append(urls, fmt.Sprintf("%s/gone%d/%s", srv.URL, i, strings.Repeat("y", 1500)))
	}
	for _, format := range []string{"markdown", "text", "org", "json"} {
		t.Run(format, func(t *testing.T) {
			out := mustOK(t, call(t, cs, ToolCrawl, map[string]any{"urls": urls, "max_pages": 100, "format": format}))
			if n := utf8.RuneCountInString(out); n > MaxCrawlReply {
				t.Errorf("reply of %d characters, above the cap of %d", n, MaxCrawlReply)
			}
			if !strings.Contains(out, "Crawled 30 pages") || !strings.Contains(out, "Skipped:\n") {
				t.Errorf("reply:\n%.400s", out)
			}
			// The input is above the cap: pages are cut to fit, and the
			// json reply (links are not cut) is truncated at the cap.
			if !strings.Contains(out, "long pages were cut to fit the reply") {
				t.Errorf("no page was cut: the pages are too short to test the cap:\n%.400s", out)
			}
			if format == "json" && !strings.Contains(out, "\n\n<reply truncated: ") {
				t.Errorf("the json reply was not truncated: the pages have too few links to test the cap:\n%.400s", out)
			}
		})
	}
}
