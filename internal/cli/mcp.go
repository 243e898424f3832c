package cli

import (
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/airlockhq/airlock/internal/mcp"
)

func init() { registerCommand("mcp", newMCPCmd) }

// envToken is the environment variable holding the API token `airlock mcp`
// authenticates with: its tenant becomes the principal of the tools.
const envToken = "AIRLOCK_TOKEN"

func newMCPCmd(e *env) *cobra.Command {
	pf := policyFlags{browser: &browserFlags{}}
	var noTTY bool
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Serve the web tools (web_fetch, web_search, web_crawl, browser_*) to an agent over MCP on stdin/stdout",
		Long: `Serve the Model Context Protocol on stdin/stdout for one agent client, which starts
this command itself. The tools: web_fetch (one page, long pages in parts of 5,000
characters by default), web_search and web_crawl, each under the egress policy, each
call audited. Refusals come back to the agent as tool errors with a code and a reason.

When the tenant's profile grants the browser (posix, the default at your own terminal),
the browser_* tools drive a real headless Chromium: browser_navigate opens a page,
browser_snapshot lists its elements with refs (@e3), and browser_click, browser_fill,
browser_press, browser_hover, browser_dblclick, browser_check and the others act on those
refs. The browser loads only the origins its
policy allows: none by default. --allow-origin http://127.0.0.1:8080 (repeatable) lets
it load one, --browser-default allow lets it load any origin the egress policy allows,
and browser.policy in the configuration does the same for good. Tools the profile does
not grant are not listed. Under --browser-default ask a person answers each new origin:
on this command's terminal (a [y/N] prompt on /dev/tty, never on stdin/stdout) when it
has one, or in the MCP client when it supports elicitation
(browser.approve_via_elicitation); with neither, ask is refused at once. --no-tty keeps
the prompt off a terminal that the client draws its own screen on.

The tools run as the tenant of $AIRLOCK_TOKEN when it is set, else as the default
tenant of the configuration ("local", profile posix, with no configuration). The policy
flags apply to the default tenant, so a local page can be offered without a config
file. Logs go to stderr; stdout carries the protocol only. The command ends when the
client closes stdin, or on SIGINT/SIGTERM, after flushing the audit log.`,
		Example: `  airlock mcp
  airlock mcp --except 127.0.0.1 --data-dir ~/.local/share/airlock
  airlock mcp --except 127.0.0.1:8080 --allow-origin http://127.0.0.1:8080

  # an agent client's configuration (Claude Desktop, Cursor, ...):
  {"mcpServers": {"airlock": {"command": "airlock", "args": ["mcp"]}}}`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			en, err := e.openEngine(&pf)
			if err != nil {
				return err
			}
			p := en.Principal()
			if token := lookupEnv(e.environ, envToken); token != "" {
				if p, err = en.Authenticate(ctx, token); err != nil {
					closeEngine(en)
					return err
				}
			}
			detach := e.attachTerminalApprover(en, noTTY)
			logger := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
			serr := mcp.ServeStdio(ctx, en, p, e.stdin, e.stdout, mcp.Options{Version: releaseVersion(), Logger: logger})
			detach()
			cerr := closeEngine(en)
			if serr != nil {
				return serr
			}
			return cerr
		},
	}
	pf.register(cmd)
	pf.browser.register(cmd)
	cmd.Flags().BoolVar(&noTTY, "no-tty", false, noTTYUsage)
	return cmd
}
