package extract

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
	"golang.org/x/text/unicode/norm"

	"github.com/airlockhq/airlock"
)

// DefaultMaxInputBytes is the largest body Extract accepts when
// Options.MaxInputBytes is zero.
const DefaultMaxInputBytes = 10 << 20

// Input is one fetched response to extract.
type Input struct {
	// URL is the final URL of the response: the base for relative links
	// (a <base href> in the document takes precedence) and the host that
	// tells internal links from external ones. It may be empty.
	URL string
	// Body is the response body, still in its own charset.
	Body []byte
	// ContentType is the Content-Type header; "" to sniff the body.
	ContentType string
	// Header holds the other response headers; only X-Robots-Tag is read
	// (see Robots). It may be nil.
	Header http.Header
}

// Options tune Extract. The zero value extracts everything with the
// default size cap.
type Options struct {
	// Mode is airlock.ExtractFull (the default, also for "") or
	// airlock.ExtractNone: links and metadata only, without the
	// main-content extraction (text, markdown, tables).
	Mode string
	// MaxInputBytes caps len(Input.Body); 0 means DefaultMaxInputBytes.
	MaxInputBytes int64
}

// pool bounds the extractions running at once to the number of CPUs the
// process may use: extraction is CPU-bound, more at once only adds
// latency and memory.
var pool = make(chan struct{}, runtime.GOMAXPROCS(0))

// Budget admits extractions by the size of their input: the memory an
// extraction takes grows with its input, so concurrent extractions share a
// budget of input bytes (times a factor the implementation chooses).
// Acquire may wait; an error refuses the extraction and is returned by
// Extract as is. Implementations must be safe for concurrent use.
type Budget interface {
	Acquire(ctx context.Context, inputBytes int64) (release func(), err error)
}

type budgetKey struct{}

// WithBudget returns a context whose extractions ask b for room before
// they run.
func WithBudget(ctx context.Context, b Budget) context.Context {
	return context.WithValue(ctx, budgetKey{}, b)
}

// Extract turns a response into a Page. It fills the content fields
// (content_type, title, description, lang, canonical, site_name, author,
// published, meta, headings, links, text, markdown, tables, truncated) and
// URL when it is empty; the fetch fields (status, fetched_at, provider...)
// are the caller's. It never uses the network.
//
// By content type (Input.ContentType, or sniffed from the body when it is
// empty or application/octet-stream): HTML (and XHTML) is extracted
// fully; text/plain, JSON and XML pass through as text (an XML document's
// first <title> is the title); PDF text is read in a child process (see
// PDFCommand); any other type (images, archives, unlabelled binaries) is an
// error, reason unsupported_content, except in airlock.ExtractNone mode,
// which produces no text, Markdown or tables for any type and gives such a
// body a Page with metadata only.
//
// At most GOMAXPROCS extractions run at once; Extract waits for a turn
// until ctx is done, and returns ctx's error then. An HTML extraction
// looks at ctx between its steps (parsing, readability, the density
// extractor, the merge, the Markdown) and returns ctx's error (code
// timeout for airlock.CodeOf) when ctx ends first. A step in progress
// is not interrupted: the HTML parse above all, whose work is the size of
// the page times the depth of its open elements. A page whose estimated
// parse work is over a fixed bound (2^24 token-levels, about 0.4 s; a
// large ordinary page is a few percent of it) is flattened to at most 32
// levels of nesting before the parse, which keeps the work linear in its
// size (a 9.6 MB page of 250 nested <b> and 2.4 million <hr> is parsed
// in about 1 s, not 11-15 s); a tree of more than 60,000 elements gets
// the readable body text, in linear time, instead of the main-content
// extractors. When ctx carries a
// Budget (WithBudget), Extract first asks it for room for the input.
// Errors:
//   - *airlock.Error with code too_large when the body is over the cap;
//   - the Budget's error when it refuses;
//   - *airlock.Error with code upstream, reason unsupported_content, naming
//     the type and size, for a non-empty body of a type it cannot read;
//   - *BotWallError (code upstream, reason bot_wall) when the page is a
//     captcha, a bot challenge or a bot-filter denial instead of content;
//   - *airlock.Error with code upstream, reason pdf, when a PDF cannot be
//     read; code timeout, reason cpu_deadline, when its reader ran past
//     PDFTimeout or PDFCPULimit; code too_large, reason memory_limit, when
//     it ran out of PDFMemoryLimit.
//
// Extract is safe for concurrent use.
func Extract(ctx context.Context, in Input, o Options) (*airlock.Page, error) {
	limit := o.MaxInputBytes
	if limit <= 0 {
		limit = DefaultMaxInputBytes
	}
	if int64(len(in.Body)) > limit {
		return nil, airlock.Errorf(airlock.CodeTooLarge, airlock.ReasonInputTooLarge,
			"extract: body of %d bytes is over the %d-byte cap", len(in.Body), limit)
	}
	switch o.Mode {
	case "", airlock.ExtractFull, airlock.ExtractNone:
	default:
		return nil, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonExtractMode, "extract: unknown mode %q", o.Mode)
	}
	release, err := admit(ctx, int64(len(in.Body)))
	if err != nil {
		return nil, err
	}
	defer release()

	if bytes.HasPrefix(in.Body, []byte("\xfe\xff")) || bytes.HasPrefix(in.Body, []byte("\xff\xfe")) {
		// UTF-16 cannot be sniffed or parsed as is: decode it first.
		in.Body, _ = toUTF8(in.Body, "", false)
	}
	kind, mediaType := classify(in.ContentType, in.Body)
	p := &airlock.Page{
		URL:         in.URL,
		ContentType: mediaType,
		Meta:        map[string]string{},
		Headings:    []airlock.Heading{},
		Links:       []airlock.Link{},
		Tables:      [][][]string{},
		Truncated:   []string{},
	}
	base, _ := url.Parse(in.URL)
	if base != nil && !base.IsAbs() {
		base = nil
	}
	switch kind {
	case kindHTML:
		return p, extractHTML(ctx, in, o, base, p)
	case kindText, kindJSON, kindXML:
		passThrough(in, kind, p)
		if o.Mode == airlock.ExtractNone {
			p.Text, p.Markdown = "", ""
		}
		return p, nil
	case kindPDF:
		if o.Mode == airlock.ExtractNone {
			return p, nil
		}
		text, err := pdfText(ctx, in.Body)
		if err != nil {
			return nil, err
		}
		p.Text = text
		p.Markdown = text
		return p, nil
	}
	if o.Mode == airlock.ExtractNone || len(in.Body) == 0 {
		return p, nil // metadata only is what was asked, or all there is
	}
	// An empty page would pass for a page without text: say what it was.
	mt := mediaType
	if mt == "" {
		mt = "unknown type"
	}
	return nil, airlock.Errorf(airlock.CodeUpstream, airlock.ReasonUnsupportedContent,
		"extract: %s content (%d bytes) cannot be extracted; only HTML, text, JSON, XML and PDF can", mt, len(in.Body))
}

// Content kinds.
const (
	kindOther = iota
	kindHTML
	kindText
	kindJSON
	kindXML
	kindPDF
)

// classify maps the Content-Type (or, when it is missing or generic, the
// body's first bytes) to a kind, and returns the media type to report.
func classify(contentType string, body []byte) (int, string) {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		mt = strings.ToLower(strings.TrimSpace(strings.Split(contentType, ";")[0]))
	}
	switch {
	case mt == "" || mt == "application/octet-stream" || mt == "binary/octet-stream" || mt == "application/unknown":
		return sniff(body)
	case mt == "text/html" || mt == "application/xhtml+xml":
		return kindHTML, mt
	case mt == "application/pdf" || mt == "application/x-pdf":
		return kindPDF, mt
	case mt == "application/json" || strings.HasSuffix(mt, "+json") || mt == "text/json":
		return kindJSON, mt
	case mt == "application/xml" || mt == "text/xml" || strings.HasSuffix(mt, "+xml"):
		if looksLikeHTML(body) && !bytes.Contains(prefix(body, 1024), []byte("<rss")) && !bytes.Contains(prefix(body, 1024), []byte("<feed")) {
			return kindHTML, mt
		}
		return kindXML, mt
	case strings.HasPrefix(mt, "text/"):
		if mt == "text/plain" && looksLikeHTML(body) {
			// Servers label HTML text/plain often enough; a browser shows
			// text, but what was meant is the page.
			return kindHTML, "text/html"
		}
		return kindText, mt
	}
	return kindOther, mt
}

func prefix(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}

// sniff guesses the kind of an unlabelled body.
func sniff(body []byte) (int, string) {
	head := bytes.TrimLeft(bytes.TrimPrefix(prefix(body, 4096), []byte("\xef\xbb\xbf")), " \t\r\n")
	switch {
	case bytes.HasPrefix(head, []byte("%PDF-")):
		return kindPDF, "application/pdf"
	case bytes.HasPrefix(head, []byte("<?xml")) && !bytes.Contains(bytes.ToLower(head), []byte("<html")):
		return kindXML, "application/xml"
	case looksLikeHTML(body):
		return kindHTML, "text/html"
	case bytes.HasPrefix(head, []byte("<?xml")) || bytes.HasPrefix(head, []byte("<rss")) || bytes.HasPrefix(head, []byte("<feed")):
		return kindXML, "application/xml"
	case (bytes.HasPrefix(head, []byte("{")) || bytes.HasPrefix(head, []byte("["))) && json.Valid(body):
		return kindJSON, "application/json"
	}
	ct := http.DetectContentType(body)
	mt, _, _ := mime.ParseMediaType(ct)
	switch {
	case mt == "text/html":
		return kindHTML, mt
	case strings.HasPrefix(mt, "text/"):
		return kindText, mt
	}
	return kindOther, mt
}

// looksLikeHTML reports HTML markup near the start of body.
func looksLikeHTML(body []byte) bool {
	head := bytes.ToLower(prefix(body, 4096))
	for _, m := range []string{"<!doctype html", "<html", "<head", "<body", "<title", "<meta", "<div", "<p>", "<article",
		"<table", "<a href", "<br>", "<br/>", "<font", "<center", "<h1", "<h2", "<ul>", "<span"} {
		if bytes.Contains(head, []byte(m)) {
			return true
		}
	}
	return false
}

// extractHTML fills p from an HTML body.
func extractHTML(ctx context.Context, in Input, o Options, base *url.URL, p *airlock.Page) error {
	body, _ := toUTF8(in.Body, in.ContentType, true)
	doc, err := parseHTML(body)
	if err != nil {
		return airlock.Errorf(airlock.CodeUpstream, airlock.ReasonHTML, "extract: parse HTML: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if wall := detectBotWall(doc, in.Header); wall != nil {
		return wall
	}
	base = documentBase(doc, base)
	if p.URL == "" && base != nil {
		p.URL = base.String()
	}
	metadata(doc, base, p)
	if o.Mode == airlock.ExtractNone {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	p.Tables = tables(doc, p)
	c, err := mainContent(ctx, doc, base, p.Title)
	if err != nil {
		return err
	}
	if p.Author == "" {
		p.Author = domByline(c.byline)
	}
	p.Text = cleanChars(c.text)
	if p.Description == "" {
		p.Description = leadParagraph(p.Text)
	}
	switch {
	case c.plain:
		// A tree this large (a hostile page of a million links) would
		// cost the converter several times its size again.
		p.Markdown = p.Text
	case c.node != nil:
		baseStr := ""
		if base != nil {
			baseStr = base.String()
		}
		md, err := toMarkdown(ctx, c.node, baseStr)
		switch {
		case ctx.Err() != nil:
			// Out of time, not a page the converter failed on.
			return ctx.Err()
		case err == nil:
			p.Markdown = cleanChars(mdTrim(md))
		default:
			p.Markdown = p.Text
		}
	}
	return ctx.Err()
}

// documentBase is the document's <base href> resolved against the
// response URL, else the response URL.
func documentBase(doc *html.Node, base *url.URL) *url.URL {
	var href string
	walkElements(doc, func(n *html.Node) bool {
		if href != "" {
			return false
		}
		switch tagAtom(n) {
		case atom.Base:
			href, _ = attr(n, "href")
			return false
		case atom.Body:
			return false
		}
		return true
	})
	href = strings.TrimSpace(href)
	if href == "" {
		return base
	}
	u, err := url.Parse(href)
	if err != nil {
		return base
	}
	if base != nil {
		u = base.ResolveReference(u)
	}
	if !u.IsAbs() {
		return base
	}
	return u
}

// passThrough fills p from a text, JSON or XML body: the text is the body
// in UTF-8.
func passThrough(in Input, kind int, p *airlock.Page) {
	body, _ := toUTF8(in.Body, in.ContentType, false)
	text := strings.ToValidUTF8(string(body), "\uFFFD")
	p.Text = text
	switch kind {
	case kindJSON:
		p.Markdown = fence(text, "json")
	case kindXML:
		p.Title = xmlTitle(body)
		p.Markdown = fence(text, "xml")
	default:
		p.Markdown = text
	}
}

// fence wraps s in a fenced code block longer than any backtick run in s.
func fence(s, lang string) string {
	ticks := "```"
	for strings.Contains(s, ticks) {
		ticks += "`"
	}
	return fmt.Sprintf("%s%s\n%s\n%s", ticks, lang, strings.TrimRight(s, "\n"), ticks)
}

// xmlTitle is the text of the first <title> element of an XML document
// (an RSS channel's or an Atom feed's title), or "".
func xmlTitle(body []byte) string {
	z := html.NewTokenizer(bytes.NewReader(body))
	depth := 0
	for {
		switch z.Next() {
		case html.ErrorToken:
			return ""
		case html.StartTagToken:
			name, _ := z.TagName()
			if depth++; depth > 64 {
				return ""
			}
			if string(name) != "title" {
				continue
			}
			var b strings.Builder
			for {
				switch z.Next() {
				case html.TextToken:
					b.Write(z.Text())
					continue
				}
				break
			}
			s := strings.TrimSpace(b.String())
			s = strings.TrimSuffix(strings.TrimPrefix(s, "<![CDATA["), "]]>")
			return collapse(s)
		case html.EndTagToken:
			depth--
		}
	}
}

// invisible are format characters with no place in plain text: soft
// hyphens (which split words for a reader that does not hide them), zero
// width spaces and no-break markers, byte order marks.
var invisible = strings.NewReplacer("\u00ad", "", "\u200b", "", "\u2060", "", "\ufeff", "")

// cleanChars removes invisible format characters and puts the text in
// Unicode normal form C, the composed form most text already is in, so
// that "é" is one letter whichever way the page wrote it.
func cleanChars(s string) string {
	if isASCII(s) {
		return s // no format characters, and in every normal form
	}
	if strings.ContainsAny(s, "\u00ad\u200b\u2060\ufeff") {
		s = invisible.Replace(s)
	}
	return norm.NFC.String(s)
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// maxLead bounds the description taken from the text.
const maxLead = 300

// leadParagraph is the first line of text long enough to be a paragraph,
// cut at maxLead bytes, for pages that describe themselves nowhere else.
func leadParagraph(text string) string {
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimPrefix(strings.TrimSpace(line), "- ")
		if countWords(line) >= 8 {
			if len(line) > maxLead {
				line = clip(line, maxLead) + "…"
			}
			return line
		}
	}
	return ""
}
