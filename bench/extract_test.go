package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"testing"

	trafilatura "github.com/markusmobius/go-trafilatura"

	"github.com/airlockhq/airlock/internal/extract"
)

// The pages of internal/extract's regression corpus (Mozilla
// Readability's test pages, Apache-2.0).
const (
	corpusDir  = "../internal/extract/testdata/readability"
	corpusBase = "http://fakehost/test/page.html"
)

func loadPages(b *testing.B) [][]byte {
	b.Helper()
	tb, err := os.ReadFile(filepath.Join(corpusDir, "truth.json"))
	if err != nil {
		b.Fatal(err)
	}
	var truth map[string]json.RawMessage
	if err := json.Unmarshal(tb, &truth); err != nil {
		b.Fatal(err)
	}
	names := make([]string, 0, len(truth))
	for k := range truth {
		names = append(names, k)
	}
	sort.Strings(names)
	pages := make([][]byte, 0, len(names))
	for _, n := range names {
		src, err := os.ReadFile(filepath.Join(corpusDir, n, "source.html"))
		if err != nil {
			b.Fatal(err)
		}
		pages = append(pages, src)
	}
	return pages
}

// BenchmarkExtract compares, in one run, airlock's whole extraction
// pipeline (charset, parse, bot walls, metadata, main content, Markdown,
// tables) with go-trafilatura v1.12.2 alone (fallback on, parsing
// included) over the same pages, one after another:
//
//	go test -run '^$' -bench Extract -count 6 . | benchstat -col /impl -
func BenchmarkExtract(b *testing.B) {
	pages := loadPages(b)
	base, _ := url.Parse(corpusBase)
	ctx := context.Background()
	impls := []struct {
		name string
		run  func([]byte) error
	}{
		{"airlock", func(src []byte) error {
			_, err := extract.Extract(ctx, extract.Input{URL: corpusBase, Body: src}, extract.Options{})
			return err
		}},
		{"trafilatura", func(src []byte) error {
			_, err := trafilatura.Extract(bytes.NewReader(src), trafilatura.Options{EnableFallback: true, OriginalURL: base})
			return err
		}},
	}
	for _, impl := range impls {
		b.Run("impl="+impl.name, func(b *testing.B) {
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				for _, src := range pages {
					if err := impl.run(src); err != nil && impl.name == "airlock" {
						b.Fatal(err)
					}
					n++
				}
			}
			b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "pages/s")
		})
	}
}
