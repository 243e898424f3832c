package browser

import (
	"bytes"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
)

// nodocChildEnv switches TestNoDocumentChild on in the re-executed test
// binary.
const nodocChildEnv = "AIRLOCK_BROWSER_NODOC_CHILD"

// TestNoDocumentStepsDoNotCrash runs, in a child process, interact steps
// and ops that need a document on a session that has never navigated.
// Such a step used to panic inside chromedp's event goroutine (a nil
// dereference in Target.domEvent) and kill the whole process; the child
// must exit 0 having seen every step refused with invalid/needs_url.
func TestNoDocumentStepsDoNotCrash(t *testing.T) {
	t.Parallel()
	requireChromium(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestNoDocumentChild$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), nodocChildEnv+"=1")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("child: %v\n%s", err, lastBytes(out.Bytes(), 6000))
		}
	case <-time.After(3 * time.Minute): // hang guard only
		cmd.Process.Kill()
		<-done
		t.Fatalf("child hung\n%s", lastBytes(out.Bytes(), 6000))
	}
	if !bytes.Contains(out.Bytes(), []byte("--- PASS: TestNoDocumentChild")) {
		t.Fatalf("child did not run the test:\n%s", lastBytes(out.Bytes(), 6000))
	}
}

func lastBytes(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// TestNoDocumentChild is the child of TestNoDocumentStepsDoNotCrash.
func TestNoDocumentChild(t *testing.T) {
	t.Parallel()
	if os.Getenv(nodocChildEnv) != "1" {
		t.Skip("the child of TestNoDocumentStepsDoNotCrash")
	}
	s, _ := open(t, nil)
	ctx := testCtx(t)
	// Below the needs_url guard: a DOM query on the fresh tab must not
	// reach chromedp's frame-less state (the tab opened on about:blank).
	rawQuery(t, s)
	steps := []Action{
		{Action: ActExtractText, Selector: "h1", TimeoutMS: 500},
		{Action: ActClick, Selector: "#go", TimeoutMS: 500},
		{Action: ActWaitForSelector, Selector: "#x", TimeoutMS: 500},
		{Action: ActExtractText},
		{Action: ActFill, Selector: "input", Text: "x", TimeoutMS: 500},
		{Action: ActPress, Selector: "input", Key: "Enter", TimeoutMS: 500},
		{Action: ActSelect, Selector: "select", Value: "a", TimeoutMS: 500},
		{Action: ActDblclick, Selector: "#go", TimeoutMS: 500},
		{Action: ActWaitForSelector, Selector: "#x", State: "hidden", TimeoutMS: 500},
	}
	res, err := s.Interact(ctx, steps, false)
	if err != nil {
		t.Fatalf("Interact: %v", err)
	}
	if len(res.Results) != len(steps) {
		t.Fatalf("results: %+v", res)
	}
	for i, r := range res.Results {
		if r.OK {
			t.Errorf("step %d (%s) passed on a session with no document", i, r.Action)
			continue
		}
		var ae *airlock.Error
		if r.Err == nil || !asAirlock(r.Err, &ae) || ae.Code != airlock.CodeInvalid || ae.Reason != "needs_url" {
			t.Errorf("step %d (%s): err = %v, want invalid/needs_url", i, r.Action, r.Err)
		}
	}
	for _, op := range []Op{
		{Kind: KindWaitFor, Selector: "#x", TimeoutMS: 500},
		{Kind: KindWaitFor, Role: "button", TimeoutMS: 500},
		{Kind: KindClick, Ref: "@e1"},
		{Kind: KindFill, Ref: "@e1", Text: "x"},
		{Kind: KindSelect, Ref: "@e1", Value: "a"},
		{Kind: KindPress, Key: "Enter", Ref: "@e1"},
	} {
		_, err := s.Do(ctx, op)
		wantCode(t, err, airlock.CodeInvalid, "needs_url")
	}
	// A snapshot and a read of the blank page answer (and do not crash).
	if r, err := s.Do(ctx, Op{Kind: KindSnapshot}); err != nil || r.Snapshot == nil || r.Snapshot.Refs != 0 {
		t.Fatalf("snapshot of about:blank: %+v %v", r.Snapshot, err)
	}
	if _, err := s.Do(ctx, Op{Kind: KindRead, Mode: "raw"}); err != nil {
		t.Fatalf("read of about:blank: %v", err)
	}
	// The session still works: it navigates and then finds the element.
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) { html(w, `<title>t</title><h1>Hello</h1>`) })
	res, err = s.Interact(ctx, []Action{{Action: ActGoto, URL: srv.URL + "/"}, {Action: ActExtractText, Selector: "h1"}}, true)
	if err != nil || len(res.Results) != 2 || !res.Results[1].OK || *res.Results[1].Text != "Hello" {
		t.Fatalf("after goto: %+v %v", res, err)
	}
	// A new tab without a URL has no document either; one with a URL has.
	if _, err := s.Do(ctx, Op{Kind: KindNewTab}); err != nil {
		t.Fatalf("new_tab: %v", err)
	}
	rawQuery(t, s)
	res, err = s.Interact(ctx, []Action{{Action: ActExtractText, Selector: "h1"}}, false)
	if err != nil || len(res.Results) != 1 {
		t.Fatalf("new tab: %+v %v", res, err)
	}
	wantCode(t, res.Results[0].Err, airlock.CodeInvalid, "needs_url")
	if _, err := s.Do(ctx, Op{Kind: KindNewTab, URL: srv.URL + "/"}); err != nil {
		t.Fatalf("new_tab url: %v", err)
	}
	if _, err := s.Do(ctx, Op{Kind: KindWaitFor, Selector: "h1"}); err != nil {
		t.Fatalf("wait_for on a new tab with a URL: %v", err)
	}
}

// rawQuery runs selector queries on the current tab without the needs_url
// guard, as a step would after it.
func rawQuery(t *testing.T, s *Session) {
	t.Helper()
	b, err := s.begin()
	if err != nil {
		t.Fatal(err)
	}
	defer s.mu.Unlock()
	ctx := testCtx(t)
	for _, sel := range []string{"h1", "#x", "div > span"} {
		if _, err := findWhen(ctx, b, sel, "visible", 100*time.Millisecond); airlock.ReasonOf(err) != "wait_for_timeout" {
			t.Fatalf("raw query %s: %v", sel, err)
		}
	}
	// What extract_text without a selector does: find body, read its text.
	backend, err := findWhen(ctx, b, "body", "attached", time.Second)
	if err != nil {
		t.Fatalf("raw query body: %v", err)
	}
	if _, err := callOnNode(ctx, b, backend, "body", "extract_text", textScript, nil); err != nil {
		t.Fatalf("raw extract_text body: %v", err)
	}
}

func asAirlock(err error, ae **airlock.Error) bool { return errors.As(err, ae) }

// TestRecoverOp: a panic in op code becomes an internal browser_panic
// error, logged with its stack, instead of the end of the process.
func TestRecoverOp(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	s := &Session{opts: Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))}}
	run := func() (err error) {
		defer s.recoverOp("click", &err)
		panic("a bug in op code")
	}
	wantCode(t, run(), airlock.CodeInternal, "browser_panic")
	if !strings.Contains(logs.String(), "op panicked") || !strings.Contains(logs.String(), "TestRecoverOp") {
		t.Fatalf("log without the panic's stack: %s", logs.String())
	}
	ok := func() (err error) {
		defer s.recoverOp("click", &err)
		return airlock.Errorf(airlock.CodeInvalid, "x", "kept")
	}
	wantCode(t, ok(), airlock.CodeInvalid, "x")
}
