package extract

import (
	"net/url"
	"strings"
	"unicode/utf8"

	readability "codeberg.org/readeck/go-readability/v2"
	trafilatura "github.com/markusmobius/go-trafilatura"
	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"

	"github.com/airlockhq/airlock"
)

// Tuning of the main-content choice. They are general rules about how
// extractors fail, not about particular sites.
const (
	// A trailing block of trafilatura's output that readability's output
	// does not share (less than this fraction of its shingles) is
	// boilerplate after the article: related stories, comment threads,
	// newsletter boxes.
	tailCoverage = 0.5
	// ...provided the two extractors agree on the article: this fraction
	// of readability's shingles are in trafilatura's output,
	tailAgreement = 0.8
	// ...and readability found an article at all (shingles).
	tailMinShingles = 50
	// A block repeating text of one of the few blocks before it is an
	// extraction artifact.
	dedupeWindow = 4
	// Texts shorter than this (bytes) are never deduplicated: "Share",
	// "Advertisement" and dates legitimately repeat.
	dedupeMinLen = 24
)

// content is the main content of a page.
type content struct {
	node   *html.Node // the content tree; owned, may be changed
	text   string
	source string // "trafilatura", "readability" or "body"
	byline string // readability's byline, for the author fallback
}

// mainContent finds the main content of doc: go-trafilatura (with its
// fallback comparison, fed with readability's result), trimmed of the
// trailing boilerplate readability does not share; the readable body
// text when that comes out under airlock.MinMainContent characters.
func mainContent(doc *html.Node, base *url.URL) content {
	var c content
	rNode, byline := readable(doc, base)
	c.byline = byline
	rText := ""
	if rNode != nil {
		rText = nodeText(rNode)
	}

	tNode, fromR := trafilaturaContent(doc, base, rNode)
	if tNode != nil {
		if !fromR {
			respace(tNode)
		}
		dedupeBlocks(tNode)
		if !fromR && rText != "" {
			trimTail(tNode, rText)
		}
		c.text = nodeText(tNode)
		c.node, c.source = tNode, "trafilatura"
		if fromR {
			c.source = "readability"
		}
	}
	if utf8.RuneCountInString(c.text) < airlock.MinMainContent && utf8.RuneCountInString(rText) > utf8.RuneCountInString(c.text) {
		// trafilatura did not take readability's longer result (which it
		// left untouched, since it did not choose it).
		c.node, c.text, c.source = rNode, rText, "readability"
	}
	if utf8.RuneCountInString(c.text) < airlock.MinMainContent {
		if b := readableBody(doc); b != nil {
			if t := nodeText(b); utf8.RuneCountInString(t) > utf8.RuneCountInString(c.text) {
				c.node, c.text, c.source = b, t, "body"
			}
		}
	}
	return c
}

// readable runs readability on a copy of doc, under recover.
func readable(doc *html.Node, base *url.URL) (node *html.Node, byline string) {
	defer func() {
		if recover() != nil {
			node, byline = nil, ""
		}
	}()
	p := readability.NewParser()
	art, err := p.ParseDocument(doc, base)
	if err != nil || art.Node == nil {
		return nil, ""
	}
	return art.Node, art.Byline()
}

// trafilaturaContent runs go-trafilatura on doc (it works on copies) with
// rNode as its readability candidate, under recover. fromR reports that
// trafilatura chose that candidate.
func trafilaturaContent(doc *html.Node, base *url.URL, rNode *html.Node) (node *html.Node, fromR bool) {
	defer func() {
		if recover() != nil {
			node, fromR = nil, false
		}
	}()
	candidate := rNode
	if candidate == nil {
		// An empty candidate keeps trafilatura from running its own,
		// older copy of readability.
		candidate = &html.Node{Type: html.ElementNode, Data: "div", DataAtom: atom.Div}
	}
	opts := trafilatura.Options{
		OriginalURL:        base,
		EnableFallback:     true,
		FallbackCandidates: &trafilatura.FallbackCandidates{Readability: candidate},
		HtmlDateMode:       trafilatura.Disabled, // dates come from the metadata
	}
	res, err := trafilatura.ExtractDocument(doc, opts)
	if err != nil || res == nil || res.ContentNode == nil {
		return nil, false
	}
	return res.ContentNode, rNode != nil && res.ContentNode == rNode
}

// dedupeBlocks removes top-level blocks whose text is part of the text of
// one of the blocks just before them: go-trafilatura sometimes emits a
// <div>'s text both whole and line by line, and pull quotes repeat a
// sentence of the paragraph before. Equal blocks are kept: pages do
// repeat paragraphs.
func dedupeBlocks(root *html.Node) {
	var recent []string
	for c := root.FirstChild; c != nil; {
		next := c.NextSibling
		if c.Type != html.ElementNode {
			c = next
			continue
		}
		key := collapse(textOf(c))
		dup := false
		if len(key) >= dedupeMinLen {
			for _, r := range recent {
				if len(r) > len(key) && strings.Contains(r, key) {
					dup = true
					break
				}
			}
		}
		if dup {
			root.RemoveChild(c)
		} else if key != "" {
			recent = append(recent, key)
			if len(recent) > dedupeWindow {
				recent = recent[1:]
			}
		}
		c = next
	}
}

// trimTail removes the trailing top-level blocks of root that rText does
// not share, when the two extractions agree on the article itself.
func trimTail(root *html.Node, rText string) {
	rSet := newShingleSet(rText)
	if len(rSet) < tailMinShingles {
		return
	}
	text := nodeText
	tSet := newShingleSet(text(root))
	shared := 0
	for h := range rSet {
		if _, ok := tSet[h]; ok {
			shared++
		}
	}
	if float64(shared) < tailAgreement*float64(len(rSet)) {
		return
	}
	var drop []*html.Node
	for c := root.LastChild; c != nil; c = c.PrevSibling {
		if c.Type != html.ElementNode {
			drop = append(drop, c)
			continue
		}
		cov, n := rSet.coverage(text(c))
		if n >= 4 && cov >= tailCoverage {
			break
		}
		if c.PrevSibling == nil {
			return // nothing of the article left: keep everything
		}
		drop = append(drop, c)
	}
	for _, c := range drop {
		root.RemoveChild(c)
	}
}

// boilerTags are containers whose text is not the readable body.
var boilerTags = map[atom.Atom]bool{
	atom.Nav: true, atom.Header: true, atom.Footer: true, atom.Aside: true,
	atom.Form: true, atom.Menu: true, atom.Dialog: true,
}

// readableBody is a copy of the document's <body> without navigation,
// headers, footers, asides, forms and non-text elements.
func readableBody(doc *html.Node) *html.Node {
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
	if body == nil {
		return nil
	}
	out := cloneFiltered(body, 0)
	if out == nil || out.FirstChild == nil {
		// Everything was boilerplate: the page is its boilerplate.
		out = cloneFiltered(body, -1)
	}
	return out
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
