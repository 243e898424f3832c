package extract

import (
	"context"
	"net/url"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// The Markdown converter: the content tree as CommonMark with GitHub's
// tables and strikethrough. It keeps the structure a reader needs
// (headings with their levels, nested and numbered lists, fenced code
// with its language, tables, block quotes, links and image alt text) and
// escapes text that Markdown would otherwise read as structure. One pass
// over the tree, in time linear in its size; containers nested deeper
// than maxMDNest add no more indentation, and past maxMDDepth elements
// give their text only.

const (
	// maxMDNest bounds the list and quote prefixes of a line.
	maxMDNest = 16
	// maxMDDepth bounds the recursion over the tree.
	maxMDDepth = 512
	// maxMDColumns is the widest table written as a Markdown table; wider
	// ones are written cell by cell.
	maxMDColumns = 64
	// maxMDSpan bounds a cell's colspan and rowspan.
	maxMDSpan = maxMDColumns
	// maxMDWrap bounds the nesting of inline markup written (emphasis in
	// a link in emphasis...): each level copies its content once more,
	// so deeper markup gives its content only.
	maxMDWrap = 8
)

// toMarkdown renders the content tree n as Markdown. Links and images are
// resolved against base. It returns ctx's error when ctx ends first.
func toMarkdown(ctx context.Context, n *html.Node, base string) (md string, err error) {
	defer func() {
		if v := recover(); v != nil {
			md, err = "", errPanic{v}
		}
	}()
	w := &mdWriter{ctx: ctx, holders: blockHolders(n)}
	if u, err := url.Parse(base); err == nil && u.IsAbs() {
		w.base = u
	}
	w.blocks(n, 0)
	w.flush()
	if w.err != nil {
		return "", w.err
	}
	return strings.TrimSpace(w.out.String()), nil
}

type errPanic struct{ v any }

func (e errPanic) Error() string { return "panic in converter" }

// mdTrim removes runs of blank lines.
func mdTrim(s string) string {
	for strings.Contains(s, "\n\n\n") {
		s = strings.ReplaceAll(s, "\n\n\n", "\n\n")
	}
	return s
}

// mdContainer is one list item or block quote around the current line:
// first prefixes its first line, rest the others.
type mdContainer struct {
	first, rest string
	started     bool
	wasFresh    bool // the writer's fresh when it opened
}

// mdWriter writes Markdown blocks; inline content of the block being
// written gathers in para until flush.
type mdWriter struct {
	ctx   context.Context
	err   error
	seen  int
	base  *url.URL
	out   strings.Builder
	stack []mdContainer
	// holders are the inline elements holding blocks, at any depth.
	holders map[*html.Node]bool
	nest    int // containers wanted, including those past maxMDNest
	para    mdInline
	wraps   int // inline markup being written, nested
	// blockLink is the destination of a link wrapping blocks, until its
	// first heading or paragraph takes it.
	blockLink string
	// open counts the emphasis delimiters being written: <b> in <strong>
	// adds none.
	open map[string]int
	// fresh: nothing written since the innermost container opened;
	// tight: the last line was a list item's, so a list or item that
	// follows needs no blank line.
	fresh, tight bool
	// term: the last block was a definition list's term or a meaning of
	// one line, which a meaning follows without a blank line.
	term bool
}

// line writes one line with the containers' prefixes.
func (w *mdWriter) line(s string) {
	for i := range w.stack {
		c := &w.stack[i]
		if c.started {
			w.out.WriteString(c.rest)
		} else {
			w.out.WriteString(c.first)
			c.started = true
		}
	}
	w.out.WriteString(s)
	w.out.WriteByte('\n')
	w.fresh = false
}

// blank writes a blank line (a bare ">" inside block quotes).
func (w *mdWriter) blank() {
	var b strings.Builder
	for _, c := range w.stack {
		b.WriteString(c.rest)
	}
	w.out.WriteString(strings.TrimRight(b.String(), " "))
	w.out.WriteByte('\n')
}

// startBlock separates the block about to be written from the one
// before it. listy blocks (lists, list items) follow a list line without
// a blank line.
func (w *mdWriter) startBlock(listy bool) {
	switch {
	case w.out.Len() == 0 || w.fresh:
	case listy && w.tight:
	default:
		w.blank()
	}
	w.tight, w.term = false, false
}

func (w *mdWriter) push(first, rest string) {
	w.nest++
	if w.nest > maxMDNest {
		return
	}
	w.stack = append(w.stack, mdContainer{first: first, rest: rest, wasFresh: w.fresh})
	w.fresh = true
}

func (w *mdWriter) pop() {
	if w.nest--; w.nest >= maxMDNest {
		return
	}
	// An item with nothing in it writes nothing (an empty marker line
	// says nothing either) and leaves the writer as it found it.
	c := w.stack[len(w.stack)-1]
	w.stack = w.stack[:len(w.stack)-1]
	w.fresh = !c.started && c.wasFresh
}

// flush writes the paragraph gathered so far.
func (w *mdWriter) flush() {
	s := strings.Trim(w.para.b.String(), " \n")
	w.para.reset()
	if s == "" {
		return
	}
	w.startBlock(false)
	itemFirst := false
	if k := len(w.stack); k > 0 && w.nest <= maxMDNest {
		top := w.stack[k-1]
		itemFirst = !top.started && top.first != top.rest
	}
	if !strings.Contains(s, "\n") {
		s = w.linked(s)
	}
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		l = strings.TrimSpace(l)
		if l == "" {
			continue
		}
		l = escapeLineStart(l)
		if i < len(lines)-1 {
			l += "  " // a hard line break
		}
		w.line(l)
	}
	w.tight = itemFirst
}

// linked is the text of a heading or paragraph, carrying the link of a
// block link it is the first block of.
func (w *mdWriter) linked(t string) string {
	if w.blockLink == "" || strings.Contains(t, "](") {
		return t
	}
	dest := w.blockLink
	w.blockLink = ""
	return "[" + t + "](" + dest + ")"
}

// tick counts elements and checks ctx now and then.
func (w *mdWriter) tick() bool {
	if w.err != nil {
		return false
	}
	if w.seen++; w.seen%4096 == 0 {
		w.err = w.ctx.Err()
	}
	return w.err == nil
}

// blocks writes the children of n.
func (w *mdWriter) blocks(n *html.Node, depth int) {
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		w.node(c, depth)
	}
}

// node writes n: a block of its own, or inline content of the paragraph
// being gathered.
func (w *mdWriter) node(n *html.Node, depth int) {
	switch n.Type {
	case html.TextNode:
		w.para.text(n.Data)
		return
	case html.ElementNode, html.DocumentNode:
	default:
		return
	}
	if !w.tick() {
		return
	}
	if depth > maxMDDepth {
		w.para.text(" " + flatText(n) + " ")
		return
	}
	a := mdAtom(n)
	switch {
	case mdSkip(a):
	case n.Type == html.DocumentNode:
		w.blocks(n, depth+1)
	case mdBlockTags[a]:
		w.block(n, a, depth)
	case a == atom.A && w.holders[n]:
		// A link wrapping blocks (a card: <a><h3>…</h3><p>…</p></a>): the
		// first heading or paragraph in it carries the link.
		w.flush()
		prev := w.blockLink
		w.blockLink = w.resolve(mdAttr(n, "href"), true)
		w.blocks(n, depth+1)
		w.flush()
		w.blockLink = prev
	case w.holders[n]:
		// An inline element wrapping blocks (<span><p>…</p></span>, at
		// any depth: <span><span><div>…).
		w.blocks(n, depth+1)
	default:
		w.inline(&w.para, n, depth)
	}
}

func (w *mdWriter) block(n *html.Node, a atom.Atom, depth int) {
	switch a {
	case atom.H1, atom.H2, atom.H3, atom.H4, atom.H5, atom.H6:
		w.flush()
		sub := mdInline{plain: true}
		w.inlineChildren(&sub, n, depth+1)
		if t := strings.TrimRight(oneLine(sub.b.String()), " ¶§"); t != "" {
			t = w.linked(t)
			w.startBlock(false)
			w.line(strings.Repeat("#", headingLevel(a)) + " " + t)
		}
	case atom.Ul, atom.Ol, atom.Menu, atom.Dir:
		w.flush()
		w.list(n, a == atom.Ol, depth)
	case atom.Li:
		w.flush()
		w.item(n, "- ", depth)
	case atom.Pre:
		w.flush()
		w.code(n)
	case atom.Blockquote:
		w.flush()
		w.startBlock(false)
		w.push("> ", "> ")
		w.blocks(n, depth+1)
		w.flush()
		w.pop()
	case atom.Table, atom.Tbody, atom.Thead, atom.Tfoot:
		// Extractors leave row groups without their table.
		w.flush()
		w.table(n, depth)
	case atom.Hr:
		w.flush()
		w.startBlock(false)
		w.line("---")
	case atom.Dt:
		// A term, its meanings on the lines under it after ": " (the
		// definition lists of Markdown Extra and pandoc; elsewhere it
		// reads as "term : meaning").
		w.flush()
		w.blocks(n, depth+1)
		w.flush()
		w.term, w.tight = true, false
	case atom.Dd:
		w.flush()
		w.tight = w.term
		w.startBlock(true)
		start := w.out.Len()
		w.push(": ", "  ")
		w.blocks(n, depth+1)
		w.flush()
		w.pop()
		// After a meaning of one line another follows directly; what
		// else follows starts a block of its own.
		w.term = strings.Count(w.out.String()[start:], "\n") == 1
		w.tight = false
	default:
		w.flush()
		w.blocks(n, depth+1)
		w.flush()
	}
}

func headingLevel(a atom.Atom) int {
	for i, h := range []atom.Atom{atom.H1, atom.H2, atom.H3, atom.H4, atom.H5, atom.H6} {
		if a == h {
			return i + 1
		}
	}
	return 1
}

// list writes a list's items; an ordered list counts from its start.
func (w *mdWriter) list(n *html.Node, ordered bool, depth int) {
	num := 1
	if s, err := strconv.Atoi(strings.TrimSpace(mdAttr(n, "start"))); err == nil && s >= 0 && s < 1e9 {
		num = s
	}
	marker := "- "
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		if c.Type == html.TextNode && strings.TrimSpace(c.Data) == "" || c.Type == html.CommentNode {
			continue
		}
		if ordered {
			marker = strconv.Itoa(num) + ". "
		}
		switch a := mdAtom(c); {
		case c.Type == html.ElementNode && mdSkip(a):
			continue
		case a == atom.Ul || a == atom.Ol:
			// A list directly in a list: it belongs to the item before.
			pad := strings.Repeat(" ", len(marker))
			w.startBlock(true)
			w.push(pad, pad)
			w.list(c, a == atom.Ol, depth+1)
			w.pop()
			continue
		case a == atom.Li:
			w.item(c, marker, depth+1)
		default:
			w.startBlock(true)
			w.push(marker, strings.Repeat(" ", len(marker)))
			w.node(c, depth+1)
			w.flush()
			w.pop()
		}
		num++
	}
}

// item writes one list item.
func (w *mdWriter) item(n *html.Node, marker string, depth int) {
	w.startBlock(true)
	w.push(marker, strings.Repeat(" ", len(marker)))
	w.blocks(n, depth+1)
	w.flush()
	w.pop()
}

// code writes a pre element as a fenced code block.
func (w *mdWriter) code(n *html.Node) {
	var b strings.Builder
	preText(&b, n)
	s := strings.ReplaceAll(b.String(), "\r\n", "\n")
	s = strings.TrimLeft(s, "\n")
	s = strings.TrimRight(s, " \t\n")
	if strings.TrimSpace(s) == "" {
		return
	}
	fence := "```"
	for strings.Contains(s, fence) {
		fence += "`"
	}
	w.startBlock(false)
	w.line(fence + codeLanguage(n))
	for _, l := range strings.Split(s, "\n") {
		w.line(l)
	}
	w.line(fence)
}

// preText writes the text under n as is, <br> as a line end.
func preText(b *strings.Builder, n *html.Node) {
	stack := []*html.Node{n}
	for len(stack) > 0 {
		c := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		switch c.Type {
		case html.TextNode:
			b.WriteString(c.Data)
			continue
		case html.ElementNode:
			a := mdAtom(c)
			if a == atom.Br {
				b.WriteByte('\n')
				continue
			}
			if c != n && mdSkip(a) {
				continue
			}
		}
		for k := c.LastChild; k != nil; k = k.PrevSibling {
			stack = append(stack, k)
		}
	}
}

// flatText is the text under n with white space collapsed, for trees
// nested past maxMDDepth.
func flatText(n *html.Node) string {
	var b strings.Builder
	stack := []*html.Node{n}
	for len(stack) > 0 {
		c := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if c.Type == html.TextNode {
			b.WriteString(c.Data)
			b.WriteByte(' ')
			continue
		}
		if c.Type == html.ElementNode && mdSkip(mdAtom(c)) {
			continue
		}
		for k := c.LastChild; k != nil; k = k.PrevSibling {
			stack = append(stack, k)
		}
	}
	return strings.Join(strings.Fields(b.String()), " ")
}

// codeLanguage is the language a code block names: a class
// language-x, lang-x, highlight-x, highlight-source-x, "sourceCode x" or
// "brush: x", or a data-lang or data-language attribute, on the pre, its
// code element or the two elements around it.
func codeLanguage(pre *html.Node) string {
	nodes := []*html.Node{pre}
	for c := pre.FirstChild; c != nil; c = c.NextSibling {
		if c.Type == html.ElementNode && mdAtom(c) == atom.Code {
			nodes = append(nodes, c)
			break
		}
	}
	own := len(nodes) // the pre and its code
	if p := pre.Parent; p != nil {
		nodes = append(nodes, p)
		if p.Parent != nil {
			nodes = append(nodes, p.Parent)
		}
	}
	for i, n := range nodes {
		for _, k := range []string{"data-lang", "data-language"} {
			if l := cleanLanguage(mdAttr(n, k)); l != "" {
				return l
			}
		}
		classes := strings.Fields(strings.ReplaceAll(mdAttr(n, "class"), ";", " "))
		for j, c := range classes {
			lc := strings.ToLower(c)
			for _, p := range []string{"language-", "lang-", "highlight-source-", "highlight-"} {
				if len(c) >= len(p) && asciiEqualFold(c[:len(p)], p) {
					if l := cleanLanguage(c[len(p):]); l != "" {
						return l
					}
				}
			}
			if (lc == "sourcecode" || lc == "brush:") && j+1 < len(classes) {
				if l := cleanLanguage(classes[j+1]); l != "" {
					return l
				}
			}
		}
		if i < own {
			// On the pre or its code only, a bare class that is the name
			// of a language (GeSHi's class="javascript").
			for _, c := range classes {
				if l := strings.ToLower(c); bareLanguages[l] {
					return l
				}
			}
		}
	}
	return ""
}

// bareLanguages are language names taken as such when they stand alone in
// a code block's class: long or distinctive enough not to be utility
// classes.
var bareLanguages = map[string]bool{
	"javascript": true, "typescript": true, "python": true, "java": true, "ruby": true,
	"bash": true, "rust": true, "golang": true, "json": true, "yaml": true, "html": true,
	"xml": true, "css": true, "sql": true, "php": true, "perl": true, "scala": true,
	"swift": true, "kotlin": true, "haskell": true, "lisp": true, "clojure": true,
	"elixir": true, "erlang": true, "lua": true, "powershell": true, "dockerfile": true,
	"makefile": true, "diff": true, "csharp": true, "cpp": true, "objectivec": true,
}

// cleanLanguage is s when it can be a language name on a fence line, in
// lower case; "" for names that say nothing (none, plain text).
func cleanLanguage(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	if s == "" || len(s) > 32 {
		return ""
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || strings.ContainsRune("+#._-", r)) {
			return ""
		}
	}
	switch s {
	case "none", "nohighlight", "plain", "plaintext", "text", "txt", "default", "source", "auto":
		return ""
	}
	return s
}

// mdInline gathers inline Markdown: text with white space collapsed and
// escaped, markup as is, hard breaks as "\n".
type mdInline struct {
	b strings.Builder
	// space: white space since the last write; lead: white space before
	// the first.
	space, lead bool
	// plain drops emphasis (headings); breaks turns blocks into hard
	// breaks instead of spaces (table cells).
	plain, breaks bool
}

func (m *mdInline) reset() {
	m.b.Reset()
	m.space, m.lead = false, false
}

// text writes s, collapsing white space and escaping what Markdown would
// read as markup.
func (m *mdInline) text(s string) {
	for len(s) > 0 {
		r, size := utf8.DecodeRuneInString(s)
		if unicode.IsSpace(r) {
			m.ws()
			s = s[size:]
			continue
		}
		i := strings.IndexFunc(s, unicode.IsSpace)
		if i < 0 {
			i = len(s)
		}
		m.sep()
		escapeInline(&m.b, s[:i])
		s = s[i:]
	}
}

func (m *mdInline) ws() {
	if m.b.Len() == 0 {
		m.lead = true
	}
	m.space = true
}

// sep writes the space owed before the next word.
func (m *mdInline) sep() {
	if m.space && m.b.Len() > 0 {
		if s := m.b.String(); s[len(s)-1] != '\n' && s[len(s)-1] != ' ' {
			m.b.WriteByte(' ')
		}
	}
	m.space = false
}

// raw writes markup.
func (m *mdInline) raw(s string) {
	m.sep()
	m.b.WriteString(s)
}

// brk writes a hard line break.
func (m *mdInline) brk() {
	if m.b.Len() > 0 {
		m.b.WriteByte('\n')
	}
	m.space = false
}

// inline writes the inline element n to dst.
func (w *mdWriter) inline(dst *mdInline, n *html.Node, depth int) {
	if !w.tick() {
		return
	}
	if depth > maxMDDepth {
		dst.text(" " + flatText(n) + " ")
		return
	}
	a := mdAtom(n)
	switch {
	case a == atom.Br:
		dst.brk()
	case a == atom.Img:
		w.image(dst, n)
	case a == atom.Picture:
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			if mdAtom(c) == atom.Img {
				w.image(dst, c)
				break
			}
		}
	case mdSkip(a):
	case a == atom.A:
		w.link(dst, n, depth)
	case a == atom.Em || a == atom.I:
		w.wrap(dst, n, depth, "*")
	case a == atom.Strong || a == atom.B:
		w.wrap(dst, n, depth, "**")
	case a == atom.Del || a == atom.S || a == atom.Strike:
		w.wrap(dst, n, depth, "~~")
	case a == atom.Code || a == atom.Kbd || a == atom.Samp || a == atom.Tt || a == atom.Pre:
		codeSpan(dst, n)
	case mdBlockTags[a]:
		if dst.breaks {
			dst.brk()
			if a == atom.Li {
				dst.raw(cellMarker(n))
			}
		} else {
			dst.ws()
		}
		w.inlineChildren(dst, n, depth+1)
		if dst.breaks {
			dst.brk()
		} else {
			dst.ws()
		}
	default:
		w.inlineChildren(dst, n, depth+1)
	}
}

// cellMarker is the marker of a list item written in a table cell: its
// number in an ordered list.
func cellMarker(li *html.Node) string {
	l := li.Parent
	if l == nil || mdAtom(l) != atom.Ol {
		return "- "
	}
	num := 1
	if s, err := strconv.Atoi(strings.TrimSpace(mdAttr(l, "start"))); err == nil && s >= 0 && s < 1e9 {
		num = s
	}
	for c := li.PrevSibling; c != nil; c = c.PrevSibling {
		if c.Type == html.ElementNode && mdAtom(c) == atom.Li {
			num++
		}
	}
	return strconv.Itoa(num) + ". "
}

func (w *mdWriter) inlineChildren(dst *mdInline, n *html.Node, depth int) {
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		switch c.Type {
		case html.TextNode:
			dst.text(c.Data)
		case html.ElementNode:
			w.inline(dst, c, depth)
		}
	}
}

// sub renders n's children on their own, for markup around them.
func (w *mdWriter) sub(dst *mdInline, n *html.Node, depth int) *mdInline {
	s := &mdInline{plain: dst.plain, breaks: dst.breaks}
	w.wraps++
	w.inlineChildren(s, n, depth+1)
	w.wraps--
	return s
}

// wrap writes n's content between delim (emphasis), keeping the white
// space at its edges outside.
func (w *mdWriter) wrap(dst *mdInline, n *html.Node, depth int, delim string) {
	if w.wraps >= maxMDWrap || w.open[delim] > 0 {
		w.inlineChildren(dst, n, depth+1)
		return
	}
	if w.open == nil {
		w.open = map[string]int{}
	}
	w.open[delim]++
	s := w.sub(dst, n, depth)
	w.open[delim]--
	t := strings.Trim(s.b.String(), "\n")
	if s.lead {
		dst.ws()
	}
	switch {
	case t == "":
	case dst.plain:
		dst.raw(t)
	default:
		dst.raw(delim + t + delim)
	}
	if s.space {
		dst.ws()
	}
}

// link writes [text](url "title"); a link to nowhere useful (no href,
// javascript:, no text) gives its text only.
func (w *mdWriter) link(dst *mdInline, n *html.Node, depth int) {
	if w.wraps >= maxMDWrap {
		w.inlineChildren(dst, n, depth+1)
		return
	}
	s := w.sub(dst, n, depth)
	t := oneLine(s.b.String())
	if s.lead {
		dst.ws()
	}
	dest := w.resolve(mdAttr(n, "href"), true)
	switch {
	case t == "":
	case dst.plain && !hasAlnum(t):
		// A heading's permalink ("¶", "#"): not content.
	case dest == "":
		dst.raw(t)
	default:
		dst.raw("[" + t + "](" + dest + mdTitle(n) + ")")
	}
	if s.space {
		dst.ws()
	}
}

// image writes ![alt](src "title").
func (w *mdWriter) image(dst *mdInline, n *html.Node) {
	src := mdAttr(n, "src")
	if strings.TrimSpace(src) == "" || strings.HasPrefix(strings.TrimSpace(src), "data:") {
		if d := mdAttr(n, "data-src"); d != "" {
			src = d
		}
	}
	dest := w.resolve(src, false)
	var alt mdInline
	alt.text(mdAttr(n, "alt"))
	a := strings.Trim(alt.b.String(), " ")
	if dest == "" && a == "" {
		return
	}
	dst.raw("![" + a + "](" + dest + mdTitle(n) + ")")
}

// resolve is ref resolved against the base, in a form a Markdown link
// destination holds; "" for what is not worth a link.
func (w *mdWriter) resolve(ref string, link bool) string {
	ref = strings.TrimSpace(ref)
	if ref == "" || strings.HasPrefix(ref, "data:") {
		return ""
	}
	u, err := url.Parse(ref)
	if err != nil {
		return ""
	}
	if w.base != nil {
		u = w.base.ResolveReference(u)
	}
	switch strings.ToLower(u.Scheme) {
	case "http", "https", "ftp", "":
	case "mailto", "tel":
		if !link {
			return ""
		}
	default:
		return ""
	}
	return destEscaper.Replace(u.String())
}

var destEscaper = strings.NewReplacer(" ", "%20", "(", "%28", ")", "%29", "<", "%3C", ">", "%3E", "\n", "", "\r", "")

// mdTitle is the ` "title"` part of a link or image, or "".
func mdTitle(n *html.Node) string {
	t := strings.Join(strings.Fields(mdAttr(n, "title")), " ")
	if t == "" {
		return ""
	}
	return ` "` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(t) + `"`
}

// codeSpan writes n's text as a code span.
func codeSpan(dst *mdInline, n *html.Node) {
	var b strings.Builder
	preText(&b, n)
	raw := b.String()
	t := strings.Join(strings.Fields(raw), " ")
	if t == "" {
		if raw != "" {
			dst.ws()
		}
		return
	}
	if r, _ := utf8.DecodeRuneInString(raw); unicode.IsSpace(r) {
		dst.ws()
	}
	ticks := "`"
	for strings.Contains(t, ticks) {
		ticks += "`"
	}
	if t[0] == '`' || t[len(t)-1] == '`' {
		t = " " + t + " "
	}
	dst.raw(ticks + t + ticks)
	if r, _ := utf8.DecodeLastRuneInString(raw); unicode.IsSpace(r) {
		dst.ws()
	}
}

func hasAlnum(s string) bool {
	return strings.IndexFunc(s, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }) >= 0
}

// oneLine is inline Markdown on one line.
func oneLine(s string) string {
	return strings.TrimSpace(strings.ReplaceAll(s, "\n", " "))
}

// escapeInline writes the word s with the characters that Markdown reads
// as inline markup escaped. An underscore inside a word is not markup.
func escapeInline(b *strings.Builder, s string) {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '\\', '*', '`', '[', ']', '~':
			b.WriteByte('\\')
		case '_':
			if i == 0 || i == len(s)-1 || !isWordByte(s[i-1]) || !isWordByte(s[i+1]) {
				b.WriteByte('\\')
			}
		case '<':
			if i+1 < len(s) && (isLetter(s[i+1]) || strings.IndexByte("/!?", s[i+1]) >= 0) {
				b.WriteByte('\\')
			}
		}
		b.WriteByte(c)
	}
}

func isLetter(c byte) bool { return c|0x20 >= 'a' && c|0x20 <= 'z' }

func isWordByte(c byte) bool { return isLetter(c) || c >= '0' && c <= '9' || c >= 0x80 }

// escapeLineStart escapes what would make the line a heading, a quote,
// a list item, a thematic break, a setext underline or a table row.
func escapeLineStart(l string) string {
	switch c := l[0]; {
	case c == '#' || c == '>' || c == '|':
		return `\` + l
	case c == '-' || c == '+' || c == '=':
		if len(l) == 1 || l[1] == ' ' || strings.Trim(l, string(c)+" ") == "" {
			return `\` + l
		}
	case c >= '0' && c <= '9':
		i := 0
		for i < len(l) && i < 10 && l[i] >= '0' && l[i] <= '9' {
			i++
		}
		if i < len(l) && (l[i] == '.' || l[i] == ')') && (i+1 == len(l) || l[i+1] == ' ') {
			return l[:i] + `\` + l[i:]
		}
	}
	return l
}

// mdAtom is n's atom (trees built by the extractors may carry only the
// tag name).
func mdAtom(n *html.Node) atom.Atom {
	if n.DataAtom != 0 || n.Type != html.ElementNode {
		return n.DataAtom
	}
	return atom.Lookup([]byte(n.Data))
}

func mdAttr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key && a.Namespace == "" {
			return a.Val
		}
	}
	return ""
}

// mdSkip are elements whose content is not text (images and pictures
// are written where they are met).
func mdSkip(a atom.Atom) bool {
	switch a {
	case atom.Script, atom.Style, atom.Noscript, atom.Template, atom.Head, atom.Svg,
		atom.Math, atom.Iframe, atom.Object, atom.Embed, atom.Select, atom.Option,
		atom.Button, atom.Input, atom.Textarea, atom.Canvas, atom.Audio, atom.Video,
		atom.Source, atom.Title, atom.Meta, atom.Link, atom.Colgroup, atom.Col:
		return true
	}
	return false
}

// mdBlockTags start a block of their own: the text extractor's block
// tags and table cells.
var mdBlockTags = func() map[atom.Atom]bool {
	m := map[atom.Atom]bool{atom.Td: true, atom.Th: true}
	for a := range blockTags {
		m[a] = true
	}
	return m
}()

// blockHolders finds the inline elements under root that hold a block
// with content (text or an image) at any depth: <span><span><div>…
// reads as blocks, a span around an empty div (a widget's placeholder)
// stays inline. One pass, post-order, with an explicit stack.
func blockHolders(root *html.Node) map[*html.Node]bool {
	type frame struct {
		n                  *html.Node
		next               *html.Node // the child to visit next
		content, holdBlock bool
	}
	var holders map[*html.Node]bool
	stack := []frame{{n: root, next: root.FirstChild}}
	for len(stack) > 0 {
		f := &stack[len(stack)-1]
		if c := f.next; c != nil {
			f.next = c.NextSibling
			switch c.Type {
			case html.TextNode:
				f.content = f.content || strings.TrimSpace(c.Data) != ""
			case html.ElementNode:
				switch a := mdAtom(c); {
				case a == atom.Img || a == atom.Hr:
					f.content = true
				case !mdSkip(a):
					stack = append(stack, frame{n: c, next: c.FirstChild})
				}
			}
			continue
		}
		done := *f
		stack = stack[:len(stack)-1]
		block := done.n.Type == html.ElementNode && mdBlockTags[mdAtom(done.n)]
		if !block && done.holdBlock && done.n.Type == html.ElementNode {
			if holders == nil {
				holders = map[*html.Node]bool{}
			}
			holders[done.n] = true
		}
		if len(stack) > 0 {
			p := &stack[len(stack)-1]
			p.content = p.content || done.content
			p.holdBlock = p.holdBlock || block && done.content || !block && done.holdBlock
		}
	}
	return holders
}
