package extract

import (
	"strconv"
	"strings"
	"unicode"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// mdCell is one cell of a table being written.
type mdCell struct {
	n            *html.Node
	colspan, row int
	rowspan      int
}

// table writes a table as a GitHub table when it is one: rows of cells
// holding text, links and images, at most maxMDColumns wide. Spanned
// cells become empty cells; the first row that is not empty is the head
// row (GitHub tables have one), whatever its cells. Other tables (layout
// tables, code listings laid out in cells, tables of one column, or with
// nested tables, lists, code or headings in their cells) are written
// cell by cell, each cell's content as blocks, which reads in order.
func (w *mdWriter) table(t *html.Node, depth int) {
	var caption *html.Node
	var rows [][]mdCell
	headRows := 0
	addRow := func(tr *html.Node, head bool) {
		var cells []mdCell
		for c := tr.FirstChild; c != nil; c = c.NextSibling {
			if a := mdAtom(c); c.Type == html.ElementNode && (a == atom.Td || a == atom.Th) {
				cells = append(cells, mdCell{n: c, colspan: span(c, "colspan"), rowspan: span(c, "rowspan")})
			}
		}
		if head && len(rows) == headRows {
			headRows++
		}
		rows = append(rows, cells)
	}
	for c := t.FirstChild; c != nil; c = c.NextSibling {
		switch mdAtom(c) {
		case atom.Caption:
			caption = c
		case atom.Tr:
			addRow(c, false)
		case atom.Thead, atom.Tbody, atom.Tfoot:
			for r := c.FirstChild; r != nil; r = r.NextSibling {
				if mdAtom(r) == atom.Tr {
					addRow(r, mdAtom(c) == atom.Thead)
				}
			}
		}
	}
	if caption != nil {
		w.node(caption, depth+1)
		w.flush()
	}
	// Rows of one cell across the table before and after the others (a
	// title, a source line) are written above and below it as blocks.
	lead, trail := titleRows(rows)
	body := rows[lead : len(rows)-trail]
	headRows = max(0, headRows-lead)
	grid, ok := layoutGrid(body)
	if !ok || len(grid) == 0 || len(grid[0]) < 2 || len(grid) < 2 && headRows == 0 || blockCells(body) {
		w.cellByCell(rows, depth)
		return
	}
	w.cellByCell(rows[:lead], depth)
	defer w.cellByCell(rows[len(rows)-trail:], depth)
	rows = body
	texts := make([][]string, 0, len(grid))
	first := -1 // the first row written
	for i, r := range grid {
		tr := make([]string, len(r))
		empty := true
		for j, c := range r {
			if c != nil && c.row == i && c.colspan >= 0 {
				tr[j] = w.cellText(c.n, depth)
				empty = empty && tr[j] == ""
			}
		}
		if empty {
			continue
		}
		if first < 0 {
			first = i
		}
		texts = append(texts, tr)
	}
	if len(texts) == 0 {
		return
	}
	if first >= headRows && !allHeads(rows[first]) && (anyHead(rows) || lead > 0) {
		// Row headers (<th> down the first column) or a title row, and
		// no head row: the first row is data, under an empty head row.
		texts = append([][]string{make([]string, len(texts[0]))}, texts...)
	}
	w.startBlock(false)
	for i, r := range texts {
		w.line("| " + strings.Join(r, " | ") + " |")
		if i == 0 {
			w.line("|" + strings.Repeat(" --- |", len(r)))
		}
	}
}

// titleRows counts the rows of one cell spanning the whole table at its
// start and at its end (none when that is all the table has).
func titleRows(rows [][]mdCell) (lead, trail int) {
	width := 0
	for _, r := range rows {
		w := 0
		for _, c := range r {
			w += c.colspan
		}
		width = max(width, w)
	}
	title := func(r []mdCell) bool { return len(r) == 1 && r[0].colspan >= 2 && r[0].colspan >= width }
	for lead < len(rows) && title(rows[lead]) {
		lead++
	}
	for trail < len(rows)-lead && title(rows[len(rows)-1-trail]) {
		trail++
	}
	if lead+trail == len(rows) {
		return 0, 0
	}
	return lead, trail
}

// allHeads reports a row of th cells, but for empty ones (a corner).
func allHeads(row []mdCell) bool {
	for _, c := range row {
		if mdAtom(c.n) != atom.Th && flatText(c.n) != "" {
			return false
		}
	}
	return len(row) > 0
}

// anyHead reports a th cell in the rows.
func anyHead(rows [][]mdCell) bool {
	for _, r := range rows {
		for _, c := range r {
			if mdAtom(c.n) == atom.Th {
				return true
			}
		}
	}
	return false
}

// span is a cell's colspan or rowspan, 1 when absent, at most maxMDSpan.
func span(n *html.Node, key string) int {
	v, err := strconv.Atoi(strings.TrimSpace(mdAttr(n, key)))
	if err != nil || v < 1 {
		return 1
	}
	return min(v, maxMDSpan)
}

// layoutGrid places the cells on a grid by their spans: grid[i][j] is
// the cell covering row i, column j (a cell is written where it starts;
// the other places it covers are left empty). ok is false past
// maxMDColumns.
func layoutGrid(rows [][]mdCell) (grid [][]*mdCell, ok bool) {
	var pending []*mdCell // the cell covering each column from a row above
	var left []int        // rows it still covers
	width := 0
	for i := range rows {
		var g []*mdCell
		col := 0
		place := func(c *mdCell) {
			for len(g) <= col {
				g = append(g, nil)
			}
			g[col] = c
			col++
		}
		fillPending := func() {
			for col < len(left) && left[col] > 0 {
				left[col]--
				place(pending[col])
			}
		}
		for k := range rows[i] {
			c := &rows[i][k]
			c.row = i
			fillPending()
			for s := 0; s < c.colspan; s++ {
				if col >= maxMDColumns {
					return nil, false
				}
				for len(left) <= col {
					left = append(left, 0)
					pending = append(pending, nil)
				}
				if c.rowspan > 1 {
					left[col], pending[col] = c.rowspan-1, c
				}
				cell := c
				if s > 0 {
					cell = &mdCell{row: -1, colspan: -1}
				}
				place(cell)
			}
		}
		fillPending()
		width = max(width, len(g))
		grid = append(grid, g)
	}
	for i := range grid {
		for len(grid[i]) < width {
			grid[i] = append(grid[i], nil)
		}
	}
	return grid, true
}

// maxCellItems is the longest list a table cell holds as lines; a longer
// one (a menu in a layout table) makes the table read cell by cell.
const maxCellItems = 10

// blockCells reports a cell holding what a table cell cannot: a table,
// code, a heading, a block quote, or a list that is nested or long. A
// short flat list is written as lines in its cell.
func blockCells(rows [][]mdCell) bool {
	for _, r := range rows {
		for _, c := range r {
			found := false
			walkElements(c.n, func(n *html.Node) bool {
				switch mdAtom(n) {
				case atom.Table, atom.Pre, atom.Blockquote,
					atom.H1, atom.H2, atom.H3, atom.H4, atom.H5, atom.H6:
					found = n != c.n
				case atom.Ul, atom.Ol, atom.Menu, atom.Dir:
					found = n != c.n && !flatList(n)
					return false
				}
				return !found
			})
			if found {
				return true
			}
		}
	}
	return false
}

// flatList reports a list of at most maxCellItems items holding no list.
func flatList(l *html.Node) bool {
	items := 0
	for c := l.FirstChild; c != nil; c = c.NextSibling {
		if c.Type != html.ElementNode {
			continue
		}
		if items++; items > maxCellItems {
			return false
		}
		nested := false
		walkElements(c, func(n *html.Node) bool {
			switch mdAtom(n) {
			case atom.Ul, atom.Ol, atom.Menu, atom.Dir, atom.Table, atom.Pre, atom.Blockquote,
				atom.H1, atom.H2, atom.H3, atom.H4, atom.H5, atom.H6:
				nested = true
			}
			return !nested
		})
		if nested {
			return false
		}
	}
	return true
}

// cellByCell writes each cell's content as blocks, row by row. Beside a
// code block, a cell of line numbers (a highlighter's gutter) is left out.
func (w *mdWriter) cellByCell(rows [][]mdCell, depth int) {
	for _, r := range rows {
		code := false
		for _, c := range r {
			code = code || hasPre(c.n)
		}
		for _, c := range r {
			if code && lineNumbers(c.n) {
				continue
			}
			w.blocks(c.n, depth+1)
			w.flush()
		}
	}
}

// hasPre reports a pre in the cell n, not counting nested tables (each
// table looks at its own cells only, so nested tables cost no more).
func hasPre(n *html.Node) bool {
	found := false
	walkElements(n, func(e *html.Node) bool {
		a := mdAtom(e)
		found = found || a == atom.Pre
		return !found && (e == n || a != atom.Table)
	})
	return found
}

// lineNumbers reports a cell holding only numbers (a gutter is short:
// it stops looking past 4096 bytes of text or at a nested table).
func lineNumbers(n *html.Node) bool {
	size, digits := 0, false
	ok := true
	walkAll(n, func(c *html.Node) bool {
		switch {
		case !ok:
		case c.Type == html.ElementNode && c != n && mdAtom(c) == atom.Table:
			ok = false
		case c.Type == html.TextNode:
			size += len(c.Data)
			for _, r := range c.Data {
				if r >= '0' && r <= '9' {
					digits = true
				} else if !unicode.IsSpace(r) {
					ok = false
					break
				}
			}
			ok = ok && size <= 4096
		}
		return ok
	})
	return ok && digits
}

// walkAll visits the nodes under n (n included) in document order while
// visit returns true.
func walkAll(n *html.Node, visit func(*html.Node) bool) {
	stack := []*html.Node{n}
	for len(stack) > 0 {
		c := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if !visit(c) {
			return
		}
		for k := c.LastChild; k != nil; k = k.PrevSibling {
			stack = append(stack, k)
		}
	}
}

// cellText is a cell's content on one line: blocks and line breaks
// become <br>, pipes are escaped.
func (w *mdWriter) cellText(n *html.Node, depth int) string {
	s := &mdInline{breaks: true}
	w.inlineChildren(s, n, depth+1)
	lines := strings.Split(strings.Trim(s.b.String(), " \n"), "\n")
	out := lines[:0]
	for _, l := range lines {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return strings.ReplaceAll(strings.Join(out, "<br>"), "|", `\|`)
}
