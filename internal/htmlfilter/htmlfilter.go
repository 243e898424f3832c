// Package htmlfilter applies a scrape's tag filters to an HTML document
// before extraction, and produces the cleaned HTML of Firecrawl's html
// format: the document without scripts, styles and its head, reduced to
// its main content unless the whole page is asked for. It uses no
// network and runs no script; it works on a parsed tree.
package htmlfilter

import (
	"bytes"
	"strings"

	"github.com/andybalholm/cascadia"
	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
	"golang.org/x/net/html/charset"

	"github.com/airlockhq/airlock"
)

// Options say what to filter. The zero Options filters nothing and makes
// HTML the main content.
type Options struct {
	// Include keeps, in the body, only the elements these CSS selectors
	// match (and what they contain), in document order; Exclude removes
	// the elements they match. Exclude applies after Include.
	Include, Exclude []string
	// WholePage makes HTML the whole cleaned body. Otherwise HTML drops
	// the page's boilerplate (headers, footers, navigation, sidebars,
	// ads, cookie banners, by the selectors of nonMain) and, when the
	// page marks its main content (<main>, role=main), keeps only that.
	// With Include, the caller chose the content: HTML is what Include
	// kept, without that reduction.
	WholePage bool
}

// Result is a filtered document.
type Result struct {
	// Document is the filtered document, head included, for extraction
	// (UTF-8).
	Document []byte
	// HTML is the cleaned HTML (see Options.WholePage).
	HTML string
}

// nonMain are the selectors of the boilerplate the main-content HTML
// leaves out.
var nonMain = cascadia.MustCompile(strings.Join([]string{
	"header", "footer", "nav", "aside", "[role=banner]", "[role=navigation]", "[role=contentinfo]", "[role=complementary]",
	"#header", "#footer", "#nav", "#navigation", "#sidebar", "#menu", "#breadcrumbs", "#cookie", "#cookies", "#ad", "#ads",
	".header", ".footer", ".navbar", ".navigation", ".nav", ".menu", ".sidebar", ".breadcrumbs", ".breadcrumb",
	".cookie", ".cookie-banner", ".ad", ".ads", ".advert", ".advertisement", ".social", ".share", ".popup", ".modal",
}, ", "))

// mainMarks select a page's own main content.
var mainMarks = cascadia.MustCompile("main, [role=main]")

// dropped are the elements cleaned HTML never holds.
var dropped = map[atom.Atom]bool{atom.Script: true, atom.Style: true, atom.Noscript: true, atom.Template: true, atom.Link: true, atom.Meta: true}

// Selectors compiles CSS selectors. Errors: invalid (bad_selector),
// naming the selector.
func Selectors(field string, sels []string) (cascadia.SelectorGroup, error) {
	var g cascadia.SelectorGroup
	for _, s := range sels {
		sel, err := cascadia.Parse(s)
		if err != nil {
			return nil, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonBadSelector, "%s: bad CSS selector %q: %v", field, s, err)
		}
		g = append(g, sel)
	}
	return g, nil
}

// Apply filters body, an HTML document of content type contentType (its
// charset is honoured; "" sniffs). Errors: invalid (bad_selector) for a
// selector that does not parse; upstream (html) for a document the HTML
// parser refuses (nested deeper than 512 elements).
func Apply(body []byte, contentType string, o Options) (Result, error) {
	include, err := Selectors("includeTags", o.Include)
	if err != nil {
		return Result{}, err
	}
	exclude, err := Selectors("excludeTags", o.Exclude)
	if err != nil {
		return Result{}, err
	}
	r, err := charset.NewReader(bytes.NewReader(body), contentType)
	if err != nil {
		r = bytes.NewReader(body)
	}
	doc, err := html.Parse(r)
	if err != nil {
		// The parser refuses a document nested deeper than 512 elements.
		return Result{}, airlock.Errorf(airlock.CodeUpstream, airlock.ReasonHTML, "the page's HTML cannot be filtered: %v", err)
	}
	dropCharset(doc)
	bodyEl := find(doc, atom.Body)
	if bodyEl != nil && len(include) > 0 {
		keep := outermost(cascadia.QueryAll(bodyEl, include))
		for c := bodyEl.FirstChild; c != nil; {
			next := c.NextSibling
			bodyEl.RemoveChild(c)
			c = next
		}
		for _, n := range keep {
			if n.Parent != nil {
				n.Parent.RemoveChild(n)
			}
			bodyEl.AppendChild(n)
		}
	}
	if len(exclude) > 0 {
		for _, n := range cascadia.QueryAll(doc, exclude) {
			if n.Parent != nil && n != bodyEl && n.DataAtom != atom.Html && n.DataAtom != atom.Head {
				n.Parent.RemoveChild(n)
			}
		}
	}
	var out Result
	var b bytes.Buffer
	if err := html.Render(&b, doc); err != nil {
		return Result{}, airlock.Errorf(airlock.CodeInternal, airlock.ReasonNone, "htmlfilter: render: %v", err)
	}
	out.Document = b.Bytes()
	if bodyEl == nil {
		return out, nil
	}
	clean(bodyEl)
	root := bodyEl
	if !o.WholePage && len(include) == 0 {
		// Boilerplate that holds the main content (a layout wrapper
		// named .side) stays: mark the main elements' ancestors once.
		marks := cascadia.QueryAll(bodyEl, mainMarks)
		holds := map[*html.Node]bool{}
		for _, m := range marks {
			for p := m; p != nil && !holds[p]; p = p.Parent {
				holds[p] = true
			}
		}
		for _, n := range cascadia.QueryAll(bodyEl, nonMain) {
			if n.Parent != nil && !holds[n] {
				n.Parent.RemoveChild(n)
			}
		}
		if len(marks) > 0 {
			root = marks[0]
		}
	}
	var hb strings.Builder
	if root == bodyEl {
		for c := bodyEl.FirstChild; c != nil; c = c.NextSibling {
			if err := html.Render(&hb, c); err != nil {
				return Result{}, airlock.Errorf(airlock.CodeInternal, airlock.ReasonNone, "htmlfilter: render: %v", err)
			}
		}
	} else if err := html.Render(&hb, root); err != nil {
		return Result{}, airlock.Errorf(airlock.CodeInternal, airlock.ReasonNone, "htmlfilter: render: %v", err)
	}
	out.HTML = strings.TrimSpace(hb.String())
	return out, nil
}

// outermost drops the nodes that are inside another of nodes.
func outermost(nodes []*html.Node) []*html.Node {
	in := make(map[*html.Node]bool, len(nodes))
	for _, n := range nodes {
		in[n] = true
	}
	var out []*html.Node
	for _, n := range nodes {
		inside := false
		for p := n.Parent; p != nil && !inside; p = p.Parent {
			inside = in[p]
		}
		if !inside {
			out = append(out, n)
		}
	}
	return out
}

// clean removes scripts, styles, comments and the like under n.
func clean(n *html.Node) {
	for c := n.FirstChild; c != nil; {
		next := c.NextSibling
		switch {
		case c.Type == html.CommentNode, c.Type == html.ElementNode && dropped[c.DataAtom]:
			n.RemoveChild(c)
		case c.Type == html.ElementNode:
			clean(c)
		}
		c = next
	}
}

// dropCharset removes the document's charset declarations: the tree is
// UTF-8 now, whatever the page said.
func dropCharset(doc *html.Node) {
	head := find(doc, atom.Head)
	if head == nil {
		return
	}
	for c := head.FirstChild; c != nil; {
		next := c.NextSibling
		if c.Type == html.ElementNode && c.DataAtom == atom.Meta {
			for _, a := range c.Attr {
				if strings.EqualFold(a.Key, "charset") || strings.EqualFold(a.Key, "http-equiv") && strings.EqualFold(a.Val, "content-type") {
					head.RemoveChild(c)
					break
				}
			}
		}
		c = next
	}
	head.InsertBefore(&html.Node{Type: html.ElementNode, Data: "meta", DataAtom: atom.Meta, Attr: []html.Attribute{{Key: "charset", Val: "utf-8"}}}, head.FirstChild)
}

// find returns the first element a under n, depth first.
func find(n *html.Node, a atom.Atom) *html.Node {
	if n.Type == html.ElementNode && n.DataAtom == a {
		return n
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		if f := find(c, a); f != nil {
			return f
		}
	}
	return nil
}
