package crawl

import (
	"bytes"
	"context"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/crawl/robotstag"
	"github.com/airlockhq/airlock/internal/extract"
)

// Discover reads what an ExtractNone crawl keeps of an HTML page (its
// links, headings, <title>, <meta> tags, language, canonical URL and
// robots directives) in one pass of the HTML tokenizer, without building
// the document tree that the full extractor needs: on a crawl for
// discovery the tree and its walks were most of the work per page. It
// follows the open elements as the parser closes them (implied ends of
// p, li, dd/dt, headings and links; end tags in scope; SVG and MathML),
// short of the parser's rarer repairs (the adoption agency's reopened
// formatting elements, foster parenting in tables).
//
// Links, headings, the meta map (with Meta["html:title"]), language,
// canonical URL and robots directives are those the extractor finds in
// the tree; a differential test holds the two to it over the extractor's
// test pages. What needs the tree or the text is left out: Kind, Author
// and Published are empty, JSON-LD is not read, and Title is the page's
// declared title (dc:title, og:title, twitter:title and the like, else
// <title>), its site's name cut off, not the headline the extractor
// picks out of the markup.
//
// Discover answers ok=false, leaving the page to the full extractor, for
// what it cannot read the same way: a body that is not labelled HTML,
// over the extractor's size cap, not UTF-8 (or ASCII under an
// ASCII-compatible label), nested deeper than the extractor reads it
// whole, or with so little text that it may be a bot wall, and any
// response with a bot-wall header.
//
// Discover looks at ctx every discoverCtxEvery tokens and returns ctx's
// error (code timeout for airlock.CodeOf) when it ends first, as the
// extractor does. It takes no turn of the extractor's pool and no room in
// its memory budget itself: callers take them (extract.Admit).
func Discover(ctx context.Context, resp *airlock.HTTPResponse) (Extracted, bool, error) {
	h := http.Header(resp.Header)
	mt, body, ok := discoverable(h, resp.Body)
	if !ok {
		return Extracted{}, false, nil
	}
	var base *url.URL
	if u, err := url.Parse(resp.URL); err == nil && u.IsAbs() {
		base = u
	}
	d := discoverer{base: base, ctx: ctx}
	if ok, err := d.scan(body); !ok || err != nil {
		return Extracted{}, false, err
	}
	p := &airlock.Page{
		URL:         resp.URL,
		Status:      resp.Status,
		ContentType: mt,
		FetchedAt:   time.Now().UTC(),
		Meta:        d.meta,
		Headings:    d.headings,
		Links:       d.links,
		Tables:      [][][]string{},
		Truncated:   []string{},
	}
	if d.hTruncated {
		p.Truncated = append(p.Truncated, "headings")
	}
	if d.truncated {
		p.Truncated = append(p.Truncated, "links")
	}
	d.fill(p)
	ex := Extracted{Page: p, Links: make([]string, len(p.Links))}
	for i, l := range p.Links {
		ex.Links[i] = l.URL
	}
	for _, name := range []string{"robots", robotstag.Agent} {
		ni, nf := robotstag.Directives(p.Meta[name])
		ex.NoIndex, ex.NoFollow = ex.NoIndex || ni, ex.NoFollow || nf
	}
	return ex, true, nil
}

// The extractor's bounds that Discover keeps to (internal/extract).
const (
	discoverMaxInput   = 10 << 20 // extract.DefaultMaxInputBytes
	discoverMaxMeta    = 256      // meta entries
	discoverMaxKey     = 128      // bytes of a meta key
	discoverMaxValue   = 4096     // bytes of a meta value
	discoverMaxText    = 300      // bytes of a link's text
	discoverMaxHeading = 500      // bytes of a heading's text
	discoverMaxLinkEl  = 20 * airlock.MaxPageLinks
	discoverMaxDepth   = 256 // the extractor flattens documents nested deeper
	// discoverCtxEvery is how many tokens Discover reads between looks at
	// its context.
	discoverCtxEvery = 4096
	// discoverMinText is the least visible text (ASCII bytes other than
	// spaces) of a page Discover reads: a bot wall has at most 1,500 (the
	// extractor's wallMaxText), and shorter pages go to the extractor,
	// which tells walls from content.
	discoverMinText = 1500
)

// discoverable returns the media type and the body to tokenize, or
// ok=false when the page must go to the extractor.
func discoverable(h http.Header, body []byte) (mt string, out []byte, ok bool) {
	if len(body) > discoverMaxInput || h.Get("Cf-Mitigated") != "" || h.Get("X-Amzn-Waf-Action") != "" {
		return "", nil, false
	}
	mt, params, err := mime.ParseMediaType(h.Get("Content-Type"))
	if err != nil || mt != "text/html" && mt != "application/xhtml+xml" {
		return "", nil, false
	}
	body = bytes.TrimPrefix(body, []byte("\xef\xbb\xbf"))
	if bytes.HasPrefix(body, []byte("\xfe\xff")) || bytes.HasPrefix(body, []byte("\xff\xfe")) {
		return "", nil, false
	}
	// Valid UTF-8 that uses it is UTF-8 to the extractor whatever the
	// labels say; ASCII reads the same in every ASCII-compatible charset
	// (ESC opens ISO-2022 escapes, which are not).
	if !utf8.Valid(body) || bytes.IndexByte(body, 0x1b) >= 0 && !hasHighBit(body) {
		return "", nil, false
	}
	switch cs := strings.ToLower(strings.TrimSpace(params["charset"])); {
	case cs == "", cs == "utf-8", cs == "utf8", cs == "us-ascii", cs == "ascii",
		cs == "iso-8859-1", cs == "latin1", cs == "windows-1252", cs == "cp1252":
	default:
		if !hasHighBit(body) { // an unusual label on an ASCII body: the extractor decides
			return "", nil, false
		}
	}
	return mt, body, true
}

func hasHighBit(b []byte) bool {
	for _, c := range b {
		if c >= utf8.RuneSelf {
			return true
		}
	}
	return false
}

// discoverer is the state of one Discover pass.
type discoverer struct {
	ctx       context.Context // nil: never looked at
	base      *url.URL        // the response URL, then the document's <base href>
	baseDone  bool            // past the head: a later <base> does not count
	meta      map[string]string
	title     string // the first non-empty <title> outside SVG and MathML
	lang      [2]string
	canonical string
	links     []airlock.Link
	index     map[string]int
	examined  int
	truncated bool
	full      bool
	host      string // the base's, once known (hostSet)
	hostSet   bool
	text      int      // visible ASCII bytes other than spaces
	open      []openEl // the open elements, as far as a tokenizer can tell
	foreign   int      // open <svg> and <math> elements
	integ     int      // open HTML integration points in them (foreignObject...)
	template  int      // open <template> elements
	skipOpen  int      // open skipTag elements
	hideLinks int      // open script and style elements (SVG's hold elements)
	hideText  int      // those and open title and noscript elements
	// the h1-h3 being read: its depth, level and text; the headings read
	h          bool
	hDepth     int
	hLevel     int
	hSkip      int
	hText      strings.Builder
	headings   []airlock.Heading
	hTruncated bool
	// the <a> being read: its depth, its index in links, its text so
	// far, and the fallbacks for an empty text
	a        bool
	aDepth   int // len(open) with the <a> open
	aIdx     int
	aText    []byte
	aTextMax bool
	aAlt     string
	aClone   string // the text the adoption agency moved to a copy of the link
	aTitle   string
	aSkip    int // len(open) with the script, style, template or noscript in the <a> open
	altSkip  int // len(open) with the element whose children the alt walk skips open
}

// scan reads body; false sends the page to the extractor. The error is
// d.ctx's when it ends before the body does.
func (d *discoverer) scan(body []byte) (bool, error) {
	d.meta = map[string]string{}
	d.links = []airlock.Link{}
	d.headings = []airlock.Heading{}
	d.index = map[string]int{}
	z := html.NewTokenizer(bytes.NewReader(body))
	var raw atom.Atom // the raw-text element whose text comes next
	var attrs []html.Attribute
	var nameBuf [32]byte
	for n := 1; ; n++ {
		if n%discoverCtxEvery == 0 && d.ctx != nil {
			if err := d.ctx.Err(); err != nil {
				return false, err
			}
		}
		tt := z.Next()
		if tt != html.TextToken {
			raw = 0 // an empty raw-text element has no text token
		}
		switch tt {
		case html.ErrorToken:
			d.popTo(0)
			d.endA()
			d.finishCanonical()
			return d.text > discoverMinText, nil
		case html.TextToken:
			if raw != 0 {
				t := z.Text()
				if raw == atom.Title && d.foreign == 0 && d.title == "" {
					d.title = collapse(string(t))
				}
				// The extractor's texts hold the raw text of the elements
				// other than scripts, styles and noscripts (and, for the
				// bot-wall count, titles).
				if raw != atom.Script && raw != atom.Style && raw != atom.Noscript {
					if raw != atom.Title && d.template == 0 && d.hideText == 0 {
						d.countText(t)
					}
					if d.a && d.aSkip == 0 {
						d.addAText(t)
					}
					if d.h && d.hSkip == 0 {
						d.addHText(t)
					}
				}
				raw = 0
				continue
			}
			t := z.Text()
			if bytes.IndexByte(t, 0) >= 0 {
				t = bytes.ReplaceAll(t, []byte{0}, nil) // the parser drops NULs in body text
			}
			if d.template == 0 && d.hideText == 0 {
				d.countText(t) // the text the extractor's bot-wall check counts
			}
			if !d.baseDone && len(bytes.TrimSpace(t)) > 0 {
				d.bodyBegun() // text begins the body
			}
			if d.a && d.aSkip == 0 {
				d.addAText(t)
			}
			if d.h && d.hSkip == 0 {
				d.addHText(t)
			}
		case html.StartTagToken, html.SelfClosingTagToken:
			name := tagName(z, &nameBuf)
			a := atom.Lookup(name)
			attrs = attrs[:0]
			if d.readsAttrs(a) {
				for more := true; more; {
					var k, v []byte
					k, v, more = z.TagAttr()
					if k != nil && attrWanted(k) {
						attrs = append(attrs, html.Attribute{Key: string(k), Val: string(v)})
					}
				}
			}
			// HTML elements ignore a self-closing slash (<a/> opens a
			// link); SVG and MathML elements honour it.
			void := voidElement(a) || tt == html.SelfClosingTagToken && (a == atom.Svg || a == atom.Math || d.foreign > 0 && d.integ == 0)
			switch a {
			case atom.Script, atom.Style, atom.Title, atom.Textarea, atom.Noscript, atom.Iframe,
				atom.Noembed, atom.Noframes, atom.Xmp, atom.Plaintext:
				if d.foreign > 0 && d.integ == 0 {
					// In SVG and MathML these are ordinary elements, as
					// the parser reads them.
					z.NextIsNotRawText()
				} else {
					raw = a
				}
			}
			if !d.start(a, name, attrs, void) {
				return false, nil
			}
			z.AllowCDATA(d.foreign > 0)
		case html.EndTagToken:
			name := tagName(z, &nameBuf)
			d.end(atom.Lookup(name), name)
			z.AllowCDATA(d.foreign > 0)
		}
	}
}

// tagName is the lower-cased name of the current tag token, read from
// its raw bytes as the tokenizer reads it: Tokenizer.TagName copies the
// name for every tag. Names that are long or hold a NUL take that path.
func tagName(z *html.Tokenizer, buf *[32]byte) []byte {
	raw := z.Raw()
	i := 1
	if len(raw) > 1 && raw[1] == '/' {
		i = 2
	}
	n := 0
	for ; i < len(raw); i++ {
		c := raw[i]
		switch c {
		case ' ', '\n', '\r', '\t', '\f', '/', '>':
			return buf[:n]
		case 0:
			name, _ := z.TagName()
			return name
		}
		if n == len(buf) {
			name, _ := z.TagName()
			return name
		}
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		buf[n] = c
		n++
	}
	return buf[:n]
}

// attrWanted reports the attributes Discover reads.
func attrWanted(k []byte) bool {
	switch string(k) {
	case "href", "rel", "title", "aria-label", "alt", "content", "value", "property", "name", "itemprop",
		"http-equiv", "lang", "xml:lang", "color", "face", "size":
		return true
	}
	return false
}

// readsAttrs reports the elements whose attributes Discover reads.
func (d *discoverer) readsAttrs(a atom.Atom) bool {
	switch a {
	case atom.Html, atom.Base, atom.Meta, atom.Link, atom.A, atom.Area:
		return true
	case atom.Img:
		return d.a
	case atom.Font:
		return d.foreign > 0
	}
	return false
}

// voidElement reports elements that never have an end tag.
func voidElement(a atom.Atom) bool {
	switch a {
	case atom.Area, atom.Base, atom.Br, atom.Col, atom.Embed, atom.Hr, atom.Img, atom.Input,
		atom.Link, atom.Meta, atom.Source, atom.Track, atom.Wbr, atom.Param, atom.Keygen:
		return true
	}
	return false
}

// countText counts the visible text the extractor's bot-wall check would
// count (the raw-text elements never reach here).
func (d *discoverer) countText(t []byte) {
	if d.text > discoverMinText {
		return
	}
	for _, c := range t {
		if c < utf8.RuneSelf && c != ' ' && c != '\t' && c != '\n' && c != '\r' && c != '\f' && c != '\v' {
			d.text++
		}
	}
}

func attrVal(attrs []html.Attribute, key string) (string, bool) {
	for _, a := range attrs {
		if a.Key == key {
			return a.Val, true
		}
	}
	return "", false
}

// openEl is an element the tokenizer has seen open, with what its start
// changed.
type openEl struct {
	a       atom.Atom
	name    string // for an unknown tag (a == 0)
	foreign bool   // an <svg> or <math>
	skip    bool   // one of skipTag's
	mark    int    // len(aText) when it opened in the link being read
	ns      bool   // an SVG or MathML element
	integ   bool   // an HTML integration point in one
}

// push opens an element; false when the document is nested deeper than
// the extractor reads it whole.
func (d *discoverer) push(a atom.Atom, name []byte) bool {
	el := openEl{a: a, mark: len(d.aText), ns: a == atom.Svg || a == atom.Math || d.foreign > 0 && d.integ == 0}
	if a == 0 {
		el.name = string(name)
	}
	switch {
	case a == atom.Svg || a == atom.Math:
		el.foreign = true
		d.foreign++
	case d.foreign > 0 && d.integ == 0 && integration(a):
		el.integ = true
		d.integ++
	}
	switch a {
	case atom.Template:
		d.template++
	case atom.Script, atom.Style:
		d.hideLinks++
		d.hideText++
	case atom.Title, atom.Noscript:
		d.hideText++
	}
	if skipTag(a) {
		el.skip = true
		d.skipOpen++
	}
	d.open = append(d.open, el)
	return len(d.open) <= discoverMaxDepth
}

// popTo closes the elements from index i up, as the parser does when an
// end tag (or a start tag that implies one) closes them.
func (d *discoverer) popTo(i int) {
	for len(d.open) > i {
		el := d.open[len(d.open)-1]
		d.open = d.open[:len(d.open)-1]
		n := len(d.open)
		if el.foreign {
			d.foreign--
		}
		if el.integ {
			d.integ--
		}
		switch el.a {
		case atom.Template:
			d.template--
		case atom.Script, atom.Style:
			d.hideLinks--
			d.hideText--
		case atom.Title, atom.Noscript:
			d.hideText--
		}
		if el.skip {
			d.skipOpen--
		}
		if d.hSkip > n {
			d.hSkip = 0
		}
		if d.h {
			if n < d.hDepth {
				d.endH()
			} else if d.hSkip == 0 && textBlock(el.a) {
				d.addHText([]byte(" "))
			}
		}
		if d.altSkip > n {
			d.altSkip = 0
		}
		if d.aSkip > n {
			d.aSkip = 0
		}
		if d.a {
			if n < d.aDepth {
				d.endA()
			} else if d.aSkip == 0 && textBlock(el.a) {
				d.addAText([]byte(" "))
			}
		}
	}
}

// lastOpen is the index of the innermost open element a (named name when
// a is 0) below any of stops, or -1.
func (d *discoverer) lastOpen(a atom.Atom, name []byte, stops ...atom.Atom) int {
	for i := len(d.open) - 1; i >= 0; i-- {
		el := d.open[i]
		if el.a == a && (a != 0 || el.name == string(name)) {
			return i
		}
		for _, s := range stops {
			if el.a == s {
				return -1
			}
		}
	}
	return -1
}

// closedBy is the index of the open element an end tag closes, or -1
// when the parser ignores the tag: the end tag of a special element
// closes it in scope (not across a table cell, say); another end tag
// closes the innermost element of its name unless a special element is
// open above it.
func (d *discoverer) closedBy(a atom.Atom, name []byte) int {
	switch {
	case formatting(a):
		return d.lastOpen(a, name) // the adoption agency's
	case a == atom.Table || a == atom.Html || a == atom.Body || a == atom.Template:
		return d.lastOpen(a, name, atom.Html, atom.Template)
	case a == atom.Td || a == atom.Th || a == atom.Tr || a == atom.Tbody || a == atom.Thead || a == atom.Tfoot || a == atom.Caption:
		return d.lastOpen(a, name, atom.Table, atom.Html, atom.Template)
	case special(a):
		return d.lastOpen(a, name, scopeStops...)
	}
	for i := len(d.open) - 1; i >= 0; i-- {
		el := d.open[i]
		if el.a == a && (a != 0 || el.name == string(name)) {
			return i
		}
		if special(el.a) && !el.ns || el.integ {
			return -1
		}
	}
	return -1
}

// adopt does to the text of the link being read what the parser's
// adoption agency does when the link's element (open at index i) ends
// with a special element (a block) open in it: the block, and what
// followed, move out of the link.
func (d *discoverer) adopt(i int) {
	if !d.a || i != d.aDepth-1 {
		return
	}
	for _, el := range d.open[i+1:] {
		if special(el.a) {
			// The block's content goes to a copy of the link inside the
			// block: the same URL, whose text counts if the link has none.
			m := min(el.mark, len(d.aText))
			d.aClone = string(d.aText[m:])
			d.aText = d.aText[:m]
			return
		}
	}
}

// formatting reports the parser's formatting elements, whose end tags
// the adoption agency handles.
func formatting(a atom.Atom) bool {
	switch a {
	case atom.A, atom.B, atom.Big, atom.Code, atom.Em, atom.Font, atom.I, atom.Nobr, atom.S, atom.Small,
		atom.Strike, atom.Strong, atom.Tt, atom.U:
		return true
	}
	return false
}

// special reports the HTML elements of the parser's special category.
func special(a atom.Atom) bool {
	switch a {
	case atom.Address, atom.Applet, atom.Area, atom.Article, atom.Aside, atom.Base, atom.Basefont, atom.Bgsound,
		atom.Blockquote, atom.Body, atom.Br, atom.Button, atom.Caption, atom.Center, atom.Col, atom.Colgroup,
		atom.Dd, atom.Details, atom.Dir, atom.Div, atom.Dl, atom.Dt, atom.Embed, atom.Fieldset, atom.Figcaption,
		atom.Figure, atom.Footer, atom.Form, atom.Frame, atom.Frameset, atom.H1, atom.H2, atom.H3, atom.H4,
		atom.H5, atom.H6, atom.Head, atom.Header, atom.Hgroup, atom.Hr, atom.Html, atom.Iframe, atom.Img,
		atom.Input, atom.Keygen, atom.Li, atom.Link, atom.Listing, atom.Main, atom.Marquee, atom.Menu, atom.Meta,
		atom.Nav, atom.Noembed, atom.Noframes, atom.Noscript, atom.Object, atom.Ol, atom.P, atom.Param,
		atom.Plaintext, atom.Pre, atom.Script, atom.Section, atom.Select, atom.Source, atom.Style, atom.Summary,
		atom.Table, atom.Tbody, atom.Td, atom.Template, atom.Textarea, atom.Tfoot, atom.Th, atom.Thead,
		atom.Title, atom.Tr, atom.Track, atom.Ul, atom.Wbr, atom.Xmp:
		return true
	}
	return false
}

// scopeStops end the search for an open <p>, <li>, <dd> or <dt> that a
// start tag closes.
var scopeStops = []atom.Atom{atom.Button, atom.Table, atom.Td, atom.Th, atom.Caption, atom.Html, atom.Template, atom.Object, atom.Marquee, atom.Applet}

// start handles a start tag; false sends the page to the extractor.
func (d *discoverer) start(a atom.Atom, name []byte, attrs []html.Attribute, void bool) bool {
	// What the parser closes before it opens this element.
	switch {
	case d.foreign > 0 && d.integ == 0 && breakout(a, attrs):
		for i, el := range d.open {
			if el.foreign {
				d.popTo(i) // the parser leaves SVG and MathML for HTML here
				break
			}
		}
	case d.foreign > 0:
	case a == atom.A:
		if i := d.lastOpen(atom.A, nil); i >= 0 {
			d.adopt(i)
			d.popTo(i)
		}
	case a == atom.Li:
		if i := d.lastOpen(atom.Li, nil, append(scopeStops, atom.Ul, atom.Ol)...); i >= 0 {
			d.popTo(i)
		}
	case a == atom.Dd || a == atom.Dt:
		i := d.lastOpen(atom.Dd, nil, append(scopeStops, atom.Dl)...)
		if j := d.lastOpen(atom.Dt, nil, append(scopeStops, atom.Dl)...); j > i {
			i = j
		}
		if i >= 0 {
			d.popTo(i)
		}
	}
	if d.foreign == 0 && closesP(a) {
		if i := d.lastOpen(atom.P, nil, scopeStops...); i >= 0 {
			d.popTo(i)
		}
	}
	if d.foreign == 0 && headingLevel(a) > 0 && len(d.open) > 0 && headingLevel(d.open[len(d.open)-1].a) > 0 {
		d.popTo(len(d.open) - 1) // a heading does not nest in a heading
	}
	switch a {
	case atom.Html:
		for i, k := range []string{"lang", "xml:lang"} {
			if v, ok := attrVal(attrs, k); ok && d.lang[i] == "" {
				d.lang[i] = strings.TrimSpace(v)
			}
		}
	case atom.Head, atom.Title, atom.Meta, atom.Link, atom.Script, atom.Style, atom.Noscript:
	case atom.Base:
		// The first <base> with an href in the head is the base, if it
		// resolves to an absolute URL.
		if v, _ := attrVal(attrs, "href"); !d.baseDone && v != "" {
			d.baseDone = true
			d.setBase(v)
		}
	default:
		if a != atom.Template {
			d.bodyBegun()
		}
	}
	if a == atom.Meta {
		d.addMeta(attrs)
	}
	if a == atom.Link && d.canonical == "" {
		if rel, ok := attrVal(attrs, "rel"); ok && hasToken(rel, "canonical") {
			if href, ok := attrVal(attrs, "href"); ok {
				d.canonical = "\x00" + href // resolved once the base is known
			}
		}
	}
	if d.h && d.hSkip == 0 && (a == atom.Br || textBlock(a)) {
		d.addHText([]byte(" "))
	}
	if d.a {
		if d.aSkip == 0 {
			switch {
			case a == atom.Br || textBlock(a):
				d.addAText([]byte(" "))
			}
		}
		// The extractor's fallback text is the alt of the last <img> its
		// walk visits, which skips the children of each element visited
		// once an alt is found.
		if d.altSkip == 0 && a == atom.Img {
			d.aAlt, _ = attrVal(attrs, "alt")
		}
	}
	// The extractor's headings are the h1-h3 outside the elements whose
	// text is never content.
	heading := !void && !d.h && d.skipOpen == 0 && headingLevel(a) > 0 && headingLevel(a) <= 3
	if !void {
		if !d.push(a, name) {
			return false
		}
		if d.h && d.hSkip == 0 && (a == atom.Script || a == atom.Style || a == atom.Template || a == atom.Noscript) {
			d.hSkip = len(d.open)
		}
		if heading {
			d.h, d.hDepth, d.hLevel, d.hSkip = true, len(d.open), headingLevel(a), 0
			d.hText.Reset()
		}
		if d.a {
			if d.aSkip == 0 && (a == atom.Script || a == atom.Style || a == atom.Template || a == atom.Noscript) {
				d.aSkip = len(d.open)
			}
			if d.altSkip == 0 && d.aAlt != "" {
				d.altSkip = len(d.open)
			}
		}
	}
	if (a == atom.A || a == atom.Area) && !d.a && d.template == 0 && d.hideLinks == 0 {
		// Inside a link a link is not visited; in a template, a script or
		// a style (SVG's are elements), skipped.
		d.startA(attrs, void || a == atom.Area)
	}
	return true
}

func (d *discoverer) end(a atom.Atom, name []byte) {
	if a == atom.Br && d.a && d.aSkip == 0 {
		d.addAText([]byte(" ")) // </br> is a <br>
	}
	if a == atom.Br && d.h && d.hSkip == 0 {
		d.addHText([]byte(" "))
	}
	if headingLevel(a) > 0 && d.foreign == 0 {
		// Any heading's end tag closes the open heading.
		for i := len(d.open) - 1; i >= 0; i-- {
			if headingLevel(d.open[i].a) > 0 {
				d.popTo(i)
				return
			}
		}
		return
	}
	if i := d.closedBy(a, name); i >= 0 {
		if a == atom.A {
			d.adopt(i)
		}
		d.popTo(i)
	}
	if a == atom.Head {
		d.bodyBegun()
	}
}

// bodyBegun notes that the head is over: a later <base> does not count,
// and the parser closes an open <head>.
func (d *discoverer) bodyBegun() {
	d.baseDone = true
	if i := d.lastOpen(atom.Head, nil); i >= 0 {
		d.popTo(i)
	}
}

// headingLevel is 1 to 6 for h1 to h6, else 0.
func headingLevel(a atom.Atom) int {
	switch a {
	case atom.H1:
		return 1
	case atom.H2:
		return 2
	case atom.H3:
		return 3
	case atom.H4:
		return 4
	case atom.H5:
		return 5
	case atom.H6:
		return 6
	}
	return 0
}

// skipTag reports the elements whose text is never content to the
// extractor (its skipTags): it looks for no headings in them.
func skipTag(a atom.Atom) bool {
	switch a {
	case atom.Script, atom.Style, atom.Noscript, atom.Template, atom.Head, atom.Svg, atom.Math, atom.Iframe,
		atom.Object, atom.Embed, atom.Select, atom.Option, atom.Button, atom.Input, atom.Textarea, atom.Canvas,
		atom.Audio, atom.Video, atom.Picture, atom.Source, atom.Img, atom.Title, atom.Meta, atom.Link:
		return true
	}
	return false
}

func (d *discoverer) addHText(t []byte) {
	if d.hText.Len() <= 1<<16 {
		d.hText.Write(t)
	}
}

// endH ends the heading being read: kept when it has text, at most
// airlock.MaxHeadings.
func (d *discoverer) endH() {
	d.h = false
	t := clip(collapse(d.hText.String()), discoverMaxHeading)
	if t == "" {
		return
	}
	if len(d.headings) == airlock.MaxHeadings {
		d.hTruncated = true
		return
	}
	d.headings = append(d.headings, airlock.Heading{Level: d.hLevel, Text: t})
}

// closesP reports the start tags that close an open <p>.
func closesP(a atom.Atom) bool {
	switch a {
	case atom.Address, atom.Article, atom.Aside, atom.Blockquote, atom.Center, atom.Details, atom.Dialog,
		atom.Dir, atom.Div, atom.Dl, atom.Fieldset, atom.Figcaption, atom.Figure, atom.Footer, atom.Header,
		atom.Hgroup, atom.Main, atom.Menu, atom.Nav, atom.Ol, atom.P, atom.Section, atom.Summary, atom.Ul,
		atom.H1, atom.H2, atom.H3, atom.H4, atom.H5, atom.H6, atom.Pre, atom.Listing, atom.Form, atom.Li,
		atom.Dd, atom.Dt, atom.Plaintext, atom.Table, atom.Hr, atom.Xmp:
		return true
	}
	return false
}

// breakout reports the HTML start tags that end SVG or MathML content.
func breakout(a atom.Atom, attrs []html.Attribute) bool {
	switch a {
	case atom.B, atom.Big, atom.Blockquote, atom.Body, atom.Br, atom.Center, atom.Code, atom.Dd, atom.Div,
		atom.Dl, atom.Dt, atom.Em, atom.Embed, atom.H1, atom.H2, atom.H3, atom.H4, atom.H5, atom.H6,
		atom.Head, atom.Hr, atom.I, atom.Img, atom.Li, atom.Listing, atom.Menu, atom.Meta, atom.Nobr,
		atom.Ol, atom.P, atom.Pre, atom.Ruby, atom.S, atom.Small, atom.Span, atom.Strong, atom.Strike,
		atom.Sub, atom.Sup, atom.Table, atom.Tt, atom.U, atom.Ul, atom.Var:
		return true
	case atom.Font:
		for _, at := range attrs {
			if at.Key == "color" || at.Key == "face" || at.Key == "size" {
				return true
			}
		}
	}
	return false
}

// integration reports the SVG and MathML elements whose content is HTML.
func integration(a atom.Atom) bool {
	switch a {
	case atom.Foreignobject, atom.Desc, atom.Title, atom.Mi, atom.Mo, atom.Mn, atom.Ms, atom.Mtext, atom.AnnotationXml:
		return true
	}
	return false
}

// textBlock reports the elements whose text the extractor sets apart
// with spaces (its blockTags).
func textBlock(a atom.Atom) bool {
	switch a {
	case atom.Address, atom.Article, atom.Aside, atom.Blockquote, atom.Body, atom.Center, atom.Dd,
		atom.Details, atom.Dialog, atom.Dir, atom.Div, atom.Dl, atom.Dt, atom.Fieldset, atom.Figcaption,
		atom.Figure, atom.Footer, atom.Form, atom.H1, atom.H2, atom.H3, atom.H4, atom.H5, atom.H6,
		atom.Header, atom.Hgroup, atom.Hr, atom.Html, atom.Legend, atom.Li, atom.Main, atom.Menu,
		atom.Nav, atom.Ol, atom.P, atom.Pre, atom.Section, atom.Summary, atom.Table, atom.Tbody,
		atom.Thead, atom.Tfoot, atom.Tr, atom.Ul, atom.Caption, atom.Frameset, atom.Noframes:
		return true
	}
	return false
}

// hasToken reports tok in a space-separated list, matched as the
// extractor's selector matches it (rel~="canonical": case-sensitive).
func hasToken(list, tok string) bool {
	for _, f := range strings.Fields(list) {
		if f == tok {
			return true
		}
	}
	return false
}

// addMeta adds a <meta> tag to the meta map as the extractor does:
// content (or value), collapsed and clipped, under each lower-cased key of
// its property, name, itemprop and http-equiv; the first of a key wins,
// except that authors are joined. The map holds at most discoverMaxMeta
// keys of at most discoverMaxKey bytes: one tag may name any number.
func (d *discoverer) addMeta(attrs []html.Attribute) {
	if len(d.meta) >= discoverMaxMeta {
		return
	}
	content, ok := attrVal(attrs, "content")
	if !ok {
		content, ok = attrVal(attrs, "value")
	}
	if !ok {
		return
	}
	content = clip(collapse(content), discoverMaxValue)
	if content == "" {
		return
	}
	for _, attr := range []string{"property", "name", "itemprop", "http-equiv"} {
		keys, _ := attrVal(attrs, attr)
		for _, k := range strings.Fields(strings.ToLower(keys)) {
			if len(k) > discoverMaxKey {
				continue // no key is this long: a page's filler
			}
			if old, seen := d.meta[k]; !seen {
				if len(d.meta) >= discoverMaxMeta {
					continue // keys seen still join their authors
				}
				d.meta[k] = content
			} else if authorKey(k) && len(old)+len(content) < discoverMaxValue && !strings.Contains("; "+old+"; ", "; "+content+"; ") {
				d.meta[k] = old + "; " + content
			}
		}
	}
}

func authorKey(k string) bool {
	switch k {
	case "author", "dc.creator", "dc:creator", "dcterms.creator", "citation_author":
		return true
	}
	return false
}

// setBase makes <base href> the base of the document's links.
func (d *discoverer) setBase(href string) {
	href = strings.TrimSpace(href)
	if href == "" {
		return
	}
	u, err := url.Parse(href)
	if err != nil {
		return
	}
	if d.base != nil {
		u = d.base.ResolveReference(u)
	}
	if u.IsAbs() {
		d.base = u
	}
}

// startA begins a link element: as the extractor does, an <a> or <area>
// whose href is no http(s) link is no link (the extractor looks inside
// it for links), and a link seen already only lends its text.
func (d *discoverer) startA(attrs []html.Attribute, void bool) {
	if d.full {
		return
	}
	if d.examined++; d.examined > discoverMaxLinkEl {
		d.truncated, d.full = true, true
		return
	}
	href, ok := attrVal(attrs, "href")
	if !ok {
		return
	}
	if !d.hostSet { // the base is final once the body has begun
		d.hostSet = true
		if d.base != nil {
			d.host = strings.ToLower(d.base.Hostname())
		}
	}
	u := extract.ResolveLink(d.base, href)
	if u == nil {
		return
	}
	s := u.String()
	i, seen := d.index[s]
	if !seen {
		if len(d.links) == airlock.MaxPageLinks {
			d.truncated, d.full = true, true
			return
		}
		i = len(d.links)
		d.index[s] = i
		rel, _ := attrVal(attrs, "rel")
		d.links = append(d.links, airlock.Link{
			URL:      s,
			Rel:      strings.Join(strings.Fields(strings.ToLower(rel)), " "),
			Internal: d.host != "" && strings.EqualFold(u.Hostname(), d.host),
		})
	}
	title, _ := attrVal(attrs, "title")
	aria, _ := attrVal(attrs, "aria-label")
	d.aIdx = i
	d.aTitle = firstNonEmpty(title, aria)
	d.aText = d.aText[:0]
	d.aTextMax, d.aAlt, d.aClone, d.aSkip, d.altSkip = false, "", "", 0, 0
	if void {
		d.finishA()
		return
	}
	d.a, d.aDepth = true, len(d.open)
}

func (d *discoverer) addAText(t []byte) {
	if d.aTextMax {
		return
	}
	d.aText = append(d.aText, t...)
	if len(d.aText) > 1<<16 {
		d.aTextMax = true
	}
}

func (d *discoverer) endA() {
	if !d.a {
		return
	}
	d.a = false
	d.finishA()
}

// finishA sets the text of the link being read, unless it has one.
func (d *discoverer) finishA() {
	if d.links[d.aIdx].Text != "" {
		return
	}
	text := clip(collapse(string(d.aText)), discoverMaxText)
	if text == "" {
		text = clip(firstNonEmpty(d.aTitle, d.aAlt, d.aClone), discoverMaxText)
	}
	d.links[d.aIdx].Text = text
}

// finishCanonical resolves the canonical URL against the final base.
func (d *discoverer) finishCanonical() {
	if strings.HasPrefix(d.canonical, "\x00") {
		d.canonical = extract.AbsURL(d.base, d.canonical[1:])
	}
}

// fill sets the page's metadata fields from what the pass collected, with
// the extractor's precedence where it reads the same sources.
func (d *discoverer) fill(p *airlock.Page) {
	m := func(keys ...string) string {
		for _, k := range keys {
			if v := collapse(d.meta[k]); v != "" {
				return v
			}
		}
		return ""
	}
	if d.title != "" && len(d.meta) < discoverMaxMeta {
		d.meta["html:title"] = clip(d.title, discoverMaxValue)
	}
	p.Description = m("dc:description", "dcterm:description", "dc.description",
		"dcterms.description", "og:description", "description", "twitter:description")
	p.Lang = firstNonEmpty(d.lang[0], d.lang[1],
		m("content-language", "dc.language", "dc:language", "language"),
		strings.ReplaceAll(m("og:locale"), "_", "-"))
	p.Canonical = d.canonical
	if p.Canonical == "" && d.meta["og:url"] != "" {
		p.Canonical = extract.AbsURL(d.base, d.meta["og:url"])
	}
	p.SiteName = firstNonEmpty(m("og:site_name", "application-name"), strings.TrimPrefix(m("twitter:site"), "@"))
	p.Title = extract.TrimSiteName(firstNonEmpty(m("dc:title", "dc.title", "dcterm:title", "dcterms:title", "dcterms.title", "og:title",
		"weibo:article:title", "weibo:webpage:title", "title", "twitter:title", "parsely-title"), d.title), p.SiteName)
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v = collapse(v); v != "" {
			return v
		}
	}
	return ""
}

// collapse trims s and collapses its runs of white space (Unicode's).
func collapse(s string) string {
	if s == "" {
		return s
	}
	return strings.Join(strings.Fields(s), " ")
}

// clip cuts s to at most n bytes, at a rune boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
