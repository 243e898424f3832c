package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/airlockhq/airlock"
)

type result struct {
	code           int
	stdout, stderr string
}

// invoke runs the command line with the registered subcommands plus extra.
func invoke(t *testing.T, ctx context.Context, stdin string, args []string, extra ...func(*env) *cobra.Command) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	e := &env{stdin: strings.NewReader(stdin), stdout: &stdout, stderr: &stderr, tty: noTerminal}
	subs := append(append([]func(*env) *cobra.Command(nil), commands...), extra...)
	code := run(ctx, e, args, subs)
	return result{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

// invokeEnv is invoke with the secrets, credentials and provider keys
// the engine reads (from vars instead of the process environment).
func invokeEnv(t *testing.T, ctx context.Context, vars map[string]string, args []string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	e := &env{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr, getenv: func(k string) string { return vars[k] }}
	code := run(ctx, e, args, commands)
	return result{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

// failWith returns a subcommand "fail" whose RunE returns err.
func failWith(err error) func(*env) *cobra.Command {
	return func(*env) *cobra.Command {
		return &cobra.Command{
			Use:  "fail",
			Args: cobra.NoArgs,
			RunE: func(*cobra.Command, []string) error { return err },
		}
	}
}

type foreignError struct{ code, reason string }

func (e *foreignError) Error() string {
	return "egress: check \"http://127.0.0.1/\" " + e.code + " (" + e.reason + ")"
}
func (e *foreignError) ErrorCode() string   { return e.code }
func (e *foreignError) ErrorReason() string { return e.reason }

func TestMainExitCodes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		args       []string
		extra      []func(*env) *cobra.Command
		wantCode   int
		wantStdout string // substring; "" means stdout must be empty
		wantStderr string // exact
	}{
		{name: "version", args: []string{"version"}, wantCode: 0, wantStdout: "airlock dev " + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH + "\n"},
		{name: "help flag", args: []string{"--help"}, wantCode: 0, wantStdout: "Usage:"},
		{name: "short help flag", args: []string{"-h"}, wantCode: 0, wantStdout: "Available Commands:"},
		{name: "help command", args: []string{"help", "version"}, wantCode: 0, wantStdout: "Print the version"},
		{name: "subcommand help", args: []string{"version", "--help"}, wantCode: 0, wantStdout: "airlock version [flags]"},
		{name: "no command", args: []string{}, wantCode: 2, wantStderr: "airlock: missing command; see 'airlock --help'\n"},
		{name: "nil args", args: nil, wantCode: 2, wantStderr: "airlock: missing command; see 'airlock --help'\n"},
		{name: "unknown command", args: []string{"frobnicate"}, wantCode: 2, wantStderr: "airlock: unknown command \"frobnicate\" for \"airlock\"; see 'airlock --help'\n"},
		{name: "unknown flag", args: []string{"version", "--nope"}, wantCode: 2, wantStderr: "airlock: unknown flag: --nope; see 'airlock --help'\n"},
		{name: "extra argument", args: []string{"version", "extra"}, wantCode: 2, wantStderr: "airlock: unknown command \"extra\" for \"airlock version\"; see 'airlock --help'\n"},
		{name: "bad format", args: []string{"--format", "xml", "version"}, wantCode: 2, wantStderr: "airlock: invalid argument \"xml\" for \"--format\" flag: must be text, json, jsonl, md, markdown or org; see 'airlock --help'\n"},
		{
			name: "usage error from RunE", args: []string{"fail"},
			extra:    []func(*env) *cobra.Command{failWith(usageErrorf("--resolve %q: want host=ip", "x"))},
			wantCode: 2, wantStderr: "airlock: --resolve \"x\": want host=ip; see 'airlock --help'\n",
		},
		{
			name: "unclassified error from RunE is internal", args: []string{"fail"},
			extra:    []func(*env) *cobra.Command{failWith(errors.New("open state.db: permission denied"))},
			wantCode: 1, wantStderr: "airlock: open state.db: permission denied\n",
		},
		{
			name: "denied", args: []string{"fail"},
			extra:    []func(*env) *cobra.Command{failWith(fmt.Errorf("exchange: %w", &foreignError{"denied", "loopback"}))},
			wantCode: 3, wantStderr: "airlock: exchange: egress: check \"http://127.0.0.1/\" denied (loopback)\n  hint: " + airlock.ReasonLoopback.Hint() + "\n",
		},
		{
			name: "rate limited", args: []string{"fail"},
			extra:    []func(*env) *cobra.Command{failWith(&airlock.Error{Code: airlock.CodeRateLimited, Message: "slow down"})},
			wantCode: 3, wantStderr: "airlock: slow down\n",
		},
		{
			name: "too large", args: []string{"fail"},
			extra:    []func(*env) *cobra.Command{failWith(&foreignError{"too_large", "body_too_large"})},
			wantCode: 4, wantStderr: "airlock: egress: check \"http://127.0.0.1/\" too_large (body_too_large)\n",
		},
		{
			name: "multi-line message is one line", args: []string{"fail"},
			extra:    []func(*env) *cobra.Command{failWith(&airlock.Error{Code: airlock.CodeUpstream, Message: "bad\ngateway\n"})},
			wantCode: 4, wantStderr: "airlock: bad gateway\n",
		},
		{
			name: "panic", args: []string{"fail"},
			extra: []func(*env) *cobra.Command{func(*env) *cobra.Command {
				return &cobra.Command{Use: "fail", Run: func(*cobra.Command, []string) { panic("boom") }}
			}},
			wantCode: 1, wantStderr: "airlock: internal error: panic: boom\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := invoke(t, context.Background(), "", tt.args, tt.extra...)
			if got.code != tt.wantCode {
				t.Errorf("exit code = %d, want %d (stderr %q)", got.code, tt.wantCode, got.stderr)
			}
			switch {
			case tt.wantStdout == "" && got.stdout != "":
				t.Errorf("stdout = %q, want empty", got.stdout)
			case !strings.Contains(got.stdout, tt.wantStdout):
				t.Errorf("stdout = %q, want it to contain %q", got.stdout, tt.wantStdout)
			}
			if tt.name == "panic" {
				// The stack follows the first line.
				got.stderr, _, _ = strings.Cut(got.stderr, "\n")
				got.stderr += "\n"
			}
			if got.stderr != tt.wantStderr {
				t.Errorf("stderr = %q, want %q", got.stderr, tt.wantStderr)
			}
		})
	}
}

func TestMainJSONErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		args     []string
		err      error
		wantCode int
		want     airlock.Error
	}{
		{
			name: "unknown command, flag before", args: []string{"--format", "json", "frobnicate"}, wantCode: 2,
			want: airlock.Error{Code: airlock.CodeInvalid, Reason: "usage", Message: `unknown command "frobnicate" for "airlock"`},
		},
		{
			name: "unknown command, = form", args: []string{"--format=json", "frobnicate"}, wantCode: 2,
			want: airlock.Error{Code: airlock.CodeInvalid, Reason: "usage", Message: `unknown command "frobnicate" for "airlock"`},
		},
		{
			name: "unknown flag, format after", args: []string{"version", "--nope", "--format", "json"}, wantCode: 2,
			want: airlock.Error{Code: airlock.CodeInvalid, Reason: "usage", Message: "unknown flag: --nope"},
		},
		{
			name: "denied with decision", args: []string{"fail", "--format", "json"}, wantCode: 3,
			err:  &airlock.Error{Code: airlock.CodeDenied, Reason: "metadata", Message: "no", DecisionID: "01J0"},
			want: airlock.Error{Code: airlock.CodeDenied, Reason: "metadata", Message: "no", DecisionID: "01J0"},
		},
		{
			name: "foreign error", args: []string{"--format", "json", "fail"}, wantCode: 4,
			err:  &foreignError{"timeout", "dns_timeout"},
			want: airlock.Error{Code: airlock.CodeTimeout, Reason: "dns_timeout", Message: `egress: check "http://127.0.0.1/" timeout (dns_timeout)`},
		},
		{
			name: "internal keeps detail on the CLI", args: []string{"--format", "json", "fail"}, wantCode: 1,
			err:  errors.New("open state.db: permission denied"),
			want: airlock.Error{Code: airlock.CodeInternal, Message: "open state.db: permission denied"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := invoke(t, context.Background(), "", tt.args, failWith(tt.err))
			if got.code != tt.wantCode {
				t.Errorf("exit code = %d, want %d", got.code, tt.wantCode)
			}
			if strings.Count(got.stderr, "\n") != 1 {
				t.Errorf("stderr = %q, want exactly one line", got.stderr)
			}
			var body airlock.ErrorBody
			if err := json.Unmarshal([]byte(got.stderr), &body); err != nil {
				t.Fatalf("stderr %q is not an error body: %v", got.stderr, err)
			}
			if body.Error != tt.want {
				t.Errorf("error body = %+v, want %+v", body.Error, tt.want)
			}
			if got.stdout != "" {
				t.Errorf("stdout = %q, want empty", got.stdout)
			}
		})
	}
}

func TestVersionJSON(t *testing.T) {
	t.Parallel()
	got := invoke(t, context.Background(), "", []string{"version", "--format", "json"})
	if got.code != 0 {
		t.Fatalf("exit code = %d, want 0 (stderr %q)", got.code, got.stderr)
	}
	var v map[string]string
	if err := json.Unmarshal([]byte(got.stdout), &v); err != nil {
		t.Fatalf("stdout %q: %v", got.stdout, err)
	}
	want := map[string]string{"version": "dev", "go": runtime.Version(), "platform": runtime.GOOS + "/" + runtime.GOARCH}
	for k, w := range want {
		if v[k] != w {
			t.Errorf("%s = %q, want %q", k, v[k], w)
		}
	}
}

func TestVersionLdflags(t *testing.T) {
	// Not parallel: it changes the package variable -ldflags -X would set.
	old := version
	version = "v9.8.7"
	t.Cleanup(func() { version = old })
	got := invoke(t, context.Background(), "", []string{"version"})
	if want := "airlock v9.8.7 " + runtime.Version(); !strings.HasPrefix(got.stdout, want) {
		t.Errorf("stdout = %q, want prefix %q", got.stdout, want)
	}
}

type ctxKey struct{}

// TestEnv checks what a registered subcommand receives: stdin, stdout, the
// caller's context and the parsed --format.
func TestEnv(t *testing.T) {
	t.Parallel()
	echo := func(e *env) *cobra.Command {
		return &cobra.Command{
			Use:  "echo",
			Args: cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				in, err := io.ReadAll(e.stdin)
				if err != nil {
					return err
				}
				_, err = fmt.Fprintf(e.stdout, "%s|%v|%s", in, cmd.Context().Value(ctxKey{}), e.format)
				return err
			},
		}
	}
	ctx := context.WithValue(context.Background(), ctxKey{}, "from-main")
	got := invoke(t, ctx, "request bytes", []string{"echo", "--format", "json"}, echo)
	if got.code != 0 {
		t.Fatalf("exit code = %d, want 0 (stderr %q)", got.code, got.stderr)
	}
	if want := "request bytes|from-main|json"; got.stdout != want {
		t.Errorf("stdout = %q, want %q", got.stdout, want)
	}
}

func TestCanceledContext(t *testing.T) {
	t.Parallel()
	wait := func(*env) *cobra.Command {
		return &cobra.Command{
			Use: "wait",
			RunE: func(cmd *cobra.Command, _ []string) error {
				<-cmd.Context().Done()
				return fmt.Errorf("wait: %w", cmd.Context().Err())
			},
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	got := invoke(t, ctx, "", []string{"wait"}, wait)
	if got.code != 4 {
		t.Errorf("exit code = %d, want 4", got.code)
	}
	if want := "airlock: wait: context canceled\n"; got.stderr != want {
		t.Errorf("stderr = %q, want %q", got.stderr, want)
	}
}

// TestMainUsesRegisteredCommands runs the exported entry point itself.
func TestMainUsesRegisteredCommands(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	if code := Main(context.Background(), []string{"version"}, &stdout, &stderr); code != 0 {
		t.Fatalf("Main(version) = %d, want 0 (stderr %q)", code, stderr.String())
	}
	if !strings.HasPrefix(stdout.String(), "airlock ") {
		t.Errorf("stdout = %q, want the version line", stdout.String())
	}
}

func TestHintsSayWhatToDoNext(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := invoke(t, ctx, "", []string{"fetch", "--data-dir", t.TempDir(), "http://127.0.0.1:9/"})
	if r.code != 3 || !strings.Contains(r.stderr, "hint: ") || !strings.Contains(r.stderr, "--except 127.0.0.1 ") {
		t.Errorf("loopback fetch: %d %q, want a hint naming --except 127.0.0.1", r.code, r.stderr)
	}
	r = invoke(t, ctx, "", []string{"fetch", "--data-dir", t.TempDir(), "--format", "json", "http://127.0.0.1:9/"})
	if strings.Contains(r.stderr, "hint") {
		t.Errorf("JSON errors carry no hint: %q", r.stderr)
	}
	r = invoke(t, ctx, "", []string{"fetch", "--data-dir", t.TempDir(), "http://169.254.169.254/"})
	if !strings.Contains(r.stderr, "never reachable") {
		t.Errorf("metadata: %q", r.stderr)
	}
}
