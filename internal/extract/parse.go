package extract

import (
	"bytes"
	"strings"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// flattenDepth is the nesting kept when a document is too deep for the
// HTML parser (which refuses more than 512 open elements): deeper
// elements lose their tags and keep their text.
const flattenDepth = 256

// parseHTML parses a UTF-8 HTML document. A document nested deeper than
// the parser accepts is flattened and parsed again rather than refused.
//
// The parser's work for a token is about the depth of its stack of open
// elements (scope checks walk it), and it cannot be interrupted: 250
// nested <b> then 2.4 million <hr> (9.6 MB) took 15 s. A document whose
// work parseWork puts over maxParseWork is flattened first, to a depth
// that brings the work back to maxParseWork (between flattenFloor and
// flattenShallow levels), which keeps it linear in the size.
func parseHTML(body []byte) (*html.Node, error) {
	if len(body) > maxParseWork/parseDepthCap {
		if work, tokens := parseWork(body); work > maxParseWork {
			body = flatten(body, min(max(maxParseWork/tokens, flattenFloor), flattenShallow))
		}
	}
	doc, err := html.Parse(bytes.NewReader(body))
	if err != nil {
		if !strings.Contains(err.Error(), "open stack") {
			return nil, err
		}
		if doc, err = html.Parse(bytes.NewReader(flatten(body, flattenDepth))); err != nil {
			return nil, err
		}
	}
	trimAttributes(doc)
	return doc, nil
}

// Attribute bounds: the extractors run regular expressions over class and
// id values, and nothing useful is megabytes long.
const (
	maxNameAttr = 1024    // class, id, style, name
	maxAttr     = 1 << 16 // anything else (a data: URL may be long)
)

// trimAttributes shortens over-long attribute values in place.
func trimAttributes(doc *html.Node) {
	walkElements(doc, func(n *html.Node) bool {
		for i := range n.Attr {
			a := &n.Attr[i]
			switch {
			case len(a.Val) <= maxNameAttr:
			case a.Key == "class" || a.Key == "id" || a.Key == "style" || a.Key == "name":
				a.Val = clip(a.Val, maxNameAttr)
			case len(a.Val) > maxAttr:
				a.Val = ""
			}
		}
		return true
	})
}

// voidElements never have an end tag.
var voidElements = map[atom.Atom]bool{
	atom.Area: true, atom.Base: true, atom.Br: true, atom.Col: true, atom.Embed: true,
	atom.Hr: true, atom.Img: true, atom.Input: true, atom.Link: true, atom.Meta: true,
	atom.Source: true, atom.Track: true, atom.Wbr: true, atom.Param: true, atom.Keygen: true,
}

const (
	// maxParseWork bounds parseWork before a document is flattened
	// (about 0.4 s of parsing): the largest of the test corpus's pages
	// is 0.4 million, an ordinary large page (100,000 tokens, 40 deep)
	// a quarter of it.
	maxParseWork = 1 << 24
	// parseDepthCap is the deepest stack parseWork counts: the parser
	// refuses a deeper one (and the document is flattened to
	// flattenDepth then).
	parseDepthCap = 512
	// flattenShallow and flattenFloor bound the nesting kept of a
	// document over maxParseWork.
	flattenShallow, flattenFloor = 32, 8
)

// parseWork estimates the HTML parser's work for body: the sum over its
// tokens of the open elements' depth (at most parseDepthCap), tracked by
// tag names as flatten tracks them, saturating past maxParseWork, and
// the number of tokens (at least 1). Its own cost is linear in the size
// of body.
func parseWork(body []byte) (work, tokens int) {
	z := html.NewTokenizer(bytes.NewReader(body))
	var st openStack
	for tokens = 1; ; tokens++ {
		switch z.Next() {
		case html.ErrorToken:
			return work, tokens
		case html.StartTagToken:
			name, _ := z.TagName()
			a := atom.Lookup(name)
			if a == atom.A {
				st.close("a", nil) // the parser ends an open a at the next one
			}
			if !voidElements[a] {
				st.push(string(name), true)
			}
		case html.EndTagToken:
			name, _ := z.TagName()
			st.close(string(name), nil)
		}
		if work <= maxParseWork {
			work += min(len(st.s), parseDepthCap)
		}
	}
}

// openStack is the elements a tokenizer has seen open, by tag name. An
// end tag that closes nothing costs no scan (n counts the open elements
// of each name), and a scan pops what it passes: the cost is linear in
// the tokens.
type openStack struct {
	s []openElem
	n map[string]int
}

type openElem struct {
	name string
	kept bool
}

func (st *openStack) push(name string, kept bool) {
	if st.n == nil {
		st.n = map[string]int{}
	}
	st.s = append(st.s, openElem{name, kept})
	st.n[name]++
}

// close pops the elements down to the innermost open name, calling
// popped (when not nil) for each, innermost first; nothing when no
// element of that name is open.
func (st *openStack) close(name string, popped func(openElem)) {
	if st.n[name] == 0 {
		return
	}
	for {
		e := st.s[len(st.s)-1]
		st.s = st.s[:len(st.s)-1]
		st.n[e.name]--
		if popped != nil {
			popped(e)
		}
		if e.name == name {
			return
		}
	}
}

// flatten re-serialises body without the tags of elements nested deeper
// than limit. It tracks nesting by tag names, as a tokenizer sees it; the
// parser repairs what this approximation gets wrong.
func flatten(body []byte, limit int) []byte {
	z := html.NewTokenizer(bytes.NewReader(body))
	var out bytes.Buffer
	out.Grow(len(body))
	var st openStack
	kept := 0
	closed := func(e openElem) {
		if e.kept {
			kept--
			out.WriteString("</" + e.name + ">")
		}
	}
	for {
		tt := z.Next()
		switch tt {
		case html.ErrorToken:
			return out.Bytes()
		case html.StartTagToken:
			name, _ := z.TagName()
			a := atom.Lookup(name)
			if voidElements[a] {
				out.Write(z.Raw())
				continue
			}
			if a == atom.A {
				// The parser ends an open a at the next one: so does the
				// stack, or a page of unclosed links would be flattened
				// past its links.
				st.close("a", closed)
			}
			keep := kept < limit
			st.push(string(name), keep)
			if keep {
				kept++
				out.Write(z.Raw())
			}
		case html.EndTagToken:
			name, _ := z.TagName()
			st.close(string(name), closed)
		default:
			out.Write(z.Raw())
		}
	}
}
