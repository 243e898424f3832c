package mcp

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	sdkmcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlockhq/airlock/engine"
)

// The agent task suite (issue #15, "Done means"): the SDK's MCP client
// drives Airlock's MCP server, browser tools on, real Chromium, against
// the test apps of internal/browser/testdata/apps served on loopback. The
// agent uses refs only — found in the text of the replies by role and
// name, as a model reads them — never a CSS selector and never
// browser_interact. After every call it checks that the reply names the
// page the browser is really on: the URL the task leads to and the title
// the served file (or the app's script) gives it, and that the state the
// call changed shows in the reply's snapshot. Each task's tool calls are
// counted; `go test -v -run TestAgentTasks ./internal/mcp/` logs the table.

// appsDir holds the test apps (the browser package's testdata).
var appsDir = filepath.Join("..", "browser", "testdata", "apps")

// appsServer serves the test apps on loopback and records the documents
// (not subresources) the browser asked for.
type appsServer struct {
	*httptest.Server
	mu   sync.Mutex
	docs []string // request paths of HTML documents, in order
}

func newAppsServer(tb testing.TB) *appsServer {
	tb.Helper()
	s := &appsServer{}
	fs := http.FileServer(http.Dir(appsDir))
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/") || strings.HasSuffix(r.URL.Path, ".html") {
			s.mu.Lock()
			s.docs = append(s.docs, r.URL.RequestURI())
			s.mu.Unlock()
		}
		// Every load of a page is a request the server sees.
		w.Header().Set("Cache-Control", "no-store")
		fs.ServeHTTP(w, r)
	}))
	tb.Cleanup(s.Close)
	return s
}

// lastDoc is the request URI of the last document served.
func (s *appsServer) lastDoc() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.docs) == 0 {
		return ""
	}
	return s.docs[len(s.docs)-1]
}

// served counts the documents served.
func (s *appsServer) served() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.docs)
}

// fileTitle is the <title> of an app's index.html as the server has it.
func fileTitle(tb testing.TB, app string) string {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join(appsDir, app, "index.html"))
	if err != nil {
		tb.Fatal(err)
	}
	m := regexp.MustCompile(`<title>([^<]*)</title>`).FindSubmatch(b)
	if m == nil {
		tb.Fatalf("%s/index.html has no title", app)
	}
	return string(m[1])
}

// agent is a model's view of the browser tools: it reads replies as text
// and keeps what it expects the page to be.
type agent struct {
	t     *testing.T
	cs    *sdkmcp.ClientSession
	srv   *appsServer
	calls int
	url   string // the URL the page must be on after the next call
	title string // and its title
	last  string // the last reply with a snapshot
}

var (
	refRE      = regexp.MustCompile(`@(e\d+)`)
	pageLineRE = regexp.MustCompile(`(?m)^Page: (.*)$`)
	titleRE    = regexp.MustCompile(`(?m)^Title: (.*)$`)
)

// call runs one tool, counts it, fails the task on an error result, and
// checks that an action's reply names the expected page.
func (a *agent) call(tool string, args map[string]any) string {
	a.t.Helper()
	a.calls++
	out := mustOK(a.t, call(a.t, a.cs, tool, args))
	if tool == ToolBrowserSnapshot {
		a.last = out
		return out
	}
	a.wantPage(out)
	if strings.Contains(out, "Snapshot (refs of this page):") {
		a.last = out
	}
	return out
}

// wantPage checks that a reply names the page the browser is really on.
func (a *agent) wantPage(out string) {
	a.t.Helper()
	pg, ti := pageLineRE.FindStringSubmatch(out), titleRE.FindStringSubmatch(out)
	if pg == nil || ti == nil {
		a.t.Fatalf("the reply names no page:\n%s", out)
	}
	if pg[1] != a.url || ti[1] != a.title {
		a.t.Fatalf("the reply names %s (%q), the page is %s (%q):\n%s", pg[1], ti[1], a.url, a.title, out)
	}
	// The document the URL names (less its fragment) is the last one the
	// server sent.
	doc, _, _ := strings.Cut(strings.TrimPrefix(a.url, a.srv.URL), "#")
	if got := a.srv.lastDoc(); got != doc {
		a.t.Fatalf("the reply names %s; the last document served is %s", a.url, got)
	}
}

// ref finds the ref of the first line of the last snapshot (after the
// line containing after, when given) whose role and name are as given;
// name "" matches an unnamed element.
func (a *agent) ref(role, name string) string {
	a.t.Helper()
	return a.refAfter("", role, name)
}

func (a *agent) refAfter(after, role, name string) string {
	a.t.Helper()
	want := "- " + role + " "
	if name != "" {
		want += fmt.Sprintf("%q ", name)
	}
	seen := after == ""
	for line := range strings.SplitSeq(a.last, "\n") {
		if !seen {
			seen = strings.Contains(line, after)
			continue
		}
		rest, found := strings.CutPrefix(strings.TrimSpace(line), want)
		if found && (name != "" || strings.HasPrefix(rest, "@") || strings.HasPrefix(rest, "[")) {
			if m := refRE.FindStringSubmatch(line); m != nil {
				return m[1] // Playwright's spelling, e3: both are accepted
			}
		}
	}
	a.t.Fatalf("no %s %q (after %q) with a ref in\n%s", role, name, after, a.last)
	return ""
}

// refNamed is ref for a name that contains name (an icon's text may
// lead it).
func (a *agent) refNamed(role, name string) string {
	a.t.Helper()
	for line := range strings.SplitSeq(a.last, "\n") {
		l := strings.TrimSpace(line)
		if strings.HasPrefix(l, "- "+role+` "`) {
			if n, _, ok := strings.Cut(l[len(role)+4:], `"`); ok && strings.Contains(n, name) {
				if m := refRE.FindStringSubmatch(l); m != nil {
					return m[1]
				}
			}
		}
	}
	a.t.Fatalf("no %s named like %q with a ref in\n%s", role, name, a.last)
	return ""
}

// see fails unless the last snapshot has every want, and has none of not.
func (a *agent) see(want []string, not ...string) {
	a.t.Helper()
	for _, w := range want {
		if !strings.Contains(a.last, w) {
			a.t.Fatalf("no %q in the reply:\n%s", w, a.last)
		}
	}
	for _, n := range not {
		if strings.Contains(a.last, n) {
			a.t.Fatalf("%q still in the reply:\n%s", n, a.last)
		}
	}
}

// settle takes snapshots (each a counted call) until the last reply has
// want, as an agent would when an app shows its state asynchronously;
// the bound is a hang guard only.
func (a *agent) settle(want string) {
	a.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for i := 0; !strings.Contains(a.last, want); i++ {
		if time.Now().After(deadline) {
			a.t.Fatalf("no %q after %d snapshots:\n%s", want, i, a.last)
		}
		if i > 0 {
			time.Sleep(100 * time.Millisecond) // an agent's pause, at the least
		}
		a.call(ToolBrowserSnapshot, map[string]any{})
	}
}

// taskResult is one row of the table.
type taskResult struct {
	app, task string
	calls     int
	ok        bool
}

// TestAgentTasks is the task suite: add, complete, edit (double-click),
// delete (a hover-only button), filter (All, Active, Completed) and
// toggle all (a label over a 1-px input), clear completed and a reload in
// the web-components todo app;
// remember and forget in the storage app (localStorage and IndexedDB,
// each checked after a reload); the form app's validation and a valid
// sign-up. It logs, per task, the tool calls an agent with refs only
// needs, and whether the task succeeded; and the characters of each app
// page's snapshot.
func TestAgentTasks(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/usr/lib/chromium/chromium"); err != nil {
		t.Fatalf("needs Debian's Chromium (apt-get install chromium): %v", err)
	}
	srv := newAppsServer(t)
	cfg := loopback // the floor exception for the apps' address
	cfg.Browser = engine.BrowserConfig{Policy: engine.BrowserPolicy{AllowedOrigins: []string{srv.URL}}}
	cs := inMemory(t, newEngine(t, cfg))

	var results []taskResult
	sizes := map[string]int{}
	var a *agent
	task := func(app, name string, f func(t *testing.T)) {
		ok := t.Run(app+"/"+name, func(t *testing.T) {
			a.t = t
			f(t)
		})
		results = append(results, taskResult{app, name, a.calls, ok})
		a.calls = 0
	}
	a = &agent{cs: cs, srv: srv}
	snapSize := func(page string) {
		out := mustOK(a.t, call(a.t, cs, ToolBrowserSnapshot, map[string]any{}))
		sizes[page] = utf8.RuneCountInString(out)
	}

	// --- todo ---
	todo := srv.URL + "/todo/"
	task("todo", "open", func(t *testing.T) {
		a.url, a.title = todo, fileTitle(t, "todo")
		a.call(ToolBrowserNavigate, map[string]any{"url": todo})
		a.see([]string{`heading "todos"`, `textbox "New todo"`})
		snapSize("todo, empty")
	})
	task("todo", "add", func(t *testing.T) {
		field := a.ref("textbox", "New todo")
		for i, title := range []string{"buy milk", "walk the dog", "ship it"} {
			a.call(ToolBrowserFill, map[string]any{"ref": a.ref("textbox", "New todo"), "text": title, "snapshot": false})
			a.call(ToolBrowserPress, map[string]any{"ref": a.ref("textbox", "New todo"), "key": "Enter"})
			a.see([]string{fmt.Sprintf("label %q", title), countLine(i + 1)})
			// The same field keeps its ref from reply to reply.
			if got := a.ref("textbox", "New todo"); got != field {
				t.Errorf("the new-todo field is %s after adding %q, %s before", got, title, field)
			}
		}
		snapSize("todo, three todos")
	})
	task("todo", "complete", func(t *testing.T) {
		a.call(ToolBrowserCheck, map[string]any{"ref": a.refAfter("", "checkbox", "") /* the first todo's */})
		a.see([]string{countLine(2), `checkbox [checked]`})
	})
	task("todo", "edit (double-click)", func(t *testing.T) {
		a.call(ToolBrowserDblclick, map[string]any{"ref": a.ref("label", "walk the dog")})
		a.call(ToolBrowserFill, map[string]any{"ref": a.ref("textbox", "Edit todo"), "text": "walk the cat", "snapshot": false})
		a.call(ToolBrowserPress, map[string]any{"ref": a.ref("textbox", "Edit todo"), "key": "Enter"})
		a.see([]string{`label "walk the cat"`, countLine(2)}, `"walk the dog"`, `textbox "Edit todo"`)
	})
	task("todo", "delete (hover-only button)", func(t *testing.T) {
		// The pointer rests where the double-click left it: only that
		// todo's Delete shows, not the one of "ship it".
		if _, after, _ := strings.Cut(a.last, `label "ship it"`); strings.Contains(after, `button "Delete"`) {
			t.Fatalf("ship it's Delete shows before any hover:\n%s", a.last)
		}
		a.call(ToolBrowserHover, map[string]any{"ref": a.ref("label", "ship it")})
		a.call(ToolBrowserClick, map[string]any{"ref": a.refAfter(`label "ship it"`, "button", "Delete")})
		a.see([]string{`label "buy milk"`, `label "walk the cat"`, countLine(1)}, `"ship it"`)
	})
	task("todo", "filter Active", func(t *testing.T) {
		a.url = todo + "#/active"
		a.call(ToolBrowserClick, map[string]any{"ref": a.ref("link", "Active")})
		a.see([]string{`label "walk the cat"`}, `label "buy milk"`)
	})
	task("todo", "filter Completed", func(t *testing.T) {
		a.url = todo + "#/completed"
		a.call(ToolBrowserClick, map[string]any{"ref": a.ref("link", "Completed")})
		a.see([]string{`label "buy milk"`}, `label "walk the cat"`)
	})
	task("todo", "filter All", func(t *testing.T) {
		a.url = todo + "#/"
		a.call(ToolBrowserClick, map[string]any{"ref": a.ref("link", "All")})
		a.see([]string{`label "buy milk"`, `label "walk the cat"`})
	})
	task("todo", "toggle all (label over a 1-px input)", func(t *testing.T) {
		// What a person sees and clicks: the label; an agent clicks its ref.
		// The outline names the 1-px checkbox by its label; a click on its
		// ref must do what a person's click on the label does.
		a.call(ToolBrowserClick, map[string]any{"ref": a.refNamed("checkbox", "Mark all as complete")})
		a.see([]string{countLine(0), `checkbox "❯ Mark all as complete" [checked]`})
		a.call(ToolBrowserClick, map[string]any{"ref": a.refNamed("checkbox", "Mark all as complete")})
		a.see([]string{countLine(2)}, `Mark all as complete" [checked]`)
	})
	task("todo", "clear completed", func(t *testing.T) {
		a.call(ToolBrowserCheck, map[string]any{"ref": a.refAfter(`label "buy milk"`, "checkbox", "")})
		a.see([]string{countLine(1), `button "Clear completed"`})
		a.call(ToolBrowserClick, map[string]any{"ref": a.ref("button", "Clear completed")})
		a.see([]string{`label "buy milk"`, countLine(1)}, `"walk the cat"`, `button "Clear completed"`)
	})
	task("todo", "persist (reload)", func(t *testing.T) {
		a.url = todo
		a.call(ToolBrowserNavigate, map[string]any{"url": todo})
		a.see([]string{`label "buy milk"`, countLine(1)}, `"walk the cat"`)
	})

	// --- storage ---
	storage := srv.URL + "/storage/"
	const note = "pick up the parcel"
	task("storage", "open", func(t *testing.T) {
		a.url, a.title = storage, fileTitle(t, "storage")
		a.call(ToolBrowserNavigate, map[string]any{"url": storage})
		a.settle("IndexedDB: (empty)")
		a.see([]string{"localStorage: (empty)"})
		snapSize("storage, loaded")
	})
	task("storage", "remember (survives a reload)", func(t *testing.T) {
		a.call(ToolBrowserFill, map[string]any{"ref": a.ref("textbox", "Note"), "text": note, "snapshot": false})
		a.call(ToolBrowserClick, map[string]any{"ref": a.ref("button", "Remember")})
		a.settle("Remembered.")
		a.settle("IndexedDB: " + note)
		a.see([]string{"localStorage: " + note})
		before := srv.served()
		a.call(ToolBrowserNavigate, map[string]any{"url": storage})
		if srv.served() != before+1 {
			t.Fatalf("the reload fetched %d documents", srv.served()-before)
		}
		a.settle("IndexedDB: " + note)
		a.see([]string{"localStorage: " + note}, "Remembered.")
	})
	task("storage", "forget (survives a reload)", func(t *testing.T) {
		a.call(ToolBrowserClick, map[string]any{"ref": a.ref("button", "Forget")})
		a.settle("Forgotten.")
		a.settle("IndexedDB: (empty)")
		a.see([]string{"localStorage: (empty)"})
		a.call(ToolBrowserNavigate, map[string]any{"url": storage})
		a.settle("IndexedDB: (empty)")
		a.see([]string{"localStorage: (empty)"}, "Forgotten.")
	})

	// --- form ---
	form := srv.URL + "/form/"
	task("form", "validation errors", func(t *testing.T) {
		a.url, a.title = form, fileTitle(t, "form")
		a.call(ToolBrowserNavigate, map[string]any{"url": form})
		snapSize("form, empty")
		a.call(ToolBrowserClick, map[string]any{"ref": a.ref("button", "Sign up")})
		a.see([]string{"5 fields need attention.", "Enter your full name.", "Enter your email address.",
			"Choose a password.", "Repeat the password.", "Accept the terms to sign up."})
		// After a first submit, errors follow the typing.
		a.call(ToolBrowserFill, map[string]any{"ref": a.ref("textbox", "Email"), "text": "not-an-address"})
		a.see([]string{"Enter an email address like name@example.com."}, "Enter your email address.")
	})
	task("form", "sign up", func(t *testing.T) {
		for _, f := range [][2]string{{"Full name", "Ada Lovelace"}, {"Email", "ada@example.com"}, {"Password", "analytical"}, {"Confirm password", "analytical"}} {
			a.call(ToolBrowserFill, map[string]any{"ref": a.ref("textbox", f[0]), "text": f[1], "snapshot": false})
		}
		a.call(ToolBrowserCheck, map[string]any{"ref": a.ref("checkbox", "I accept the terms")})
		a.see([]string{`checkbox "I accept the terms" [checked]`}, "Enter your full name.", "Enter an email address", "Accept the terms to sign up.")
		a.title = "Welcome · Airlock test app" // the app's script retitles the page; no navigation
		a.call(ToolBrowserClick, map[string]any{"ref": a.ref("button", "Sign up")})
		a.see([]string{`heading "Welcome aboard"`, "Signed up as ada@example.com."}, `button "Sign up"`)
	})

	var b strings.Builder
	b.WriteString("\n| App | Task | MCP tool calls (refs only) | Success |\n|---|---|---|---|\n")
	total, passed := 0, 0
	for _, r := range results {
		total += r.calls
		if r.ok {
			passed++
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %v |\n", r.app, r.task, r.calls, r.ok)
	}
	fmt.Fprintf(&b, "| all | %d/%d tasks | %d | |\n\n| Page | Snapshot characters |\n|---|---|\n", passed, len(results), total)
	pages := make([]string, 0, len(sizes))
	for p := range sizes {
		pages = append(pages, p)
	}
	slices.Sort(pages)
	for _, p := range pages {
		fmt.Fprintf(&b, "| %s | %d |\n", p, sizes[p])
	}
	t.Log(b.String())
}

// countLine is the todo app's "N items left" as the snapshot shows it.
func countLine(n int) string {
	return fmt.Sprintf("- text %q", fmt.Sprint(n))
}

// BenchmarkBrowserToolsMCP measures the latency of browser_click,
// browser_fill and browser_navigate through the MCP client and server
// (in-memory transport) on a warm session, each reply with its fresh
// snapshot as an agent gets it, and reports the median of each in ms
// (p50-ms). The page is the todo app with three todos.
func BenchmarkBrowserToolsMCP(b *testing.B) {
	if _, err := os.Stat("/usr/lib/chromium/chromium"); err != nil {
		b.Fatalf("needs Debian's Chromium (apt-get install chromium): %v", err)
	}
	srv := newAppsServer(b)
	cfg := loopback
	cfg.Browser = engine.BrowserConfig{Policy: engine.BrowserPolicy{AllowedOrigins: []string{srv.URL}}}
	cs := inMemory(b, newEngine(b, cfg))
	todo := srv.URL + "/todo/"
	out := mustOK(b, call(b, cs, ToolBrowserNavigate, map[string]any{"url": todo}))
	last := out
	refOf := func(role, name string) string {
		b.Helper()
		want := "- " + role + " " + fmt.Sprintf("%q ", name)
		for line := range strings.SplitSeq(last, "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), want) {
				if m := refRE.FindStringSubmatch(line); m != nil {
					return m[1]
				}
			}
		}
		b.Fatalf("no %s %q in\n%s", role, name, last)
		return ""
	}
	field := refOf("textbox", "New todo")
	for _, title := range []string{"buy milk", "walk the dog", "ship it"} {
		mustOK(b, call(b, cs, ToolBrowserFill, map[string]any{"ref": field, "text": title, "snapshot": false}))
		last = mustOK(b, call(b, cs, ToolBrowserPress, map[string]any{"ref": field, "key": "Enter"}))
	}
	median := func(b *testing.B, tool string, args func(i int) map[string]any) {
		b.Helper()
		lat := make([]time.Duration, 0, b.N)
		i := 0
		for b.Loop() {
			start := time.Now()
			mustOK(b, call(b, cs, tool, args(i)))
			lat = append(lat, time.Since(start))
			i++
		}
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	}
	b.Run("click", func(b *testing.B) {
		// The first todo's checkbox: each click toggles it.
		box := ""
		for line := range strings.SplitSeq(last, "\n") {
			if l := strings.TrimSpace(line); box == "" && strings.HasPrefix(l, "- checkbox @") {
				box = refRE.FindStringSubmatch(l)[1]
			}
		}
		if box == "" {
			b.Fatalf("no todo checkbox in\n%s", last)
		}
		median(b, ToolBrowserClick, func(int) map[string]any { return map[string]any{"ref": box} })
	})
	b.Run("fill", func(b *testing.B) {
		median(b, ToolBrowserFill, func(i int) map[string]any { return map[string]any{"ref": field, "text": fmt.Sprint("todo ", i)} })
	})
	b.Run("navigate", func(b *testing.B) {
		median(b, ToolBrowserNavigate, func(i int) map[string]any { return map[string]any{"url": todo} })
	})
}
