package extract

import (
	"encoding/json"
	"net/url"
	"strings"

	"github.com/PuerkitoBio/goquery"
	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"

	"github.com/airlockhq/airlock"
)

// Bounds on what metadata keeps from hostile pages.
const (
	maxMetaEntries = 256  // keys in Page.Meta
	maxMetaValue   = 4096 // bytes of one meta value
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
// description, lang, canonical, site name, author, published, meta,
// headings and links.
func metadata(doc *html.Node, base *url.URL, p *airlock.Page) {
	d := goquery.NewDocumentFromNode(doc)
	p.Meta = metaMap(d)
	ld := jsonLD(d)
	for k, v := range ld.meta() {
		if len(p.Meta) < maxMetaEntries {
			p.Meta[k] = v
		}
	}

	p.Title = firstNonEmpty(documentTitle(d), p.Meta["og:title"], firstH1(d))
	// Readability's order: the description written for sharing first.
	p.Description = firstNonEmpty(p.Meta["dc:description"], p.Meta["dcterm:description"], p.Meta["dc.description"],
		p.Meta["dcterms.description"], p.Meta["og:description"],
		p.Meta["description"], p.Meta["twitter:description"], ld.description)
	p.Lang = firstNonEmpty(attrOf(d.Find("html").First(), "lang"), attrOf(d.Find("html").First(), "xml:lang"),
		p.Meta["content-language"], p.Meta["dc.language"])
	if c, ok := d.Find(`link[rel~="canonical"][href]`).First().Attr("href"); ok {
		p.Canonical = absURL(base, c)
	}
	if p.Canonical == "" && p.Meta["og:url"] != "" {
		p.Canonical = absURL(base, p.Meta["og:url"])
	}
	p.SiteName = firstNonEmpty(p.Meta["og:site_name"], ld.publisher, p.Meta["application-name"], p.Meta["twitter:site"])
	p.Author = firstNonEmpty(ld.author, p.Meta["author"], nonURL(p.Meta["article:author"]), p.Meta["dc.creator"],
		p.Meta["parsely-author"], p.Meta["sailthru.author"], domAuthor(d))
	p.Published = firstNonEmpty(ld.published, p.Meta["article:published_time"], p.Meta["og:published_time"],
		p.Meta["datepublished"], p.Meta["publishdate"], p.Meta["publish-date"], p.Meta["pubdate"],
		p.Meta["parsely-pub-date"], p.Meta["sailthru.date"], p.Meta["dc.date.issued"], p.Meta["dc.date"],
		p.Meta["dcterms.date"], p.Meta["date"], domPublished(d))
	p.Headings = headings(doc, p)
	p.Links = links(doc, base, p)
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
	if s == "" {
		return ""
	}
	return strings.Join(strings.FieldsFunc(s, isSpace), " ")
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
	d.Find("title").EachWithBreak(func(_ int, s *goquery.Selection) bool {
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
	d.Find("h1").EachWithBreak(func(_ int, s *goquery.Selection) bool {
		t = collapse(textOf(s.Nodes[0]))
		return t == ""
	})
	return t
}

// metaMap collects <meta> name/property/itemprop/http-equiv → content, keys
// lower-cased; the first occurrence of a key wins.
func metaMap(d *goquery.Document) map[string]string {
	m := map[string]string{}
	d.Find("meta").EachWithBreak(func(_ int, s *goquery.Selection) bool {
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
			for _, k := range strings.Fields(strings.ToLower(keys)) {
				if _, seen := m[k]; !seen {
					m[k] = content
				}
			}
		}
		return len(m) < maxMetaEntries
	})
	return m
}

// ldFields are the article fields found in JSON-LD.
type ldFields struct {
	headline, author, published, modified, publisher, description string
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
	var f ldFields
	var best int // rank of the object f came from: article types beat web pages
	n := 0
	d.Find(`script[type="application/ld+json"]`).EachWithBreak(func(_ int, s *goquery.Selection) bool {
		n++
		raw := s.Text()
		if len(raw) > maxJSONLDBytes {
			return n < maxJSONLDBlocks
		}
		raw = strings.TrimSpace(raw)
		raw = strings.TrimSuffix(strings.TrimPrefix(raw, "<!--"), "-->")
		raw = strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(raw), "//<![CDATA["), "//]]>")
		var v any
		if json.Unmarshal([]byte(raw), &v) != nil {
			return n < maxJSONLDBlocks
		}
		for _, obj := range ldObjects(v, 0) {
			rank := ldRank(obj)
			if rank == 0 || rank <= best {
				continue
			}
			g := ldFields{
				headline:    firstNonEmpty(ldString(obj["headline"]), ldString(obj["name"])),
				author:      ldNames(obj["author"], 0),
				published:   ldString(obj["datePublished"]),
				modified:    ldString(obj["dateModified"]),
				publisher:   ldNames(obj["publisher"], 0),
				description: ldString(obj["description"]),
			}
			if rank < 2 && g.author == "" && g.published == "" {
				continue // a bare WebPage says little about the article
			}
			f, best = g, rank
		}
		return n < maxJSONLDBlocks
	})
	return f
}

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
	var types []string
	switch t := obj["@type"].(type) {
	case string:
		types = []string{t}
	case []any:
		for _, e := range t {
			if s, ok := e.(string); ok {
				types = append(types, s)
			}
		}
	}
	for _, t := range types {
		t = strings.ToLower(t[strings.LastIndexAny(t, "/:")+1:])
		switch {
		case t == "webpage" || t == "creativework" || t == "recipe" || t == "review" || t == "posting":
			rank = max(rank, 1)
		case articleTypes[t]:
			rank = 2
		}
	}
	return rank
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

// ldNames joins the names of one or more persons or organisations.
func ldNames(v any, depth int) string {
	if depth > 3 {
		return ""
	}
	switch x := v.(type) {
	case string:
		return nonURL(collapse(html.UnescapeString(x)))
	case map[string]any:
		return ldString(x["name"])
	case []any:
		var names []string
		seen := map[string]bool{}
		for _, e := range x {
			if n := ldNames(e, depth+1); n != "" && !seen[n] {
				seen[n] = true
				names = append(names, n)
			}
		}
		return strings.Join(names, ", ")
	}
	return ""
}

// domAuthor finds a byline in the markup: rel=author links and
// itemprop=author elements.
func domAuthor(d *goquery.Document) string {
	var a string
	d.Find(`[itemprop~="author"], a[rel~="author"], [rel~="author"]`).EachWithBreak(func(_ int, s *goquery.Selection) bool {
		if n := s.Find(`[itemprop~="name"]`).First(); n.Length() > 0 {
			a = collapse(n.Text())
		} else if v, ok := s.Attr("content"); ok {
			a = collapse(v)
		} else {
			a = collapse(s.Text())
		}
		if len(a) > 100 {
			a = ""
		}
		return a == ""
	})
	return a
}

func domPublished(d *goquery.Document) string {
	var t string
	d.Find(`time[itemprop~="datePublished"], [itemprop~="datePublished"], time[pubdate]`).EachWithBreak(func(_ int, s *goquery.Selection) bool {
		t = firstNonEmpty(attrOf(s, "datetime"), attrOf(s, "content"), s.Text())
		return t == ""
	})
	return t
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
	stack := []*html.Node{n}
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
