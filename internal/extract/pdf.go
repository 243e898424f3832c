package extract

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/ledongthuc/pdf"

	"github.com/airlockhq/airlock"
)

// PDF text is read in a child process: a parser stuck in a hostile file
// cannot be stopped from another goroutine, but a process can be killed.

// PDFSubcommand is the hidden subcommand of the airlock binary that reads a
// PDF on standard input and writes its text on standard output (see
// WritePDFText).
const PDFSubcommand = "__pdftext"

// PDF limits.
const (
	DefaultPDFTimeout = 10 * time.Second // the child is killed past it
	MaxPDFTextBytes   = 8 << 20          // text kept from one PDF
	maxPDFPages       = 5000
	pdfChildMemLimit  = "512MiB" // GOMEMLIMIT of the child
)

// PDFTimeout is how long the PDF child may run. Tests may lower it.
var PDFTimeout = DefaultPDFTimeout

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
		return "", airlock.Errorf(airlock.CodeUnavailable, ReasonPDF, "extract: PDF reader: %w", err)
	}
	var out, errOut capBuffer
	out.max, errOut.max = MaxPDFTextBytes+1, 4096
	cmd.Stdin = bytes.NewReader(body)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	cmd.WaitDelay = time.Second
	err = cmd.Run()
	if err := parent.Err(); err != nil {
		return "", err
	}
	if ctx.Err() != nil {
		return "", airlock.Errorf(airlock.CodeTimeout, ReasonCPUDeadline, "extract: PDF reader killed after %s", PDFTimeout)
	}
	if err != nil {
		msg := strings.TrimSpace(firstLine(errOut.String()))
		if msg == "" {
			msg = err.Error()
		}
		return "", airlock.Errorf(airlock.CodeUpstream, ReasonPDF, "extract: read PDF: %s", msg)
	}
	text := out.String()
	if len(text) > MaxPDFTextBytes {
		text = clip(text, MaxPDFTextBytes)
	}
	return strings.TrimRight(strings.ToValidUTF8(text, "\uFFFD"), "\n"), nil
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
