package browser

import (
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The test apps in testdata/apps are written in this repository (plain
// HTML, CSS and JavaScript, no network) and reproduce the traits of real
// apps that trip agents: web components with open shadow roots, a
// label-driven toggle-all over a 1-px input, hover-only delete,
// double-click edit, localStorage and IndexedDB, a validated form. These
// tests load each app once in a real browser and check through snapshots
// and refs alone that its key elements are present and reachable.

// serveApps serves testdata/apps on loopback.
func serveApps(t *testing.T) string {
	t.Helper()
	fs := http.FileServer(http.Dir(filepath.Join("testdata", "apps")))
	return serve(t, fs.ServeHTTP).URL
}

// appSize is the byte size of an app's files, for the log.
func appSize(t *testing.T, app string) int64 {
	var n int64
	filepath.WalkDir(filepath.Join("testdata", "apps", app), func(_ string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// snapshotUntil takes snapshots until one contains want; the bound is a
// hang guard for the app's asynchronous work (IndexedDB), never a timing
// assertion.
func snapshotUntil(t *testing.T, s *Session, want string) Snapshot {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		snap := snapshot(t, s)
		if strings.Contains(snap.Text, want) {
			return snap
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %q in the snapshot:\n%s", want, snap.Text)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// wantLines fails unless every want is in the snapshot.
func wantLines(t *testing.T, snap Snapshot, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(snap.Text, w) {
			t.Errorf("no %q in the snapshot:\n%s", w, snap.Text)
		}
	}
}

// TestAppTodo: the web-components todo app renders inside open shadow
// roots, and refs reach into them: a todo added by Fill and Press Enter
// on the textbox's ref appears with its checkbox; completing it by ref
// updates the count; the toggle-all, filters and Clear completed are in
// the outline; the todos survive a reload (localStorage).
func TestAppTodo(t *testing.T) {
	t.Parallel()
	base := serveApps(t)
	s, _ := open(t, nil)
	do(t, s, Op{Kind: KindNavigate, URL: base + "/todo/"})
	snap := snapshot(t, s)
	wantLines(t, snap, `heading "todos"`)
	for _, title := range []string{"buy milk", "write the note", "ship it"} {
		field := refOf(t, snap, `- textbox "New todo"`)
		do(t, s, Op{Kind: KindFill, Ref: field, Text: title})
		do(t, s, Op{Kind: KindPress, Ref: field, Key: "Enter"})
		snap = snapshotUntil(t, s, `"`+title+`"`)
	}
	t.Logf("todo app (%d bytes), three todos: snapshot %d characters, %d refs\n%s", appSize(t, "todo"), snap.TotalChars, snap.Refs, snap.Text)
	wantLeft(t, snap, 3)
	wantLines(t, snap, `Mark all as complete" @e`, `link "All"`, `link "Active"`, `link "Completed"`)
	if strings.Contains(snap.Text, `"Clear completed"`) {
		t.Errorf("Clear completed shows with nothing completed:\n%s", snap.Text)
	}
	// The toggle-all's label names its checkbox and has no line of its
	// own, not even its chevron's text.
	if strings.Contains(snap.Text, `text "❯"`) || strings.Contains(snap.Text, `label "❯`) {
		t.Errorf("the toggle-all's label has a line:\n%s", snap.Text)
	}
	if strings.Contains(snap.Text, `button "Delete"`) {
		t.Errorf("a Delete button shows with the pointer over no todo:\n%s", snap.Text)
	}
	// The first unnamed checkbox after the toggle-all is the first todo's.
	var toggle string
	for line := range strings.SplitSeq(snap.Text, "\n") {
		if l := strings.TrimSpace(line); strings.HasPrefix(l, "- checkbox @") {
			toggle = refRE.FindString(l)
			break
		}
	}
	if toggle == "" {
		t.Fatalf("no todo checkbox in the snapshot:\n%s", snap.Text)
	}
	do(t, s, Op{Kind: KindClick, Ref: toggle})
	snap = snapshotUntil(t, s, `checkbox [checked]`)
	wantLeft(t, snap, 2)
	wantLines(t, snap, `button "Clear completed"`)
	// The pointer rests on the first todo: its Delete button, and only
	// its, shows (CSS :hover).
	if n := strings.Count(snap.Text, `button "Delete"`); n != 1 {
		t.Errorf("%d Delete buttons with the pointer over one todo:\n%s", n, snap.Text)
	}

	// Reloaded, the app shows what localStorage kept.
	do(t, s, Op{Kind: KindNavigate, URL: base + "/todo/index.html#/active"})
	snap = snapshotUntil(t, s, `"ship it"`)
	wantLeft(t, snap, 2)
	wantLines(t, snap, `"write the note"`)
	if strings.Contains(snap.Text, `"buy milk"`) {
		t.Errorf("the Active filter shows the completed todo:\n%s", snap.Text)
	}

	// The same app rendered into its light DOM (?light), for CSS
	// selectors: double-click edit (Enter saves, Escape cancels), the
	// toggle-all label, Clear completed.
	item := func(n int, part string) string { return "#todo-list li:nth-child(" + strconv.Itoa(n) + ") " + part }
	res, err := s.Interact(testCtx(t), []Action{
		{Action: ActGoto, URL: base + "/todo/?light#/"},
		{Action: ActExtractText, Selector: "#todo-count"},
		{Action: ActDblclick, Selector: item(2, "label.title")},
		{Action: ActFill, Selector: item(2, ".edit"), Text: "write the notes"},
		{Action: ActPress, Selector: item(2, ".edit"), Key: "Enter"},
		{Action: ActDblclick, Selector: item(3, "label.title")},
		{Action: ActFill, Selector: item(3, ".edit"), Text: "discard me"},
		{Action: ActPress, Selector: item(3, ".edit"), Key: "Escape"},
		{Action: ActExtractText, Selector: "#todo-list"},
		{Action: ActClick, Selector: "label[for=toggle-all]"},
		{Action: ActExtractText, Selector: "#todo-count"},
		{Action: ActClick, Selector: "#clear-completed"},
		{Action: ActWaitForSelector, Selector: "#main", State: "hidden"},
	}, true)
	if err != nil || res.FirstError() != nil {
		t.Fatalf("light DOM steps: %v %+v", err, res.FirstError())
	}
	text := func(i int) string { return *res.Results[i].Text }
	if text(1) != "2 items left" {
		t.Errorf("count %q, want 2 items left", text(1))
	}
	if l := text(8); !strings.Contains(l, "write the notes") || !strings.Contains(l, "ship it") || strings.Contains(l, "discard") {
		t.Errorf("after edits the list is %q", l)
	}
	if text(10) != "0 items left" {
		t.Errorf("after the toggle-all label the count is %q", text(10))
	}
}

// wantLeft fails unless the snapshot shows the count "N items left"
// (the number is a <strong> of its own, as in TodoMVC).
func wantLeft(t *testing.T, snap Snapshot, n int) {
	t.Helper()
	word := "items"
	if n == 1 {
		word = "item"
	}
	re := regexp.MustCompile(`- text "` + strconv.Itoa(n) + `"\n\s*- text "` + word + ` left"`)
	if !re.MatchString(snap.Text) {
		t.Errorf("the snapshot does not count %d %s left:\n%s", n, word, snap.Text)
	}
}

// TestAppStorage: the storage demo shows what each store holds once
// loaded; Remember writes both stores, a reload reads them back, Forget
// empties both.
func TestAppStorage(t *testing.T) {
	t.Parallel()
	base := serveApps(t)
	s, _ := open(t, nil)
	do(t, s, Op{Kind: KindNavigate, URL: base + "/storage/"})
	do(t, s, Op{Kind: KindWaitFor, Selector: "#stores.loaded"})
	snap := snapshot(t, s)
	t.Logf("storage app (%d bytes), loaded: snapshot %d characters, %d refs\n%s", appSize(t, "storage"), snap.TotalChars, snap.Refs, snap.Text)
	wantLines(t, snap, `"localStorage: (empty)"`, `"IndexedDB: (empty)"`)
	do(t, s, Op{Kind: KindFill, Ref: refOf(t, snap, `- textbox "Note"`), Text: "buy oat milk"})
	do(t, s, Op{Kind: KindClick, Ref: refOf(t, snap, `- button "Remember"`)})
	snapshotUntil(t, s, `"IndexedDB: buy oat milk"`)

	do(t, s, Op{Kind: KindNavigate, URL: base + "/storage/"})
	do(t, s, Op{Kind: KindWaitFor, Selector: "#stores.loaded"})
	snap = snapshot(t, s)
	wantLines(t, snap, `"localStorage: buy oat milk"`, `"IndexedDB: buy oat milk"`)
	do(t, s, Op{Kind: KindClick, Ref: refOf(t, snap, `- button "Forget"`)})
	snap = snapshotUntil(t, s, `"IndexedDB: (empty)"`)
	wantLines(t, snap, `"localStorage: (empty)"`, `"Forgotten."`)
}

// TestAppForm: the sign-up form names a bad email in an error message the
// field is described by; fixed, the form shows its success state.
func TestAppForm(t *testing.T) {
	t.Parallel()
	base := serveApps(t)
	s, _ := open(t, nil)
	do(t, s, Op{Kind: KindNavigate, URL: base + "/form/"})
	snap := snapshot(t, s)
	t.Logf("form app (%d bytes): snapshot %d characters, %d refs\n%s", appSize(t, "form"), snap.TotalChars, snap.Refs, snap.Text)
	email := refOf(t, snap, `- textbox "Email"`)
	do(t, s, Op{Kind: KindFill, Ref: refOf(t, snap, `- textbox "Full name"`), Text: "Ada Lovelace"})
	do(t, s, Op{Kind: KindFill, Ref: email, Text: "ada-at-example"})
	do(t, s, Op{Kind: KindFill, Ref: refOf(t, snap, `- textbox "Password"`), Text: "analytical"})
	do(t, s, Op{Kind: KindFill, Ref: refOf(t, snap, `- textbox "Confirm password"`), Text: "analytical"})
	do(t, s, Op{Kind: KindClick, Ref: refOf(t, snap, `- checkbox "I accept the terms"`)})
	do(t, s, Op{Kind: KindClick, Ref: refOf(t, snap, `- button "Sign up"`)})
	snap = snapshotUntil(t, s, `"Enter an email address like name@example.com."`)
	t.Logf("form with an error:\n%s", snap.Text)
	wantLines(t, snap, `"1 field needs attention."`)

	do(t, s, Op{Kind: KindFill, Ref: email, Text: "ada@example.com"})
	do(t, s, Op{Kind: KindClick, Ref: refOf(t, snap, `- button "Sign up"`)})
	snap = snapshotUntil(t, s, `heading "Welcome aboard"`)
	wantLines(t, snap, `"Signed up as ada@example.com."`)
}
