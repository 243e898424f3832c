package browser

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/airlockhq/airlock"
)

// Why the guards below exist: chromedp keeps its own model of a target's
// frames, fed by Page.frameNavigated. A target created by the browser
// (the first tab) or by Target.createTarget (new_tab) never sends one for
// its initial about:blank, so chromedp has no current frame; the first DOM
// event after a DOM call (a selector query, a ref's lookup) then
// dereferences that missing frame in chromedp's own event goroutine,
// where no recover of ours can run, and the whole process dies. Two
// guards close this:
//
//   - every tab is navigated to about:blank, and its main frame seen,
//     before it accepts ops (openBlank), so chromedp always has a frame;
//   - an op or interact step that names an element is refused before any browser call on a tab no navigate was sent to
//     (invalid, needs_url): there is nothing to find there anyway.
//
// recoverOp is a last line of defence around this package's own op code.

// aboutBlank is the document every tab starts on.
const aboutBlank = "about:blank"

// blankTimeout bounds openBlank when the caller's context does not.
const blankTimeout = 30 * time.Second

// openBlank navigates t to about:blank and waits until its main frame has
// navigated, then clears the history: from then on chromedp has a current
// frame for t (its events are handled in order, so every later DOM event
// finds it).
func openBlank(ctx context.Context, t *chromedp.Target) error {
	ctx, stop := context.WithTimeout(ctx, blankTimeout)
	defer stop()
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	navs := cdp.Events(lctx, t, page.FrameNavigated) // subscribes now
	res, err := cdp.Call(ctx, t, page.Navigate, page.NavigateParams{URL: aboutBlank})
	if err == nil && res.ErrorText != "" {
		err = fmt.Errorf("navigate %s: %s", aboutBlank, res.ErrorText)
	}
	if err != nil {
		cancel()
		for range navs { // ends the subscription
		}
		return err
	}
	for ev, err := range navs {
		if err != nil {
			return err
		}
		if ev.Frame != nil && ev.Frame.ParentID == "" {
			resetHistory(ctx, t)
			return nil
		}
	}
	return ctx.Err()
}

// resetHistory clears t's history, so that the tab's initial about:blank
// is no back entry of its own. Right after the navigation Chromium may
// answer "Not attached to an active page" while the frame settles: it is
// retried for a while; failing that, back has one about:blank more.
func resetHistory(ctx context.Context, t *chromedp.Target) {
	for range 100 {
		if _, err := cdp.Call(ctx, t, page.ResetNavigationHistory, cdp.Empty{}); err == nil || ctx.Err() != nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// errNeedsURL refuses what needs a document on a tab that has none.
func errNeedsURL(what string) error {
	return airlock.Errorf(airlock.CodeInvalid, airlock.ReasonNeedsURL,
		"browser: %s needs a page: navigate first (the tab is on about:blank)", what)
}

// opNeedsDocument reports whether op names an element (by ref or
// selector). A snapshot or read of about:blank is no error: it tells the
// truth, an empty page.
func opNeedsDocument(op Op) bool {
	switch op.Kind {
	case KindClick, KindFill, KindSelect, KindUpload, KindWaitFor, KindHover, KindDblclick, KindCheck, KindUncheck:
		return true
	case KindPress:
		return op.Ref != ""
	}
	return false
}

// actionNeedsDocument reports whether an interact step names an element
// (extract_text without a selector names body).
func actionNeedsDocument(a Action) bool {
	switch a.Action {
	case ActClick, ActDblclick, ActFill, ActSelect, ActExtractText, ActWaitForSelector:
		return true
	case ActPress:
		return a.Selector != ""
	}
	return false
}

// hasDocument reports whether a navigate was sent to b's current tab. The
// caller holds s.mu.
func hasDocument(b *instance) bool { return b.cur != nil && b.cur.doc }

// requireDocument refuses what (an op kind) when the current tab has no
// document. A closed or crashed session passes: the op reports that.
func (s *Session) requireDocument(what string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.b == nil || hasDocument(s.b) {
		return nil
	}
	return errNeedsURL(what)
}

// recoverOp turns a panic of this package's op code into an internal
// error (logged with its stack) instead of the end of the process. It must
// be deferred directly.
func (s *Session) recoverOp(what string, err *error) {
	v := recover()
	if v == nil {
		return
	}
	l := s.opts.Logger
	if l == nil {
		l = slog.Default()
	}
	l.Error("browser: op panicked", "op", what, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
	*err = airlock.Errorf(airlock.CodeInternal, airlock.ReasonBrowserPanic, "browser: %s failed unexpectedly", what)
}
