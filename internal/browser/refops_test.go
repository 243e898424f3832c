package browser

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/airlockhq/airlock"
	"testing"
)

// selectPage has a <select> whose options' values differ from their
// labels, and prints the chosen value on every change.
const selectPage = `<!doctype html><title>pick</title>
<label>Fruit <select id="f">
  <option value="a">Apple</option>
  <option value="b">Banana</option>
  <option value="c">Cherry</option>
</select></label>
<p id="out">none</p>
<script>
document.getElementById("f").addEventListener("change", (e) => {
  document.getElementById("out").textContent = "chose " + e.target.value;
});
</script>`

// TestClickOptionRefSelects: a click on an option's ref selects it in its
// <select> (and fires change), as a person choosing it from the list does.
func TestClickOptionRefSelects(t *testing.T) {
	t.Parallel()
	site := serve(t, func(w http.ResponseWriter, r *http.Request) { html(w, selectPage) })
	s, _ := open(t, nil)
	do(t, s, Op{Kind: KindNavigate, URL: site.URL})
	snap := snapshot(t, s)
	r := do(t, s, Op{Kind: KindClick, Ref: refOf(t, snap, `- option "Cherry"`)})
	if r.Page == nil || r.Snapshot == nil || !strings.Contains(r.Snapshot.Text, `"chose c"`) {
		t.Fatalf("after clicking the option: %+v\n%v", r.Page, r.Snapshot)
	}
}

// TestSelectByValueOrLabel: select takes an option's value, or else its
// visible label; neither is no_option.
func TestSelectByValueOrLabel(t *testing.T) {
	t.Parallel()
	site := serve(t, func(w http.ResponseWriter, r *http.Request) { html(w, selectPage) })
	s, _ := open(t, nil)
	do(t, s, Op{Kind: KindNavigate, URL: site.URL})
	sel := refOf(t, snapshot(t, s), `- combobox "Fruit"`)
	r := do(t, s, Op{Kind: KindSelect, Ref: sel, Value: "Banana"})
	if !strings.Contains(r.Snapshot.Text, `"chose b"`) {
		t.Errorf("select by label Banana:\n%s", r.Snapshot.Text)
	}
	r = do(t, s, Op{Kind: KindSelect, Ref: sel, Value: "c"})
	if !strings.Contains(r.Snapshot.Text, `"chose c"`) {
		t.Errorf("select by value c:\n%s", r.Snapshot.Text)
	}
	_, err := s.Do(testCtx(t), Op{Kind: KindSelect, Ref: sel, Value: "Durian"})
	wantCode(t, err, airlock.CodeInvalid, "no_option")
}

// todoRef returns the ref on the first snapshot line that names title
// (a todo's label).
func todoRef(t *testing.T, snap Snapshot, title string) string {
	t.Helper()
	for line := range strings.SplitSeq(snap.Text, "\n") {
		if strings.Contains(line, `"`+title+`"`) {
			if r := refRE.FindString(line); r != "" {
				return r
			}
		}
	}
	t.Fatalf("no ref names %q:\n%s", title, snap.Text)
	return ""
}

// TestRefActionsTodoApp drives the web-components todo app by refs only,
// each step on the snapshot the previous action returned: double-click a
// todo's label to edit it (Enter saves); hover a todo so its Delete
// button shows, and click it; check the toggle-all through its checkbox
// ref (the 1-px input under its label: the click goes through the label)
// and uncheck it; check one todo's own checkbox.
func TestRefActionsTodoApp(t *testing.T) {
	t.Parallel()
	base := serveApps(t)
	s, _ := open(t, nil)
	r := do(t, s, Op{Kind: KindNavigate, URL: base + "/todo/"})
	for _, title := range []string{"buy milk", "write the note", "ship it"} {
		field := refOf(t, *r.Snapshot, `- textbox "New todo"`)
		do(t, s, Op{Kind: KindFill, Ref: field, Text: title, Snapshot: new(false)})
		r = do(t, s, Op{Kind: KindPress, Ref: field, Key: "Enter"})
	}
	wantLeft(t, *r.Snapshot, 3)
	t.Logf("three todos:\n%s", r.Snapshot.Text)

	// Double-click edit.
	r = do(t, s, Op{Kind: KindDblclick, Ref: todoRef(t, *r.Snapshot, "write the note")})
	edit := refOf(t, *r.Snapshot, `- textbox "Edit todo"`)
	do(t, s, Op{Kind: KindFill, Ref: edit, Text: "write the notes", Snapshot: new(false)})
	r = do(t, s, Op{Kind: KindPress, Ref: edit, Key: "Enter"})
	wantLines(t, *r.Snapshot, `"write the notes"`)
	if strings.Contains(r.Snapshot.Text, `"Edit todo"`) {
		t.Errorf("the edit field is still open after Enter:\n%s", r.Snapshot.Text)
	}

	// Hover-only delete: move away (hover the heading), then hover "ship it".
	r = do(t, s, Op{Kind: KindHover, Ref: refOf(t, *r.Snapshot, `- heading "todos"`)})
	if strings.Contains(r.Snapshot.Text, `button "Delete"`) {
		t.Errorf("a Delete button shows with the pointer on the heading:\n%s", r.Snapshot.Text)
	}
	r = do(t, s, Op{Kind: KindHover, Ref: todoRef(t, *r.Snapshot, "ship it")})
	if n := strings.Count(r.Snapshot.Text, `button "Delete"`); n != 1 {
		t.Fatalf("%d Delete buttons after hovering one todo:\n%s", n, r.Snapshot.Text)
	}
	r = do(t, s, Op{Kind: KindClick, Ref: refOf(t, *r.Snapshot, `- button "Delete"`)})
	if strings.Contains(r.Snapshot.Text, `"ship it"`) {
		t.Errorf("ship it survives its Delete:\n%s", r.Snapshot.Text)
	}
	wantLeft(t, *r.Snapshot, 2)

	// Toggle all, through the label that covers the 1-px checkbox.
	all := refOf(t, *r.Snapshot, `- checkbox "❯ Mark all as complete"`)
	r = do(t, s, Op{Kind: KindCheck, Ref: all})
	wantLeft(t, *r.Snapshot, 0)
	wantLines(t, *r.Snapshot, `Mark all as complete" [checked]`, `button "Clear completed"`)
	// Checking what is checked changes nothing.
	r = do(t, s, Op{Kind: KindCheck, Ref: all})
	wantLeft(t, *r.Snapshot, 0)
	r = do(t, s, Op{Kind: KindUncheck, Ref: all})
	wantLeft(t, *r.Snapshot, 2)

	// One todo's own checkbox (it receives the click itself).
	r = do(t, s, Op{Kind: KindCheck, Ref: refOf(t, *r.Snapshot, `- checkbox @`)})
	wantLeft(t, *r.Snapshot, 1)

	// Not a checkbox: refused, typed.
	_, err := s.Do(testCtx(t), Op{Kind: KindCheck, Ref: refOf(t, *r.Snapshot, `- link "All"`)})
	wantCode(t, err, airlock.CodeInvalid, "not_checkable")
}

// switchPage has a checkbox hidden by display: none behind its <label>
// (a styled switch), a disabled checkbox, and a hidden button.
const switchPage = `<!doctype html><title>switches</title>
<style>#dark { display: none; } label.sw { display: inline-block; padding: 10px; border: 1px solid; }</style>
<input type="checkbox" id="dark"><label class="sw" for="dark">Dark mode</label>
<label><input type="checkbox" id="off" disabled> Frozen</label>
<button onclick="this.style.display = 'none'">Hide me</button>
<p id="out">light</p>
<script>
document.getElementById("dark").addEventListener("change", (e) => {
  document.getElementById("out").textContent = e.target.checked ? "dark" : "light";
});
</script>`

// TestCheckHiddenInputThroughLabel: a checkbox with no box (display:
// none) is checked through its label; a disabled one is refused as
// disabled; hovering an element with no box is not_visible, never an
// internal error.
func TestCheckHiddenInputThroughLabel(t *testing.T) {
	t.Parallel()
	site := serve(t, func(w http.ResponseWriter, r *http.Request) { html(w, switchPage) })
	s, _ := open(t, nil)
	r := do(t, s, Op{Kind: KindNavigate, URL: site.URL})
	t.Logf("switches:\n%s", r.Snapshot.Text)
	// The input has no box, so no ref: its label has one, and check takes it.
	dark := refOf(t, *r.Snapshot, `- label "Dark mode"`)
	r = do(t, s, Op{Kind: KindCheck, Ref: dark})
	wantLines(t, *r.Snapshot, `"dark"`)
	r = do(t, s, Op{Kind: KindUncheck, Ref: dark})
	wantLines(t, *r.Snapshot, `"light"`)
	_, err := s.Do(testCtx(t), Op{Kind: KindCheck, Ref: refOf(t, *r.Snapshot, `- checkbox "Frozen"`)})
	wantCode(t, err, airlock.CodeInvalid, "disabled")
	hide := refOf(t, *r.Snapshot, `- button "Hide me"`)
	_, err = s.Do(testCtx(t), Op{Kind: KindCheck, Ref: hide})
	wantCode(t, err, airlock.CodeInvalid, "not_checkable")
	do(t, s, Op{Kind: KindClick, Ref: hide, Snapshot: new(false)})
	for _, kind := range []string{KindHover, KindDblclick} {
		_, err = s.Do(testCtx(t), Op{Kind: kind, Ref: hide})
		wantCode(t, err, airlock.CodeInvalid, "not_visible")
	}
}

// BenchmarkRefOps measures hover, dblclick and check/uncheck (alternating)
// as agents run them: each waits for the page to settle; with and without
// the fresh snapshot.
func BenchmarkRefOps(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte(`<title>Ref ops</title><style>#box { display: none; } .sw { padding: 8px; }</style>
<input type="checkbox" id="box"><label class="sw" for="box">Switch</label>
<button ondblclick="this.textContent = 'twice'">Twice</button><p>text</p>`))
	}))
	b.Cleanup(srv.Close)
	s := benchSession(b)
	ctx := context.Background()
	if _, err := s.Do(ctx, Op{Kind: KindNavigate, URL: srv.URL + "/"}); err != nil {
		b.Fatal(err)
	}
	snap, err := s.Snapshot(ctx, SnapshotOptions{})
	if err != nil {
		b.Fatal(err)
	}
	ref := func(prefix string) string {
		for line := range strings.SplitSeq(snap.Text, "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), prefix) {
				return refRE.FindString(line)
			}
		}
		b.Fatalf("no %s in %s", prefix, snap.Text)
		return ""
	}
	label, button := ref(`- label "Switch"`), ref(`- button "Twice"`)
	for _, withSnap := range []bool{true, false} {
		name := "settled"
		if !withSnap {
			name = "settled-nosnapshot"
		}
		op := func(b *testing.B, o Op) {
			o.Snapshot = new(withSnap)
			if _, err := s.Do(ctx, o); err != nil {
				b.Fatal(err)
			}
		}
		b.Run(name+"/hover", func(b *testing.B) {
			for b.Loop() {
				op(b, Op{Kind: KindHover, Ref: button})
			}
		})
		b.Run(name+"/dblclick", func(b *testing.B) {
			for b.Loop() {
				op(b, Op{Kind: KindDblclick, Ref: button})
			}
		})
		b.Run(name+"/check", func(b *testing.B) {
			on := true
			for b.Loop() {
				kind := KindCheck
				if !on {
					kind = KindUncheck
				}
				op(b, Op{Kind: kind, Ref: label})
				on = !on
			}
		})
	}
}
