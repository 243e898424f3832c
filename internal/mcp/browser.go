package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	sdkmcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/engine"
)

// Browser tool names.
const (
	ToolBrowserNavigate   = "browser_navigate"
	ToolBrowserSnapshot   = "browser_snapshot"
	ToolBrowserClick      = "browser_click"
	ToolBrowserFill       = "browser_fill"
	ToolBrowserPress      = "browser_press"
	ToolBrowserSelect     = "browser_select"
	ToolBrowserRead       = "browser_read"
	ToolBrowserScreenshot = "browser_screenshot"
	ToolBrowserInteract   = "browser_interact"
	ToolBrowserBack       = "browser_back"
	ToolBrowserWaitFor    = "browser_wait_for"
	ToolBrowserClose      = "browser_close"
)

// NavigateInput is the input of browser_navigate.
type NavigateInput struct {
	URL      string `json:"url" jsonschema:"The absolute http or https URL to open in the browser."`
	Snapshot *bool  `json:"snapshot,omitempty" jsonschema:"Return a fresh snapshot of the page after the action (default true); false leaves it out."`
}

// SnapshotInput is the input of browser_snapshot.
type SnapshotInput struct {
	InteractiveOnly bool `json:"interactive_only,omitempty" jsonschema:"List only interactive elements (buttons, links, fields), one per line."`
	MaxChars        int  `json:"max_chars,omitempty" jsonschema:"The most characters of outline to return (default 12000)."`
	Offset          int  `json:"offset,omitempty" jsonschema:"Continue the last snapshot of the same page from this character offset (the truncation marker names it)."`
}

// RefInput names an element by its snapshot ref.
type RefInput struct {
	Ref      string `json:"ref" jsonschema:"An element ref from the latest snapshot, such as @e3."`
	Snapshot *bool  `json:"snapshot,omitempty" jsonschema:"Return a fresh snapshot of the page after the action (default true); false leaves it out."`
}

// HistoryInput is the input of browser_back.
type HistoryInput struct {
	Snapshot *bool `json:"snapshot,omitempty" jsonschema:"Return a fresh snapshot of the page after the action (default true); false leaves it out."`
}

// FillInput is the input of browser_fill.
type FillInput struct {
	Ref      string `json:"ref" jsonschema:"A text field's ref from the latest browser_snapshot."`
	Text     string `json:"text" jsonschema:"The text that replaces the field's content (empty clears it)."`
	Snapshot *bool  `json:"snapshot,omitempty" jsonschema:"Return a fresh snapshot of the page after the action (default true); false leaves it out."`
}

// PressInput is the input of browser_press.
type PressInput struct {
	Key      string `json:"key" jsonschema:"A key name (Enter, Tab, Escape, Backspace, ArrowDown, ...) or one character."`
	Ref      string `json:"ref,omitempty" jsonschema:"An element to focus first (optional)."`
	Snapshot *bool  `json:"snapshot,omitempty" jsonschema:"Return a fresh snapshot of the page after the action (default true); false leaves it out."`
}

// SelectInput is the input of browser_select.
type SelectInput struct {
	Ref      string `json:"ref" jsonschema:"A <select> element's ref."`
	Value    string `json:"value" jsonschema:"The option to choose: its value, or else its visible label."`
	Snapshot *bool  `json:"snapshot,omitempty" jsonschema:"Return a fresh snapshot of the page after the action (default true); false leaves it out."`
}

// ReadInput is the input of browser_read.
type ReadInput struct {
	Mode string `json:"mode,omitempty" jsonschema:"main_content (default: the page's main content as markdown), article (every extracted field, as JSON) or raw (the rendered HTML)."`
}

// ScreenshotInput is the input of browser_screenshot.
type ScreenshotInput struct {
	FullPage bool `json:"full_page,omitempty" jsonschema:"Capture the whole page, not only the viewport."`
}

// WaitForInput is the input of browser_wait_for.
type WaitForInput struct {
	Selector  string `json:"selector,omitempty" jsonschema:"A CSS selector to wait for. Give selector or role."`
	Role      string `json:"role,omitempty" jsonschema:"An ARIA role to wait for. Give selector or role."`
	TimeoutMS int    `json:"timeout_ms,omitempty" jsonschema:"How long to wait (default 5000, at most 120000)."`
}

// InteractInput is the input of browser_interact.
type InteractInput struct {
	Actions     []map[string]any `json:"actions" jsonschema:"The steps, each an object tagged by action: goto {url}, click/dblclick {selector, wait_for_hidden?, force?}, fill {selector, text}, press {key, selector?}, select {selector, value}, extract_text {selector?, max_chars?}, wait_for_selector {selector, state: visible|hidden|attached|detached, timeout_ms?}, screenshot {out_path}, sleep {ms}."`
	StopOnError bool             `json:"stop_on_error,omitempty" jsonschema:"Stop at the first failed step (by default failures are recorded and the sequence goes on; a failed goto always stops it)."`
}

// CloseInput is the input of browser_close.
type CloseInput struct{}

// noTune leaves an inferred schema as it is.
func noTune(map[string]*jsonschema.Schema) {}

func writeTool(title string) *sdkmcp.ToolAnnotations {
	open := true
	return &sdkmcp.ToolAnnotations{Title: title, OpenWorldHint: &open}
}

// refTool adds a tool that runs the op kind on the element a ref names and
// replies with actionText.
func refTool(s *sdkmcp.Server, name, title, kind, desc string) {
	AddTool(s, &sdkmcp.Tool{Name: name, Title: title, Description: desc, Annotations: writeTool(title), InputSchema: schema[RefInput](noTune)},
		func(ctx context.Context, en *engine.Engine, p airlock.Principal, in RefInput) (*sdkmcp.CallToolResult, error) {
			return actionText(ctx, en, p, kind+" "+in.Ref, engine.BrowserOp{Kind: kind, Ref: in.Ref, Snapshot: in.Snapshot})
		})
}

func addBrowserTools(s *sdkmcp.Server) {
	AddTool(s, &sdkmcp.Tool{Name: ToolBrowserNavigate, Title: "Open a URL in the browser",
		Description: "Open a URL in a real headless browser (JavaScript runs) under Airlock's policy: only http and https, only origins the " +
			"operator's browser policy allows, and every request of the page (subresources, frames, workers, WebSockets) is checked. " +
			"The browser session is kept between calls. The reply names the page it landed on (URL, title, HTTP status) and carries a " +
			"snapshot of it with element refs (snapshot: false leaves it out).",
		Annotations: writeTool("Open a URL in the browser"), InputSchema: schema[NavigateInput](noTune)},
		func(ctx context.Context, en *engine.Engine, p airlock.Principal, in NavigateInput) (*sdkmcp.CallToolResult, error) {
			return actionText(ctx, en, p, "navigate "+in.URL, engine.BrowserOp{Kind: "navigate", URL: in.URL, Snapshot: in.Snapshot})
		})
	AddTool(s, &sdkmcp.Tool{Name: ToolBrowserSnapshot, Title: "Snapshot the page",
		Description: "An outline of the page's accessibility tree, one element per line: `- role \"name\" @eN`. Refs (@eN) name elements for " +
			"browser_click, browser_fill, browser_press and browser_select; they die when the page navigates (a stale ref is an error, never a " +
			"click on something else). Long pages are cut at max_chars with a marker naming the offset to continue from. The action tools " +
			"already return a fresh snapshot: call this one to page through a long outline or for interactive_only.",
		Annotations: readOnly("Snapshot the page"), InputSchema: schema[SnapshotInput](noTune)},
		func(ctx context.Context, en *engine.Engine, p airlock.Principal, in SnapshotInput) (*sdkmcp.CallToolResult, error) {
			res, err := browserDo(ctx, en, p, engine.BrowserOp{Kind: "snapshot", InteractiveOnly: in.InteractiveOnly, MaxChars: in.MaxChars, Offset: in.Offset})
			if err != nil {
				return nil, err
			}
			return Text(res.Snapshot.Text), nil
		})
	refTool(s, ToolBrowserClick, "Click an element", "click", "Click the element a ref names (from the latest snapshot). The reply waits for "+
		"what the click caused (a navigation, a new tab, the page settling) and names the page the tab is on after it, with a fresh snapshot.")
	AddTool(s, &sdkmcp.Tool{Name: ToolBrowserFill, Title: "Fill a text field", Description: "Replace the content of the text field a ref names.",
		Annotations: writeTool("Fill a text field"), InputSchema: schema[FillInput](noTune)},
		func(ctx context.Context, en *engine.Engine, p airlock.Principal, in FillInput) (*sdkmcp.CallToolResult, error) {
			return actionText(ctx, en, p, "fill "+in.Ref, engine.BrowserOp{Kind: "fill", Ref: in.Ref, Text: in.Text, Snapshot: in.Snapshot})
		})
	AddTool(s, &sdkmcp.Tool{Name: ToolBrowserPress, Title: "Press a key", Description: "Press one key, on the focused element or on the element a ref names (Enter submits a form).",
		Annotations: writeTool("Press a key"), InputSchema: schema[PressInput](noTune)},
		func(ctx context.Context, en *engine.Engine, p airlock.Principal, in PressInput) (*sdkmcp.CallToolResult, error) {
			return actionText(ctx, en, p, "press "+in.Key, engine.BrowserOp{Kind: "press", Key: in.Key, Ref: in.Ref, Snapshot: in.Snapshot})
		})
	AddTool(s, &sdkmcp.Tool{Name: ToolBrowserSelect, Title: "Choose an option", Description: "Choose an option (by value, or else by visible label) in the <select> a ref names. A click on an option's ref chooses it too.",
		Annotations: writeTool("Choose an option"), InputSchema: schema[SelectInput](noTune)},
		func(ctx context.Context, en *engine.Engine, p airlock.Principal, in SelectInput) (*sdkmcp.CallToolResult, error) {
			return actionText(ctx, en, p, "select "+in.Ref, engine.BrowserOp{Kind: "select", Ref: in.Ref, Value: in.Value, Snapshot: in.Snapshot})
		})
	AddTool(s, &sdkmcp.Tool{Name: ToolBrowserRead, Title: "Read the page",
		Description: "The current page after its scripts ran, through the same extractor as web_fetch: main_content (markdown), article (JSON) or raw (HTML).",
		Annotations: readOnly("Read the page"), InputSchema: schema[ReadInput](func(p map[string]*jsonschema.Schema) {
			p["mode"].Enum = []any{"main_content", "article", "raw"}
		})},
		func(ctx context.Context, en *engine.Engine, p airlock.Principal, in ReadInput) (*sdkmcp.CallToolResult, error) {
			res, err := browserDo(ctx, en, p, engine.BrowserOp{Kind: "read", Mode: in.Mode})
			if err != nil {
				return nil, err
			}
			r := res.Read
			switch r.Mode {
			case "raw":
				return Text(r.HTML), nil
			case "article":
				js, err := json.MarshalIndent(r.Page, "", "  ")
				if err != nil {
					return nil, err
				}
				return Text(string(js)), nil
			}
			return Text(fmt.Sprintf("# %s\n%s\n\n%s", r.Title, r.URL, r.Markdown)), nil
		})
	AddTool(s, &sdkmcp.Tool{Name: ToolBrowserScreenshot, Title: "Screenshot the page", Description: "A PNG image of the viewport, or of the whole page.",
		Annotations: readOnly("Screenshot the page"), InputSchema: schema[ScreenshotInput](noTune)},
		func(ctx context.Context, en *engine.Engine, p airlock.Principal, in ScreenshotInput) (*sdkmcp.CallToolResult, error) {
			res, err := browserDo(ctx, en, p, engine.BrowserOp{Kind: "screenshot", FullPage: in.FullPage})
			if err != nil {
				return nil, err
			}
			return &sdkmcp.CallToolResult{Content: []sdkmcp.Content{&sdkmcp.ImageContent{Data: res.Screenshot.Data, MIMEType: "image/png"}}}, nil
		})
	AddTool(s, &sdkmcp.Tool{Name: ToolBrowserWaitFor, Title: "Wait for an element", Description: "Wait until an element matching a CSS selector or an ARIA role is on the page.",
		Annotations: readOnly("Wait for an element"), InputSchema: schema[WaitForInput](noTune)},
		func(ctx context.Context, en *engine.Engine, p airlock.Principal, in WaitForInput) (*sdkmcp.CallToolResult, error) {
			if _, err := browserDo(ctx, en, p, engine.BrowserOp{Kind: "wait_for", Selector: in.Selector, Role: in.Role, TimeoutMS: in.TimeoutMS}); err != nil {
				return nil, err
			}
			return Text("present"), nil
		})
	AddTool(s, &sdkmcp.Tool{Name: ToolBrowserBack, Title: "Go back", Description: "Go one page back in the browser's history.",
		Annotations: writeTool("Go back"), InputSchema: schema[HistoryInput](noTune)},
		func(ctx context.Context, en *engine.Engine, p airlock.Principal, in HistoryInput) (*sdkmcp.CallToolResult, error) {
			return actionText(ctx, en, p, "back", engine.BrowserOp{Kind: "back", Snapshot: in.Snapshot})
		})
	AddTool(s, &sdkmcp.Tool{Name: ToolBrowserInteract, Title: "Run a sequence of browser steps",
		Description: "Run several steps in one call, naming elements by CSS selector. Returns each step's result (ok or its error, " +
			"extracted text), the final URL and title.",
		Annotations: writeTool("Run a sequence of browser steps"), InputSchema: schema[InteractInput](noTune)},
		func(ctx context.Context, en *engine.Engine, p airlock.Principal, in InteractInput) (*sdkmcp.CallToolResult, error) {
			if len(in.Actions) == 0 {
				return nil, invalid(airlock.ReasonBrowserAction, "actions: at least one step is required")
			}
			actions := make([]engine.BrowserAction, 0, len(in.Actions))
			for i, a := range in.Actions {
				raw, err := json.Marshal(a)
				if err != nil {
					return nil, invalid(airlock.ReasonBrowserAction, "actions[%d]: %v", i, err)
				}
				act, err := engine.ParseBrowserAction(raw)
				if err != nil {
					return nil, invalid(airlock.ReasonBrowserAction, "actions[%d]: %v", i, err)
				}
				actions = append(actions, act)
			}
			id, err := browserSession(ctx, en, p)
			if err != nil {
				return nil, err
			}
			st, _ := browserKey(ctx, p)
			done := st.during(ctx, en, p, id)
			res, err := elicitInResult(ctx, st, en, p, id, func(ctx context.Context) (engine.BrowserInteractResult, error) {
				return en.BrowserInteract(ctx, p, id, actions, in.StopOnError)
			})
			done()
			if err != nil {
				return nil, err
			}
			js, err := json.MarshalIndent(res, "", "  ")
			if err != nil {
				return nil, err
			}
			out := Text(string(js))
			out.StructuredContent = res
			// A failed step makes the call an error result, so an agent
			// cannot read a failed sequence as done.
			for _, r := range res.Results {
				if r.Error != nil {
					out = Text(fmt.Sprintf("step %d (%s) failed: %s (%s): %s\n%s", r.Index, r.Action, r.Error.Code, r.Error.Reason, r.Error.Message, js))
					out.StructuredContent = res
					out.IsError = true
					break
				}
			}
			return out, nil
		})
	AddTool(s, &sdkmcp.Tool{Name: ToolBrowserClose, Title: "Close the browser", Description: "Close this conversation's browser session (the next browser call opens a fresh one).",
		Annotations: writeTool("Close the browser"), InputSchema: schema[CloseInput](noTune)},
		func(ctx context.Context, en *engine.Engine, p airlock.Principal, _ CloseInput) (*sdkmcp.CallToolResult, error) {
			st, key := browserKey(ctx, p)
			st.mu.Lock()
			id := st.browsers[key]
			delete(st.browsers, key)
			delete(st.approvers, id)
			st.mu.Unlock()
			if id == "" {
				return Text("no browser session was open"), nil
			}
			if err := en.BrowserClose(ctx, p, id, false); err != nil && airlock.CodeOf(err) != airlock.CodeNotFound {
				return nil, err
			}
			return Text("closed"), nil
		})
}

// browserKey is the state and the key of this connection's session.
func browserKey(ctx context.Context, p airlock.Principal) (*state, string) {
	st, _ := ctx.Value(stateKey{}).(*state)
	sid, _ := ctx.Value(sessionKey{}).(string)
	return st, p.String() + "\x00" + sid
}

// browserSession returns this MCP session's browser session, opening one
// (ephemeral, on the configured browser policy) when there is none or the
// engine has reaped it.
func browserSession(ctx context.Context, en *engine.Engine, p airlock.Principal) (string, error) {
	st, key := browserKey(ctx, p)
	if st == nil {
		return "", airlock.Errorf(airlock.CodeInternal, airlock.ReasonMCPState, "mcp: no server state")
	}
	st.mu.Lock()
	id := st.browsers[key]
	st.mu.Unlock()
	if id != "" {
		for _, s := range en.BrowserSessions(p) {
			if s.ID == id {
				return id, nil
			}
		}
	}
	req := engine.BrowserOpenRequest{}
	ap := st.sessionApprover(ctx)
	if ap != nil {
		req.Approver, req.ApproverName = ap, "mcp elicitation"
	}
	info, err := en.BrowserOpen(ctx, p, req)
	if err != nil {
		return "", err
	}
	st.mu.Lock()
	st.browsers[key] = info.ID
	if ap != nil {
		st.approvers[info.ID] = ap
	}
	st.mu.Unlock()
	return info.ID, nil
}

func browserDo(ctx context.Context, en *engine.Engine, p airlock.Principal, op engine.BrowserOp) (engine.BrowserResult, error) {
	id, err := browserSession(ctx, en, p)
	if err != nil {
		return engine.BrowserResult{}, err
	}
	st, _ := browserKey(ctx, p)
	defer st.during(ctx, en, p, id)()
	return elicitInResult(ctx, st, en, p, id, func(ctx context.Context) (engine.BrowserResult, error) {
		return en.BrowserDo(ctx, p, id, op)
	})
}

// actionText runs an action op and reports what it did and the page the
// tab is really on after it (the op waited for what it caused): URL,
// title, the HTTP status of a navigation, new tabs, and the fresh
// snapshot unless the call opted out.
func actionText(ctx context.Context, en *engine.Engine, p airlock.Principal, did string, op engine.BrowserOp) (*sdkmcp.CallToolResult, error) {
	res, err := browserDo(ctx, en, p, op)
	if err != nil {
		return nil, err
	}
	return Text(pageReport(did, res)), nil
}

// pageReport is the text of an action's reply.
func pageReport(did string, res engine.BrowserResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Done: %s\n", did)
	if pg := res.Page; pg != nil {
		fmt.Fprintf(&b, "Page: %s\nTitle: %s\n", pg.URL, pg.Title)
		switch {
		case pg.Navigated && pg.Status != 0:
			fmt.Fprintf(&b, "Navigated: a new page loaded (HTTP %d)\n", pg.Status)
		case pg.Navigated:
			b.WriteString("Navigated: a new page loaded\n")
		default:
			b.WriteString("Navigated: no (same page)\n")
		}
		if pg.Loading {
			b.WriteString("Loading: the page had not finished loading; take a snapshot again to see it complete\n")
		}
		if pg.Error != "" {
			fmt.Fprintf(&b, "Error: the page did not load (%s); the tab shows the browser's error page\n", pg.Error)
		}
		for _, r := range pg.Refused {
			fmt.Fprintf(&b, "Refused by policy: %s %s (%s)\n", r.ResourceType, r.URL, r.Reason)
		}
		for _, t := range pg.NewTabs {
			fmt.Fprintf(&b, "New tab opened: %s (actions stay on this tab)\n", t.URL)
		}
	}
	if pg := res.Page; pg != nil && pg.SnapshotError != "" {
		fmt.Fprintf(&b, "Snapshot: %s (the page's scripts may be busy; browser_snapshot retries)\n", pg.SnapshotError)
	}
	if s := res.Snapshot; s != nil {
		b.WriteString("Snapshot (refs of this page):\n")
		b.WriteString(s.Text)
	}
	return b.String()
}
