package browser

import (
	"context"
	"unicode/utf8"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/dom"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/extract"
)

// Read modes.
const (
	ReadMainContent = "main_content"
	ReadArticle     = "article"
	ReadRaw         = "raw"
)

// MaxReadRawChars caps the HTML of a raw read, in characters (Unicode code
// points).
const MaxReadRawChars = 200_000

// ReadResult is what read returns: the current document after its scripts
// ran, through the same extractor as Browse, so the Markdown has the shape
// of a fetched page's.
//
//	main_content  Title and Markdown of the main content
//	article       Page: the whole extracted page (metadata, headings,
//	              links, text, Markdown, tables)
//	raw           HTML: the serialised DOM (cut at MaxReadRawChars)
type ReadResult struct {
	Mode      string        `json:"mode"`
	URL       string        `json:"url"`
	Title     string        `json:"title,omitempty"`
	Markdown  string        `json:"markdown,omitempty"`
	Page      *airlock.Page `json:"page,omitempty"`
	HTML      string        `json:"html,omitempty"`
	Truncated bool          `json:"truncated,omitempty"`
}

// Read extracts the current tab's document in mode ("" is main_content).
//
// Errors: invalid (browser_op for a bad mode), too_large (rendered_size),
// those of the extractor, timeout, unavailable (browser_crashed).
func (s *Session) Read(ctx context.Context, mode string) (ReadResult, error) {
	if err := (Op{Kind: KindRead, Mode: mode}).Validate(); err != nil {
		return ReadResult{}, err
	}
	if mode == "" {
		mode = ReadMainContent
	}
	b, err := s.begin()
	if err != nil {
		return ReadResult{}, err
	}
	// The URL and the content come from one document (DOM.getDocument),
	// once a navigation in flight has committed; the title is the
	// history's only when it names the same URL, else the extractor's.
	s.trackerOf(b).waitCommitted(ctx, stateNavMax)
	docURL, html, err := documentHTML(ctx, b)
	var st State
	if err == nil {
		st, err = currentState(ctx, b, "read")
	}
	var (
		visible    string
		visibleCut bool
	)
	if err == nil && mode == ReadMainContent {
		visible, visibleCut, err = visibleText(ctx, b, maxVisibleChars)
	}
	s.mu.Unlock()
	if err != nil {
		return ReadResult{}, cdpErr(ctx, b, "read", err)
	}
	if st.URL != docURL {
		st = State{URL: docURL}
	}
	if len(html) > MaxRenderedBytes {
		return ReadResult{}, airlock.Errorf(airlock.CodeTooLarge, airlock.ReasonRenderedSize, "browser: read: the document is over %d bytes", MaxRenderedBytes)
	}
	r := ReadResult{Mode: mode, URL: st.URL, Title: st.Title}
	if mode == ReadRaw {
		r.HTML = html
		if utf8.RuneCountInString(html) > MaxReadRawChars {
			r.HTML, r.Truncated = string([]rune(html)[:MaxReadRawChars]), true
		}
		return r, nil
	}
	p, err := extract.Extract(ctx, extract.Input{URL: st.URL, Body: []byte(html), ContentType: "text/html; charset=utf-8"}, extract.Options{})
	if err != nil {
		return ReadResult{}, err
	}
	if p.Title != "" {
		r.Title = p.Title
	}
	if mode == ReadArticle {
		r.Page = p
		return r, nil
	}
	r.Markdown, r.Truncated = p.Markdown, len(p.Truncated) > 0
	if keptLittle(p.Markdown, visible) {
		r.Markdown, r.Truncated = visible, visibleCut
	}
	return r, nil
}

// maxVisibleChars caps the rendered text a main_content read falls back
// to, in characters.
const maxVisibleChars = 100_000

// keptLittle reports whether the extractor kept little of the page's
// rendered text: less than half of it while under keptLittleChars, or
// less than a quarter however long. On a single-page app (content in
// shadow roots, in elements no article heuristic keeps) the extractor may
// keep only a footer, and read then returns the rendered text instead;
// an article among its navigation keeps the extractor's Markdown.
func keptLittle(markdown, visible string) bool {
	m, v := utf8.RuneCountInString(markdown), utf8.RuneCountInString(visible)
	return m*4 < v || (m < keptLittleChars && m*2 < v)
}

// keptLittleChars: under it, an extraction with less than half the
// rendered text is replaced by it.
const keptLittleChars = 2000

// documentHTML returns the main frame's document URL and its serialised
// DOM, both from the same document node.
func documentHTML(ctx context.Context, b *instance) (string, string, error) {
	doc, err := cdp.Call(ctx, b.target, dom.GetDocument, dom.GetDocumentParams{Depth: new(int64(0))})
	if err != nil {
		return "", "", err
	}
	if doc.Root == nil {
		return "", "", airlock.Errorf(airlock.CodeInternal, airlock.ReasonCDP, "browser: read: no document")
	}
	res, err := cdp.Call(ctx, b.target, dom.GetOuterHTML, dom.GetOuterHTMLParams{BackendNodeID: doc.Root.BackendNodeID})
	if err != nil {
		return "", "", err
	}
	return doc.Root.DocumentURL, res.OuterHTML, nil
}
