package mcp

import (
	"context"

	sdkmcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/engine"
)

// The by-ref pointer actions beyond click: hover, double-click, and
// check/uncheck. Each replies as the other actions do (actionText): the
// page the tab is on after what the action caused, with a fresh snapshot.
const (
	ToolBrowserHover    = "browser_hover"
	ToolBrowserDblclick = "browser_dblclick"
	ToolBrowserCheck    = "browser_check"
)

// CheckInput is the input of browser_check.
type CheckInput struct {
	Ref      string `json:"ref" jsonschema:"A checkbox, radio button or switch ref from the latest snapshot, such as @e3, or the ref of its label."`
	Checked  *bool  `json:"checked,omitempty" jsonschema:"The state to leave it in (default true; false unchecks it). Already in that state, nothing is clicked."`
	Snapshot *bool  `json:"snapshot,omitempty" jsonschema:"Return a fresh snapshot of the page after the action (default true); false leaves it out."`
}

func addBrowserRefTools(s *sdkmcp.Server) {
	refTool(s, ToolBrowserHover, "Hover an element", "hover", "Move the pointer over the element a ref names and leave it there: "+
		"controls that show only on hover (a delete button, a menu) are in the reply's fresh snapshot, with refs.")
	refTool(s, ToolBrowserDblclick, "Double-click an element", "dblclick", "Double-click the element a ref names (to edit a todo's "+
		"title, for instance). The reply waits for what it caused and names the page the tab is on, with a fresh snapshot.")
	AddTool(s, &sdkmcp.Tool{Name: ToolBrowserCheck, Title: "Check or uncheck",
		Description: "Check (or with checked: false, uncheck) the checkbox, radio button or switch a ref names. When the input itself " +
			"cannot take the click (hidden under its label, as many styled checkboxes are), its label is clicked, as a person would. " +
			"The reply fails if the state did not change, and otherwise names the page with a fresh snapshot.",
		Annotations: writeTool("Check or uncheck"), InputSchema: schema[CheckInput](noTune)},
		func(ctx context.Context, en *engine.Engine, p airlock.Principal, in CheckInput) (*sdkmcp.CallToolResult, error) {
			kind := "check"
			if in.Checked != nil && !*in.Checked {
				kind = "uncheck"
			}
			return actionText(ctx, en, p, kind+" "+in.Ref, engine.BrowserOp{Kind: kind, Ref: in.Ref, Snapshot: in.Snapshot})
		})
}
