package extract

import (
	"bytes"
	"context"
	"net/url"
	"testing"

	trafilatura "github.com/markusmobius/go-trafilatura"
)

// BenchmarkExtractCorpus measures the whole pipeline (charset, parse, bot
// walls, metadata, main content, Markdown, tables) over the corpus, one
// page after another; compare its pages/s with BenchmarkTrafilaturaOnly.
func BenchmarkExtractCorpus(b *testing.B) {
	cases := loadCorpus(b)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	n := 0
	for b.Loop() {
		for _, c := range cases {
			if _, err := Extract(ctx, Input{URL: corpusBase, Body: c.src}, Options{}); err != nil {
				b.Fatal(err)
			}
			n++
		}
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "pages/s")
}

// BenchmarkTrafilaturaOnly is go-trafilatura alone as the published scores
// run it (fallback on, its defaults otherwise) over the same pages,
// parsing included.
func BenchmarkTrafilaturaOnly(b *testing.B) {
	cases := loadCorpus(b)
	base, _ := url.Parse(corpusBase)
	b.ReportAllocs()
	b.ResetTimer()
	n := 0
	for b.Loop() {
		for _, c := range cases {
			if _, err := trafilatura.Extract(bytes.NewReader(c.src), trafilatura.Options{EnableFallback: true, OriginalURL: base}); err != nil {
				b.Logf("%s: %v", c.name, err)
			}
			n++
		}
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "pages/s")
}
