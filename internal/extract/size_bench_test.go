package extract

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"syscall"
	"testing"
)

// BenchmarkExtractSize measures the whole pipeline on generated article
// pages of growing size. Extraction should be linear in the page's size:
// MB/s (and cpu-ns/B) roughly flat from 100 KB to 10 MB. Past
// maxExtractElements (the 10 MB page) the main content is the readable
// body text, without the extractors.
//
//	go test ./internal/extract -run '^$' -bench ExtractSize -benchtime 3x
func BenchmarkExtractSize(b *testing.B) {
	for _, size := range []int{100 << 10, 1 << 20, 3 << 20, 10 << 20} {
		page := articlePage(size)
		name := fmt.Sprintf("%dKB", size>>10)
		if size >= 1<<20 {
			name = fmt.Sprintf("%dMB", size>>20)
		}
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(page)))
			b.ReportAllocs()
			cpu0 := processCPU()
			for b.Loop() {
				p, err := Extract(context.Background(), Input{URL: "http://example.com/a", Body: page, ContentType: "text/html; charset=utf-8"},
					Options{MaxInputBytes: int64(len(page))})
				if err != nil {
					b.Fatal(err)
				}
				if len(p.Text) < size/4 {
					b.Fatalf("text of %d bytes from a %d-byte article", len(p.Text), len(page))
				}
			}
			// CPU time (the process's, garbage collection included) per
			// input byte: steadier than wall time on a busy machine.
			b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N)/float64(len(page)), "cpu-ns/B")
		})
	}
}

// processCPU is the user and system CPU time the process has used, in
// nanoseconds.
func processCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// articlePage is an article page of about n bytes, the same for the same
// n: navigation, then sections of a heading, paragraphs of random common
// words (so 4-word shingles repeat, as in real prose) with a few links,
// and a short list, then a footer of links.
func articlePage(n int) []byte {
	rng := rand.New(rand.NewPCG(20, 3))
	vocab := strings.Fields("the of and a to in is you that it he was for on are as with his they I at be this have " +
		"from or one had by word but not what all were we when your can said there use an each which she do how their " +
		"if will up other about out many then them these so some her would make like him into time has look two more " +
		"write go see number no way could people my than first water been call who oil its now find long down day did get")
	sentence := func(w *bytes.Buffer) {
		k := 6 + rng.IntN(20)
		for i := range k {
			v := vocab[rng.IntN(len(vocab))]
			if i == 0 {
				v = strings.ToUpper(v[:1]) + v[1:]
			} else {
				w.WriteByte(' ')
			}
			w.WriteString(v)
		}
		w.WriteString(". ")
	}
	var w bytes.Buffer
	w.Grow(n + 4096)
	w.WriteString(`<!doctype html><html lang="en"><head><meta charset="utf-8"><title>A long article | Example News</title>` +
		`<meta property="og:type" content="article"></head><body><nav>`)
	for i := range 50 {
		fmt.Fprintf(&w, `<a href="/n%d">Nav %d</a> `, i, i)
	}
	w.WriteString(`</nav><article><h1>A long article</h1>`)
	for sec := 0; w.Len() < n; sec++ {
		fmt.Fprintf(&w, "<h2>Section %d</h2>\n", sec)
		for range 1 + rng.IntN(3) {
			w.WriteString("<p>")
			for range 2 + rng.IntN(5) {
				sentence(&w)
				if rng.IntN(4) == 0 {
					fmt.Fprintf(&w, `<a href="/x/%d">link %d</a> `, rng.IntN(1e6), rng.IntN(1e6))
				}
			}
			w.WriteString("</p>\n")
		}
		w.WriteString("<ul>")
		for range 2 + rng.IntN(3) {
			w.WriteString("<li>")
			sentence(&w)
			w.WriteString("</li>")
		}
		w.WriteString("</ul>\n")
	}
	w.WriteString(`</article><footer>`)
	for i := range 100 {
		fmt.Fprintf(&w, `<a href="/f%d">Foot %d</a> `, i, i)
	}
	w.WriteString(`</footer></body></html>`)
	return w.Bytes()
}
