package browser

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"time"

	"github.com/chromedp/cdproto"
	"github.com/chromedp/cdproto/accessibility"
	"github.com/chromedp/cdproto/cdp"
	jsonv2 "github.com/chromedp/cdproto/cdp/jsonv2"
	"github.com/chromedp/cdproto/dom"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/airlockhq/airlock"
)

// namedKeys are kb's runes for the navigation and editing keys.
var namedKeys = map[string]rune{
	"ArrowDown": []rune(kb.ArrowDown)[0], "ArrowLeft": []rune(kb.ArrowLeft)[0],
	"ArrowRight": []rune(kb.ArrowRight)[0], "ArrowUp": []rune(kb.ArrowUp)[0],
	"End": []rune(kb.End)[0], "Home": []rune(kb.Home)[0],
	"PageDown": []rune(kb.PageDown)[0], "PageUp": []rune(kb.PageUp)[0],
	"Delete": []rune(kb.Delete)[0], "Insert": []rune(kb.Insert)[0],
}

// focusRef scrolls ref's element into view and focuses it.
func (s *Session) focusRef(ctx context.Context, b *instance, ref, op string) (refEntry, error) {
	e, err := s.resolve(ctx, b, ref)
	if err != nil {
		return refEntry{}, err
	}
	if _, err := cdp.Call(ctx, b.target, dom.ScrollIntoViewIfNeeded, dom.ScrollIntoViewIfNeededParams{BackendNodeID: e.backend}); err != nil {
		return refEntry{}, nodeErr(ctx, b, ref, op, err)
	}
	if _, err := cdp.Call(ctx, b.target, dom.Focus, dom.FocusParams{BackendNodeID: e.backend}); err != nil {
		return refEntry{}, nodeErr(ctx, b, ref, op, err)
	}
	return e, nil
}

// Press sends one key (down, char for printable keys, up) to the focused
// element, or to ref's element after focusing it when ref is not "". key is
// a name (Enter, Tab, Escape, Backspace, Space, Delete, Insert, Home, End,
// PageUp, PageDown, ArrowUp, ArrowDown, ArrowLeft, ArrowRight) or one
// character. Enter in a form field submits its form; Press does not wait
// for the navigation that may follow (wait_for does).
//
// With a ref, the element must first be actionable (attached, visible,
// enabled, waited for as the other by-ref actions wait), so that the key
// never goes to whatever else has the focus.
//
// Errors: invalid (browser_op for an unknown key, stale_ref,
// not_actionable, not_visible), timeout, unavailable (browser_crashed).
func (s *Session) Press(ctx context.Context, ref, key string) error {
	r, ok := keyRune(key)
	if !ok {
		return opErr("press: unknown key %q", key)
	}
	b, err := s.begin()
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	if ref != "" {
		e, err := s.resolve(ctx, b, ref)
		if err != nil {
			return err
		}
		if err := s.actionable(ctx, b, e.backend, ref, KindPress, s.actionTimeout(ctx)); err != nil {
			return err
		}
		if _, err := s.focusRef(ctx, b, ref, "press"); err != nil {
			return err
		}
	}
	return pressKey(ctx, b, r)
}

// pressKey sends one key (down, char for printable keys, up) to the
// focused element.
func pressKey(ctx context.Context, b *instance, r rune) error {
	for _, ev := range kb.Encode(r) {
		if _, err := cdp.Call(ctx, b.target, input.DispatchKeyEvent, *ev); err != nil {
			return cdpErr(ctx, b, "press", err)
		}
	}
	return nil
}

// selectScript is the one fixed function Select runs on a <select> element
// (Runtime.callFunctionOn, this = the element). It takes the option value as
// a JSON argument and never caller-supplied code. CDP has no command that
// chooses an option, and keyboard emulation of a native popup is
// unreliable, so this is the documented exception to "no script": it sets
// the option as a user's choice would and fires input and change.
const selectScript = `function (a) {
	if (!(this instanceof HTMLSelectElement)) return "not_select";
	if (this.disabled) return "disabled";
	const norm = (s) => s.replace(/\s+/g, " ").trim();
	let opt = null;
	for (const o of this.options) { if (o.value === a.v) { opt = o; break; } }
	if (opt === null && a.label) { for (const o of this.options) { if (norm(o.label || o.text) === norm(a.v)) { opt = o; break; } } }
	if (opt === null) return "no_option";
	if (opt.disabled) return "option_disabled";
	if (this.multiple) { for (const o of this.options) o.selected = (o === opt); } else { opt.selected = true; }
	this.dispatchEvent(new Event("input", {bubbles: true}));
	this.dispatchEvent(new Event("change", {bubbles: true}));
	return "ok";
}`

// Select chooses the option whose value is value in ref's <select> (for a
// multiple select, that option alone) and fires input and change, through
// the fixed selectScript, run in an isolated world so that the page's
// scripts cannot tamper with it.
//
// It first waits (DefaultActionTimeout at most) until the element is
// actionable: a hidden or disabled select is not_actionable.
//
// Errors: invalid (stale_ref; not_actionable; not_select when ref is not
// a <select>; no_option; disabled when the option is disabled), timeout,
// unavailable (browser_crashed).
func (s *Session) Select(ctx context.Context, ref, value string) error {
	return s.selectOption(ctx, ref, value, false)
}

// selectOption is Select; with byLabel, an option whose visible label
// (its label or text, trimmed, spaces collapsed) is value is chosen when
// no option has that value (the select op).
func (s *Session) selectOption(ctx context.Context, ref, value string, byLabel bool) error {
	b, err := s.begin()
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	e, err := s.focusRef(ctx, b, ref, "select")
	if err != nil {
		return err
	}
	if err := s.actionable(ctx, b, e.backend, ref, "select", s.actionTimeout(ctx)); err != nil {
		return err
	}
	return selectNode(ctx, b, e.backend, ref, e.role, value, byLabel)
}

// callOnNode runs one of this package's fixed functions (never caller
// code) on a node, in an isolated world of the main frame, where the
// page's scripts cannot have replaced the built-ins it uses; the DOM, and
// so the events it fires, are shared with the page. arg is passed as a
// JSON value; the result is returned by value.
func callOnNode(ctx context.Context, b *instance, backend cdp.BackendNodeID, what, op, script string, arg any) (json.RawMessage, error) {
	return callNode(ctx, b, backend, what, op, script, arg, false)
}

// callNode is callOnNode; with await, a function that returns a promise
// is awaited.
func callNode(ctx context.Context, b *instance, backend cdp.BackendNodeID, what, op, script string, arg any, await bool) (json.RawMessage, error) {
	ft, err := cdp.Call(ctx, b.target, page.GetFrameTree, cdp.Empty{})
	if err != nil {
		return nil, cdpErr(ctx, b, op, err)
	}
	if ft.FrameTree == nil || ft.FrameTree.Frame == nil {
		return nil, airlock.Errorf(airlock.CodeInternal, airlock.ReasonCDP, "browser: %s: no main frame", op)
	}
	world, err := cdp.Call(ctx, b.target, page.CreateIsolatedWorld, page.CreateIsolatedWorldParams{FrameID: ft.FrameTree.Frame.ID, WorldName: "airlock"})
	if err != nil {
		return nil, cdpErr(ctx, b, op, err)
	}
	obj, err := cdp.Call(ctx, b.target, dom.ResolveNode, dom.ResolveNodeParams{
		BackendNodeID: backend, ObjectGroup: "airlock-" + op, ExecutionContextID: world.ExecutionContextID,
	})
	if err != nil {
		return nil, nodeErr(ctx, b, what, op, err)
	}
	defer cdp.Call(context.WithoutCancel(ctx), b.target, runtime.ReleaseObjectGroup, runtime.ReleaseObjectGroupParams{ObjectGroup: "airlock-" + op})
	if obj.Object == nil || obj.Object.ObjectID == "" {
		return nil, staleRef(what, "no longer in the document")
	}
	a, err := json.Marshal(arg)
	if err != nil {
		return nil, opErr("%s: %v", op, err)
	}
	res, err := cdp.Call(ctx, b.target, runtime.CallFunctionOn, runtime.CallFunctionOnParams{
		FunctionDeclaration: script,
		ObjectID:            obj.Object.ObjectID,
		Arguments:           []*runtime.CallArgument{{Value: jsonv2.Value(a)}},
		ReturnByValue:       new(true),
		Silent:              new(true),
		AwaitPromise:        new(await),
	})
	if err != nil {
		return nil, nodeErr(ctx, b, what, op, err)
	}
	if res.ExceptionDetails != nil || res.Result == nil {
		return nil, airlock.Errorf(airlock.CodeInternal, airlock.ReasonCDP, "browser: %s %s: the internal function failed", op, what)
	}
	return json.RawMessage(res.Result.Value), nil
}

// selectNode chooses the option value of a <select> node (selectScript),
// or with byLabel the option labelled value when none has that value.
func selectNode(ctx context.Context, b *instance, backend cdp.BackendNodeID, what, role, value string, byLabel bool) error {
	raw, err := callOnNode(ctx, b, backend, what, "select", selectScript, map[string]any{"v": value, "label": byLabel})
	if err != nil {
		return err
	}
	return selectStatus(raw, what, role, value, byLabel)
}

// selectStatus maps selectScript's and optionScript's answers.
func selectStatus(raw json.RawMessage, what, role, value string, byLabel bool) error {
	var status string
	if err := json.Unmarshal(raw, &status); err != nil {
		return airlock.Errorf(airlock.CodeInternal, airlock.ReasonCDP, "browser: select %s: unexpected result %s", what, raw)
	}
	switch status {
	case "ok":
		return nil
	case "not_select":
		return airlock.Errorf(airlock.CodeInvalid, airlock.ReasonNotSelect, "browser: select %s: a %s is not a <select>", what, role)
	case "no_option":
		if byLabel {
			return airlock.Errorf(airlock.CodeInvalid, airlock.ReasonNoOption, "browser: select %s: no option has the value or the label %q", what, value)
		}
		return airlock.Errorf(airlock.CodeInvalid, airlock.ReasonNoOption, "browser: select %s: no option has the value %q", what, value)
	case "disabled", "option_disabled":
		return airlock.Errorf(airlock.CodeInvalid, airlock.ReasonDisabled, "browser: select %s: the select or its option %q is disabled", what, value)
	}
	return airlock.Errorf(airlock.CodeInternal, airlock.ReasonCDP, "browser: select %s: unexpected status %q", what, status)
}

// history goes one entry back or forward in the page's history, waits for
// the load and returns the new state. Refs die.
//
// Errors: invalid (no_history when there is no such entry), denied
// (blocked when interception refused the document), upstream
// (navigate_failed), timeout, unavailable (browser_crashed).
func (s *Session) history(ctx context.Context, kind string) (State, error) {
	b, err := s.begin()
	if err != nil {
		return State{}, err
	}
	defer s.mu.Unlock()
	h, err := cdp.Call(ctx, b.target, page.GetNavigationHistory, cdp.Empty{})
	if err != nil {
		return State{}, cdpErr(ctx, b, kind, err)
	}
	i := int(h.CurrentIndex) - 1
	act := chromedp.NavigateBack()
	if kind == KindForward {
		i, act = int(h.CurrentIndex)+1, chromedp.NavigateForward()
	}
	if i < 0 || i >= len(h.Entries) {
		return State{}, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonNoHistory, "browser: %s: no history entry to go to", kind)
	}
	s.refs = newRefTable()
	if _, err := act(ctx, b.target); err != nil {
		var le *chromedp.LoadError
		if errors.As(err, &le) {
			if strings.Contains(le.ErrorText, "ERR_BLOCKED_BY_CLIENT") {
				return State{}, airlock.Errorf(airlock.CodeDenied, airlock.ReasonBlocked, "browser: %s to %s: blocked by policy", kind, h.Entries[i].URL)
			}
			return State{}, airlock.Errorf(airlock.CodeUpstream, airlock.ReasonNavigateFailed, "browser: %s to %s: %s", kind, h.Entries[i].URL, le.ErrorText)
		}
		return State{}, cdpErr(ctx, b, kind, err)
	}
	return currentState(ctx, b, kind)
}

// Back goes one entry back in the page's history; see history.
func (s *Session) Back(ctx context.Context) (State, error) { return s.history(ctx, KindBack) }

// Forward goes one entry forward in the page's history; see history.
func (s *Session) Forward(ctx context.Context) (State, error) { return s.history(ctx, KindForward) }

// historyLag bounds how long currentState waits for the navigation
// history (kept by the browser process) to catch up with the document's
// URL (the renderer's), as after a same-document navigation.
const historyLag = 500 * time.Millisecond

// historyBusy bounds how long currentState retries a history that the
// browser does not give while the tab is between two documents.
const historyBusy = 2 * time.Second

// rendererLag bounds currentState's question to the renderer.
const rendererLag = 500 * time.Millisecond

// currentState reads the URL and title from the navigation history, once
// its current entry names the main frame's URL (waiting at most
// historyLag; past it the frame's URL wins). An error page's entry is the
// URL that failed.
func currentState(ctx context.Context, b *instance, op string) (State, error) {
	start := time.Now()
	deadline := start.Add(historyLag)
	for {
		h, err := cdp.Call(ctx, b.target, page.GetNavigationHistory, cdp.Empty{})
		var ce *cdproto.Error
		if errors.As(err, &ce) && time.Since(start) < historyBusy {
			// "Not attached to an active page": the tab is between two
			// documents.
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
				continue
			}
		}
		if err != nil {
			return State{}, cdpErr(ctx, b, op, err)
		}
		if h.CurrentIndex < 0 || int(h.CurrentIndex) >= len(h.Entries) {
			return State{}, airlock.Errorf(airlock.CodeInternal, airlock.ReasonCDP, "browser: %s: no current history entry", op)
		}
		e := h.Entries[h.CurrentIndex]
		st := State{URL: e.URL, Title: e.Title}
		// The history is the browser process's; the frame tree is the
		// renderer's, which a page's script may keep busy: bounded.
		fctx, cancel := context.WithTimeout(ctx, rendererLag)
		ft, err := cdp.Call(fctx, b.target, page.GetFrameTree, cdp.Empty{})
		cancel()
		if err != nil || ft.FrameTree == nil || ft.FrameTree.Frame == nil || ft.FrameTree.Frame.UnreachableURL != "" {
			return st, nil
		}
		f := ft.FrameTree.Frame
		if u := f.URL + f.URLFragment; u != e.URL {
			if time.Now().Before(deadline) {
				select {
				case <-ctx.Done():
					return st, nil
				case <-time.After(20 * time.Millisecond):
				}
				continue
			}
			st.URL = u
		}
		return st, nil
	}
}

// MaxScreenshotHeight caps a full-page screenshot (CSS pixels); a longer
// page is captured from the top and Screenshot.Truncated is set.
const MaxScreenshotHeight = 16384

// jpegQuality is the quality of jpeg screenshots.
const jpegQuality = 80

// Screenshot is an encoded image of the page.
type Screenshot struct {
	Format    string `json:"format"` // png or jpeg
	Data      []byte `json:"data"`   // the encoded image (base64 in JSON)
	Truncated bool   `json:"truncated,omitempty"`
}

// Screenshot captures the viewport, or with fullPage the whole scrollable
// page up to MaxScreenshotHeight, as png ("" or "png") or jpeg.
//
// Errors: invalid (browser_op for another format), timeout, unavailable
// (browser_crashed).
func (s *Session) Screenshot(ctx context.Context, format string, fullPage bool) (Screenshot, error) {
	p := page.CaptureScreenshotParams{Format: page.CaptureScreenshotFormatPng, FromSurface: new(true)}
	switch format {
	case "", "png":
		format = "png"
	case "jpeg":
		p.Format, p.Quality = page.CaptureScreenshotFormatJpeg, new(int64(jpegQuality))
	default:
		return Screenshot{}, opErr("screenshot format %q: want png or jpeg", format)
	}
	b, err := s.begin()
	if err != nil {
		return Screenshot{}, err
	}
	defer s.mu.Unlock()
	shot := Screenshot{Format: format}
	if fullPage {
		m, err := cdp.Call(ctx, b.target, page.GetLayoutMetrics, cdp.Empty{})
		if err != nil {
			return Screenshot{}, cdpErr(ctx, b, "screenshot", err)
		}
		if m.CSSContentSize == nil {
			return Screenshot{}, airlock.Errorf(airlock.CodeInternal, airlock.ReasonCDP, "browser: screenshot: no content size")
		}
		w, h := math.Ceil(m.CSSContentSize.Width), math.Ceil(m.CSSContentSize.Height)
		if h > MaxScreenshotHeight {
			h, shot.Truncated = MaxScreenshotHeight, true
		}
		p.Clip = &page.Viewport{Width: max(w, 1), Height: max(h, 1), Scale: 1}
		p.CaptureBeyondViewport = new(true)
	}
	res, err := cdp.Call(ctx, b.target, page.CaptureScreenshot, p)
	if err != nil {
		return Screenshot{}, cdpErr(ctx, b, "screenshot", err)
	}
	shot.Data = res.Data
	return shot, nil
}

// waitPoll is how often WaitFor looks again.
const waitPoll = 100 * time.Millisecond

// WaitFor waits until an element matching the CSS selector
// (DOM.querySelector) or a node with the ARIA role
// (Accessibility.queryAXTree) is in the main frame's document, polling
// until timeoutMS passes (0: DefaultWaitTimeoutMS). Exactly one of
// selector and role is given. It holds the session while it waits.
//
// Errors: invalid (browser_op; bad_selector when the selector does not
// parse), timeout (wait_for_timeout; browser_timeout when ctx ends first),
// unavailable (browser_crashed).
func (s *Session) WaitFor(ctx context.Context, selector, role string, timeoutMS int) error {
	if err := (Op{Kind: KindWaitFor, Selector: selector, Role: role, TimeoutMS: timeoutMS}).Validate(); err != nil {
		return err
	}
	if timeoutMS == 0 {
		timeoutMS = DefaultWaitTimeoutMS
	}
	what := "selector " + selector
	if role != "" {
		what = "role " + role
	}
	b, err := s.begin()
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	deadline := time.Now().Add(time.Duration(timeoutMS) * time.Millisecond)
	tick := time.NewTicker(waitPoll)
	defer tick.Stop()
	for {
		found, err := present(ctx, b, selector, role)
		switch {
		case err != nil:
			return err
		case found:
			return nil
		case !time.Now().Before(deadline):
			return airlock.Errorf(airlock.CodeTimeout, airlock.ReasonWaitForTimeout, "browser: wait_for %s: not present after %d ms", what, timeoutMS)
		}
		select {
		case <-ctx.Done():
			return airlock.Errorf(airlock.CodeTimeout, airlock.ReasonBrowserTimeout, "browser: wait_for %s: %w", what, ctx.Err())
		case <-tick.C:
		}
	}
}

// present looks once for selector or role in the main frame's document.
// Failures of a document that is being replaced count as absent.
func present(ctx context.Context, b *instance, selector, role string) (bool, error) {
	doc, err := cdp.Call(ctx, b.target, dom.GetDocument, dom.GetDocumentParams{Depth: new(int64(0))})
	if err != nil || doc.Root == nil {
		return false, transient(ctx, b, err)
	}
	if role != "" {
		q, err := cdp.Call(ctx, b.target, accessibility.QueryAXTree, accessibility.QueryAXTreeParams{BackendNodeID: doc.Root.BackendNodeID, Role: role})
		if err != nil {
			return false, transient(ctx, b, err)
		}
		for _, n := range q.Nodes {
			if !n.Ignored {
				return true, nil
			}
		}
		return false, nil
	}
	// The same lookup as interact's: it pierces open shadow roots.
	_, found, err := querySelector(ctx, b, selector)
	if err != nil {
		return false, err
	}
	return found, nil
}

// transient passes protocol errors (a document being replaced) as "not
// yet" and reports a dead browser or an ended ctx.
func transient(ctx context.Context, b *instance, err error) error {
	var ce *cdproto.Error
	if err == nil || errors.As(err, &ce) {
		return nil
	}
	return cdpErr(ctx, b, "wait_for", err)
}
