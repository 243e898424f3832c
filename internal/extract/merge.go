package extract

import (
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// The density extractor's precision is the better of the two extractors',
// but it loses whole paragraphs of the article: a lede set apart from the
// body, a paragraph cut off by a link list inside the article. Readability
// keeps them. Where the two agree on the article, readability's prose
// blocks that the density output lacks and that sit between blocks both
// have (or just before the first of them) are put back at their place.

// Tuning of the gap filling.
const (
	// A readability block is in the density output when this fraction of
	// its shingles are.
	gapCovered = 0.5
	// ...and not in it when less than this fraction are (a paragraph
	// shares a phrase or two with the rest of the article).
	gapStray = 0.2
	// The extractors agree on the article when this fraction of the
	// shorter output's shingles are in the other.
	gapAgreement = 0.5
	// Prose: at least this many words, or this many characters for
	// scripts written without spaces...
	gapMinWords = 10
	gapMinRunes = 80
	// ...with at most this fraction of its text in links.
	gapMaxLinkDensity = 0.25
)

// leafBlockTags are the blocks readability's output is flattened to.
var leafBlockTags = map[atom.Atom]bool{
	atom.P: true, atom.H1: true, atom.H2: true, atom.H3: true, atom.H4: true,
	atom.H5: true, atom.H6: true, atom.Pre: true, atom.Ul: true, atom.Ol: true,
	atom.Dl: true, atom.Table: true, atom.Blockquote: true, atom.Figure: true,
}

// leafBlocks appends the leaf blocks under n to out, in document order:
// the leafBlockTags elements, and containers without block children.
func leafBlocks(n *html.Node, out []*html.Node, depth int) []*html.Node {
	if depth > maxTextDepth {
		return out
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		if c.Type != html.ElementNode || skipTags[tagAtom(c)] || hidden(c) {
			continue
		}
		a := tagAtom(c)
		switch {
		case leafBlockTags[a]:
			out = append(out, c)
		case blockTags[a] && hasBlockChild(c):
			out = leafBlocks(c, out, depth+1)
		case blockTags[a]:
			out = append(out, c)
		}
	}
	return out
}

func hasBlockChild(n *html.Node) bool {
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		if c.Type == html.ElementNode && blockTags[tagAtom(c)] {
			return true
		}
	}
	return false
}

// linkDensity is the fraction of n's text (in bytes) inside links.
func linkDensity(n *html.Node) float64 {
	total, linked := 0, 0
	var walk func(*html.Node, bool, int)
	walk = func(n *html.Node, in bool, depth int) {
		if depth > maxTextDepth {
			return
		}
		switch n.Type {
		case html.TextNode:
			l := len(collapse(n.Data))
			total += l
			if in {
				linked += l
			}
			return
		case html.ElementNode:
			if skipTags[tagAtom(n)] {
				return
			}
			if tagAtom(n) == atom.A {
				in = true
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c, in, depth+1)
		}
	}
	walk(n, false, 0)
	if total == 0 {
		return 0
	}
	return float64(linked) / float64(total)
}

// isProse reports a block of running text: long enough, mostly not links.
func isProse(n *html.Node, text string) bool {
	switch tagAtom(n) {
	case atom.H1, atom.H2, atom.H3, atom.H4, atom.H5, atom.H6, atom.Figure, atom.Figcaption:
		return false // headings and captions are not prose
	}
	if countWords(text) < gapMinWords && utf8.RuneCountInString(text) < gapMinRunes {
		return false
	}
	return linkDensity(n) <= gapMaxLinkDensity
}

// fillGaps inserts into root (the density output, a list of top-level
// blocks) copies of the prose blocks of rNode (readability's output, its
// text and shingles r; nil to compute them) that root lacks, where they
// sit between blocks both have or just before the first of them. bt
// caches the blocks' texts (nil: none).
func fillGaps(root, rNode *html.Node, r *shingled, ix *sourceIndex, bt blockTexts) {
	if r == nil {
		r = newShingled(nodeText(rNode))
	}
	// The top-level block of root holding each shingle (the first one).
	var tBlocks []*html.Node
	owner := newSetCap(r.set.len())
	for c := root.FirstChild; c != nil; c = c.NextSibling {
		// Loose text counts as a block too.
		if c.Type != html.ElementNode && c.Type != html.TextNode {
			continue
		}
		for _, h := range bt.shingles(c) {
			owner.add(h, int32(len(tBlocks)))
		}
		tBlocks = append(tBlocks, c)
	}
	if len(tBlocks) == 0 {
		return
	}
	// The two must agree on the article: most of the shorter text's
	// shingles are in the longer one.
	rSet := r.set
	shared := rSet.sharedWith(owner)
	if float64(shared) < gapAgreement*float64(min(rSet.len(), owner.len())) {
		return
	}

	var pending []*html.Node
	var anchor *html.Node // the root block after which pending goes
	headed := false       // pending ends with a heading
	var votes []int32     // the blocks of root holding a shingle of b, in b's order
	var sh []uint64
	for _, b := range leafBlocks(rNode, nil, 0) {
		text := nodeText(b)
		sh = appendShingles(sh[:0], text)
		if len(sh) == 0 {
			continue
		}
		votes = votes[:0]
		for _, h := range sh {
			if i, ok := owner.get(h); ok {
				votes = append(votes, i)
			}
		}
		in := len(votes)
		switch {
		case float64(in) >= gapCovered*float64(len(sh)):
			// The block of root holding most of b's shingles (the first
			// of equals).
			slices.Sort(votes)
			best, bestN := -1, 0
			for j := 0; j < len(votes); {
				k := j
				for k < len(votes) && votes[k] == votes[j] {
					k++
				}
				if k-j > bestN {
					best, bestN = int(votes[j]), k-j
				}
				j = k
			}
			t := tBlocks[best]
			at := t
			if anchor != nil {
				at = anchor.NextSibling
			}
			for _, p := range pending {
				root.InsertBefore(p, at)
			}
			pending, headed = pending[:0], false
			anchor = t
		case float64(in) < gapStray*float64(len(sh)):
			switch {
			case isHeading(b) && anchor != nil && linkDensity(b) <= gapMaxLinkDensity:
				// A section heading, kept if what it heads is.
				if headed {
					pending = pending[:len(pending)-1]
				}
				pending, headed = append(pending, deepCopy(b, 0)), true
			case isProse(b, text) && !isCaption(b, ix) && (anchor != nil || !isList(b)):
				// (A list before the article is a breadcrumb trail or a
				// table of contents.)
				pending, headed = append(pending, deepCopy(b, 0)), false
			case headed:
				pending, headed = pending[:len(pending)-1], false
			}
		case headed:
			pending, headed = pending[:len(pending)-1], false
		}
	}
}

// captionMarks are class and id fragments of captions and credits.
var captionMarks = markSet("caption*", "credit", "credits")

// isCaption reports a block that is, or whose page element sits in, a
// figure or an element marked as a caption: readability keeps captions
// as paragraphs.
func isCaption(b *html.Node, ix *sourceIndex) bool {
	return sourceMarked(b, ix, captionMarks, true)
}

// sourceMarked reports whether the page element holding b's text, or one
// of its closest ancestors, has a class or id containing one of marks (or,
// with figures, is a figure or its caption).
func sourceMarked(b *html.Node, ix *sourceIndex, marks map[string]bool, figures bool) bool {
	k := nodeKey(b, 0)
	if ix == nil || k.n < minMappedText {
		return false
	}
	for _, e := range ix.byKey[k] {
		n := e.n
		for range 4 {
			if n == nil || n.Type != html.ElementNode || tagAtom(n) == atom.Body {
				break
			}
			if a := tagAtom(n); figures && (a == atom.Figure || a == atom.Figcaption) {
				return true
			}
			for _, at := range n.Attr {
				// Long ids are slugs of headings ("sharing-with-a-team").
				if (at.Key == "class" || at.Key == "id" && len(markWords(at.Val)) <= 2) && hasMark(at.Val, marks) {
					return true
				}
			}
			n = n.Parent
		}
	}
	return false
}

// markWords splits a class or id value into lower-case words
// ("article-share-bar", "relatedStories").
func markWords(v string) []string {
	var out []string
	start := -1
	var prev rune
	for i, r := range v {
		switch {
		case !unicode.IsLetter(r):
			if start >= 0 {
				out = append(out, strings.ToLower(v[start:i]))
			}
			start = -1
		case start < 0:
			start = i
		case unicode.IsUpper(r) && unicode.IsLower(prev):
			out = append(out, strings.ToLower(v[start:i]))
			start = i
		}
		prev = r
	}
	if start >= 0 {
		out = append(out, strings.ToLower(v[start:]))
	}
	return out
}

// hasMark reports whether one of the words of a class or id value is one
// of marks, or (for marks ending in "*") contains it, except where it
// begins one of the stem's markFalseFriends.
func hasMark(v string, marks map[string]bool) bool {
	for _, w := range markWords(v) {
		if marks[w] {
			return true
		}
		for m := range marks {
			if strings.HasSuffix(m, "*") && containsMark(w, m[:len(m)-1]) {
				return true
			}
		}
	}
	return false
}

// markFalseFriends are words that a wildcard mark's stem begins and that
// name something else: "commentary" and "commentator" are an article's
// kind and its writer, not the comments under it ("commentlist",
// "usercomments" and "commentarea" are).
var markFalseFriends = map[string][]string{
	"comment": {"commentar", "commentat"},
}

// containsMark reports stem in w at an offset where no false friend of
// the stem begins.
func containsMark(w, stem string) bool {
	for i := 0; ; {
		j := strings.Index(w[i:], stem)
		if j < 0 {
			return false
		}
		j += i
		friend := false
		for _, f := range markFalseFriends[stem] {
			if strings.HasPrefix(w[j:], f) && !strings.HasPrefix(w[j:], stem+"area") {
				friend = true
			}
		}
		if !friend {
			return true
		}
		i = j + len(stem)
	}
}

// boilerMarks are class and id fragments of page furniture.
var boilerMarks = markSet("share", "sharing", "social", "related", "newsletter", "subscribe",
	"subscription", "promo", "advert", "advertisement", "comment", "comments", "signup", "sponsor", "sponsored")

func markSet(marks ...string) map[string]bool {
	m := map[string]bool{}
	for _, k := range marks {
		m[k] = true
	}
	return m
}

// dropMarked removes the top-level blocks of root that readability does
// not share (rSet) and whose page elements are marked as furniture. bt
// caches the blocks' texts (nil: none).
func dropMarked(root *html.Node, rSet *shingleSet, ix *sourceIndex, bt blockTexts) {
	for c := root.FirstChild; c != nil; {
		next := c.NextSibling
		if c.Type == html.ElementNode {
			if cov, _ := rSet.coverageOf(bt.shingles(c)); cov < gapCovered && sourceMarked(c, ix, boilerMarks, false) {
				root.RemoveChild(c)
			}
		}
		c = next
	}
}

func isList(n *html.Node) bool {
	switch tagAtom(n) {
	case atom.Ul, atom.Ol, atom.Dl:
		return true
	}
	return false
}

// deepCopy copies n and its subtree.
func deepCopy(n *html.Node, depth int) *html.Node {
	c := &html.Node{Type: n.Type, DataAtom: n.DataAtom, Data: n.Data, Namespace: n.Namespace}
	c.Attr = append([]html.Attribute(nil), n.Attr...)
	if depth > maxTextDepth {
		return c
	}
	for k := n.FirstChild; k != nil; k = k.NextSibling {
		c.AppendChild(deepCopy(k, depth+1))
	}
	return c
}
