package child

import (
	"bufio"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestHasArg(t *testing.T) {
	t.Parallel()
	const arg = "--user-data-dir=/d/p"
	tests := []struct {
		cmdline string
		want    bool
	}{
		{"chromium\x00--user-data-dir=/d/p\x00about:blank\x00", true},
		{"chromium\x00--user-data-dir=/d/p\x00", true},
		{"chromium --type=renderer --user-data-dir=/d/p --lang=en", true}, // a rewritten title
		{"chromium --type=renderer --user-data-dir=/d/p", true},
		{"--user-data-dir=/d/p", true},
		{"chromium\x00--user-data-dir=/d/p-other\x00", false},
		{"chromium\x00--user-data-dir=/d/p/sub\x00", false},
		{"chromium\x00x--user-data-dir=/d/p\x00", false},
		{"chromium\x00--user-data-dir=/d\x00", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := HasArg(tt.cmdline, arg); got != tt.want {
			t.Errorf("HasArg(%q) = %v, want %v", tt.cmdline, got, tt.want)
		}
	}
}

// TestInPIDNamespace: a shell in its own PID namespace is PID 1 there,
// sees only its namespace in /proc, and when it is killed its background
// child dies with it.
func TestInPIDNamespace(t *testing.T) {
	if err := PIDNamespaces(); err != nil {
		t.Fatalf("this test runs as root, where PID namespaces are permitted: %v", err)
	}
	cmd := exec.Command("/bin/sh", "-c", `sleep 600 & echo "$$ $! $(ls /proc | grep -c '^[0-9]')"; wait`)
	if err := InPIDNamespace(cmd); err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	wait, err := Start(cmd, Limits{CPU: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	f := strings.Fields(line)
	if len(f) != 3 || f[0] != "1" {
		t.Fatalf("the shell says %q, want PID 1 first", line)
	}
	if n, _ := strconv.Atoi(f[2]); n < 2 || n > 5 {
		t.Errorf("the shell's /proc lists %s processes: not its namespace's", f[2])
	}

	// The background sleep, seen from here.
	var sleeper Proc
	for _, p := range Children(cmd.Process.Pid) {
		sleeper = p
	}
	if sleeper.PID == 0 {
		t.Fatal("no child of the shell found")
	}
	cmd.Process.Signal(syscall.SIGKILL)
	wait()
	start := time.Now()
	for sleeper.Running() {
		if time.Since(start) > 10*time.Second {
			t.Fatalf("the shell's child %d outlived it by 10 s", sleeper.PID)
		}
		time.Sleep(time.Millisecond)
	}
	t.Logf("the namespace's last process was gone %s after its PID 1 was killed", time.Since(start).Round(time.Microsecond))
}

// TestRunLimits: the limits are in force in the child as soon as Run has
// started it.
func TestRunLimits(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("/bin/sh", "-c", "sleep 0.2; ulimit -t; ulimit -d")
	var out strings.Builder
	cmd.Stdout = &out
	if err := Run(cmd, Limits{CPU: 1500 * time.Millisecond, Data: 256 << 20}); err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Fields(out.String()), []string{"2", strconv.Itoa(256 << 10)}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("ulimit -t, -d in the child: %q, want %q (seconds rounded up, KiB)", got, want)
	}
}
