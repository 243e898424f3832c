package extract

import (
	"context"
	"testing"
)

// BenchmarkExtractCorpus measures the whole pipeline (charset, parse, bot
// walls, metadata, main content, Markdown, tables) over the corpus, one
// page after another. The bench module's BenchmarkExtract compares it
// with go-trafilatura alone in one run.
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
