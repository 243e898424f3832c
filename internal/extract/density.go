package extract

import (
	"strings"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// The density extractor: a block classifier in the manner of boilerpipe
// and jusText (text length, link density, furniture marks of the
// containers) choosing the page region whose blocks are most worth
// reading. Every block gets a value, positive for running text, negative
// for link lists and marked furniture; the article is the element whose
// blocks sum to the most (a maximum-sum subtree, so a sidebar or comment
// thread beside the article lowers a wrapper's sum and the article's own
// container wins). Inside it, blocks marked as furniture and link lists
// go. It works on the page's own elements, so links, code and white
// space are kept as the page has them.

// Tuning of the density extractor; general rules about pages, not about
// particular sites.
const (
	// Blocks of at least this many words are prose when few of their
	// characters are links.
	densityProseWords = 10
	densityMaxLinks   = 0.5
	// Text of short blocks (captions, bylines, labels) counts for this
	// fraction of its length.
	densityShortWeight = 0.3
	// A container marked as furniture holding more than this fraction of
	// the page's text is a page wrapper with an unlucky class.
	densityWrapperShare = 0.6
)

// furnitureMarks are class and id words of page furniture, whose blocks
// are never the article.
var furnitureMarks = markSet("nav", "navbar*", "navigation", "menu", "menubar", "breadcrumb*",
	"footer*", "sidebar*", "widget*", "share*", "sharing", "social*", "related*",
	"newsletter*", "subscribe*", "subscription", "promo", "advert*", "ads", "ad",
	"banner", "cookie*", "comment*", "disqus*", "respond", "sponsor*",
	"popup", "modal", "pagination", "pager", "tagcloud", "toolbar", "login", "signup", "skip",
	"outbrain", "taboola", "recommended", "trending", "popular", "masthead", "copyright")

// contentMarks are class and id words of the article's containers.
var contentMarks = markSet("article", "content", "entry", "main", "post", "story", "text", "body", "blog")

// furnitureTags are elements that are furniture by their tag.
var furnitureTags = map[atom.Atom]bool{
	atom.Nav: true, atom.Aside: true, atom.Footer: true, atom.Menu: true, atom.Dialog: true,
}

// markedFurniture reports whether n's tag or class and id say furniture.
func markedFurniture(n *html.Node) bool {
	if furnitureTags[tagAtom(n)] {
		return true
	}
	if role, _ := attr(n, "role"); role == "navigation" || role == "complementary" || role == "contentinfo" || role == "banner" {
		return true
	}
	if a := tagAtom(n); a == atom.Article || a == atom.Main {
		return false
	}
	// Class and id tokens one by one: a token naming the content
	// ("post", "entry-content") outweighs one naming furniture, and
	// tokens of more than three words are slugs (categories, tags,
	// titles), not roles.
	furniture := false
	for _, at := range n.Attr {
		if at.Key != "class" && at.Key != "id" {
			continue
		}
		for _, tok := range strings.Fields(at.Val) {
			ws := markWords(tok)
			if len(ws) > 3 {
				continue
			}
			if hasMark(tok, furnitureMarks) {
				furniture = true
				continue
			}
			for _, w := range ws {
				if contentMarks[w] {
					return false
				}
			}
		}
	}
	return furniture
}

// densityContent is the density extractor's main content of doc: a <div>
// holding copies of the chosen blocks, nil when the page has none.
func densityContent(doc *html.Node) *html.Node {
	body := findBody(doc)
	if body == nil {
		return nil
	}
	blocks := collectBlocks(body)
	if len(blocks) == 0 {
		return nil
	}
	// The characters under each element, for the wrapper guard.
	chars := map[*html.Node]int{}
	total := 0
	for _, b := range blocks {
		total += b.chars
		for p := b.parent; p != nil && p != body; p = p.Parent {
			chars[p] += b.chars
		}
	}
	marks := map[*html.Node]bool{}
	marked := func(n *html.Node) bool {
		m, ok := marks[n]
		if !ok {
			m = markedFurniture(n) && float64(chars[n]) <= densityWrapperShare*float64(total)
			marks[n] = m
		}
		return m
	}
	// inFurniture reports a block with furniture between it and top
	// (exclusive; nil for the body).
	inFurniture := func(b *block, top *html.Node) bool {
		if len(b.nodes) == 1 && b.nodes[0].Type == html.ElementNode && marked(b.nodes[0]) {
			return true
		}
		for p := b.parent; p != nil && p != top && p != body; p = p.Parent {
			if marked(p) {
				return true
			}
		}
		return false
	}

	sum := map[*html.Node]float64{}
	var best *html.Node
	bestSum := 0.0
	for _, b := range blocks {
		v := blockValue(b, inFurniture(b, nil))
		for p := b.parent; p != nil; p = p.Parent {
			sum[p] += v
			if p == body {
				break
			}
		}
	}
	for n, s := range sum {
		if s > bestSum || s == bestSum && best != nil && isAncestor(n, best) {
			best, bestSum = n, s
		}
	}
	if best == nil {
		return nil
	}
	out := &html.Node{Type: html.ElementNode, Data: "div", DataAtom: atom.Div}
	for _, b := range blocks {
		if !under(b.parent, best) {
			continue
		}
		if inFurniture(b, best) {
			continue
		}
		if b.linkDensity() > densityMaxLinks && !b.heading() {
			continue
		}
		out.AppendChild(copyBlock(b))
	}
	if out.FirstChild == nil {
		return nil
	}
	return out
}

// blockValue is what a block adds to the sum of the elements around it.
func blockValue(b *block, furniture bool) float64 {
	if furniture {
		return -float64(b.chars)
	}
	text := float64(b.chars - b.link)
	link := float64(b.link)
	if b.linkDensity() > densityMaxLinks {
		return -float64(b.chars)
	}
	if b.words < densityProseWords && !b.heading() {
		text *= densityShortWeight
	}
	return text - link
}

// under reports whether n is top or inside it.
func under(n, top *html.Node) bool {
	for p := n; p != nil; p = p.Parent {
		if p == top {
			return true
		}
	}
	return false
}

// copyBlock copies a block's nodes; a run of inline nodes goes in a <p>.
func copyBlock(b *block) *html.Node {
	if len(b.nodes) == 1 && b.nodes[0].Type == html.ElementNode && isBlockElem(b.nodes[0]) {
		return cloneFiltered(b.nodes[0], -1)
	}
	p := &html.Node{Type: html.ElementNode, Data: "p", DataAtom: atom.P}
	if len(b.nodes) == 1 && b.nodes[0].Type == html.ElementNode && (b.tag == atom.Td || b.tag == atom.Th) {
		for k := b.nodes[0].FirstChild; k != nil; k = k.NextSibling {
			appendCopy(p, k)
		}
		return p
	}
	for _, n := range b.nodes {
		appendCopy(p, n)
	}
	return p
}

func appendCopy(p, n *html.Node) {
	switch n.Type {
	case html.TextNode:
		p.AppendChild(&html.Node{Type: html.TextNode, Data: n.Data})
	case html.ElementNode:
		if c := cloneFiltered(n, -1); c != nil {
			p.AppendChild(c)
		}
	}
}

// findBody is doc's <body>, nil without one.
func findBody(doc *html.Node) *html.Node {
	var body *html.Node
	walkElements(doc, func(n *html.Node) bool {
		if body != nil {
			return false
		}
		if tagAtom(n) == atom.Body {
			body = n
			return false
		}
		return true
	})
	return body
}
