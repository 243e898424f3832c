package browser

import (
	"context"
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
	site := serve(t, func(w http.ResponseWriter, r *http.Request) {
		html(w, `<title>Press</title><input aria-label="Code" id="code">
<button onclick="document.getElementById('code').disabled = true; this.textContent = 'Clicked ' + (++n)">Lock</button>
<script>let n = 0;</script>`)
	})
	s, _ := open(t, nil)
	r := do(t, s, Op{Kind: KindNavigate, URL: site.URL + "/"})
	code := refOf(t, *r.Snapshot, `- textbox "Code"`)
	r = do(t, s, Op{Kind: KindClick, Ref: refOf(t, *r.Snapshot, `- button "Lock"`)})
	if !strings.Contains(r.Snapshot.Text, "Clicked 1") {
		t.Fatalf("after the click:\n%s", r.Snapshot.Text)
	}
	ctx, cancel := context.WithTimeout(testCtx(t), 1500*time.Millisecond) // the wait for the field, shorter
	defer cancel()
	_, err := s.Do(ctx, Op{Kind: KindPress, Ref: code, Key: "Enter"})
	if airlock.CodeOf(err) != airlock.CodeInvalid || !strings.Contains(airlock.PublicMessageOf(err), "disabled") {
		t.Errorf("press on a disabled field: %v, want invalid/not_actionable (disabled)", err)
	}
	if snap := snapshot(t, s); !strings.Contains(snap.Text, "Clicked 1") {
		t.Errorf("the key went to another element:\n%s", snap.Text)
	}
}
