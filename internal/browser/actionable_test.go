package browser

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
)

// overlayPage has a button under a full-page overlay that takes every
// click (and counts it), a disabled button, a hidden one and a free one.
const overlayPage = `<title>Overlay</title>
<button id="go" onclick="document.getElementById('out').textContent='button'">Go</button>
<button id="off" disabled onclick="document.getElementById('out').textContent='off'">Off</button>
<button id="gone" style="display:none">Gone</button>
<p id="out">none</p>
<div id="overlay" role="dialog" aria-label="Cookie banner" style="position:fixed;inset:0;background:rgba(0,0,0,.1)"
 onclick="document.getElementById('out').textContent='overlay'"></div>`

// A click on a covered button fails as not_actionable naming the cover,
// by ref and by selector, and the overlay never receives the click.
func TestClickCoveredIsNotActionable(t *testing.T) {
	t.Parallel()
	site := serve(t, func(w http.ResponseWriter, r *http.Request) { html(w, overlayPage) })
	s, _ := open(t, func(o *Options) { o.ActionTimeout = time.Second })
	ctx := testCtx(t)
	do(t, s, Op{Kind: KindNavigate, URL: site.URL + "/"})
	snap := snapshot(t, s)
	goRef := refOf(t, snap, `- button "Go"`)
	start := time.Now()
	_, err := s.Do(ctx, Op{Kind: KindClick, Ref: goRef})
	wantCode(t, err, airlock.CodeInvalid, "not_actionable")
	// It gave up at the configured bound (less the last poll), not sooner.
	if waited := time.Since(start); waited < time.Second-actionPoll || !strings.Contains(err.Error(), "checked for 1000 ms") {
		t.Errorf("the covered click gave up after %v (%v), want at its action timeout (1s)", waited, err)
	}
	if m := err.Error(); !strings.Contains(m, "covered") || !strings.Contains(m, "Cookie banner") {
		t.Errorf("covered click: %v, want the cover named", err)
	}
	res, err := s.Interact(ctx, []Action{
		{Action: ActClick, Selector: "#go", TimeoutMS: 300},
		{Action: ActClick, Selector: "#off", TimeoutMS: 300},
		{Action: ActExtractText, Selector: "#out"},
	}, false)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"covered", "disabled"} {
		if r := res.Results[i]; r.OK || airlock.ReasonOf(r.Err) != "not_actionable" || !strings.Contains(errText(r.Err), want) {
			t.Errorf("step %d: %+v, want not_actionable (%s)", i, r, want)
		}
	}
	if got := *res.Results[2].Text; got != "none" {
		t.Errorf("after refused clicks the page shows %q, want none", got)
	}
	// A hidden element by selector never becomes visible: the step times
	// out waiting; force skips the checks and reaches the overlay.
	res, _ = s.Interact(ctx, []Action{
		{Action: ActClick, Selector: "#go", Force: true},
		{Action: ActExtractText, Selector: "#out"},
		{Action: ActClick, Selector: "#gone", Force: true},
	}, false)
	if !res.Results[0].OK || *res.Results[1].Text != "overlay" {
		t.Errorf("force click: %+v", res)
	}
	if r := res.Results[2]; r.OK || r.Err == nil || airlock.CodeOf(r.Err) == airlock.CodeInternal || !strings.Contains(errText(r.Err), "layout") {
		t.Errorf("force click on a hidden element: %+v, want a typed error carrying the CDP message", r.Err)
	}
}

// errText is an ActionResult error's message.
func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// The checks wait like a user: a cover that goes away, a button that is
// enabled later, a box that moves, all before the step's timeout.
func TestClickWaitsUntilActionable(t *testing.T) {
	t.Parallel()
	site := serve(t, func(w http.ResponseWriter, r *http.Request) {
		html(w, `<title>Later</title>
<button id="b" disabled onclick="document.getElementById('out').textContent='clicked'" style="position:relative;transition:left 300ms linear;left:0">B</button>
<p id="out">none</p><div id="cover" style="position:fixed;inset:0"></div>
<label for="cb">Tick</label><input id="cb" type="checkbox" style="position:absolute;left:0;top:200px;width:1px;height:1px">
<label id="lab" style="position:absolute;left:0;top:200px;width:80px;height:30px" for="cb">all</label>
<script>setTimeout(() => { const b = document.getElementById("b"); b.disabled = false; b.style.left = "200px"; document.getElementById("cover").remove(); }, 300);</script>`)
	})
	s, _ := open(t, nil)
	ctx := testCtx(t)
	res, err := s.Interact(ctx, []Action{
		{Action: ActGoto, URL: site.URL + "/"},
		{Action: ActClick, Selector: "#b", TimeoutMS: 5000},
		{Action: ActExtractText, Selector: "#out"},
		{Action: ActClick, Selector: "#cb", TimeoutMS: 2000},
	}, false)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Results[1].OK || *res.Results[2].Text != "clicked" {
		t.Fatalf("click after the page got ready: %+v", res)
	}
	if !res.Results[3].OK {
		t.Errorf("a checkbox under its own label is actionable: %+v", res.Results[3])
	}
}

// wait_for_selector hidden (and wait_for_hidden) decide on the document
// the goto committed, not the one it replaces.
func TestWaitHiddenAfterGoto(t *testing.T) {
	t.Parallel()
	site := serve(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/b" {
			time.Sleep(300 * time.Millisecond)
			html(w, `<title>B</title><div id="banner">Welcome</div><button id="x">X</button>`)
			return
		}
		html(w, `<title>A</title><p>a</p>`)
	})
	s, _ := open(t, nil)
	ctx := testCtx(t)
	do(t, s, Op{Kind: KindNavigate, URL: site.URL + "/a"})
	for _, wait := range []string{"commit", "load"} {
		res, err := s.Interact(ctx, []Action{
			{Action: ActGoto, URL: site.URL + "/b", WaitUntil: wait},
			{Action: ActWaitForSelector, Selector: "#banner", State: "hidden", TimeoutMS: 1000},
			{Action: ActGoto, URL: site.URL + "/a"},
			{Action: ActGoto, URL: site.URL + "/b", WaitUntil: wait},
			{Action: ActClick, Selector: "#x", WaitForHidden: "#banner", WaitForHiddenMS: 1000},
			{Action: ActGoto, URL: site.URL + "/a"},
		}, false)
		if err != nil {
			t.Fatal(err)
		}
		if r := res.Results[1]; r.OK || airlock.ReasonOf(r.Err) != "wait_for_timeout" {
			t.Errorf("%s: wait_for_selector hidden while #banner shows: %+v", wait, r)
		}
		if r := res.Results[4]; r.OK || airlock.ReasonOf(r.Err) != "wait_for_hidden" {
			t.Errorf("%s: wait_for_hidden while #banner shows: %+v", wait, r)
		}
	}
	// A navigate op that does not wait for the load, then the steps.
	for _, step := range []Action{
		{Action: ActWaitForSelector, Selector: "#banner", State: "hidden", TimeoutMS: 1000},
		{Action: ActClick, Selector: "#x", WaitForHidden: "#banner", WaitForHiddenMS: 1000},
	} {
		do(t, s, Op{Kind: KindNavigate, URL: site.URL + "/a"})
		if err := s.Navigate(ctx, site.URL+"/b", false); err != nil {
			t.Fatal(err)
		}
		res, err := s.Interact(ctx, []Action{step}, false)
		if err != nil {
			t.Fatal(err)
		}
		if r := res.Results[0]; r.OK {
			t.Errorf("navigate without load, %s: passes while #banner shows: %+v", step.Action, r)
		}
	}
}

// BenchmarkActionable measures the checks a click runs before its mouse
// events (one pass on a ready button) and reports their p50.
func BenchmarkActionable(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte(`<title>Ops</title><button>Press</button>`))
	}))
	b.Cleanup(srv.Close)
	s := benchSession(b)
	ctx := context.Background()
	if err := s.Navigate(ctx, srv.URL+"/", true); err != nil {
		b.Fatal(err)
	}
	bb, err := s.begin()
	if err != nil {
		b.Fatal(err)
	}
	defer s.mu.Unlock()
	backend, err := findWhen(ctx, bb, "button", "visible", 5*time.Second)
	if err != nil {
		b.Fatalf("button: %v", err)
	}
	var ds []time.Duration
	for b.Loop() {
		t0 := time.Now()
		if err := s.actionable(ctx, bb, backend, "button", "click", time.Second); err != nil {
			b.Fatal(err)
		}
		ds = append(ds, time.Since(t0))
	}
	slices.Sort(ds)
	b.ReportMetric(float64(ds[len(ds)/2].Microseconds())/1000, "p50-ms")
}

// wait_for_selector's visible and hidden follow what a person sees:
// visibility: hidden and an empty box are hidden.
func TestWaitForVisibilityStyles(t *testing.T) {
	t.Parallel()
	site := serve(t, func(w http.ResponseWriter, r *http.Request) {
		html(w, `<title>V</title><p id="ghost" style="visibility:hidden">boo</p><div id="flat" style="height:0;overflow:hidden"><span>x</span></div><p id="seen">here</p>`)
	})
	s, _ := open(t, nil)
	res, err := s.Interact(testCtx(t), []Action{
		{Action: ActGoto, URL: site.URL + "/"},
		{Action: ActWaitForSelector, Selector: "#ghost", State: "hidden", TimeoutMS: 500},
		{Action: ActWaitForSelector, Selector: "#ghost", State: "visible", TimeoutMS: 300},
		{Action: ActWaitForSelector, Selector: "#flat", State: "hidden", TimeoutMS: 500},
		{Action: ActWaitForSelector, Selector: "#seen", State: "visible", TimeoutMS: 500},
		{Action: ActWaitForSelector, Selector: "#seen", State: "hidden", TimeoutMS: 300},
	}, false)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []bool{true, true, false, true, true, false} {
		if got := res.Results[i].OK; got != want {
			t.Errorf("step %d (%s %s): ok %v, want %v (%v)", i, res.Results[i].Action, []string{"", "#ghost hidden", "#ghost visible", "#flat hidden", "#seen visible", "#seen hidden"}[i], got, want, res.Results[i].Err)
		}
	}
}
