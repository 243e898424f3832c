package extract

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
)

// TestDedupeCountsBounded: a page of thousands of paragraphs each written
// twice costs dedupeBlocks a bounded number of readings of the page (it
// read the whole page once per pair, quadratic in the page's size), and
// the pairs, which the page does repeat, are all kept.
func TestDedupeCountsBounded(t *testing.T) {
	var w bytes.Buffer
	w.WriteString("<html><head><title>Pairs</title></head><body><article>")
	const pairs = 2000
	for i := range pairs {
		p := fmt.Sprintf("<p>Paragraph number %d says the same thing twice over, as some pages do.</p>", i)
		w.WriteString(p + p)
	}
	w.WriteString("</article></body></html>")

	calls := 0
	defer func(f func(string, string) int) { countText = f }(countText)
	countText = func(s, sub string) int {
		calls++
		return strings.Count(s, sub)
	}
	p, err := Extract(context.Background(), Input{URL: "http://example.com/", Body: w.Bytes()}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if calls > 64 {
		t.Errorf("the page was read %d times to count repeated blocks; want at most 64", calls)
	}
	for _, i := range []int{0, 1, pairs / 2, pairs - 1} {
		para := fmt.Sprintf("Paragraph number %d says", i)
		if n := strings.Count(p.Text, para); n != 2 {
			t.Errorf("paragraph %d is in the text %d times, want 2 (the page has it twice)", i, n)
		}
	}
}
