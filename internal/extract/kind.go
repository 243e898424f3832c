package extract

import (
	"strings"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// Page kinds (airlock.Page.Kind).
const (
	KindArticle = "article" // one main text: a news story, a post, a documentation page
	KindListing = "listing" // repeated items: a home page, a category, search results, a feed
	KindOther   = "other"   // neither: a form, an app shell, a short page
)

// Thresholds of pageKind, in bytes of text.
const (
	// kindProse is the prose one container must hold (paragraphs of at
	// least kindParagraph bytes outside links) for a page to read as an
	// article: about 150 words.
	kindProse     = 1000
	kindParagraph = 80
	// kindItems is how many similar sibling blocks, each with a link and
	// at least kindItemText bytes of text, make a listing.
	kindItems    = 6
	kindItemText = 25
	// kindBudget bounds the nodes pageKind visits, counting each visit
	// of its measures: past it, the page is judged on what was seen.
	kindBudget = 500_000
)

// listingTypes are the schema.org types of listing pages.
var listingTypes = [...]string{"collectionpage", "itemlist", "searchresultspage", "offercatalog", "blog"}

// pageKind decides whether the page is an article, a listing or something
// else, from what the page declares (JSON-LD types, og:type) and its
// shape: the prose one container holds, and the largest run of similar
// sibling blocks that each carry a link (the items of a listing).
func pageKind(doc *html.Node, ld ldFields, meta map[string]string, dated bool) string {
	prose, items, itemsText, linkText, text := shape(doc)
	declared := ""
	switch {
	case ld.article:
		declared = KindArticle
	case strings.EqualFold(meta["og:type"], "article"):
		declared = KindArticle
	}
	for _, t := range ld.types {
		for _, l := range listingTypes {
			if t == l && declared == "" {
				declared = KindListing
			}
		}
	}
	switch {
	case declared == KindArticle && (prose >= kindProse/4 || items < 2*kindItems):
		return KindArticle
	case declared == KindListing && prose < 2*kindProse:
		return KindListing
	case prose >= kindProse || prose >= kindProse/2 && prose*2 >= text-linkText:
		return KindArticle
	case (prose >= kindProse*2/5 || dated && prose >= kindProse/5) && prose*2 >= itemsText:
		// A short post beside lists of links (a blog's sidebar): its
		// prose outweighs what the items hold.
		return KindArticle
	case items >= kindItems:
		return KindListing
	case text > 0 && linkText*2 > text && linkText > 500:
		return KindListing
	}
	return KindOther
}

// shape measures the body: the most prose any one element holds (the
// text outside links of its blocks with at least kindParagraph bytes
// each: a paragraph's text counts for the paragraph's parent, a <div>'s
// own text for the div), the largest group of similar sibling items, and
// the text inside links and in all, outside navigation, footers and
// asides.
func shape(doc *html.Node) (prose, items, itemsText, linkText, text int) {
	perParent := map[*html.Node]int{}
	// The prose of the page's one <article> or <main>, if it has one, at
	// any depth: short articles spread their paragraphs over sections.
	var main *html.Node
	mains, mainProse := 0, 0
	budget := kindBudget
	var walk func(n *html.Node, inLink, inMain bool, depth int)
	walk = func(n *html.Node, inLink, inMain bool, depth int) {
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			if budget--; budget < 0 || depth > maxTextDepth {
				return
			}
			switch c.Type {
			case html.TextNode:
				l := len(strings.TrimSpace(c.Data))
				text += l
				if inLink {
					linkText += l
				}
			case html.ElementNode:
				a := tagAtom(c)
				switch a {
				case atom.Script, atom.Style, atom.Template, atom.Noscript, atom.Nav, atom.Footer, atom.Aside,
					atom.Select, atom.Svg, atom.Head, atom.Form, atom.Button:
					continue
				}
				if a == atom.Article || a == atom.Main {
					if mains++; main == nil {
						main = c
					}
				}
				inMain := inMain || c == main
				if !inlineTag(a) && !inLink {
					if l := inlineLen(c, &budget); l >= kindParagraph {
						if inMain {
							mainProse += l
						}
						container := c
						switch a {
						case atom.P, atom.Blockquote, atom.Pre, atom.Li, atom.Dd, atom.Dt, atom.H2, atom.H3, atom.H4:
							if c.Parent != nil {
								container = c.Parent
							}
						}
						perParent[container] += l
					}
				}
				if c.FirstChild != nil && c.FirstChild.NextSibling != nil {
					if n, t := similarItems(c, &budget); n > items || n == items && t > itemsText {
						items, itemsText = n, t
					}
				}
				walk(c, inLink || a == atom.A, inMain, depth+1)
			}
		}
	}
	walk(doc, false, false, 0)
	for _, v := range perParent {
		prose = max(prose, v)
	}
	if mains <= 2 && mainProse >= kindProse/3 {
		prose = max(prose, kindProse)
	}
	return prose, items, itemsText, linkText, text
}

// inlineTag reports the elements that continue the text around them.
func inlineTag(a atom.Atom) bool {
	switch a {
	case atom.A, atom.Span, atom.Em, atom.Strong, atom.B, atom.I, atom.U, atom.Small, atom.Abbr, atom.Code,
		atom.Time, atom.Font, atom.Sup, atom.Sub, atom.Mark, atom.Cite, atom.Q, atom.S, atom.Br, atom.Img,
		atom.Label, atom.Bdi, atom.Bdo, atom.Del, atom.Ins, atom.Kbd, atom.Var, atom.Wbr, atom.Dfn, atom.Samp,
		atom.Tt, atom.Big:
		return true
	}
	return false
}

// inlineLen is the length of n's own text: under n outside links, not in
// its block children.
func inlineLen(n *html.Node, budget *int) int {
	l := 0
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			if *budget--; *budget < 0 {
				return
			}
			switch c.Type {
			case html.TextNode:
				l += len(strings.TrimSpace(c.Data))
			case html.ElementNode:
				if a := tagAtom(c); inlineTag(a) && a != atom.A {
					walk(c)
				}
			}
		}
	}
	walk(n)
	return l
}

// similarItems is the size of the largest group of n's element children
// that share a tag and class and each hold a link and at least
// kindItemText bytes of text, and the text they hold.
func similarItems(n *html.Node, budget *int) (int, int) {
	type group struct{ n, text int }
	groups := map[string]group{}
	var best group
	kids := 0
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		if c.Type != html.ElementNode {
			continue
		}
		if kids++; kids > 500 {
			break
		}
		ok, l := itemLike(c, budget)
		if !ok {
			continue
		}
		key := c.Data + "." + strings.Join(strings.Fields(attrValue(c, "class")), ".")
		g := groups[key]
		g.n, g.text = g.n+1, g.text+l
		groups[key] = g
		if g.n > best.n || g.n == best.n && g.text > best.text {
			best = g
		}
	}
	return best.n, best.text
}

// maxItemText bounds the text itemLike counts in one item.
const maxItemText = 1000

// itemLike reports a block with a link and enough text to be an item of
// a listing, not a menu entry, and the length of its text.
func itemLike(n *html.Node, budget *int) (bool, int) {
	hasLink, l, steps := false, 0, 0
	var walk func(n *html.Node, depth int)
	walk = func(n *html.Node, depth int) {
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			if steps++; steps > 400 || l >= maxItemText || *budget <= 0 || depth > 64 {
				return
			}
			*budget--
			switch c.Type {
			case html.TextNode:
				l += len(strings.TrimSpace(c.Data))
			case html.ElementNode:
				switch tagAtom(c) {
				case atom.Script, atom.Style, atom.Template:
					continue
				case atom.A:
					if _, ok := attr(c, "href"); ok {
						hasLink = true
					}
				}
				walk(c, depth+1)
			}
		}
	}
	walk(n, 0)
	return hasLink && l >= kindItemText, l
}
