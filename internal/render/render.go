package render

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/airlockhq/airlock"
)

// Output formats of Render, RenderCrawl, RenderSearch and CrawlWriter.
// "markdown" is accepted as an alias of FormatMarkdown.
const (
	FormatJSON     = "json"  // one indented JSON value
	FormatJSONL    = "jsonl" // one compact JSON value per line
	FormatMarkdown = "md"
	FormatText     = "text"
	FormatOrg      = "org"
)

// ErrUnknownFormat is the cause (errors.Is) of the error that the renderers
// return for a format they do not know.
var ErrUnknownFormat = errors.New("render: unknown format")

var (
	errNilPage          = errors.New("render: nil page")
	errCrawlWriterEnded = errors.New("render: crawl writer already ended")
)

// Caps of the org renderer beyond airlock.OrgMaxLinks and
// airlock.OrgMaxText, in characters (runes): one headline, link or outline
// entry cannot flood the reader either.
const (
	orgMaxTitle       = 300
	orgMaxLabel       = 200 // a link description or an outline entry
	orgMaxParagraph   = 1000
	orgSpoolMemory    = 8 << 20 // bytes of streamed org nodes kept in memory before spilling to a file
	renderEllipsis    = "…"
	zeroWidthSpace    = "\u200b"
	crawlTitlePrefix  = "browse crawl — "
	searchTitlePrefix = "browse search — "
)

// Formats returns the format names that the renderers accept, canonical
// names first, then aliases.
func Formats() []string {
	return []string{FormatJSON, FormatJSONL, FormatMarkdown, FormatText, FormatOrg, "markdown"}
}

// ParseFormat returns the canonical name of format ("markdown" becomes
// "md"), or an *airlock.Error with code invalid and reason
// airlock.ReasonUnknownFormat that wraps ErrUnknownFormat.
func ParseFormat(format string) (string, error) {
	switch format {
	case FormatJSON, FormatJSONL, FormatMarkdown, FormatText, FormatOrg:
		return format, nil
	case "markdown":
		return FormatMarkdown, nil
	}
	return "", &airlock.Error{
		Code:    airlock.CodeInvalid,
		Reason:  airlock.ReasonUnknownFormat,
		Message: fmt.Sprintf("unknown format %q: want json, jsonl, md, text or org", format),
		Err:     ErrUnknownFormat,
	}
}

// Render writes p to w in format:
//
//   - json: the Page as one indented JSON object;
//   - jsonl: the Page as one line of JSON;
//   - md (alias markdown): "# Title", the URL, the metadata line, then
//     p.Markdown, or p.Text with Markdown syntax escaped when p.Markdown
//     is empty;
//   - text: the title, the URL, the metadata line, a blank line and
//     p.Text;
//   - org: one node tagged :source:point: with a properties drawer (:URL:,
//     :HOST:, and :KIND:, :AUTHOR:, :SITE:, :PUBLISHED:, :LANG: when the
//     page has them), the description, then "** outline", "** links"
//     (at most airlock.OrgMaxLinks) and "** text" (at most
//     airlock.OrgMaxText characters); empty sections are left out.
//
// The metadata line names what the page has of kind, author, site name,
// publishing date and language: "Kind: article · Author: Ann · Site:
// Example · Published: 2024-03-05 · Language: en"; a page with none of
// them has none. An empty title renders as the URL. Render is safe for concurrent use. It
// returns an *airlock.Error with code invalid for an unknown format, and
// the writer's error, wrapped, when a write fails; it writes nothing for an
// unknown format or a nil page.
func Render(w io.Writer, format string, p *airlock.Page) error {
	f, err := ParseFormat(format)
	if err != nil {
		return err
	}
	if p == nil {
		return errNilPage
	}
	var b bytes.Buffer
	if err := renderPage(&b, f, p); err != nil {
		return err
	}
	return writeAll(w, f, b.Bytes())
}

// RenderCrawl writes the pages of a crawl to w in format:
//
//   - org: one document headed "#+TITLE: browse crawl — N pages" (N is
//     len(pages), and the word is "pages" whatever N, for the sake of
//     parsers), then one node per page as Render writes it, a blank line
//     between nodes;
//   - md and text: the pages as Render writes them, separated by a "---"
//     line;
//   - jsonl: one Page per line; the summary is not written (the CLI prints
//     it on stderr);
//   - json: {"pages": [...], "summary": {...}}, indented.
//
// Only json writes sum, which may be nil. The output is that of a
// CrawlWriter fed the same pages. RenderCrawl is safe for concurrent use;
// its errors are those of Render.
func RenderCrawl(w io.Writer, format string, pages []*airlock.Page, sum *airlock.CrawlSummary) error {
	f, err := ParseFormat(format)
	if err != nil {
		return err
	}
	for _, p := range pages {
		if p == nil {
			return errNilPage
		}
	}
	if f == FormatOrg {
		// The count is known: no need for CrawlWriter's spool.
		var b bytes.Buffer
		writeOrgCrawlTitle(&b, len(pages))
		for _, p := range pages {
			b.WriteByte('\n')
			writeOrgPage(&b, p)
		}
		return writeAll(w, f, b.Bytes())
	}
	cw, _ := NewCrawlWriter(w, f)
	if err := cw.Begin(); err != nil {
		return err
	}
	for _, p := range pages {
		if err := cw.Page(p); err != nil {
			return err
		}
	}
	return cw.End(sum)
}

// RenderSearch writes the results of the search query q to w in format:
//
//   - json: {"query": q, "results": [...]}, indented;
//   - jsonl: one SearchResult per line;
//   - md: "# Search: q", then a numbered list of links with their snippets;
//   - text: a numbered list of title, URL and snippet;
//   - org: "#+TITLE: browse search — q", then one node per result with
//     :URL:, :HOST:, :ENGINE: and :RANK: properties and the snippet.
//
// RenderSearch is safe for concurrent use; its errors are those of Render.
func RenderSearch(w io.Writer, format string, q string, results []airlock.SearchResult) error {
	f, err := ParseFormat(format)
	if err != nil {
		return err
	}
	var b bytes.Buffer
	switch f {
	case FormatJSON:
		if results == nil {
			results = []airlock.SearchResult{}
		}
		err = encodeJSON(&b, struct {
			Query   string                 `json:"query"`
			Results []airlock.SearchResult `json:"results"`
		}{q, results}, true)
	case FormatJSONL:
		for _, r := range results {
			if err = encodeJSON(&b, r, false); err != nil {
				break
			}
		}
	case FormatMarkdown:
		writeMarkdownSearch(&b, q, results)
	case FormatText:
		writeTextSearch(&b, results)
	case FormatOrg:
		writeOrgSearch(&b, q, results)
	}
	if err != nil {
		return fmt.Errorf("render %s: %w", f, err)
	}
	return writeAll(w, f, b.Bytes())
}

// CrawlWriter renders the pages of a crawl as they arrive, so that a large
// crawl does not sit in memory: call Begin, Page for each page, then End,
// which must be called even when the crawl failed (sum may then be nil).
// Its output is exactly RenderCrawl's for the same pages.
//
// Org is the exception to streaming: its "#+TITLE: browse crawl — N pages"
// line comes first but N is known only at End, so a CrawlWriter for org
// keeps the rendered nodes (each capped, see Render) and writes the whole
// document at End. Up to 8 MiB are kept in memory; beyond that they spill
// to an unlinked temporary file, so memory stays flat for any crawl size.
// Use jsonl to see pages as they arrive.
//
// The zero CrawlWriter is not usable; create one with NewCrawlWriter. A
// CrawlWriter is safe for concurrent use. After a write fails, every call
// returns that error.
type CrawlWriter struct {
	mu     sync.Mutex
	w      io.Writer
	format string
	n      int // pages written
	begun  bool
	ended  bool
	err    error // sticky
	spool  orgSpool
}

// NewCrawlWriter returns a CrawlWriter that writes format to w, or an
// *airlock.Error with code invalid for an unknown format.
func NewCrawlWriter(w io.Writer, format string) (*CrawlWriter, error) {
	f, err := ParseFormat(format)
	if err != nil {
		return nil, err
	}
	return &CrawlWriter{w: w, format: f, spool: orgSpool{limit: orgSpoolMemory}}, nil
}

// Begin starts the output; Page and End call it if it has not been
// called.
func (c *CrawlWriter) Begin() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.begin()
}

func (c *CrawlWriter) begin() error {
	if c.err != nil || c.begun {
		return c.err
	}
	c.begun = true
	if c.format == FormatJSON {
		return c.write([]byte("{\n  \"pages\": ["))
	}
	return nil
}

// Page writes one page (for org, keeps it until End).
func (c *CrawlWriter) Page(p *airlock.Page) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ended {
		return errCrawlWriterEnded
	}
	if p == nil {
		return errNilPage
	}
	if err := c.begin(); err != nil {
		return err
	}
	var b bytes.Buffer
	switch c.format {
	case FormatJSON:
		if c.n > 0 {
			b.WriteByte(',')
		}
		b.WriteString("\n    ")
		if err := encodeJSONIndent(&b, p, "    "); err != nil {
			return fmt.Errorf("render %s: %w", c.format, err)
		}
	case FormatJSONL:
		if err := encodeJSON(&b, p, false); err != nil {
			return fmt.Errorf("render %s: %w", c.format, err)
		}
	case FormatMarkdown, FormatText:
		if c.n > 0 {
			b.WriteString("\n---\n\n")
		}
		if err := renderPage(&b, c.format, p); err != nil {
			return err
		}
	case FormatOrg:
		b.WriteByte('\n')
		writeOrgPage(&b, p)
		if err := c.spool.write(b.Bytes()); err != nil {
			c.err = fmt.Errorf("render org: spool: %w", err)
			return c.err
		}
		c.n++
		return nil
	}
	if err := c.write(b.Bytes()); err != nil {
		return err
	}
	c.n++
	return nil
}

// End finishes the output: for json it writes sum, for org the whole
// document. It releases the org spool whatever happens. Calling End again
// is a no-op that returns the first End's error.
func (c *CrawlWriter) End(sum *airlock.CrawlSummary) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ended {
		return c.err
	}
	c.ended = true
	defer c.spool.release()
	if err := c.begin(); err != nil {
		return err
	}
	switch c.format {
	case FormatJSON:
		var b bytes.Buffer
		if c.n > 0 {
			b.WriteString("\n  ")
		}
		b.WriteString("],\n  \"summary\": ")
		if err := encodeJSONIndent(&b, sum, "  "); err != nil {
			c.err = fmt.Errorf("render %s: %w", c.format, err)
			return c.err
		}
		b.WriteString("\n}\n")
		return c.write(b.Bytes())
	case FormatOrg:
		var b bytes.Buffer
		writeOrgCrawlTitle(&b, c.n)
		if err := c.write(b.Bytes()); err != nil {
			return err
		}
		if err := c.spool.copyTo(c.w); err != nil {
			c.err = fmt.Errorf("render org: %w", err)
			return c.err
		}
	}
	return nil
}

func (c *CrawlWriter) write(b []byte) error {
	if c.err != nil {
		return c.err
	}
	c.err = writeAll(c.w, c.format, b)
	return c.err
}

// orgSpool holds streamed org nodes: in memory up to limit bytes, then in
// a temporary file, unlinked as soon as it is created where the system
// allows, so that nothing is left behind if End is never called.
type orgSpool struct {
	limit int
	mem   bytes.Buffer
	file  *os.File
}

func (s *orgSpool) write(b []byte) error {
	if s.file == nil && s.mem.Len()+len(b) > s.limit {
		f, err := os.CreateTemp("", "airlock-crawl-*.org")
		if err != nil {
			return err
		}
		_ = os.Remove(f.Name()) // fails on Windows while open; release retries
		s.file = f
		if _, err := s.file.Write(s.mem.Bytes()); err != nil {
			return err
		}
		s.mem = bytes.Buffer{}
	}
	if s.file != nil {
		_, err := s.file.Write(b)
		return err
	}
	s.mem.Write(b)
	return nil
}

func (s *orgSpool) copyTo(w io.Writer) error {
	if s.file == nil {
		_, err := w.Write(s.mem.Bytes())
		return err
	}
	if _, err := s.file.Seek(0, io.SeekStart); err != nil {
		return err
	}
	_, err := io.Copy(w, s.file)
	return err
}

func (s *orgSpool) release() {
	s.mem = bytes.Buffer{}
	if s.file != nil {
		name := s.file.Name()
		_ = s.file.Close()
		_ = os.Remove(name)
		s.file = nil
	}
}

func writeAll(w io.Writer, format string, b []byte) error {
	if _, err := w.Write(b); err != nil {
		return fmt.Errorf("render %s: %w", format, err)
	}
	return nil
}

// renderPage writes one page in the canonical format f.
func renderPage(b *bytes.Buffer, f string, p *airlock.Page) error {
	switch f {
	case FormatJSON, FormatJSONL:
		if err := encodeJSON(b, p, f == FormatJSON); err != nil {
			return fmt.Errorf("render %s: %w", f, err)
		}
	case FormatMarkdown:
		writeMarkdownPage(b, p)
	case FormatText:
		writeTextPage(b, p)
	case FormatOrg:
		writeOrgPage(b, p)
	}
	return nil
}

// encodeJSON writes v and a newline, indented or on one line, without
// HTML escaping: the output is for terminals and files, not for HTML.
func encodeJSON(b *bytes.Buffer, v any, indent bool) error {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	if indent {
		enc.SetIndent("", "  ")
	}
	return enc.Encode(v)
}

// encodeJSONIndent writes v indented, continuation lines prefixed, without
// the trailing newline: a value nested in a streamed document.
func encodeJSONIndent(b *bytes.Buffer, v any, prefix string) error {
	var tmp bytes.Buffer
	enc := json.NewEncoder(&tmp)
	enc.SetEscapeHTML(false)
	enc.SetIndent(prefix, "  ")
	if err := enc.Encode(v); err != nil {
		return err
	}
	b.Write(bytes.TrimSuffix(tmp.Bytes(), []byte("\n")))
	return nil
}

// pageTitle is the title shown for p: its title on one line, else its URL.
func pageTitle(p *airlock.Page) string {
	if t := renderOneLine(p.Title); t != "" {
		return t
	}
	if u := renderOneLine(p.URL); u != "" {
		return u
	}
	return "untitled"
}

// maxMetaLineValue bounds each value of the metadata line.
const maxMetaLineValue = 200

// metaField is one labelled value of a page's metadata.
type metaField struct{ label, prop, value string }

// pageMeta lists the metadata of p that the renderers show, each value on
// one line, in a fixed order, leaving out empty ones.
func pageMeta(p *airlock.Page) []metaField {
	var out []metaField
	for _, f := range [...]metaField{
		{"Kind", "KIND", p.Kind},
		{"Author", "AUTHOR", p.Author},
		{"Site", "SITE", p.SiteName},
		{"Published", "PUBLISHED", p.Published},
		{"Language", "LANG", p.Lang},
	} {
		if f.value = cutLine(renderOneLine(f.value), maxMetaLineValue); f.value != "" {
			out = append(out, f)
		}
	}
	return out
}

// metaLine is the metadata line of p, each value passed through esc, or "".
func metaLine(p *airlock.Page, esc func(string) string) string {
	var parts []string
	for _, f := range pageMeta(p) {
		parts = append(parts, f.label+": "+esc(f.value))
	}
	return strings.Join(parts, " · ")
}

// ---- text ----

func writeTextPage(b *bytes.Buffer, p *airlock.Page) {
	b.WriteString(pageTitle(p))
	b.WriteByte('\n')
	if u := renderOneLine(p.URL); u != "" {
		b.WriteString(u)
		b.WriteByte('\n')
	}
	if m := metaLine(p, func(s string) string { return s }); m != "" {
		b.WriteString(m)
		b.WriteByte('\n')
	}
	if t := renderClean(p.Text); t != "" {
		b.WriteByte('\n')
		b.WriteString(t)
		b.WriteByte('\n')
	}
}

func writeTextSearch(b *bytes.Buffer, results []airlock.SearchResult) {
	if len(results) == 0 {
		b.WriteString("No results.\n")
		return
	}
	for i, r := range results {
		if i > 0 {
			b.WriteByte('\n')
		}
		num := strconv.Itoa(i+1) + ". "
		pad := strings.Repeat(" ", len(num))
		title := renderOneLine(r.Title)
		u := renderOneLine(r.URL)
		if title == "" {
			title = u
		}
		b.WriteString(num + title + "\n")
		if u != "" {
			b.WriteString(pad + u + "\n")
		}
		if s := renderOneLine(r.Snippet); s != "" {
			b.WriteString(pad + s + "\n")
		}
	}
}

// ---- markdown ----

func writeMarkdownPage(b *bytes.Buffer, p *airlock.Page) {
	b.WriteString("# " + mdHeading(pageTitle(p)) + "\n")
	if u := renderOneLine(p.URL); u != "" {
		b.WriteString("\n" + mdURL(u) + "\n")
	}
	if m := metaLine(p, mdInline); m != "" {
		b.WriteString("\n" + m + "\n")
	}
	if md := strings.Trim(renderSanitize(p.Markdown), "\n"); strings.TrimSpace(md) != "" {
		b.WriteString("\n" + md + "\n")
		return
	}
	if t := renderClean(p.Text); t != "" {
		// Plain text: each line is a block, so each becomes a paragraph.
		for _, line := range strings.Split(t, "\n") {
			if line = mdLine(line); line != "" {
				b.WriteString("\n" + line + "\n")
			}
		}
	}
}

func writeMarkdownSearch(b *bytes.Buffer, q string, results []airlock.SearchResult) {
	b.WriteString("# Search: " + mdHeading(renderOneLine(q)) + "\n")
	if len(results) == 0 {
		b.WriteString("\nNo results.\n")
		return
	}
	for i, r := range results {
		num := strconv.Itoa(i+1) + ". "
		pad := strings.Repeat(" ", len(num))
		u := renderOneLine(r.URL)
		title := renderOneLine(r.Title)
		if title == "" {
			title = u
		}
		item := mdInline(title)
		if webURL(u) {
			item = "[" + item + "](<" + mdDestination(u) + ">)"
		}
		b.WriteString("\n" + num + item + "\n")
		if s := renderOneLine(r.Snippet); s != "" {
			b.WriteString("\n" + pad + mdInline(s) + "\n")
		}
	}
}

// mdInline backslash-escapes the characters that open inline Markdown
// (emphasis, code, links, strikethrough) or raw HTML.
func mdInline(s string) string {
	if !strings.ContainsAny(s, "\\`*_[]<>~") {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune("\\`*_[]<>~", r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// The patterns of this file compile on first use: every process that
// imports render (each CLI call) would otherwise pay for them at start.
var (
	mdClosingHashes = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(^|[ \t])(#+)[ \t]*$`) })
	mdOrderedMarker = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^([0-9]{1,9})([.)])`) })
)

// mdHeading escapes s for the content of an ATX heading: inline syntax,
// and a trailing run of # that would be read as the closing sequence.
func mdHeading(s string) string {
	s = mdInline(s)
	if m := mdClosingHashes().FindStringSubmatchIndex(s); m != nil {
		s = s[:m[4]] + `\` + s[m[4]:]
	}
	return s
}

// mdLine escapes one line of plain text for a Markdown paragraph of its
// own: inline syntax, and block markers at its start (headings, quotes,
// lists, thematic breaks, tables). Leading blanks would make a code block:
// they go.
func mdLine(s string) string {
	s = mdInline(strings.TrimLeft(s, " \t"))
	if s == "" {
		return s
	}
	if strings.ContainsRune("#>+-=|", rune(s[0])) {
		return `\` + s
	}
	if m := mdOrderedMarker().FindStringSubmatchIndex(s); m != nil {
		return s[:m[4]] + `\` + s[m[4]:]
	}
	return s
}

// mdURL is a URL as a line of its own: an autolink when it can be one.
func mdURL(u string) string {
	if webURL(u) && !strings.ContainsAny(u, "<> ") {
		return "<" + u + ">"
	}
	return mdInline(u)
}

// mdDestination is u for a link destination in angle brackets, which
// cannot hold "<", ">" or a line break.
func mdDestination(u string) string {
	return strings.NewReplacer("<", "%3C", ">", "%3E", " ", "%20").Replace(u)
}

// ---- org ----

func writeOrgCrawlTitle(b *bytes.Buffer, n int) {
	b.WriteString("#+TITLE: " + crawlTitlePrefix + strconv.Itoa(n) + " pages\n")
}

// writeOrgPage writes the node of one page, ending with a newline.
func writeOrgPage(b *bytes.Buffer, p *airlock.Page) {
	b.WriteString("* " + orgTitle(pageTitle(p)) + " :source:point:\n")
	b.WriteString(":PROPERTIES:\n")
	u := orgPropertyURL(p.URL)
	if u != "" {
		b.WriteString(":URL: " + u + "\n")
	}
	if h := urlHost(p.URL); h != "" {
		b.WriteString(":HOST: " + h + "\n")
	}
	for _, f := range pageMeta(p) {
		b.WriteString(":" + f.prop + ": " + orgPropertyValue(f.value) + "\n")
	}
	b.WriteString(":END:\n")
	if d := orgParagraph(p.Description); d != "" && !opensWith(p.Text, p.Description) {
		b.WriteString(d + "\n")
	}
	writeOrgOutline(b, p.Headings)
	writeOrgLinks(b, p.Links)
	if t := renderClean(p.Text); t != "" {
		t, _ = cutText(t, airlock.OrgMaxText)
		b.WriteString("** text\n")
		for _, line := range strings.Split(t, "\n") {
			b.WriteString(orgLine(orgInline(line)) + "\n")
		}
	}
}

// opensWith reports that text begins with the description d (white space
// aside, and a cut description's "…" too): a page without a written
// description has the opening of its text as one, and the lead then
// would be printed twice.
func opensWith(text, d string) bool {
	d = strings.Join(strings.Fields(strings.TrimSuffix(strings.TrimSpace(d), "…")), " ")
	if d == "" {
		return false
	}
	t := strings.Join(strings.Fields(text[:min(len(text), 4*len(d)+64)]), " ")
	return strings.HasPrefix(t, d)
}

func writeOrgOutline(b *bytes.Buffer, headings []airlock.Heading) {
	if len(headings) > airlock.MaxHeadings {
		headings = headings[:airlock.MaxHeadings]
	}
	type item struct {
		level int
		text  string
	}
	items := make([]item, 0, len(headings))
	minLevel := 6
	for _, h := range headings {
		t := orgLabel(h.Text)
		if t == "" {
			continue
		}
		lvl := min(max(h.Level, 1), 6)
		minLevel = min(minLevel, lvl)
		items = append(items, item{lvl, t})
	}
	if len(items) == 0 {
		return
	}
	b.WriteString("** outline\n")
	for _, it := range items {
		// The shallowest level present is the list's top level.
		b.WriteString(strings.Repeat("  ", it.level-minLevel) + "- " + it.text + "\n")
	}
}

func writeOrgLinks(b *bytes.Buffer, links []airlock.Link) {
	if len(links) == 0 {
		return
	}
	b.WriteString("** links\n")
	shown, omitted := 0, 0
	for _, l := range links {
		target, ok := orgLinkTarget(l.URL)
		if !ok || shown == airlock.OrgMaxLinks {
			omitted++
			continue
		}
		shown++
		if d := orgLinkDescription(l.Text); d != "" {
			b.WriteString("- [[" + target + "][" + d + "]]\n")
		} else {
			b.WriteString("- [[" + target + "]]\n")
		}
	}
	switch {
	case omitted == 0:
	case shown == 0:
		fmt.Fprintf(b, "(%d links not shown)\n", omitted)
	default:
		fmt.Fprintf(b, "(%d more links not shown)\n", omitted)
	}
}

func writeOrgSearch(b *bytes.Buffer, q string, results []airlock.SearchResult) {
	b.WriteString("#+TITLE: " + searchTitlePrefix + orgInline(cutLine(renderOneLine(q), orgMaxTitle)) + "\n")
	for _, r := range results {
		title := renderOneLine(r.Title)
		if title == "" {
			title = renderOneLine(r.URL)
		}
		if title == "" {
			title = "untitled"
		}
		b.WriteString("\n* " + orgTitle(title) + "\n")
		b.WriteString(":PROPERTIES:\n")
		if u := orgPropertyURL(r.URL); u != "" {
			b.WriteString(":URL: " + u + "\n")
		}
		if h := urlHost(r.URL); h != "" {
			b.WriteString(":HOST: " + h + "\n")
		}
		if e := orgPropertyValue(r.Engine); e != "" {
			b.WriteString(":ENGINE: " + e + "\n")
		}
		if r.Rank > 0 {
			b.WriteString(":RANK: " + strconv.Itoa(r.Rank) + "\n")
		}
		b.WriteString(":END:\n")
		if s := orgParagraph(r.Snippet); s != "" {
			b.WriteString(s + "\n")
		}
	}
}

var (
	// orgLineHazard matches a line that org reads as structure: a headline,
	// keyword or block, comment, drawer, fixed-width line, planning line,
	// LaTeX environment, diary sexp or footnote definition. Leading commas
	// are part of each pattern, so that escaping (one more comma) is
	// reversible.
	orgLineHazard = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^(?:,*\*+(?:[ \t]|$)|,*%%\(|,*\[fn:|[ \t]*,*(?:#\+|#(?:[ \t]|$)|:[\p{L}\p{N}_-]+:[ \t]*$|:(?:[ \t]|$)|(?:SCHEDULED|DEADLINE|CLOSED|CLOCK):|\\begin\{))`)
	})
	// orgInlineBabel matches inline source blocks and calls.
	orgInlineBabel = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?i)(?:src|call)_[^\s\[\]{}()]+[\[{(]`) })
	// orgTrailingTags matches what org would read as a headline's tags.
	orgTrailingTags = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(^|[ \t])(:[\p{L}\p{N}_@#%:]+:)[ \t]*$`) })
	orgLeadingTODO  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(?:TODO|DONE|COMMENT)(?:[ \t]|$)`) })
)

// orgLine comma-escapes a line that org would read as structure.
func orgLine(s string) string {
	if !orgLineHazard().MatchString(s) {
		return s
	}
	i := len(s) - len(strings.TrimLeft(s, " \t"))
	return s[:i] + "," + s[i:]
}

// orgInline inserts zero width spaces where org would read inline syntax:
// links, footnote references, timestamps, diary sexps, targets, macros and
// inline Babel.
func orgInline(s string) string {
	if locs := orgInlineBabel().FindAllStringIndex(s, -1); locs != nil {
		var b strings.Builder
		last := 0
		for _, l := range locs {
			us := l[0] + strings.IndexByte(s[l[0]:l[1]], '_')
			b.WriteString(s[last:us] + zeroWidthSpace)
			last = us
		}
		b.WriteString(s[last:])
		s = b.String()
	}
	if !strings.ContainsAny(s, "[]<{") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		b.WriteByte(c)
		rest := s[i+1:]
		var split bool
		switch c {
		case '[':
			split = strings.HasPrefix(rest, "[") || strings.HasPrefix(strings.ToLower(rest), "fn:")
		case ']':
			split = strings.HasPrefix(rest, "]")
		case '<':
			split = strings.HasPrefix(rest, "<") || strings.HasPrefix(rest, "%%(") ||
				(rest != "" && rest[0] >= '0' && rest[0] <= '9')
		case '{':
			split = strings.HasPrefix(rest, "{{")
		}
		if split {
			b.WriteString(zeroWidthSpace)
		}
	}
	return b.String()
}

// orgTitle escapes one line of text for a headline.
func orgTitle(s string) string {
	s = orgInline(cutLine(s, orgMaxTitle))
	if orgLeadingTODO().MatchString(s) {
		s = zeroWidthSpace + s
	}
	if strings.HasPrefix(s, "[#") {
		s = "[" + zeroWidthSpace + s[1:]
	}
	if m := orgTrailingTags().FindStringSubmatchIndex(s); m != nil {
		s = s[:m[4]] + zeroWidthSpace + s[m[4]:]
	}
	return s
}

// orgLabel escapes a heading for an outline list item; "" for an empty
// one.
func orgLabel(s string) string {
	s = orgInline(cutLine(renderOneLine(s), orgMaxLabel))
	if strings.HasPrefix(s, "[") { // a checkbox or counter
		s = zeroWidthSpace + s
	}
	return s
}

// orgLinkDescription is s for a link description, which cannot hold "]]":
// brackets become parentheses.
func orgLinkDescription(s string) string {
	s = strings.NewReplacer("[", "(", "]", ")").Replace(cutLine(renderOneLine(s), orgMaxLabel))
	return orgInline(s)
}

// orgParagraph is s on one line, escaped, for a paragraph of its own.
func orgParagraph(s string) string {
	return orgLine(orgInline(cutLine(renderOneLine(s), orgMaxParagraph)))
}

// orgPropertyValue is s on one line for a property value.
func orgPropertyValue(s string) string {
	return renderOneLine(s)
}

// orgPropertyURL is u for a property value: one line, no spaces.
func orgPropertyURL(u string) string {
	return percentUnsafe(strings.TrimSpace(u), "")
}

// orgLinkTarget is u as the target of an org bracket link, or false when u
// is not a web link.
func orgLinkTarget(u string) (string, bool) {
	u = strings.TrimSpace(u)
	if !webURL(u) {
		return "", false
	}
	i := strings.IndexByte(u, ':') + 1
	auth := ""
	if strings.HasPrefix(u[i:], "//") {
		i += 2
		j := strings.IndexAny(u[i:], "/?#")
		if j < 0 {
			j = len(u) - i
		}
		auth = u[i : i+j]
		auth = strings.NewReplacer("[", `\[`, "]", `\]`).Replace(percentUnsafe(auth, `\`))
		return u[:i] + auth + percentUnsafe(u[i+j:], `[]\`), true
	}
	return u[:i] + percentUnsafe(u[i:], `[]\`), true
}

// webURL reports whether u has a scheme that is safe to follow from a
// document: http, https, ftp or mailto.
func webURL(u string) bool {
	i := strings.IndexByte(u, ':')
	if i <= 0 {
		return false
	}
	switch strings.ToLower(u[:i]) {
	case "http", "https", "ftp":
		return strings.HasPrefix(u[i+1:], "//") && len(u) > i+3
	case "mailto":
		return len(u) > i+1
	}
	return false
}

// percentUnsafe percent-encodes spaces, control characters, invalid UTF-8
// and the bytes of extra.
func percentUnsafe(s, extra string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && n == 1) || r <= ' ' || r == 0x7f || (r >= 0x80 && r <= 0x9f) ||
			(r < utf8.RuneSelf && strings.IndexByte(extra, byte(r)) >= 0) {
			for _, c := range []byte(s[i : i+n]) {
				fmt.Fprintf(&b, "%%%02X", c)
			}
		} else {
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// urlHost is the host name of u, lower case, without port or IPv6
// brackets; "" when u has none.
func urlHost(u string) string {
	pu, err := url.Parse(strings.TrimSpace(u))
	if err != nil {
		return ""
	}
	return renderOneLine(strings.ToLower(pu.Hostname()))
}

// ---- text clean-up shared by md, text and org ----

// renderSanitize makes s valid UTF-8 with LF line ends and no control
// characters but tab and newline: a page must not drive the reader's
// terminal.
func renderSanitize(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.ReplaceAll(s, "\r\n", "\n")
	return strings.Map(func(r rune) rune {
		switch {
		case r == '\n' || r == '\t':
			return r
		case r == '\r' || r == '\f' || r == '\v' || r == 0x85 || r == '\u2028' || r == '\u2029':
			return '\n'
		case r < ' ' || r == 0x7f || (r >= 0x80 && r <= 0x9f):
			return -1
		}
		return r
	}, s)
}

// renderClean is renderSanitize with blanks trimmed from line ends, at most
// one blank line in a row and none at either end.
func renderClean(s string) string {
	lines := strings.Split(renderSanitize(s), "\n")
	out := lines[:0]
	blank := true // drops leading blank lines
	for _, l := range lines {
		l = strings.TrimRightFunc(l, unicode.IsSpace)
		if l == "" {
			if !blank {
				out = append(out, l)
			}
			blank = true
			continue
		}
		blank = false
		out = append(out, l)
	}
	for len(out) > 0 && out[len(out)-1] == "" {
		out = out[:len(out)-1]
	}
	return strings.Join(out, "\n")
}

// renderOneLine is s sanitized, on one line, runs of white space collapsed.
func renderOneLine(s string) string {
	return strings.Join(strings.Fields(renderSanitize(s)), " ")
}

// cutLine is cutText's result without the report.
func cutLine(s string, limit int) string {
	s, _ = cutText(s, limit)
	return s
}

// cutText returns s cut to at most limit runes, the ellipsis included, and
// whether it was cut. It cuts between runes and not inside a combining
// sequence, at the last white space if one is in the final fifth (at
// most 80 runes), and ends the result with an ellipsis.
func cutText(s string, limit int) (string, bool) {
	if limit <= 0 || utf8.RuneCountInString(s) <= limit {
		return s, false
	}
	keep := limit - utf8.RuneCountInString(renderEllipsis)
	if keep <= 0 {
		return renderEllipsis, true
	}
	end, n := 0, 0
	for end < len(s) && n < keep {
		_, size := utf8.DecodeRuneInString(s[end:])
		end += size
		n++
	}
	// Do not split a base from its marks, or a joined emoji sequence.
	for steps := 0; end > 0 && steps < 16; steps++ {
		next, _ := utf8.DecodeRuneInString(s[end:])
		prev, size := utf8.DecodeLastRuneInString(s[:end])
		if !unicode.Is(unicode.M, next) && next != '\u200d' && prev != '\u200d' && !unicode.Is(unicode.Variation_Selector, next) {
			break
		}
		end -= size
	}
	cut := s[:end]
	if next, _ := utf8.DecodeRuneInString(s[end:]); !unicode.IsSpace(next) {
		window := min(80, keep/5)
		if i := strings.LastIndexFunc(cut, unicode.IsSpace); i > 0 && utf8.RuneCountInString(cut[i:]) <= window {
			cut = cut[:i]
		}
	}
	return strings.TrimRightFunc(cut, unicode.IsSpace) + renderEllipsis, true
}
