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
func parseHTML(body []byte) (*html.Node, error) {
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

// flatten re-serialises body without the tags of elements nested deeper
// than limit. It tracks nesting by tag names, as a tokenizer sees it; the
// parser repairs what this approximation gets wrong.
func flatten(body []byte, limit int) []byte {
	z := html.NewTokenizer(bytes.NewReader(body))
	var out bytes.Buffer
	out.Grow(len(body))
	type open struct {
		name string
		kept bool
	}
	var stack []open
	kept := 0
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
			keep := kept < limit
			stack = append(stack, open{string(name), keep})
			if keep {
				kept++
				out.Write(z.Raw())
			}
		case html.EndTagToken:
			name, _ := z.TagName()
			i := len(stack) - 1
			for i >= 0 && stack[i].name != string(name) {
				i--
			}
			if i < 0 {
				continue
			}
			for j := len(stack) - 1; j >= i; j-- {
				if stack[j].kept {
					kept--
					out.WriteString("</" + stack[j].name + ">")
				}
			}
			stack = stack[:i]
		default:
			out.Write(z.Raw())
		}
	}
}
