package extract

import (
	"strings"
	"unicode/utf8"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// The page as a sequence of text blocks: the paragraphs, headings, lists,
// tables and runs of loose text a reader sees, in reading order, each with
// the text features that block classifiers (boilerpipe, jusText) decide
// on: its length, how much of it is link text, and whether a container
// around it is marked as page furniture.

// A block is one text block of the page.
type block struct {
	// nodes are the page's own nodes making up the block: one element,
	// or a run of inline siblings (text, links, <br>) of a container
	// that also holds blocks.
	nodes []*html.Node
	// parent is the container the block sits in.
	parent *html.Node
	tag    atom.Atom // the element's tag; 0 for a run of inline nodes
	text   string    // plain text (nodeText)
	chars  int       // characters of text, white space collapsed
	link   int       // ...of them inside links
	words  int
	// commas counts clause punctuation, Readability's cue of prose.
	commas int
}

// linkDensity is the fraction of the block's text inside links.
func (b *block) linkDensity() float64 {
	if b.chars == 0 {
		return 0
	}
	return float64(b.link) / float64(b.chars)
}

// blockHeading reports a heading block.
func (b *block) heading() bool {
	switch b.tag {
	case atom.H1, atom.H2, atom.H3, atom.H4, atom.H5, atom.H6:
		return true
	}
	return false
}

// maxBlocks bounds the blocks collected from one page; the element cap
// (maxExtractElements) keeps real pages far below it.
const maxBlocks = 20000

// collectBlocks splits the tree under root into blocks, in document order.
func collectBlocks(root *html.Node) []*block {
	c := blockCollector{}
	c.walk(root, 0)
	return c.out
}

type blockCollector struct {
	out []*block
	run []*html.Node // inline nodes pending as one block
	// runParent is the container of run.
	runParent *html.Node
}

func (c *blockCollector) flush() {
	if len(c.run) == 0 {
		return
	}
	run := c.run
	c.run = nil
	c.add(&block{nodes: run, parent: c.runParent})
}

func (c *blockCollector) add(b *block) {
	if len(c.out) >= maxBlocks {
		return
	}
	var w textWriter
	for _, n := range b.nodes {
		walkText(&w, n, 0, false)
	}
	b.text = cleanText(w.b.String())
	if strings.TrimSpace(b.text) == "" {
		return
	}
	for _, n := range b.nodes {
		chars, link := linkChars(n, false, 0)
		b.chars += chars
		b.link += link
	}
	b.words = countWords(b.text)
	b.commas = strings.Count(b.text, ",") + strings.Count(b.text, "，") + strings.Count(b.text, "、") + strings.Count(b.text, "، ")
	c.out = append(c.out, b)
}

// linkChars counts the characters of n's text (white space collapsed) and
// how many of them are inside links.
func linkChars(n *html.Node, in bool, depth int) (chars, link int) {
	if depth > maxTextDepth {
		return 0, 0
	}
	switch n.Type {
	case html.TextNode:
		l := utf8.RuneCountInString(collapse(n.Data))
		if in {
			return l, l
		}
		return l, 0
	case html.ElementNode:
		if skipTags[tagAtom(n)] || hidden(n) {
			return 0, 0
		}
		if tagAtom(n) == atom.A {
			if _, ok := attr(n, "href"); ok {
				in = true
			}
		}
	case html.DocumentNode:
	default:
		return 0, 0
	}
	for k := n.FirstChild; k != nil; k = k.NextSibling {
		a, b := linkChars(k, in, depth+1)
		chars += a
		link += b
	}
	return chars, link
}

// wholeBlockTags are blocks taken whole, whatever they hold.
var wholeBlockTags = map[atom.Atom]bool{
	atom.P: true, atom.H1: true, atom.H2: true, atom.H3: true, atom.H4: true,
	atom.H5: true, atom.H6: true, atom.Pre: true, atom.Ul: true, atom.Ol: true,
	atom.Dl: true, atom.Blockquote: true, atom.Figure: true, atom.Address: true,
}

func (c *blockCollector) walk(n *html.Node, depth int) {
	if depth > maxTextDepth {
		return
	}
	for k := n.FirstChild; k != nil; k = k.NextSibling {
		switch k.Type {
		case html.TextNode:
			if len(c.run) == 0 && strings.TrimSpace(k.Data) == "" {
				continue
			}
			c.pend(n, k)
			continue
		case html.ElementNode:
		default:
			continue
		}
		a := tagAtom(k)
		if skipTags[a] || hidden(k) {
			continue
		}
		switch {
		case a == atom.Table && layoutTable(k):
			c.flush()
			c.walkTable(k, depth+1)
		case wholeBlockTags[a] || a == atom.Table:
			c.flush()
			c.add(&block{nodes: []*html.Node{k}, parent: n, tag: a})
		case blockTags[a] || a == atom.Td || a == atom.Th:
			c.flush()
			if hasBlockChild(k) {
				c.walk(k, depth+1)
				c.flush()
			} else {
				c.add(&block{nodes: []*html.Node{k}, parent: n, tag: a})
			}
		case a == atom.Br && len(c.run) > 0 && endsWithBr(c.run):
			// A blank line (<br><br>) ends a paragraph of loose text.
			c.run = c.run[:len(c.run)-1]
			c.flush()
		default:
			c.pend(n, k)
		}
	}
	c.flush()
}

func (c *blockCollector) pend(parent, n *html.Node) {
	if len(c.run) > 0 && c.runParent != parent {
		c.flush()
	}
	c.runParent = parent
	c.run = append(c.run, n)
}

// endsWithBr reports a run whose last node, white space aside, is a <br>.
func endsWithBr(run []*html.Node) bool {
	for i := len(run) - 1; i >= 0; i-- {
		n := run[i]
		if n.Type == html.TextNode && strings.TrimSpace(n.Data) == "" {
			continue
		}
		return n.Type == html.ElementNode && tagAtom(n) == atom.Br
	}
	return false
}

// walkTable walks a layout table's cells as containers.
func (c *blockCollector) walkTable(t *html.Node, depth int) {
	walkElements(t, func(e *html.Node) bool {
		if e == t {
			return true
		}
		switch tagAtom(e) {
		case atom.Td, atom.Th:
			c.walk(e, depth+1)
			c.flush()
			return false
		case atom.Table:
			if layoutTable(e) {
				c.walkTable(e, depth+1)
			} else {
				c.add(&block{nodes: []*html.Node{e}, parent: e.Parent, tag: atom.Table})
			}
			return false
		}
		return !skipTags[tagAtom(e)]
	})
}

// layoutTable reports a table used for page layout rather than data: one
// that holds another table, headings, articles, sections, forms or quotes,
// is marked presentational, has a single column, or whose cells hold
// prose (long text on average) rather than values. A data table's cells
// may still wrap their values in <div>s and <p>s, as generated pages do.
func layoutTable(t *html.Node) bool {
	if strings.EqualFold(attrValue(t, "role"), "presentation") || strings.EqualFold(attrValue(t, "role"), "none") {
		return true
	}
	layout, header := false, false
	rows, maxCols, cells, chars := 0, 0, 0, 0
	cols := 0
	walkElements(t, func(e *html.Node) bool {
		if layout {
			return false
		}
		if e == t {
			return true
		}
		switch tagAtom(e) {
		case atom.Table, atom.H1, atom.H2, atom.H3, atom.Blockquote, atom.Form, atom.Article, atom.Section:
			layout = true
			return false
		case atom.Tr:
			rows++
			cols = 0
		case atom.Th, atom.Thead, atom.Caption:
			header = true
			if tagAtom(e) == atom.Th {
				cols++
				cells++
				chars += textLen(e, 4096)
				maxCols = max(maxCols, cols)
			}
		case atom.Td:
			cols++
			cells++
			chars += textLen(e, 4096)
			maxCols = max(maxCols, cols)
		}
		return true
	})
	if layout || maxCols < 2 || rows < 2 || cells == 0 {
		return true
	}
	avg := chars / cells
	if header {
		return avg > maxDataCellHeader
	}
	return avg > maxDataCell
}

// A data table's cells hold this many characters on average at most (with
// header cells, a little more: a table of descriptions).
const (
	maxDataCell       = 120
	maxDataCellHeader = 300
)
