package crawl

import (
	"net/http/httptest"
	"testing"

	"github.com/airlockhq/airlock/internal/crawl/crawlbench"
)

// BenchmarkDiscover compares, on a page of the generated crawl site,
// Discover with the extractor's ExtractNone mode that it replaces in a
// crawl for discovery.
//
//	go test -run '^$' -bench Discover -benchmem ./internal/crawl/
func BenchmarkDiscover(b *testing.B) {
	site := &crawlbench.Site{N: 20000}
	rec := httptest.NewRecorder()
	site.ServeHTTP(rec, httptest.NewRequest("GET", "/p/77", nil))
	resp := htmlResponse("http://127.0.0.1:8080/p/77", rec.Body.Bytes())
	b.Run("discover", func(b *testing.B) {
		b.SetBytes(int64(len(resp.Body)))
		for b.Loop() {
			if _, ok := discover(resp); !ok {
				b.Fatal("Discover declined the page")
			}
		}
	})
	b.Run("extract", func(b *testing.B) {
		b.SetBytes(int64(len(resp.Body)))
		for b.Loop() {
			if _, _, _, err := domPage(b, resp); err != nil {
				b.Fatal(err)
			}
		}
	})
}
