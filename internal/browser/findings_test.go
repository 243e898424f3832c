package browser

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
)

// Press by ref checks its element as the other by-ref actions do: a key
// for a field that was disabled since the snapshot is not_actionable, and
// never typed into whatever element has the focus instead (here the
// button that disabled the field, which Enter would click again).
func TestPressByRefIsActionable(t *testing.T) {
	t.Parallel()
	site := serve(t, func(w http.ResponseWriter, r *http.Request) {
		html(w, `<title>Press</title><input aria-label="Code" id="code">
<button onclick="document.getElementById('code').disabled = true; this.textContent = 'Clicked ' + (++n)">Lock</button>
<script>let n = 0;</script>`)
	})
	// The bound covers the click that must pass its checks, too: 2 s
	// leaves it room on a loaded machine.
	const bound = 2 * time.Second
	s, _ := open(t, func(o *Options) { o.ActionTimeout = bound })
	r := do(t, s, Op{Kind: KindNavigate, URL: site.URL + "/"})
	code := refOf(t, *r.Snapshot, `- textbox "Code"`)
	r = do(t, s, Op{Kind: KindClick, Ref: refOf(t, *r.Snapshot, `- button "Lock"`)})
	if !strings.Contains(r.Snapshot.Text, "Clicked 1") {
		t.Fatalf("after the click:\n%s", r.Snapshot.Text)
	}
	// The checks wait (Options.ActionTimeout) for the field to be enabled.
	start := time.Now()
	_, err := s.Do(testCtx(t), Op{Kind: KindPress, Ref: code, Key: "Enter"})
	// It gave up at the configured bound (less the last poll), not sooner.
	if waited := time.Since(start); waited < bound-actionPoll || !strings.Contains(fmt.Sprint(err), "checked for 2000 ms") {
		t.Errorf("press gave up after %v (%v), want at its action timeout (%v)", waited, err, bound)
	}
	if airlock.CodeOf(err) != airlock.CodeInvalid || !strings.Contains(airlock.PublicMessageOf(err), "disabled") {
		t.Errorf("press on a disabled field: %v, want invalid/not_actionable (disabled)", err)
	}
	if snap := snapshot(t, s); !strings.Contains(snap.Text, "Clicked 1") {
		t.Errorf("the key went to another element:\n%s", snap.Text)
	}
}

// Found by the agent task suite: a <label for> of a control that the
// outline shows, named by that label, printed a second line (label "Full
// name" @e1 over textbox "Full name" @e2) that costs characters and offers
// a ref that does nothing the control's does not; and the 1-px toggle-all
// of the todo app left its label's icon as a stray text line. Such labels
// get no line; a label whose control the outline does not show (no box)
// keeps its line and ref, the only handle on that control.
func TestSnapshotLabelsOfShownControls(t *testing.T) {
	t.Parallel()
	site := serve(t, func(w http.ResponseWriter, r *http.Request) {
		html(w, `<title>Labels</title><label for="name">Full name</label><input id="name">
<input type="checkbox" id="dark" style="display: none"><label for="dark">Dark mode</label>
<style>.chevron { font-size: 0; } .chevron::before { content: "v"; font-size: 16px; }</style>
<input type="checkbox" id="all" style="position: absolute; width: 1px; height: 1px; opacity: 0"><label class="chevron" for="all">Mark all</label>
<label>Title only</label>`)
	})
	s, _ := open(t, nil)
	snap := *do(t, s, Op{Kind: KindNavigate, URL: site.URL + "/"}).Snapshot
	wantLines(t, snap, `- textbox "Full name" @`, `- label "Dark mode" @`, `- checkbox "vMark all" @`, `- label "Title only" @`)
	for _, not := range []string{`label "Full name"`, `label "vMark all"`, `text "v"`} {
		if strings.Contains(snap.Text, not) {
			t.Errorf("%s in the outline:\n%s", not, snap.Text)
		}
	}
}

// A click whose script fetches first and navigates when the answer comes
// (a login that posts by script, then redirects) starts its navigation
// well after the DOM went quiet: the reply waits for the requests the
// action started (bounded, as the settling is) and so names the page the
// click led to, not the page before it.
func TestClickThatNavigatesAfterAFetch(t *testing.T) {
	t.Parallel()
	site := serve(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/login":
			time.Sleep(300 * time.Millisecond)
			w.Write([]byte("ok"))
		case "/home":
			html(w, `<title>Home</title><h1>Signed in</h1>`)
		default:
			html(w, `<title>Sign in</title><button onclick="fetch('/login', {method: 'POST'}).then(() => { location.href = '/home'; })">Sign in</button>`)
		}
	})
	s, _ := open(t, nil)
	r := do(t, s, Op{Kind: KindNavigate, URL: site.URL + "/"})
	r = do(t, s, Op{Kind: KindClick, Ref: refOf(t, *r.Snapshot, `- button "Sign in"`)})
	if r.Page == nil || r.Page.URL != site.URL+"/home" || r.Page.Title != "Home" || !r.Page.Navigated || !strings.Contains(r.Snapshot.Text, "Signed in") {
		t.Errorf("click: page %+v, want %s/home (Home), navigated, with its snapshot", r.Page, site.URL)
	}
}
