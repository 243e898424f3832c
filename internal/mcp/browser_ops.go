package mcp

import (
	"context"
	"fmt"
	"strings"

	sdkmcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/engine"
)

// The browser ops that complete the MCP surface: every op of the browser is
// a tool (the rest are in browser.go).
const (
	ToolBrowserGetState   = "browser_get_state"
	ToolBrowserForward    = "browser_forward"
	ToolBrowserNetworkLog = "browser_network_log"
	ToolBrowserConsole    = "browser_console"
	ToolBrowserNewTab     = "browser_new_tab"
	ToolBrowserCloseTab   = "browser_close_tab"
	ToolBrowserUpload     = "browser_upload"
	ToolBrowserDownload   = "browser_download"
)

// NewTabInput is the input of browser_new_tab.
type NewTabInput struct {
	URL string `json:"url,omitempty" jsonschema:"An absolute http or https URL to open in the new tab (optional: a blank tab)."`
}

// UploadInput is the input of browser_upload.
type UploadInput struct {
	Ref  string `json:"ref" jsonschema:"A file input's ref from the latest browser_snapshot."`
	Path string `json:"path" jsonschema:"A file in the session's files directory (relative to it), e.g. one browser_download saved."`
}

// DownloadInput is the input of browser_download.
type DownloadInput struct {
	URL      string `json:"url" jsonschema:"The absolute http or https URL to download, under the browser's origin policy and with the session's cookies."`
	DestPath string `json:"dest_path" jsonschema:"Where to save it, relative to the session's files directory."`
}

// EmptyInput is the input of the tools that take none.
type EmptyInput struct{}

func addBrowserOpTools(s *sdkmcp.Server) {
	AddTool(s, &sdkmcp.Tool{Name: ToolBrowserGetState, Title: "Where the browser is",
		Description: "The current page's URL and title.",
		Annotations: readOnly("Where the browser is"), InputSchema: schema[EmptyInput](noTune)},
		func(ctx context.Context, en *engine.Engine, p airlock.Principal, _ EmptyInput) (*sdkmcp.CallToolResult, error) {
			res, err := browserDo(ctx, en, p, engine.BrowserOp{Kind: "get_state"})
			if err != nil {
				return nil, err
			}
			return Text(fmt.Sprintf("Page: %s (%s)", res.State.URL, res.State.Title)), nil
		})
	AddTool(s, &sdkmcp.Tool{Name: ToolBrowserForward, Title: "Go forward",
		Description: "Go one page forward in the browser's history (after browser_back).",
		Annotations: writeTool("Go forward"), InputSchema: schema[HistoryInput](noTune)},
		func(ctx context.Context, en *engine.Engine, p airlock.Principal, in HistoryInput) (*sdkmcp.CallToolResult, error) {
			return actionText(ctx, en, p, "forward", engine.BrowserOp{Kind: "forward", Snapshot: in.Snapshot})
		})
	AddTool(s, &sdkmcp.Tool{Name: ToolBrowserNetworkLog, Title: "The browser's requests",
		Description: "The requests the session's pages made, oldest first, each allowed or refused by Airlock's policy " +
			"(with the reason): use it to see why a page or a resource did not load.",
		Annotations: readOnly("The browser's requests"), InputSchema: schema[EmptyInput](noTune)},
		func(ctx context.Context, en *engine.Engine, p airlock.Principal, _ EmptyInput) (*sdkmcp.CallToolResult, error) {
			res, err := browserDo(ctx, en, p, engine.BrowserOp{Kind: "network_log"})
			if err != nil {
				return nil, err
			}
			var b strings.Builder
			if res.Network.Dropped > 0 {
				fmt.Fprintf(&b, "(%d older requests no longer kept)\n", res.Network.Dropped)
			}
			for _, e := range res.Network.Entries {
				verdict := "allowed"
				if !e.Allowed {
					verdict = "REFUSED (" + e.Reason + ")"
				}
				fmt.Fprintf(&b, "%s %s %s", verdict, e.Method, e.URL)
				if e.ResourceType != "" {
					fmt.Fprintf(&b, " [%s]", e.ResourceType)
				}
				b.WriteByte('\n')
			}
			if len(res.Network.Entries) == 0 {
				b.WriteString("no requests yet")
			}
			return Text(strings.TrimRight(b.String(), "\n")), nil
		})
	AddTool(s, &sdkmcp.Tool{Name: ToolBrowserConsole, Title: "The browser's console",
		Description: "The console messages of the session's pages (log, warning, error, ...), oldest first.",
		Annotations: readOnly("The browser's console"), InputSchema: schema[EmptyInput](noTune)},
		func(ctx context.Context, en *engine.Engine, p airlock.Principal, _ EmptyInput) (*sdkmcp.CallToolResult, error) {
			res, err := browserDo(ctx, en, p, engine.BrowserOp{Kind: "console"})
			if err != nil {
				return nil, err
			}
			var b strings.Builder
			if res.Console.Dropped > 0 {
				fmt.Fprintf(&b, "(%d older messages no longer kept)\n", res.Console.Dropped)
			}
			for _, m := range res.Console.Messages {
				fmt.Fprintf(&b, "[%s] %s\n", m.Level, m.Text)
			}
			if len(res.Console.Messages) == 0 {
				b.WriteString("no console messages")
			}
			return Text(strings.TrimRight(b.String(), "\n")), nil
		})
	AddTool(s, &sdkmcp.Tool{Name: ToolBrowserNewTab, Title: "Open a tab",
		Description: "Open a new tab (on a URL, or blank) and make it the one the other browser tools act on. Refs of the previous tab die.",
		Annotations: writeTool("Open a tab"), InputSchema: schema[NewTabInput](noTune)},
		func(ctx context.Context, en *engine.Engine, p airlock.Principal, in NewTabInput) (*sdkmcp.CallToolResult, error) {
			res, err := browserDo(ctx, en, p, engine.BrowserOp{Kind: "new_tab", URL: in.URL})
			if err != nil {
				return nil, err
			}
			return tabsText("Opened a tab.", res), nil
		})
	AddTool(s, &sdkmcp.Tool{Name: ToolBrowserCloseTab, Title: "Close the tab",
		Description: "Close the current tab; the previous one becomes current (the last tab cannot be closed: use browser_close).",
		Annotations: writeTool("Close the tab"), InputSchema: schema[EmptyInput](noTune)},
		func(ctx context.Context, en *engine.Engine, p airlock.Principal, _ EmptyInput) (*sdkmcp.CallToolResult, error) {
			res, err := browserDo(ctx, en, p, engine.BrowserOp{Kind: "close_tab"})
			if err != nil {
				return nil, err
			}
			return tabsText("Closed the tab.", res), nil
		})
	AddTool(s, &sdkmcp.Tool{Name: ToolBrowserUpload, Title: "Upload a file",
		Description: "Set the file of a file input (a ref) to a file of the session's files directory.",
		Annotations: writeTool("Upload a file"), InputSchema: schema[UploadInput](noTune)},
		func(ctx context.Context, en *engine.Engine, p airlock.Principal, in UploadInput) (*sdkmcp.CallToolResult, error) {
			return actionText(ctx, en, p, "upload "+in.Path+" to "+in.Ref, engine.BrowserOp{Kind: "upload", Ref: in.Ref, Path: in.Path})
		})
	AddTool(s, &sdkmcp.Tool{Name: ToolBrowserDownload, Title: "Download a file",
		Description: "Download a URL through the browser (its origin policy and cookies) into the session's files directory.",
		Annotations: writeTool("Download a file"), InputSchema: schema[DownloadInput](noTune)},
		func(ctx context.Context, en *engine.Engine, p airlock.Principal, in DownloadInput) (*sdkmcp.CallToolResult, error) {
			res, err := browserDo(ctx, en, p, engine.BrowserOp{Kind: "download", URL: in.URL, DestPath: in.DestPath})
			if err != nil {
				return nil, err
			}
			d := res.Download
			return Text(downloadText(d.Path, d.Bytes, d.ContentType, d.Name)), nil
		})
}

func tabsText(did string, res engine.BrowserResult) *sdkmcp.CallToolResult {
	var b strings.Builder
	b.WriteString(did)
	b.WriteString("\nTabs (* is current):")
	for _, t := range res.Tabs {
		mark := " "
		if t.Current {
			mark = "*"
		}
		fmt.Fprintf(&b, "\n%s %s: %s (%s)", mark, t.ID, t.URL, t.Title)
	}
	return Text(b.String())
}

// downloadText says what a download saved: where, how much, what type and
// the name the server gave it, when it gave one.
func downloadText(path string, bytes int64, contentType, name string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Saved %s: %d bytes", path, bytes)
	if contentType != "" {
		fmt.Fprintf(&b, " of %s", contentType)
	}
	if name != "" {
		fmt.Fprintf(&b, " (the server named it %s)", name)
	}
	return b.String()
}
