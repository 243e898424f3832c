package browser

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/dom"
	"github.com/chromedp/chromedp"

	"github.com/airlockhq/airlock"
)

// Rendered is a page after its scripts ran: the document's serialised DOM.
type Rendered struct {
	HTML     []byte // the document element's outer HTML, UTF-8
	URL      string // the final URL, after redirects
	Status   int    // the HTTP status of the document response
	MIMEType string // the document response's MIME type
}

// Limits of Render.
const (
	// MaxRenderedBytes caps the serialised DOM Render returns.
	MaxRenderedBytes = 10 << 20
	// renderSettle is how long the DOM must stay unchanged after the load
	// event for Render to consider the page's scripts done, and
	// renderSettleMax bounds the wait.
	renderSettle    = 150 * time.Millisecond
	renderSettleMax = 2 * time.Second
)

// Render loads rawURL as Navigate does (the same scheme rule, Decide, both
// layers), waits for the load event and then for the DOM to stop changing
// (at most two seconds), and returns the serialised document. It is what
// the chromium Browse provider extracts pages from. Refs from earlier
// snapshots die.
//
// Errors: those of Navigate; too_large (rendered_size) above
// MaxRenderedBytes.
func (s *Session) Render(ctx context.Context, rawURL string) (Rendered, error) {
	if err := s.checkURL(rawURL); err != nil {
		return Rendered{}, err
	}
	b, err := s.begin()
	if err != nil {
		return Rendered{}, err
	}
	defer s.mu.Unlock()
	s.refs = newRefTable()
	resp, err := chromedp.NavigateResponse(rawURL)(ctx, b.target)
	var le *chromedp.LoadError
	if errors.As(err, &le) {
		if strings.Contains(le.ErrorText, "ERR_BLOCKED_BY_CLIENT") {
			return Rendered{}, airlock.Errorf(airlock.CodeDenied, airlock.ReasonBlocked, "browser: render %s: blocked by policy", rawURL)
		}
		return Rendered{}, airlock.Errorf(airlock.CodeUpstream, airlock.ReasonNavigateFailed, "browser: render %s: %s", rawURL, le.ErrorText)
	}
	if err != nil {
		return Rendered{}, cdpErr(ctx, b, "render", err)
	}
	if perr := proxyRefusal(rawURL, resp); perr != nil {
		return Rendered{}, perr
	}
	out := Rendered{URL: rawURL, Status: 200}
	if resp != nil {
		out.URL, out.Status, out.MIMEType = resp.URL, int(resp.Status), resp.MimeType
	}
	html, err := settledHTML(ctx, b)
	if err != nil {
		return Rendered{}, err
	}
	if len(html) > MaxRenderedBytes {
		return Rendered{}, airlock.Errorf(airlock.CodeTooLarge, airlock.ReasonRenderedSize,
			"browser: render %s: the rendered document is %d bytes (cap %d)", rawURL, len(html), MaxRenderedBytes)
	}
	out.HTML = []byte(html)
	return out, nil
}

// settledHTML returns the document's outer HTML once two reads
// renderSettle apart agree, or the last read after renderSettleMax.
func settledHTML(ctx context.Context, b *instance) (string, error) {
	deadline := time.Now().Add(renderSettleMax)
	prev, err := outerHTML(ctx, b)
	for err == nil && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return "", cdpErr(ctx, b, "render", ctx.Err())
		case <-time.After(renderSettle):
		}
		var cur string
		cur, err = outerHTML(ctx, b)
		if err == nil && cur == prev {
			return cur, nil
		}
		prev = cur
	}
	return prev, err
}

func outerHTML(ctx context.Context, b *instance) (string, error) {
	doc, err := cdp.Call(ctx, b.target, dom.GetDocument, dom.GetDocumentParams{Depth: new(int64(0))})
	if err != nil {
		return "", cdpErr(ctx, b, "render", err)
	}
	if doc.Root == nil {
		return "", airlock.Errorf(airlock.CodeInternal, airlock.ReasonCDP, "browser: render: no document")
	}
	res, err := cdp.Call(ctx, b.target, dom.GetOuterHTML, dom.GetOuterHTMLParams{BackendNodeID: doc.Root.BackendNodeID})
	if err != nil {
		return "", cdpErr(ctx, b, "render", err)
	}
	return res.OuterHTML, nil
}
