package browser

import (
	"context"
	"encoding/json"
	"unicode/utf8"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/dom"

	"github.com/airlockhq/airlock"
)

// visibleTextScript is the fixed function read runs on the document when
// the article extractor keeps little of a page: the rendered text of the
// composed tree (open shadow roots entered, slots followed, which
// innerText does not do), as Markdown-like lines: headings with #, list
// items with -, checkboxes as [ ] / [x], one line per block (a flex row's items on one). Hidden
// elements (display: none, visibility other than visible, zero font
// size, a 1-px or transparent control) are left out. It stops at arg
// characters.
const visibleTextScript = `function (limit) {
  const lines = [];
  let prefix = "", text = "", total = 0, seen = 0;
  const SKIP = new Set(["SCRIPT", "STYLE", "NOSCRIPT", "TEMPLATE", "HEAD", "TITLE", "META", "LINK", "IFRAME", "SVG", "CANVAS"]);
  function newline() {
    const t = text.trim();
    if (t !== "") { lines.push(prefix + t); total += prefix.length + t.length + 1; prefix = ""; }
    text = "";
  }
  function append(t) {
    t = t.replace(/\s+/g, " ");
    if (text === "" || text.endsWith(" ")) t = t.replace(/^ /, "");
    text += t;
  }
  function kids(node) {
    if (node.shadowRoot) return node.shadowRoot.childNodes;
    if (node.localName === "slot") {
      const a = node.assignedNodes({ flatten: true });
      if (a.length > 0) return a;
    }
    return node.childNodes;
  }
  function walk(node, style) {
    for (const n of kids(node)) {
      if (total > limit || ++seen > 200000) return;
      if (n.nodeType === 3) {
        if (style && style.visibility === "visible" && style.fontSize !== "0px") append(n.data);
        continue;
      }
      if (n.nodeType !== 1 || SKIP.has(n.tagName.toUpperCase())) continue;
      const cs = getComputedStyle(n);
      if (cs.display === "none") continue;
      // The items of a flex row read as one line.
      const row = style && style.display.endsWith("flex") && style.flexDirection.startsWith("row");
      const inline = row || cs.display.startsWith("inline") || cs.display === "contents";
      const tag = n.localName;
      if (tag === "input" || tag === "textarea" || tag === "select") {
        const r = n.getBoundingClientRect();
        if (cs.visibility !== "visible" || cs.opacity === "0" || r.width <= 1 || r.height <= 1) continue;
        if (n.type === "checkbox" || n.type === "radio") append(" " + (n.checked ? "[x]" : "[ ]") + " ");
        else if (tag === "select" && n.selectedOptions.length > 0) append(" [" + n.selectedOptions[0].text + "] ");
        continue;
      }
      if (tag === "br") { newline(); continue; }
      if (!inline) {
        newline();
        if (/^h[1-6]$/.test(tag)) prefix = "#".repeat(+tag[1]) + " ";
        else if (tag === "li" || cs.display === "list-item") prefix = "- ";
      } else {
        append(" ");
      }
      walk(n, cs);
      if (!inline) newline(); else append(" ");
    }
  }
  if (this.body) walk(this.body, getComputedStyle(this.body));
  newline();
  return lines.join("\n");
}`

// visibleText returns the rendered text of the current tab's document
// (visibleTextScript), cut at limit characters.
func visibleText(ctx context.Context, b *instance, limit int) (string, bool, error) {
	doc, err := cdp.Call(ctx, b.target, dom.GetDocument, dom.GetDocumentParams{Depth: new(int64(0))})
	if err != nil {
		return "", false, cdpErr(ctx, b, "read", err)
	}
	if doc.Root == nil {
		return "", false, airlock.Errorf(airlock.CodeInternal, airlock.ReasonCDP, "browser: read: no document")
	}
	raw, err := callOnNode(ctx, b, doc.Root.BackendNodeID, "document", "read", visibleTextScript, limit)
	if err != nil {
		return "", false, err
	}
	var text string
	if err := json.Unmarshal(raw, &text); err != nil {
		return "", false, airlock.Errorf(airlock.CodeInternal, airlock.ReasonCDP, "browser: read: unexpected result")
	}
	if utf8.RuneCountInString(text) > limit {
		return string([]rune(text)[:limit]), true, nil
	}
	return text, false, nil
}
