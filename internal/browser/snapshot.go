package browser

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/chromedp/cdproto"
	"github.com/chromedp/cdproto/accessibility"
	"github.com/chromedp/cdproto/cdp"
	jsonv2 "github.com/chromedp/cdproto/cdp/jsonv2"
	"github.com/chromedp/cdproto/dom"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/cdproto/page"

	"github.com/airlockhq/airlock"
)

// refEntry is what a ref stands for: a DOM node of one document.
type refEntry struct {
	backend cdp.BackendNodeID
	loader  cdp.LoaderID // the main frame's document when the ref was minted
	role    string
	name    string
	nth     int // 1 for the first element with this role and name in the outline, 2 for the next, ...
}

// refTable holds the refs of the current document. A new table replaces it
// on every Navigate and Restart; ref numbers come from the session and are
// never reused. An element keeps its ref across the snapshots of its
// document (byNode: backend node ids are never reused within a browser),
// so that the same button is the same @eN in every reply.
type refTable struct {
	byRef  map[string]refEntry
	byNode map[cdp.BackendNodeID]string
}

func newRefTable() *refTable {
	return &refTable{byRef: make(map[string]refEntry), byNode: make(map[cdp.BackendNodeID]string)}
}

// interactiveRoles get a ref even without a name.
var interactiveRoles = map[string]bool{
	"button": true, "link": true, "textbox": true, "searchbox": true, "checkbox": true,
	"radio": true, "combobox": true, "listbox": true, "option": true, "menuitem": true,
	"menuitemcheckbox": true, "menuitemradio": true, "tab": true, "switch": true,
	"slider": true, "spinbutton": true, "treeitem": true,
}

// fillableRoles accept Fill.
var fillableRoles = map[string]bool{"textbox": true, "searchbox": true, "combobox": true, "spinbutton": true}

// transparentRoles are not printed; their children move up a level.
var transparentRoles = map[string]bool{
	"none": true, "presentation": true, "generic": true, "InlineTextBox": true, "LineBreak": true, "RootWebArea": true, "LabelText": true,
}

// DefaultSnapshotChars is the character budget of one snapshot page.
const DefaultSnapshotChars = 12000

// MaxSnapshotChars caps max_chars.
const MaxSnapshotChars = 200000

// SnapshotOptions shape a snapshot.
type SnapshotOptions struct {
	// InteractiveOnly prints only elements with an interactive role
	// (buttons, links, fields, ...), one per line, unindented.
	InteractiveOnly bool
	// MaxDepth stops the outline below this depth (0: no limit).
	MaxDepth int
	// MaxChars is the budget of this page of the outline (0:
	// DefaultSnapshotChars). A longer outline ends with a truncation
	// marker that names the offset to continue from.
	MaxChars int
	// Offset continues the last snapshot of the same document from this
	// character (0: take a new snapshot). An offset into a document that
	// has since navigated, or with other options, is refused (stale
	// snapshot).
	Offset int
}

// Snapshot is a compact outline of the page's accessibility tree.
type Snapshot struct {
	// Text has one line per printed node, in document order, indented two
	// spaces per level: `- role "name" @eN`, with value="…" for fields and
	// [checked] / [disabled] states. Iframes' documents are nested under
	// their iframe line; shadow DOM is part of the tree.
	Text string `json:"text"`
	// Refs is the number of refs the whole outline names.
	Refs int `json:"refs"`
	// TotalChars is the length of the whole outline in characters
	// (Unicode code points, as max_chars and offsets count); Truncated and
	// NextOffset say there is more and where it continues.
	TotalChars int  `json:"total_chars"`
	Truncated  bool `json:"truncated,omitempty"`
	NextOffset int  `json:"next_offset,omitempty"`
}

// lastOutline is the full outline of the last snapshot, for paging.
type lastOutline struct {
	loader cdp.LoaderID
	opts   SnapshotOptions // with Offset and MaxChars zeroed
	text   string
	refs   int
}

// Snapshot reads the current tab's accessibility tree
// (Accessibility.getFullAXTree for the main frame and each of its
// iframes' documents) and mints refs for interactive and named elements.
// Refs of earlier snapshots of the same document stay valid; a ref number
// is never reused.
//
// Errors: invalid (browser_op for bad options; stale_snapshot for an
// Offset that does not continue the last snapshot), timeout, unavailable
// (browser_crashed).
func (s *Session) Snapshot(ctx context.Context, o SnapshotOptions) (Snapshot, error) {
	if o.MaxChars < 0 || o.MaxChars > MaxSnapshotChars || o.MaxDepth < 0 || o.Offset < 0 {
		return Snapshot{}, opErr("snapshot: max_chars 0 to %d, max_depth and offset not negative", MaxSnapshotChars)
	}
	b, err := s.begin()
	if err != nil {
		return Snapshot{}, err
	}
	defer s.mu.Unlock()
	return s.snapshotLocked(ctx, b, o)
}

// snapshotLocked is Snapshot with s.mu held and the options checked.
func (s *Session) snapshotLocked(ctx context.Context, b *instance, o SnapshotOptions) (Snapshot, error) {
	budget := o.MaxChars
	if budget == 0 {
		budget = DefaultSnapshotChars
	}
	loader, err := mainLoader(ctx, b)
	if err != nil {
		return Snapshot{}, cdpErr(ctx, b, "snapshot", err)
	}
	key := SnapshotOptions{InteractiveOnly: o.InteractiveOnly, MaxDepth: o.MaxDepth}
	var full lastOutline
	if o.Offset > 0 {
		if s.last == nil || s.last.loader != loader || s.last.opts != key || o.Offset >= utf8.RuneCountInString(s.last.text) {
			return Snapshot{}, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonStaleSnapshot,
				"browser: snapshot offset %d does not continue the last snapshot of this page: take a new one (offset 0)", o.Offset)
		}
		full = *s.last
	} else {
		full, err = s.outline(ctx, b, loader, key)
		if err != nil {
			return Snapshot{}, err
		}
		s.last = &full
	}
	return pageOf(full, o.Offset, budget), nil
}

// markerReserve is kept free in a page's budget for the truncation marker.
const markerReserve = 100

// pageOf cuts one page of the outline, at a line boundary. Sizes,
// budgets and offsets count characters (Unicode code points), not bytes.
func pageOf(full lastOutline, offset, budget int) Snapshot {
	text := []rune(full.text)
	snap := Snapshot{Refs: full.refs, TotalChars: len(text)}
	rest := text[min(offset, len(text)):]
	if len(rest) <= budget {
		snap.Text = string(rest)
		return snap
	}
	budget = max(budget-markerReserve, 1) // the marker fits in the budget
	cutAt := 0
	for i := budget - 1; i >= 0; i-- {
		if rest[i] == '\n' {
			cutAt = i + 1
			break
		}
	}
	if cutAt == 0 { // one line longer than the budget: cut inside it
		cutAt = budget
	}
	snap.Truncated, snap.NextOffset = true, offset+cutAt
	snap.Text = string(rest[:cutAt]) + fmt.Sprintf("[truncated: %d more characters; snapshot with offset %d continues]\n", len(rest)-cutAt, snap.NextOffset)
	return snap
}

// outline builds the whole outline of the current document, minting refs.
func (s *Session) outline(ctx context.Context, b *instance, loader cdp.LoaderID, o SnapshotOptions) (lastOutline, error) {
	res, err := cdp.Call(ctx, b.target, accessibility.GetFullAXTree, accessibility.GetFullAXTreeParams{})
	if err != nil {
		return lastOutline{}, cdpErr(ctx, b, "snapshot", err)
	}
	// A table of another document is dead: start a new one.
	for _, e := range s.refs.byRef {
		if e.loader != loader {
			s.refs = newRefTable()
		}
		break
	}
	w := &outline{s: s, ctx: ctx, b: b, loader: loader, opts: o, seen: map[string]int{}}
	w.frames = childFrames(ctx, b)
	w.tree(res.Nodes, 0)
	return lastOutline{loader: loader, opts: o, text: w.sb.String(), refs: w.minted}, nil
}

// childFrames maps each iframe element (by backend node id) of the tab to
// the frame it holds, for the frames in the tab's own process. Frames of
// other sites live in their own processes (site isolation) and are shown
// as their iframe line only.
func childFrames(ctx context.Context, b *instance) map[cdp.BackendNodeID]cdp.FrameID {
	out := map[cdp.BackendNodeID]cdp.FrameID{}
	ft, err := cdp.Call(ctx, b.target, page.GetFrameTree, cdp.Empty{})
	if err != nil || ft.FrameTree == nil {
		return out
	}
	var walk func(t *page.FrameTree)
	walk = func(t *page.FrameTree) {
		for _, c := range t.ChildFrames {
			if c.Frame == nil {
				continue
			}
			if own, err := cdp.Call(ctx, b.target, dom.GetFrameOwner, dom.GetFrameOwnerParams{FrameID: c.Frame.ID}); err == nil {
				out[own.BackendNodeID] = c.Frame.ID
			}
			walk(c)
		}
	}
	walk(ft.FrameTree)
	return out
}

type outline struct {
	s      *Session
	ctx    context.Context
	b      *instance
	loader cdp.LoaderID
	opts   SnapshotOptions
	frames map[cdp.BackendNodeID]cdp.FrameID
	nodes  map[accessibility.NodeID]*accessibility.Node
	sb     strings.Builder
	minted int
	seen   map[string]int // role+name → elements seen, for duplicates' index
	depthF int            // frames nested, to stop runaway recursion
	// labelling are the <label for> elements that name a control the
	// outline shows: the control's line carries their text.
	labelling map[cdp.BackendNodeID]bool
}

// maxFrameDepth bounds nested iframes in an outline.
const maxFrameDepth = 8

// tree prints one document's AX nodes (the first is its root) at depth.
func (w *outline) tree(nodes []*accessibility.Node, depth int) {
	if len(nodes) == 0 {
		return
	}
	saved := w.nodes
	w.nodes = make(map[accessibility.NodeID]*accessibility.Node, len(nodes))
	for _, n := range nodes {
		w.nodes[n.NodeID] = n
		w.noteLabels(n)
	}
	w.walk(nodes[0], depth, "")
	w.nodes = saved
}

func (w *outline) walk(n *accessibility.Node, depth int, parentName string) {
	if w.opts.MaxDepth > 0 && depth >= w.opts.MaxDepth && !w.opts.InteractiveOnly {
		return
	}
	role, name := axString(n.Role), axString(n.Name)
	printed := false
	switch {
	case role == "ListMarker":
		return // a bullet or a number: decoration, with no line and no ref
	case n.BackendDOMNodeID != 0 && w.labelling[n.BackendDOMNodeID] && !w.holdsControl(n, 0):
		// A <label for> (in the tree as LabelText, or ignored when its
		// text is hidden): the control it names shows, with this text as
		// its name.
		return
	case role == "LabelText" && !n.Ignored && n.BackendDOMNodeID != 0 && !w.opts.InteractiveOnly && !w.holdsControl(n, 0):
		// A <label> that holds no control (a todo's title, a label for a
		// hidden input): one line with a ref, so that an agent can click,
		// double-click or hover it.
		if text := w.textOf(n, 0); text != "" && text != parentName {
			w.line(n, "label", text, depth)
			return
		}
	case n.Ignored, transparentRoles[role] && name == "", role == "InlineTextBox":
	case role == "StaticText":
		if name != "" && name != parentName && !w.opts.InteractiveOnly {
			fmt.Fprintf(&w.sb, "%s- text %s\n", strings.Repeat("  ", depth), strconv.Quote(name))
		}
		return
	case role == "RootWebArea":
	case w.opts.InteractiveOnly && !interactiveRoles[role]:
	default:
		printed = true
		d := depth
		if w.opts.InteractiveOnly {
			d = 0
		}
		w.line(n, role, name, d)
	}
	if printed && (role == "textbox" || role == "searchbox") {
		return // the field's text is its value="…"
	}
	next, pname := depth, parentName
	if printed {
		next, pname = depth+1, name
	}
	if f, ok := w.frames[n.BackendDOMNodeID]; ok && n.BackendDOMNodeID != 0 && w.depthF < maxFrameDepth {
		if res, err := cdp.Call(w.ctx, w.b.target, accessibility.GetFullAXTree, accessibility.GetFullAXTreeParams{FrameID: f}); err == nil {
			w.depthF++
			w.tree(res.Nodes, next)
			w.depthF--
		}
		return
	}
	for _, id := range n.ChildIDs {
		if c := w.nodes[id]; c != nil {
			w.walk(c, next, pname)
		}
	}
}

// noteLabels records the <label for> elements that name n, when n is a
// control the outline shows.
func (w *outline) noteLabels(n *accessibility.Node) {
	if n.Ignored || n.Name == nil || !interactiveRoles[axString(n.Role)] {
		return
	}
	for _, src := range n.Name.Sources {
		// A superseded source (aria-label wins) does not name the control.
		if src == nil || src.Superseded || src.NativeSource != accessibility.ValueNativeSourceTypeLabelfor || src.NativeSourceValue == nil {
			continue
		}
		for _, rel := range src.NativeSourceValue.RelatedNodes {
			if rel != nil && rel.BackendDOMNodeID != 0 {
				if w.labelling == nil {
					w.labelling = map[cdp.BackendNodeID]bool{}
				}
				w.labelling[rel.BackendDOMNodeID] = true
			}
		}
	}
}

// maxLabelDepth bounds the walks under a label.
const maxLabelDepth = 6

// holdsControl reports whether an interactive element is under n.
func (w *outline) holdsControl(n *accessibility.Node, depth int) bool {
	if depth > maxLabelDepth {
		return true
	}
	for _, id := range n.ChildIDs {
		if c := w.nodes[id]; c != nil && (interactiveRoles[axString(c.Role)] || w.holdsControl(c, depth+1)) {
			return true
		}
	}
	return false
}

// textOf is the text under n, its static texts joined by spaces.
func (w *outline) textOf(n *accessibility.Node, depth int) string {
	if depth > maxLabelDepth {
		return ""
	}
	var parts []string
	for _, id := range n.ChildIDs {
		c := w.nodes[id]
		if c == nil || c.Ignored {
			continue
		}
		if axString(c.Role) == "StaticText" {
			if t := axString(c.Name); t != "" {
				parts = append(parts, t)
			}
			continue
		}
		if t := w.textOf(c, depth+1); t != "" {
			parts = append(parts, t)
		}
	}
	return strings.Join(parts, " ")
}

func (w *outline) line(n *accessibility.Node, role, name string, depth int) {
	sb := &w.sb
	sb.WriteString(strings.Repeat("  ", depth))
	sb.WriteString("- ")
	sb.WriteString(role)
	if name != "" {
		sb.WriteByte(' ')
		sb.WriteString(strconv.Quote(name))
	}
	if v := axString(n.Value); v != "" && fillableRoles[role] {
		sb.WriteString(" value=")
		sb.WriteString(strconv.Quote(v))
	}
	for _, p := range n.Properties {
		switch p.Name {
		case accessibility.PropertyNameChecked, accessibility.PropertyNameDisabled:
			if v := axString(p.Value); v == "true" {
				sb.WriteString(" [" + string(p.Name) + "]")
			}
		}
	}
	if n.BackendDOMNodeID != 0 && (interactiveRoles[role] || name != "") {
		k := role + "\x00" + name
		w.seen[k]++
		ref, ok := w.s.refs.byNode[n.BackendDOMNodeID]
		if !ok {
			w.s.lastRef++
			ref = "@e" + strconv.Itoa(w.s.lastRef)
			w.s.refs.byNode[n.BackendDOMNodeID] = ref
		}
		// Its role, name and rank are the ones of this snapshot.
		w.s.refs.byRef[ref] = refEntry{backend: n.BackendDOMNodeID, loader: w.loader, role: role, name: name, nth: w.seen[k]}
		w.minted++
		sb.WriteByte(' ')
		sb.WriteString(ref)
	}
	sb.WriteByte('\n')
}

// axString renders an AX value (a JSON string, number or boolean) as text.
func axString(v *accessibility.Value) string {
	if v == nil || len(v.Value) == 0 {
		return ""
	}
	var str string
	if err := jsonv2.Unmarshal(v.Value, &str); err == nil {
		return strings.TrimSpace(str)
	}
	return strings.TrimSpace(string(v.Value))
}

// mainLoader returns the loader id of the main frame's current document.
func mainLoader(ctx context.Context, b *instance) (cdp.LoaderID, error) {
	ft, err := cdp.Call(ctx, b.target, page.GetFrameTree, cdp.Empty{})
	if err != nil {
		return "", err
	}
	if ft.FrameTree == nil || ft.FrameTree.Frame == nil {
		return "", errors.New("no main frame")
	}
	return ft.FrameTree.Frame.LoaderID, nil
}

// refKey returns ref in the table's spelling ("@e3"): snapshots print
// "@e3", and "e3" (Playwright's spelling) is accepted too. Anything else is
// bad_ref, never stale_ref, whose advice (take a new snapshot) would loop an
// agent that sent something that is no ref at all.
func refKey(ref string) (string, error) {
	n := strings.TrimPrefix(ref, "@")
	digits := strings.TrimPrefix(n, "e")
	ok := len(n) == len(digits)+1 && digits != "" && len(digits) <= 12
	for _, c := range digits {
		ok = ok && c >= '0' && c <= '9'
	}
	if !ok {
		return "", airlock.Errorf(airlock.CodeInvalid, airlock.ReasonBadRef, "browser: %q is not a ref: refs look like @e3 (or e3), as a snapshot prints them", ref)
	}
	return "@" + n, nil
}

func staleRef(ref, why string) error {
	return airlock.Errorf(airlock.CodeInvalid, airlock.ReasonStaleRef, "browser: ref %s is %s: take a new snapshot", ref, why)
}

// resolve returns the live entry of ref, or stale_ref when it is unknown
// or belongs to a document the main frame has navigated away from.
func (s *Session) resolve(ctx context.Context, b *instance, ref string) (refEntry, error) {
	key, err := refKey(ref)
	if err != nil {
		return refEntry{}, err
	}
	e, ok := s.refs.byRef[key]
	if !ok {
		return refEntry{}, staleRef(ref, "unknown or from a previous page")
	}
	loader, err := mainLoader(ctx, b)
	if err != nil {
		return refEntry{}, cdpErr(ctx, b, "resolve ref", err)
	}
	if loader != e.loader {
		s.refs = newRefTable()
		return refEntry{}, staleRef(ref, "from a previous page")
	}
	return e, nil
}

// beginRef locks the session for one operation on ref's element and
// resolves it. On success the caller must call s.mu.Unlock; on error the
// session is already unlocked.
func (s *Session) beginRef(ctx context.Context, ref string) (*instance, refEntry, error) {
	b, err := s.begin()
	if err != nil {
		return nil, refEntry{}, err
	}
	e, err := s.resolve(ctx, b, ref)
	if err != nil {
		s.mu.Unlock()
		return nil, refEntry{}, err
	}
	return b, e, nil
}

// nodeErr maps a DOM call's failure on a ref's node.
func nodeErr(ctx context.Context, b *instance, ref, op string, err error) error {
	var ce *cdproto.Error
	if errors.As(err, &ce) {
		switch m := ce.Message; {
		case strings.Contains(m, "No node"), strings.Contains(m, "does not belong to the document"):
			return staleRef(ref, "no longer in the document")
		case strings.Contains(m, "Could not compute"), strings.Contains(m, "layout object"):
			return airlock.Errorf(airlock.CodeInvalid, airlock.ReasonNotVisible, "browser: %s %s: the element has no box (hidden or detached): %s", op, ref, m)
		}
	}
	return cdpErr(ctx, b, op, err)
}

// Click scrolls ref's element into view and clicks the centre of its first
// content box with synthetic mouse events (move, press, release).
//
// It first waits (DefaultActionTimeout at most) until the element is
// actionable (see actionable).
//
// Errors: invalid (stale_ref, not_actionable, not_visible), timeout,
// unavailable (browser_crashed).
func (s *Session) Click(ctx context.Context, ref string) error {
	b, e, err := s.beginRef(ctx, ref)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	if err := s.actionable(ctx, b, e.backend, ref, "click", s.actionTimeout(ctx)); err != nil {
		return err
	}
	return clickNode(ctx, b, e.backend, ref, 1)
}

// clickNode scrolls a node into view and clicks the centre of its first
// content box: clickCount 2 is a double click (two press/release pairs,
// the second with clickCount 2, as a user's double click). what names the
// node in errors.
func clickNode(ctx context.Context, b *instance, backend cdp.BackendNodeID, what string, clickCount int) error {
	op := "click"
	if clickCount == 2 {
		op = "dblclick"
	}
	if _, err := cdp.Call(ctx, b.target, dom.ScrollIntoViewIfNeeded, dom.ScrollIntoViewIfNeededParams{BackendNodeID: backend}); err != nil {
		return nodeErr(ctx, b, what, op, err)
	}
	q, err := cdp.Call(ctx, b.target, dom.GetContentQuads, dom.GetContentQuadsParams{BackendNodeID: backend})
	if err != nil {
		return nodeErr(ctx, b, what, op, err)
	}
	if len(q.Quads) == 0 || len(q.Quads[0]) != 8 {
		return airlock.Errorf(airlock.CodeInvalid, airlock.ReasonNotVisible, "browser: %s %s: the element has no box", op, what)
	}
	quad := q.Quads[0]
	x := (quad[0] + quad[2] + quad[4] + quad[6]) / 4
	y := (quad[1] + quad[3] + quad[5] + quad[7]) / 4
	evs := []input.DispatchMouseEventParams{{Type: input.DispatchMouseEventTypeMouseMoved, X: x, Y: y}}
	for n := int64(1); n <= int64(clickCount); n++ {
		evs = append(evs,
			input.DispatchMouseEventParams{Type: input.DispatchMouseEventTypeMousePressed, X: x, Y: y, Button: input.MouseButtonLeft, Buttons: 1, ClickCount: n},
			input.DispatchMouseEventParams{Type: input.DispatchMouseEventTypeMouseReleased, X: x, Y: y, Button: input.MouseButtonLeft, ClickCount: n})
	}
	for _, ev := range evs {
		if _, err := cdp.Call(ctx, b.target, input.DispatchMouseEvent, ev); err != nil {
			return cdpErr(ctx, b, op, err)
		}
	}
	return nil
}

// Fill focuses ref's field, selects its content and replaces it with text
// (Input.insertText, which fires input events as typing does). Only
// textbox, searchbox, combobox and spinbutton refs are fillable.
//
// It first waits (DefaultActionTimeout at most) until the field is
// actionable (visible, enabled, editable).
//
// Errors: invalid (stale_ref, not_fillable, not_actionable, not_visible),
// timeout, unavailable (browser_crashed).
func (s *Session) Fill(ctx context.Context, ref, text string) error {
	b, e, err := s.beginRef(ctx, ref)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	if !fillableRoles[e.role] {
		return airlock.Errorf(airlock.CodeInvalid, airlock.ReasonNotFillable, "browser: fill %s: a %s is not a text field", ref, e.role)
	}
	if err := s.actionable(ctx, b, e.backend, ref, "fill", s.actionTimeout(ctx)); err != nil {
		return err
	}
	return fillNode(ctx, b, e.backend, ref, text)
}

// fillNode focuses a field, selects its content and replaces it with text.
func fillNode(ctx context.Context, b *instance, backend cdp.BackendNodeID, what, text string) error {
	if _, err := cdp.Call(ctx, b.target, dom.ScrollIntoViewIfNeeded, dom.ScrollIntoViewIfNeededParams{BackendNodeID: backend}); err != nil {
		return nodeErr(ctx, b, what, "fill", err)
	}
	if _, err := cdp.Call(ctx, b.target, dom.Focus, dom.FocusParams{BackendNodeID: backend}); err != nil {
		return nodeErr(ctx, b, what, "fill", err)
	}
	keys := []input.DispatchKeyEventParams{
		{Type: input.DispatchKeyEventTypeRawKeyDown, Key: "a", Code: "KeyA", WindowsVirtualKeyCode: 65, Modifiers: 2, Commands: []string{"selectAll"}},
		{Type: input.DispatchKeyEventTypeKeyUp, Key: "a", Code: "KeyA", WindowsVirtualKeyCode: 65, Modifiers: 2},
	}
	if text == "" {
		keys = append(keys,
			input.DispatchKeyEventParams{Type: input.DispatchKeyEventTypeRawKeyDown, Key: "Delete", Code: "Delete", WindowsVirtualKeyCode: 46},
			input.DispatchKeyEventParams{Type: input.DispatchKeyEventTypeKeyUp, Key: "Delete", Code: "Delete", WindowsVirtualKeyCode: 46},
		)
	}
	for _, k := range keys {
		if _, err := cdp.Call(ctx, b.target, input.DispatchKeyEvent, k); err != nil {
			return cdpErr(ctx, b, "fill", err)
		}
	}
	if text != "" {
		if _, err := cdp.Call(ctx, b.target, input.InsertText, input.InsertTextParams{Text: text}); err != nil {
			return cdpErr(ctx, b, "fill", err)
		}
	}
	return nil
}
