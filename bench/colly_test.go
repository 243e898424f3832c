// Package bench holds the comparison benchmarks whose dependencies stay
// out of the main module: it is a module of its own (go.mod here, with a
// replace of the main module by ../), so that colly and its dependencies
// are neither in airlock's go.mod nor in anything it builds. Run it from
// this directory:
//
//	go test -run '^$' -bench Colly -benchtime 3x .
//
// and compare with package crawl's BenchmarkCrawlGeneratedSite, which
// crawls the same site (internal/crawl/crawlbench) with the same settings.
package bench

import (
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"testing"

	"github.com/gocolly/colly/v2"

	"github.com/airlockhq/airlock/internal/crawl/crawlbench"
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
	for _, n := range crawlbench.Sizes {
		for _, perHost := range []int{2, crawlbench.Concurrency} {
			b.Run(fmt.Sprintf("pages=%d/per-host=%d", n, perHost), func(b *testing.B) {
				s := crawlbench.NewSite(b, n)
				u, _ := url.Parse(s.Server.URL)
				tr := &http.Transport{
					MaxIdleConns:        crawlbench.MaxIdleConns,
					MaxIdleConnsPerHost: crawlbench.MaxIdleConnsPerHost,
					IdleConnTimeout:     crawlbench.IdleConnTimeout,
				}
				defer tr.CloseIdleConnections()
				peak := crawlbench.StartHeapPeak(b)
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
					if err := c.Visit(s.Seed()); err != nil {
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
				peak.Report(b)
				crawlbench.ReportPages(b, total)
			})
		}
	}
}
