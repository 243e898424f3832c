package cli

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/airlockhq/airlock/internal/child"
)

// TestPDFChildBinary runs the real binary on a hostile PDF (a page tree
// whose kid is itself: the reader spins): the PDF child ends at once on
// SIGTERM (the command's main catches SIGTERM for a graceful shutdown,
// which the child must not inherit), and dies when `airlock extract`,
// its parent, is killed with SIGKILL.
func TestPDFChildBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the airlock binary")
	}
	t.Parallel()
	bin := buildAirlock(t)
	pdf, err := filepath.Abs(filepath.Join("..", "extract", "testdata", "pdf", "cyclic.pdf"))
	if err != nil {
		t.Fatal(err)
	}
	body, err := os.ReadFile(pdf)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("SIGTERM", func(t *testing.T) {
		cmd := exec.Command(bin, "__pdftext")
		cmd.Stdin = bytes.NewReader(body)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer cmd.Wait()
		defer cmd.Process.Kill()
		p := waitSpinning(t, cmd.Process.Pid, 0)
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		sent := time.Now()
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		select {
		case err := <-exited:
			took := time.Since(sent)
			ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
			if !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
				t.Errorf("the PDF child ended with %v, want killed by SIGTERM", err)
			}
			t.Logf("the PDF child (%s of CPU) ended %s after SIGTERM", p.CPU.Round(time.Millisecond), took.Round(time.Microsecond))
		case <-time.After(10 * time.Second):
			now, _ := child.ReadProc(p.PID)
			t.Errorf("the PDF child runs on 10 s after SIGTERM (%s of CPU)", now.CPU)
		}
	})

	t.Run("parent killed", func(t *testing.T) {
		dir := t.TempDir()
		cmd := exec.Command(bin, "extract", pdf)
		cmd.Dir = dir
		cmd.Env = []string{"HOME=" + dir, "PATH=" + os.Getenv("PATH")}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer cmd.Wait()
		defer cmd.Process.Kill()
		kid := waitSpinning(t, 0, cmd.Process.Pid)
		defer kid.Kill()
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		killed := time.Now()
		cmd.Wait()
		for kid.Running() {
			if time.Since(killed) > 10*time.Second {
				now, _ := child.ReadProc(kid.PID)
				t.Fatalf("the PDF child %d outlived `airlock extract` by 10 s (%s of CPU); stderr %s", kid.PID, now.CPU, stderr.String())
			}
			time.Sleep(time.Millisecond)
		}
		t.Logf("the PDF child (%s of CPU) was gone %s after its parent's SIGKILL", kid.CPU.Round(time.Millisecond), time.Since(killed).Round(time.Microsecond))
	})
}

// waitSpinning waits until the process pid, or the only child of parent,
// has used a second of CPU (the binary starts in about 0.15 s of CPU, and a
// signal before main has run would prove nothing), and returns it.
func waitSpinning(t *testing.T, pid, parent int) child.Proc {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute) // hang guard: a second of CPU on a loaded machine
	for {
		var p child.Proc
		if pid != 0 {
			p, _ = child.ReadProc(pid)
		} else if kids := child.Children(parent); len(kids) == 1 {
			p = kids[0]
		}
		if p.PID != 0 && p.CPU >= time.Second {
			if pid == 0 {
				cmdline, _ := os.ReadFile("/proc/" + strconv.Itoa(p.PID) + "/cmdline")
				if !strings.Contains(string(cmdline), "__pdftext") {
					t.Fatalf("the child of `airlock extract` is %q, not the PDF reader", cmdline)
				}
			}
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("no spinning PDF reader after 2 minutes (%+v)", p)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
