package cli

import (
	"io"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/spf13/cobra"
)

// TestRegisteredCommandNames: the name each constructor is registered
// under is the name of the command it builds, so that selectCommands
// builds the right one.
func TestRegisteredCommandNames(t *testing.T) {
	if len(commands) != len(commandNames) {
		t.Fatalf("%d constructors, %d names: register each once with registerCommand", len(commands), len(commandNames))
	}
	for _, f := range commands {
		want := commandNames[reflect.ValueOf(f).Pointer()]
		if got := f(&env{stdout: io.Discard, stderr: io.Discard}).Name(); got != want {
			t.Errorf("constructor registered as %q builds %q", want, got)
		}
	}
}

// TestSelectCommands: a command line that names a registered command
// builds that command alone (issue #20: `airlock version` built every
// subcommand's flags); anything else builds the whole tree.
func TestSelectCommands(t *testing.T) {
	extra := func(*env) *cobra.Command { return &cobra.Command{Use: "fail"} }
	subs := append(append([]func(*env) *cobra.Command(nil), commands...), extra)
	for _, tc := range []struct {
		args []string
		want string // "" for the whole tree
	}{
		{[]string{"version"}, "version"},
		{[]string{"fetch", "--except", "127.0.0.1", "http://127.0.0.1/"}, "fetch"},
		{[]string{"--format", "json", "version"}, "version"},
		{[]string{"--format=json", "--data-dir", "d", "--config", "c.yaml", "audit", "query"}, "audit"},
		{[]string{"serve-guest", "x.wasm"}, "serve-guest"},
		{[]string{"__pdftext"}, "__pdftext"},
		{nil, ""},
		{[]string{}, ""},
		{[]string{"--help"}, ""},
		{[]string{"help", "fetch"}, ""},
		{[]string{"fetc"}, ""},
		{[]string{"fail"}, ""},
		{[]string{"--except", "127.0.0.1", "fetch"}, ""},
		{[]string{"--format"}, ""},
		{[]string{"__complete", "fe"}, ""},
	} {
		got := selectCommands(tc.args, subs)
		if tc.want == "" {
			if len(got) != len(subs) {
				t.Errorf("selectCommands(%q) built %d of %d commands, want all", tc.args, len(got), len(subs))
			}
			continue
		}
		if len(got) != 1 || commandNames[reflect.ValueOf(got[0]).Pointer()] != tc.want {
			t.Errorf("selectCommands(%q) = %d constructors, want only %q", tc.args, len(got), tc.want)
		}
	}
}

// TestVersionOpensNothing: `airlock version` reads no configuration and
// opens no store: it creates nothing in the data directory.
func TestVersionOpensNothing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	r := invoke(t, t.Context(), "", []string{"--data-dir", dir, "--config", filepath.Join(t.TempDir(), "missing.yaml"), "version"})
	if r.code != 0 {
		t.Fatalf("version: exit %d, stderr %q", r.code, r.stderr)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("version touched the data directory: %v", err)
	}
}
