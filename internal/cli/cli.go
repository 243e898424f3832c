// Package cli is the composition root of the airlock command: it turns
// flags (and, later, the config file and environment) into calls on the
// engine and egress, and renders results and errors. cmd/airlock only calls
// Main.
//
// # Adding a subcommand
//
// Each subcommand lives in its own file and registers its name and
// constructor from init, without editing this file:
//
//	func init() { registerCommand("policy", newPolicyCmd) }
//
//	func newPolicyCmd(e *env) *cobra.Command {
//		return &cobra.Command{
//			Use:  "policy",
//			Args: cobra.NoArgs,
//			RunE: func(cmd *cobra.Command, args []string) error {
//				ctx := cmd.Context() // the context given to Main
//				_, err := fmt.Fprintln(e.stdout, "...")
//				return err
//			},
//		}
//	}
//
// Main builds a fresh command tree on every call (no package state besides
// the constructor list), so tests run it in parallel with their own
// streams. The context is not in env: RunE takes it from cmd.Context().
// When the command line names a registered command, only that command is
// built (every process pays for the tree it builds: flag sets, defaults);
// help, completion and unknown names get the whole tree.
//
// A RunE returns errors; Main prints them and picks the exit code, so a
// subcommand never writes an error or calls os.Exit itself:
//   - text (default): one line "airlock: <message>" on stderr;
//   - --format json: {"error":{"code","reason","message","decision_id"}}
//     on stderr, built with airlock.Public (the CLI runs for its operator,
//     so internal errors keep their detail here).
//
// The exit code is airlock.ExitCode(err). An error that cobra returns
// before any RunE started (unknown command or flag, wrong number of
// arguments) is a usage error: exit 2. Inside RunE, return usageErrorf(...)
// for a bad flag value, and errors classified by their own package (egress
// errors are) for everything else.
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/egress"
)

// commands holds the constructors of the subcommands, registered from init
// in the files that define them.
var commands []func(*env) *cobra.Command

// commandNames maps each constructor in commands (by its code pointer) to
// the name of the command it builds.
var commandNames = map[uintptr]string{}

// registerCommand adds the constructor of the subcommand name.
func registerCommand(name string, f func(*env) *cobra.Command) {
	commands = append(commands, f)
	commandNames[reflect.ValueOf(f).Pointer()] = name
}

// rootValueFlags are the root's persistent flags that take a value, which
// may come before the command's name.
var rootValueFlags = []string{"--format", "--config", "--data-dir"}

// selectCommands returns the constructors run needs for args: only the
// registered one whose command args name, when args name one after
// nothing but the root's own flags; otherwise all of them (help,
// completion, an unknown command and its suggestions need the tree).
func selectCommands(args []string, subcommands []func(*env) *cobra.Command) []func(*env) *cobra.Command {
	name := ""
	for i := 0; i < len(args) && name == ""; i++ {
		a := args[i]
		switch {
		case !strings.HasPrefix(a, "-"):
			name = a
		case slices.Contains(rootValueFlags, a):
			i++ // its value
		case slices.ContainsFunc(rootValueFlags, func(f string) bool { return strings.HasPrefix(a, f+"=") }):
		default: // --help, --, a flag of some command: cobra decides
			return subcommands
		}
	}
	if name == "" {
		return subcommands
	}
	var found []func(*env) *cobra.Command
	for _, f := range subcommands {
		if commandNames[reflect.ValueOf(f).Pointer()] == name {
			found = append(found, f)
		}
	}
	if len(found) != 1 {
		return subcommands
	}
	return found
}

// env is what one invocation of Main gives its subcommands.
type env struct {
	stdin  io.Reader // request bytes (airlock exchange); os.Stdin from Main
	stdout io.Writer // results
	stderr io.Writer // errors and diagnostics
	format string    // "text" or "json" after flag parsing; "" when not given

	environ []string // the process environment (AIRLOCK_* configuration)
	// getenv reads secrets, route credentials and provider keys; nil is
	// os.Getenv.
	getenv     func(string) string
	configPath string // --config
	dataDir    string // --data-dir

	tty func() (terminal, error) // the approval prompt's terminal; nil: /dev/tty
}

// Output formats accepted by --format.
const (
	formatText = "text"
	formatJSON = "json"
)

// Main runs the airlock command line with args (without the program name)
// and returns the process exit code: 0 ok, 1 internal, 2 usage or
// configuration, 3 denied/revoked/rate-limited, 4 upstream, timeout, too
// large, not found or unavailable. It never calls os.Exit.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return run(ctx, &env{stdin: os.Stdin, stdout: stdout, stderr: stderr, environ: os.Environ()}, args, commands)
}

// run is Main with the streams and the subcommand constructors given.
func run(ctx context.Context, e *env, args []string, subcommands []func(*env) *cobra.Command) (code int) {
	if ctx == nil {
		ctx = context.Background()
	}
	if args == nil {
		args = []string{} // cobra reads os.Args when given nil
	}
	defer func() {
		if v := recover(); v != nil {
			// A panic would exit 2, which means "usage" here.
			fmt.Fprintf(e.stderr, "airlock: internal error: panic: %v\n%s", v, debug.Stack())
			code = 1
		}
	}()

	root := newRoot(e)
	for _, newCmd := range selectCommands(args, subcommands) {
		root.AddCommand(newCmd(e))
	}
	var ran bool
	markRun(root, &ran)
	suggestCommands(root)
	root.SetArgs(args)

	_, err := root.ExecuteContextC(ctx)
	if err == nil {
		return 0
	}
	if !ran && airlock.CodeOf(err) == airlock.CodeInternal {
		err = &airlock.Error{Code: airlock.CodeInvalid, Reason: airlock.ReasonUsage, Err: err}
	}
	// A command run by `airlock exec` has said what it had to say on its
	// own stderr.
	var quiet interface{ Quiet() bool }
	if !errors.As(err, &quiet) || !quiet.Quiet() {
		e.reportError(args, err)
	}
	// A guest run by `airlock run` (a command run by `airlock exec`)
	// passes its own exit code on.
	var st interface{ ExitStatus() int }
	if errors.As(err, &st) {
		return st.ExitStatus()
	}
	return airlock.ExitCode(err)
}

func newRoot(e *env) *cobra.Command {
	root := &cobra.Command{
		Use:   "airlock",
		Short: "Airlock gives sandboxed workloads the web without handing them the network",
		Long: `Airlock fetches, crawls, searches, makes HTTP requests and exchanges bytes on
behalf of sandboxed workloads (AI agents, WebAssembly guests, scripts), under one
SSRF-safe policy, audited. Run 'airlock serve' for the HTTP API and MCP server,
'airlock mcp' for MCP over stdio, or a verb (fetch, crawl, search, ...) here.`,
		SilenceErrors: true,
		SilenceUsage:  true,
		Args:          cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return usageErrorf("missing command")
		},
	}
	root.SetHelpFunc(helpWithFormatDefault(root.HelpFunc()))
	root.SetIn(e.stdin)
	root.SetOut(e.stdout)
	root.SetErr(e.stderr)
	root.PersistentFlags().Var((*formatValue)(&e.format), "format", "output format: text or json (errors as JSON on stderr); browse verbs also md, org, jsonl")
	root.PersistentFlags().StringVar(&e.configPath, "config", "", "configuration file (default $AIRLOCK_CONFIG, else ./airlock.yaml if present)")
	root.PersistentFlags().StringVar(&e.dataDir, "data-dir", "", "data directory: audit log, revocations, tokens (default ./airlock-data)")
	return root
}

// suggestCommands makes an unknown subcommand's error say which command
// was probably meant ("did you mean fetch?"), at every level: cobra only
// suggests from its own argument check, which commands with Args or RunE
// replace.
func suggestCommands(c *cobra.Command) {
	if c.HasSubCommands() {
		args := c.Args
		if args == nil {
			args = cobra.ArbitraryArgs
		}
		if c.SuggestionsMinimumDistance <= 0 {
			c.SuggestionsMinimumDistance = 2
		}
		c.Args = func(cmd *cobra.Command, a []string) error {
			err := args(cmd, a)
			if err != nil && len(a) > 0 {
				if s := cmd.SuggestionsFor(a[0]); len(s) > 0 {
					return fmt.Errorf("%w; did you mean %s?", err, strings.Join(s, " or "))
				}
			}
			return err
		}
	}
	for _, sub := range c.Commands() {
		suggestCommands(sub)
	}
}

// formatDefault is the annotation of a command whose --format default is
// not text (fetch: md, crawl: jsonl); its help shows that default.
const formatDefault = "airlock.format_default"

// helpWithFormatDefault shows, in each command's help, the --format
// default that command really uses.
func helpWithFormatDefault(help func(*cobra.Command, []string)) func(*cobra.Command, []string) {
	return func(c *cobra.Command, args []string) {
		if f := c.Flag("format"); f != nil {
			def := c.Annotations[formatDefault]
			if def == "" {
				def = formatText
			}
			old := f.DefValue
			f.DefValue = def
			defer func() { f.DefValue = old }()
		}
		help(c, args)
	}
}

// markRun wraps every command's Run/RunE so that run can tell errors of a
// command that ran from cobra's own usage errors.
func markRun(c *cobra.Command, ran *bool) {
	if f := c.RunE; f != nil {
		c.RunE = func(cmd *cobra.Command, args []string) error {
			*ran = true
			return f(cmd, args)
		}
	} else if f := c.Run; f != nil {
		c.Run = func(cmd *cobra.Command, args []string) {
			*ran = true
			f(cmd, args)
		}
	}
	for _, sub := range c.Commands() {
		markRun(sub, ran)
	}
}

// usageErrorf returns an error that exits 2: a malformed command line.
func usageErrorf(format string, args ...any) error {
	return airlock.Errorf(airlock.CodeInvalid, airlock.ReasonUsage, format, args...)
}

// reportError prints err on stderr in the chosen format.
func (e *env) reportError(args []string, err error) {
	msg := oneLine(err.Error())
	if f := e.outputFormat(args); f == formatJSON || f == "jsonl" {
		pub := airlock.Public(err, "")
		pub.Message = msg
		if writeJSON(e.stderr, airlock.ErrorBody{Error: pub}) == nil {
			return
		}
	}
	if airlock.ReasonOf(err) == airlock.ReasonUsage {
		msg += "; see 'airlock --help'"
	}
	fmt.Fprintf(e.stderr, "airlock: %s\n", msg)
	if h := hintFor(err); h != "" {
		fmt.Fprintf(e.stderr, "  hint: %s\n", h)
	}
}

// hintFor is airlock.HintOf (the error's own hint, else its reason's in
// the catalogue) for the person at the terminal, who is the operator: the
// hint of a refused resolved address may name its class and the address,
// which a workload is never told.
func hintFor(err error) string {
	h := airlock.HintOf(err)
	var ee *egress.Error
	if airlock.ReasonOf(err) == airlock.ReasonInternalAddress && errors.As(err, &ee) && ee.Class != "" {
		if ch := airlock.Reason(ee.Class).Hint(); ch != "" {
			h = ch
		}
	}
	if strings.Contains(h, "--except ADDR") && errors.As(err, &ee) && ee.Addr.IsValid() {
		h = strings.Replace(h, "--except ADDR", "--except "+ee.Addr.Addr().String(), 1)
	}
	return h
}

// outputFormat is the --format value, read from args when cobra failed
// before parsing flags (an unknown command, for instance).
func (e *env) outputFormat(args []string) string {
	if e.format != "" {
		return e.format
	}
	for i, a := range args {
		switch {
		case a == "--":
			return formatText
		case a == "--format=json" || a == "--format=jsonl":
			return formatJSON
		case a == "--format" && i+1 < len(args) && (args[i+1] == formatJSON || args[i+1] == "jsonl"):
			return formatJSON
		}
	}
	return formatText
}

// writeJSON writes v as one line of JSON, without HTML escaping.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// formatValue is the --format flag: it refuses anything but text and json
// while flags are parsed, so a bad value is a usage error.
type formatValue string

func (f *formatValue) String() string {
	if *f == "" {
		return formatText
	}
	return string(*f)
}

func (f *formatValue) Set(s string) error {
	switch s {
	case formatText, formatJSON, "jsonl", "md", "markdown", "org":
	default:
		return fmt.Errorf("must be text, json, jsonl, md, markdown or org")
	}
	*f = formatValue(s)
	return nil
}

func (f *formatValue) Type() string { return "format" }

// writeJSONIndent writes v as indented JSON for people.
func writeJSONIndent(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
