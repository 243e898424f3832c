package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/engine"
)

// noTerminal is the terminal of a process without one.
func noTerminal() (terminal, error) { return nil, errors.New("no terminal") }

// pipeTerminal stands in for /dev/tty: the prompt writes to out and reads
// from in, both real pipes whose reads take deadlines as a terminal's do.
type pipeTerminal struct {
	in, out *os.File // the approver's ends
}

func (p pipeTerminal) Read(b []byte) (int, error)        { return p.in.Read(b) }
func (p pipeTerminal) Write(b []byte) (int, error)       { return p.out.Write(b) }
func (p pipeTerminal) SetReadDeadline(t time.Time) error { return p.in.SetReadDeadline(t) }
func (p pipeTerminal) Close() error                      { return errors.Join(p.in.Close(), p.out.Close()) }

// person is the other end of a pipeTerminal: what the prompt shows, and
// the keyboard.
type person struct {
	screen *bufio.Reader
	keys   *os.File
}

func newPipeTerminal(t *testing.T) (pipeTerminal, person) {
	t.Helper()
	kr, kw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	sr, sw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { kw.Close(); sr.Close() })
	return pipeTerminal{in: kr, out: sw}, person{screen: bufio.NewReader(sr), keys: kw}
}

// prompt reads the screen up to the end of the next question.
func (p person) prompt(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	for !strings.HasSuffix(b.String(), "denies): ") {
		c, err := p.screen.ReadByte()
		if err != nil {
			t.Fatalf("reading the prompt: %v (so far %q)", err, b.String())
		}
		b.WriteByte(c)
	}
	return b.String()
}

var approvalIDRE = regexp.MustCompile(`approval (ap_[0-9a-f]+)`)

// An ask raised by `airlock browser run` is put to the person at the
// terminal while the navigate waits; y approves, anything else denies, and
// stderr says what is pending.
func TestBrowserRunAskAtTheTerminal(t *testing.T) {
	t.Parallel()
	requireChromium(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte(`<title>Asked</title><p>hello</p>`))
	}))
	t.Cleanup(srv.Close) // after the parallel subtests
	port := strings.TrimPrefix(srv.URL, "http://127.0.0.1:")
	for _, tc := range []struct {
		answer   string
		wantCode int
		wantOK   bool
	}{
		{"yes\n", 0, true},
		{"y\n", 0, true},
		{"no\n", 3, false},
		{"\n", 3, false},
		{"sure\n", 3, false},
	} {
		t.Run(strings.TrimSpace(tc.answer), func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			term, you := newPipeTerminal(t)
			var stdout bytes.Buffer
			var stderr lockedBuffer
			e := &env{stdin: strings.NewReader(`{"ops":[{"kind":"navigate","url":"` + srv.URL + `/page"}]}`),
				stdout: &stdout, stderr: &stderr,
				tty: func() (terminal, error) { return term, nil }}
			done := make(chan int, 1)
			go func() {
				code := run(ctx, e, []string{"browser", "run", "--data-dir", t.TempDir(), "--except", "127.0.0.1:" + port,
					"--browser-default", "ask", "-"}, commands)
				term.out.Close() // the screen ends with the run
				done <- code
			}()
			shown := you.prompt(t)
			// The navigate is still pending while the person reads.
			select {
			case code := <-done:
				t.Fatalf("the run ended (exit %d) before the person answered\n%s", code, stdout.String())
			default:
			}
			m := approvalIDRE.FindStringSubmatch(shown)
			if m == nil || !strings.Contains(shown, srv.URL) || !strings.Contains(shown, srv.URL+"/page") ||
				!strings.Contains(shown, "tenant local") || !strings.Contains(shown, "[y/N]") {
				t.Fatalf("the prompt lacks the approval id, origin, URL or tenant:\n%s", shown)
			}
			if _, err := you.keys.WriteString(tc.answer); err != nil {
				t.Fatal(err)
			}
			var code int
			select {
			case code = <-done:
			case <-ctx.Done():
				t.Fatal("the run did not end after the answer")
			}
			if code != tc.wantCode {
				t.Fatalf("exit %d, want %d\nstdout %s\nstderr %s", code, tc.wantCode, stdout.String(), stderr.String())
			}
			var out opsOutput
			if err := json.Unmarshal(stdout.Bytes(), &out); err != nil || len(out.Results) != 1 {
				t.Fatalf("output: %v\n%s", err, stdout.String())
			}
			if got := out.Results[0]; got.OK != tc.wantOK || (!tc.wantOK && got.Error.Code != "denied") {
				t.Errorf("navigate result %+v (error %+v), want ok=%v", got, got.Error, tc.wantOK)
			}
			if want := "waiting for approval " + m[1] + " of " + srv.URL; !strings.Contains(stderr.String(), want) {
				t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
			}
		})
	}
}

// Without a terminal (and no other approver) ask is deny at once, naming
// what allows the origin.
func TestBrowserRunAskWithoutTerminal(t *testing.T) {
	t.Parallel()
	requireChromium(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	port := strings.TrimPrefix(srv.URL, "http://127.0.0.1:")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	r := invoke(t, ctx, `{"ops":[{"kind":"navigate","url":"`+srv.URL+`/"}]}`, []string{"browser", "run", "--data-dir", t.TempDir(),
		"--except", "127.0.0.1:" + port, "--browser-default", "ask", "-"})
	if r.code != 3 || !strings.Contains(r.stdout, "no_approver") || !strings.Contains(r.stdout, "--allow-origin") {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
	}
}

// The prompt ignores what was typed before it appeared, ends without an
// answer when the approval is answered elsewhere, and never prints a
// control character of the page's URL.
func TestTerminalPrompt(t *testing.T) {
	term, you := newPipeTerminal(t)
	a := &ttyApprover{t: term, stop: make(chan struct{})}
	t.Cleanup(a.close)
	req := engineRequest("http://127.0.0.1:1/\x1b[2J\x07x")
	if _, err := you.keys.WriteString("y\n"); err != nil { // type-ahead
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	type answer struct {
		ok  bool
		err error
	}
	got := make(chan answer, 1)
	go func() {
		ok, err := a.Ask(ctx, req)
		got <- answer{ok, err}
	}()
	shown := you.prompt(t)
	if strings.ContainsAny(shown, "\x1b\x07") || !strings.Contains(shown, "/?[2J?x") {
		t.Errorf("the prompt prints control characters: %q", shown)
	}
	cancel() // answered elsewhere
	select {
	case g := <-got:
		if g.err == nil {
			t.Fatalf("Ask = %v after the approval was answered elsewhere, want no answer", g.ok)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the prompt did not end when the approval was answered elsewhere")
	}

	// The next prompt reads the line typed after it appeared.
	go func() {
		ok, err := a.Ask(context.Background(), req)
		got <- answer{ok, err}
	}()
	you.prompt(t)
	you.keys.WriteString(" YES \n")
	if g := <-got; g.err != nil || !g.ok {
		t.Fatalf("Ask = %v, %v, want approved", g.ok, g.err)
	}
}

func engineRequest(url string) engine.BrowserApprovalRequest {
	return engine.BrowserApprovalRequest{ID: "ap_0123456789abcdef", Origin: "http://127.0.0.1:1", URL: url,
		Deadline: time.Now().Add(time.Minute), Session: "bs_x", Tenant: "local"}
}

// --no-tty keeps the prompt off the terminal: a client that draws its own
// screen on it (a terminal-based agent) is not interrupted, and ask
// behaves as deny with nothing else to answer it.
func TestBrowserRunNoTTY(t *testing.T) {
	t.Parallel()
	requireChromium(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	port := strings.TrimPrefix(srv.URL, "http://127.0.0.1:")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var stdout bytes.Buffer
	var stderr lockedBuffer
	opened := false
	e := &env{stdin: strings.NewReader(`{"ops":[{"kind":"navigate","url":"` + srv.URL + `/"}]}`),
		stdout: &stdout, stderr: &stderr,
		tty: func() (terminal, error) { opened = true; return nil, errors.New("no terminal in this test") }}
	code := run(ctx, e, []string{"browser", "run", "--data-dir", t.TempDir(), "--except", "127.0.0.1:" + port,
		"--browser-default", "ask", "--no-tty", "-"}, commands)
	if opened {
		t.Error("--no-tty opened the terminal")
	}
	if code != 3 || !strings.Contains(stdout.String(), "no_approver") {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", code, stdout.String(), stderr.String())
	}
}
