package extract

import (
	"context"
	"log/slog"
	"net/url"
	"strings"
	"unicode/utf8"

	readability "codeberg.org/readeck/go-readability/v2"
	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"

	"github.com/airlockhq/airlock"
)

// Tuning of the main-content choice. They are general rules about how
// extractors fail, not about particular sites.
const (
	// A trailing block of the density extractor's output that
	// readability's output does not share (less than this fraction of its shingles) is
	// boilerplate after the article: related stories, comment threads,
	// newsletter boxes.
	tailCoverage = 0.5
	// ...provided the two extractors agree on the article: this fraction
	// of readability's shingles are in the density output,
	tailAgreement = 0.8
	// ...and readability found an article at all (shingles).
	tailMinShingles = 50
	// Leading blocks of the density output that readability does not
	// share and that have at most this many words (bylines, dates,
	// breadcrumbs, share bars) are not the article either.
	headMaxWords = 8
	// A block repeating text of one of the few blocks before it is an
	// extraction artifact.
	dedupeWindow = 4
	// Texts shorter than this (bytes) are never deduplicated: "Share",
	// "Advertisement" and dates legitimately repeat.
	dedupeMinLen = 24
	// dedupeBlocks counts at most this many texts in the page.
	dedupeCounts = 64
	// Documents with more elements than this skip the main-content
	// extractors (the largest pages of the development corpora have about
	// 10,000) and fall back to the readable body text.
	maxExtractElements = 60000
)

// countElements counts the elements of doc, stopping past limit.
func countElements(doc *html.Node, limit int) int {
	n := 0
	walkElements(doc, func(*html.Node) bool {
		n++
		return n <= limit
	})
	return n
}

// content is the main content of a page.
type content struct {
	node   *html.Node // the content tree; owned, may be changed
	text   string
	source string // "density", "readability" or "body"
	byline string // readability's byline, for the author fallback
	// plain is set when the tree is too large for the Markdown converter
	// too (past maxExtractElements): the Markdown is the text.
	plain bool
	// listing is set when the page is a run of teasers (linked headings
	// with summaries) rather than an article: a hint for Page.Kind.
	listing bool
}

// mainContent finds the main content of doc:
//
//  1. readability (readeck's port of Readability.js) and the density
//     extractor (density.go: the best run of text blocks by length, link
//     density and furniture marks) both run;
//  2. readability's result is taken when the density result holds it and
//     much more besides (ownContent); else the density result is kept;
//  3. blocks repeating the text of a block just before are dropped;
//  4. where the two extractors agree on the article, the density
//     result's trailing blocks that readability does not share (related
//     stories, comments, newsletter boxes), its short leading ones
//     (bylines, dates, breadcrumbs) and its headings readability dropped
//     go; readability's prose paragraphs and section headings that the
//     density run lost inside the article come back (merge.go); blocks
//     readability does not share whose page elements are marked as share
//     bars, comments, promotions and the like go;
//  5. a leading heading repeating the page title goes (it is metadata);
//  6. a run of teasers (a listing) gives the readable body text; a
//     result under airlock.MinMainContent characters that does not hold
//     most of the page's prose gives readability's result if longer,
//     else the readable body text (of the page's <main> when it has one)
//     if longer; a short one that does gives the body text when that is
//     at most twice as long (its links, say); the fallbacks get steps 3
//     and 5 too, so that a short page has one title and its lead once.
//
// title is the page's title. It returns ctx's error when ctx ends first
// (it looks between the steps).
func mainContent(ctx context.Context, doc *html.Node, base *url.URL, title string) (content, error) {
	var c content
	if countElements(doc, maxExtractElements+1) > maxExtractElements {
		// The extractors are superlinear in the size of the tree; no real
		// article is this large. Take the readable body, in linear time.
		if b := readableBody(doc); b != nil {
			c.node, c.text, c.source = b, nodeText(b), "body"
		}
		c.plain = true
		return c, ctx.Err()
	}
	rNode, byline := readable(doc, base)
	if err := ctx.Err(); err != nil {
		return c, err
	}
	c.byline = byline
	rText := ""
	if rNode != nil {
		rText = nodeText(rNode)
	}
	// readability's text is compared with the density output's and its
	// blocks several times: its shingles are computed once.
	r := newShingled(rText)

	tNode, fromR, d, dText := ownContent(doc, rNode, r)
	if err := ctx.Err(); err != nil {
		return c, err
	}
	share := d.share
	if fromR {
		share = 0
	}
	if tNode != nil {
		if !fromR {
			mergeReadable(doc, tNode, rNode, r, dText)
		} else {
			dedupeBlocks(tNode, doc)
		}
		dropTitleHeading(tNode, title)
		if err := ctx.Err(); err != nil {
			return c, err
		}
		c.text = nodeText(tNode)
		c.node, c.source = tNode, "density"
		if fromR {
			c.source = "readability"
		}
	}
	// A short result is the page's article when it holds most of the
	// page's prose (a news brief); else it is one stray block of a page
	// without an article (a home page, a listing), and the page's
	// readable text is worth more. A page whose readable text is little
	// more than the article gets that text whole (its links included).
	if d.listing && !fromR {
		c.listing = true
		// A page of teasers has no article: its visible text, in
		// reading order, is what it says.
		if b := readableBody(doc); b != nil {
			c.node, c.text, c.source = b, nodeText(b), "body"
		}
	} else if n := utf8.RuneCountInString(c.text); n < airlock.MinMainContent && (fromR || !inCommentThread(doc, r)) {
		// (When readability took the comment thread under a short post,
		// the density result is the post: neither fallback is.)
		if share < shortArticleShare && utf8.RuneCountInString(rText) > n {
			// readability's longer result, untouched.
			c.node, c.text, c.source = rNode, rText, "readability"
			n = utf8.RuneCountInString(rText)
		}
		if n < airlock.MinMainContent {
			if b := readableBody(doc); b != nil {
				t := nodeText(b)
				if bn := utf8.RuneCountInString(t); bn > n && (share < shortArticleShare || bn <= 2*n) {
					c.node, c.text, c.source = b, t, "body"
				}
			}
		}
	}
	if c.node != nil && c.source != "density" {
		// The fallbacks (short pages mostly) get the clean-up the density
		// blocks got, on their innermost block list.
		blocks := blockList(c.node)
		dedupeBlocks(blocks, doc)
		dropTitleHeading(blocks, title)
		c.text = nodeText(c.node)
	}
	return c, ctx.Err()
}

// inCommentThread reports whether most of readability's text r comes
// from the page's elements marked as comments.
func inCommentThread(doc *html.Node, r *shingled) bool {
	if len(r.sh) == 0 {
		return false
	}
	var thread strings.Builder
	walkElements(doc, func(e *html.Node) bool {
		if hidden(e) || skipTags[tagAtom(e)] {
			return false
		}
		if markedComments(e) {
			thread.WriteString(nodeText(e))
			thread.WriteByte('\n')
			return false
		}
		return true
	})
	if thread.Len() == 0 {
		return false
	}
	cov, _ := newShingleSet(thread.String()).coverageOf(r.sh)
	return cov >= chooseContained
}

// mergeReadable merges readability's result (rNode, its text and
// shingles r) into the density extractor's (root, a list of blocks; its
// text and shingles d): repeated blocks go; where the two agree on the
// article, root's trailing and leading blocks readability does not share
// and its furniture go, and readability's prose that root lacks comes
// back (merge.go).
func mergeReadable(doc, root, rNode *html.Node, r, d *shingled) {
	removed := dedupeBlocks(root, doc)
	if rNode == nil || r.text == "" || d == nil {
		return
	}
	ix := newSourceIndex(doc)
	tSet := d.set // root's shingles, unless blocks went
	if removed {
		tSet = newShingleSet(nodeText(root))
	}
	bt := blockTexts{}
	trimToAgreement(root, r, tSet, bt)
	fillGaps(root, rNode, r, ix, bt)
	dropMarked(root, r.set, ix, bt)
}

// blockTexts caches the text and shingles of root's top-level blocks
// while the merge looks at them again and again: it moves and removes
// blocks, and never changes one. A nil blockTexts caches nothing.
type blockTexts map[*html.Node]*blockText

type blockText struct {
	text string
	sh   []uint64 // nil until asked for
}

func (bt blockTexts) get(c *html.Node) *blockText {
	if b, ok := bt[c]; ok {
		return b
	}
	b := &blockText{text: nodeText(c)}
	if bt != nil {
		bt[c] = b
	}
	return b
}

func (bt blockTexts) text(c *html.Node) string { return bt.get(c).text }

// shingles is the shingles of c's text.
func (bt blockTexts) shingles(c *html.Node) []uint64 {
	b := bt.get(c)
	if b.sh == nil {
		b.sh = textShingles(b.text)
	}
	return b.sh
}

// blockList is the element whose children are n's blocks: n, or the
// innermost container n is only a wrapper of (body > main > article).
func blockList(n *html.Node) *html.Node {
	for {
		var only *html.Node
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			switch {
			case c.Type == html.ElementNode && only == nil:
				only = c
			case c.Type == html.ElementNode, c.Type == html.TextNode && strings.TrimSpace(c.Data) != "":
				return n
			}
		}
		if only == nil || !wrapperTags[tagAtom(only)] {
			return n
		}
		n = only
	}
}

// wrapperTags are the containers blockList looks through.
var wrapperTags = map[atom.Atom]bool{
	atom.Body: true, atom.Main: true, atom.Article: true, atom.Section: true, atom.Div: true,
}

// readable runs readability on a copy of doc, under recover.
func readable(doc *html.Node, base *url.URL) (node *html.Node, byline string) {
	defer func() {
		if recover() != nil {
			node, byline = nil, ""
		}
	}()
	p := readability.NewParser()
	// Its default logger formats every record before discarding it.
	p.Logger = slog.New(slog.DiscardHandler)
	art, err := p.ParseDocument(doc, base)
	if err != nil || art.Node == nil {
		return nil, ""
	}
	return art.Node, art.Byline()
}

// ownContent runs the density extractor on doc and chooses between its
// result and readability's (rNode, its text and shingles r) by how the two
// overlap: readability's when the density result holds all of it and
// much more besides (a comment thread or link lists around the article);
// the density result, to be merged with readability's, otherwise (when
// they share almost nothing, readability has most often taken a comment
// thread or a sidebar of teasers). fromR reports readability's; dText is
// the density result's text and shingles, for the merge.
func ownContent(doc, rNode *html.Node, r *shingled) (node *html.Node, fromR bool, d densityResult, dText *shingled) {
	d = densityContent(doc)
	dNode := d.node
	if rNode == nil || strings.TrimSpace(r.text) == "" {
		return dNode, false, d, nil // (the merge does not compare)
	}
	if dNode == nil {
		return rNode, true, d, nil
	}
	dText = newShingled(nodeText(dNode))
	rInD, _ := dText.set.coverageOf(r.sh)
	dInR, _ := r.set.coverageOf(dText.sh)
	if rInD >= chooseContained && dInR < chooseContained {
		return rNode, true, d, dText
	}
	return dNode, false, d, dText
}

// shortArticleShare: a short density result holding this fraction of
// the page's prose is the article.
const shortArticleShare = 0.5

// chooseContained: one text is in the other when this fraction of its
// shingles are.
const chooseContained = 0.8

// dedupeBlocks removes top-level blocks whose text is part of the text of
// one of the blocks just before them, and a lead (not a heading) that the
// next block opens with again: pull quotes repeat a sentence of the
// paragraph before, and pages repeat their lead. Equal blocks are kept
// when doc (the page) repeats the paragraph too, and dropped when it has
// it fewer times than they repeat it (an element taken twice). It reports
// whether it removed any.
//
// Counting a text in the page reads the whole page: each text is counted
// once, and at most dedupeCounts texts are, so that a page of thousands
// of repeated paragraphs costs a few readings of the page, not thousands.
// Past that, equal blocks are kept (no evidence either way).
func dedupeBlocks(root, doc *html.Node) (removed bool) {
	var recent []string
	var docText string
	seen := map[string]int{}   // equal blocks kept, by text
	counts := map[string]int{} // times the page has a text, by text
	countsLeft := dedupeCounts
	var nextKey *string // the key of the next element, when known
	for c := root.FirstChild; c != nil; {
		next := c.NextSibling
		if c.Type != html.ElementNode {
			c = next
			continue
		}
		var key string
		if nextKey != nil {
			key = *nextKey
		} else {
			key = collapse(textOf(c))
		}
		nextKey = nil
		dup := false
		if len(key) >= dedupeMinLen && !isHeading(c) {
			// A lead (standfirst) the next block opens with again.
			n := c.NextSibling
			for n != nil && n.Type != html.ElementNode {
				n = n.NextSibling
			}
			if n != nil {
				nk := collapse(textOf(n))
				nextKey = &nk // n is the next block the loop takes
				if len(nk) > len(key) && strings.HasPrefix(nk, key) {
					dup = true
				}
			}
		}
		if len(key) >= dedupeMinLen && !dup {
			for _, r := range recent {
				if len(r) > len(key) && strings.Contains(r, key) {
					dup = true
					break
				}
				if r == key {
					if docText == "" {
						docText = collapse(nodeText(doc))
					}
					t := collapse(nodeText(c))
					n, ok := counts[t]
					if !ok && countsLeft > 0 {
						countsLeft--
						n = countText(docText, t)
						counts[t] = n
					}
					// A count of 0 is text the page writes differently:
					// no evidence either way.
					if n > 0 && n <= 1+seen[key] {
						dup = true
						break
					}
					seen[key]++
					break
				}
			}
		}
		if dup {
			root.RemoveChild(c)
			removed = true
		} else if key != "" {
			recent = append(recent, key)
			if len(recent) > dedupeWindow {
				recent = recent[1:]
			}
		}
		c = next
	}
	return removed
}

// countText is strings.Count, a variable for the tests.
var countText = strings.Count

// trimToAgreement removes from root (whose shingles are tSet), when
// readability's text r agrees with it on the article, the trailing
// top-level blocks that r does not share (up to a short last line whose
// words r has: too short to compare, it is the article's), the short
// leading ones it does not share either, and the headings it does not
// have. bt caches the blocks' texts.
func trimToAgreement(root *html.Node, r *shingled, tSet *shingleSet, bt blockTexts) {
	rSet := r.set
	if rSet.len() < tailMinShingles {
		return
	}
	shared := rSet.sharedWith(tSet)
	if float64(shared) < tailAgreement*float64(rSet.len()) {
		return
	}
	shares := func(c *html.Node) (bool, []string) {
		t := bt.text(c)
		cov, n := rSet.coverageOf(bt.shingles(c))
		// Blocks of fewer than seven words (four shingles) are too short
		// to tell.
		return n >= 4 && cov >= tailCoverage, words(t)
	}

	var rWords *shingleSet // readability's words (their hashes), when first needed
	allInR := func(ws []string) bool {
		if rWords == nil {
			rWords = wordSet(r.text)
		}
		for _, w := range ws {
			if !rWords.has(wordHash(w)) {
				return false
			}
		}
		return true
	}

	var drop []*html.Node
	for c := root.LastChild; c != nil; c = c.PrevSibling {
		if c.Type == html.ElementNode {
			ok, ws := shares(c)
			if ok {
				break
			}
			if !isHeading(c) && len(ws) > 0 && len(ws) < 7 && allInR(ws) {
				break // the article's short last line ("Thanks!"), readability's too
			}
		}
		if c.PrevSibling == nil {
			return // nothing of the article left: keep everything
		}
		drop = append(drop, c)
	}
	for _, c := range drop {
		root.RemoveChild(c)
	}
	drop = drop[:0]
	for c := root.FirstChild; c != nil; c = c.NextSibling {
		if c.Type != html.ElementNode {
			drop = append(drop, c)
			continue
		}
		ok, ws := shares(c)
		if ok {
			break
		}
		if len(ws) > 0 && len(ws) < 7 && allInR(ws) {
			break // a short block readability has too, a heading say
		}
		if len(ws) > headMaxWords || c.NextSibling == nil {
			return
		}
		drop = append(drop, c)
	}
	for _, c := range drop {
		root.RemoveChild(c)
	}

	// Headings readability dropped are section titles of boilerplate
	// ("Related stories", "More from ...") that its class-weight cleaning
	// recognises.
	drop = drop[:0]
	for c := root.FirstChild; c != nil; c = c.NextSibling {
		if c.Type != html.ElementNode || !isHeading(c) {
			continue
		}
		if ok, ws := shares(c); !ok && len(ws) > 0 && !allInR(ws) {
			drop = append(drop, c)
		}
	}
	for _, c := range drop {
		root.RemoveChild(c)
	}
}

func isHeading(n *html.Node) bool {
	switch tagAtom(n) {
	case atom.H1, atom.H2, atom.H3, atom.H4, atom.H5, atom.H6:
		return true
	}
	return false
}

// boilerTags are containers whose text is not the readable body.
var boilerTags = map[atom.Atom]bool{
	atom.Nav: true, atom.Header: true, atom.Footer: true, atom.Aside: true,
	atom.Form: true, atom.Menu: true, atom.Dialog: true,
}

// readableBody is a copy of the document's <body> without navigation,
// headers, footers, asides, forms and non-text elements.
func readableBody(doc *html.Node) *html.Node {
	body := findBody(doc)
	if body == nil {
		return nil
	}
	if m := mainElement(body); m != nil {
		// Navigation and sidebars outside <main> are not the page's
		// content, whatever their tags.
		if out := cloneFiltered(m, 0); out != nil && strings.TrimSpace(nodeText(out)) != "" {
			return out
		}
	}
	out := cloneFiltered(body, 0)
	if out == nil || out.FirstChild == nil {
		// Everything was boilerplate: the page is its boilerplate.
		out = cloneFiltered(body, -1)
	}
	return out
}

// mainElement is the page's one visible <main> (or role="main" element),
// nil when it has none or several.
func mainElement(body *html.Node) *html.Node {
	var found *html.Node
	n := 0
	walkElements(body, func(e *html.Node) bool {
		if hidden(e) {
			return false
		}
		if role, _ := attr(e, "role"); tagAtom(e) == atom.Main || role == "main" {
			if n++; n == 1 {
				found = e
			}
			return false
		}
		return n < 2
	})
	if n != 1 {
		return nil
	}
	return found
}

// cloneFiltered deep-copies n without skipTags elements, hidden elements
// and (unless depth is negative) boilerTags containers.
func cloneFiltered(n *html.Node, depth int) *html.Node {
	if depth > maxTextDepth {
		return nil
	}
	c := &html.Node{Type: n.Type, DataAtom: n.DataAtom, Data: n.Data, Namespace: n.Namespace}
	c.Attr = append([]html.Attribute(nil), n.Attr...)
	next := depth + 1
	if depth < 0 {
		next = -1
	}
	for k := n.FirstChild; k != nil; k = k.NextSibling {
		switch k.Type {
		case html.TextNode:
			c.AppendChild(&html.Node{Type: html.TextNode, Data: k.Data})
		case html.ElementNode:
			a := tagAtom(k)
			if skipTags[a] && a != atom.Img || hidden(k) || depth >= 0 && boilerTags[a] {
				continue
			}
			if kc := cloneFiltered(k, next); kc != nil {
				c.AppendChild(kc)
			}
		}
	}
	return c
}

// dropTitleHeading removes a leading heading that repeats the page title:
// the title is metadata, not body text.
func dropTitleHeading(root *html.Node, title string) {
	tw := map[string]bool{}
	for _, w := range words(strings.ToLower(title)) {
		tw[w] = true
	}
	if len(tw) == 0 {
		return
	}
	for c := root.FirstChild; c != nil; c = c.NextSibling {
		if c.Type != html.ElementNode {
			continue
		}
		if !isHeading(c) {
			return
		}
		ws := words(strings.ToLower(nodeText(c)))
		in := 0
		for _, w := range ws {
			if tw[w] {
				in++
			}
		}
		if len(ws) > 0 && float64(in) >= 0.8*float64(len(ws)) && strings.TrimSpace(nodeText(root)) != strings.TrimSpace(nodeText(c)) {
			root.RemoveChild(c)
		}
		return
	}
}
