package browser

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"image/jpeg"
	"image/png"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
)

// kindConstants parses the package's non-test sources and returns the
// values of the string constants named Kind*.
func kindConstants(t *testing.T) map[string]string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	out := map[string]string{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range af.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, sp := range gd.Specs {
				vs := sp.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if !strings.HasPrefix(n.Name, "Kind") || i >= len(vs.Values) {
						continue
					}
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						t.Fatalf("%s is not a string literal", n.Name)
					}
					v, _ := strconv.Unquote(lit.Value)
					out[n.Name] = v
				}
			}
		}
	}
	return out
}

// Adding a kind without changing OpCount (or the reverse) fails here.
func TestOpCountLocked(t *testing.T) {
	t.Parallel()
	consts := kindConstants(t)
	if len(consts) != OpCount {
		t.Errorf("%d Kind constants in the source, OpCount is %d", len(consts), OpCount)
	}
	if len(opSpecs) != OpCount || len(Kinds()) != OpCount {
		t.Errorf("opSpecs has %d kinds, OpCount is %d", len(opSpecs), OpCount)
	}
	for name, v := range consts {
		if _, ok := opSpecs[v]; !ok {
			t.Errorf("%s = %q has no opSpecs entry", name, v)
		}
	}
	for _, want := range []string{"navigate", "snapshot", "read", "click", "fill", "press", "select", "upload",
		"download", "screenshot", "get_state", "wait_for", "network_log", "console", "new_tab", "close_tab", "back", "forward",
		"hover", "dblclick", "check", "uncheck"} {
		if _, ok := opSpecs[want]; !ok {
			t.Errorf("kind %q is missing", want)
		}
	}
}

func TestParseOp(t *testing.T) {
	t.Parallel()
	good := map[string]Op{
		`{"kind":"navigate","url":"http://a.test/"}`:                           {Kind: KindNavigate, URL: "http://a.test/"},
		`{"kind":"navigate","url":"http://a.test/","wait_until_loaded":false}`: {Kind: KindNavigate, URL: "http://a.test/", WaitUntilLoaded: new(false)},
		`{"kind":"snapshot"}`:                                    {Kind: KindSnapshot},
		`{"kind":"fill","ref":"@e1","text":""}`:                  {Kind: KindFill, Ref: "@e1"},
		`{"kind":"press","key":"Enter"}`:                         {Kind: KindPress, Key: "Enter"},
		`{"kind":"press","key":"a","ref":"@e2"}`:                 {Kind: KindPress, Key: "a", Ref: "@e2"},
		`{"kind":"select","ref":"@e3","value":"b"}`:              {Kind: KindSelect, Ref: "@e3", Value: "b"},
		`{"kind":"screenshot","format":"jpeg","full_page":true}`: {Kind: KindScreenshot, Format: "jpeg", FullPage: true},
		`{"kind":"wait_for","selector":"#x","timeout_ms":200}`:   {Kind: KindWaitFor, Selector: "#x", TimeoutMS: 200},
		`{"kind":"wait_for","role":"alert"}`:                     {Kind: KindWaitFor, Role: "alert"},
		` {"kind":"back"} `:                                      {Kind: KindBack},
	}
	for in, want := range good {
		got, err := ParseOp([]byte(in))
		if err != nil {
			t.Errorf("ParseOp(%s): %v", in, err)
			continue
		}
		if got.Kind != want.Kind || got.URL != want.URL || got.Ref != want.Ref || got.Key != want.Key ||
			got.Value != want.Value || got.Format != want.Format || got.FullPage != want.FullPage ||
			got.Selector != want.Selector || got.Role != want.Role || got.TimeoutMS != want.TimeoutMS ||
			(got.WaitUntilLoaded == nil) != (want.WaitUntilLoaded == nil) {
			t.Errorf("ParseOp(%s) = %+v, want %+v", in, got, want)
		}
	}
	bad := []string{
		``, `null`, `[]`, `"navigate"`, `{}`,
		`{"kind":"navigate"}`,                                    // required url
		`{"kind":"navigate","url":""}`,                           // empty url
		`{"kind":"navigate","url":"http://a.test/","x":1}`,       // unknown field
		`{"kind":"navigate","url":"http://a.test/","ref":"@e1"}`, // another kind's field
		`{"kind":"eval","script":"alert(1)"}`,                    // unknown kind
		`{"kind":"evaluate"}`,                                    // unknown kind
		`{"kind":"NAVIGATE","url":"http://a.test/"}`,             // kinds are case-sensitive
		`{"kind":"click"}`,                                       // required ref
		`{"kind":"click","ref":5}`,                               // wrong type
		`{"kind":"press","key":"F13x"}`,                          // unknown key
		`{"kind":"screenshot","format":"gif"}`,                   // bad format
		`{"kind":"read","mode":"everything"}`,                    // bad mode
		`{"kind":"wait_for"}`,                                    // neither selector nor role
		`{"kind":"wait_for","selector":"#a","role":"button"}`,    // both
		`{"kind":"wait_for","selector":"#a","timeout_ms":-1}`,
		`{"kind":"wait_for","selector":"#a","timeout_ms":120001}`,
		`{"kind":"snapshot"} {"kind":"snapshot"}`, // trailing data
		`{"kind":"snapshot"`,
	}
	for _, in := range bad {
		_, err := ParseOp([]byte(in))
		wantCode(t, err, airlock.CodeInvalid, "browser_op")
	}
}

// Validate refuses an op built in Go with another kind's field, and Do
// refuses a bad op without touching a browser (a zero Session has none).
func TestDoValidates(t *testing.T) {
	t.Parallel()
	err := Op{Kind: KindClick, Ref: "@e1", URL: "http://a.test/"}.Validate()
	wantCode(t, err, airlock.CodeInvalid, "browser_op")
	_, err = (&Session{}).Do(t.Context(), Op{Kind: "eval"})
	wantCode(t, err, airlock.CodeInvalid, "browser_op")
}

func do(t *testing.T, s *Session, op Op) Result {
	t.Helper()
	r, err := s.Do(testCtx(t), op)
	if err != nil {
		t.Fatalf("Do(%+v): %v", op, err)
	}
	return r
}

func TestPressEnterSubmitsAndWaitFor(t *testing.T) {
	t.Parallel()
	got := make(chan url.Values, 1)
	site := serve(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/submit":
			got <- r.URL.Query()
			html(w, `<title>Thanks</title><h1 id="thanks">Thanks</h1>`)
		default:
			html(w, `<title>Form</title><form action="/submit"><label>Q <input name="q"></label></form>`)
		}
	})
	s, _ := open(t, nil)
	do(t, s, Op{Kind: KindNavigate, URL: site.URL + "/"})
	q := refOf(t, *do(t, s, Op{Kind: KindSnapshot}).Snapshot, `- textbox "Q"`)
	do(t, s, Op{Kind: KindFill, Ref: q, Text: "ab"})
	do(t, s, Op{Kind: KindPress, Ref: q, Key: "c"}) // typed at the caret
	do(t, s, Op{Kind: KindPress, Key: "Enter"})     // the focused field
	do(t, s, Op{Kind: KindWaitFor, Selector: "h1#thanks", TimeoutMS: 20000})
	select {
	case v := <-got:
		if v.Get("q") != "abc" {
			t.Errorf("submitted q=%q, want abc", v.Get("q"))
		}
	default:
		t.Fatal("the page shows Thanks but the server saw no submission")
	}
	_, err := s.Do(testCtx(t), Op{Kind: KindPress, Ref: q, Key: "Enter"})
	wantCode(t, err, airlock.CodeInvalid, "stale_ref")
}

func TestWaitFor(t *testing.T) {
	t.Parallel()
	site := serve(t, func(w http.ResponseWriter, r *http.Request) {
		html(w, `<title>Late</title><p>early</p><script>
setTimeout(() => { const d = document.createElement("div"); d.id = "late"; d.setAttribute("role", "alert"); d.textContent = "ready"; document.body.append(d); }, 300);
</script>`)
	})
	s, _ := open(t, nil)
	ctx := testCtx(t)
	if err := s.Navigate(ctx, site.URL+"/", true); err != nil {
		t.Fatalf("Navigate: %v", err)
	}
	if err := s.WaitFor(ctx, "", "alert", 20000); err != nil {
		t.Fatalf("WaitFor role alert: %v", err)
	}
	if err := s.WaitFor(ctx, "div#late", "", 0); err != nil {
		t.Fatalf("WaitFor #late: %v", err)
	}
	wantCode(t, s.WaitFor(ctx, "#never", "", 150), airlock.CodeTimeout, "wait_for_timeout")
	wantCode(t, s.WaitFor(ctx, "", "dialog", 150), airlock.CodeTimeout, "wait_for_timeout")
	wantCode(t, s.WaitFor(ctx, "p[[", "", 1000), airlock.CodeInvalid, "bad_selector")
	wantCode(t, s.WaitFor(ctx, "#a", "alert", 1000), airlock.CodeInvalid, "browser_op")
}

func TestSelectOption(t *testing.T) {
	t.Parallel()
	site := serve(t, func(w http.ResponseWriter, r *http.Request) {
		html(w, `<title>Pick</title>
<label>Fruit <select id="f" onchange="document.getElementById('out').textContent = 'chose ' + this.value">
<option value="a">Apple</option><option value="b">Banana</option><option value="c" disabled>Cherry</option></select></label>
<p id="out">none</p><button>Go</button>
<script>/* the page's own world cannot tamper with select */
window.HTMLSelectElement = function () {}; EventTarget.prototype.dispatchEvent = function () { return false; };</script>`)
	})
	s, _ := open(t, nil)
	ctx := testCtx(t)
	if err := s.Navigate(ctx, site.URL+"/", true); err != nil {
		t.Fatalf("Navigate: %v", err)
	}
	snap := snapshot(t, s)
	t.Logf("snapshot:\n%s", snap.Text)
	fruit, goBtn := refOf(t, snap, `- combobox "Fruit"`), refOf(t, snap, `- button "Go"`)
	do(t, s, Op{Kind: KindSelect, Ref: fruit, Value: "b"})
	if after := snapshot(t, s); !strings.Contains(after.Text, `"chose b"`) {
		t.Errorf("the change handler did not run:\n%s", after.Text)
	}
	wantCode(t, s.Select(ctx, fruit, "zzz"), airlock.CodeInvalid, "no_option")
	wantCode(t, s.Select(ctx, fruit, "c"), airlock.CodeInvalid, "disabled")
	wantCode(t, s.Select(ctx, goBtn, "a"), airlock.CodeInvalid, "not_select")
	wantCode(t, s.Select(ctx, "@e999999", "a"), airlock.CodeInvalid, "stale_ref")
}

func TestBackForward(t *testing.T) {
	t.Parallel()
	site := serve(t, func(w http.ResponseWriter, r *http.Request) {
		html(w, "<title>Page "+r.URL.Path+"</title><button>B"+r.URL.Path+"</button>")
	})
	s, _ := open(t, nil)
	_, err := s.Do(testCtx(t), Op{Kind: KindBack})
	wantCode(t, err, airlock.CodeInvalid, "no_history") // about:blank only
	do(t, s, Op{Kind: KindNavigate, URL: site.URL + "/a"})
	do(t, s, Op{Kind: KindNavigate, URL: site.URL + "/b"})
	b := refOf(t, snapshot(t, s), `- button "B/b"`)
	r := do(t, s, Op{Kind: KindBack})
	if r.State == nil || r.State.URL != site.URL+"/a" || r.State.Title != "Page /a" {
		t.Fatalf("back: state %+v, want %s/a", r.State, site.URL)
	}
	wantCode(t, s.Click(testCtx(t), b), airlock.CodeInvalid, "stale_ref")
	r = do(t, s, Op{Kind: KindForward})
	if r.State == nil || r.State.URL != site.URL+"/b" {
		t.Fatalf("forward: state %+v, want %s/b", r.State, site.URL)
	}
	_, err = s.Do(testCtx(t), Op{Kind: KindForward})
	wantCode(t, err, airlock.CodeInvalid, "no_history")
}

func TestScreenshot(t *testing.T) {
	t.Parallel()
	site := serve(t, func(w http.ResponseWriter, r *http.Request) {
		html(w, `<title>Tall</title><body style="margin:0"><div style="height:3000px;background:linear-gradient(red,blue)">tall</div></body>`)
	})
	s, _ := open(t, nil)
	do(t, s, Op{Kind: KindNavigate, URL: site.URL + "/"})
	view := do(t, s, Op{Kind: KindScreenshot}).Screenshot
	if view.Format != "png" {
		t.Fatalf("format %q, want png", view.Format)
	}
	vi, err := png.Decode(bytes.NewReader(view.Data))
	if err != nil {
		t.Fatalf("viewport screenshot is not a png: %v", err)
	}
	full := do(t, s, Op{Kind: KindScreenshot, FullPage: true, Format: "jpeg"}).Screenshot
	fi, err := jpeg.Decode(bytes.NewReader(full.Data))
	if err != nil {
		t.Fatalf("full-page screenshot is not a jpeg: %v", err)
	}
	vb, fb := vi.Bounds(), fi.Bounds()
	if fb.Dy() < 3000 || vb.Dy() >= 3000 || vb.Dy() == 0 {
		t.Errorf("viewport %v, full page %v: want the full page at least 3000 px tall and the viewport less", vb, fb)
	}
	if full.Truncated {
		t.Error("a 3000 px page was reported truncated")
	}
}

func TestConsoleLog(t *testing.T) {
	t.Parallel()
	site := serve(t, func(w http.ResponseWriter, r *http.Request) {
		html(w, `<title>Log</title><script>console.log("hello", 42, true); console.error("boom");</script>`)
	})
	s, _ := open(t, nil)
	do(t, s, Op{Kind: KindNavigate, URL: site.URL + "/"})
	ctx := testCtx(t)
	var log ConsoleLog
	for {
		log = *do(t, s, Op{Kind: KindConsole}).Console
		if len(log.Messages) >= 2 || ctx.Err() != nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(log.Messages) != 2 {
		t.Fatalf("console = %+v, want 2 messages", log)
	}
	m0, m1 := log.Messages[0], log.Messages[1]
	if m0.Level != "log" || m0.Text != "hello 42 true" || m1.Level != "error" || m1.Text != "boom" {
		t.Errorf("console = %+v", log.Messages)
	}
	if !strings.HasPrefix(m0.URL, site.URL) {
		t.Errorf("message URL %q, want the page's", m0.URL)
	}
}

func TestConsoleRingBounded(t *testing.T) {
	t.Parallel()
	r := &consoleRing{}
	for i := range ConsoleCapacity + 7 {
		r.add(ConsoleMessage{Text: strconv.Itoa(i)})
	}
	log := r.snapshot()
	if len(log.Messages) != ConsoleCapacity || log.Dropped != 7 {
		t.Fatalf("%d messages, %d dropped; want %d and 7", len(log.Messages), log.Dropped, ConsoleCapacity)
	}
	if log.Messages[0].Text != "7" || log.Messages[ConsoleCapacity-1].Text != strconv.Itoa(ConsoleCapacity+6) {
		t.Errorf("ring order: first %q last %q", log.Messages[0].Text, log.Messages[ConsoleCapacity-1].Text)
	}
	if got := cut(strings.Repeat("é", 10), 5); got != "éé" {
		t.Errorf("cut = %q, want two runes", got)
	}
	if got := (*consoleRing)(nil).snapshot(); got.Messages == nil || len(got.Messages) != 0 {
		t.Errorf("nil ring snapshot = %+v", got)
	}
}
