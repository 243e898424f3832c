package extract

import (
	"strings"
	"testing"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// TestLayoutTable: a data table whose cells wrap their values in <div>s
// (as generated pages do) stays a data table, so its rows reach the
// Markdown; tables of prose, of one column, nesting tables or headings,
// or marked presentational are layout and read as blocks.
func TestLayoutTable(t *testing.T) {
	row := func(cells ...string) string {
		return "<tr><td><div>" + strings.Join(cells, "</div></td><td><div>") + "</div></td></tr>"
	}
	prose := strings.Repeat("A long paragraph of prose that fills a column of the page. ", 6)
	tests := []struct {
		name, table string
		layout      bool
	}{
		{"values in divs", "<table>" + row("Application", "Size") + row("Farm Heroes", "71.1 MB") + row("Shadow Fight", "42.3 MB") + "</table>", false},
		{"header cells", "<table><tr><th>Film</th><th>Year</th></tr>" + row("Repeat Performance", "1947") + "</table>", false},
		{"prose columns", "<table>" + row(prose, prose) + row(prose, prose) + "</table>", true},
		{"one column", "<table>" + row("a") + row("b") + row("c") + "</table>", true},
		{"nested table", "<table><tr><td><table>" + row("a", "b") + row("c", "d") + "</table></td><td>x</td></tr>" + row("e", "f") + "</table>", true},
		{"heading inside", "<table><tr><td><h2>Menu</h2></td><td>x</td></tr>" + row("e", "f") + "</table>", true},
		{"presentational", `<table role="presentation">` + row("a", "b") + row("c", "d") + "</table>", true},
	}
	for _, tt := range tests {
		doc, err := html.Parse(strings.NewReader("<body>" + tt.table + "</body>"))
		if err != nil {
			t.Fatal(err)
		}
		var table *html.Node
		walkElements(doc, func(e *html.Node) bool {
			if table == nil && tagAtom(e) == atom.Table {
				table = e
			}
			return table == nil
		})
		if got := layoutTable(table); got != tt.layout {
			t.Errorf("%s: layoutTable = %v, want %v", tt.name, got, tt.layout)
		}
	}
}
