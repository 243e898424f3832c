package extract

import (
	"strings"
	"testing"

	"golang.org/x/net/html"
)

// walkReference is walkElements written recursively: elements in document
// order, skipping the subtrees visit declines.
func walkReference(n *html.Node, visit func(*html.Node) bool) {
	if n.Type == html.ElementNode && !visit(n) {
		return
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		if c.Type == html.ElementNode || c.Type == html.DocumentNode {
			walkReference(c, visit)
		}
	}
}

func TestWalkElements(t *testing.T) {
	docs := map[string]string{
		"small":         `<html><head><title>T</title></head><body><h1>H</h1><p>a <b>b</b></p><!-- c --><script>x</script></body></html>`,
		"many siblings": "<ul>" + strings.Repeat("<li><a href=/x>x</a></li>", 500) + "</ul>",
		"deep and wide": strings.Repeat("<div><p>a</p><p>b</p>", 200) + strings.Repeat("</div>", 200),
	}
	for name, src := range docs {
		doc, err := parseHTML([]byte(src))
		if err != nil {
			t.Fatal(err)
		}
		for _, skip := range []string{"", "p", "li", "body"} {
			var got, want []*html.Node
			walkElements(doc, func(n *html.Node) bool { got = append(got, n); return n.Data != skip })
			walkReference(doc, func(n *html.Node) bool { want = append(want, n); return n.Data != skip })
			if len(got) != len(want) {
				t.Fatalf("%s, skipping %q: visited %d elements, want %d", name, skip, len(got), len(want))
			}
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("%s, skipping %q: element %d is <%s>, want <%s>", name, skip, i, got[i].Data, want[i].Data)
				}
			}
		}
	}
	if raceEnabled {
		return // the race detector's instrumentation allocates
	}
	doc, _ := parseHTML([]byte(docs["small"]))
	count := 0
	if a := testing.AllocsPerRun(20, func() { walkElements(doc, func(*html.Node) bool { count++; return true }) }); a != 0 {
		t.Errorf("walkElements of a small page: %.0f allocations, want 0", a)
	}
}
