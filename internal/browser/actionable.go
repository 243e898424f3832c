package browser

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/chromedp/cdproto"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/dom"
	"github.com/chromedp/cdproto/runtime"

	"github.com/airlockhq/airlock"
)

// Actionability: before an action touches an element, the element must be
// attached, visible, enabled and, for pointer actions, stable (the same box
// over two animation frames) and the target of a hit test at the point the
// mouse will use. The checks are retried until the action's time runs out,
// as a user would wait for a spinner to go; then the action fails as
// invalid/not_actionable, naming why. force skips them.

// actionPoll is how often the checks run again.
const actionPoll = 80 * time.Millisecond

// DefaultActionTimeout bounds the checks of a by-ref action, whose op has
// no timeout of its own, unless Options.ActionTimeout says otherwise (the
// caller's ctx may end them sooner).
const DefaultActionTimeout = 5 * time.Second

// actionNeeds is what one action asks of its element beyond attached,
// visible and enabled.
type actionNeeds struct {
	Hit      bool `json:"hit"`      // stable and the hit test (pointer actions)
	Editable bool `json:"editable"` // not readonly (fill)
}

// needsOf returns what op needs; unknown ops are pointer actions.
func needsOf(op string) actionNeeds {
	switch op {
	case "fill":
		return actionNeeds{Editable: true}
	case "select", "focus", "press":
		return actionNeeds{}
	}
	return actionNeeds{Hit: true}
}

// actionScript is the fixed function the checks run on the element (this),
// in an isolated world. arg: {hit, editable, x, y}, the point in the main
// frame's viewport where the mouse will go (x < 0: compute it here, as in
// a child frame). It resolves to {s, by}: s is ok, detached, hidden,
// disabled, readonly, unstable or covered; by describes the cover.
const actionScript = `async function (a) {
	const el = this;
	if (!el.isConnected) return {s: "detached"};
	const rect = () => { const r = el.getBoundingClientRect(); return [r.left, r.top, r.width, r.height]; };
	const r0 = rect();
	const styleOK = typeof el.checkVisibility !== "function" || el.checkVisibility({visibilityProperty: true});
	if (!styleOK || r0[2] <= 0 || r0[3] <= 0) return {s: "hidden"};
	if ((el.matches && el.matches(":disabled")) || (el.closest && el.closest("[aria-disabled=true]"))) return {s: "disabled"};
	if (a.editable && (el.readOnly === true || (el.isContentEditable === false && !("value" in el)))) return {s: "readonly"};
	if (!a.hit) return {s: "ok"};
	const frame = () => new Promise((res) => { requestAnimationFrame(() => res()); setTimeout(res, 100); });
	await frame(); await frame();
	const r1 = rect();
	if (r1.some((v, i) => Math.abs(v - r0[i]) > 0.5)) return {s: "unstable"};
	let x = a.x, y = a.y;
	if (x < 0 || el.ownerDocument !== document || window !== window.top) { x = r1[0] + r1[2] / 2; y = r1[1] + r1[3] / 2; }
	const doc = el.ownerDocument;
	let hit = doc.elementFromPoint(x, y);
	while (hit && hit.shadowRoot) {
		const h = hit.shadowRoot.elementFromPoint(x, y);
		if (!h || h === hit) break;
		hit = h;
	}
	const up = (n) => n.parentNode || (n instanceof ShadowRoot ? n.host : null);
	for (let n = hit; n; n = up(n)) {
		if (n === el) return {s: "ok"};
		if (n.tagName === "LABEL" && n.control === el) return {s: "ok"};
	}
	if (!hit) return {s: "hidden"};
	const text = (s) => (s || "").replace(/\s+/g, " ").trim().slice(0, 60);
	const describe = (n) => {
		const role = n.getAttribute("role") || "";
		let name = text(n.getAttribute("aria-label"));
		const lb = n.getAttribute("aria-labelledby");
		if (!name && lb) name = text(lb.split(/\s+/).map((id) => { const e = doc.getElementById(id); return e ? e.textContent : ""; }).join(" "));
		if (!name) name = text(n.getAttribute("title"));
		return {role, name, tag: n.tagName.toLowerCase(), text: text(n.innerText || n.textContent)};
	};
	// The nearest ancestor of the hit element that has a role or a name
	// says best what is in the way.
	let best = null;
	for (let n = hit; n && n.nodeType === 1; n = up(n)) {
		const d = describe(n);
		if (d.role || d.name) { best = d; break; }
		if (n === doc.body || n === doc.documentElement) break;
	}
	return {s: "covered", by: best || describe(hit)};
}`

// coverInfo describes the element that would take a click.
type coverInfo struct {
	Role string `json:"role"`
	Name string `json:"name"`
	Tag  string `json:"tag"`
	Text string `json:"text"`
}

func (c coverInfo) String() string {
	switch {
	case c.Role != "" && c.Name != "":
		return fmt.Sprintf("%s %q", c.Role, c.Name)
	case c.Role != "":
		return fmt.Sprintf("%s (<%s> %q)", c.Role, c.Tag, c.Text)
	case c.Name != "":
		return fmt.Sprintf("<%s> %q", c.Tag, c.Name)
	}
	return fmt.Sprintf("<%s> %q", c.Tag, c.Text)
}

// actionVerdict is one run of the checks.
type actionVerdict struct {
	S  string     `json:"s"`
	By *coverInfo `json:"by,omitempty"`
}

func (v actionVerdict) why() string {
	switch v.S {
	case "covered":
		if v.By != nil {
			return "covered by " + v.By.String() + ", which would receive the click"
		}
		return "covered by another element"
	case "hidden":
		return "hidden (not rendered, or no size)"
	case "disabled":
		return "disabled"
	case "readonly":
		return "read-only"
	case "unstable":
		return "unstable (moving or animating)"
	case "detached":
		return "detached from the document"
	}
	return v.S
}

// actionTimeout is how long a by-ref action waits for its element:
// Options.ActionTimeout (DefaultActionTimeout), or less when ctx ends
// sooner.
func (s *Session) actionTimeout(ctx context.Context) time.Duration {
	d := s.opts.ActionTimeout
	if d <= 0 {
		d = DefaultActionTimeout
	}
	if dl, ok := ctx.Deadline(); ok {
		d = min(d, time.Until(dl)-100*time.Millisecond)
	}
	return max(d, 0)
}

// actionable waits until the node of what (a ref or a selector) is
// actionable for op (click, dblclick, hover, check, fill, select), running
// the checks every actionPoll until timeout passes. It scrolls the node
// into view. Callers that act by ref pass s.actionTimeout(ctx).
//
// Errors: invalid (not_actionable, naming why and, when covered, the
// covering element; stale_ref when the node left the document),
// timeout (browser_timeout when ctx ends), unavailable (browser_crashed).
func (s *Session) actionable(ctx context.Context, b *instance, backend cdp.BackendNodeID, what, op string, timeout time.Duration) error {
	needs := needsOf(op)
	deadline := time.Now().Add(timeout)
	for {
		v, err := checkAction(ctx, b, backend, what, op, needs)
		if err != nil {
			return err
		}
		if v.S == "ok" {
			return nil
		}
		if v.S == "detached" || !time.Now().Add(actionPoll).Before(deadline) {
			return airlock.Errorf(airlock.CodeInvalid, airlock.ReasonNotActionable, "browser: %s %s: not actionable: %s (checked for %d ms)", op, what, v.why(), timeout.Milliseconds())
		}
		select {
		case <-ctx.Done():
			return cdpErr(ctx, b, op, ctx.Err())
		case <-time.After(actionPoll):
		}
	}
}

// checkAction runs the checks once.
func checkAction(ctx context.Context, b *instance, backend cdp.BackendNodeID, what, op string, needs actionNeeds) (actionVerdict, error) {
	if _, err := cdp.Call(ctx, b.target, dom.ScrollIntoViewIfNeeded, dom.ScrollIntoViewIfNeededParams{BackendNodeID: backend}); err != nil {
		if noLayout(err) {
			return actionVerdict{S: "hidden"}, nil
		}
		return actionVerdict{}, nodeErr(ctx, b, what, op, err)
	}
	arg := struct {
		actionNeeds
		X float64 `json:"x"`
		Y float64 `json:"y"`
	}{actionNeeds: needs, X: -1, Y: -1}
	if needs.Hit {
		q, err := cdp.Call(ctx, b.target, dom.GetContentQuads, dom.GetContentQuadsParams{BackendNodeID: backend})
		if err != nil || len(q.Quads) == 0 || len(q.Quads[0]) != 8 {
			if err == nil || noLayout(err) {
				return actionVerdict{S: "hidden"}, nil
			}
			return actionVerdict{}, nodeErr(ctx, b, what, op, err)
		}
		quad := q.Quads[0]
		arg.X, arg.Y = (quad[0]+quad[2]+quad[4]+quad[6])/4, (quad[1]+quad[3]+quad[5]+quad[7])/4
	}
	raw, err := callNode(ctx, b, backend, what, op, actionScript, arg, true)
	if err != nil {
		return actionVerdict{}, err
	}
	var v actionVerdict
	if err := json.Unmarshal(raw, &v); err != nil || v.S == "" {
		return actionVerdict{}, airlock.Errorf(airlock.CodeInternal, airlock.ReasonCDP, "browser: %s %s: unexpected check result %s", op, what, raw)
	}
	return v, nil
}

// noLayout reports a protocol error saying the node is not rendered.
func noLayout(err error) bool {
	var ce *cdproto.Error
	return errors.As(err, &ce) && (strings.Contains(ce.Message, "layout object") || strings.Contains(ce.Message, "Could not compute"))
}

// waitDocument waits, up to d, for a main-frame navigation in flight to
// commit and for the committed document to be parsed (readyState past
// "loading"): "hidden" and "detached" are answers about the document a
// goto asked for, never about the one it replaces nor about a document
// whose elements have not arrived yet. The caller holds s.mu.
func (s *Session) waitDocument(ctx context.Context, b *instance, d time.Duration) {
	deadline := time.Now().Add(d)
	s.trackerOf(b).waitCommitted(ctx, d)
	for want := s.gotoLoader; want != "" && time.Now().Before(deadline); {
		if l, err := mainLoader(ctx, b); err == nil && l == want {
			break
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(waitPoll / 2):
		}
	}
	s.gotoLoader = ""
	for time.Now().Before(deadline) {
		res, err := cdp.Call(ctx, b.target, runtime.Evaluate, runtime.EvaluateParams{Expression: "document.readyState", ReturnByValue: new(true)})
		if err == nil && res.ExceptionDetails == nil && res.Result != nil && string(res.Result.Value) != `"loading"` {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(waitPoll / 2):
		}
	}
}

// surelyAbsent confirms querySelector's "not found", which also stands for
// a protocol failure while the document is being replaced: absent only
// when the current document answers, without error, that nothing matches.
func surelyAbsent(ctx context.Context, b *instance, selector string) bool {
	doc, err := cdp.Call(ctx, b.target, dom.GetDocument, dom.GetDocumentParams{Depth: new(int64(0))})
	if err != nil || doc.Root == nil {
		return false
	}
	q, err := cdp.Call(ctx, b.target, dom.QuerySelector, dom.QuerySelectorParams{NodeID: doc.Root.NodeID, Selector: selector})
	return err == nil && q.NodeID == 0
}

// visibleScript is the fixed function that says whether an element is
// visible as the actionability checks mean it: rendered, not
// visibility: hidden, with a non-empty box.
const visibleScript = `function () {
	if (!this.isConnected) return false;
	if (typeof this.checkVisibility === "function" && !this.checkVisibility({visibilityProperty: true})) return false;
	const r = this.getBoundingClientRect();
	return r.width > 0 && r.height > 0;
}`

// seen reports whether a node is visible (visibleScript); a node without
// a box is not, and a failing check falls back to having a box.
func seen(ctx context.Context, b *instance, backend cdp.BackendNodeID) bool {
	if !hasBox(ctx, b, backend) {
		return false
	}
	raw, err := callOnNode(ctx, b, backend, "element", "wait_for", visibleScript, nil)
	if err != nil {
		return true
	}
	return string(raw) == "true"
}
