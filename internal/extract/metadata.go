package extract

import (
	"encoding/json"
	"net/url"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/PuerkitoBio/goquery"
	"github.com/andybalholm/cascadia"
	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"

	"github.com/airlockhq/airlock"
)

// Bounds on what metadata keeps from hostile pages.
const (
	maxMetaEntries = 256  // keys in Page.Meta
	maxMetaValue   = 4096 // bytes of one meta value
	maxMetaKey     = 128  // bytes of one meta key: longer ones are not kept
	maxLinkText    = 300  // bytes of one link's text
	// maxLinkElements is how many <a> and <area> elements links examines;
	// past it, or past airlock.MaxPageLinks distinct links, it stops.
	maxLinkElements = 20 * airlock.MaxPageLinks
	maxHeadingText  = 500 // bytes of one heading's text
	maxJSONLDBytes  = 1 << 20
	maxJSONLDBlocks = 32
	maxCellText     = 2000 // bytes of one table cell
)

// metadata fills the metadata fields of p from the parsed document: title,
// description, lang, canonical, site name, author, published, kind, meta,
// headings and links.
//
// Sources, first found wins:
//   - title: the article's headline when the page marks one (JSON-LD
//     headline of an article, Dublin Core, og:title, twitter:title, an
//     itemprop=headline element, an h1 the <title> begins with), else
//     the <title> without its site name, else the first h1;
//   - author: JSON-LD author names, dc:creator, author, parsely-author,
//     article:author (when not a URL), then bylines in the markup;
//   - site name: the JSON-LD publisher, og:site_name, application-name,
//     twitter:site;
//   - published: JSON-LD datePublished, the publishing-date meta tags,
//     <time> elements marked as the publishing date, then a date line
//     near the headline, in ISO 8601 (see normalizeDate);
//   - lang: <html lang>, Content-Language, dc:language, JSON-LD
//     inLanguage, og:locale.
func metadata(doc *html.Node, base *url.URL, p *airlock.Page) {
	metadataWith(doc, base, p, scanAttrs(doc))
}

// docAttrs says which attributes the metadata selectors look for occur in
// a document at all. A selector on an attribute that no element carries
// matches nothing, and each goquery Find walks the whole tree: one walk
// that rules them out costs less than the Finds (on a crawl of plain pages,
// most of the metadata's cost).
type docAttrs struct {
	itemprop bool // some element has an itemprop attribute
	rel      bool // some element has a rel attribute
	script   bool // some <script> has a type attribute (JSON-LD's)
}

// scanAttrs walks every node of doc once, without allocating.
func scanAttrs(doc *html.Node) docAttrs {
	var has docAttrs
	for n := doc; n != nil; {
		if n.Type == html.ElementNode {
			for _, a := range n.Attr {
				switch a.Key {
				case "itemprop":
					has.itemprop = true
				case "rel":
					has.rel = true
				case "type":
					has.script = has.script || n.Data == "script"
				}
			}
		}
		// Next in document order: first child, else the next sibling of
		// the nearest node that has one.
		if n.FirstChild != nil {
			n = n.FirstChild
			continue
		}
		for n != doc && n.NextSibling == nil {
			n = n.Parent
		}
		if n == doc {
			break
		}
		n = n.NextSibling
	}
	return has
}

// metadataWith is metadata with the attributes known to occur in doc.
func metadataWith(doc *html.Node, base *url.URL, p *airlock.Page, has docAttrs) {
	d := goquery.NewDocumentFromNode(doc)
	p.Meta = metaMap(d)
	var ld ldFields
	if has.script {
		ld = jsonLD(d)
	}
	for k, v := range ld.meta() {
		if len(p.Meta) < maxMetaEntries {
			p.Meta[k] = v
		}
	}
	m := func(keys ...string) string {
		for _, k := range keys {
			if v := collapse(p.Meta[k]); v != "" {
				return v
			}
		}
		return ""
	}

	docTitle := documentTitle(d)
	if docTitle != "" && len(p.Meta) < maxMetaEntries {
		// The <title> as it is, for callers that want it rather than the
		// headline (Firecrawl's metadata.title).
		p.Meta["html:title"] = clip(docTitle, maxMetaValue)
	}
	var headline string
	if has.itemprop {
		headline = markedHeadline(d)
	}
	p.Title = firstNonEmpty(ld.title(docTitle),
		m("dc:title", "dc.title", "dcterm:title", "dcterms:title", "dcterms.title", "og:title",
			"weibo:article:title", "weibo:webpage:title", "title", "twitter:title", "parsely-title"),
		headline, cleanTitle(docTitle, d), firstH1(d))
	// Readability's order: the description written for sharing first.
	p.Description = firstNonEmpty(m("dc:description", "dcterm:description", "dc.description",
		"dcterms.description", "og:description", "description", "twitter:description"), ld.description)
	root := find(d.Selection, "html").First()
	p.Lang = firstNonEmpty(attrOf(root, "lang"), attrOf(root, "xml:lang"),
		m("content-language", "dc.language", "dc:language", "language"), ld.lang,
		strings.ReplaceAll(m("og:locale"), "_", "-"))
	if has.rel {
		if c, ok := find(d.Selection, `link[rel~="canonical"][href]`).First().Attr("href"); ok {
			p.Canonical = absURL(base, c)
		}
	}
	if p.Canonical == "" && p.Meta["og:url"] != "" {
		p.Canonical = absURL(base, p.Meta["og:url"])
	}
	p.SiteName = firstNonEmpty(ld.publisher, m("og:site_name", "application-name"),
		strings.TrimPrefix(m("twitter:site"), "@"))
	p.Title = headingFirst(trimAside(trimSiteName(p.Title, p.SiteName), d), d)
	marked := has.itemprop || has.rel
	p.Author = firstNonEmpty(cleanByline(ld.author), cleanByline(m("dc:creator", "dc.creator", "dcterm:creator", "dcterms:creator",
		"dcterms.creator", "author", "citation_author", "parsely-author", "sailthru.author")), cleanByline(m("article:author")))
	if p.Author == "" || p.SiteName != "" && strings.EqualFold(p.Author, p.SiteName) {
		// The site named as the author stands for no one in particular:
		// a person the markup names is the byline.
		if a := domAuthor(d, marked); a != "" && !strings.EqualFold(a, p.SiteName) || p.Author == "" {
			p.Author = a
		}
	}
	// "Headline - Author - Site": the author's name goes the way of the
	// site's.
	p.Title = trimSiteName(p.Title, p.Author)
	p.Published = firstNonEmpty(normalizeDate(ld.published),
		metaDate(p.Meta, "article:published_time", "og:published_time", "article:published", "datepublished",
			"publishdate", "publish-date", "publish_date", "pubdate", "parsely-pub-date", "sailthru.date",
			"dc.date.issued", "dcterms.issued", "dc:date", "dc.date", "dcterms.date", "dcterms.created",
			"citation_publication_date", "citation_date", "date", "article.published", "article_date_original",
			"originalpublicationdate"),
		domPublished(doc, p.Title))
	p.Kind = pageKind(doc, ld, p.Meta, p.Published != "")
	p.Headings = headings(doc, p)
	p.Links = links(doc, base, p)
}

// metaDate is the first of the meta values named by keys that reads as a
// date, in ISO 8601.
func metaDate(meta map[string]string, keys ...string) string {
	for _, k := range keys {
		if v := meta[k]; v != "" {
			if d := normalizeDate(v); d != "" {
				return d
			}
		}
	}
	return ""
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v = collapse(v); v != "" {
			return v
		}
	}
	return ""
}

// collapse trims s and collapses its runs of white space.
func collapse(s string) string {
	if collapsed(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	start := -1 // the start of the current word, -1 between words
	for i := 0; i < len(s); {
		r, size := rune(s[i]), 1
		if r >= utf8.RuneSelf {
			r, size = utf8.DecodeRuneInString(s[i:])
		}
		if isSpace(r) {
			if start >= 0 {
				if b.Len() > 0 {
					b.WriteByte(' ')
				}
				b.WriteString(s[start:i])
				start = -1
			}
		} else if start < 0 {
			start = i
		}
		i += size
	}
	if start >= 0 {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(s[start:])
	}
	return b.String()
}

// collapsed reports whether collapse(s) is s: no space at either end, and
// words separated by single ASCII spaces. Most text nodes of a page are,
// and need no copy.
func collapsed(s string) bool {
	prevSpace := true // a leading space is not collapsed
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if isSpace(rune(c)) {
				if prevSpace || c != ' ' {
					return false
				}
				prevSpace = true
			} else {
				prevSpace = false
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if isSpace(r) {
			return false
		}
		prevSpace = false
		i += size
	}
	return !prevSpace || s == ""
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }

func attrOf(s *goquery.Selection, name string) string {
	v, _ := s.Attr(name)
	return strings.TrimSpace(v)
}

func nonURL(s string) string {
	if strings.HasPrefix(s, "http://") || strings.HasPrefix(s, "https://") {
		return ""
	}
	return s
}

// documentTitle is the text of the document's <title>, ignoring the titles
// of inline SVG images.
func documentTitle(d *goquery.Document) string {
	var t string
	find(d.Selection, "title").EachWithBreak(func(_ int, s *goquery.Selection) bool {
		if s.ParentsFiltered("svg").Length() > 0 {
			return true
		}
		t = collapse(s.Text())
		return t == ""
	})
	return t
}

func firstH1(d *goquery.Document) string {
	var t string
	find(d.Selection, "h1").EachWithBreak(func(_ int, s *goquery.Selection) bool {
		t = collapse(textOf(s.Nodes[0]))
		return t == ""
	})
	return t
}

// authorKey reports the meta names a page repeats, one per author.
func authorKey(k string) bool {
	switch k {
	case "author", "dc.creator", "dc:creator", "dcterms.creator", "citation_author":
		return true
	}
	return false
}

// metaMap collects <meta> name/property/itemprop/http-equiv → content, keys
// lower-cased; the first occurrence of a key wins, except that the
// authors of authorKey names are joined with "; ".
func metaMap(d *goquery.Document) map[string]string {
	m := map[string]string{}
	find(d.Selection, "meta").EachWithBreak(func(_ int, s *goquery.Selection) bool {
		content, ok := s.Attr("content")
		if !ok {
			if v, ok2 := s.Attr("value"); ok2 { // some pages write value= for content=
				content, ok = v, true
			}
		}
		if !ok {
			return true
		}
		content = clip(collapse(content), maxMetaValue)
		if content == "" {
			return true
		}
		for _, attr := range []string{"property", "name", "itemprop", "http-equiv"} {
			keys, _ := s.Attr(attr)
			// property="og:title twitter:title" declares two keys.
			// The cap holds inside the loop: one tag can name thousands
			// of keys, each with the tag's content.
			for k := range strings.FieldsSeq(keys) {
				if len(k) > maxMetaKey {
					continue
				}
				if k = strings.ToLower(k); len(k) > maxMetaKey {
					continue // lower case can be longer
				}
				if old, seen := m[k]; !seen {
					if len(m) >= maxMetaEntries {
						return false
					}
					m[k] = content
				} else if authorKey(k) && len(old)+len(content) < maxMetaValue && !strings.Contains("; "+old+"; ", "; "+content+"; ") {
					m[k] = old + "; " + content // one author per tag: all of them
				}
			}
		}
		return len(m) < maxMetaEntries
	})
	return m
}

// ldFields are the article fields found in JSON-LD.
type ldFields struct {
	headline, name, author, published, modified, publisher, description, lang string
	// article is set when the fields come from an article type (not a
	// bare web page).
	article bool
	// types are the lower-cased schema.org types of the document's
	// top-level objects, at most maxLDTypes.
	types []string
}

const maxLDTypes = 16

// title is the article's headline from JSON-LD, or "". When the headline
// and the name differ, the one that matches the document's title wins,
// the headline when neither or both do: some pages put their site's name
// in one of them.
func (f ldFields) title(docTitle string) string {
	if !f.article {
		return ""
	}
	if f.headline != "" && f.name != "" && f.headline != f.name && docTitle != "" {
		if similarity(docTitle, f.name) > 0.75 && similarity(docTitle, f.headline) <= 0.75 {
			return f.name
		}
	}
	return firstNonEmpty(f.headline, f.name)
}

// similarity is the share of b's word characters that are words of a too
// (case-insensitive): 1 when a holds every word of b.
func similarity(a, b string) float64 {
	in := map[string]bool{}
	for _, w := range words(strings.ToLower(a)) {
		in[w] = true
	}
	var all, missing int
	for _, w := range words(strings.ToLower(b)) {
		all += len(w) + 1
		if !in[w] {
			missing += len(w) + 1
		}
	}
	if all == 0 {
		return 0
	}
	return 1 - float64(missing)/float64(all)
}

func (f ldFields) meta() map[string]string {
	m := map[string]string{}
	for k, v := range map[string]string{
		"jsonld:headline":      f.headline,
		"jsonld:author":        f.author,
		"jsonld:datepublished": f.published,
		"jsonld:datemodified":  f.modified,
		"jsonld:publisher":     f.publisher,
		"jsonld:description":   f.description,
	} {
		if v != "" {
			m[k] = clip(v, maxMetaValue)
		}
	}
	return m
}

// articleTypes are the schema.org types whose fields describe the page's
// article.
var articleTypes = map[string]bool{
	"article": true, "newsarticle": true, "blogposting": true, "reportagenewsarticle": true,
	"analysisnewsarticle": true, "opinionnewsarticle": true, "reviewnewsarticle": true,
	"backgroundnewsarticle": true, "techarticle": true, "scholarlyarticle": true,
	"socialmediaposting": true, "liveblogposting": true, "discussionforumposting": true,
	"report": true, "satiricalarticle": true, "advertisercontentarticle": true,
	"medicalscholarlyarticle": true, "askpublicnewsarticle": true, "apireference": true,
	"webpage": true, "creativework": true, "recipe": true, "review": true, "posting": true,
}

func jsonLD(d *goquery.Document) ldFields {
	var objs []map[string]any
	n := 0
	find(d.Selection, `script[type="application/ld+json"]`).EachWithBreak(func(_ int, s *goquery.Selection) bool {
		n++
		raw := s.Text()
		if len(raw) > maxJSONLDBytes {
			return n < maxJSONLDBlocks
		}
		raw = strings.TrimSpace(raw)
		raw = strings.TrimSuffix(strings.TrimPrefix(raw, "<!--"), "-->")
		raw = strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(raw), "//<![CDATA["), "//]]>")
		raw = strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(raw), "<![CDATA["), "]]>")
		var v any
		if json.Unmarshal([]byte(raw), &v) != nil {
			return n < maxJSONLDBlocks
		}
		objs = append(objs, ldObjects(v, 0)...)
		return n < maxJSONLDBlocks
	})
	// The names of the objects with an @id, for the authors and
	// publishers that refer to one ({"@id": "#/person/1"}), from any
	// block: a graph lists its people apart from its article.
	var ids map[string]string
	for _, obj := range objs {
		if id, ok := obj["@id"].(string); ok && id != "" && len(ids) < maxLDIDs {
			if name := ldString(obj["name"]); name != "" {
				if ids == nil {
					ids = map[string]string{}
				}
				if _, seen := ids[id]; !seen {
					ids[id] = name
				}
			}
		}
	}
	var f ldFields
	var types []string
	var best int // rank of the object f came from: article types beat web pages
	for _, obj := range objs {
		for _, t := range ldTypes(obj) {
			if len(types) < maxLDTypes {
				types = append(types, t)
			}
		}
		rank := ldRank(obj)
		if rank == 0 || rank <= best {
			continue
		}
		g := ldFields{
			headline:    ldString(obj["headline"]),
			name:        ldString(obj["name"]),
			lang:        ldString(obj["inLanguage"]),
			article:     rank == 2,
			author:      ldNames(obj["author"], ids, 0),
			published:   ldString(obj["datePublished"]),
			modified:    ldString(obj["dateModified"]),
			publisher:   ldNames(obj["publisher"], ids, 0),
			description: ldString(obj["description"]),
		}
		if rank < 2 && g.author == "" && g.published == "" {
			continue // a bare WebPage says little about the article
		}
		f, best = g, rank
	}
	f.types = types
	return f
}

// maxLDIDs bounds the @id names jsonLD keeps.
const maxLDIDs = 256

// ldObjects flattens arrays and @graph lists into the objects they hold.
func ldObjects(v any, depth int) []map[string]any {
	if depth > 4 {
		return nil
	}
	switch x := v.(type) {
	case []any:
		var out []map[string]any
		for _, e := range x {
			out = append(out, ldObjects(e, depth+1)...)
		}
		return out
	case map[string]any:
		out := []map[string]any{x}
		if g, ok := x["@graph"]; ok {
			out = append(out, ldObjects(g, depth+1)...)
		}
		return out
	}
	return nil
}

// ldRank is 2 for article types, 1 for web pages and other creative works,
// 0 otherwise.
func ldRank(obj map[string]any) int {
	rank := 0
	for _, t := range ldTypes(obj) {
		switch {
		case t == "webpage" || t == "creativework" || t == "recipe" || t == "review" || t == "posting":
			rank = max(rank, 1)
		case articleTypes[t]:
			rank = 2
		}
	}
	return rank
}

// ldTypes are the object's @type values, lower case, without a vocabulary
// prefix.
func ldTypes(obj map[string]any) []string {
	var types []string
	add := func(t string) {
		if t = strings.ToLower(t[strings.LastIndexAny(t, "/:")+1:]); t != "" {
			types = append(types, t)
		}
	}
	switch t := obj["@type"].(type) {
	case string:
		add(t)
	case []any:
		for _, e := range t {
			if s, ok := e.(string); ok && len(types) < maxLDTypes {
				add(s)
			}
		}
	}
	return types
}

func ldString(v any) string {
	switch x := v.(type) {
	case string:
		return collapse(html.UnescapeString(x))
	case []any:
		if len(x) > 0 {
			return ldString(x[0])
		}
	case map[string]any:
		return firstNonEmpty(ldString(x["@value"]), ldString(x["name"]))
	}
	return ""
}

// ldNames joins the names of one or more persons or organisations, named
// in place or by their @id in ids.
func ldNames(v any, ids map[string]string, depth int) string {
	if depth > 3 {
		return ""
	}
	switch x := v.(type) {
	case string:
		return nonURL(collapse(html.UnescapeString(x)))
	case map[string]any:
		if name := ldString(x["name"]); name != "" {
			return name
		}
		if id, ok := x["@id"].(string); ok {
			return ids[id]
		}
		return ""
	case []any:
		var names []string
		seen := map[string]bool{}
		for _, e := range x {
			if n := ldNames(e, ids, depth+1); n != "" && !seen[n] {
				seen[n] = true
				names = append(names, n)
			}
		}
		return strings.Join(names, ", ")
	}
	return ""
}

// maxByline bounds a byline found in the markup: longer text is an author
// box, not a byline.
const maxByline = 100

// domAuthor finds a byline in the markup: itemprop=author and rel=author
// elements first, then elements whose class or id says byline or author.
// marked is false when no element has an itemprop or rel attribute.
func domAuthor(d *goquery.Document, marked bool) string {
	var a string
	pick := func(_ int, s *goquery.Selection) bool {
		if n := find(s, `[itemprop~="name"]`).First(); n.Length() > 0 {
			a = collapse(n.Text())
		} else if v, ok := s.Attr("content"); ok {
			a = collapse(v)
		} else {
			a = collapse(s.Text())
		}
		a = domByline(a)
		return a == ""
	}
	if marked {
		find(d.Selection, `[itemprop~="author"], a[rel~="author"], [rel~="author"]`).EachWithBreak(pick)
	}
	if a == "" {
		a = classByline(d.Nodes[0])
	}
	return a
}

// maxBylineCandidates bounds the elements classByline considers.
const maxBylineCandidates = 256

// classByline is the text of the innermost element whose class or id says
// byline or author (a byline box holds the name, a "By" and a date in
// elements of their own), near the first h1 first: a page lists other
// authors elsewhere.
func classByline(doc *html.Node) string {
	var cands []*html.Node
	var h1 *html.Node
	walkElements(doc, func(n *html.Node) bool {
		switch tagAtom(n) {
		case atom.Script, atom.Style, atom.Template, atom.Noscript, atom.Head, atom.Svg, atom.Form, atom.Button:
			return false // a form's "Follow author" is no byline
		case atom.H1:
			if h1 == nil {
				h1 = n
			}
		case atom.Img, atom.Html, atom.Body:
			return true
		}
		if len(cands) < maxBylineCandidates && bylineMarked(n) {
			cands = append(cands, n)
		}
		return true
	})
	var near *html.Node
	if h1 != nil {
		near = h1.Parent
		for k := 0; k < 3 && near != nil && near.Parent != nil && tagAtom(near.Parent) != atom.Body && tagAtom(near.Parent) != atom.Html; k++ {
			near = near.Parent
		}
	}
	pick := func(inNear bool) string {
		for i, n := range cands {
			// Document order: a candidate's descendants follow it.
			if i+1 < len(cands) && within(cands[i+1], n) {
				continue
			}
			if inNear && (near == nil || !within(n, near)) {
				continue
			}
			if a := domByline(textOf(n)); a != "" {
				return a
			}
		}
		return ""
	}
	if a := pick(true); a != "" {
		return a
	}
	return pick(false)
}

// bylineMarked reports an element whose class or id says byline or author.
func bylineMarked(n *html.Node) bool {
	for _, at := range n.Attr {
		if at.Namespace != "" || at.Key != "class" && at.Key != "id" {
			continue
		}
		v := strings.ToLower(at.Val)
		if strings.Contains(v, "byline") || strings.Contains(v, "author") || strings.Contains(v, "writtenby") {
			return true
		}
	}
	return false
}

// within reports n at or under root.
func within(n, root *html.Node) bool {
	for k := 0; n != nil && k <= maxTextDepth; n, k = n.Parent, k+1 {
		if n == root {
			return true
		}
	}
	return false
}

// bylineLabels are the words a byline begins with before the name, lower
// case: "By Ann", "Written by: Ann", "Par Ann".
var bylineLabels = [...]string{"written by", "posted by", "words by", "story by", "text by", "reported by",
	"by", "authors", "author", "par", "von", "por", "door", "di"}

// trimBy cuts the label a byline begins with ("By", "Written by:"); a
// byline that is only a label is "".
func trimBy(s string) string {
	for _, l := range bylineLabels {
		if len(s) < len(l) || !strings.EqualFold(s[:len(l)], l) {
			continue
		}
		rest := s[len(l):]
		if rest == "" || rest == ":" {
			return ""
		}
		// A label is a word of its own: "By Ann", "By: Ann", not "Bynum".
		if rest[0] == ' ' || rest[0] == ':' {
			return strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(rest), ":"))
		}
	}
	return s
}

// otherCredits begin the credits of people other than the author that a
// byline box goes on with, lower case.
var otherCredits = [...]string{" edited by", " reviewed by", " medically reviewed by", " fact checked by", " fact-checked by",
	" photo by", " photos by", " photographs by", " image by", " video by", " photography by", " illustrations by", " illustration by", " translated by"}

// otherCredit is the byte offset of the first of otherCredits in s
// followed by a space or a colon, or -1.
func otherCredit(s string) int {
	if len(s) > maxDateInput || !strings.Contains(s, "y") && !strings.Contains(s, "Y") {
		return -1
	}
	best := -1
	for _, c := range otherCredits {
		if i := indexFold(s, c); i >= 0 && (best < 0 || i < best) {
			if j := i + len(c); j < len(s) && (s[j] == ' ' || s[j] == ':') {
				best = i
			}
		}
	}
	return best
}

// bylineTail are the words left before a date a byline ends with, lower
// case: "Ann Writer | Published on Monday, 5 May 2021 at 2:23 pm".
var bylineTail = [...]string{"on", "at", "posted", "published", "updated", "last", "modified", "date", "permalink",
	"am", "pm", "a.m", "p.m", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"}

// weekdayAbbrevs are read as weekdays before a date only with the comma
// or the full stop of an abbreviation: "Sat, Nov 3", not "Omaha Sun on".
var weekdayAbbrevs = [...]string{"mon", "tue", "tues", "wed", "thu", "thur", "thurs", "fri", "sat", "sun"}

// domByline is cleanByline for the text of an element, "" when the text
// is longer than a byline (an author box, a paragraph), measured before
// its date is cut.
func domByline(s string) string {
	if s = collapse(s); len(s) > maxByline {
		return ""
	}
	return cleanByline(s)
}

// cleanByline is s as an author: without the label it begins with, without
// a date that follows the name (with the separator, the time and the words
// that lead to the date), the name after a date when a "by" introduces it,
// "" when s is a URL or leaves no name.
func cleanByline(s string) string {
	s = trimBy(collapse(s))
	// "Written by Ann Edited by Bo": the credits of others that follow
	// the author's name are not the byline.
	if i := otherCredit(s); i > 0 {
		s = strings.TrimRight(s[:i], " |·•–—-,;:")
	}
	if i := dateIndex(s); i >= 0 {
		after := s[i:]
		s = trimBy(beforeDate(s[:i]))
		if s == "" {
			// "Monday, November 12, 2012, by Matthew Kang"; without a
			// "by" the text after a date is a comment's ("... said:").
			for _, by := range [...]string{" by ", " by:"} {
				if k := indexFold(after, by); k >= 0 {
					return cleanByline(strings.TrimLeft(after[k+len(by):], " :"))
				}
			}
		}
	}
	if nonURL(s) == "" || interfaceWords(s) {
		return ""
	}
	return trimInterfaceWords(s)
}

// trimInterfaceWords cuts a run of two or more bylineUIWords off the end
// of a byline: "A.J. Daulerio View Profile Email RSS" (an author box's
// links after the name). One such word may end a name ("Rachel Read").
func trimInterfaceWords(s string) string {
	ws := strings.Fields(s)
	n := len(ws)
	for n > 1 && isInterfaceWord(ws[n-1]) {
		n--
	}
	if len(ws)-n < 2 {
		return s
	}
	return strings.Join(ws[:n], " ")
}

// beforeDate is the text before a date without the words, the time and
// the separators that lead to the date.
func beforeDate(s string) string {
	for {
		t := strings.TrimRight(s, " ")
		abbrev := strings.HasSuffix(t, ",") || strings.HasSuffix(t, ".")
		s = strings.TrimRight(t, " |·•–—-,;:@/()[]")
		j := strings.LastIndexByte(s, ' ') + 1
		w := strings.ToLower(strings.TrimSuffix(s[j:], "."))
		if s == "" || !slices.Contains(bylineTail[:], w) && !(abbrev && slices.Contains(weekdayAbbrevs[:], w)) && !isClock(w) {
			return s
		}
		s = s[:j]
	}
}

// isClock reports a time of day written H:MM or HH:MM[:SS].
func isClock(w string) bool {
	h, m, ok := strings.Cut(w, ":")
	if !ok || len(h) < 1 || len(h) > 2 || len(m) < 2 {
		return false
	}
	for _, r := range h + strings.ReplaceAll(m, ":", "") {
		if !isDigit(r) {
			return false
		}
	}
	return true
}

// bylineUIWords are the words of the buttons and headings that author
// boxes hold ("Follow author", "About the author", "View all posts"),
// lower case.
var bylineUIWords = [...]string{"follow", "unfollow", "author", "authors", "about", "the", "more", "from", "by",
	"this", "view", "all", "posts", "articles", "stories", "profile", "bio", "contact", "subscribe", "to", "see", "read",
	"email", "e-mail", "rss", "twitter", "facebook", "linkedin", "instagram", "aim", "google", "plus", "google+", "website", "on"}

// interfaceWords reports a text made only of bylineUIWords.
func interfaceWords(s string) bool {
	ws := strings.Fields(strings.ToLower(s))
	if len(ws) == 0 || len(ws) > 12 {
		return false
	}
	for _, w := range ws {
		if !isInterfaceWord(w) {
			return false
		}
	}
	return true
}

func isInterfaceWord(w string) bool {
	return slices.Contains(bylineUIWords[:], strings.Trim(strings.ToLower(w), ".:!»›>|"))
}

// maxTitleSeps bounds the separators cleanTitle looks at.
const maxTitleSeps = 16

// titleSeps separate a page's title from its site's name in <title>.
var titleSeps = [...]string{" | ", " - ", " – ", " — ", " \\ ", " / ", " > ", " » ", " · ", " :: "}

// trimSiteName cuts the site's name off the end (or the start) of a
// title, with the separator between them: "Headline | Site" is
// "Headline" when the site is called Site.
func trimSiteName(title, site string) string {
	if site == "" || len(site) >= len(title) {
		return title
	}
	if t := trimSiteSuffix(title, site); t != title {
		return t
	}
	// "Factorio.com" calls itself "Factorio" in its titles.
	for _, tld := range [...]string{".com", ".org", ".net", ".co.uk", ".io"} {
		if len(site) > len(tld) && strings.EqualFold(site[len(site)-len(tld):], tld) {
			return trimSiteSuffix(title, site[:len(site)-len(tld)])
		}
	}
	return title
}

// trimSiteSuffix is trimSiteName for one spelling of the site's name.
func trimSiteSuffix(title, site string) string {
	// The comparison is of the strings themselves, case folded, over
	// slices of the title as long as the site's name: a lowered copy can
	// be of another length ("Ⱥ" is 2 bytes, "ⱥ" 3), and its offsets are
	// not the title's. The separators are ASCII, so the cut is on a rune
	// boundary.
	for _, sep := range titleSeps {
		n := len(sep) + len(site)
		if n >= len(title) {
			continue
		}
		if k := len(title) - n; strings.HasPrefix(title[k:], sep) && strings.EqualFold(title[k+len(sep):], site) {
			if t := strings.TrimSpace(title[:k]); len(strings.Fields(t)) >= 2 {
				return t
			}
		}
		if strings.HasPrefix(title[len(site):], sep) && strings.EqualFold(title[:len(site)], site) {
			if t := strings.TrimSpace(title[n:]); len(strings.Fields(t)) >= 2 {
				return t
			}
		}
	}
	return title
}

// headingFirst is the page's h1 or h2 when title begins with it, then a
// separator and less text than the heading holds: "Friday Facts #282 -
// 0.17 in sight | Factorio" over an h2 "Friday Facts #282 - 0.17 in
// sight" (the site, a series or the author follows the headline). A
// heading shorter than the rest, or of one word, is a logo or a section
// before the headline: the title stays.
func headingFirst(title string, d *goquery.Document) string {
	if !hasTitleSep(title) {
		return title
	}
	lt := strings.ToLower(title)
	out := title
	find(d.Selection, "h1, h2").EachWithBreak(func(i int, s *goquery.Selection) bool {
		h := collapse(textOf(s.Nodes[0]))
		lh := strings.ToLower(h)
		if h == "" || len(lh) >= len(lt) || !strings.HasPrefix(lt, lh) || len(words(h)) < 2 || len(lh) <= len(lt)-len(lh) {
			return i < 32
		}
		for _, sep := range titleSeps {
			if strings.HasPrefix(lt[len(lh):], sep) {
				out = h
				return false
			}
		}
		return i < 32
	})
	return out
}

// hasTitleSep reports one of titleSeps in t.
func hasTitleSep(t string) bool {
	for _, sep := range titleSeps {
		if strings.Contains(t, sep) {
			return true
		}
	}
	return false
}

// trimAside cuts a bracketed aside off the end of a title when what is
// left is the page's h1 or h2: "Rates rise (Reuters)" over an h1 "Rates
// rise" names the source, not the headline.
func trimAside(title string, d *goquery.Document) string {
	var open string
	switch {
	case strings.HasSuffix(title, ")"):
		open = "("
	case strings.HasSuffix(title, "）"):
		open = "（"
	case strings.HasSuffix(title, "]"):
		open = "["
	default:
		return title
	}
	i := strings.LastIndex(title, open)
	if i <= 0 {
		return title
	}
	if head := collapse(title[:i]); head != "" && headingEquals(d, head) {
		return head
	}
	return title
}

// markedHeadline is the text of the element the page marks as its
// headline with itemprop=headline, or "".
func markedHeadline(d *goquery.Document) string {
	var t string
	find(d.Selection, `[itemprop~="headline"]`).EachWithBreak(func(_ int, s *goquery.Selection) bool {
		if s.Is("meta") {
			t = attrOf(s, "content")
		} else {
			t = collapse(textOf(s.Nodes[0]))
		}
		if len(t) > maxHeadingText {
			t = ""
		}
		return t == ""
	})
	return t
}

// cleanTitle takes the site's name off a page's <title>: the h1 the title
// begins with when there is one, else the title cut at its separators the
// way Readability does (the part before the last separator, or after the
// first when that leaves too few words; after a colon when the part before
// it is short), else the title as it is.
func cleanTitle(title string, d *goquery.Document) string {
	if title == "" {
		return ""
	}
	lt := strings.ToLower(title)
	var h1s []string
	find(d.Selection, "h1, h2").EachWithBreak(func(i int, s *goquery.Selection) bool {
		if h := collapse(textOf(s.Nodes[0])); h != "" {
			if s.Is("h1") {
				h1s = append(h1s, h)
			}
			if lh := strings.ToLower(h); strings.HasPrefix(lt, lh) && len(lh) < len(lt) && len(words(h)) >= 2 {
				for _, sep := range titleSeps {
					if strings.HasPrefix(lt[len(lh):], sep) {
						title = h // the page's headline, then the site
						lt = ""
						return false
					}
				}
			}
		}
		return i < 32
	})
	if lt == "" {
		return title
	}
	orig := title
	first, last := -1, -1
	n := 0
	for i := 0; i < len(title) && n < maxTitleSeps; {
		found := false
		for _, sep := range titleSeps {
			if strings.HasPrefix(title[i:], sep) {
				if first < 0 {
					first = i
				}
				last = i
				n++
				i += len(sep)
				found = true
				break
			}
		}
		if !found {
			i++
		}
	}
	hierarchical := strings.ContainsAny(title, "\\/>»")
	switch {
	case first >= 0:
		t := title[:last]
		if len(strings.Fields(t)) < 3 {
			t = title[first:]
			t = t[strings.IndexByte(t[1:], ' ')+2:]
		}
		title = t
	case strings.Contains(title, ": "):
		if !headingEquals(d, title) {
			t := title[strings.LastIndex(title, ":")+1:]
			if len(strings.Fields(t)) < 3 {
				t = title[strings.Index(title, ":")+1:]
			} else if len(strings.Fields(title[:strings.Index(title, ":")])) > 5 {
				t = title
			}
			title = t
		}
	case len(title) > 150 || len(title) < 15:
		if len(h1s) == 1 {
			title = h1s[0]
		}
	}
	title = collapse(title)
	if wc := len(strings.Fields(title)); wc <= 4 && (!hierarchical || wc != sepFreeWords(orig)-1) {
		title = orig
	}
	return title
}

// sepFreeWords counts the words of t without its separators.
func sepFreeWords(t string) int {
	return len(strings.Fields(strings.Map(func(r rune) rune {
		if strings.ContainsRune("|-–—\\/>»", r) {
			return -1
		}
		return r
	}, t)))
}

// headingEquals reports an h1 or h2 whose text is t.
func headingEquals(d *goquery.Document, t string) bool {
	found := false
	find(d.Selection, "h1, h2").EachWithBreak(func(i int, s *goquery.Selection) bool {
		found = collapse(textOf(s.Nodes[0])) == t
		return !found && i < 64
	})
	return found
}

// maxDateLineWindow is how much text after the headline domPublished
// reads for a date line.
const (
	maxDateLineWindow = 1500
	maxDateLine       = 200
)

// domPublished finds the publishing date in the markup: an element marked
// itemprop=datePublished or a <time pubdate>, else the first <time
// datetime> or date line in the text that follows the headline (the
// h1-h3 that is the title, else the first h1).
func domPublished(doc *html.Node, title string) string {
	var date string
	var h1, firstH1 *html.Node
	walkElements(doc, func(n *html.Node) bool {
		if date != "" {
			return false
		}
		switch tagAtom(n) {
		case atom.Script, atom.Style, atom.Template, atom.Noscript:
			return false
		case atom.H1, atom.H2, atom.H3:
			if firstH1 == nil && tagAtom(n) == atom.H1 {
				firstH1 = n
			}
			// The headline: the first h1-h3 whose text is the title.
			if h1 == nil && title != "" && strings.EqualFold(collapse(textOf(n)), title) {
				h1 = n
			}
			return false
		}
		if strings.Contains(strings.ToLower(attrValue(n, "itemprop")), "datepublished") {
			date = firstNonEmpty(normalizeDate(attrValue(n, "datetime")), normalizeDate(attrValue(n, "content")),
				normalizeDate(collapse(textOf(n))), findDate(collapse(textOf(n))))
			return false
		}
		if tagAtom(n) == atom.Time {
			if _, ok := attr(n, "pubdate"); ok {
				date = firstNonEmpty(normalizeDate(attrValue(n, "datetime")), findDate(collapse(textOf(n))))
			}
			return false
		}
		return true
	})
	if date != "" {
		return date
	}
	if h1 == nil {
		h1 = firstH1
	}
	if h1 == nil {
		return ""
	}
	return dateAfter(h1)
}

// dateAfter reads the document after n, in order, for the first <time
// datetime> or short line of text holding a date, within
// maxDateLineWindow bytes of text.
func dateAfter(n *html.Node) string {
	seen, steps := 0, 0
	var date string
	stop := false
	visit := func(c *html.Node) bool {
		if stop {
			return false
		}
		if steps++; steps > 4096 {
			stop = true
			return false
		}
		switch c.Type {
		case html.TextNode:
			t := strings.TrimSpace(c.Data)
			if t == "" {
				return false
			}
			seen += len(t)
			// findDate needs a four-digit year: test for one before the
			// block's length.
			if len(t) <= maxDateLine && hasDigitRun(t, 4) && textLen(blockOf(c), maxDateLine+1) <= maxDateLine {
				date = findDate(t)
			}
			stop = date != "" || seen >= maxDateLineWindow
			return false
		case html.ElementNode:
			switch tagAtom(c) {
			case atom.Script, atom.Style, atom.Template, atom.Noscript:
				return false
			case atom.Time:
				date = firstNonEmpty(normalizeDate(attrValue(c, "datetime")), findDate(collapse(textOf(c))))
				stop = date != ""
			}
		}
		return !stop
	}
	// Walk forward from n: its following siblings' subtrees, then its
	// ancestors' following siblings'.
	for cur := n; cur != nil && !stop; cur = cur.Parent {
		for s := cur.NextSibling; s != nil && !stop; s = s.NextSibling {
			walkNodes(s, visit)
		}
	}
	return date
}

// textLen is the length of the text under n (each text node trimmed),
// without scripts and styles, counted up to limit.
func textLen(n *html.Node, limit int) int {
	l := 0
	var walk func(n *html.Node, depth int)
	walk = func(n *html.Node, depth int) {
		for c := n.FirstChild; c != nil && l < limit && depth < maxTextDepth; c = c.NextSibling {
			switch c.Type {
			case html.TextNode:
				l += len(strings.TrimSpace(c.Data))
			case html.ElementNode:
				switch tagAtom(c) {
				case atom.Script, atom.Style, atom.Template, atom.Noscript:
					continue
				}
				walk(c, depth+1)
			}
		}
	}
	walk(n, 0)
	return l
}

// blockOf is the nearest ancestor of n that is not an inline element.
func blockOf(n *html.Node) *html.Node {
	for p := n.Parent; p != nil; p = p.Parent {
		switch tagAtom(p) {
		case atom.A, atom.Span, atom.Em, atom.Strong, atom.B, atom.I, atom.Time, atom.Small, atom.Abbr, atom.Font, atom.U:
			continue
		}
		return p
	}
	return n
}

// walkNodes is walkElements for every node, text included: visit sees
// each node in document order and descends into an element's children
// only when it returns true.
func walkNodes(n *html.Node, visit func(*html.Node) bool) {
	stack := []*html.Node{n}
	for len(stack) > 0 {
		c := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if !visit(c) {
			continue
		}
		for k := c.LastChild; k != nil; k = k.PrevSibling {
			stack = append(stack, k)
		}
	}
}

// headings lists the h1-h3 of the document in order.
func headings(doc *html.Node, p *airlock.Page) []airlock.Heading {
	out := []airlock.Heading{}
	walkElements(doc, func(n *html.Node) bool {
		a := tagAtom(n)
		if skipTags[a] && a != atom.Title {
			return false
		}
		level := 0
		switch a {
		case atom.H1:
			level = 1
		case atom.H2:
			level = 2
		case atom.H3:
			level = 3
		default:
			return true
		}
		if t := clip(collapse(textOf(n)), maxHeadingText); t != "" {
			if len(out) == airlock.MaxHeadings {
				markTruncated(p, "headings")
				return false
			}
			out = append(out, airlock.Heading{Level: level, Text: t})
		}
		return false
	})
	return out
}

// links lists the document's http(s) links, absolute, without fragments,
// each once (the first non-empty text wins).
func links(doc *html.Node, base *url.URL, p *airlock.Page) []airlock.Link {
	out := []airlock.Link{}
	index := map[string]int{}
	examined, full := 0, false
	host := ""
	if base != nil {
		host = strings.ToLower(base.Hostname())
	}
	walkElements(doc, func(n *html.Node) bool {
		a := tagAtom(n)
		if a == atom.Template || a == atom.Script || a == atom.Style {
			return false
		}
		if a != atom.A && a != atom.Area {
			return true
		}
		if full {
			return false
		}
		if examined++; examined > maxLinkElements {
			markTruncated(p, "links")
			full = true
			return false
		}
		href, ok := attr(n, "href")
		if !ok {
			return true
		}
		u := resolveLink(base, href)
		if u == nil {
			return true
		}
		s := u.String()
		text := clip(collapse(textOf(n)), maxLinkText)
		if text == "" {
			text = clip(collapse(firstNonEmpty(attrValue(n, "title"), attrValue(n, "aria-label"), imgAlt(n))), maxLinkText)
		}
		if i, seen := index[s]; seen {
			if out[i].Text == "" {
				out[i].Text = text
			}
			return false
		}
		if len(out) == airlock.MaxPageLinks {
			markTruncated(p, "links")
			full = true
			return false
		}
		index[s] = len(out)
		out = append(out, airlock.Link{
			URL:      s,
			Text:     text,
			Rel:      strings.Join(strings.Fields(strings.ToLower(attrValue(n, "rel"))), " "),
			Internal: host != "" && strings.EqualFold(u.Hostname(), host),
		})
		return false
	})
	return out
}

// resolveLink resolves href against base and keeps http and https links
// only, without their fragment.
func resolveLink(base *url.URL, href string) *url.URL {
	href = strings.TrimSpace(href)
	if href == "" || strings.HasPrefix(href, "#") {
		return nil
	}
	u, err := url.Parse(href)
	if err != nil {
		return nil
	}
	if base != nil {
		u = base.ResolveReference(u)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil
	}
	u.Fragment, u.RawFragment = "", ""
	u.User = nil
	u.Host = strings.ToLower(u.Host)
	return u
}

func absURL(base *url.URL, ref string) string {
	ref = strings.TrimSpace(ref)
	u, err := url.Parse(ref)
	if err != nil {
		return ""
	}
	if base != nil {
		u = base.ResolveReference(u)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return ""
	}
	return u.String()
}

func imgAlt(n *html.Node) string {
	var alt string
	walkElements(n, func(c *html.Node) bool {
		if tagAtom(c) == atom.Img {
			alt = attrValue(c, "alt")
		}
		return alt == ""
	})
	return alt
}

func attr(n *html.Node, key string) (string, bool) {
	for _, a := range n.Attr {
		if a.Key == key && a.Namespace == "" {
			return a.Val, true
		}
	}
	return "", false
}

func attrValue(n *html.Node, key string) string {
	v, _ := attr(n, key)
	return v
}

func markTruncated(p *airlock.Page, field string) {
	for _, f := range p.Truncated {
		if f == field {
			return
		}
	}
	p.Truncated = append(p.Truncated, field)
}

// walkElements visits the elements under n in document order, descending
// into an element's children only when visit returns true. It uses an
// explicit stack: hostile documents nest deeper than a goroutine stack
// should go.
func walkElements(n *html.Node, visit func(*html.Node) bool) {
	// The stack holds the pending siblings along one path: a page's fit
	// in the array, which stays off the heap (the walks run many times
	// per page).
	var buf [128]*html.Node
	stack := append(buf[:0], n)
	for len(stack) > 0 {
		c := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		descend := true
		if c.Type == html.ElementNode {
			descend = visit(c)
		}
		if !descend {
			continue
		}
		for k := c.LastChild; k != nil; k = k.PrevSibling {
			if k.Type == html.ElementNode || k.Type == html.DocumentNode {
				stack = append(stack, k)
			}
		}
	}
}

// textOf is the collapsed text under n, without scripts and styles.
func textOf(n *html.Node) string {
	var b strings.Builder
	var walk func(*html.Node, int)
	walk = func(n *html.Node, depth int) {
		if depth > maxTextDepth || b.Len() > 1<<16 {
			return
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			switch c.Type {
			case html.TextNode:
				b.WriteString(c.Data)
			case html.ElementNode:
				switch tagAtom(c) {
				case atom.Script, atom.Style, atom.Template, atom.Noscript:
					continue
				case atom.Br:
					b.WriteByte(' ')
					continue
				}
				if blockTags[tagAtom(c)] {
					b.WriteByte(' ')
				}
				walk(c, depth+1)
				if blockTags[tagAtom(c)] {
					b.WriteByte(' ')
				}
			}
		}
	}
	walk(n, 0)
	return b.String()
}

// selectors holds the compiled metadata selectors by their text: goquery's
// Find parses its selector on every call, for every page.
var selectors sync.Map

// find is sel.Find(selector) with the selector compiled once.
func find(sel *goquery.Selection, selector string) *goquery.Selection {
	if m, ok := selectors.Load(selector); ok {
		return sel.FindMatcher(m.(goquery.Matcher))
	}
	m, err := cascadia.Compile(selector)
	if err != nil {
		return sel.Find(selector) // matches nothing, as goquery does
	}
	selectors.Store(selector, goquery.Matcher(m))
	return sel.FindMatcher(m)
}
