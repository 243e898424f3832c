package cli

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/airlockhq/airlock/internal/store"
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

// TestFetchBinaryAuditDurableAtExit runs the real binary: each `airlock
// fetch` process has its call's audit record in the data directory's
// store when it exits (the store no longer checkpoints on close, so the
// record is in the WAL the next process reads), and `airlock version`
// creates nothing there.
func TestFetchBinaryAuditDurableAtExit(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the airlock binary")
	}
	t.Parallel()
	bin := buildAirlock(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		io.WriteString(w, "<!doctype html><title>T</title><article><h1>T</h1><p>"+strings.Repeat("Durable words here. ", 40)+"</p></article>")
	}))
	defer srv.Close()
	dir := t.TempDir()
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Dir = dir
		cmd.Env = []string{"HOME=" + dir, "PATH=" + os.Getenv("PATH")}
		out, err := cmd.Output()
		if err != nil {
			var stderr []byte
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = ee.Stderr
			}
			t.Fatalf("airlock %s: %v\n%s", strings.Join(args, " "), err, stderr)
		}
		return string(out)
	}
	run("version")
	if _, err := os.Stat(filepath.Join(dir, "airlock-data")); !os.IsNotExist(err) {
		t.Fatalf("airlock version created the data directory (%v)", err)
	}
	const n = 3
	for i := range n {
		if out := run("fetch", "--except", "127.0.0.1", srv.URL+"/"+string(rune('a'+i))); !strings.Contains(out, "Durable words") {
			t.Fatalf("fetch printed %q", out)
		}
	}
	recs := fetchRecords(t, dir)
	seen := map[string]bool{}
	for _, r := range recs {
		if r.Outcome == "allow" {
			seen[r.Target] = true
		}
	}
	for i := range n {
		if u := srv.URL + "/" + string(rune('a'+i)); !seen[u] {
			t.Errorf("no allowed fetch of %s in the audit log after its process exited; have %v", u, seen)
		}
	}
}

// TestFetchBinaryInterrupted: SIGINT during a fetch cancels the call
// (signal handling is installed once the command waits on its context),
// the process exits on its own with the call's error rather than being
// killed by the signal, and the call's audit record is on disk.
func TestFetchBinaryInterrupted(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the airlock binary")
	}
	t.Parallel()
	bin := buildAirlock(t)
	arrived := make(chan struct{}, 1)
	release := make(chan struct{})
	defer close(release)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case arrived <- struct{}{}:
		default:
		}
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	dir := t.TempDir()
	cmd := exec.Command(bin, "fetch", "--except", "127.0.0.1", srv.URL+"/slow")
	cmd.Dir = dir
	cmd.Env = []string{"HOME=" + dir, "PATH=" + os.Getenv("PATH")}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	select {
	case <-arrived:
	case <-time.After(time.Minute): // hang guard
		t.Fatal("the fetch never reached the server")
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case <-exited:
	case <-time.After(time.Minute): // hang guard
		t.Fatal("airlock fetch did not exit after SIGINT")
	}
	ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		t.Fatalf("airlock fetch was killed by %v: the signal was not handled (stderr %q)", ws.Signal(), stderr.String())
	}
	if ws.ExitStatus() == 0 {
		t.Fatalf("airlock fetch exited 0 after SIGINT mid-call (stderr %q)", stderr.String())
	}
	recs := fetchRecords(t, dir)
	if len(recs) != 1 || recs[0].Target != srv.URL+"/slow" || recs[0].Outcome == "allow" {
		t.Fatalf("audit after the interrupted fetch = %+v, want its one record, not allowed", recs)
	}
	t.Logf("exit %d, audit %s/%s/%s, stderr %q", ws.ExitStatus(), recs[0].Outcome, recs[0].Code, recs[0].Reason, stderr.String())
}

// fetchRecords reads the fetch records of the audit log the binary keeps
// under dir, as the next process would find them.
func fetchRecords(t *testing.T, dir string) []store.AuditRecord {
	t.Helper()
	st, err := store.Open(filepath.Join(dir, "airlock-data", "airlock.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	recs, err := st.QueryAudit(t.Context(), store.AuditQuery{Broker: "fetch"})
	if err != nil {
		t.Fatal(err)
	}
	return recs
}
