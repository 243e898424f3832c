package extract

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/child"
)

// runPDFParent is the helper process of TestPDFChildDiesWithParent: it
// extracts a cyclic PDF through the real path (Extract → pdfText → the
// child), which spins until something kills it.
func runPDFParent() {
	PDFTimeout = time.Hour // only the parent's death may end the child
	_, err := Extract(context.Background(), Input{Body: cyclicPDF(), ContentType: "application/pdf"}, Options{})
	fmt.Fprintln(os.Stderr, "the PDF child ended while its parent lived:", err)
	os.Exit(1)
}

// TestPDFChildDiesWithParent: a parent process extracting a hostile PDF
// (a cyclic page tree) is killed with SIGKILL; its PDF child, spinning,
// must be gone soon after instead of running on as an orphan.
func TestPDFChildDiesWithParent(t *testing.T) {
	parent := exec.Command(os.Args[0], "-test.run=^$")
	parent.Env = append(os.Environ(), helperEnv+"=pdfparent")
	var stderr bytes.Buffer
	parent.Stderr = &stderr
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	defer parent.Wait()
	defer parent.Process.Kill()

	// Wait for the child to be spinning: on its parent, with CPU time.
	var kid child.Proc
	deadline := time.Now().Add(30 * time.Second) // hang guard
	for kid.PID == 0 || kid.CPU < 500*time.Millisecond {
		if time.Now().After(deadline) {
			t.Fatalf("no spinning PDF child under the parent after 30 s (child %+v); parent stderr: %s", kid, stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
		if kids := child.Children(parent.Process.Pid); len(kids) == 1 {
			kid = kids[0]
		}
	}
	defer kid.Kill()

	if err := parent.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	parent.Wait()
	if gone := waitGone(kid, 10*time.Second); gone < 0 {
		now, _ := child.ReadProc(kid.PID)
		t.Fatalf("the PDF child %d outlived its parent by 10 s (state %c, %s of CPU)", kid.PID, now.State, now.CPU)
	} else {
		t.Logf("the PDF child (%s of CPU when its parent was killed) was gone %s after the parent's SIGKILL",
			kid.CPU.Round(time.Millisecond), gone.Round(time.Microsecond))
	}
}

// waitGone polls until p is gone (or a zombie) and returns how long that
// took, or -1 after limit.
func waitGone(p child.Proc, limit time.Duration) time.Duration {
	start := time.Now()
	for p.Running() {
		if time.Since(start) > limit {
			return -1
		}
		time.Sleep(time.Millisecond)
	}
	return time.Since(start)
}

// TestCyclicPDFFile: testdata/pdf/cyclic.pdf, which the airlock binary's
// tests (internal/cli) feed the real command, is what cyclicPDF writes.
func TestCyclicPDFFile(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join("testdata", "pdf", "cyclic.pdf"))
	if err != nil || !bytes.Equal(b, cyclicPDF()) {
		t.Errorf("testdata/pdf/cyclic.pdf is not what cyclicPDF writes (%v): regenerate it", err)
	}
}

// TestPDFChildCPULimit: a child spinning on a cyclic page tree is killed
// by the kernel at its CPU limit, long before the wall-clock timeout, and
// the error says so in the vocabulary.
func TestPDFChildCPULimit(t *testing.T) {
	// Not parallel: it changes the package's PDF limits.
	defer func(d, c time.Duration) { PDFTimeout, PDFCPULimit = d, c }(PDFTimeout, PDFCPULimit)
	PDFTimeout, PDFCPULimit = 5*time.Minute, time.Second // the timeout is only a hang guard here
	start := time.Now()
	_, err := Extract(context.Background(), Input{Body: cyclicPDF(), ContentType: "application/pdf"}, Options{})
	if airlock.CodeOf(err) != airlock.CodeTimeout || airlock.ReasonOf(err) != airlock.ReasonCPUDeadline {
		t.Fatalf("err = %v, want timeout/%s", err, airlock.ReasonCPUDeadline)
	}
	if !errors.Is(err, child.ErrCPULimit) {
		t.Fatalf("err = %v: not the CPU limit (child.ErrCPULimit)", err)
	}
	t.Logf("%v, after %s", err, time.Since(start).Round(time.Millisecond))
}

// TestPDFChildMemoryLimit: a child that allocates past its memory limit
// dies of it, and the error is too_large/memory_limit.
func TestPDFChildMemoryLimit(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's shadow memory does not fit under the limit; its child dies of ThreadSanitizer's error instead of Go's")
	}
	// Not parallel: it changes the package's PDF command and limits.
	defer func(c func(context.Context) (*exec.Cmd, error), m int64) { PDFCommand, PDFMemoryLimit = c, m }(PDFCommand, PDFMemoryLimit)
	PDFCommand, PDFMemoryLimit = helperCommand("alloc"), 256<<20
	_, err := Extract(context.Background(), Input{Body: minimalPDF("x"), ContentType: "application/pdf"}, Options{})
	if airlock.CodeOf(err) != airlock.CodeTooLarge || airlock.ReasonOf(err) != airlock.ReasonMemoryLimit {
		t.Fatalf("err = %v, want too_large/%s", err, airlock.ReasonMemoryLimit)
	}
}

// runAlloc is the "alloc" helper: a PDF reader that allocates (and
// touches) 4 GiB, 64 MiB at a time, unless a limit stops it.
func runAlloc() {
	if err := child.Enter(); err != nil {
		os.Exit(1)
	}
	var keep [][]byte
	for range 64 {
		b := make([]byte, 64<<20)
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1
		}
		keep = append(keep, b)
	}
	fmt.Println(len(keep), "chunks allocated")
	os.Exit(0)
}
