package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"

	"github.com/spf13/cobra"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/engine"
	"github.com/airlockhq/airlock/internal/browser"
)

func init() { registerCommand("browser", newBrowserCmd) }

func newBrowserCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "browser",
		Short: "Drive a headless Chromium through the locked op set, under the policy",
	}
	cmd.AddCommand(newBrowserRunCmd(e))
	return cmd
}

// browserScript is the file `airlock browser run` runs: an interact
// sequence ("actions", tagged by "action") or a list of ops (tagged by
// "kind"), with the session's browser policy.
type browserScript struct {
	Session        string            `json:"session,omitempty"`
	Profile        string            `json:"profile,omitempty"`
	AllowedOrigins []string          `json:"allowed_origins,omitempty"`
	DeniedOrigins  []string          `json:"denied_origins,omitempty"`
	DefaultAction  string            `json:"default_action,omitempty"`
	StopOnError    bool              `json:"stop_on_error,omitempty"`
	Actions        []json.RawMessage `json:"actions,omitempty"`
	Ops            []json.RawMessage `json:"ops,omitempty"`
}

// browserRunOutput is what `airlock browser run` prints.
type browserRunOutput struct {
	Session     string                `json:"session"`
	Profile     string                `json:"profile,omitempty"`
	FilesDir    string                `json:"files_dir,omitempty"`
	Results     any                   `json:"results"` // []browserStepResult (ops) or []browser.ActionResult (actions)
	Aborted     bool                  `json:"aborted,omitempty"`
	AbortReason string                `json:"abort_reason,omitempty"`
	FinalURL    string                `json:"final_url"`
	Title       string                `json:"title"`
	Denied      []engine.BrowserEvent `json:"denied,omitempty"`
}

// browserStepResult is one op's outcome (ops scripts).
type browserStepResult struct {
	Index  int                   `json:"index"`
	Kind   string                `json:"kind"`
	OK     bool                  `json:"ok"`
	Error  *airlock.Error        `json:"error,omitempty"`
	Result *engine.BrowserResult `json:"result,omitempty"`
	File   string                `json:"file,omitempty"` // a screenshot written under --out-dir
}

var sessionNameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_-][A-Za-z0-9._-]{0,63}$`) })

func parseBrowserScript(data []byte) (browserScript, error) {
	var sc browserScript
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&sc); err != nil {
		return sc, usageErrorf("script: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return sc, usageErrorf("script: trailing data after the script object")
	}
	switch {
	case len(sc.Actions) > 0 && len(sc.Ops) > 0:
		return sc, usageErrorf(`script: give "actions" (interact sub-actions) or "ops", not both`)
	case len(sc.Actions) == 0 && len(sc.Ops) == 0:
		return sc, usageErrorf(`script: no "actions" and no "ops"`)
	}
	if sc.Session != "" && !sessionNameRE().MatchString(sc.Session) {
		return sc, usageErrorf("script: session name %q: want 1 to 64 of A-Z a-z 0-9 . _ -", sc.Session)
	}
	return sc, nil
}

func newBrowserRunCmd(e *env) *cobra.Command {
	var pf policyFlags
	var allowOrigins, denyOrigins []string
	var noTTY bool
	var defaultAction, outDir string
	cmd := &cobra.Command{
		Use:   "run [flags] SCRIPT.json",
		Short: "Run a browser script (interact actions or ops) and print the results as JSON",
		Long: `Run a script in a headless Chromium whose every request goes through the engine: layer 1
decides each request inside the browser (schemes, origin lists, the egress policy), layer 2
is the egress proxy (the floor, pinned DNS). The script is a JSON object:

  {"session"?, "profile"?, "allowed_origins"?, "denied_origins"?, "default_action"?,
   "stop_on_error"?, "actions": [interact sub-actions]}    or the same with "ops": [ops]

Sub-actions are tagged by "action" (goto, click, dblclick, fill, press, select,
extract_text, wait_for_selector, screenshot, sleep); ops by "kind" (the 22 ops). Without
"session" or "profile" the script runs in an ephemeral session. "profile" keeps cookies and
localStorage across runs; "session" names a CLI session: its profile (the same name unless
"profile" is given) and the page it ended on, where the next run with it starts.
default_action is deny unless the script or --default-action says otherwise, so list the
origins the script needs in allowed_origins (or --allow-origin). Screenshots are written
under --out-dir (default: the current directory; an interact out_path is relative to
it and may not leave it). Exit status: 0 when every step succeeded, otherwise
the status of the first failure (the JSON results are printed either way).`,
		Example: `  airlock browser run --except 127.0.0.1:8080 --allow-origin http://127.0.0.1:8080 todo.json
  echo '{"ops":[{"kind":"navigate","url":"http://127.0.0.1:8080/"},{"kind":"snapshot"}]}' |
    airlock browser run --except 127.0.0.1:8080 --browser-default allow -`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var data []byte
			var err error
			if args[0] == "-" {
				data, err = io.ReadAll(io.LimitReader(e.stdin, 16<<20))
			} else {
				data, err = os.ReadFile(args[0])
			}
			if err != nil {
				return usageErrorf("read the script: %v", err)
			}
			sc, err := parseBrowserScript(data)
			if err != nil {
				return err
			}
			sc.AllowedOrigins = append(sc.AllowedOrigins, allowOrigins...)
			sc.DeniedOrigins = append(sc.DeniedOrigins, denyOrigins...)
			if defaultAction != "" {
				sc.DefaultAction = defaultAction
			}
			return e.withEngine(&pf, func(en *engine.Engine, p airlock.Principal) error {
				defer e.attachTerminalApprover(en, noTTY)()
				out, runErr := runBrowserScript(cmd.Context(), en, p, sc, outDir, e.stderr)
				if err := writeIndented(e.stdout, out); err != nil {
					return err
				}
				return runErr
			})
		},
	}
	pf.register(cmd)
	f := cmd.Flags()
	f.StringArrayVar(&allowOrigins, "allow-origin", nil, "add to allowed_origins: scheme://host[:port] or *.suffix (repeatable)")
	f.StringArrayVar(&denyOrigins, "deny-origin", nil, "add to denied_origins (repeatable; deny wins)")
	f.StringVar(&defaultAction, "browser-default", "", "what happens to a request no origin list names: deny (default), allow or ask")
	f.StringVar(&defaultAction, "default-action", "", "the former name of --browser-default")
	_ = f.MarkDeprecated("default-action", "use --browser-default")
	f.StringVar(&outDir, "out-dir", ".", "where screenshots are written (interact out_path is relative to it)")
	f.BoolVar(&noTTY, "no-tty", false, noTTYUsage)
	return cmd
}

// writeIndented writes v as indented JSON, without HTML escaping.
func writeIndented(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// scriptPolicy is the script's origin policy, or nil when it sets none
// (browser.policy of the configuration applies).
func scriptPolicy(sc browserScript) *engine.BrowserPolicy {
	if len(sc.AllowedOrigins) == 0 && len(sc.DeniedOrigins) == 0 && sc.DefaultAction == "" {
		return nil
	}
	return &engine.BrowserPolicy{AllowedOrigins: sc.AllowedOrigins, DeniedOrigins: sc.DeniedOrigins, DefaultAction: sc.DefaultAction}
}

// runBrowserScript opens the session, runs the script and closes the
// session. It returns the output and the first failure.
func runBrowserScript(ctx context.Context, en *engine.Engine, p airlock.Principal, sc browserScript, outDir string, stderr io.Writer) (*browserRunOutput, error) {
	var actions []engine.BrowserAction
	for i, raw := range sc.Actions {
		a, err := browser.ParseAction(raw)
		if err != nil {
			return &browserRunOutput{Results: []browserStepResult{}}, usageErrorf("script: actions[%d]: %v", i, err)
		}
		actions = append(actions, a)
	}
	var ops []engine.BrowserOp
	for i, raw := range sc.Ops {
		op, err := browser.ParseOp(raw)
		if err != nil {
			return &browserRunOutput{Results: []browserStepResult{}}, usageErrorf("script: ops[%d]: %v", i, err)
		}
		ops = append(ops, op)
	}
	profile := sc.Profile
	if profile == "" {
		profile = sc.Session
	}
	info, err := en.BrowserOpen(ctx, p, engine.BrowserOpenRequest{Profile: profile, Policy: scriptPolicy(sc)})
	if err != nil {
		return &browserRunOutput{Results: []browserStepResult{}}, err
	}
	out := &browserRunOutput{Session: info.ID, Profile: info.Profile, FilesDir: info.FilesDir, Results: []browserStepResult{}}
	events, cancelEvents, err := en.BrowserEvents(p, info.ID)
	if err != nil {
		return out, err
	}
	collected := make(chan []engine.BrowserEvent, 1)
	go func() {
		var denied []engine.BrowserEvent
		for ev := range events {
			if ev.Type == browser.EventApprovalRequired {
				// While an ask waits, the CLI says so.
				fmt.Fprintf(stderr, "airlock: %s\n", ev.Message)
			}
			if ev.Type == browser.EventPolicyDenied && len(denied) < 100 {
				denied = append(denied, ev)
			}
		}
		collected <- denied
	}()

	var first error
	note := func(err error) {
		if err != nil && first == nil {
			first = err
		}
	}
	if sc.Session != "" {
		if last, ok := readLastURL(info.FilesDir); ok {
			_, err := en.BrowserDo(ctx, p, info.ID, engine.BrowserOp{Kind: browser.KindNavigate, URL: last})
			note(err)
		}
	}
	if first == nil {
		if len(actions) > 0 {
			note(runActions(ctx, en, p, info, actions, sc.StopOnError, outDir, out))
		} else {
			note(runOps(ctx, en, p, info, ops, sc.StopOnError, outDir, out))
		}
	}
	res, err := en.BrowserDo(ctx, p, info.ID, engine.BrowserOp{Kind: browser.KindGetState})
	if err == nil && res.State != nil {
		out.FinalURL, out.Title = res.State.URL, res.State.Title
		if sc.Session != "" && strings.HasPrefix(out.FinalURL, "http") {
			writeLastURL(info.FilesDir, out.FinalURL)
		}
	}
	cancelEvents()
	out.Denied = <-collected
	closeCtx := context.WithoutCancel(ctx)
	note(en.BrowserClose(closeCtx, p, info.ID, false))
	return out, first
}

// runActions runs an interact sequence and copies its screenshots from the
// session's files directory to outDir.
func runActions(ctx context.Context, en *engine.Engine, p airlock.Principal, info engine.BrowserSessionInfo, actions []engine.BrowserAction, stopOnError bool, outDir string, out *browserRunOutput) error {
	res, err := en.BrowserInteract(ctx, p, info.ID, actions, stopOnError)
	out.Results, out.Aborted, out.AbortReason = res.Results, res.Aborted, res.AbortReason
	if err != nil {
		return err
	}
	for i := range res.Results {
		r := &res.Results[i]
		if r.File == "" {
			continue
		}
		dest := filepath.Join(outDir, r.File)
		if err := copyFile(filepath.Join(info.FilesDir, r.File), dest); err != nil {
			return airlock.Errorf(airlock.CodeInternal, airlock.ReasonScreenshot, "screenshot: %v", err)
		}
		r.File = dest
	}
	return res.FirstError()
}

func copyFile(src, dest string) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
		return err
	}
	return os.WriteFile(dest, data, 0o644)
}

// runOps runs an ops script: every op in order; a failed navigation aborts
// the rest, other failures stop it only with stop_on_error.
func runOps(ctx context.Context, en *engine.Engine, p airlock.Principal, info engine.BrowserSessionInfo, ops []engine.BrowserOp, stopOnError bool, outDir string, out *browserRunOutput) error {
	var first error
	steps := []browserStepResult{}
	defer func() { out.Results = steps }()
	for i, op := range ops {
		step := browserStepResult{Index: i, Kind: op.Kind}
		res, err := en.BrowserDo(ctx, p, info.ID, op)
		if err == nil {
			step.OK = true
			if res.Screenshot != nil {
				step.File, err = saveScreenshot(outDir, i, res.Screenshot)
				if err == nil {
					res.Screenshot.Data = nil
				}
			}
		}
		if err == nil {
			step.Result = &res
		} else {
			body := airlock.Public(err, "")
			step.Error = &body
			if first == nil {
				first = err
			}
		}
		steps = append(steps, step)
		if err != nil && (op.Kind == browser.KindNavigate || stopOnError) {
			out.Aborted = true
			out.AbortReason = fmt.Sprintf("ops[%d] %s failed: %s", i, op.Kind, airlock.ReasonOf(err))
			break
		}
	}
	return first
}

// saveScreenshot writes a screenshot's image under dir and returns its path.
func saveScreenshot(dir string, i int, s *browser.Screenshot) (string, error) {
	data := s.Data
	ext := "png"
	if s.Format == "jpeg" {
		ext = "jpg"
	}
	name := filepath.Join(dir, fmt.Sprintf("screenshot-%d.%s", i, ext))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", airlock.Errorf(airlock.CodeInternal, airlock.ReasonScreenshot, "screenshot: %v", err)
	}
	if err := os.WriteFile(name, data, 0o644); err != nil {
		return "", airlock.Errorf(airlock.CodeInternal, airlock.ReasonScreenshot, "screenshot: %v", err)
	}
	return name, nil
}

const lastURLFile = ".last_url"

func readLastURL(dir string) (string, bool) {
	if dir == "" {
		return "", false
	}
	b, err := os.ReadFile(filepath.Join(dir, lastURLFile))
	if err != nil || len(b) == 0 || len(b) > 8192 {
		return "", false
	}
	return strings.TrimSpace(string(b)), true
}

func writeLastURL(dir, u string) {
	if dir == "" || os.MkdirAll(dir, 0o700) != nil {
		return
	}
	os.WriteFile(filepath.Join(dir, lastURLFile), []byte(u+"\n"), 0o600)
}
