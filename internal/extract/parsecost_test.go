package extract

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// treeDepth is the deepest element nesting under n.
func treeDepth(n *html.Node) int {
	d := 0
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		if c.Type == html.ElementNode {
			d = max(d, 1+treeDepth(c))
		}
	}
	return d
}

// TestParseCostFlattens: the HTML parser's work for each token is the
// depth of its stack of open elements; 250 nested <b> then 300,000 <hr>
// would cost 75 million steps (2.4 million <hr> took 11-15 s). parseHTML
// flattens such a document to at most flattenShallow levels, with the
// text kept; an ordinary page keeps its nesting. The test's document
// (120,000 <hr>: 30 million steps) is just big enough to cross the bound
// clearly.
func TestParseCostFlattens(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	b.WriteString("<html><body><p>start of the text</p>")
	b.WriteString(strings.Repeat("<b>", 250))
	b.WriteString(strings.Repeat("<hr>", 120000))
	b.WriteString("the end of the text")
	if w, _ := parseWork(b.Bytes()); w <= maxParseWork {
		t.Fatalf("parseWork = %d, want over %d", w, maxParseWork)
	}
	doc, err := parseHTML(b.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if d := treeDepth(doc); d > flattenShallow+4 {
		t.Errorf("tree depth %d: not flattened", d)
	}
	if txt := nodeText(doc); !strings.Contains(txt, "start of the text") || !strings.Contains(txt, "the end of the text") {
		t.Errorf("text lost: %.200q", txt)
	}

	// An ordinary deep page (60 levels, a few thousand tokens) is parsed
	// as it is.
	page := "<html><body>" + strings.Repeat("<div>", 60) + strings.Repeat("<p>some text here</p>", 2000) + strings.Repeat("</div>", 60) + "</body></html>"
	if w, _ := parseWork([]byte(page)); w > maxParseWork {
		t.Fatalf("ordinary page: parseWork = %d over %d", w, maxParseWork)
	}
	doc, err = parseHTML([]byte(page))
	if err != nil {
		t.Fatal(err)
	}
	if d := treeDepth(doc); d < 62 {
		t.Errorf("ordinary page flattened to depth %d", d)
	}
}

// TestFlattenUnmatchedEndTags: end tags that close nothing cost flatten
// no scan of its stack (it was quadratic in them), and it still closes
// the elements that are open.
func TestFlattenUnmatchedEndTags(t *testing.T) {
	t.Parallel()
	body := []byte("<div><span>x" + strings.Repeat("</b>", 10) + "</span></span></div>y<i>z")
	if got, want := string(flatten(body, 5)), "<div><span>x</span></div>y<i>z"; got != want {
		t.Errorf("flatten = %q, want %q", got, want)
	}
}

// TestUnclosedLinksNotFlattened: a page of unclosed <a> elements is not
// deep (the parser ends an open a at the next <a>), so the cost bound
// must not flatten it and lose its links.
func TestUnclosedLinksNotFlattened(t *testing.T) {
	t.Parallel()
	const n = 60000
	var b bytes.Buffer
	b.WriteString("<!doctype html><title>links</title><body>")
	for i := range n {
		fmt.Fprintf(&b, "<a href=/l%d>", i)
	}
	if w, _ := parseWork(b.Bytes()); w > maxParseWork {
		t.Errorf("parseWork = %d over %d for %d unclosed links", w, maxParseWork, n)
	}
	doc, err := parseHTML(b.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	links := 0
	walkElements(doc, func(e *html.Node) bool {
		if href, _ := attr(e, "href"); e.DataAtom == atom.A && href != "" {
			links++
		}
		return true
	})
	if links != n {
		t.Errorf("%d links after parsing, want %d", links, n)
	}
}
