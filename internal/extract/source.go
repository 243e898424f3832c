package extract

import (
	"unicode/utf8"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// Blocks of the main content are found again among the elements of the
// original document by their text (white space aside): the merge asks
// whether a block's page element sits in a figure, a caption or marked
// furniture.

// textKey identifies a text by its length and a hash of its
// non-white-space characters; keys of siblings combine into their
// parent's key without rereading the text.
type textKey struct {
	n int    // non-space bytes
	h uint64 // polynomial hash of those bytes
}

const keyBase = 1099511628211 // FNV prime, as the polynomial base

func (k textKey) concat(o textKey) textKey {
	return textKey{k.n + o.n, k.h*powBase(o.n) + o.h}
}

// powBase is keyBase^n (mod 2^64), by squaring.
func powBase(n int) uint64 {
	r, b := uint64(1), uint64(keyBase)
	for n > 0 {
		if n&1 == 1 {
			r *= b
		}
		b *= b
		n >>= 1
	}
	return r
}

func stringKey(s string) textKey {
	var k textKey
	for i := 0; i < len(s); {
		r, size := rune(s[i]), 1
		if r >= utf8.RuneSelf {
			r, size = utf8.DecodeRuneInString(s[i:])
		}
		if !isSpace(r) {
			for j := 0; j < size; j++ {
				k.h = k.h*keyBase + uint64(s[i+j])
			}
			k.n += size
		}
		i += size
	}
	return k
}

// keyless are elements whose text does not count: the same ones the text
// walkers skip.
func keyless(n *html.Node) bool {
	a := tagAtom(n)
	return skipTags[a] && a != atom.Img
}

// sourceIndex maps text keys to the deepest elements of the original
// document with that text, in document order.
type sourceIndex struct {
	byKey map[textKey][]sourceElem
}

type sourceElem struct {
	n     *html.Node
	order int // pre-order position
}

func newSourceIndex(doc *html.Node) *sourceIndex {
	ix := &sourceIndex{byKey: map[textKey][]sourceElem{}}
	order := 0
	var walk func(n *html.Node, depth int) textKey
	walk = func(n *html.Node, depth int) textKey {
		var k textKey
		if depth > maxTextDepth {
			return k
		}
		myOrder := order
		order++
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			switch c.Type {
			case html.TextNode:
				k = k.concat(stringKey(c.Data))
			case html.ElementNode:
				if keyless(c) {
					order++
					continue
				}
				k = k.concat(walk(c, depth+1))
			}
		}
		if n.Type == html.ElementNode && k.n > 0 {
			list := ix.byKey[k]
			// Children come before their parent here: an ancestor with the
			// same text as an element already listed is not the deepest.
			if len(list) == 0 || !isAncestor(n, list[len(list)-1].n) {
				ix.byKey[k] = append(list, sourceElem{n, myOrder})
			}
		}
		return k
	}
	walk(doc, 0)
	return ix
}

func isAncestor(a, n *html.Node) bool {
	for p := n.Parent; p != nil; p = p.Parent {
		if p == a {
			return true
		}
	}
	return false
}

// nodeKey is the text key of a content-tree node.
func nodeKey(n *html.Node, depth int) textKey {
	var k textKey
	if depth > maxTextDepth {
		return k
	}
	switch n.Type {
	case html.TextNode:
		return stringKey(n.Data)
	case html.ElementNode, html.DocumentNode:
		if n.Type == html.ElementNode && keyless(n) {
			return k
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			k = k.concat(nodeKey(c, depth+1))
		}
	}
	return k
}

// minMappedText is the shortest block (non-space bytes) worth mapping: a
// short text ("Share", a date) matches too many places.
const minMappedText = 12

func isBlockElem(n *html.Node) bool {
	a := tagAtom(n)
	return blockTags[a] || a == atom.Table
}
