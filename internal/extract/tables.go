package extract

import (
	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"

	"github.com/airlockhq/airlock"
)

// tables returns the data tables of the document as rows of cell texts.
// Layout tables are left out: those with role=presentation or none, and
// those holding other tables; so are tables with fewer than two rows or
// no row of at least two cells. At most airlock.MaxPageTables tables of
// airlock.MaxTableRows rows are kept; the cut is recorded in p.Truncated.
func tables(doc *html.Node, p *airlock.Page) [][][]string {
	out := [][][]string{}
	walkElements(doc, func(n *html.Node) bool {
		a := tagAtom(n)
		if skipTags[a] {
			return false
		}
		if a != atom.Table {
			return true
		}
		if role := attrValue(n, "role"); role == "presentation" || role == "none" || hasNestedTable(n) {
			return true // a layout table: look inside it
		}
		rows, cut := tableRows(n)
		if len(rows) < 2 || !anyWide(rows) {
			return false
		}
		if len(out) == airlock.MaxPageTables {
			markTruncated(p, "tables")
			return false
		}
		if cut {
			markTruncated(p, "tables")
		}
		out = append(out, rows)
		return false
	})
	return out
}

func hasNestedTable(t *html.Node) bool {
	found := false
	walkElements(t, func(n *html.Node) bool {
		if n != t && tagAtom(n) == atom.Table {
			found = true
		}
		return !found
	})
	return found
}

func anyWide(rows [][]string) bool {
	for _, r := range rows {
		if len(r) >= 2 {
			return true
		}
	}
	return false
}

// tableRows collects the rows of t (not of nested tables), each row's th
// and td texts in order, empty rows skipped.
func tableRows(t *html.Node) (rows [][]string, cut bool) {
	walkElements(t, func(n *html.Node) bool {
		a := tagAtom(n)
		if n != t && a == atom.Table {
			return false
		}
		if a != atom.Tr {
			return true
		}
		if len(rows) == airlock.MaxTableRows {
			cut = true
			return false
		}
		var row []string
		empty := true
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			if ca := tagAtom(c); c.Type == html.ElementNode && (ca == atom.Td || ca == atom.Th) {
				cell := clip(collapse(textOf(c)), maxCellText)
				if cell != "" {
					empty = false
				}
				row = append(row, cell)
			}
		}
		if !empty {
			rows = append(rows, row)
		}
		return false
	})
	return rows, cut
}
