package extract

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/ledongthuc/pdf"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/child"
)

// PDF text is read in a child process: a parser stuck in a hostile file
// cannot be stopped from another goroutine, but a process can be killed.
// The child is started by internal/child: it dies with this process, and
// the kernel kills it at its CPU and memory limits even if this process
// is stuck.

// PDFSubcommand is the hidden subcommand of the airlock binary that reads a
// PDF on standard input and writes its text on standard output (see
// WritePDFText).
const PDFSubcommand = "__pdftext"

// PDF limits.
const (
	DefaultPDFTimeout     = 10 * time.Second // wall clock: the child is killed past it
	DefaultPDFCPULimit    = 10 * time.Second // CPU time: the kernel kills the child past it (RLIMIT_CPU)
	DefaultPDFMemoryLimit = 1 << 30          // private writable memory of the child (RLIMIT_DATA)
	MaxPDFTextBytes       = 8 << 20          // text kept from one PDF
	maxPDFPages           = 5000
	pdfChildMemLimit      = "512MiB"  // GOMEMLIMIT of the child: its GC works to stay under it
	maxPDFChildInput      = 256 << 20 // what the child reads; the parent sends at most MaxInputBytes
)

// The PDF child's limits. Tests may change them.
var (
	// PDFTimeout is how long the PDF child may run, by the wall clock.
	PDFTimeout = DefaultPDFTimeout
	// PDFCPULimit is the CPU time after which the kernel kills the child:
	// it holds even when this process is stuck or gone.
	PDFCPULimit = DefaultPDFCPULimit
	// PDFMemoryLimit bounds the child's heap and stacks (RLIMIT_DATA).
	PDFMemoryLimit int64 = DefaultPDFMemoryLimit
)

// PDFCommand builds the child process that turns a PDF (its standard
// input) into text (its standard output). The default re-executes the
// running binary with PDFSubcommand, which the airlock command registers.
// Tests, whose binary is not airlock, replace it. The process is killed
// when ctx is done.
var PDFCommand = func(ctx context.Context) (*exec.Cmd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, exe, PDFSubcommand)
	cmd.Env = []string{"GOMEMLIMIT=" + pdfChildMemLimit, "GOMAXPROCS=1"}
	return cmd, nil
}

// pdfText runs the PDF child on body.
func pdfText(parent context.Context, body []byte) (string, error) {
	ctx, cancel := context.WithTimeout(parent, PDFTimeout)
	defer cancel()
	cmd, err := PDFCommand(ctx)
	if err != nil {
		return "", airlock.Errorf(airlock.CodeUnavailable, airlock.ReasonPDF, "extract: PDF reader: %w", err)
	}
	var out, errOut capBuffer
	out.max, errOut.max = MaxPDFTextBytes+1, 4096
	cmd.Stdin = bytes.NewReader(body)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	cmd.WaitDelay = time.Second
	err = child.Run(cmd, child.Limits{CPU: PDFCPULimit, Data: PDFMemoryLimit})
	if err := parent.Err(); err != nil {
		return "", err
	}
	switch {
	case ctx.Err() != nil:
		return "", airlock.Errorf(airlock.CodeTimeout, airlock.ReasonCPUDeadline, "extract: PDF reader killed after %s", PDFTimeout)
	case errors.Is(err, child.ErrCPULimit):
		return "", airlock.Errorf(airlock.CodeTimeout, airlock.ReasonCPUDeadline, "extract: PDF reader stopped at its CPU limit: %w", err)
	case err != nil && goOutOfMemory(errOut.String()):
		return "", airlock.Errorf(airlock.CodeTooLarge, airlock.ReasonMemoryLimit,
			"extract: PDF reader stopped at its memory limit of %d bytes", PDFMemoryLimit)
	case err != nil:
		msg := strings.TrimSpace(firstLine(errOut.String()))
		if msg == "" {
			msg = err.Error()
		}
		return "", airlock.Errorf(airlock.CodeUpstream, airlock.ReasonPDF, "extract: read PDF: %s", msg)
	}
	text := out.String()
	if len(text) > MaxPDFTextBytes {
		text = clip(text, MaxPDFTextBytes)
	}
	return strings.TrimRight(strings.ToValidUTF8(text, "\uFFFD"), "\n"), nil
}

// goOutOfMemory reports whether stderr is a Go runtime's death of a
// failed allocation (at RLIMIT_DATA): "fatal error: runtime: out of
// memory", "fatal error: out of memory allocating heap arena metadata", ....
func goOutOfMemory(stderr string) bool {
	for l := range strings.Lines(stderr) {
		if strings.HasPrefix(l, "fatal error: ") && strings.Contains(l, "out of memory") {
			return true
		}
	}
	return false
}

// RunPDFChild is the PDF child process (PDFSubcommand): it ties itself to
// its parent (child.Enter: SIGTERM ends it at once, the parent's death
// kills it) and writes the text of the PDF on r to w (WritePDFText).
func RunPDFChild(w io.Writer, r io.Reader) error {
	if err := child.Enter(); err != nil {
		return err
	}
	return WritePDFText(w, r, maxPDFChildInput)
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// capBuffer keeps the first max bytes written to it and discards the rest.
type capBuffer struct {
	bytes.Buffer
	max int
}

func (b *capBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.Len(); room > 0 {
		if len(p) > room {
			b.Buffer.Write(p[:room])
		} else {
			b.Buffer.Write(p)
		}
	}
	return len(p), nil
}

// WritePDFText reads a PDF of at most limit bytes from r and writes its
// text to w, pages separated by blank lines, at most MaxPDFTextBytes. It
// is what the PDF child runs; a panic of the parser is returned as an
// error.
func WritePDFText(w io.Writer, r io.Reader, limit int64) (err error) {
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return err
	}
	if int64(len(data)) > limit {
		return fmt.Errorf("PDF larger than %d bytes", limit)
	}
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("PDF parser: %v", v)
		}
	}()
	rd, err := pdf.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return fmt.Errorf("PDF: %w", err)
	}
	n := rd.NumPage()
	if n > maxPDFPages {
		n = maxPDFPages
	}
	fonts := map[string]*pdf.Font{}
	written := 0
	for i := 1; i <= n && written < MaxPDFTextBytes; i++ {
		p := rd.Page(i)
		if p.V.IsNull() {
			continue
		}
		t, err := p.GetPlainText(fonts)
		if err != nil {
			continue
		}
		t = strings.TrimSpace(strings.ToValidUTF8(t, ""))
		if t == "" {
			continue
		}
		if written > 0 {
			t = "\n\n" + t
		}
		if written+len(t) > MaxPDFTextBytes {
			t = clip(t, MaxPDFTextBytes-written)
		}
		k, err := io.WriteString(w, t)
		written += k
		if err != nil {
			return err
		}
	}
	if written > 0 {
		_, err = io.WriteString(w, "\n")
	}
	return err
}
