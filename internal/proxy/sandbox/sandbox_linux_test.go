package sandbox

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// probe is what the sandboxed shell reports: its uid, its capability sets,
// no_new_privs, and the answer of the proxy through HTTP_PROXY.
const probe = `id -u; grep -E '^(Cap(Inh|Prm|Eff|Bnd|Amb)|NoNewPrivs):' /proc/self/status; ` +
	`python3 -c "import urllib.request; print(urllib.request.urlopen('http://proxied.test/x', timeout=20).read().decode())"`

// childEnv makes the test binary, run as nobody by TestRunUnprivileged,
// run the probe and print what it saw.
const childEnv = "AIRLOCK_SANDBOX_TEST_CHILD"

// runProbe runs the probe in the sandbox with an Outside that answers
// every request itself.
func runProbe(t *testing.T) (string, error) {
	t.Helper()
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "outside answered "+r.Method+" "+r.RequestURI)
	})}
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	code, err := Run(ctx, Config{Args: []string{"sh", "-c", probe}, Dir: "/", Stdout: &out, Stderr: &errb,
		Outside: OutsideFunc(func(ln net.Listener) error { return srv.Serve(ln) })})
	if err == nil && code != 0 {
		err = errors.New("exit " + strings.TrimSpace(errb.String()))
	}
	return out.String(), err
}

func checkProbe(t *testing.T, out string, wantUID string) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) == 0 || lines[0] != wantUID {
		t.Errorf("uid inside: %q, want %s", lines, wantUID)
	}
	for _, set := range []string{"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"} {
		if !strings.Contains(out, set+":\t0000000000000000") {
			t.Errorf("%s not empty:\n%s", set, out)
		}
	}
	if !strings.Contains(out, "NoNewPrivs:\t1") {
		t.Errorf("no_new_privs not set:\n%s", out)
	}
	if !strings.Contains(out, "outside answered GET http://proxied.test/x") {
		t.Errorf("the proxy was not reached through HTTP_PROXY:\n%s", out)
	}
}

// TestRun runs the probe as this process's user: a root caller's command
// runs as nobody.
func TestRun(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		// The unprivileged child of TestRunUnprivileged.
		out, err := runProbe(t)
		if err != nil {
			t.Fatal(err)
		}
		os.Stdout.WriteString("PROBE\n" + out)
		return
	}
	if _, err := exec.LookPath("python3"); err != nil {
		t.Fatalf("python3 is needed: %v", err)
	}
	out, err := runProbe(t)
	if err != nil {
		t.Fatal(err)
	}
	want := "65534"
	if uid := os.Getuid(); uid != 0 {
		want = strconv.Itoa(uid)
	}
	checkProbe(t, out, want)
}

// TestRunUnprivileged runs the probe from an unprivileged caller (the
// test binary re-run as nobody), which maps its own uid.
func TestRunUnprivileged(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("in the child")
	}
	if os.Getuid() != 0 {
		t.Skip("TestRun covers an unprivileged caller")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Fatalf("setpriv (util-linux) is needed to run as nobody: %v", err)
	}
	// nobody must be able to reach the binary and its working directory.
	dir := t.TempDir()
	for _, d := range []string{dir, filepath.Dir(dir)} {
		os.Chmod(d, 0o755)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "sandbox.test")
	data, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", bin, "-test.run=^TestRun$", "-test.v")
	cmd.Dir = "/"
	cmd.Env = append(os.Environ(), childEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the unprivileged child: %v\n%s", err, out)
	}
	_, probeOut, ok := strings.Cut(string(out), "PROBE\n")
	if !ok {
		t.Fatalf("no probe output:\n%s", out)
	}
	checkProbe(t, probeOut, "65534")
}

// BenchmarkRun measures building a sandbox, running true in it and
// tearing it down.
func BenchmarkRun(b *testing.B) {
	outside := OutsideFunc(func(ln net.Listener) error {
		for {
			c, err := ln.Accept()
			if err != nil {
				return err
			}
			c.Close()
		}
	})
	for b.Loop() {
		code, err := Run(context.Background(), Config{Args: []string{"true"}, Dir: "/", Outside: outside})
		if err != nil || code != 0 {
			b.Fatal(code, err)
		}
	}
}

// TestHideAndShow covers a file and a directory (as the data directory
// and the configuration file are), and shows a directory under /tmp
// again, read-only.
func TestHideAndShow(t *testing.T) {
	shown := t.TempDir()
	for _, d := range []string{shown, filepath.Dir(shown)} {
		os.Chmod(d, 0o755)
	}
	if err := os.WriteFile(filepath.Join(shown, "f"), []byte("shown\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	code, err := Run(context.Background(), Config{
		Args: []string{"sh", "-c", `wc -c < /etc/hostname; ls -A /etc/ssl | wc -l; cat "$1/f"; ` +
			`echo x > "$1/g" 2>/dev/null || echo read-only; ls -A /tmp`, "sh", shown},
		Dir: "/", Stdout: &out, Stderr: &errb,
		Hide: []string{"/etc/hostname", "/etc/ssl"}, Show: []string{shown},
		Outside: OutsideFunc(func(ln net.Listener) error {
			for {
				c, err := ln.Accept()
				if err != nil {
					return err
				}
				c.Close()
			}
		})})
	if err != nil || code != 0 {
		t.Fatalf("%d %v %s", code, err, errb.String())
	}
	want := "0\n0\nshown\nread-only\n" // and /tmp empty but for the way to shown
	if rest, ok := strings.CutPrefix(shown, "/tmp/"); ok {
		want += strings.SplitN(rest, "/", 2)[0] + "\n"
	}
	if out.String() != want {
		t.Errorf("inside:\n%q\nwant\n%q", out.String(), want)
	}
	if _, err := os.Stat(filepath.Join(shown, "g")); err == nil {
		t.Error("the command wrote into a shown directory")
	}
}

// TestStartErrors: a working directory the sandbox hides and a missing
// command are the command's failures (exit 127), not the sandbox's.
func TestStartErrors(t *testing.T) {
	outside := OutsideFunc(func(ln net.Listener) error {
		for {
			c, err := ln.Accept()
			if err != nil {
				return err
			}
			c.Close()
		}
	})
	for _, cfg := range []Config{
		{Args: []string{"true"}, Dir: "/tmp/airlock-exec-test-hidden-" + strconv.Itoa(os.Getpid())},
		{Args: []string{"no-such-command-here"}, Dir: "/"},
	} {
		cfg.Outside = outside
		if cfg.Dir != "/" {
			if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
				t.Fatal(err)
			}
			defer os.Remove(cfg.Dir)
		}
		code, err := Run(context.Background(), cfg)
		var se *StartError
		if !errors.As(err, &se) || se.ExitStatus() != 127 || code != -1 {
			t.Errorf("%v in %s: %d %v, want a StartError", cfg.Args, cfg.Dir, code, err)
		}
	}
}

// TestInheritedDescriptors: a descriptor this process holds without
// close-on-exec (as one inherited from an agent harness would be: here a
// TCP connection in the host's network namespace) never reaches the
// command, which could otherwise write past the proxy through it.
func TestInheritedDescriptors(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Fatalf("python3 is needed: %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	got := make(chan string, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			got <- ""
			return
		}
		defer c.Close()
		c.SetReadDeadline(time.Now().Add(60 * time.Second)) // a hang guard
		b, _ := io.ReadAll(c)
		got <- string(b)
	}()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	f, err := c.(*net.TCPConn).File() // a dup with close-on-exec
	c.Close()
	if err != nil {
		t.Fatal(err)
	}
	fd, err := syscall.Dup(int(f.Fd())) // without close-on-exec
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			syscall.Close(fd)
		}
	}()
	script := `
import os, sys
fd = int(sys.argv[1])
try:
    os.write(fd, b"escaped")
    print("write ok")
except OSError as e:
    print("write failed", e.errno)
print("fds", " ".join(sorted(os.listdir("/proc/self/fd"), key=int)))
`
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	code, err := Run(ctx, Config{Args: []string{"python3", "-c", script, strconv.Itoa(fd)}, Dir: "/", Stdout: &out, Stderr: &errb,
		Outside: OutsideFunc(func(ln net.Listener) error {
			for {
				c, err := ln.Accept()
				if err != nil {
					return err
				}
				c.Close()
			}
		})})
	if err != nil || code != 0 {
		t.Fatalf("run: %d %v %s", code, err, errb.String())
	}
	// Run marked it close-on-exec: init did not get it either.
	if flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil || flags&unix.FD_CLOEXEC == 0 {
		t.Errorf("descriptor %d after Run: flags %#x, %v; want FD_CLOEXEC", fd, flags, err)
	}
	// The sandbox is gone: closing our descriptor ends the connection,
	// and the listener has everything that was written to it.
	syscall.Close(fd)
	closed = true
	if s := <-got; strings.Contains(s, "escaped") {
		t.Errorf("the command wrote to a host socket through inherited descriptor %d", fd)
	}
	if !strings.Contains(out.String(), "write failed 9\n") {
		t.Errorf("descriptor %d inside: %q, want EBADF", fd, out.String())
	}
	// 0, 1, 2 and the one listdir opens.
	if !strings.Contains(out.String(), "fds 0 1 2 3\n") {
		t.Errorf("descriptors inside: %q, want 0 1 2 and listdir's own", out.String())
	}
}

// TestCloexecWalk covers cloexecFrom's way without close_range(2): a
// descriptor without close-on-exec gets it.
func TestCloexecWalk(t *testing.T) {
	fd, err := syscall.Dup(2)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	if err := cloexecWalk(fd); err != nil {
		t.Fatal(err)
	}
	flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
	if err != nil || flags&unix.FD_CLOEXEC == 0 {
		t.Errorf("descriptor %d after cloexecWalk: flags %#x, %v; want FD_CLOEXEC", fd, flags, err)
	}
}

// closeInheritedEnv makes the test binary, run by TestCloseInherited,
// call closeInherited and report its descriptors.
const closeInheritedEnv = "AIRLOCK_SANDBOX_TEST_CLOSE_INHERITED"

// TestCloseInherited: init keeps the control socket and the binary
// (descriptors 3 and 4) and closes any other descriptor that came through
// the fork without close-on-exec.
func TestCloseInherited(t *testing.T) {
	if os.Getenv(closeInheritedEnv) != "" {
		closeInherited()
		for _, fd := range []int{ctlFD, exeFD, 5, 6} {
			_, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
			os.Stdout.WriteString("fd " + strconv.Itoa(fd) + " open=" + strconv.FormatBool(err == nil) + "\n")
		}
		return
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var files []*os.File
	for range 4 { // descriptors 3 to 6 in the child, none close-on-exec
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		defer w.Close()
		files = append(files, r)
	}
	cmd := exec.Command(self, "-test.run=^TestCloseInherited$")
	cmd.Env = append(os.Environ(), closeInheritedEnv+"=1")
	cmd.ExtraFiles = files
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the child: %v\n%s", err, out)
	}
	for _, want := range []string{"fd 3 open=true\n", "fd 4 open=true\n", "fd 5 open=false\n", "fd 6 open=false\n"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("%q missing in the child's report:\n%s", want, out)
		}
	}
}

// TestQuickExit: a command that ends at once ends init right after its
// ready message, so both are waiting when Run looks; the command's exit
// status is the answer, never "exited before the sandbox was ready" (and
// the socket is not closed under the reader).
func TestQuickExit(t *testing.T) {
	// Run waits until the command has surely ended before it looks.
	testHookReading = func() { time.Sleep(100 * time.Millisecond) }
	t.Cleanup(func() { testHookReading = nil })
	for i := range 20 {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		code, err := Run(ctx, Config{Args: []string{"/bin/sh", "-c", "exit 7"}, Dir: "/",
			Outside: OutsideFunc(func(ln net.Listener) error {
				for {
					c, err := ln.Accept()
					if err != nil {
						return err
					}
					c.Close()
				}
			})})
		cancel()
		if err != nil || code != 7 {
			t.Fatalf("run %d: exit %d, %v; want 7 and no error", i, code, err)
		}
	}
}
