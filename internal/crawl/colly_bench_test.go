package crawl

import (
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"testing"

	"github.com/gocolly/colly/v2"
)

// BenchmarkColly crawls the generated site of BenchmarkCrawlGeneratedSite
// with colly v2.3.0 configured the same way: asynchronous, the same
// per-host parallelism (one host, so it is also the total), link
// following through every <a href>, no depth limit, robots.txt ignored
// (colly's default), and the same http.Transport settings. colly's own
// visited check is not atomic under Async: it may fetch a URL twice, so
// distinct URLs are counted (and no request cap is set, which could then
// leave pages out).
func BenchmarkColly(b *testing.B) {
	for _, n := range benchSizes {
		for _, perHost := range []int{2, benchConcurrency} {
			b.Run(fmt.Sprintf("pages=%d/per-host=%d", n, perHost), func(b *testing.B) {
				s := newBenchSite(b, n)
				u, _ := url.Parse(s.srv.URL)
				tr := benchTransport()
				defer tr.CloseIdleConnections()
				peak := startHeapPeak(b)
				total := 0
				for b.Loop() {
					var pages sync.Map
					c := colly.NewCollector(
						colly.Async(true),
						colly.AllowedDomains(u.Hostname()),
						colly.MaxDepth(0),
						colly.IgnoreRobotsTxt(),
					)
					c.WithTransport(tr)
					if err := c.Limit(&colly.LimitRule{DomainGlob: "*", Parallelism: perHost}); err != nil {
						b.Fatal(err)
					}
					c.OnHTML("a[href]", func(e *colly.HTMLElement) {
						e.Request.Visit(e.Attr("href"))
					})
					c.OnResponse(func(r *colly.Response) {
						if r.StatusCode == http.StatusOK {
							pages.Store(r.Request.URL.String(), true)
						}
					})
					if err := c.Visit(s.seed()); err != nil {
						b.Fatal(err)
					}
					c.Wait()
					got := 0
					pages.Range(func(any, any) bool { got++; return true })
					if got != n {
						b.Fatalf("colly crawled %d pages, want %d", got, n)
					}
					total += n
				}
				peak.report(b)
				reportPages(b, total)
			})
		}
	}
}
