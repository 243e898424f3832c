package extract

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// mdOf converts an HTML fragment (the content of a <body>) to Markdown.
func mdOf(t testing.TB, fragment string) string {
	t.Helper()
	doc, err := html.Parse(strings.NewReader("<html><body>" + fragment + "</body></html>"))
	if err != nil {
		t.Fatal(err)
	}
	md, err := toMarkdown(context.Background(), doc, "https://example.com/dir/page.html")
	if err != nil {
		t.Fatalf("toMarkdown: %v", err)
	}
	return md
}

func TestMarkdownConstructs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, html, want string
	}{
		{"heading levels", `<h1>One</h1><h3>Three</h3><h6>Six</h6>`, "# One\n\n### Three\n\n###### Six"},
		{"heading permalinks dropped", `<h2><a href="#s1">Setup</a><a class="headerlink" href="#setup">¶</a></h2><h3>Next¶</h3>`,
			"## [Setup](https://example.com/dir/page.html#s1)\n\n### Next"},
		{"heading keeps no emphasis", `<h2><strong>Bold</strong> title</h2>`, "## Bold title"},
		{"nested lists", `<ul><li>a<ul><li>b<ol><li>c</li></ol></li></ul></li><li>d</li></ul>`,
			"- a\n  - b\n    1. c\n- d"},
		{"items of links only", `<ul><li><a href="/a">A</a></li><li><a href="/b"><b>B</b></a> </li></ul>`,
			"- [A](https://example.com/a)\n- [**B**](https://example.com/b)"},
		{"list after paragraph", `<p>Intro</p><ul><li>x</li><li>y</li></ul><p>After</p>`, "Intro\n\n- x\n- y\n\nAfter"},
		{"ordered list start", `<ol start="9"><li>nine</li><li>ten</li><li>eleven</li></ol>`, "9. nine\n10. ten\n11. eleven"},
		{"nested under wide marker", `<ol start="10"><li>ten<ul><li>sub</li></ul></li></ol>`, "10. ten\n    - sub"},
		{"empty items and junk in lists", `<ul><li></li><br><li>a</li><!-- c --><li> </li></ul><p>b</p>`, "- a\n\nb"},
		{"item holding only a list", `<ul><li><ol><li>x</li></ol></li></ul>`, "- 1. x"},
		{"list directly in list", `<ul><li>a</li><ul><li>b</li></ul></ul>`, "- a\n  - b"},
		{"item with paragraphs", `<ul><li><p>one</p><p>two</p></li><li>three</li></ul>`, "- one\n\n  two\n\n- three"},
		{"code language class", `<pre><code class="language-go">x := 1</code></pre>`, "```go\nx := 1\n```"},
		{"code lang- on pre", `<pre class="lang-python">print(1)</pre>`, "```python\nprint(1)\n```"},
		{"code data-lang", `<pre data-lang="rust"><code>fn main() {}</code></pre>`, "```rust\nfn main() {}\n```"},
		{"code highlight- wrapper", `<div class="highlight-sh notranslate"><div class="highlight"><pre>ls -l</pre></div></div>`, "```sh\nls -l\n```"},
		{"code highlight-source", `<div class="highlight highlight-source-js"><pre>a()</pre></div>`, "```js\na()\n```"},
		{"code bare language class", `<pre class="javascript" style="x">f()</pre><div class="python"><pre>g()</pre></div><pre class="c">h()</pre>`,
			"```javascript\nf()\n```\n\n```\ng()\n```\n\n```\nh()\n```"},
		{"code without language", `<pre>  indented
    more</pre>`, "```\n  indented\n    more\n```"},
		{"code holding a fence", "<pre><code>```\nx\n```</code></pre>", "````\n```\nx\n```\n````"},
		{"code line breaks", `<pre>a<br>b</pre>`, "```\na\nb\n```"},
		{"table with header", `<table><thead><tr><th>Key</th><th>Value</th></tr></thead><tbody><tr><td>a</td><td>1</td></tr></tbody></table>`,
			"| Key | Value |\n| --- | --- |\n| a | 1 |"},
		{"table header promoted", `<table><tr><td>a</td><td>b</td></tr><tr><td>c</td><td>d</td></tr></table>`,
			"| a | b |\n| --- | --- |\n| c | d |"},
		{"table colspan", `<table><tr><th>A</th><th>B</th><th>C</th></tr><tr><td colspan="2">wide</td><td>c</td></tr></table>`,
			"| A | B | C |\n| --- | --- | --- |\n| wide |  | c |"},
		{"table rowspan", `<table><tr><th>A</th><th>B</th></tr><tr><td rowspan="2">tall</td><td>1</td></tr><tr><td>2</td></tr></table>`,
			"| A | B |\n| --- | --- |\n| tall | 1 |\n|  | 2 |"},
		{"table cell breaks and pipes", `<table><tr><th>A</th><th>B</th></tr><tr><td><p>one</p><p>two</p></td><td>x|y<br>z</td></tr></table>`,
			"| A | B |\n| --- | --- |\n| one<br>two | x\\|y<br>z |"},
		{"table th in body rows", `<table><thead><tr><th>Key</th><th>Value</th></tr></thead><tr><th>a</th><td>1</td></tr><tr><th scope="row">b</th><td>2</td></tr></table>`,
			"| Key | Value |\n| --- | --- |\n| a | 1 |\n| b | 2 |"},
		{"table of row headers has an empty head row", `<table><tr><th>Name</th><td>Ada</td></tr><tr><th>Born</th><td>1815</td></tr></table>`,
			"|  |  |\n| --- | --- |\n| Name | Ada |\n| Born | 1815 |"},
		{"table head row with an empty corner", `<table><tr><td></td><th>A</th><th>B</th></tr><tr><th>x</th><td>1</td><td>2</td></tr></table>`,
			"|  | A | B |\n| --- | --- | --- |\n| x | 1 | 2 |"},
		{"table cell inline markup", `<table><tr><th>A</th><th>B</th></tr><tr><td><b>bold <i>it</i></b> <a href="/l"><code>c|d</code></a></td><td><img src="/i.png" alt="pic"> <del>old</del></td></tr></table>`,
			"| A | B |\n| --- | --- |\n| **bold *it*** [`c\\|d`](https://example.com/l) | ![pic](https://example.com/i.png) ~~old~~ |"},
		{"table title and source rows around it", `<table><tr><th colspan="3"><div><ul><li>v</li><li>e</li></ul></div><p>Largest cities</p></th></tr><tr><th>Rank</th><th>Name</th><th>Pop.</th></tr><tr><td>1</td><td>Auckland</td><td>1,628,900</td></tr><tr><td colspan="3">Source: census</td></tr></table>`,
			"- v\n- e\n\nLargest cities\n\n| Rank | Name | Pop. |\n| --- | --- | --- |\n| 1 | Auckland | 1,628,900 |\n\nSource: census"},
		{"table title row in its head", `<table><thead><tr><th colspan="2">Prices</th></tr><tr><th>A</th><th>B</th></tr></thead><tbody><tr><td>1</td><td>2</td></tr></tbody></table>`,
			"Prices\n\n| A | B |\n| --- | --- |\n| 1 | 2 |"},
		{"table under a title row keeps its first row as data", `<table><tr><td colspan="2">By changesets</td></tr><tr><td>Ann</td><td>63</td></tr><tr><td>Bob</td><td>56</td></tr></table>`,
			"By changesets\n\n|  |  |\n| --- | --- |\n| Ann | 63 |\n| Bob | 56 |"},
		{"table short lists in cells stay", `<table><tr><th>Founder</th><td>Netscape</td></tr><tr><th>Divisions</th><td><div><ul><li><a href="/c">Corporation</a></li><li> Foundation </li></ul></div></td></tr></table>`,
			"|  |  |\n| --- | --- |\n| Founder | Netscape |\n| Divisions | - [Corporation](https://example.com/c)<br>- Foundation |"},
		{"table ordered list in a cell keeps its numbers", `<table><tr><th>Step</th><th>Do</th></tr><tr><td>1</td><td><ol start="3"><li>mix</li><li>bake</li></ol></td></tr></table>`,
			"| Step | Do |\n| --- | --- |\n| 1 | 3. mix<br>4. bake |"},
		{"table nested lists in cells degrade", `<table><tr><th>A</th><th>B</th></tr><tr><td><ul><li>x<ul><li>y</li></ul></li></ul></td><td>z</td></tr></table>`,
			"A\n\nB\n\n- x\n  - y\n\nz"},
		{"table section row inside stays", `<table><tr><th>A</th><th>B</th></tr><tr><td colspan="2">Group</td></tr><tr><td>1</td><td>2</td></tr></table>`,
			"| A | B |\n| --- | --- |\n| Group |  |\n| 1 | 2 |"},
		{"table caption", `<table><caption>Prices</caption><tr><th>A</th><th>B</th></tr><tr><td>1</td><td>2</td></tr></table>`,
			"Prices\n\n| A | B |\n| --- | --- |\n| 1 | 2 |"},
		{"table of code degrades, gutter dropped", `<table><tr><td class="gutter"><pre>1
2</pre></td><td><pre class="lang-c">int a;
int b;</pre></td></tr></table>`, "```c\nint a;\nint b;\n```"},
		{"one-row table of numbers kept", `<table><tr><th>1</th><th>2</th></tr><tr><td>3</td><td>4</td></tr></table>`,
			"| 1 | 2 |\n| --- | --- |\n| 3 | 4 |"},
		{"nested table degrades", `<table><tr><td>outer</td><td><table><tr><th>x</th><th>y</th></tr><tr><td>1</td><td>2</td></tr></table></td></tr></table>`,
			"outer\n\n| x | y |\n| --- | --- |\n| 1 | 2 |"},
		{"one-column table degrades", `<table><tr><td><img src="a.png" alt="A figure"></td></tr><tr><td>Its caption</td></tr></table>`,
			"![A figure](https://example.com/dir/a.png)\n\nIts caption"},
		{"blockquote paragraphs", `<blockquote><p>one</p><p>two</p></blockquote>`, "> one\n>\n> two"},
		{"blockquote with list", `<blockquote><ul><li>a</li><li>b</li></ul></blockquote>`, "> - a\n> - b"},
		{"image alt and title", `<p><img src="/cat.png" alt="A [cat]" title="Cat"></p>`, `![A \[cat\]](https://example.com/cat.png "Cat")`},
		{"image without src keeps alt", `<img alt="only alt">`, "![only alt]()"},
		{"link with title", `<a href="other.html" title="The &quot;other&quot; page">other</a>`, `[other](https://example.com/dir/other.html "The \"other\" page")`},
		{"link around image", `<a href="/big.png"><img src="/small.png" alt="thumb"></a>`, "[![thumb](https://example.com/small.png)](https://example.com/big.png)"},
		{"link around blocks", `<a href="/post"><h3>Title</h3><p>Summary</p></a><a href="/two"><div>Only <b>text</b></div></a>`,
			"### [Title](https://example.com/post)\n\nSummary\n\n[Only **text**](https://example.com/two)"},
		{"javascript link is text", `<a href="javascript:void(0)">Click</a> here`, "Click here"},
		{"link destination escaped", `<a href="/a b(c)">x</a>`, "[x](https://example.com/a%20b%28c%29)"},
		{"empty link dropped", `a<a href="/x"> </a>b`, "a b"},
		{"emphasis keeps spaces outside", `a<em> b </em>c <strong>d</strong><del>e</del>`, "a *b* c **d**~~e~~"},
		{"nested emphasis of one kind", `<strong><b>bold</b> <em>both</em></strong> <i><em>it</em></i>`, "**bold *both*** *it*"},
		{"inline code", "<p>Use <code>a `b`</code> or <kbd>Ctrl</kbd></p>", "Use `` a `b` `` or `Ctrl`"},
		{"hard break", `<p>a<br>b</p>`, "a  \nb"},
		{"horizontal rule", `<p>a</p><hr><p>b</p>`, "a\n\n---\n\nb"},
		{"escape heading", `<p># not a heading</p>`, `\# not a heading`},
		{"escape list markers", `<p>- not a list</p><p>1. not a list</p><p>+ no</p>`, "\\- not a list\n\n1\\. not a list\n\n\\+ no"},
		{"escape quote and table", `<p>&gt; not a quote</p><p>| not | a row |</p>`, "\\> not a quote\n\n\\| not | a row |"},
		{"escape inline markup", `<p>*not em* [not](link) <b>x</b> ` + "`code`" + ` ~~no~~ \</p>`,
			"\\*not em\\* \\[not\\](link) **x** \\`code\\` \\~\\~no\\~\\~ \\\\"},
		{"escape html", `<p>&lt;div&gt; and a &lt; b</p>`, `\<div> and a < b`},
		{"underscores inside words stay", `<p>snake_case and _under_</p>`, `snake_case and \_under\_`},
		{"escape setext underline", `<p>title<br>===</p>`, "title  \n\\==="},
		{"escape thematic break", `<p>a<br>---</p>`, "a  \n\\---"},
		{"span around blocks", `<span><p>one</p><p>two</p></span>`, "one\n\ntwo"},
		{"spans around blocks, nested", `<span> <span><div><p>one</p></div><div><h3>H</h3><ul><li>a</li><li>b</li></ul></div></span></span>`,
			"one\n\n### H\n\n- a\n- b"},
		{"link around blocks in a span", `<a href="/x"><span><h3>T</h3><p>S</p></span></a>`, "### [T](https://example.com/x)\n\nS"},
		{"empty blocks in spans stay inline", `<span><cite><a href="/x">Title</a> <div class="shield"><div></div></div>.</cite></span> end`,
			"[Title](https://example.com/x) . end"},
		{"blocks in skipped elements stay out", `<p>a <span><noscript><div>no</div></noscript>b</span> c</p>`, "a b c"},
		{"definition list", `<dl><dt>Term</dt><dd>Meaning</dd></dl>`, "Term\n: Meaning"},
		{"definition after a list is its own block", `<ul><li>item</li></ul><dl><dd>indented</dd></dl><ul><li>next</li></ul>`, "- item\n\n: indented\n\n- next"},
		{"definition list, blocks and two meanings", `<p>Before</p><dl><dt>Term</dt><dd>One</dd><dd>Two</dd><dt>T2</dt><dd><p>M2</p><ul><li>x</li></ul></dd><dd>M3</dd></dl><p>After</p>`,
			"Before\n\nTerm\n: One\n: Two\n\nT2\n: M2\n  - x\n\n: M3\n\nAfter"},
		{"scripts skipped", `<p>a<script>x()</script>b</p><style>p{}</style>`, "ab"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := mdOf(t, tt.html); got != tt.want {
				t.Errorf("markdown of %s\ngot:\n%s\nwant:\n%s", tt.html, got, tt.want)
			}
		})
	}
}

// TestMarkdownRowGroup: a row group whose table the extractor dropped
// is still a table.
func TestMarkdownRowGroup(t *testing.T) {
	t.Parallel()
	doc, err := html.Parse(strings.NewReader(`<table><tbody><tr><th>A</th><th>B</th></tr><tr><td>1</td><td>2</td></tr></tbody></table>`))
	if err != nil {
		t.Fatal(err)
	}
	var tbody *html.Node
	walkElements(doc, func(n *html.Node) bool {
		if n.Data == "tbody" {
			tbody = n
		}
		return tbody == nil
	})
	tbody.Parent.RemoveChild(tbody)
	root := &html.Node{Type: html.ElementNode, Data: "div"}
	root.AppendChild(tbody)
	md, err := toMarkdown(context.Background(), root, "")
	if want := "| A | B |\n| --- | --- |\n| 1 | 2 |"; err != nil || md != want {
		t.Errorf("got %q, %v; want %q", md, err, want)
	}
}

// TestMarkdownBuiltTrees: trees built by an extractor rather than the
// parser (tag names without atoms, atoms without tag names) convert alike.
func TestMarkdownBuiltTrees(t *testing.T) {
	t.Parallel()
	root := &html.Node{Type: html.ElementNode, Data: "div"}
	h := &html.Node{Type: html.ElementNode, DataAtom: atom.H3}
	h.AppendChild(&html.Node{Type: html.TextNode, Data: "Title"})
	ul := &html.Node{Type: html.ElementNode, Data: "ul"}
	li := &html.Node{Type: html.ElementNode, Data: "li"}
	li.AppendChild(&html.Node{Type: html.TextNode, Data: "item"})
	ul.AppendChild(li)
	root.AppendChild(h)
	root.AppendChild(ul)
	md, err := toMarkdown(context.Background(), root, "")
	if want := "### Title\n\n- item"; err != nil || md != want {
		t.Errorf("got %q, %v; want %q", md, err, want)
	}
}

// TestMarkdownReadsBack checks that the Markdown reads back as the same
// structure, with the test's own Markdown reader.
func TestMarkdownReadsBack(t *testing.T) {
	t.Parallel()
	md := mdOf(t, `<h2>Title</h2><ul><li>one<ul><li>two</li></ul></li></ul><pre>code</pre>
<table><tr><th>a</th><th>b</th></tr><tr><td>c</td><td><ul><li>d</li><li>e</li></ul></td></tr></table><p>1. plain # text</p>`)
	got := markdownStructure(md)
	want := []structElem{
		{"heading", 2, "title"}, {"list item", 0, "two"}, {"list item", 0, "one"}, {"pre", 0, "code"},
		{"table cell", 0, "a"}, {"table cell", 0, "b"}, {"table cell", 0, "c"}, {"table cell", 0, "d e"},
		{"list item", 0, "d"}, {"list item", 0, "e"},
	}
	if len(got) != len(want) {
		t.Fatalf("structure of\n%s\ngot %v, want %v", md, got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("element %d: got %v, want %v", i, got[i], want[i])
		}
	}
}

// TestMarkdownDeepNesting: nesting past the caps neither recurses without
// bound nor indents without bound, and keeps the text.
func TestMarkdownDeepNesting(t *testing.T) {
	t.Parallel()
	const depth = 5000
	root := &html.Node{Type: html.ElementNode, Data: "div"}
	// Built by hand: the HTML parser would refuse this depth.
	cur := root
	for range depth {
		for _, tag := range []string{"blockquote", "ul", "li"} {
			n := &html.Node{Type: html.ElementNode, Data: tag}
			cur.AppendChild(n)
			cur = n
		}
	}
	cur.AppendChild(&html.Node{Type: html.TextNode, Data: "deep text"})
	md, err := toMarkdown(context.Background(), root, "")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md, "deep text") {
		t.Errorf("text lost: %.200q", md)
	}
	for _, l := range strings.Split(md, "\n") {
		if len(l) > 16*4+len("deep text") {
			t.Errorf("line of %d bytes: %.100q", len(l), l)
		}
	}
}

// TestMarkdownCancelled: a cancelled context stops the conversion.
func TestMarkdownCancelled(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	for range 10000 {
		b.WriteString("<p>para <b>bold</b></p>")
	}
	doc, _ := html.Parse(strings.NewReader(b.String()))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := toMarkdown(ctx, doc, ""); !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
}

func FuzzMarkdown(f *testing.F) {
	for _, s := range []string{
		`<ul><li>a<ol start="-3"><li>b</li></ol></li></ul>`,
		`<table><tr><td colspan="1000000" rowspan="99999">x</td></tr><tr><td>y</td></tr></table>`,
		`<pre class="language-">` + "```" + `</pre><code>` + "``" + `</code>`,
		`<blockquote><table><tbody><tr><th><pre>x</pre></th></tr></tbody></table></blockquote>`,
		`<a href="javascript:x"><img src="data:image/png;base64,AAAA" alt="]("></a>`,
		`<h7>x</h7><h1></h1><p>#</p><p>1)</p>`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		doc, err := html.Parse(strings.NewReader(s))
		if err != nil {
			return
		}
		md, err := toMarkdown(context.Background(), doc, "https://example.com/")
		if err != nil {
			t.Fatalf("toMarkdown: %v", err)
		}
		if !utf8.ValidString(md) && utf8.ValidString(s) {
			t.Errorf("invalid UTF-8 from valid input")
		}
		if len(md) > 64*len(s)+4096 {
			t.Errorf("%d bytes of Markdown from %d of HTML", len(md), len(s))
		}
		// No text is lost: every run of letters of the page's text is
		// in the Markdown.
		lower := strings.ToLower(md)
		for _, w := range strings.FieldsFunc(strings.ToLower(flatText(doc)), func(r rune) bool { return !unicode.IsLetter(r) }) {
			if !strings.Contains(lower, w) {
				t.Fatalf("%q lost from the Markdown:\n%s", w, md)
			}
		}
	})
}

// BenchmarkMarkdown converts pages of growing size; time per section
// staying flat across sizes is the linear time the converter promises.
func BenchmarkMarkdown(b *testing.B) {
	section := `<h2>Part</h2><p>Text with <a href="/x">a link</a>, <em>emphasis</em> and <code>code</code>.</p>
<ul><li>one<ul><li>nested <b>item</b></li></ul></li><li>two</li></ul>
<blockquote><p>quoted</p><ol start="3"><li>x</li></ol></blockquote>
<pre class="language-go">func f() {}</pre>
<table><tr><th>a</th><th>b</th></tr><tr><td colspan="2">wide</td></tr><tr><td>1</td><td><p>2</p><p>3</p></td></tr></table>`
	for _, n := range []int{100, 800, 6400} {
		doc, err := html.Parse(strings.NewReader("<body>" + strings.Repeat(section, n) + "</body>"))
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("sections=%d", n), func(b *testing.B) {
			for b.Loop() {
				if _, err := toMarkdown(context.Background(), doc, "https://example.com/"); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/section")
		})
	}
}

// TestMarkdownNestedInlineLinear: inline markup nested hundreds deep
// around a long text does not copy the text once per level.
func TestMarkdownNestedInlineLinear(t *testing.T) {
	text := strings.Repeat("word ", 20000)
	root := &html.Node{Type: html.ElementNode, Data: "p"}
	cur := root
	for i := range 400 {
		tag := []string{"b", "i", "a", "span"}[i%4]
		n := &html.Node{Type: html.ElementNode, Data: tag}
		if tag == "a" {
			n.Attr = []html.Attribute{{Key: "href", Val: "/x"}}
		}
		cur.AppendChild(n)
		cur = n
	}
	cur.AppendChild(&html.Node{Type: html.TextNode, Data: text})
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	md, err := toMarkdown(context.Background(), root, "https://example.com/")
	runtime.ReadMemStats(&after)
	if err != nil || !strings.Contains(md, "word word") {
		t.Fatalf("toMarkdown: %v, %.100q", err, md)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > uint64(40*len(text)) {
		t.Errorf("allocated %d bytes for %d bytes of text", alloc, len(text))
	}
}

// TestMarkdownNestedTablesLinear: tables nested in cells cost work in
// proportion to their size, not to size times depth (allocations, which
// the walks make, stand for work here: doubling the depth may not much
// more than double them).
func TestMarkdownNestedTablesLinear(t *testing.T) {
	build := func(depth int) *html.Node {
		root := &html.Node{Type: html.ElementNode, Data: "div"}
		cur := root
		for range depth {
			table, tr, td1, td2 := &html.Node{Type: html.ElementNode, Data: "table"},
				&html.Node{Type: html.ElementNode, Data: "tr"},
				&html.Node{Type: html.ElementNode, Data: "td"},
				&html.Node{Type: html.ElementNode, Data: "td"}
			for range 50 {
				span := &html.Node{Type: html.ElementNode, Data: "span"}
				span.AppendChild(&html.Node{Type: html.TextNode, Data: "w "})
				td1.AppendChild(span)
			}
			tr.AppendChild(td1)
			tr.AppendChild(td2)
			table.AppendChild(tr)
			cur.AppendChild(table)
			cur = td2
		}
		cur.AppendChild(&html.Node{Type: html.ElementNode, Data: "pre"})
		return root
	}
	alloc := func(depth int) uint64 {
		n := build(depth)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		if _, err := toMarkdown(context.Background(), n, ""); err != nil {
			t.Fatal(err)
		}
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc
	}
	small, large := alloc(100), alloc(200)
	if large > 3*small {
		t.Errorf("depth 100: %d bytes allocated, depth 200: %d", small, large)
	}
}
