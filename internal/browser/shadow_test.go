package browser

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/airlockhq/airlock"
)

// addTodos adds titles to the todo app at url through interact steps
// whose CSS selectors name elements inside its open shadow roots.
func addTodos(t *testing.T, s *Session, url string, titles ...string) InteractResult {
	t.Helper()
	steps := []Action{{Action: ActGoto, URL: url}}
	for _, title := range titles {
		steps = append(steps,
			Action{Action: ActFill, Selector: "input.new-todo", Text: title},
			Action{Action: ActPress, Selector: "input.new-todo", Key: "Enter"},
			Action{Action: ActWaitForSelector, Selector: "todo-item"},
		)
	}
	steps = append(steps, Action{Action: ActExtractText, Selector: ".todo-count"})
	res, err := s.Interact(testCtx(t), steps, true)
	if err != nil || res.FirstError() != nil {
		t.Fatalf("adding todos through shadow roots: %v %v", err, res.FirstError())
	}
	return res
}

// TestInteractShadowDOM: interact's CSS selectors pierce open shadow
// roots (each compound in one tree scope, combinators crossing from a
// shadow root to its host), and a selector that matches nothing fails
// as no_match, one that matches only hidden elements as not_visible.
func TestInteractShadowDOM(t *testing.T) {
	t.Parallel()
	base := serveApps(t)
	s, _ := open(t, nil)
	res := addTodos(t, s, base+"/todo/", "buy milk", "write the note", "ship it")
	if got := *res.Results[len(res.Results)-1].Text; got != "3 items left" {
		t.Fatalf("count %q, want 3 items left", got)
	}
	ctx := testCtx(t)
	res, err := s.Interact(ctx, []Action{
		// Descendant and child combinators cross shadow boundaries.
		{Action: ActExtractText, Selector: "todo-app .todo-list li:nth-child(2) todo-item label.title"},
		{Action: ActExtractText, Selector: "todo-item > .view > label"},
		{Action: ActClick, Selector: "todo-list li:first-child .toggle", TimeoutMS: 200}, // no such tag
		{Action: ActClick, Selector: "#todo-list li:first-child .toggle"},
		{Action: ActExtractText, Selector: "footer.footer > .todo-count"},
		{Action: ActClick, Selector: "#no-such-thing", TimeoutMS: 200},
		{Action: ActClick, Selector: "#todo-list li:nth-child(3) .destroy", TimeoutMS: 200}, // shows on hover only
		{Action: ActExtractText, Selector: "div[", TimeoutMS: 200},
		{Action: ActWaitForSelector, Selector: "#no-such-thing", TimeoutMS: 200},
		{Action: ActWaitForSelector, Selector: "button.destroy", State: "attached"},
		{Action: ActExtractText, Selector: "h1, #never"},
	}, false)
	if err != nil {
		t.Fatal(err)
	}
	text := func(i int) string {
		t.Helper()
		r := res.Results[i]
		if r.Text == nil {
			t.Fatalf("step %d: no text: %v", i, r.Err)
		}
		return *r.Text
	}
	if got := text(0); got != "write the note" {
		t.Errorf("nested descendant query: %q", got)
	}
	if got := text(1); got != "buy milk" {
		t.Errorf("child combinator to the host: %q", got)
	}
	if airlock.ReasonOf(res.Results[2].Err) != "no_match" {
		t.Errorf("unknown tag: %v", res.Results[2].Err)
	}
	if !res.Results[3].OK {
		t.Errorf("click the first todo's checkbox: %v", res.Results[3].Err)
	}
	if got := text(4); got != "2 items left" {
		t.Errorf("after completing one, count %q", got)
	}
	if e := res.Results[5].Err; airlock.CodeOf(e) != airlock.CodeNotFound || airlock.ReasonOf(e) != "no_match" || !strings.Contains(e.Error(), "#no-such-thing") {
		t.Errorf("no element: %v (%s)", e, airlock.CodeOf(e))
	}
	if e := res.Results[6].Err; airlock.ReasonOf(e) != "not_visible" || !strings.Contains(e.Error(), "li:nth-child(3) .destroy") {
		t.Errorf("hidden element: %v", e)
	}
	if e := res.Results[7].Err; airlock.ReasonOf(e) != "bad_selector" {
		t.Errorf("bad selector: %v", e)
	}
	if e := res.Results[8].Err; airlock.ReasonOf(e) != "wait_for_timeout" || !strings.Contains(e.Error(), "no element matches") {
		t.Errorf("wait_for_selector of nothing: %v", e)
	}
	if !res.Results[9].OK {
		t.Errorf("attached hidden delete button: %v", res.Results[9].Err)
	}
	if got := text(10); got != "todos" {
		t.Errorf("selector list: %q", got)
	}
}

// TestReadApp: read of a rendered single-page app returns its main
// visible content, shadow roots included: on the todo app with three
// todos, the todos and the count, not only the footer.
func TestReadApp(t *testing.T) {
	t.Parallel()
	base := serveApps(t)
	s, _ := open(t, nil)
	addTodos(t, s, base+"/todo/", "buy milk", "write the note", "ship it")
	r, err := s.Read(testCtx(t), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("read: %q\n%s", r.Title, r.Markdown)
	for _, want := range []string{"buy milk", "write the note", "ship it", "3 items left", "todos", "Double-click to edit a todo"} {
		if !strings.Contains(r.Markdown, want) {
			t.Errorf("read misses %q:\n%s", want, r.Markdown)
		}
	}
	if strings.Contains(r.Markdown, "×") {
		t.Errorf("read shows the hidden Delete buttons:\n%s", r.Markdown)
	}
}

// TestQueryDeepSemantics: the selector grammar of the shadow-piercing
// query: combinators outside strings and parentheses, sibling
// combinators within one parent, lists, tree order with a host's shadow
// tree before its light children, closed roots not entered.
func TestQueryDeepSemantics(t *testing.T) {
	t.Parallel()
	site := serve(t, func(w http.ResponseWriter, r *http.Request) {
		html(w, `<title>Q</title>
<div id="host"><p class="light">light child</p></div>
<div id="closed"></div>
<section><h2>A</h2><p class="sib">after h2</p><p class="sib2">second</p></section>
<p data-x="a > b, c">quoted</p>
<script>
const open = document.getElementById("host").attachShadow({mode: "open"});
open.innerHTML = '<div class="wrap"><p class="inner">shadow first</p><slot></slot></div>';
const inner = open.querySelector(".wrap").appendChild(document.createElement("span"));
inner.attachShadow({mode: "open"}).innerHTML = '<b class="deep">two levels</b>';
document.getElementById("closed").attachShadow({mode: "closed"}).innerHTML = '<i class="secret">closed</i>';
</script>`)
	})
	s, _ := open(t, nil)
	do(t, s, Op{Kind: KindNavigate, URL: site.URL + "/"})
	for _, tc := range []struct{ sel, want, reason string }{
		{sel: "p", want: "shadow first"}, // the host's shadow tree before its light child
		{sel: "#host p.light", want: "light child"},
		{sel: "#host > .wrap > p", want: "shadow first"},
		{sel: "#host .deep", want: "two levels"},
		{sel: ".wrap > span > b", want: "two levels"},
		{sel: "body > div .deep", want: "two levels"},
		{sel: "h2 + p", want: "after h2"},
		{sel: "h2 ~ .sib2", want: "second"},
		{sel: `p[data-x="a > b, c"]`, want: "quoted"},
		{sel: "section :is(h2 + p)", want: "after h2"},
		{sel: ".nothing, #host .deep", want: "two levels"},
		{sel: "div div div div div .deep", reason: "no_match"},
		{sel: ".secret", reason: "no_match"},
		{sel: ".wrap + .deep", reason: "no_match"},
		{sel: "> p", reason: "bad_selector"},
		{sel: "p >", reason: "bad_selector"},
		{sel: "p[", reason: "bad_selector"},
	} {
		t.Run(tc.sel, func(t *testing.T) {
			res, err := s.Interact(testCtx(t), []Action{{Action: ActExtractText, Selector: tc.sel, TimeoutMS: 150}}, false)
			if err != nil {
				t.Fatal(err)
			}
			r := res.Results[0]
			if tc.reason != "" {
				if airlock.ReasonOf(r.Err) != airlock.Reason(tc.reason) {
					t.Errorf("got %v, want reason %s", r.Err, tc.reason)
				}
				return
			}
			if r.Text == nil || *r.Text != tc.want {
				t.Errorf("got %v (%v), want %q", r.Text, r.Err, tc.want)
			}
		})
	}
}

// TestReadKeepsArticle: on an article page, whose visible text is mostly
// the article, read keeps the extractor's Markdown (links, emphasis, no
// navigation) rather than the rendered text.
func TestReadKeepsArticle(t *testing.T) {
	t.Parallel()
	para := strings.Repeat("The committee met on Tuesday and agreed the plan in full, with two amendments. ", 4)
	var nav, body strings.Builder
	for i := range 12 {
		fmt.Fprintf(&nav, `<li><a href="/s%d">Section %d</a></li>`, i, i)
	}
	for i := range 6 {
		fmt.Fprintf(&body, `<p>%s <strong>Point %d.</strong> See <a href="/ref%d">reference %d</a>.</p>`, para, i, i, i)
	}
	site := serve(t, func(w http.ResponseWriter, r *http.Request) {
		html(w, `<title>Minutes</title><header><nav><ul>`+nav.String()+`</ul></nav></header>
<main><article><h1>Minutes of the meeting</h1>`+body.String()+`</article></main><footer>© the committee</footer>`)
	})
	s, _ := open(t, nil)
	do(t, s, Op{Kind: KindNavigate, URL: site.URL + "/"})
	r, err := s.Read(testCtx(t), "")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(r.Markdown, "**Point 3.**") || !strings.Contains(r.Markdown, "[reference 5](") || strings.Contains(r.Markdown, "Section 7") {
		t.Errorf("read replaced the article's Markdown:\n%s", r.Markdown)
	}
}

func TestKeptLittle(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		markdown, visible int
		want              bool
	}{
		{0, 0, false},
		{0, 1, true},
		{90, 200, true},
		{100, 200, false},
		{1999, 4000, true},
		{2000, 4001, false},
		{2000, 8001, true},
		{5000, 12000, false},
	} {
		if got := keptLittle(strings.Repeat("é", tc.markdown), strings.Repeat("x", tc.visible)); got != tc.want {
			t.Errorf("keptLittle(%d, %d) = %v, want %v", tc.markdown, tc.visible, got, tc.want)
		}
	}
}
