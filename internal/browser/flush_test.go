package browser

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"
)

// idbPage writes a record to IndexedDB when its button is clicked (after
// an await, as real apps do) and shows what the store holds on load.
const idbPage = `<title>Storage</title>
<button id="save" onclick="save()">Remember</button>
<p id="out">loading</p>
<script>
function db() {
  return new Promise((res, rej) => {
    const r = indexedDB.open("notes", 1);
    r.onupgradeneeded = () => r.result.createObjectStore("kv");
    r.onsuccess = () => res(r.result);
    r.onerror = () => rej(r.error);
  });
}
async function save() {
  const d = await db();
  const tx = d.transaction("kv", "readwrite");
  tx.objectStore("kv").put("x".repeat(200000) + "remembered", "note");
}
db().then(d => {
  const g = d.transaction("kv").objectStore("kv").get("note");
  g.onsuccess = () => {
    const out = document.getElementById("out");
    out.textContent = g.result ? "stored: " + g.result.slice(-10) : "empty";
    out.className = "done";
  };
});
</script>`

// TestCloseFlushesIndexedDB: a session closed right after a click that
// starts an IndexedDB write keeps the write (Close waits for the pages'
// transactions to commit before the browser exits).
func TestCloseFlushesIndexedDB(t *testing.T) {
	t.Parallel()
	site := serve(t, func(w http.ResponseWriter, r *http.Request) { html(w, idbPage) })
	profile := t.TempDir()
	for round := range 3 {
		s, _ := open(t, func(o *Options) { o.ProfileDir = profile })
		ctx := testCtx(t)
		if err := s.Navigate(ctx, site.URL+"/", true); err != nil {
			t.Fatalf("Navigate: %v", err)
		}
		if err := s.WaitFor(ctx, "#out.done", "", 10000); err != nil {
			t.Fatalf("the page did not read its store: %v", err)
		}
		snap := snapshot(t, s)
		if round > 0 {
			if !strings.Contains(snap.Text, "stored: remembered") {
				t.Fatalf("round %d: the write of the previous session was lost:\n%s", round, snap.Text)
			}
			closeNow(t, s)
			continue
		}
		if !strings.Contains(snap.Text, "empty") {
			t.Fatalf("a new profile's store is not empty:\n%s", snap.Text)
		}
		if err := s.Click(ctx, refOf(t, snap, `- button "Remember"`)); err != nil {
			t.Fatalf("Click: %v", err)
		}
		closeNow(t, s)
	}
}

func closeNow(t *testing.T, s *Session) {
	t.Helper()
	if err := s.Close(context.Background()); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// TestCloseFlushBounded: a page that never lets the flush finish cannot
// hold Close past Options.FlushTimeout: Close waits that long (the page
// really held the flush) and then ends, long before its context would
// (the hang guard is generous).
func TestCloseFlushBounded(t *testing.T) {
	t.Parallel()
	const flush = 300 * time.Millisecond
	site := serve(t, func(w http.ResponseWriter, r *http.Request) {
		html(w, `<title>Stuck</title><script>indexedDB.databases = () => new Promise(() => {});</script>`)
	})
	s, _ := open(t, func(o *Options) { o.FlushTimeout = flush })
	if err := s.Navigate(testCtx(t), site.URL+"/", true); err != nil {
		t.Fatalf("Navigate: %v", err)
	}
	done := make(chan error, 1)
	ctx := testCtx(t)
	start := time.Now()
	go func() { done <- s.Close(ctx) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Close: %v", err)
		}
		if waited := time.Since(start); waited < flush {
			t.Errorf("Close took %v, less than the flush timeout %v: the page did not hold the flush", waited, flush)
		}
	case <-time.After(testTimeout / 2):
		t.Fatal("Close waited on a page that never lets its storage flush")
	}
}
