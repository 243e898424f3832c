package crawl

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/crawl/crawlbench"
)

// The benchmarks crawl the generated loopback site of crawlbench.
// BenchmarkColly, in the nested module bench/ (which keeps colly out of
// this module), crawls the same site with the same settings:
//
//	go test -run '^$' -bench CrawlGeneratedSite -benchtime 3x ./internal/crawl/
//	cd bench && go test -run '^$' -bench Colly -benchtime 3x .

// benchTransport is the client side of the crawl benchmarks; bench/'s
// BenchmarkColly builds the same.
func benchTransport() *http.Transport {
	return &http.Transport{
		MaxIdleConns:        crawlbench.MaxIdleConns,
		MaxIdleConnsPerHost: crawlbench.MaxIdleConnsPerHost,
		IdleConnTimeout:     crawlbench.IdleConnTimeout,
	}
}

// clientDoer is a Doer over a plain http.Client (test code may dial
// loopback; the engine's Doer is egress's client).
type clientDoer struct{ c *http.Client }

func (d clientDoer) Do(ctx context.Context, req *airlock.HTTPRequest) (*airlock.HTTPResponse, error) {
	hr, err := http.NewRequestWithContext(ctx, http.MethodGet, req.URL, nil)
	if err != nil {
		return nil, err
	}
	for k, v := range req.Header {
		hr.Header[k] = v
	}
	res, err := d.c.Do(hr)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, err
	}
	return &airlock.HTTPResponse{Status: res.StatusCode, Header: res.Header, Body: body, URL: res.Request.URL.String(), Proto: res.Proto}, nil
}

// BenchmarkCrawlGeneratedSite crawls the whole generated site breadth
// first with extract none: the page function only tokenizes links, so the
// figure is the crawler's own cost plus HTTP over loopback.
func BenchmarkCrawlGeneratedSite(b *testing.B) {
	for _, n := range crawlbench.Sizes {
		for _, perHost := range []int{2, crawlbench.Concurrency} {
			for _, robots := range []bool{false, true} {
				if robots && perHost != crawlbench.Concurrency {
					continue
				}
				name := fmt.Sprintf("pages=%d/per-host=%d", n, perHost)
				if robots {
					name += "/robots"
				}
				b.Run(name, func(b *testing.B) {
					s := crawlbench.NewSite(b, n)
					tr := benchTransport()
					defer tr.CloseIdleConnections()
					cfg := Config{Doer: clientDoer{&http.Client{Transport: tr}}, Page: linkPage}
					req := airlock.CrawlRequest{
						Seed: s.Seed(), Depth: Unlimited, MaxPages: n, Concurrency: crawlbench.Concurrency,
						PerHostConcurrency: perHost, Extract: airlock.ExtractNone, IgnoreRobots: !robots,
					}
					peak := crawlbench.StartHeapPeak(b)
					total := 0
					for b.Loop() {
						sum, err := Run(b.Context(), cfg, req, func(*airlock.Page) error { return nil }, nil)
						if err != nil {
							b.Fatal(err)
						}
						if sum.Pages != n {
							b.Fatalf("crawled %d pages, want %d (skipped %v)", sum.Pages, n, sum.Skipped[:min(5, len(sum.Skipped))])
						}
						total += sum.Pages
					}
					peak.Report(b)
					crawlbench.ReportPages(b, total)
				})
			}
		}
	}
}

// memSizes are the crawl sizes of BenchmarkCrawlMemory.
var memSizes = []int{1000, 10000, 100000}

// BenchmarkCrawlMemory crawls the generated site once per iteration and
// measures the heap (see crawlbench.HeapPeak): peak-retained-MiB is the largest heap
// that survives a forced GC, taken every n/50 pages, and
// crawl-retained-KiB is that less the heap before the crawl (the test
// binary, the site's server): what the crawl itself holds. The forced GCs
// slow the crawl, so its pages/s is not reported; see
// BenchmarkCrawlGeneratedSite.
//
//	go test -run '^$' -bench CrawlMemory -benchtime 1x -count 5 ./internal/crawl/
func BenchmarkCrawlMemory(b *testing.B) {
	for _, n := range memSizes {
		for _, perHost := range []int{2, crawlbench.Concurrency} {
			b.Run(fmt.Sprintf("pages=%d/per-host=%d", n, perHost), func(b *testing.B) {
				s := crawlbench.NewSite(b, n)
				tr := benchTransport()
				defer tr.CloseIdleConnections()
				cfg := Config{Doer: clientDoer{&http.Client{Transport: tr}}, Page: linkPage}
				req := airlock.CrawlRequest{
					Seed: s.Seed(), Depth: Unlimited, MaxPages: n, Concurrency: crawlbench.Concurrency,
					PerHostConcurrency: perHost, Extract: airlock.ExtractNone, IgnoreRobots: true,
				}
				every := max(1, n/50)
				peak := crawlbench.StartHeapPeak(b)
				for b.Loop() {
					emitted := 0
					sum, err := Run(b.Context(), cfg, req, func(*airlock.Page) error {
						if emitted++; emitted%every == 0 {
							peak.Probe()
						}
						return nil
					}, nil)
					if err != nil {
						b.Fatal(err)
					}
					if sum.Pages != n {
						b.Fatalf("crawled %d pages, want %d", sum.Pages, n)
					}
				}
				peak.Report(b)
			})
		}
	}
}
