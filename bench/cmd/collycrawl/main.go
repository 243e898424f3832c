// Command collycrawl crawls one site with colly, configured as
// BenchmarkColly configures it, and prints the number of distinct pages it
// fetched: the colly side of the whole-process comparison in
// process_test.go (BenchmarkProcessCrawl), which runs it as its own
// process next to `airlock crawl`.
//
//	collycrawl -per-host 8 http://127.0.0.1:PORT/p/0
package main

import (
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"sync"

	"github.com/gocolly/colly/v2"

	"github.com/airlockhq/airlock/internal/crawl/crawlbench"
)

func main() {
	perHost := flag.Int("per-host", crawlbench.Concurrency, "requests at once to the host")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: collycrawl [-per-host N] SEED")
		os.Exit(2)
	}
	n, err := crawl(flag.Arg(0), *perHost)
	if err != nil {
		fmt.Fprintln(os.Stderr, "collycrawl:", err)
		os.Exit(1)
	}
	fmt.Println(n)
}

func crawl(seed string, perHost int) (int, error) {
	u, err := url.Parse(seed)
	if err != nil {
		return 0, err
	}
	tr := &http.Transport{
		MaxIdleConns:        crawlbench.MaxIdleConns,
		MaxIdleConnsPerHost: crawlbench.MaxIdleConnsPerHost,
		IdleConnTimeout:     crawlbench.IdleConnTimeout,
	}
	var pages sync.Map
	c := colly.NewCollector(
		colly.Async(true),
		colly.AllowedDomains(u.Hostname()),
		colly.MaxDepth(0),
		colly.IgnoreRobotsTxt(),
	)
	c.WithTransport(tr)
	if err := c.Limit(&colly.LimitRule{DomainGlob: "*", Parallelism: perHost}); err != nil {
		return 0, err
	}
	c.OnHTML("a[href]", func(e *colly.HTMLElement) {
		e.Request.Visit(e.Attr("href"))
	})
	c.OnResponse(func(r *colly.Response) {
		if r.StatusCode == http.StatusOK {
			pages.Store(r.Request.URL.String(), true)
		}
	})
	if err := c.Visit(seed); err != nil {
		return 0, err
	}
	c.Wait()
	got := 0
	pages.Range(func(any, any) bool { got++; return true })
	return got, nil
}
