package browser

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/chromedp/cdproto/cdp"
	jsonv2 "github.com/chromedp/cdproto/cdp/jsonv2"
	"github.com/chromedp/cdproto/dom"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"

	"github.com/airlockhq/airlock"
)

// interact's CSS selectors pierce open shadow roots, as Playwright's CSS
// engine does:
//
//   - the document and, recursively, every open shadow root are searched,
//     in tree order with a host's shadow tree right after the host;
//   - each compound selector (`li.todo:nth-child(2)`, `input[type=text]`)
//     is matched by the browser against one element, so it sees that
//     element's own tree scope (its siblings, its attributes);
//   - the descendant (` `) and child (`>`) combinators step from an
//     element at the top of a shadow tree to its host, so `todo-app
//     .todo-count` and `todo-item > .view` reach into the components;
//     the sibling combinators (`+`, `~`) stay among siblings;
//   - a selector list (`a, b`) yields the first element, in that order,
//     that matches any of its selectors.
//
// Closed shadow roots and iframes are not entered. The query runs as a
// fixed function of this package in an isolated world (never caller
// code; the page cannot replace the built-ins it uses).

// One query visits at most 200,000 elements (the bound is in the script).

// deepQueryScript is called on the document with the selector. It returns
// the first matching element, null when none matches, or the string
// "bad_selector" when the selector does not parse.
const deepQueryScript = `function (selector) {
  const doc = this;
  try { doc.createDocumentFragment().querySelector(selector); } catch (e) { return "bad_selector"; }
  // split cuts at top-level commas (lists) and combinators, outside
  // strings, brackets and parentheses.
  function split(sel) {
    const lists = [];
    let parts = [], cur = "", depth = 0, quote = "", pending = "";
    const flush = () => {
      const c = cur.trim();
      if (c !== "") {
        if (parts.length > 0) parts.push(pending || " ");
        parts.push(c);
      } else if (pending !== "" && parts.length === 0) {
        throw new Error("leading combinator");
      }
      cur = "";
    };
    for (let i = 0; i < sel.length; i++) {
      const ch = sel[i];
      if (quote) {
        cur += ch;
        if (ch === "\\" && i + 1 < sel.length) { cur += sel[++i]; continue; }
        if (ch === quote) quote = "";
        continue;
      }
      if (ch === "\\" && i + 1 < sel.length) { cur += ch + sel[++i]; continue; }
      if (ch === '"' || ch === "'") { quote = ch; cur += ch; continue; }
      if (ch === "(" || ch === "[") depth++;
      if (ch === ")" || ch === "]") depth--;
      if (depth > 0) { cur += ch; continue; }
      if (ch === ",") { flush(); lists.push(parts); parts = []; pending = ""; continue; }
      if (ch === ">" || ch === "+" || ch === "~" || /\s/.test(ch)) {
        if (cur.trim() !== "") { flush(); pending = ""; }
        if (!/\s/.test(ch)) pending = ch;
        continue;
      }
      cur += ch;
    }
    flush();
    lists.push(parts);
    return lists;
  }
  let lists;
  try { lists = split(selector); } catch (e) { return "bad_selector"; }
  function up(el) {
    if (el.parentElement) return el.parentElement;
    const p = el.parentNode;
    return p && p.nodeType === 11 && p.host ? p.host : null;
  }
  // matchAt: does parts[0..i] match with parts[i] on el? Memoised per
  // element, list and part, so that chains of descendant combinators
  // stay linear in the tree's depth.
  let memo = new Map();
  function matchAt(el, parts, i) {
    let m = memo.get(el);
    if (!m) { m = new Map(); memo.set(el, m); }
    const key = lists.indexOf(parts) * 4096 + i;
    let r = m.get(key);
    if (r === undefined) { r = matchOnce(el, parts, i); m.set(key, r); }
    return r;
  }
  function matchOnce(el, parts, i) {
    if (!el.matches(parts[i])) return false;
    if (i === 0) return true;
    const comb = parts[i - 1];
    if (comb === ">") { const p = up(el); return !!p && matchAt(p, parts, i - 2); }
    if (comb === " ") {
      for (let p = up(el); p; p = up(p)) if (matchAt(p, parts, i - 2)) return true;
      return false;
    }
    if (comb === "+") { const p = el.previousElementSibling; return !!p && matchAt(p, parts, i - 2); }
    for (let p = el.previousElementSibling; p; p = p.previousElementSibling) if (matchAt(p, parts, i - 2)) return true;
    return false;
  }
  let seen = 0;
  function walk(root) {
    for (let el = root.firstElementChild; el; el = el.nextElementSibling) {
      if (++seen > 200000) return null; // the bound on elements visited
      for (const parts of lists) if (matchAt(el, parts, parts.length - 1)) return el;
      if (el.shadowRoot) { const f = walk(el.shadowRoot); if (f) return f; }
      const f = walk(el);
      if (f) return f;
    }
    return null;
  }
  try { return walk(doc); } catch (e) { return "bad_selector"; }
}`

// queryDeep finds the first element matching selector in the current
// tab's main document and its open shadow roots (see above). Errors:
// invalid (bad_selector); other protocol failures (a document being
// replaced) read as not found.
func queryDeep(ctx context.Context, b *instance, selector string) (cdp.BackendNodeID, bool, error) {
	doc, err := cdp.Call(ctx, b.target, dom.GetDocument, dom.GetDocumentParams{Depth: new(int64(0))})
	if err != nil || doc.Root == nil {
		return 0, false, transient(ctx, b, err)
	}
	ft, err := cdp.Call(ctx, b.target, page.GetFrameTree, cdp.Empty{})
	if err != nil || ft.FrameTree == nil || ft.FrameTree.Frame == nil {
		return 0, false, transient(ctx, b, err)
	}
	world, err := cdp.Call(ctx, b.target, page.CreateIsolatedWorld, page.CreateIsolatedWorldParams{FrameID: ft.FrameTree.Frame.ID, WorldName: "airlock"})
	if err != nil {
		return 0, false, transient(ctx, b, err)
	}
	const group = "airlock-query"
	obj, err := cdp.Call(ctx, b.target, dom.ResolveNode, dom.ResolveNodeParams{
		BackendNodeID: doc.Root.BackendNodeID, ObjectGroup: group, ExecutionContextID: world.ExecutionContextID,
	})
	if err != nil || obj.Object == nil || obj.Object.ObjectID == "" {
		return 0, false, transient(ctx, b, err)
	}
	defer cdp.Call(context.WithoutCancel(ctx), b.target, runtime.ReleaseObjectGroup, runtime.ReleaseObjectGroupParams{ObjectGroup: group})
	arg, err := json.Marshal(selector)
	if err != nil {
		return 0, false, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonBadSelector, "browser: %q is not a valid CSS selector", selector)
	}
	res, err := cdp.Call(ctx, b.target, runtime.CallFunctionOn, runtime.CallFunctionOnParams{
		FunctionDeclaration: deepQueryScript,
		ObjectID:            obj.Object.ObjectID,
		Arguments:           []*runtime.CallArgument{{Value: jsonv2.Value(arg)}},
		ObjectGroup:         group,
		Silent:              new(true),
	})
	if err != nil {
		return 0, false, transient(ctx, b, err)
	}
	if res.ExceptionDetails != nil || res.Result == nil {
		return 0, false, airlock.Errorf(airlock.CodeInternal, airlock.ReasonCDP, "browser: the selector query failed")
	}
	switch {
	case res.Result.Type == runtime.RemoteObjectTypeString:
		return 0, false, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonBadSelector, "browser: %q is not a valid CSS selector", selector)
	case res.Result.ObjectID == "":
		return 0, false, nil // null: no element matches
	}
	d, err := cdp.Call(ctx, b.target, dom.DescribeNode, dom.DescribeNodeParams{ObjectID: res.Result.ObjectID})
	if err != nil || d.Node == nil {
		return 0, false, transient(ctx, b, err)
	}
	return d.Node.BackendNodeID, true, nil
}

// findFor is findWhen for a step that acts on the element: when none
// comes into state before the timeout, it says why, after one last look:
// not_found (no_match) when no element matches the selector, invalid
// (not_visible) when one matches but has no box.
func findFor(ctx context.Context, b *instance, selector, state string, timeout time.Duration) (cdp.BackendNodeID, error) {
	backend, err := findWhen(ctx, b, selector, state, timeout)
	if err == nil || airlock.ReasonOf(err) != "wait_for_timeout" {
		return backend, err
	}
	if why := whyNot(context.WithoutCancel(ctx), b, selector); why != nil {
		return 0, why
	}
	return 0, err
}

// whyNot classifies a selector that is not in the wanted state: nil when
// it cannot tell (a document being replaced).
func whyNot(ctx context.Context, b *instance, selector string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	backend, found, err := queryDeep(ctx, b, selector)
	switch {
	case err != nil:
		return nil
	case !found:
		return airlock.Errorf(airlock.CodeNotFound, airlock.ReasonNoMatch, "browser: no element matches %q (the document and its open shadow roots searched)", selector)
	case !hasBox(ctx, b, backend):
		return airlock.Errorf(airlock.CodeInvalid, airlock.ReasonNotVisible, "browser: %q matches an element that is not visible (no box: hidden or not rendered)", selector)
	}
	return nil
}

// waitStep is wait_for_selector's wait: on a timeout, the error says
// whether no element matches or one matches in another state.
func waitStep(ctx context.Context, b *instance, selector, state string, timeout time.Duration) error {
	err := waitSelector(ctx, b, selector, state, timeout)
	if airlock.ReasonOf(err) != "wait_for_timeout" || (state != "visible" && state != "attached") {
		return err
	}
	if why := whyNot(context.WithoutCancel(ctx), b, selector); why != nil {
		return airlock.Errorf(airlock.CodeTimeout, airlock.ReasonWaitForTimeout, "browser: wait_for_selector %s after %d ms: %s", state, timeout.Milliseconds(), strings.TrimPrefix(why.Error(), "browser: "))
	}
	return err
}
