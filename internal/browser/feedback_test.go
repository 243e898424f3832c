package browser

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// feedbackSite serves a page with a link to /next, a form that submits to
// /next, and /next itself (slow to answer, so that a reply that does not
// wait for the navigation reports the page before it).
func feedbackSite(t *testing.T) string {
	site := serve(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/missing":
			w.WriteHeader(http.StatusNotFound)
			html(w, `<title>Gone</title><p>not here</p>`)
		case "/next":
			time.Sleep(150 * time.Millisecond)
			html(w, `<title>Next page</title><h1>Arrived</h1><p>q=`+r.URL.Query().Get("q")+`</p>`)
		default:
			html(w, `<title>Start page</title><h1>Start</h1><a href="/next">Go next</a>
<form action="/next"><label>Q <input name="q"></label></form>
<a href="/missing">Broken</a> <a href="javascript:void(0)">Nothing</a> <a href="#part">Part</a> <a href="/next" target="_blank">Elsewhere</a>
<button onclick="setTimeout(() => { const p = document.createElement('p'); p.textContent = 'Late news'; document.body.append(p); }, 40)">Later</button>
<button onclick="history.pushState({}, '', '/pushed'); document.title = 'Pushed'">Push</button>`)
		}
	})
	return site.URL
}

// Issue #15, item 2: after a click on a link (or Enter in a form), the
// reply, get_state and read report the page the click led to.
func TestActionsReportTheirConsequences(t *testing.T) {
	t.Parallel()
	base := feedbackSite(t)
	s, _ := open(t, nil)
	for _, how := range []string{"click", "press"} {
		t.Run(how, func(t *testing.T) {
			do(t, s, Op{Kind: KindNavigate, URL: base + "/"})
			snap := snapshot(t, s)
			var op Op
			if how == "click" {
				op = Op{Kind: KindClick, Ref: refOf(t, snap, `- link "Go next"`)}
			} else {
				q := refOf(t, snap, `- textbox "Q"`)
				do(t, s, Op{Kind: KindFill, Ref: q, Text: "héllo"})
				op = Op{Kind: KindPress, Ref: q, Key: "Enter"}
			}
			r := do(t, s, op)
			st := do(t, s, Op{Kind: KindGetState}).State
			if st == nil || !strings.HasPrefix(st.URL, base+"/next") || st.Title != "Next page" {
				t.Errorf("get_state right after %s: %+v, want %s/next, Next page", how, st, base)
			}
			rd := do(t, s, Op{Kind: KindRead}).Read
			if !strings.HasPrefix(rd.URL, base+"/next") || rd.Title != "Next page" || !strings.Contains(rd.Markdown, "Arrived") {
				t.Errorf("read right after %s: url %q title %q markdown %q", how, rd.URL, rd.Title, rd.Markdown)
			}
			if r.Page == nil || !strings.HasPrefix(r.Page.URL, base+"/next") || r.Page.Title != "Next page" ||
				!r.Page.Navigated || r.Page.Status != http.StatusOK || r.Page.Loading {
				t.Errorf("%s reply: page %+v, want %s/next, Next page, navigated, status 200", how, r.Page, base)
			}
			if r.Snapshot == nil || !strings.Contains(r.Snapshot.Text, `heading "Arrived"`) {
				t.Errorf("%s reply: snapshot %+v lacks the new page's heading", how, r.Snapshot)
			}
		})
	}

	t.Run("status, dom, same-document, new tab, opt-out", func(t *testing.T) {
		do(t, s, Op{Kind: KindNavigate, URL: base + "/"})
		snap := snapshot(t, s)
		r := do(t, s, Op{Kind: KindClick, Ref: refOf(t, snap, `- link "Broken"`), Snapshot: new(false)})
		if r.Page == nil || r.Page.URL != base+"/missing" || r.Page.Status != http.StatusNotFound || !r.Page.Navigated {
			t.Errorf("click on a broken link: page %+v, want %s/missing with status 404", r.Page, base)
		}
		if r.Snapshot != nil {
			t.Errorf("snapshot: false still returned a snapshot")
		}
		r = do(t, s, Op{Kind: KindNavigate, URL: base + "/"})
		if r.Page == nil || r.Page.Status != http.StatusOK || r.Snapshot == nil || !strings.Contains(r.Snapshot.Text, `button "Later"`) {
			t.Fatalf("navigate reply: page %+v snapshot %+v", r.Page, r.Snapshot)
		}
		snap = *r.Snapshot
		r = do(t, s, Op{Kind: KindClick, Ref: refOf(t, snap, `- button "Later"`)})
		if r.Page == nil || r.Page.Navigated || r.Page.URL != base+"/" || r.Snapshot == nil || !strings.Contains(r.Snapshot.Text, "Late news") {
			t.Errorf("click that changes the DOM: page %+v snapshot %+v, want the late paragraph", r.Page, r.Snapshot)
		}
		for _, name := range []string{"Nothing", "Part"} { // a no-op link, then a fragment
			r = do(t, s, Op{Kind: KindClick, Ref: refOf(t, snap, `- link "`+name+`"`), Snapshot: new(false)})
		}
		if r.Page == nil || r.Page.Navigated || r.Page.Loading || r.Page.URL != base+"/#part" {
			t.Errorf("click on a fragment link: page %+v, want %s/#part", r.Page, base)
		}
		r = do(t, s, Op{Kind: KindClick, Ref: refOf(t, snap, `- button "Push"`)})
		if r.Page == nil || r.Page.Navigated || r.Page.URL != base+"/pushed" || r.Page.Title != "Pushed" {
			t.Errorf("click that pushes a history entry: page %+v, want %s/pushed, Pushed", r.Page, base)
		}
		r = do(t, s, Op{Kind: KindClick, Ref: refOf(t, snap, `- link "Elsewhere"`)})
		if r.Page == nil || r.Page.Navigated || len(r.Page.NewTabs) != 1 {
			t.Errorf("click on a target=_blank link: page %+v, want one new tab and no navigation", r.Page)
		}
		r = do(t, s, Op{Kind: KindBack})
		if r.Page == nil || r.Page.URL != base+"/#part" || r.State == nil || r.State.URL != base+"/#part" {
			t.Errorf("back: page %+v state %+v, want %s/#part", r.Page, r.State, base)
		}
	})
}

// Issue #15, item 11: snapshot sizes and offsets count characters (Unicode
// code points), not UTF-8 bytes.
func TestSnapshotCountsCharacters(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString(`<title>Zeichen</title>`)
	for i := range 40 {
		fmt.Fprintf(&b, `<button>Größe ✓ 日本語 %d 😀</button>`, i)
	}
	site := serve(t, func(w http.ResponseWriter, r *http.Request) { html(w, b.String()) })
	s, _ := open(t, nil)
	do(t, s, Op{Kind: KindNavigate, URL: site.URL + "/", Snapshot: new(false)})
	const budget = 300
	var (
		got   strings.Builder
		whole string // the outline the pages cut (the first page's)
		total int
	)
	offset := 0
	for range 100 {
		p := *do(t, s, Op{Kind: KindSnapshot, MaxChars: budget, Offset: offset}).Snapshot
		if offset == 0 {
			whole, total = s.last.text, utf8.RuneCountInString(s.last.text)
			if total == len(whole) {
				t.Fatalf("the outline is ASCII only: the test needs characters of several bytes")
			}
		}
		if n := utf8.RuneCountInString(p.Text); n > budget {
			t.Fatalf("page at offset %d: %d characters, max_chars %d", offset, n, budget)
		}
		if p.TotalChars != total {
			t.Fatalf("page at offset %d: total_chars %d, want %d characters (%d bytes)", offset, p.TotalChars, total, len(whole))
		}
		text := p.Text
		if p.Truncated {
			text = text[:strings.LastIndex(text, "[truncated: ")]
			want := fmt.Sprintf("[truncated: %d more characters; snapshot with offset %d continues]", total-p.NextOffset, p.NextOffset)
			if !strings.Contains(p.Text, want) {
				t.Fatalf("marker %q, want %q", p.Text[len(text):], want)
			}
		}
		got.WriteString(text)
		if !p.Truncated {
			break
		}
		if p.NextOffset != offset+utf8.RuneCountInString(text) {
			t.Fatalf("next_offset %d, want %d (characters)", p.NextOffset, offset+utf8.RuneCountInString(text))
		}
		offset = p.NextOffset
	}
	if got.String() != whole {
		t.Errorf("the pages do not add up to the whole outline:\n%s\n---\n%s", got.String(), whole)
	}
}

// A click on a link the policy refuses, and a page whose image it refuses:
// the replies name the refusal, not the page before or a blank success.
func TestActionsReportRefusals(t *testing.T) {
	t.Parallel()
	other := serve(t, func(w http.ResponseWriter, r *http.Request) { html(w, `<title>Forbidden land</title>`) })
	site := serve(t, func(w http.ResponseWriter, r *http.Request) {
		html(w, `<title>Start</title><a href="`+other.URL+`/x">Off limits</a><img src="`+other.URL+`/pixel.png" alt="pixel">`)
	})
	s, _ := open(t, func(o *Options) { o.Policy = Policy{DefaultAction: ActionAllow, DeniedOrigins: []string{other.URL}} })
	r := do(t, s, Op{Kind: KindNavigate, URL: site.URL + "/"})
	if r.Page == nil || len(r.Page.Refused) != 1 || r.Page.Refused[0].URL != other.URL+"/pixel.png" || r.Page.Refused[0].ResourceType != "Image" {
		t.Errorf("navigate: page %+v, want the refused image", r.Page)
	}
	r = do(t, s, Op{Kind: KindClick, Ref: refOf(t, *r.Snapshot, `- link "Off limits"`), Snapshot: new(false)})
	if r.Page == nil || r.Page.URL != other.URL+"/x" || !strings.Contains(r.Page.Error, "ERR_BLOCKED_BY_CLIENT") ||
		len(r.Page.Refused) != 1 || r.Page.Refused[0].ResourceType != "Document" {
		t.Errorf("click on a refused link: page %+v, want the error page of %s/x and its refusal", r.Page, other.URL)
	}
}

// A page whose script keeps its renderer busy after a click: the click
// succeeded and its reply says where the tab is; only the snapshot is
// missing, and says why.
func TestActionReplyWithBusyRenderer(t *testing.T) {
	t.Parallel()
	site := serve(t, func(w http.ResponseWriter, r *http.Request) {
		html(w, `<title>Busy</title><button onclick="setTimeout(() => { for (;;) {} }, 20)">Hang</button>`)
	})
	// The snapshot can never answer: its bound (and the flush's at Close)
	// is short so that the test does not wait out the defaults.
	s, _ := open(t, func(o *Options) { o.ReplySnapshotTimeout, o.FlushTimeout = time.Second, 300*time.Millisecond })
	r := do(t, s, Op{Kind: KindNavigate, URL: site.URL + "/"})
	r, err := s.Do(testCtx(t), Op{Kind: KindClick, Ref: refOf(t, *r.Snapshot, `- button "Hang"`)})
	if err != nil {
		t.Fatalf("click: %v", err)
	}
	if r.Page == nil || r.Page.URL != site.URL+"/" || r.Page.Title != "Busy" || r.Snapshot != nil ||
		!strings.Contains(r.Page.SnapshotError, "deadline exceeded") {
		t.Errorf("click: page %+v snapshot %v, want the page and the snapshot's timeout", r.Page, r.Snapshot != nil)
	}
}

// A navigate that does not wait for its load, to a page slow to answer:
// its reply, get_state and read name the page navigated to once it
// commits, never the page before (nor the tab between two documents).
func TestNavigateWithoutLoadReportsTheCommit(t *testing.T) {
	t.Parallel()
	base := feedbackSite(t)
	s, _ := open(t, nil)
	do(t, s, Op{Kind: KindNavigate, URL: base + "/", Snapshot: new(false)})
	r := do(t, s, Op{Kind: KindNavigate, URL: base + "/next", WaitUntilLoaded: new(false), Snapshot: new(false)})
	if r.Page == nil {
		t.Fatal("navigate without waiting: no page")
	}
	if r.Page.URL != base+"/next" {
		t.Errorf("navigate without waiting: page %+v, want %s/next once committed", r.Page, base)
	}
	// The same through the method, which does not settle.
	do(t, s, Op{Kind: KindNavigate, URL: base + "/", Snapshot: new(false)})
	if err := s.Navigate(testCtx(t), base+"/next?q=2", false); err != nil {
		t.Fatalf("Navigate: %v", err)
	}
	st := do(t, s, Op{Kind: KindGetState}).State
	// The title may not be parsed yet at commit; never the old page's.
	if st.URL != base+"/next?q=2" || st.Title == "Start page" {
		t.Errorf("get_state after a navigate that did not wait: %+v, want %s/next?q=2", st, base)
	}
	rd := do(t, s, Op{Kind: KindRead}).Read
	if rd.URL != base+"/next?q=2" || rd.Title != "Next page" || !strings.Contains(rd.Markdown, "q=2") {
		t.Errorf("read: url %q title %q markdown %q", rd.URL, rd.Title, rd.Markdown)
	}
}

// Found by the agent task suite (internal/mcp TestAgentTasks): an app
// that renders after its load event (the storage app reads IndexedDB) was
// shown half-done in navigate's reply ("IndexedDB: loading"), and a click
// whose work marks a region aria-busy was reported before that work was
// done; the agent had to poll with snapshots. A navigation's reply waits
// for the DOM to settle after the load as a click's does, and a rendered
// element marked aria-busy="true" holds the settling (both bounded).
func TestActionsWaitForAppsToSettle(t *testing.T) {
	t.Parallel()
	site := serve(t, func(w http.ResponseWriter, r *http.Request) {
		html(w, `<title>App</title><section id="s" aria-label="Data"><p id="p">loading</p></section>
<button onclick="busy('Saved', 400)">Save</button>
<script>
function busy(text, ms) {
	const s = document.getElementById("s");
	s.setAttribute("aria-busy", "true");
	setTimeout(() => { document.getElementById("p").textContent = text; s.setAttribute("aria-busy", "false"); }, ms);
}
addEventListener("load", () => {
	setTimeout(() => { const p = document.createElement("p"); p.textContent = "Rendered late"; document.body.append(p); }, 50);
	busy("Loaded data", 300);
});
</script>`)
	})
	s, _ := open(t, nil)
	r := do(t, s, Op{Kind: KindNavigate, URL: site.URL + "/"})
	for _, want := range []string{"Rendered late", "Loaded data"} {
		if !strings.Contains(r.Snapshot.Text, want) {
			t.Errorf("navigate's reply lacks %q:\n%s", want, r.Snapshot.Text)
		}
	}
	r = do(t, s, Op{Kind: KindClick, Ref: refOf(t, *r.Snapshot, `- button "Save"`)})
	if !strings.Contains(r.Snapshot.Text, "Saved") {
		t.Errorf("click's reply lacks Saved:\n%s", r.Snapshot.Text)
	}
}
