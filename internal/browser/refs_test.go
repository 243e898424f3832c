package browser

import (
	"net/http"
	"strings"
	"testing"
)

// TestRefSpellings: refs are accepted as "@e3" and "e3" (Playwright's
// spelling); a string that is no ref at all is bad_ref, not stale_ref,
// whose advice (take a new snapshot) would loop an agent.
func TestRefSpellings(t *testing.T) {
	t.Parallel()
	site := serve(t, func(w http.ResponseWriter, r *http.Request) {
		html(w, `<title>Counter</title>
<button onclick="document.getElementById('n').textContent = 'count ' + (++window.c)">Add</button>
<p id="n">count 0</p><script>window.c = 0</script>`)
	})
	s, _ := open(t, nil)
	ctx := testCtx(t)
	if err := s.Navigate(ctx, site.URL+"/", true); err != nil {
		t.Fatalf("Navigate: %v", err)
	}
	add := refOf(t, snapshot(t, s), `- button "Add"`)
	if err := s.Click(ctx, strings.TrimPrefix(add, "@")); err != nil {
		t.Fatalf("Click(%q): %v", strings.TrimPrefix(add, "@"), err)
	}
	if err := s.Click(ctx, add); err != nil {
		t.Fatalf("Click(%q): %v", add, err)
	}
	if snap := snapshot(t, s); !strings.Contains(snap.Text, `"count 2"`) {
		t.Errorf("two clicks by both spellings:\n%s", snap.Text)
	}
	for _, bad := range []string{"", "button", "@x3", "e", "e-1", "#e3", "e3 ", "@@e3"} {
		wantCode(t, s.Click(ctx, bad), "invalid", "bad_ref")
	}
	wantCode(t, s.Click(ctx, "e999999"), "invalid", "stale_ref")
}

// TestSnapshotSkipsListMarkers: list bullets and numbers are decoration:
// no line and no ref.
func TestSnapshotSkipsListMarkers(t *testing.T) {
	t.Parallel()
	site := serve(t, func(w http.ResponseWriter, r *http.Request) {
		html(w, `<title>Lists</title><ul><li>Alpha</li><li>Beta</li></ul><ol><li>Gamma</li></ol>
<img src="data:image/gif;base64,R0lGODlhAQABAAAAACw=" alt="" role="presentation">`)
	})
	s, _ := open(t, nil)
	if err := s.Navigate(testCtx(t), site.URL+"/", true); err != nil {
		t.Fatalf("Navigate: %v", err)
	}
	snap := snapshot(t, s)
	if strings.Contains(snap.Text, "ListMarker") || strings.Contains(snap.Text, "•") || strings.Contains(snap.Text, `"1. "`) {
		t.Errorf("list markers in the snapshot:\n%s", snap.Text)
	}
	for _, want := range []string{"Alpha", "Beta", "Gamma"} {
		if !strings.Contains(snap.Text, want) {
			t.Errorf("%s missing from the snapshot:\n%s", want, snap.Text)
		}
	}
}
