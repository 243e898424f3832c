package browser

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/airlockhq/airlock"
)

// The 22 op kinds: the "kind" tag of the JSON union. The set is locked:
// OpCount must change with it (a test counts these constants).
const (
	KindNavigate   = "navigate"
	KindSnapshot   = "snapshot"
	KindRead       = "read"
	KindClick      = "click"
	KindFill       = "fill"
	KindPress      = "press"
	KindSelect     = "select"
	KindUpload     = "upload"
	KindDownload   = "download"
	KindScreenshot = "screenshot"
	KindGetState   = "get_state"
	KindWaitFor    = "wait_for"
	KindNetworkLog = "network_log"
	KindConsole    = "console"
	KindNewTab     = "new_tab"
	KindCloseTab   = "close_tab"
	KindBack       = "back"
	KindForward    = "forward"
	KindHover      = "hover"
	KindDblclick   = "dblclick"
	KindCheck      = "check"
	KindUncheck    = "uncheck"
)

// OpCount is the locked number of op kinds. Adding a kind means changing
// this constant, and with it the review of the op surface.
const OpCount = 22

// Limits of wait_for.
const (
	DefaultWaitTimeoutMS = 5000
	MaxWaitTimeoutMS     = 120000
)

// Op is one browser op: a tagged JSON union, {"kind":"navigate","url":"…"}.
// One flat struct carries every kind's fields; each kind accepts only its
// own fields (opSpecs) and ParseOp refuses the others.
//
//	navigate    url (required), wait_until_loaded (default true)
//	snapshot    interactive_only, max_depth, max_chars (default 12000),
//	            offset (continue the last snapshot of the page)
//	read        mode: main_content (default), article, raw
//	click       ref (an option's ref: chooses it in its <select>)
//	dblclick    ref
//	hover       ref (the pointer stays there: :hover content shows)
//	check       ref of a checkbox, radio or switch, or of its <label>
//	            (through the label when the input does not receive the click)
//	uncheck     ref, as check
//	fill        ref, text ("" clears the field)
//	press       key (a key name such as Enter, Tab, Escape, ArrowDown, or
//	            one character), ref (optional: focus it first)
//	select      ref, value (an option's value, or else its visible label)
//	upload      ref, path
//	download    url, dest_path
//	screenshot  format: png (default) or jpeg; full_page
//	get_state   -
//	wait_for    selector (CSS) or role (ARIA), exactly one; timeout_ms
//	            (default 5000, at most 120000)
//	network_log -
//	console     -
//	new_tab     url (optional)
//	close_tab   -
//	back        -
//	forward     -
//
// The actions (navigate, click, dblclick, hover, fill, press, select,
// check, uncheck, back, forward) wait
// for what they caused — a navigation (committed, then loaded, bounded),
// new windows, or the DOM settling (no mutation for 100 ms, at most 1 s)
// — and return Result.Page (the URL and title the tab is really on, the
// HTTP status of a navigation, new windows) and a fresh snapshot; each
// takes snapshot (default true): false leaves the snapshot out.
type Op struct {
	Kind            string `json:"kind"`
	URL             string `json:"url,omitempty"`
	WaitUntilLoaded *bool  `json:"wait_until_loaded,omitempty"`
	Mode            string `json:"mode,omitempty"`
	Ref             string `json:"ref,omitempty"`
	Text            string `json:"text,omitempty"`
	Key             string `json:"key,omitempty"`
	Value           string `json:"value,omitempty"`
	Path            string `json:"path,omitempty"`
	DestPath        string `json:"dest_path,omitempty"`
	Format          string `json:"format,omitempty"`
	FullPage        bool   `json:"full_page,omitempty"`
	Selector        string `json:"selector,omitempty"`
	Role            string `json:"role,omitempty"`
	TimeoutMS       int    `json:"timeout_ms,omitempty"`
	InteractiveOnly bool   `json:"interactive_only,omitempty"`
	MaxDepth        int    `json:"max_depth,omitempty"`
	MaxChars        int    `json:"max_chars,omitempty"`
	Offset          int    `json:"offset,omitempty"`
	Snapshot        *bool  `json:"snapshot,omitempty"`
}

// opSpec is what one kind accepts: its fields, and those that must be
// non-empty.
type opSpec struct {
	fields   []string
	required []string
}

// opSpecs is the registry of kinds; its size must be OpCount.
var opSpecs = map[string]opSpec{
	KindNavigate:   {fields: []string{"url", "wait_until_loaded", "snapshot"}, required: []string{"url"}},
	KindSnapshot:   {fields: []string{"interactive_only", "max_depth", "max_chars", "offset"}},
	KindRead:       {fields: []string{"mode"}},
	KindClick:      {fields: []string{"ref", "snapshot"}, required: []string{"ref"}},
	KindFill:       {fields: []string{"ref", "text", "snapshot"}, required: []string{"ref"}},
	KindPress:      {fields: []string{"key", "ref", "snapshot"}, required: []string{"key"}},
	KindSelect:     {fields: []string{"ref", "value", "snapshot"}, required: []string{"ref"}},
	KindUpload:     {fields: []string{"ref", "path"}, required: []string{"ref", "path"}},
	KindDownload:   {fields: []string{"url", "dest_path"}, required: []string{"url", "dest_path"}},
	KindScreenshot: {fields: []string{"format", "full_page"}},
	KindGetState:   {},
	KindWaitFor:    {fields: []string{"selector", "role", "timeout_ms"}},
	KindNetworkLog: {},
	KindConsole:    {},
	KindNewTab:     {fields: []string{"url"}},
	KindCloseTab:   {},
	KindBack:       {fields: []string{"snapshot"}},
	KindForward:    {fields: []string{"snapshot"}},
	KindHover:      {fields: []string{"ref", "snapshot"}, required: []string{"ref"}},
	KindDblclick:   {fields: []string{"ref", "snapshot"}, required: []string{"ref"}},
	KindCheck:      {fields: []string{"ref", "snapshot"}, required: []string{"ref"}},
	KindUncheck:    {fields: []string{"ref", "snapshot"}, required: []string{"ref"}},
}

// Kinds returns the op kinds, sorted.
func Kinds() []string {
	return slices.Sorted(maps.Keys(opSpecs))
}

func opErr(format string, args ...any) error {
	return airlock.Errorf(airlock.CodeInvalid, airlock.ReasonBrowserOp, "browser: op: "+format, args...)
}

// ParseOp decodes one op strictly: a JSON object with a known kind, only
// that kind's fields, of the right types, its required fields non-empty
// and nothing after it. Errors: invalid (browser_op).
func ParseOp(data []byte) (Op, error) {
	var op Op
	present, err := decodeStrict(data, &op, "kind")
	if err != nil {
		return Op{}, opErr("%v", err)
	}
	if err := op.check(present); err != nil {
		return Op{}, err
	}
	return op, nil
}

// decodeStrict decodes one JSON object into v (a tagged union's flat
// struct): no unknown fields, nothing after the object, and the tag
// present. It returns the names of the other fields the object has.
func decodeStrict(data []byte, v any, tag string) ([]string, error) {
	var raw map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&raw); err != nil || raw == nil {
		return nil, fmt.Errorf("not a JSON object: %v", errOrNull(err))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("trailing data after the object")
	}
	dec = json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return nil, err
	}
	if _, ok := raw[tag]; !ok {
		return nil, fmt.Errorf("no %q", tag)
	}
	present := make([]string, 0, len(raw))
	for k := range raw {
		if k != tag {
			present = append(present, k)
		}
	}
	return present, nil
}

func errOrNull(err error) any {
	if err == nil {
		return "null"
	}
	return err
}

// Validate checks an op built in Go as ParseOp checks a decoded one: a
// known kind, no fields of other kinds set, required fields non-empty,
// enumerations and ranges. Errors: invalid (browser_op).
func (op Op) Validate() error { return op.check(op.setFields()) }

// setFields names the fields of op that are not zero.
func (op Op) setFields() []string {
	var fs []string
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"url", op.URL != ""}, {"wait_until_loaded", op.WaitUntilLoaded != nil}, {"mode", op.Mode != ""},
		{"ref", op.Ref != ""}, {"text", op.Text != ""}, {"key", op.Key != ""}, {"value", op.Value != ""},
		{"path", op.Path != ""}, {"dest_path", op.DestPath != ""}, {"format", op.Format != ""},
		{"full_page", op.FullPage}, {"selector", op.Selector != ""}, {"role", op.Role != ""},
		{"timeout_ms", op.TimeoutMS != 0}, {"interactive_only", op.InteractiveOnly}, {"max_depth", op.MaxDepth != 0},
		{"max_chars", op.MaxChars != 0}, {"offset", op.Offset != 0}, {"snapshot", op.Snapshot != nil},
	} {
		if f.set {
			fs = append(fs, f.name)
		}
	}
	return fs
}

// check validates op given the names of the fields the caller gave.
func (op Op) check(present []string) error {
	spec, ok := opSpecs[op.Kind]
	if !ok {
		return opErr("unknown kind %q (one of: %s)", op.Kind, strings.Join(Kinds(), ", "))
	}
	slices.Sort(present)
	for _, f := range present {
		if !slices.Contains(spec.fields, f) {
			return opErr("field %q is not part of a %s op", f, op.Kind)
		}
	}
	set := op.setFields()
	for _, f := range spec.required {
		if !slices.Contains(set, f) {
			return opErr("a %s op needs a non-empty %q", op.Kind, f)
		}
	}
	switch op.Kind {
	case KindRead:
		switch op.Mode {
		case "", "main_content", "article", "raw":
		default:
			return opErr("read mode %q: want main_content, article or raw", op.Mode)
		}
	case KindPress:
		if _, ok := keyRune(op.Key); !ok {
			return opErr("press: unknown key %q (a key name such as Enter, Tab, Escape, ArrowDown, or one character)", op.Key)
		}
	case KindScreenshot:
		switch op.Format {
		case "", "png", "jpeg":
		default:
			return opErr("screenshot format %q: want png or jpeg", op.Format)
		}
	case KindSnapshot:
		if op.MaxChars < 0 || op.MaxChars > MaxSnapshotChars || op.MaxDepth < 0 || op.Offset < 0 {
			return opErr("snapshot: max_chars 0 to %d, max_depth and offset not negative", MaxSnapshotChars)
		}
	case KindWaitFor:
		if (op.Selector == "") == (op.Role == "") {
			return opErr(`a wait_for op needs exactly one of "selector" and "role"`)
		}
		if op.TimeoutMS < 0 || op.TimeoutMS > MaxWaitTimeoutMS {
			return opErr("wait_for timeout_ms %d: want 1 to %d (0: %d)", op.TimeoutMS, MaxWaitTimeoutMS, DefaultWaitTimeoutMS)
		}
	}
	return nil
}

// Result is what an op returns; only the part of its kind is set.
type Result struct {
	Kind       string      `json:"kind"`
	Page       *PageInfo   `json:"page,omitempty"`       // the actions: where the tab is after them
	State      *State      `json:"state,omitempty"`      // get_state, back, forward
	Snapshot   *Snapshot   `json:"snapshot,omitempty"`   // snapshot; the actions unless snapshot: false
	Screenshot *Screenshot `json:"screenshot,omitempty"` // screenshot
	Console    *ConsoleLog `json:"console,omitempty"`    // console
	Network    *NetworkLog `json:"network,omitempty"`    // network_log
	Tabs       []Tab       `json:"tabs,omitempty"`       // new_tab, close_tab
	Read       *ReadResult `json:"read,omitempty"`       // read
	Download   *Download   `json:"download,omitempty"`   // download
}

// Download is the result of a download: where the file is, relative to
// the session's files directory, its size, the name the server suggested
// (Content-Disposition's filename, else the URL's last path segment) and
// the response's Content-Type.
type Download struct {
	Path        string `json:"path"`
	Bytes       int64  `json:"bytes"`
	Name        string `json:"name,omitempty"`
	ContentType string `json:"content_type,omitempty"`
}

// Do validates op and runs it. An op that names an element or reads the
// DOM is refused on a tab that no navigate was sent to. A panic of the
// op's code is an internal error (browser_panic), not the process's end.
//
// Errors: invalid (browser_op) for a bad op, invalid (needs_url) before a
// first navigate, then those of the op's method.
func (s *Session) Do(ctx context.Context, op Op) (r Result, err error) {
	defer s.recoverOp(op.Kind, &err)
	if err := op.Validate(); err != nil {
		return Result{}, err
	}
	if opNeedsDocument(op) {
		if err := s.requireDocument(op.Kind); err != nil {
			s.emitOp(ctx, op, Result{Kind: op.Kind}, err)
			return Result{}, err
		}
	}
	return s.do(ctx, op)
}

// do validates op and runs it.
func (s *Session) do(ctx context.Context, op Op) (Result, error) {
	if err := op.Validate(); err != nil {
		return Result{}, err
	}
	kind := op.Kind
	s.curOp.Store(&kind)
	defer s.curOp.Store(nil)
	r := Result{Kind: op.Kind}
	var (
		tr   *navTracker
		mark navMark
	)
	if actionKinds[op.Kind] {
		tr, mark = s.beforeAction()
	}
	var err error
	switch op.Kind {
	case KindNavigate:
		err = s.Navigate(ctx, op.URL, op.WaitUntilLoaded == nil || *op.WaitUntilLoaded)
	case KindSnapshot:
		var snap Snapshot
		snap, err = s.Snapshot(ctx, SnapshotOptions{InteractiveOnly: op.InteractiveOnly, MaxDepth: op.MaxDepth, MaxChars: op.MaxChars, Offset: op.Offset})
		r.Snapshot = &snap
	case KindClick:
		err = s.clickRef(ctx, op.Ref)
	case KindDblclick:
		err = s.Dblclick(ctx, op.Ref)
	case KindHover:
		err = s.Hover(ctx, op.Ref)
	case KindCheck, KindUncheck:
		err = s.Check(ctx, op.Ref, op.Kind == KindCheck)
	case KindFill:
		err = s.Fill(ctx, op.Ref, op.Text)
	case KindPress:
		err = s.Press(ctx, op.Ref, op.Key)
	case KindSelect:
		err = s.selectOption(ctx, op.Ref, op.Value, true) // by value, else by visible label
	case KindScreenshot:
		var shot Screenshot
		shot, err = s.Screenshot(ctx, op.Format, op.FullPage)
		r.Screenshot = &shot
	case KindGetState:
		var st State
		st, err = s.GetState(ctx)
		r.State = &st
	case KindWaitFor:
		err = s.WaitFor(ctx, op.Selector, op.Role, op.TimeoutMS)
	case KindConsole:
		c := s.Console()
		r.Console = &c
	case KindRead:
		var rr ReadResult
		rr, err = s.Read(ctx, op.Mode)
		r.Read = &rr
	case KindUpload:
		err = s.Upload(ctx, op.Ref, op.Path)
	case KindDownload:
		var d Download
		d, err = s.Download(ctx, op.URL, op.DestPath)
		r.Download = &d
	case KindNetworkLog:
		n := s.NetworkLog()
		r.Network = &n
	case KindNewTab:
		r.Tabs, err = s.NewTab(ctx, op.URL)
	case KindCloseTab:
		r.Tabs, err = s.CloseTab(ctx)
	case KindBack, KindForward:
		var st State
		st, err = s.history(ctx, op.Kind)
		r.State = &st
	}
	if err == nil && actionKinds[op.Kind] {
		err = s.afterAction(ctx, op, tr, mark, &r)
		if err == nil && r.State != nil && r.Page != nil {
			r.State.URL, r.State.Title = r.Page.URL, r.Page.Title
		}
	}
	s.emitOp(ctx, op, r, err)
	if err != nil {
		return Result{}, err
	}
	return r, nil
}

// emitOp reports a completed op (EventOp): its kind, the tab's URL after
// it, a one-line summary, and the error's code and reason when it failed.
func (s *Session) emitOp(ctx context.Context, op Op, r Result, err error) {
	if s.opts.OnEvent == nil {
		return
	}
	ev := Event{Type: EventOp, Op: op.Kind, Summary: summarize(op, r)}
	if err != nil {
		ev.Code, ev.Reason, ev.Message = string(airlock.CodeOf(err)), string(airlock.ReasonOf(err)), airlock.PublicMessageOf(err)
	}
	if st, serr := s.GetState(ctx); serr == nil {
		ev.URL = st.URL
	}
	s.mu.Lock()
	if b := s.b; b != nil && b.cur != nil {
		ev.Tab = b.cur.id
	}
	s.mu.Unlock()
	s.emit(ev)
}

func summarize(op Op, r Result) string {
	switch {
	case r.Download != nil && r.Download.Path != "":
		return fmt.Sprintf("download %s: %d bytes (%s) saved as %s", cut(op.URL, 200), r.Download.Bytes, r.Download.ContentType, r.Download.Path)
	case op.URL != "":
		return op.Kind + " " + cut(op.URL, 200)
	case op.Ref != "":
		return op.Kind + " " + op.Ref
	case r.Snapshot != nil:
		return fmt.Sprintf("snapshot: %d refs, %d chars", r.Snapshot.Refs, utf8.RuneCountInString(r.Snapshot.Text))
	case op.Key != "":
		return op.Kind + " " + op.Key
	case op.Selector != "":
		return op.Kind + " " + cut(op.Selector, 200)
	}
	return op.Kind
}

// keyNames are the key names press accepts besides single characters.
var keyNames = map[string]rune{
	"Enter": '\r', "Tab": '\t', "Escape": '\u001b', "Backspace": '\b', "Space": ' ',
}

// keyRune maps a key name or a single character to the rune kb encodes.
func keyRune(key string) (rune, bool) {
	if r, ok := keyNames[key]; ok {
		return r, true
	}
	if r, ok := namedKeys[key]; ok {
		return r, true
	}
	if utf8.RuneCountInString(key) == 1 {
		r, _ := utf8.DecodeRuneInString(key)
		if r != utf8.RuneError && r >= ' ' {
			return r, true
		}
	}
	return 0, false
}
