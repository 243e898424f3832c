package browser

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/dom"

	"github.com/airlockhq/airlock"
)

// The interact sub-actions: the "action" tag of one step of an interact
// sequence (the 18 ops are tagged by "kind"). Steps name elements by CSS
// selector, not by ref.
const (
	ActGoto            = "goto"
	ActClick           = "click"
	ActDblclick        = "dblclick"
	ActFill            = "fill"
	ActPress           = "press"
	ActSelect          = "select"
	ActExtractText     = "extract_text"
	ActWaitForSelector = "wait_for_selector"
	ActScreenshot      = "screenshot"
	ActSleep           = "sleep"
)

// Limits and defaults of interact.
const (
	DefaultActionTimeoutMS = 10000   // one step, unless it sets timeout_ms
	DefaultExtractChars    = 20000   // extract_text without max_chars
	MaxExtractChars        = 1 << 20 // max_chars at most
	MaxSleepMS             = 60000   // sleep at most
	MaxActions             = 200     // steps of one sequence
	MaxInteractBudget      = 15 * time.Minute
	defaultWaitHiddenMS    = 5000
	stepMargin             = 5 * time.Second
)

// Action is one interact step, tagged by "action":
//
//	goto               url (required), wait_until: load (default) or commit
//	click, dblclick    selector; wait_for_hidden (a selector that must be
//	                   gone first), wait_for_hidden_ms, force (skip the
//	                   visibility wait and the actionability checks),
//	                   timeout_ms
//	fill               selector, text; wait_for_hidden, wait_for_hidden_ms,
//	                   timeout_ms
//	press              key (required), selector (optional: focus it first)
//	select             selector, value
//	extract_text       selector (optional: the body), max_chars
//	wait_for_selector  selector, state: visible (default), hidden,
//	                   attached or detached; timeout_ms
//	screenshot         out_path (under the session's files directory),
//	                   full_page
//	sleep              ms (at most 60000)
type Action struct {
	Action          string `json:"action"`
	URL             string `json:"url,omitempty"`
	WaitUntil       string `json:"wait_until,omitempty"`
	Selector        string `json:"selector,omitempty"`
	Text            string `json:"text,omitempty"`
	Key             string `json:"key,omitempty"`
	Value           string `json:"value,omitempty"`
	MaxChars        int    `json:"max_chars,omitempty"`
	State           string `json:"state,omitempty"`
	TimeoutMS       int    `json:"timeout_ms,omitempty"`
	OutPath         string `json:"out_path,omitempty"`
	FullPage        bool   `json:"full_page,omitempty"`
	MS              int    `json:"ms,omitempty"`
	WaitForHidden   string `json:"wait_for_hidden,omitempty"`
	WaitForHiddenMS int    `json:"wait_for_hidden_ms,omitempty"`
	Force           bool   `json:"force,omitempty"`
}

var actionSpecs = map[string]opSpec{
	ActGoto:            {fields: []string{"url", "wait_until"}, required: []string{"url"}},
	ActClick:           {fields: []string{"selector", "wait_for_hidden", "wait_for_hidden_ms", "force", "timeout_ms"}, required: []string{"selector"}},
	ActDblclick:        {fields: []string{"selector", "wait_for_hidden", "wait_for_hidden_ms", "force", "timeout_ms"}, required: []string{"selector"}},
	ActFill:            {fields: []string{"selector", "text", "wait_for_hidden", "wait_for_hidden_ms", "force", "timeout_ms"}, required: []string{"selector"}},
	ActPress:           {fields: []string{"selector", "key", "timeout_ms"}, required: []string{"key"}},
	ActSelect:          {fields: []string{"selector", "value", "timeout_ms"}, required: []string{"selector"}},
	ActExtractText:     {fields: []string{"selector", "max_chars", "timeout_ms"}},
	ActWaitForSelector: {fields: []string{"selector", "state", "timeout_ms"}, required: []string{"selector"}},
	ActScreenshot:      {fields: []string{"out_path", "full_page"}, required: []string{"out_path"}},
	ActSleep:           {fields: []string{"ms"}, required: []string{"ms"}},
}

// Actions returns the sub-action names, sorted.
func Actions() []string {
	var out []string
	for k := range actionSpecs {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func actErr(format string, args ...any) error {
	return airlock.Errorf(airlock.CodeInvalid, airlock.ReasonBrowserAction, "browser: interact: "+format, args...)
}

// ParseAction decodes one sub-action strictly, like ParseOp: a known
// action, only its fields, required ones non-empty, values in range.
// Errors: invalid (browser_action).
func ParseAction(data []byte) (Action, error) {
	var a Action
	present, err := decodeStrict(data, &a, "action")
	if err != nil {
		return Action{}, actErr("%v", err)
	}
	return a, a.check(present)
}

// Validate checks an action built in Go as ParseAction checks a decoded
// one.
func (a Action) Validate() error { return a.check(a.setFields()) }

func (a Action) setFields() []string {
	var fs []string
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"url", a.URL != ""}, {"wait_until", a.WaitUntil != ""}, {"selector", a.Selector != ""},
		{"text", a.Text != ""}, {"key", a.Key != ""}, {"value", a.Value != ""}, {"max_chars", a.MaxChars != 0},
		{"state", a.State != ""}, {"timeout_ms", a.TimeoutMS != 0}, {"out_path", a.OutPath != ""},
		{"full_page", a.FullPage}, {"ms", a.MS != 0}, {"wait_for_hidden", a.WaitForHidden != ""},
		{"wait_for_hidden_ms", a.WaitForHiddenMS != 0}, {"force", a.Force},
	} {
		if f.set {
			fs = append(fs, f.name)
		}
	}
	return fs
}

func (a Action) check(present []string) error {
	spec, ok := actionSpecs[a.Action]
	if !ok {
		return actErr("unknown action %q (one of: %s)", a.Action, strings.Join(Actions(), ", "))
	}
	for _, f := range present {
		if !slices.Contains(spec.fields, f) {
			return actErr("field %q is not part of a %s action", f, a.Action)
		}
	}
	set := a.setFields()
	for _, f := range spec.required {
		if !slices.Contains(set, f) {
			return actErr("a %s action needs a non-empty %q", a.Action, f)
		}
	}
	switch {
	case a.TimeoutMS < 0 || a.TimeoutMS > MaxWaitTimeoutMS:
		return actErr("timeout_ms %d: want 1 to %d", a.TimeoutMS, MaxWaitTimeoutMS)
	case a.WaitForHiddenMS < 0 || a.WaitForHiddenMS > MaxWaitTimeoutMS:
		return actErr("wait_for_hidden_ms %d: want 1 to %d", a.WaitForHiddenMS, MaxWaitTimeoutMS)
	case a.MaxChars < 0 || a.MaxChars > MaxExtractChars:
		return actErr("max_chars %d: want 1 to %d", a.MaxChars, MaxExtractChars)
	case a.Action == ActSleep && (a.MS < 0 || a.MS > MaxSleepMS):
		return actErr("sleep ms %d: want 1 to %d", a.MS, MaxSleepMS)
	}
	switch a.WaitUntil {
	case "", "load", "commit":
	default:
		return actErr("wait_until %q: want load or commit", a.WaitUntil)
	}
	switch a.State {
	case "", "visible", "hidden", "attached", "detached":
	default:
		return actErr("state %q: want visible, hidden, attached or detached", a.State)
	}
	if a.Action == ActPress {
		if _, ok := keyRune(a.Key); !ok {
			return actErr("press: unknown key %q", a.Key)
		}
	}
	return nil
}

// ActionResult is the outcome of one step.
type ActionResult struct {
	Index  int            `json:"index"`
	Action string         `json:"action"`
	OK     bool           `json:"ok"`
	Error  *airlock.Error `json:"error,omitempty"`
	Text   *string        `json:"text,omitempty"`      // extract_text
	Cut    bool           `json:"truncated,omitempty"` // extract_text hit max_chars
	File   string         `json:"file,omitempty"`      // screenshot: the path under the files directory
	URL    string         `json:"url,omitempty"`       // goto, click, dblclick, fill, press, select: the URL after it
	Page   *PageInfo      `json:"page,omitempty"`      // the same steps: where the tab is after them (see PageInfo)

	// Err is the step's error, for callers in Go.
	Err error `json:"-"`
}

// InteractResult is what a sequence returns.
type InteractResult struct {
	Results     []ActionResult `json:"results"`
	Aborted     bool           `json:"aborted,omitempty"`
	AbortReason string         `json:"abort_reason,omitempty"`
	FinalURL    string         `json:"final_url"`
	Title       string         `json:"title"`
}

// FirstError is the first failed step's error, or nil.
func (r InteractResult) FirstError() error {
	for _, a := range r.Results {
		if a.Err != nil {
			return a.Err
		}
	}
	return nil
}

// InteractBudget is the wall-clock budget of a sequence of n steps: each
// step's default timeout, plus the sleeps and longer step timeouts it
// asks for, capped at MaxInteractBudget.
func InteractBudget(actions []Action) time.Duration {
	d := 10 * time.Second
	for _, a := range actions {
		d += stepMargin
		t := DefaultActionTimeoutMS
		if a.TimeoutMS > t {
			t = a.TimeoutMS
		}
		t += a.MS + a.WaitForHiddenMS
		d += time.Duration(t) * time.Millisecond
	}
	return min(d, MaxInteractBudget)
}

// Interact runs a sequence of steps in this session's current tab, within
// InteractBudget(actions). A failing step is recorded and the sequence
// goes on, unless stopOnError; a failed goto always aborts the rest
// (aborted, abort_reason goto_failed). The returned error is only for the
// sequence as a whole (invalid actions, a closed session); the steps'
// failures are in the results.
func (s *Session) Interact(ctx context.Context, actions []Action, stopOnError bool) (InteractResult, error) {
	res := InteractResult{Results: []ActionResult{}}
	if len(actions) > MaxActions {
		return res, actErr("%d actions, at most %d", len(actions), MaxActions)
	}
	for i, a := range actions {
		if err := a.Validate(); err != nil {
			return res, actErr("actions[%d]: %v", i, err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, InteractBudget(actions))
	defer cancel()
	kind := "interact"
	s.curOp.Store(&kind)
	defer s.curOp.Store(nil)
	for i, a := range actions {
		r := s.runAction(ctx, i, a)
		res.Results = append(res.Results, r)
		if r.Err == nil {
			continue
		}
		if a.Action == ActGoto {
			res.Aborted, res.AbortReason = true, "goto_failed"
			break
		}
		if stopOnError {
			res.Aborted, res.AbortReason = true, "stop_on_error"
			break
		}
		if ctx.Err() != nil {
			res.Aborted, res.AbortReason = true, "budget_exceeded"
			break
		}
	}
	if st, err := s.GetState(context.WithoutCancel(ctx)); err == nil {
		res.FinalURL, res.Title = st.URL, st.Title
	}
	return res, nil
}

func (s *Session) runAction(ctx context.Context, i int, a Action) ActionResult {
	r := ActionResult{Index: i, Action: a.Action}
	timeout := time.Duration(DefaultActionTimeoutMS) * time.Millisecond
	if a.TimeoutMS > 0 {
		timeout = time.Duration(a.TimeoutMS) * time.Millisecond
	}
	// A margin past the step's own waits, so that they end with their own
	// error (wait_for_timeout) rather than the context's.
	actx, cancel := context.WithTimeout(ctx, timeout+time.Duration(a.MS+a.WaitForHiddenMS)*time.Millisecond+stepMargin)
	defer cancel()
	var (
		tr   *navTracker
		mark navMark
	)
	acts := stepActs[a.Action]
	if acts {
		tr, mark = s.beforeAction()
	}
	err := s.safeAction(actx, a, timeout, &r)
	if err == nil && acts {
		// The step waits for what it caused, as an op does (afterAction),
		// without the snapshot.
		op := Op{Kind: KindClick, Snapshot: new(false)}
		if a.Action == ActGoto {
			op = Op{Kind: KindNavigate, WaitUntilLoaded: new(a.WaitUntil != "commit"), Snapshot: new(false)}
		}
		var res Result
		if err = s.afterAction(actx, op, tr, mark, &res); err == nil {
			r.Page, r.URL = res.Page, res.Page.URL
		}
	}
	if err != nil {
		pub := airlock.Public(err, "")
		r.Error, r.Err = &pub, err
	} else {
		r.OK = true
	}
	s.emit(Event{Type: EventOp, Op: "interact." + a.Action, URL: a.URL, Summary: a.Action + " " + cut(a.Selector, 200),
		Code: string(airlock.CodeOf(err)), Reason: string(airlock.ReasonOf(err))})
	return r
}

// safeAction runs one step; a panic of its code is the step's internal
// error.
func (s *Session) safeAction(ctx context.Context, a Action, timeout time.Duration, r *ActionResult) (err error) {
	defer s.recoverOp("interact."+a.Action, &err)
	return s.doAction(ctx, a, timeout, r)
}

// stepActs are the steps that act on the page and report where it is after
// them.
var stepActs = map[string]bool{
	ActGoto: true, ActClick: true, ActDblclick: true, ActFill: true, ActPress: true, ActSelect: true,
}

func (s *Session) doAction(ctx context.Context, a Action, timeout time.Duration, r *ActionResult) error {
	switch a.Action {
	case ActGoto:
		if err := s.Navigate(ctx, a.URL, a.WaitUntil != "commit"); err != nil {
			return err
		}
		if st, err := s.GetState(ctx); err == nil {
			r.URL = st.URL
		}
		return nil
	case ActSleep:
		t := time.NewTimer(time.Duration(a.MS) * time.Millisecond)
		defer t.Stop()
		select {
		case <-t.C:
			return nil
		case <-ctx.Done():
			return airlock.Errorf(airlock.CodeTimeout, airlock.ReasonBrowserTimeout, "browser: sleep: the sequence's budget ran out")
		}
	case ActScreenshot:
		dest, err := confine(s.opts.FilesDir, a.OutPath)
		if err != nil {
			return err
		}
		if fi, err := os.Lstat(dest); err == nil && !fi.Mode().IsRegular() {
			return pathErr("screenshot destination %q exists and is not a regular file", a.OutPath)
		}
		format := "png"
		if ext := strings.ToLower(filepath.Ext(a.OutPath)); ext == ".jpg" || ext == ".jpeg" {
			format = "jpeg"
		}
		shot, err := s.Screenshot(ctx, format, a.FullPage)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(dest), 0o700); err != nil {
			return airlock.Errorf(airlock.CodeInternal, airlock.ReasonFilesDir, "browser: screenshot: %v", err)
		}
		if err := os.WriteFile(dest, shot.Data, 0o600); err != nil {
			return airlock.Errorf(airlock.CodeInternal, airlock.ReasonFilesDir, "browser: screenshot: %v", err)
		}
		r.File = a.OutPath
		return nil
	}

	b, err := s.begin()
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	if actionNeedsDocument(a) && !hasDocument(b) {
		return errNeedsURL(a.Action)
	}
	what := a.Selector
	switch a.Action {
	case ActClick, ActDblclick, ActFill:
		if a.WaitForHidden != "" {
			ms := a.WaitForHiddenMS
			if ms == 0 {
				ms = min(defaultWaitHiddenMS, int(timeout/time.Millisecond))
			}
			s.waitDocument(ctx, b, time.Duration(ms)*time.Millisecond)
			if err := waitSelector(ctx, b, a.WaitForHidden, "hidden", time.Duration(ms)*time.Millisecond); err != nil {
				return airlock.Errorf(airlock.CodeTimeout, airlock.ReasonWaitForHidden, "browser: wait_for_hidden(%s) timed out before %s(%s)", a.WaitForHidden, a.Action, a.Selector)
			}
		}
		state := "visible"
		if a.Force {
			state = "attached"
		}
		start := time.Now()
		backend, err := findFor(ctx, b, a.Selector, state, timeout)
		if err != nil {
			return err
		}
		if !a.Force {
			if err := s.actionable(ctx, b, backend, what, a.Action, max(timeout-time.Since(start), 0)); err != nil {
				return err
			}
		}
		switch a.Action {
		case ActClick:
			return clickNode(ctx, b, backend, what, 1)
		case ActDblclick:
			return clickNode(ctx, b, backend, what, 2)
		}
		return fillNode(ctx, b, backend, what, a.Text)
	case ActPress:
		if a.Selector != "" {
			backend, err := findFor(ctx, b, a.Selector, "visible", timeout)
			if err != nil {
				return err
			}
			if _, err := cdp.Call(ctx, b.target, dom.Focus, dom.FocusParams{BackendNodeID: backend}); err != nil {
				return nodeErr(ctx, b, what, "press", err)
			}
		}
		rn, _ := keyRune(a.Key)
		return pressKey(ctx, b, rn)
	case ActSelect:
		start := time.Now()
		backend, err := findFor(ctx, b, a.Selector, "attached", timeout)
		if err != nil {
			return err
		}
		if err := s.actionable(ctx, b, backend, what, "select", max(timeout-time.Since(start), 0)); err != nil {
			return err
		}
		return selectNode(ctx, b, backend, what, "element", a.Value, false)
	case ActExtractText:
		sel := a.Selector
		if sel == "" {
			sel = "body"
		}
		backend, err := findFor(ctx, b, sel, "attached", timeout)
		if err != nil {
			return err
		}
		raw, err := callOnNode(ctx, b, backend, sel, "extract_text", textScript, nil)
		if err != nil {
			return err
		}
		var text string
		if err := json.Unmarshal(raw, &text); err != nil {
			return airlock.Errorf(airlock.CodeInternal, airlock.ReasonCDP, "browser: extract_text: unexpected result")
		}
		limit := a.MaxChars
		if limit == 0 {
			limit = DefaultExtractChars
		}
		if utf8.RuneCountInString(text) > limit {
			text, r.Cut = string([]rune(text)[:limit]), true
		}
		r.Text = &text
		return nil
	case ActWaitForSelector:
		state := a.State
		if state == "" {
			state = "visible"
		}
		if state == "hidden" || state == "detached" {
			s.waitDocument(ctx, b, timeout)
		}
		return waitStep(ctx, b, a.Selector, state, timeout)
	}
	return actErr("unknown action %q", a.Action)
}

// textScript is the fixed function extract_text runs on an element: its
// rendered text (innerText for elements, textContent otherwise).
const textScript = `function () { return typeof this.innerText === "string" ? this.innerText : (this.textContent || ""); }`

// querySelector finds the first element matching selector in the current
// tab's main document or its open shadow roots (queryDeep). Errors:
// invalid (bad_selector); other protocol failures (a document being
// replaced) read as not found.
func querySelector(ctx context.Context, b *instance, selector string) (cdp.BackendNodeID, bool, error) {
	return queryDeep(ctx, b, selector)
}

// hasBox reports whether a node is rendered (has a content box).
func hasBox(ctx context.Context, b *instance, backend cdp.BackendNodeID) bool {
	q, err := cdp.Call(ctx, b.target, dom.GetContentQuads, dom.GetContentQuadsParams{BackendNodeID: backend})
	return err == nil && len(q.Quads) > 0
}

// probe looks once: is selector in state?
func probe(ctx context.Context, b *instance, selector, state string) (cdp.BackendNodeID, bool, error) {
	backend, found, err := querySelector(ctx, b, selector)
	if err != nil {
		return 0, false, err
	}
	switch state {
	case "attached":
		return backend, found, nil
	case "detached":
		return 0, !found && surelyAbsent(ctx, b, selector), nil
	case "hidden":
		if !found {
			return 0, surelyAbsent(ctx, b, selector), nil
		}
		return 0, !seen(ctx, b, backend), nil
	}
	return backend, found && seen(ctx, b, backend), nil
}

// waitSelector polls until selector is in state or timeout passes.
// Errors: invalid (bad_selector), timeout (wait_for_timeout).
func waitSelector(ctx context.Context, b *instance, selector, state string, timeout time.Duration) error {
	_, err := findWhen(ctx, b, selector, state, timeout)
	return err
}

// findWhen polls until selector is in state (visible: attached and
// rendered) and returns the element.
func findWhen(ctx context.Context, b *instance, selector, state string, timeout time.Duration) (cdp.BackendNodeID, error) {
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(waitPoll)
	defer tick.Stop()
	for {
		backend, ok, err := probe(ctx, b, selector, state)
		switch {
		case err != nil:
			return 0, err
		case ok:
			return backend, nil
		case !time.Now().Before(deadline):
			return 0, airlock.Errorf(airlock.CodeTimeout, airlock.ReasonWaitForTimeout, "browser: %s not %s after %d ms", selector, state, timeout.Milliseconds())
		}
		select {
		case <-ctx.Done():
			if b.lost() {
				return 0, errCrashed(nil)
			}
			return 0, airlock.Errorf(airlock.CodeTimeout, airlock.ReasonWaitForTimeout, "browser: %s not %s before the deadline", selector, state)
		case <-tick.C:
		}
	}
}
