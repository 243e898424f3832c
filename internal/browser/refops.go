package browser

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/chromedp/cdproto"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/dom"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"

	"github.com/airlockhq/airlock"
)

// The by-ref actions beyond click and fill: hover, dblclick, check and
// uncheck, select by value or by visible label, and a click on an option
// ref, which chooses the option. Each runs inside Do between beforeAction
// and afterAction (settle.go), so it waits for what it caused and reports
// the page like the other actions.

// checkableRoles accept check and uncheck.
var checkableRoles = map[string]bool{
	"checkbox": true, "radio": true, "switch": true, "menuitemcheckbox": true, "menuitemradio": true,
}

// Hover moves the pointer to the centre of ref's element (scrolled into
// view) and leaves it there: CSS :hover and mouseover/mouseenter apply
// until the next pointer action, so a control shown only on hover is in
// the next snapshot.
//
// Errors: invalid (bad_ref, stale_ref, not_visible), timeout, unavailable
// (browser_crashed).
func (s *Session) Hover(ctx context.Context, ref string) error {
	b, e, err := s.beginRef(ctx, ref)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	if _, _, err := centreOf(ctx, b, e.backend, ref, KindHover); err != nil {
		return err // no box: not_visible at once
	}
	if err := s.actionable(ctx, b, e.backend, ref, KindHover, s.actionTimeout(ctx)); err != nil {
		return err
	}
	x, y, err := centreOf(ctx, b, e.backend, ref, KindHover) // after the checks' scroll
	if err != nil {
		return err
	}
	if _, err := cdp.Call(ctx, b.target, input.DispatchMouseEvent, input.DispatchMouseEventParams{Type: input.DispatchMouseEventTypeMouseMoved, X: x, Y: y}); err != nil {
		return cdpErr(ctx, b, KindHover, err)
	}
	return nil
}

// Dblclick double-clicks the centre of ref's element: two press/release
// pairs, the second with clickCount 2, as a person's double click (dblclick
// fires after the second release).
//
// Errors: invalid (bad_ref, stale_ref, not_visible), timeout, unavailable
// (browser_crashed).
func (s *Session) Dblclick(ctx context.Context, ref string) error {
	b, e, err := s.beginRef(ctx, ref)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	// centreOf first: an element without a box is not_visible, typed.
	if _, _, err := centreOf(ctx, b, e.backend, ref, KindDblclick); err != nil {
		return err
	}
	if err := s.actionable(ctx, b, e.backend, ref, KindDblclick, s.actionTimeout(ctx)); err != nil {
		return err
	}
	return clickNode(ctx, b, e.backend, ref, 2)
}

// centreOf scrolls a node into view and returns the centre of its first
// content box, in the viewport's CSS pixels.
func centreOf(ctx context.Context, b *instance, backend cdp.BackendNodeID, what, op string) (float64, float64, error) {
	if _, err := cdp.Call(ctx, b.target, dom.ScrollIntoViewIfNeeded, dom.ScrollIntoViewIfNeededParams{BackendNodeID: backend}); err != nil {
		return 0, 0, boxErr(ctx, b, what, op, err)
	}
	q, err := cdp.Call(ctx, b.target, dom.GetContentQuads, dom.GetContentQuadsParams{BackendNodeID: backend})
	if err != nil {
		return 0, 0, nodeErr(ctx, b, what, op, err)
	}
	if len(q.Quads) == 0 || len(q.Quads[0]) != 8 {
		return 0, 0, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonNotVisible, "browser: %s %s: the element has no box", op, what)
	}
	quad := q.Quads[0]
	return (quad[0] + quad[2] + quad[4] + quad[6]) / 4, (quad[1] + quad[3] + quad[5] + quad[7]) / 4, nil
}

// boxErr maps a failure to scroll a node into view: a node without a
// layout object (display: none) is not_visible, not an internal error.
func boxErr(ctx context.Context, b *instance, what, op string, err error) error {
	var ce *cdproto.Error
	if errors.As(err, &ce) && strings.Contains(ce.Message, "layout object") {
		return airlock.Errorf(airlock.CodeInvalid, airlock.ReasonNotVisible, "browser: %s %s: the element is not rendered (display: none or detached)", op, what)
	}
	return nodeErr(ctx, b, what, op, err)
}

// checkedScript reads the checked state of a node: an <input> checkbox or
// radio's checked, else its aria-checked ("mixed" is not checked), and
// whether it is a radio.
const checkedScript = `function () {
	if (this instanceof HTMLInputElement && (this.type === "checkbox" || this.type === "radio")) {
		return {checked: this.checked, radio: this.type === "radio"};
	}
	const role = (this.getAttribute && this.getAttribute("role")) || "";
	return {checked: this.getAttribute("aria-checked") === "true", radio: role === "radio" || role === "menuitemradio"};
}`

// receivesScript reports whether a hit test at (x, y), the centre of this
// element, lands on it or on a descendant (through open shadow roots, as a
// pointer event is delivered): false when something covers it. It also
// answers "disabled" for a disabled control.
const receivesScript = `function (p) {
	if (this.disabled || (this.getAttribute && this.getAttribute("aria-disabled") === "true")) return "disabled";
	let hit = this.ownerDocument.elementFromPoint(p[0], p[1]);
	while (hit && hit.shadowRoot) {
		const d = hit.shadowRoot.elementFromPoint(p[0], p[1]);
		if (!d || d === hit) break;
		hit = d;
	}
	for (let n = hit; n; n = n.parentNode || n.host) { if (n === this) return "yes"; }
	// A closed shadow root hides where the hit lands inside it: the host
	// of one that holds this element counts.
	for (let r = this.getRootNode(); r instanceof ShadowRoot; r = r.host.getRootNode()) {
		if (r.host === hit && r.mode === "closed") return "yes";
	}
	return "no";
}`

// labelScript returns the first <label> of a labelable element, or null.
const labelScript = `function () { return (this.labels && this.labels.length > 0) ? this.labels[0] : null; }`

// controlScript returns the checkbox or radio a <label> labels, or null.
const controlScript = `function () {
	const c = this instanceof HTMLLabelElement ? this.control : null;
	return c instanceof HTMLInputElement && (c.type === "checkbox" || c.type === "radio") ? c : null;
}`

// Check sets ref's checkbox, radio or switch to want (check: true,
// uncheck: false); ref may also be the <label> of a checkbox or radio (an
// input hidden by display: none has no ref of its own, its label has).
// Already in that state, it does nothing. Otherwise it
// clicks the element itself when a hit test at its centre reaches it, or
// else its associated <label> (a real checkbox often hides under its
// label, 1 px and transparent, as TodoMVC's "toggle all" does) when the
// label receives the click; it then checks the state changed (after the
// page settled, when a script flips it late).
//
// Errors: invalid (bad_ref, stale_ref; not_checkable for another role;
// browser_op to uncheck a radio; disabled; not_actionable when neither the
// element nor its label receives the click; check_failed when the click
// did not change the state), timeout, unavailable (browser_crashed).
func (s *Session) Check(ctx context.Context, ref string, want bool) error {
	op := KindCheck
	if !want {
		op = KindUncheck
	}
	b, e, err := s.beginRef(ctx, ref)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	input := e.backend
	switch {
	case e.role == "label":
		if input, err = relatedNode(ctx, b, e.backend, ref, op, controlScript); err != nil {
			return err
		}
		if input == 0 {
			return airlock.Errorf(airlock.CodeInvalid, airlock.ReasonNotCheckable, "browser: %s %s: the label is not the label of a checkbox or radio button", op, ref)
		}
	case !checkableRoles[e.role]:
		return airlock.Errorf(airlock.CodeInvalid, airlock.ReasonNotCheckable, "browser: %s %s: a %s is not a checkbox, radio or switch", op, ref, e.role)
	}
	var radio bool
	state := func() (bool, error) {
		raw, err := callOnNode(ctx, b, input, ref, op, checkedScript, nil)
		if err != nil {
			return false, err
		}
		var v struct{ Checked, Radio bool }
		if err := json.Unmarshal(raw, &v); err != nil {
			return false, airlock.Errorf(airlock.CodeInternal, airlock.ReasonCDP, "browser: %s %s: unexpected state %s", op, ref, raw)
		}
		radio = v.Radio
		return v.Checked, nil
	}
	cur, err := state()
	if err != nil || cur == want {
		return err
	}
	if !want && radio {
		return opErr("uncheck %s: a radio button is unchecked by checking another one of its group", ref)
	}
	target := e.backend
	if e.role != "label" {
		target, err = checkTarget(ctx, b, e.backend, ref, op)
	} else if got, err2 := disabled(ctx, b, input, ref, op); err2 != nil || got {
		err = err2
		if got {
			err = airlock.Errorf(airlock.CodeInvalid, airlock.ReasonDisabled, "browser: %s %s: the element is disabled", op, ref)
		}
	}
	if err != nil {
		return err
	}
	if err := clickNode(ctx, b, target, ref, 1); err != nil {
		return err
	}
	if cur, err = state(); err != nil || cur == want {
		return err
	}
	// A script may flip the state after the click's events: let the page
	// settle once and look again.
	waitQuiet(ctx, b)
	if cur, err = state(); err != nil || cur == want {
		return err
	}
	return airlock.Errorf(airlock.CodeInvalid, airlock.ReasonCheckFailed, "browser: %s %s: the click did not change its state (the page keeps it %s)", op, ref, map[bool]string{true: "checked", false: "unchecked"}[cur])
}

// checkTarget returns the node a check's click goes to: the element when
// it receives the pointer at its centre, else its first <label> when that
// does.
func checkTarget(ctx context.Context, b *instance, backend cdp.BackendNodeID, what, op string) (cdp.BackendNodeID, error) {
	why := "it has no box"
	if x, y, err := centreOf(ctx, b, backend, what, op); err == nil {
		got, err := receives(ctx, b, backend, what, op, x, y)
		switch {
		case err != nil:
			return 0, err
		case got == "yes":
			return backend, nil
		case got == "disabled":
			return 0, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonDisabled, "browser: %s %s: the element is disabled", op, what)
		}
		why = "another element covers it"
	} else if airlock.ReasonOf(err) != "not_visible" {
		return 0, err
	}
	label, err := relatedNode(ctx, b, backend, what, op, labelScript)
	if err != nil {
		return 0, err
	}
	if label != 0 {
		if x, y, err := centreOf(ctx, b, label, what, op); err == nil {
			if got, err := receives(ctx, b, label, what, op, x, y); err != nil || got == "yes" {
				return label, err
			}
		}
		why += ", and so does its label's"
	}
	return 0, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonNotActionable, "browser: %s %s: the element cannot be clicked: %s", op, what, why)
}

// receives runs receivesScript on a node for the point (x, y).
func receives(ctx context.Context, b *instance, backend cdp.BackendNodeID, what, op string, x, y float64) (string, error) {
	raw, err := callOnNode(ctx, b, backend, what, op, receivesScript, []float64{x, y})
	if err != nil {
		return "", err
	}
	var v string
	if err := json.Unmarshal(raw, &v); err != nil {
		return "", airlock.Errorf(airlock.CodeInternal, airlock.ReasonCDP, "browser: %s %s: unexpected hit test %s", op, what, raw)
	}
	return v, nil
}

// disabledScript reports whether a control is disabled.
const disabledScript = `function () { return !!this.disabled || (this.getAttribute && this.getAttribute("aria-disabled") === "true"); }`

// disabled runs disabledScript on a node.
func disabled(ctx context.Context, b *instance, backend cdp.BackendNodeID, what, op string) (bool, error) {
	raw, err := callOnNode(ctx, b, backend, what, op, disabledScript, nil)
	if err != nil {
		return false, err
	}
	var v bool
	if err := json.Unmarshal(raw, &v); err != nil {
		return false, airlock.Errorf(airlock.CodeInternal, airlock.ReasonCDP, "browser: %s %s: unexpected result %s", op, what, raw)
	}
	return v, nil
}

// relatedNode runs one of this package's fixed functions (labelScript,
// controlScript) on a node, in an isolated world, and returns the backend
// node of the element it returns, or 0 for null.
func relatedNode(ctx context.Context, b *instance, backend cdp.BackendNodeID, what, op, script string) (cdp.BackendNodeID, error) {
	ft, err := cdp.Call(ctx, b.target, page.GetFrameTree, cdp.Empty{})
	if err != nil {
		return 0, cdpErr(ctx, b, op, err)
	}
	if ft.FrameTree == nil || ft.FrameTree.Frame == nil {
		return 0, airlock.Errorf(airlock.CodeInternal, airlock.ReasonCDP, "browser: %s: no main frame", op)
	}
	world, err := cdp.Call(ctx, b.target, page.CreateIsolatedWorld, page.CreateIsolatedWorldParams{FrameID: ft.FrameTree.Frame.ID, WorldName: "airlock"})
	if err != nil {
		return 0, cdpErr(ctx, b, op, err)
	}
	group := "airlock-" + op + "-label"
	defer cdp.Call(context.WithoutCancel(ctx), b.target, runtime.ReleaseObjectGroup, runtime.ReleaseObjectGroupParams{ObjectGroup: group})
	obj, err := cdp.Call(ctx, b.target, dom.ResolveNode, dom.ResolveNodeParams{BackendNodeID: backend, ObjectGroup: group, ExecutionContextID: world.ExecutionContextID})
	if err != nil {
		return 0, nodeErr(ctx, b, what, op, err)
	}
	if obj.Object == nil || obj.Object.ObjectID == "" {
		return 0, staleRef(what, "no longer in the document")
	}
	res, err := cdp.Call(ctx, b.target, runtime.CallFunctionOn, runtime.CallFunctionOnParams{
		FunctionDeclaration: script, ObjectID: obj.Object.ObjectID, ObjectGroup: group, Silent: new(true),
	})
	if err != nil {
		return 0, nodeErr(ctx, b, what, op, err)
	}
	if res.ExceptionDetails != nil || res.Result == nil || res.Result.ObjectID == "" {
		return 0, nil
	}
	d, err := cdp.Call(ctx, b.target, dom.DescribeNode, dom.DescribeNodeParams{ObjectID: res.Result.ObjectID})
	if err != nil || d.Node == nil {
		return 0, nodeErr(ctx, b, what, op, err)
	}
	return d.Node.BackendNodeID, nil
}

// optionScript chooses this <option> in its <select>, as selectScript
// does; "not_option" when this is no <option> of a <select> (an ARIA
// option, which a click reaches as any element).
const optionScript = `function () {
	if (!(this instanceof HTMLOptionElement)) return "not_option";
	const sel = this.parentElement && this.parentElement.closest("select");
	if (!sel) return "not_option";
	if (sel.disabled || this.disabled) return "disabled";
	if (sel.multiple) { for (const o of sel.options) o.selected = (o === this); } else { this.selected = true; }
	sel.dispatchEvent(new Event("input", {bubbles: true}));
	sel.dispatchEvent(new Event("change", {bubbles: true}));
	return "ok";
}`

// clickRef is the click op: on the ref of an <option> of a <select> it
// chooses that option (a native select's options have no box to click);
// on anything else it is Click.
func (s *Session) clickRef(ctx context.Context, ref string) error {
	if s.refRole(ref) != "option" {
		return s.Click(ctx, ref)
	}
	b, e, err := s.beginRef(ctx, ref)
	if err != nil {
		return err
	}
	raw, err := callOnNode(ctx, b, e.backend, ref, KindClick, optionScript, nil)
	if err == nil {
		var status string
		if json.Unmarshal(raw, &status) == nil && status == "not_option" {
			s.mu.Unlock()
			return s.Click(ctx, ref)
		}
		err = selectStatus(raw, ref, e.role, e.name, false)
	}
	s.mu.Unlock()
	return err
}

// refRole is the role ref was minted with, or "" for an unknown ref (the
// op that follows reports it).
func (s *Session) refRole(ref string) string {
	key, err := refKey(ref)
	if err != nil {
		return ""
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refs == nil {
		return ""
	}
	return s.refs.byRef[key].role
}
