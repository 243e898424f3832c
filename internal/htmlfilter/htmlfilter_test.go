package htmlfilter

import (
	"strings"
	"testing"

	"github.com/airlockhq/airlock"
)

const page = `<!doctype html><html><head><meta charset="iso-8859-1"><title>T</title><style>p{}</style></head><body>
<header>Head</header><nav class="menu"><a href="/">Home</a></nav>
<div class="sidebar"><main id="m"><h1>Main</h1><p>Body text</p><aside>Aside</aside><!-- note --><script>x()</script>
<div class="ad">Ad</div><noscript>NS</noscript></main></div><footer>Foot</footer></body></html>`

func TestApply(t *testing.T) {
	for _, c := range []struct {
		name      string
		o         Options
		want, not []string
		docHas    []string
		docHasNot []string
	}{
		{name: "main content", o: Options{},
			want:   []string{`<main id="m">`, "<h1>Main</h1>", "Body text"},
			not:    []string{"Head", "Home", "Foot", "Aside", ">Ad<", "note", "x()", "NS", "<title>", "p{}"},
			docHas: []string{"<title>T</title>", "Head", "Aside", `<meta charset="utf-8"/>`}, docHasNot: []string{"iso-8859-1"}},
		{name: "whole page", o: Options{WholePage: true},
			want: []string{"Head", "Home", "Body text", "Aside", ">Ad<", "Foot"},
			not:  []string{"note", "x()", "NS", "<title>", "p{}"}},
		{name: "exclude", o: Options{Exclude: []string{".ad", "header"}, WholePage: true},
			want: []string{"Home", "Body text"}, not: []string{"Head", ">Ad<"}, docHasNot: []string{"Head", ">Ad<"}},
		{name: "include nav and h1, document order", o: Options{Include: []string{"h1", "nav"}},
			want: []string{`<nav class="menu"><a href="/">Home</a></nav><h1>Main</h1>`}, not: []string{"Body text", "Foot"},
			docHas: []string{"<title>T</title>"}, docHasNot: []string{"Body text"}},
		{name: "include nested: the outer one once", o: Options{Include: []string{"main", "p"}},
			want: []string{"Body text"}, not: []string{"Head"}},
		{name: "include then exclude", o: Options{Include: []string{"main"}, Exclude: []string{"p"}},
			want: []string{"<h1>Main</h1>"}, not: []string{"Body text"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, err := Apply([]byte(page), "text/html", c.o)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range c.want {
				if !strings.Contains(r.HTML, w) {
					t.Errorf("HTML lacks %q: %s", w, r.HTML)
				}
			}
			for _, n := range c.not {
				if strings.Contains(r.HTML, n) {
					t.Errorf("HTML has %q: %s", n, r.HTML)
				}
			}
			for _, w := range c.docHas {
				if !strings.Contains(string(r.Document), w) {
					t.Errorf("Document lacks %q: %s", w, r.Document)
				}
			}
			for _, n := range c.docHasNot {
				if strings.Contains(string(r.Document), n) {
					t.Errorf("Document has %q: %s", n, r.Document)
				}
			}
			if n := strings.Count(r.HTML, "Body text"); n > 1 {
				t.Errorf("Body text %d times: %s", n, r.HTML)
			}
		})
	}
}

func TestApplyCharset(t *testing.T) {
	r, err := Apply([]byte("<html><body><main><p>caf\xe9</p></main></body></html>"), "text/html; charset=iso-8859-1", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(r.HTML, "café") || !strings.Contains(string(r.Document), "café") {
		t.Errorf("HTML %q, document %q: want UTF-8 café", r.HTML, r.Document)
	}
}

func TestBadSelector(t *testing.T) {
	for _, o := range []Options{{Include: []string{"p["}}, {Exclude: []string{"main", ")"}}} {
		_, err := Apply([]byte(page), "", o)
		if airlock.CodeOf(err) != airlock.CodeInvalid || airlock.ReasonOf(err) != airlock.ReasonBadSelector {
			t.Errorf("%+v: %v, want invalid bad_selector", o, err)
		}
	}
}

// FuzzApply: no input panics, and the cleaned HTML never holds a script.
func FuzzApply(f *testing.F) {
	f.Add([]byte(page), "main")
	f.Add([]byte("<script>a</script><p>b"), "p")
	f.Fuzz(func(t *testing.T, body []byte, sel string) {
		r, err := Apply(body, "text/html", Options{Include: []string{sel}})
		if err == nil && strings.Contains(strings.ToLower(r.HTML), "<script") {
			t.Fatalf("cleaned HTML holds a script: %q", r.HTML)
		}
	})
}

// TestDeepNesting: a document as deep as the parser takes is filtered; a
// deeper one is refused (upstream, html), not a panic.
func TestDeepNesting(t *testing.T) {
	doc := func(depth int) []byte {
		var b strings.Builder
		b.WriteString("<html><body>")
		for range depth {
			b.WriteString(`<div class="menu">`)
		}
		b.WriteString("<main>deep</main>")
		for range depth {
			b.WriteString(`</div>`)
		}
		return []byte(b.String())
	}
	r, err := Apply(doc(500), "text/html", Options{Include: []string{"div"}, Exclude: []string{"span"}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(r.HTML, "deep") {
		t.Errorf("lost the content")
	}
	if r, err = Apply(doc(500), "text/html", Options{}); err != nil || r.HTML != "<main>deep</main>" {
		t.Errorf("main content of a deep page = %q, %v", r.HTML, err)
	}
	_, err = Apply(doc(20000), "text/html", Options{})
	if airlock.CodeOf(err) != airlock.CodeUpstream || airlock.ReasonOf(err) != airlock.ReasonHTML {
		t.Errorf("too deep: %v, want upstream html", err)
	}
}
