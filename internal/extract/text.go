package extract

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// maxTextDepth bounds the recursion of the text walkers: hostile documents
// can nest elements far deeper than any page a person reads.
const maxTextDepth = 512

// skipTags are elements whose text is never content.
var skipTags = map[atom.Atom]bool{
	atom.Script: true, atom.Style: true, atom.Noscript: true, atom.Template: true,
	atom.Head: true, atom.Svg: true, atom.Math: true, atom.Iframe: true,
	atom.Object: true, atom.Embed: true, atom.Select: true, atom.Option: true,
	atom.Button: true, atom.Input: true, atom.Textarea: true, atom.Canvas: true,
	atom.Audio: true, atom.Video: true, atom.Picture: true, atom.Source: true,
	atom.Img: true, atom.Title: true, atom.Meta: true, atom.Link: true,
}

// blockTags start and end a line of plain text.
var blockTags = map[atom.Atom]bool{
	atom.Address: true, atom.Article: true, atom.Aside: true, atom.Blockquote: true,
	atom.Body: true, atom.Center: true, atom.Dd: true, atom.Details: true,
	atom.Dialog: true, atom.Dir: true, atom.Div: true, atom.Dl: true,
	atom.Dt: true, atom.Fieldset: true, atom.Figcaption: true, atom.Figure: true,
	atom.Footer: true, atom.Form: true, atom.H1: true, atom.H2: true,
	atom.H3: true, atom.H4: true, atom.H5: true, atom.H6: true,
	atom.Header: true, atom.Hgroup: true, atom.Hr: true, atom.Html: true,
	atom.Legend: true, atom.Li: true, atom.Main: true, atom.Menu: true,
	atom.Nav: true, atom.Ol: true, atom.P: true, atom.Pre: true,
	atom.Section: true, atom.Summary: true, atom.Table: true, atom.Tbody: true,
	atom.Thead: true, atom.Tfoot: true, atom.Tr: true, atom.Ul: true,
	atom.Caption: true, atom.Frameset: true, atom.Noframes: true,
}

// textWriter accumulates plain text with collapsed whitespace, one line per
// block.
type textWriter struct {
	b       strings.Builder
	pending bool // a space is owed before the next word
	cell    int  // depth of table cells being written
}

// newline ends the current line, if it has anything.
func (w *textWriter) newline() {
	if w.cell > 0 {
		w.pending = true // a table row stays on one line
		return
	}
	w.pending = false
	s := w.b.String()
	if len(s) == 0 || s[len(s)-1] == '\n' {
		return
	}
	w.b.WriteByte('\n')
}

// sep separates table cells on one line.
func (w *textWriter) sep() {
	s := w.b.String()
	if len(s) == 0 || s[len(s)-1] == '\n' || s[len(s)-1] == '\t' {
		return
	}
	w.pending = false
	w.b.WriteByte('\t')
}

func (w *textWriter) atLineStart() bool {
	s := w.b.String()
	return len(s) == 0 || s[len(s)-1] == '\n' || s[len(s)-1] == '\t'
}

// text writes s with runs of white space collapsed.
func (w *textWriter) text(s string) {
	for len(s) > 0 {
		if n := spaceAt(s, 0); n > 0 {
			w.pending = true
			s = s[n:]
			continue
		}
		i := 0 // the end of the word
		for i < len(s) && spaceAt(s, i) == 0 {
			if s[i] < utf8.RuneSelf {
				i++
			} else {
				_, n := utf8.DecodeRuneInString(s[i:])
				i += n
			}
		}
		if w.pending && !w.atLineStart() {
			w.b.WriteByte(' ')
		}
		w.pending = false
		w.b.WriteString(s[:i])
		s = s[i:]
	}
}

// raw writes preformatted text as is, normalising line ends.
func (w *textWriter) raw(s string) {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	if w.pending && !w.atLineStart() {
		w.b.WriteByte(' ')
	}
	w.pending = false
	w.b.WriteString(s)
}

// spaceAt is the length of the white-space character at s[i], 0 when
// s[i] starts another.
func spaceAt(s string, i int) int {
	if c := s[i]; c < utf8.RuneSelf {
		if asciiSpace[c] {
			return 1
		}
		return 0
	}
	r, n := utf8.DecodeRuneInString(s[i:])
	if r == 0xa0 || unicode.IsSpace(r) {
		return n
	}
	return 0
}

func isSpace(r rune) bool {
	if r < utf8.RuneSelf {
		return asciiSpace[r]
	}
	return r == 0xa0 || unicode.IsSpace(r)
}

// asciiSpace holds the ASCII characters unicode.IsSpace reports.
var asciiSpace = [utf8.RuneSelf]bool{'\t': true, '\n': true, '\v': true, '\f': true, '\r': true, ' ': true}

// nodeText renders n as plain text: a line per block element (paragraph,
// heading, list item, table row), table cells separated by tabs,
// preformatted text kept as is.
func nodeText(n *html.Node) string {
	var w textWriter
	walkText(&w, n, 0, false)
	return cleanText(w.b.String())
}

func walkText(w *textWriter, n *html.Node, depth int, pre bool) {
	if depth > maxTextDepth {
		return
	}
	switch n.Type {
	case html.TextNode:
		if pre {
			w.raw(n.Data)
		} else {
			w.text(n.Data)
		}
		return
	case html.DocumentNode:
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walkText(w, c, depth+1, pre)
		}
		return
	case html.ElementNode:
	default:
		return
	}
	a := tagAtom(n)
	if skipTags[a] || hidden(n) {
		return
	}
	switch a {
	case atom.Br:
		if pre {
			w.raw("\n")
		} else {
			w.newline()
		}
		return
	case atom.Td, atom.Th:
		w.sep()
		w.cell++
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walkText(w, c, depth+1, pre)
		}
		w.cell--
		w.sep()
		return
	case atom.Pre:
		w.newline()
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walkText(w, c, depth+1, true)
		}
		w.newline()
		return
	}
	block := blockTags[a]
	if block {
		w.newline()
	}
	if a == atom.Li && !pre {
		w.b.WriteString("- ")
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		walkText(w, c, depth+1, pre)
	}
	if block {
		w.newline()
	}
}

// hidden reports elements that browsers do not render.
func hidden(n *html.Node) bool {
	for _, at := range n.Attr {
		switch at.Key {
		case "hidden":
			return true
		case "aria-hidden":
			if at.Val == "true" {
				return true
			}
		case "class":
			// The utility classes of the common CSS frameworks.
			for _, c := range strings.Fields(at.Val) {
				switch c {
				case "hidden", "hide", "d-none", "invisible":
					return true
				}
			}
		case "style":
			s := strings.ToLower(at.Val)
			if strings.Contains(s, "display:none") || strings.Contains(s, "display: none") ||
				strings.Contains(s, "visibility:hidden") || strings.Contains(s, "visibility: hidden") {
				return true
			}
		}
	}
	return false
}

// cleanText trims every line, drops empty lines and list markers with no
// item text.
func cleanText(s string) string {
	lines := strings.Split(s, "\n")
	out := lines[:0]
	for _, l := range lines {
		l = strings.TrimRightFunc(l, isSpace)
		if strings.TrimFunc(l, isSpace) == "" || l == "-" {
			continue
		}
		out = append(out, l)
	}
	return strings.Join(out, "\n")
}

// tagAtom is n's atom; trees built by the extractors (rather than by the
// parser) may carry only the tag name.
func tagAtom(n *html.Node) atom.Atom {
	if n.DataAtom != 0 || n.Type != html.ElementNode {
		return n.DataAtom
	}
	return atom.Lookup([]byte(n.Data))
}

// indexFold is the byte offset in s of the first match of sub, an ASCII
// string, ASCII letters matching in either case; -1 when there is none.
// Unlike an index into strings.ToLower(s), it is an offset into s (a
// lower-cased copy can be of another byte length: "Ⱥ" is 2 bytes, "ⱥ"
// 3).
func indexFold(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if asciiEqualFold(s[i:i+len(sub)], sub) {
			return i
		}
	}
	return -1
}

// asciiEqualFold reports a and b equal with ASCII letters in either case;
// other bytes must be equal.
func asciiEqualFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}
