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
	// ...or more than this fraction of its prose.
	densityWrapperProse = 0.5
	// Running text inside an element that says it holds the article
	// counts this many times.
	densityArticleBonus = 2.0
	// An article element holding this fraction of the run's value bounds
	// the run.
	densityArticleShare = 0.6
)

// commentMarks are class and id words of comment threads.
var commentMarks = markSet("comment*", "disqus*", "respond", "replies")

// markedComments reports an element whose class or id says comments.
func markedComments(n *html.Node) bool {
	for _, at := range n.Attr {
		if (at.Key == "class" || at.Key == "id") && hasMark(at.Val, commentMarks) {
			return true
		}
	}
	return false
}

// threadMarks are class and id words of the comments' and trackbacks'
// headings and anchors.
var threadMarks = markSet("comment*", "responses", "replies")

// threadHeading reports a heading whose class or id, or whose anchor's
// id or name, says it heads comments or trackbacks.
func threadHeading(h *html.Node) bool {
	found := false
	walkElements(h, func(e *html.Node) bool {
		for _, at := range e.Attr {
			if (at.Key == "class" || at.Key == "id" || at.Key == "name" && tagAtom(e) == atom.A) && len(markWords(at.Val)) <= 3 && hasMark(at.Val, threadMarks) {
				found = true
			}
		}
		return !found
	})
	return found
}

// furnitureMarks are class and id words of page furniture, whose blocks
// are never the article.
var furnitureMarks = markSet("nav", "navbar*", "navigation", "menu", "menubar", "breadcrumb*",
	"footer*", "sidebar*", "widget*", "share*", "sharing", "social*", "related*",
	"newsletter*", "subscribe*", "subscription", "promo", "advert*", "ads", "ad",
	"banner", "cookie*", "comment*", "disqus*", "respond", "sponsor*",
	"popup", "modal", "pagination", "pager", "tagcloud", "toolbar", "login", "signup", "skip",
	"outbrain", "taboola", "recommended", "trending", "popular", "masthead", "copyright",
	"postmetadata", "postmeta", "utility")

// contentMarks are class and id words of the article's containers.
var contentMarks = markSet("article", "content", "entry", "main", "post", "story", "text", "body", "blog")

// markedArticle reports an element that says it holds the article: an
// <article>, schema.org's articleBody, or a class or id token made of
// content words only ("entry-content", "article-body", "story").
func markedArticle(n *html.Node) bool {
	if tagAtom(n) == atom.Article {
		return true
	}
	for _, at := range n.Attr {
		switch at.Key {
		case "itemprop":
			if at.Val == "articleBody" {
				return true
			}
		case "class", "id":
			for _, tok := range strings.Fields(at.Val) {
				ws := markWords(tok)
				if len(ws) == 0 || len(ws) > 3 || hasMark(tok, furnitureMarks) {
					continue
				}
				all := true
				for _, w := range ws {
					all = all && articleWords[w]
				}
				if all && (len(ws) > 1 || ws[0] == "article" || ws[0] == "story" || ws[0] == "entry") {
					return true
				}
			}
		}
	}
	return false
}

// articleWords make up the class and id tokens of article containers.
var articleWords = markSet("article", "entry", "post", "story", "content", "body", "text")

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
			if len(ws) <= 4 && authorBox(ws) {
				furniture = true
				continue
			}
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

// authorBoxWords, next to "author", name an author's box (a bio, an
// about-the-author note), not a byline.
var authorBoxWords = markSet("bio", "bios", "biography", "info", "box", "description", "about", "profile", "details")

// authorBox reports the words of a class or id token naming an author's
// box: "author-bio", "author_info", "about-author"; "bio" alone too.
func authorBox(ws []string) bool {
	author, box := false, false
	for _, w := range ws {
		switch {
		case w == "bio" || w == "biography" || w == "authorbio" || w == "authorbox":
			return true
		case w == "author" || w == "authors":
			author = true
		case authorBoxWords[w]:
			box = true
		}
	}
	return author && box
}

// densityResult is what the density extractor found.
type densityResult struct {
	// node is a <div> holding copies of the chosen blocks, nil when the
	// page has none.
	node *html.Node
	// share is the fraction of the page's prose (outside furniture) in
	// node.
	share float64
	// listing reports a run of teasers (linked headings, each with a
	// summary) rather than an article: a home page, a section front.
	listing bool
}

// Listing pages: at least this many linked headings in the chosen run,
// and at least this many per prose block.
const (
	listingMinHeadings = 3
	listingPerProse    = 0.3
)

// densityContent is the density extractor's main content of doc.
func densityContent(doc *html.Node) (res densityResult) {
	body := findBody(doc)
	if body == nil {
		return res
	}
	blocks := collectBlocks(body)
	if len(blocks) == 0 {
		return res
	}
	// The characters and the prose under each element, for the wrapper
	// guard.
	chars := map[*html.Node]int{}
	prose := map[*html.Node]int{}
	total, totalProse := 0, 0
	for _, b := range blocks {
		pc := 0
		if isProseBlock(b) {
			pc = b.chars - b.link
		}
		total += b.chars
		totalProse += pc
		for p := b.parent; p != nil && p != body; p = p.Parent {
			chars[p] += b.chars
			prose[p] += pc
		}
	}
	marks := map[*html.Node]bool{}
	marked := func(n *html.Node) bool {
		m, ok := marks[n]
		if !ok {
			// A marked element holding most of the page, or most of its
			// prose, is a wrapper with an unlucky class (an unclosed
			// share bar around the article), except a comment thread:
			// under a short post it is most of the page.
			m = markedFurniture(n) && (markedComments(n) || float64(chars[n]) <= densityWrapperShare*float64(total) &&
				float64(prose[n]) <= densityWrapperProse*float64(totalProse))
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

	// The best run of consecutive blocks (a maximum-sum subarray, as in
	// Finn's body text extraction), so that a comment thread or a link
	// list in the article's own container ends the run.
	articles := map[*html.Node]bool{}
	inArticle := func(b *block) bool {
		for p := b.parent; p != nil && p != body; p = p.Parent {
			a, ok := articles[p]
			if !ok {
				a = markedArticle(p)
				articles[p] = a
			}
			if a {
				return true
			}
		}
		return false
	}
	vals := make([]float64, len(blocks))
	for i, b := range blocks {
		vals[i] = blockValue(b, inFurniture(b, nil))
		if vals[i] > 0 && inArticle(b) {
			vals[i] *= densityArticleBonus
		}
	}
	bestLo, bestHi, bestSum := -1, -1, 0.0
	lo, cur := 0, 0.0
	for i, v := range vals {
		if cur <= 0 {
			lo, cur = i, 0
		}
		cur += v
		if cur > bestSum {
			bestLo, bestHi, bestSum = lo, i, cur
		}
	}
	if bestLo < 0 {
		return res
	}
	// An element that says it holds the article and holds most of the
	// run's value is the article: the run's blocks outside it (a
	// publisher's box, a teaser beside it) are not.
	lo, hi := bestLo, bestHi
	if a := articleOf(blocks[lo:hi+1], vals[lo:hi+1], articles, body); a != nil {
		for lo < hi && !under(blocks[lo].parent, a) {
			lo++
		}
		for hi > lo && !under(blocks[hi].parent, a) {
			hi--
		}
	}
	// A heading marked as the comments' or trackbacks' ends the article
	// (old blog templates put the thread in the post's own container,
	// unmarked but for its heading).
	seenProse := false
	for i := lo; i <= hi; i++ {
		if seenProse && blocks[i].heading() && threadHeading(blocks[i].nodes[0]) {
			hi = i - 1
			break
		}
		seenProse = seenProse || isProseBlock(blocks[i])
	}
	bestLo, bestHi = lo, hi
	// The run's blocks, without furniture and link lists inside the
	// run's common container.
	top := commonAncestor(blocks[bestLo].parent, blocks[bestHi].parent)
	out := &html.Node{Type: html.ElementNode, Data: "div", DataAtom: atom.Div}
	pageProse, runProse := 0, 0
	for i, b := range blocks {
		if isProseBlock(b) && !inFurniture(b, nil) {
			pageProse += b.chars - b.link
			if i >= bestLo && i <= bestHi {
				runProse += b.chars - b.link
			}
		}
	}
	if pageProse > 0 {
		res.share = float64(runProse) / float64(pageProse)
	}
	linkHeadings, proseBlocks := 0, 0
	for _, b := range blocks[bestLo : bestHi+1] {
		switch {
		case b.heading() && b.linkDensity() > densityMaxLinks:
			linkHeadings++
		case isProseBlock(b):
			proseBlocks++
		}
	}
	res.listing = linkHeadings >= listingMinHeadings && float64(linkHeadings) >= listingPerProse*float64(proseBlocks)
	for _, b := range blocks[bestLo : bestHi+1] {
		if inFurniture(b, top) {
			continue
		}
		if b.linkDensity() > densityMaxLinks && !b.heading() {
			continue
		}
		out.AppendChild(copyBlock(b))
	}
	if out.FirstChild != nil {
		res.node = out
	}
	return res
}

// isProseBlock reports a block of running text: long enough, few links.
func isProseBlock(b *block) bool {
	return b.words >= densityProseWords && b.linkDensity() <= densityMaxLinks
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

// articleOf is the outermost element marked as the article (in articles,
// filled by the caller) holding at least densityArticleShare of the
// positive value of run (vals), nil if none does.
func articleOf(run []*block, vals []float64, articles map[*html.Node]bool, body *html.Node) *html.Node {
	total := 0.0
	held := map[*html.Node]float64{}
	for i, b := range run {
		if vals[i] <= 0 {
			continue
		}
		total += vals[i]
		for p := b.parent; p != nil && p != body; p = p.Parent {
			if articles[p] {
				held[p] += vals[i]
			}
		}
	}
	var best *html.Node
	for n, v := range held {
		if v >= densityArticleShare*total && (best == nil || isAncestor(n, best)) {
			best = n
		}
	}
	return best
}

// commonAncestor is the deepest element holding both a and b.
func commonAncestor(a, b *html.Node) *html.Node {
	depth := func(n *html.Node) int {
		d := 0
		for ; n != nil; n = n.Parent {
			d++
		}
		return d
	}
	da, db := depth(a), depth(b)
	for ; da > db; da-- {
		a = a.Parent
	}
	for ; db > da; db-- {
		b = b.Parent
	}
	for a != b {
		a, b = a.Parent, b.Parent
	}
	return a
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
