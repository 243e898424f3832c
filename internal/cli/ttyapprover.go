package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/airlockhq/airlock/engine"
)

// terminal is what the prompt needs of /dev/tty: reads that a deadline
// can interrupt, so that a prompt answered elsewhere stops reading.
type terminal interface {
	io.ReadWriteCloser
	SetReadDeadline(time.Time) error
}

// openDevTTY opens the controlling terminal, never stdin or stdout (they
// carry the MCP protocol, or the script and its results). Without one
// (a client started the process detached, a service), or when its reads
// cannot be interrupted, the terminal channel is absent.
func openDevTTY() (terminal, error) {
	f, err := os.OpenFile("/dev/tty", os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	if err := f.SetReadDeadline(time.Time{}); err != nil {
		f.Close()
		return nil, fmt.Errorf("/dev/tty: reads cannot be interrupted: %w", err)
	}
	return f, nil
}

// noTTYUsage is the help of --no-tty on the commands that prompt.
const noTTYUsage = "never prompt on /dev/tty to approve an ask origin (for a client that draws its own screen on the terminal); asks then go to MCP elicitation or are refused"

// attachTerminalApprover attaches the terminal prompt to en when a
// terminal is there (e.tty, else /dev/tty) and off is false (--no-tty).
// detach closes it.
func (e *env) attachTerminalApprover(en *engine.Engine, off bool) (detach func()) {
	if off {
		return func() {}
	}
	open := e.tty
	if open == nil {
		open = openDevTTY
	}
	t, err := open()
	if err != nil {
		return func() {}
	}
	a := &ttyApprover{t: t, stop: make(chan struct{})}
	remove := en.AddBrowserApprover("terminal", a)
	return func() {
		remove()
		a.close()
	}
}

// ttyApprover asks the person at the terminal, one prompt at a time. It
// reads the terminal only while it asks, so that it never takes keystrokes
// meant for another program on the same terminal.
type ttyApprover struct {
	mu     sync.Mutex // one prompt at a time; guards closed
	t      terminal
	stop   chan struct{} // closed by close: a prompt ends
	once   sync.Once
	closed bool
}

func (a *ttyApprover) close() {
	a.once.Do(func() { close(a.stop) }) // ends a prompt's read
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.closed {
		a.closed = true
		a.t.Close()
	}
}

// drainWait is how long drain reads type-ahead.
const drainWait = 20 * time.Millisecond

// errNoAnswer: the prompt ended without a line (timeout, answered
// elsewhere, the terminal closed).
var errNoAnswer = errors.New("terminal: no answer")

// Ask prompts with the approval id, the origin and URL, the tenant and the
// time left, and reads one line: y or yes approves, anything else denies.
func (a *ttyApprover) Ask(ctx context.Context, req engine.BrowserApprovalRequest) (bool, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-a.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed || ctx.Err() != nil {
		return false, errNoAnswer
	}
	// Type-ahead (a line typed for an earlier prompt) answers nothing.
	a.drain()
	left := time.Until(req.Deadline).Round(time.Second)
	fmt.Fprintf(a.t, "\nairlock: approval %s: the browser of tenant %s (session %s) asks to open\n  %s\n  for %s",
		req.ID, clean(req.Tenant, 64), clean(req.Session, 64), clean(req.Origin, 200), clean(req.URL, 300))
	if req.InitiatingOp != "" {
		fmt.Fprintf(a.t, " (during %s)", clean(req.InitiatingOp, 32))
	}
	fmt.Fprintf(a.t, "\nAllow this origin for the session? [y/N] (no answer in %s denies): ", left)
	// The deadline first: the end of ctx (answered elsewhere, the
	// session or the process closing) overrides it.
	a.t.SetReadDeadline(req.Deadline)
	stop := context.AfterFunc(ctx, func() { a.t.SetReadDeadline(time.Now()) })
	defer stop()
	line, err := a.readLine()
	a.t.SetReadDeadline(time.Time{})
	if err != nil || ctx.Err() != nil {
		fmt.Fprintf(a.t, "\nairlock: approval %s: no answer here (answered elsewhere or timed out)\n", req.ID)
		return false, errNoAnswer
	}
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		fmt.Fprintf(a.t, "airlock: approval %s: approved %s\n", req.ID, clean(req.Origin, 200))
		return true, nil
	}
	fmt.Fprintf(a.t, "airlock: approval %s: denied\n", req.ID)
	return false, nil
}

// readLine reads up to a newline, a byte at a time so that nothing past
// the line is consumed, and at most 256 bytes.
func (a *ttyApprover) readLine() (string, error) {
	var b strings.Builder
	var c [1]byte
	for b.Len() < 256 {
		n, err := a.t.Read(c[:])
		if n == 1 {
			if c[0] == '\n' {
				return b.String(), nil
			}
			b.WriteByte(c[0])
		}
		if err != nil {
			return b.String(), err
		}
	}
	return b.String(), nil
}

// drain discards what was typed before the prompt. (A deadline already
// past would not read at all: the poller fails such reads at once.)
func (a *ttyApprover) drain() {
	a.t.SetReadDeadline(time.Now().Add(drainWait))
	var buf [256]byte
	for i := 0; i < 64; i++ {
		if n, err := a.t.Read(buf[:]); n == 0 || err != nil {
			break
		}
	}
	a.t.SetReadDeadline(time.Time{})
}

// clean makes s safe to print on a terminal: no control characters (a
// page's URL must not drive the terminal), at most max runes.
func clean(s string, max int) string {
	var b strings.Builder
	n := 0
	for _, r := range s {
		if n == max {
			b.WriteString("...")
			break
		}
		if unicode.IsControl(r) || r == unicode.ReplacementChar {
			r = '?'
		}
		b.WriteRune(r)
		n++
	}
	return b.String()
}
