package render

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/airlockhq/airlock"
)

// The package's golden tests share one -update flag: defined here unless
// another test file of the package defined it first (as a package-level
// variable, initialised before this init runs).
func init() {
	if flag.Lookup("update") == nil {
		flag.Bool("update", false, "rewrite the golden files under testdata")
	}
}

func updating() bool {
	f := flag.Lookup("update")
	return f != nil && f.Value.String() == "true"
}

const renderDir = "testdata/render"

// goldenExt maps a format to the extension of its golden files.
var goldenExt = map[string]string{
	FormatJSON:     "json",
	FormatJSONL:    "jsonl",
	FormatMarkdown: "md",
	FormatText:     "txt",
	FormatOrg:      "org",
}

type namedPage struct {
	name string
	page *airlock.Page
}

// loadRenderPages reads testdata/render/*.page.json, sorted by name.
func loadRenderPages(t testing.TB) []namedPage {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(renderDir, "*.page.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no %s/*.page.json", renderDir)
	}
	sort.Strings(files)
	var pages []namedPage
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var p airlock.Page
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&p); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		pages = append(pages, namedPage{strings.TrimSuffix(filepath.Base(f), ".page.json"), &p})
	}
	return pages
}

type searchInput struct {
	Query   string                 `json:"query"`
	Results []airlock.SearchResult `json:"results"`
}

func loadSearch(t testing.TB) searchInput {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(renderDir, "search.results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var in searchInput
	if err := json.Unmarshal(b, &in); err != nil {
		t.Fatal(err)
	}
	return in
}

// checkGolden compares got with the golden file, or rewrites it under
// -update.
func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join(renderDir, name)
	if updating() {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./internal/render -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s mismatch (-want +got):\n%s", path, diff)
	}
}

func pageList(nps []namedPage) []*airlock.Page {
	ps := make([]*airlock.Page, len(nps))
	for i, np := range nps {
		ps[i] = np.page
	}
	return ps
}

func TestRenderGolden(t *testing.T) {
	for _, np := range loadRenderPages(t) {
		for _, f := range []string{FormatJSON, FormatMarkdown, FormatText, FormatOrg} {
			t.Run(np.name+"/"+f, func(t *testing.T) {
				var b bytes.Buffer
				if err := Render(&b, f, np.page); err != nil {
					t.Fatalf("Render: %v", err)
				}
				checkGolden(t, np.name+".golden."+goldenExt[f], b.Bytes())
			})
		}
	}
}

func TestRenderCrawlGolden(t *testing.T) {
	pages := pageList(loadRenderPages(t))
	sum := &airlock.CrawlSummary{
		Pages:   len(pages),
		Skipped: []airlock.Skipped{{URL: "https://docs.example.org/private/", Reason: "robots"}},
		Queued:  9, Fetched: len(pages) + 1, Failed: 1, Bytes: 123456, ElapsedMS: 2345, PagesPerS: 2.13,
	}
	for _, f := range []string{FormatJSON, FormatJSONL, FormatMarkdown, FormatText, FormatOrg} {
		t.Run(f, func(t *testing.T) {
			var b bytes.Buffer
			if err := RenderCrawl(&b, f, pages, sum); err != nil {
				t.Fatalf("RenderCrawl: %v", err)
			}
			checkGolden(t, "crawl.golden."+goldenExt[f], b.Bytes())
		})
	}
}

func TestRenderSearchGolden(t *testing.T) {
	in := loadSearch(t)
	for _, f := range []string{FormatJSON, FormatJSONL, FormatMarkdown, FormatText, FormatOrg} {
		t.Run(f, func(t *testing.T) {
			var b bytes.Buffer
			if err := RenderSearch(&b, f, in.Query, in.Results); err != nil {
				t.Fatalf("RenderSearch: %v", err)
			}
			checkGolden(t, "search.golden."+goldenExt[f], b.Bytes())
		})
	}
}

func TestRenderEmpty(t *testing.T) {
	tests := []struct {
		name string
		run  func(*bytes.Buffer) error
		want string
	}{
		{"crawl org", func(b *bytes.Buffer) error { return RenderCrawl(b, "org", nil, nil) }, "#+TITLE: browse crawl — 0 pages\n"},
		{"crawl json", func(b *bytes.Buffer) error { return RenderCrawl(b, "json", nil, nil) }, "{\n  \"pages\": [],\n  \"summary\": null\n}\n"},
		{"crawl jsonl", func(b *bytes.Buffer) error { return RenderCrawl(b, "jsonl", nil, nil) }, ""},
		{"crawl md", func(b *bytes.Buffer) error { return RenderCrawl(b, "md", nil, nil) }, ""},
		{"search json", func(b *bytes.Buffer) error { return RenderSearch(b, "json", "q", nil) }, "{\n  \"query\": \"q\",\n  \"results\": []\n}\n"},
		{"search md", func(b *bytes.Buffer) error { return RenderSearch(b, "md", "q", nil) }, "# Search: q\n\nNo results.\n"},
		{"search text", func(b *bytes.Buffer) error { return RenderSearch(b, "text", "q", nil) }, "No results.\n"},
		{"search org", func(b *bytes.Buffer) error { return RenderSearch(b, "org", "q", nil) }, "#+TITLE: browse search — q\n"},
		{"page org", func(b *bytes.Buffer) error { return Render(b, "org", &airlock.Page{URL: "https://a.example/"}) },
			"* https://a.example/ :source:point:\n:PROPERTIES:\n:URL: https://a.example/\n:HOST: a.example\n:END:\n"},
		{"page md", func(b *bytes.Buffer) error { return Render(b, "md", &airlock.Page{URL: "https://a.example/"}) },
			"# https://a.example/\n\n<https://a.example/>\n"},
		{"page text", func(b *bytes.Buffer) error { return Render(b, "text", &airlock.Page{}) }, "untitled\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := tt.run(&b); err != nil {
				t.Fatal(err)
			}
			if got := b.String(); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestRenderJSONRoundTrip(t *testing.T) {
	for _, np := range loadRenderPages(t) {
		for _, f := range []string{FormatJSON, FormatJSONL} {
			t.Run(np.name+"/"+f, func(t *testing.T) {
				var b bytes.Buffer
				if err := Render(&b, f, np.page); err != nil {
					t.Fatal(err)
				}
				out := b.String()
				if !strings.HasSuffix(out, "\n") {
					t.Errorf("output does not end with a newline")
				}
				if f == FormatJSONL && strings.Count(out, "\n") != 1 {
					t.Errorf("jsonl output has %d lines, want 1", strings.Count(out, "\n"))
				}
				var got airlock.Page
				if err := json.Unmarshal(b.Bytes(), &got); err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(np.page, &got); diff != "" {
					t.Errorf("round trip (-want +got):\n%s", diff)
				}
			})
		}
	}
}

func TestRenderMarkdownAlias(t *testing.T) {
	for _, np := range loadRenderPages(t) {
		var md, markdown bytes.Buffer
		if err := Render(&md, "md", np.page); err != nil {
			t.Fatal(err)
		}
		if err := Render(&markdown, "markdown", np.page); err != nil {
			t.Fatal(err)
		}
		if md.String() != markdown.String() {
			t.Errorf("%s: markdown differs from md", np.name)
		}
	}
	if got, err := ParseFormat("markdown"); got != FormatMarkdown || err != nil {
		t.Errorf("ParseFormat(markdown) = %q, %v; want md, nil", got, err)
	}
	for _, f := range Formats() {
		if _, err := ParseFormat(f); err != nil {
			t.Errorf("ParseFormat(%q): %v", f, err)
		}
	}
}

func TestRenderUnknownFormat(t *testing.T) {
	p := &airlock.Page{URL: "https://a.example/"}
	calls := map[string]func(w *bytes.Buffer) error{
		"Render":      func(w *bytes.Buffer) error { return Render(w, "html", p) },
		"RenderCrawl": func(w *bytes.Buffer) error { return RenderCrawl(w, "yaml", []*airlock.Page{p}, nil) },
		"RenderSearch": func(w *bytes.Buffer) error {
			return RenderSearch(w, "", "q", []airlock.SearchResult{{URL: "https://a.example/"}})
		},
		"NewCrawlWriter": func(w *bytes.Buffer) error { _, err := NewCrawlWriter(w, "JSON"); return err },
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			var b bytes.Buffer
			err := call(&b)
			var ae *airlock.Error
			if !errors.As(err, &ae) {
				t.Fatalf("got %v (%T), want *airlock.Error", err, err)
			}
			if ae.Code != airlock.CodeInvalid || ae.Reason != airlock.ReasonUnknownFormat {
				t.Errorf("got code %q reason %q, want invalid %s", ae.Code, ae.Reason, airlock.ReasonUnknownFormat)
			}
			if !errors.Is(err, ErrUnknownFormat) {
				t.Errorf("errors.Is(err, ErrUnknownFormat) = false")
			}
			if airlock.ExitCode(err) != 2 {
				t.Errorf("exit code %d, want 2", airlock.ExitCode(err))
			}
			if b.Len() != 0 {
				t.Errorf("wrote %q for an unknown format", b.String())
			}
		})
	}
}

func TestRenderNilPage(t *testing.T) {
	var b bytes.Buffer
	if err := Render(&b, "org", nil); !errors.Is(err, errNilPage) {
		t.Errorf("Render(nil) = %v, want errNilPage", err)
	}
	if err := RenderCrawl(&b, "org", []*airlock.Page{{URL: "https://a.example/"}, nil}, nil); !errors.Is(err, errNilPage) {
		t.Errorf("RenderCrawl with a nil page = %v, want errNilPage", err)
	}
	if b.Len() != 0 {
		t.Errorf("wrote %q", b.String())
	}
}

type failWriter struct{ after int }

var errWrite = errors.New("disk full")

func (w *failWriter) Write(p []byte) (int, error) {
	if w.after <= 0 {
		return 0, errWrite
	}
	w.after--
	return len(p), nil
}

func TestRenderWriteError(t *testing.T) {
	pages := pageList(loadRenderPages(t))
	for _, f := range []string{FormatJSON, FormatJSONL, FormatMarkdown, FormatText, FormatOrg} {
		t.Run(f, func(t *testing.T) {
			if err := Render(&failWriter{}, f, pages[0]); !errors.Is(err, errWrite) {
				t.Errorf("Render: got %v, want the writer's error", err)
			}
			if err := RenderCrawl(&failWriter{}, f, pages, nil); !errors.Is(err, errWrite) {
				t.Errorf("RenderCrawl: got %v, want the writer's error", err)
			}
			// A CrawlWriter's error is sticky.
			cw, err := NewCrawlWriter(&failWriter{after: 1}, f)
			if err != nil {
				t.Fatal(err)
			}
			var first error
			for _, p := range pages {
				if err := cw.Page(p); err != nil && first == nil {
					first = err
				}
			}
			if err := cw.End(nil); first == nil {
				first = err
			}
			if !errors.Is(first, errWrite) {
				t.Fatalf("CrawlWriter: got %v, want the writer's error", first)
			}
			if err := cw.End(nil); !errors.Is(err, errWrite) {
				t.Errorf("End after a failure: got %v, want the writer's error", err)
			}
		})
	}
}

// TestRenderCrawlWriter checks that streaming gives RenderCrawl's output,
// org included, whether its spool stays in memory or spills to a file.
func TestRenderCrawlWriter(t *testing.T) {
	pages := pageList(loadRenderPages(t))
	sum := &airlock.CrawlSummary{Pages: len(pages), Stopped: "canceled"}
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	for _, f := range []string{FormatJSON, FormatJSONL, FormatMarkdown, FormatText, FormatOrg} {
		for _, spill := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/spill=%v", f, spill), func(t *testing.T) {
				var want, got bytes.Buffer
				if err := RenderCrawl(&want, f, pages, sum); err != nil {
					t.Fatal(err)
				}
				cw, err := NewCrawlWriter(&got, f)
				if err != nil {
					t.Fatal(err)
				}
				if spill {
					cw.spool.limit = 1
				}
				if err := cw.Begin(); err != nil {
					t.Fatal(err)
				}
				for _, p := range pages {
					if err := cw.Page(p); err != nil {
						t.Fatal(err)
					}
				}
				if f == FormatOrg {
					if got.Len() != 0 {
						t.Errorf("org wrote %d bytes before End", got.Len())
					}
					if spill && cw.spool.file == nil {
						t.Errorf("spool did not spill")
					}
					if ents, _ := os.ReadDir(tmp); len(ents) != 0 {
						t.Errorf("spool file visible in TMPDIR: %v", ents)
					}
				}
				if err := cw.End(sum); err != nil {
					t.Fatal(err)
				}
				if cw.spool.file != nil || cw.spool.mem.Len() != 0 {
					t.Errorf("spool not released")
				}
				if diff := cmp.Diff(want.String(), got.String()); diff != "" {
					t.Errorf("CrawlWriter differs from RenderCrawl (-want +got):\n%s", diff)
				}
				if err := cw.Page(pages[0]); !errors.Is(err, errCrawlWriterEnded) {
					t.Errorf("Page after End: got %v, want errCrawlWriterEnded", err)
				}
			})
		}
	}
}

// TestRenderCrawlJSONShape checks that the streamed json document is what
// encoding/json makes of the same value.
func TestRenderCrawlJSONShape(t *testing.T) {
	pages := pageList(loadRenderPages(t))
	sum := &airlock.CrawlSummary{Pages: len(pages), Skipped: []airlock.Skipped{{URL: "https://x.example/<a>", Reason: "policy"}}}
	for _, n := range []int{0, 1, len(pages)} {
		var got, want bytes.Buffer
		if err := RenderCrawl(&got, "json", pages[:n], sum); err != nil {
			t.Fatal(err)
		}
		v := struct {
			Pages   []*airlock.Page       `json:"pages"`
			Summary *airlock.CrawlSummary `json:"summary"`
		}{append([]*airlock.Page{}, pages[:n]...), sum}
		if err := encodeJSON(&want, v, true); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want.String(), got.String()); diff != "" {
			t.Errorf("%d pages (-want +got):\n%s", n, diff)
		}
	}
}

func TestRenderCrawlWriterConcurrent(t *testing.T) {
	pages := pageList(loadRenderPages(t))
	const workers, each = 8, 10
	for _, f := range []string{FormatJSONL, FormatOrg, FormatMarkdown} {
		t.Run(f, func(t *testing.T) {
			var out bytes.Buffer
			cw, err := NewCrawlWriter(&out, f)
			if err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			for w := range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range each {
						if err := cw.Page(pages[(w+i)%len(pages)]); err != nil {
							t.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			if err := cw.End(nil); err != nil {
				t.Fatal(err)
			}
			switch f {
			case FormatJSONL:
				lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
				if len(lines) != workers*each {
					t.Fatalf("%d lines, want %d", len(lines), workers*each)
				}
				for i, l := range lines {
					if !json.Valid([]byte(l)) {
						t.Fatalf("line %d is not JSON: %.80q", i, l)
					}
				}
			case FormatOrg:
				doc, problems := parseOrg(out.String())
				for _, p := range problems {
					t.Error(p)
				}
				if want := fmt.Sprintf("browse crawl — %d pages", workers*each); doc.title != want || len(doc.nodes) != workers*each {
					t.Errorf("title %q with %d nodes, want %q", doc.title, len(doc.nodes), want)
				}
			case FormatMarkdown:
				if n := strings.Count(out.String(), "\n---\n"); n < workers*each-1 {
					t.Errorf("%d separators, want at least %d", n, workers*each-1)
				}
			}
		})
	}
}

// ---- org structure ----

// orgDoc is what parseOrg finds in a rendered org document.
type orgDoc struct {
	title string // the #+TITLE value
	nodes []*orgNode
}

type orgNode struct {
	title    string
	tags     string
	props    map[string]string
	body     []string            // lines between the drawer and the first section
	sections map[string][]string // outline, links, text
	links    []orgLink
}

type orgLink struct{ target, desc string }

var (
	chkHeadline   = regexp.MustCompile(`^(\*+)(?:[ \t]+(.*?))??(?:[ \t]+(:[\p{L}\p{N}_@#%:]+:))?[ \t]*$`)
	chkStars      = regexp.MustCompile(`^\*+(?:[ \t]|$)`)
	chkKeyword    = regexp.MustCompile(`^[ \t]*#\+`)
	chkComment    = regexp.MustCompile(`^[ \t]*#(?:[ \t]|$)`)
	chkDrawer     = regexp.MustCompile(`^[ \t]*:[\p{L}\p{N}_-]+:[ \t]*$`)
	chkProperty   = regexp.MustCompile(`^:([\p{L}\p{N}_-]+):(?: (.*))?$`)
	chkFixed      = regexp.MustCompile(`^[ \t]*:(?:[ \t]|$)`)
	chkPlanning   = regexp.MustCompile(`^[ \t]*(?:SCHEDULED|DEADLINE|CLOSED|CLOCK):`)
	chkDiary      = regexp.MustCompile(`^%%\(`)
	chkFootDef    = regexp.MustCompile(`^\[fn:`)
	chkLatexEnv   = regexp.MustCompile(`^[ \t]*\\begin\{`)
	chkLink       = regexp.MustCompile(`\[\[((?:[^\[\]\\]|\\[\[\]\\])+)\](?:\[([^\[\]]+)\])?\]`)
	chkLinkItem   = regexp.MustCompile(`^- (\[\[.*\]\])$`)
	chkLinkNote   = regexp.MustCompile(`^\(\d+ (?:more )?links not shown\)$`)
	chkOutline    = regexp.MustCompile(`^((?:  )*)- \S.*$`)
	chkTODO       = regexp.MustCompile(`^(?:TODO|DONE|COMMENT)(?:[ \t]|$)`)
	chkInlineBad  = regexp.MustCompile(`(?i)<[0-9]|<%%\(|<<|\{\{\{|\[fn:|(?:src|call)_[^\s\[\]{}()]+[\[{(]`)
	chkUnescapeLB = strings.NewReplacer(`\[`, "[", `\]`, "]")
)

// parseOrg reads a document made by the org renderers with a small org
// structure checker: headline levels, property drawers, section names and
// well-formed links, and nothing a page said read as org structure.
func parseOrg(doc string) (*orgDoc, []string) {
	var problems []string
	bad := func(i int, line, format string, args ...any) {
		problems = append(problems, fmt.Sprintf("line %d %.100q: %s", i+1, line, fmt.Sprintf(format, args...)))
	}
	out := &orgDoc{}
	if doc == "" {
		return out, []string{"empty document"}
	}
	if !strings.HasSuffix(doc, "\n") {
		problems = append(problems, "document does not end with a newline")
	}
	if strings.ContainsAny(doc, "\r\x1b\x00") {
		problems = append(problems, "document holds a control character")
	}
	if !utf8.ValidString(doc) {
		problems = append(problems, "document is not UTF-8")
	}
	lines := strings.Split(strings.TrimSuffix(doc, "\n"), "\n")
	var node *orgNode
	section := ""
	inDrawer, wantDrawer := false, false
	for i, line := range lines {
		if i == 0 && strings.HasPrefix(line, "#+TITLE: ") {
			out.title = strings.TrimPrefix(line, "#+TITLE: ")
			continue
		}
		if wantDrawer {
			wantDrawer = false
			if line != ":PROPERTIES:" {
				bad(i, line, "headline without a properties drawer")
			} else {
				inDrawer = true
				continue
			}
		}
		if inDrawer {
			if line == ":END:" {
				inDrawer = false
				continue
			}
			m := chkProperty.FindStringSubmatch(line)
			if m == nil || chkStars.MatchString(line) {
				bad(i, line, "not a property line inside a drawer")
				if chkStars.MatchString(line) {
					inDrawer = false
				} else {
					continue
				}
			} else {
				if _, dup := node.props[m[1]]; dup {
					bad(i, line, "duplicate property")
				}
				node.props[m[1]] = m[2]
				continue
			}
		}
		// Inline checks apply to every line, headlines included.
		rest := line
		for _, m := range chkLink.FindAllStringSubmatch(line, -1) {
			if section != "links" || !chkLinkItem.MatchString(line) {
				bad(i, line, "link outside the links section")
			}
			target := chkUnescapeLB.Replace(m[1])
			if !webURL(target) || strings.ContainsAny(target, " \t") {
				bad(i, line, "link target %q is not a web URL", target)
			}
			if node != nil {
				node.links = append(node.links, orgLink{target, m[2]})
			}
			rest = strings.Replace(rest, m[0], "", 1)
		}
		if strings.Contains(rest, "[[") || strings.Contains(rest, "]]") {
			bad(i, line, "stray [[ or ]]: a malformed link")
		}
		if chkInlineBad.MatchString(line) {
			bad(i, line, "inline org syntax: %q", chkInlineBad.FindString(line))
		}
		if chkStars.MatchString(line) {
			m := chkHeadline.FindStringSubmatch(line)
			level, title, tags := len(m[1]), m[2], m[3]
			switch level {
			case 1:
				node = &orgNode{title: title, tags: tags, props: map[string]string{}, sections: map[string][]string{}}
				out.nodes = append(out.nodes, node)
				section = ""
				wantDrawer = true
				if title == "" {
					bad(i, line, "empty headline")
				}
				if chkTODO.MatchString(title) || strings.HasPrefix(title, "[#") {
					bad(i, line, "headline starts with a TODO keyword or priority")
				}
			case 2:
				if node == nil {
					bad(i, line, "level 2 headline before any node")
					continue
				}
				if tags != "" {
					bad(i, line, "section with tags")
				}
				if title != "outline" && title != "links" && title != "text" {
					bad(i, line, "unknown section %q", title)
				}
				if _, dup := node.sections[title]; dup {
					bad(i, line, "duplicate section")
				}
				section = title
				node.sections[section] = []string{}
			default:
				bad(i, line, "headline level %d: content read as a headline", level)
			}
			continue
		}
		switch {
		case chkKeyword.MatchString(line):
			bad(i, line, "keyword line")
		case chkComment.MatchString(line):
			bad(i, line, "comment line")
		case chkDrawer.MatchString(line):
			bad(i, line, "drawer line outside a property drawer")
		case chkFixed.MatchString(line):
			bad(i, line, "fixed-width line")
		case chkPlanning.MatchString(line):
			bad(i, line, "planning or clock line")
		case chkDiary.MatchString(line):
			bad(i, line, "diary sexp")
		case chkFootDef.MatchString(line):
			bad(i, line, "footnote definition")
		case chkLatexEnv.MatchString(line):
			bad(i, line, "LaTeX environment")
		}
		if node == nil {
			if line != "" {
				bad(i, line, "content before the first node")
			}
			continue
		}
		switch section {
		case "":
			node.body = append(node.body, line)
		case "outline":
			if !chkOutline.MatchString(line) {
				bad(i, line, "not an outline item")
			}
		case "links":
			if !chkLinkItem.MatchString(line) && !chkLinkNote.MatchString(line) && line != "" {
				bad(i, line, "not a link item")
			}
		}
		if section != "" {
			node.sections[section] = append(node.sections[section], line)
		}
	}
	if inDrawer || wantDrawer {
		problems = append(problems, "document ends inside a drawer")
	}
	// The blank line between nodes belongs to no section.
	for _, n := range out.nodes {
		n.body = trimBlankTail(n.body)
		for k, v := range n.sections {
			n.sections[k] = trimBlankTail(v)
		}
	}
	return out, problems
}

func trimBlankTail(lines []string) []string {
	for len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// orgUnescapeLine undoes orgLine.
func orgUnescapeLine(s string) string {
	i := len(s) - len(strings.TrimLeft(s, " \t"))
	if strings.HasPrefix(s[i:], ",") && orgLineHazard().MatchString(s[:i]+s[i+1:]) {
		return s[:i] + s[i+1:]
	}
	return s
}

func stripZWSP(s string) string { return strings.ReplaceAll(s, zeroWidthSpace, "") }

// checkOrgPage checks one node against the page it was rendered from.
func checkOrgPage(t *testing.T, n *orgNode, p *airlock.Page) {
	t.Helper()
	if n.tags != ":source:point:" {
		t.Errorf("tags %q, want :source:point:", n.tags)
	}
	if got, want := stripZWSP(n.title), cutLine(pageTitle(p), orgMaxTitle); got != want {
		t.Errorf("title %q, want %q", got, want)
	}
	if got, want := n.props["URL"], orgPropertyURL(p.URL); got != want {
		t.Errorf(":URL: %q, want %q", got, want)
	}
	if got, want := n.props["HOST"], urlHost(p.URL); got != want {
		t.Errorf(":HOST: %q, want %q", got, want)
	}
	// Links: every web link up to the cap, in order, targets intact.
	var want []string
	for _, l := range p.Links {
		if webURL(strings.TrimSpace(l.URL)) && len(want) < airlock.OrgMaxLinks {
			want = append(want, strings.TrimSpace(l.URL))
		}
	}
	if len(n.links) != len(want) {
		t.Errorf("%d links, want %d", len(n.links), len(want))
	} else {
		for i, l := range n.links {
			if got := percentDecodeSome(l.target); got != percentDecodeSome(percentUnsafe(want[i], "")) {
				t.Errorf("link %d target %q, want %q", i, got, want[i])
			}
		}
	}
	if omitted := len(p.Links) - len(want); omitted > 0 {
		note := n.sections["links"][len(n.sections["links"])-1]
		if !strings.Contains(note, fmt.Sprint(omitted)) {
			t.Errorf("links note %q does not say %d", note, omitted)
		}
	}
	// Text: the comma escape is reversible; the cap holds.
	wantText, _ := cutText(renderClean(p.Text), airlock.OrgMaxText)
	var got []string
	for _, l := range n.sections["text"] {
		got = append(got, orgUnescapeLine(l))
	}
	if g, w := stripZWSP(strings.Join(got, "\n")), stripZWSP(wantText); g != w {
		t.Errorf("text does not round-trip:\n%s", cmp.Diff(w, g))
	}
	if n := utf8.RuneCountInString(wantText); n > airlock.OrgMaxText {
		t.Errorf("text has %d characters, cap %d", n, airlock.OrgMaxText)
	}
}

// percentDecodeSome decodes the escapes orgLinkTarget adds, so targets can
// be compared.
func percentDecodeSome(s string) string {
	return strings.NewReplacer("%5B", "[", "%5D", "]", "%5C", `\`).Replace(s)
}

func TestRenderOrgStructure(t *testing.T) {
	nps := loadRenderPages(t)
	for _, np := range nps {
		t.Run(np.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := Render(&b, "org", np.page); err != nil {
				t.Fatal(err)
			}
			doc, problems := parseOrg(b.String())
			for _, p := range problems {
				t.Error(p)
			}
			if doc.title != "" || len(doc.nodes) != 1 {
				t.Fatalf("title %q and %d nodes, want none and 1", doc.title, len(doc.nodes))
			}
			checkOrgPage(t, doc.nodes[0], np.page)
		})
	}
	t.Run("crawl", func(t *testing.T) {
		var b bytes.Buffer
		if err := RenderCrawl(&b, "org", pageList(nps), nil); err != nil {
			t.Fatal(err)
		}
		doc, problems := parseOrg(b.String())
		for _, p := range problems {
			t.Error(p)
		}
		if want := fmt.Sprintf("browse crawl — %d pages", len(nps)); doc.title != want {
			t.Errorf("title %q, want %q", doc.title, want)
		}
		if len(doc.nodes) != len(nps) {
			t.Fatalf("%d nodes, want %d", len(doc.nodes), len(nps))
		}
		for i, n := range doc.nodes {
			checkOrgPage(t, n, nps[i].page)
		}
	})
	t.Run("search", func(t *testing.T) {
		in := loadSearch(t)
		var b bytes.Buffer
		if err := RenderSearch(&b, "org", in.Query, in.Results); err != nil {
			t.Fatal(err)
		}
		doc, problems := parseOrg(b.String())
		for _, p := range problems {
			t.Error(p)
		}
		if len(doc.nodes) != len(in.Results) {
			t.Fatalf("%d nodes, want %d", len(doc.nodes), len(in.Results))
		}
		for i, n := range doc.nodes {
			r := in.Results[i]
			if n.tags != "" {
				t.Errorf("result %d: tags %q", i, n.tags)
			}
			if got, want := n.props["URL"], orgPropertyURL(r.URL); got != want {
				t.Errorf("result %d: :URL: %q, want %q", i, got, want)
			}
			if got, want := n.props["RANK"], fmt.Sprint(r.Rank); got != want {
				t.Errorf("result %d: :RANK: %q, want %q", i, got, want)
			}
			if got, want := stripZWSP(strings.Join(n.body, "\n")), renderOneLine(r.Snippet); orgUnescapeLine(got) != want && !(got == "" && want == "") {
				t.Errorf("result %d: snippet %q, want %q", i, got, want)
			}
		}
	})
}

func TestRenderOrgLine(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain text", "plain text"},
		{"* headline", ",* headline"},
		{"*** deep", ",*** deep"},
		{"*", ",*"},
		{"*bold* start", "*bold* start"},
		{"  * indented item", "  * indented item"},
		{",* escaped once", ",,* escaped once"},
		{"#+TITLE: x", ",#+TITLE: x"},
		{"  #+begin_src sh", "  ,#+begin_src sh"},
		{",#+x", ",,#+x"},
		{"# comment", ",# comment"},
		{"#", ",#"},
		{"#hashtag", "#hashtag"},
		{":PROPERTIES:", ",:PROPERTIES:"},
		{":END:", ",:END:"},
		{"  :LOGBOOK:  ", "  ,:LOGBOOK:  "},
		{":日本語:", ",:日本語:"},
		{":END: trailing", ":END: trailing"},
		{": fixed", ",: fixed"},
		{":", ",:"},
		{":)", ":)"},
		{"SCHEDULED: <2025-01-01>", ",SCHEDULED: <2025-01-01>"},
		{"CLOSED: [2025-01-01]", ",CLOSED: [2025-01-01]"},
		{"CLOCK: [2025-01-01]", ",CLOCK: [2025-01-01]"},
		{"%%(diary-float t 4 2)", ",%%(diary-float t 4 2)"},
		{" %%(x)", " %%(x)"},
		{"[fn:1] def", ",[fn:1] def"},
		{`\begin{equation}`, `,\begin{equation}`},
	}
	for _, tt := range tests {
		got := orgLine(tt.in)
		if got != tt.want {
			t.Errorf("orgLine(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if back := orgUnescapeLine(got); back != tt.in {
			t.Errorf("orgUnescapeLine(%q) = %q, want %q", got, back, tt.in)
		}
	}
}

func TestRenderOrgInline(t *testing.T) {
	z := zeroWidthSpace
	tests := []struct{ in, want string }{
		{"no syntax here", "no syntax here"},
		{"[[https://x][y]]", "[" + z + "[https://x][y]" + z + "]"},
		{"a[i][j]", "a[i][j]"},
		{"[[[", "[" + z + "[" + z + "["},
		{"see [fn:1] and [FN:x]", "see [" + z + "fn:1] and [" + z + "FN:x]"},
		{"<2025-01-01 Wed>", "<" + z + "2025-01-01 Wed>"},
		{"<%%(shell-command)>", "<" + z + "%%(shell-command)>"},
		{"a <<target>>", "a <" + z + "<target>>"},
		{"a < b", "a < b"},
		{"{{{macro(x)}}}", "{" + z + "{{macro(x)}}}"},
		{"src_sh{id} and SRC_python[:x]{1}", "src" + z + "_sh{id} and SRC" + z + "_python[:x]{1}"},
		{"call_f(1)", "call" + z + "_f(1)"},
		{"my_src_file.go", "my_src_file.go"},
	}
	for _, tt := range tests {
		if got := orgInline(tt.in); got != tt.want {
			t.Errorf("orgInline(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestRenderOrgTitle(t *testing.T) {
	z := zeroWidthSpace
	tests := []struct{ in, want string }{
		{"Plain title", "Plain title"},
		{"TODO list apps", z + "TODO list apps"},
		{"TODOs", "TODOs"},
		{"COMMENT", z + "COMMENT"},
		{"[#A] urgent", "[" + z + "#A] urgent"},
		{"Tags :a:b:", "Tags " + z + ":a:b:"},
		{":only:", z + ":only:"},
		{"Ratio 1:2:", "Ratio 1:2:"},
		{"* starred", "* starred"},
		{"a ]] b", "a ]" + z + "] b"},
	}
	for _, tt := range tests {
		if got := orgTitle(tt.in); got != tt.want {
			t.Errorf("orgTitle(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestRenderOrgLinkTarget(t *testing.T) {
	tests := []struct {
		in   string
		want string
		ok   bool
	}{
		{"https://go.dev/blog/", "https://go.dev/blog/", true},
		{"HTTP://A.example", "HTTP://A.example", true},
		{"https://x.example/a[1]?q=]]#[[", "https://x.example/a%5B1%5D?q=%5D%5D#%5B%5B", true},
		{"https://x.example/a b\nc", "https://x.example/a%20b%0Ac", true},
		{`https://x.example/path\`, "https://x.example/path%5C", true},
		{"http://[2001:db8::1]:8080/p[1]", `http://\[2001:db8::1\]:8080/p%5B1%5D`, true},
		{"https://例え.テスト/天気", "https://例え.テスト/天気", true},
		{"mailto:a@example.com?subject=[x]", "mailto:a@example.com?subject=%5Bx%5D", true},
		{"ftp://ftp.example/pub", "ftp://ftp.example/pub", true},
		{"javascript:alert(1)", "", false},
		{"elisp:(delete-file \"x\")", "", false},
		{"shell:rm -rf ~", "", false},
		{"file:///etc/passwd", "", false},
		{"https:", "", false},
		{"https://", "", false},
		{"mailto:", "", false},
		{"//x.example/", "", false},
		{"", "", false},
	}
	for _, tt := range tests {
		got, ok := orgLinkTarget(tt.in)
		if got != tt.want || ok != tt.ok {
			t.Errorf("orgLinkTarget(%q) = %q, %v; want %q, %v", tt.in, got, ok, tt.want, tt.ok)
		}
		if ok {
			if m := chkLink.FindStringSubmatch("[[" + got + "][d]]"); m == nil || m[1] != got {
				t.Errorf("orgLinkTarget(%q) = %q does not make a well-formed link", tt.in, got)
			}
		}
	}
}

func TestRenderCutText(t *testing.T) {
	family := "\U0001F468\u200d\U0001F469\u200d\U0001F467"
	tests := []struct {
		name  string
		in    string
		limit int
		want  string
		cut   bool
	}{
		{"short", "hello", 10, "hello", false},
		{"exact", "hello", 5, "hello", false},
		{"word boundary", "the quick brown fox", 12, "the quick…", true},
		{"cut at a space", "the quick brown fox", 10, "the quick…", true},
		{"no space in window", "abcdefghijklmnopqrstuvwxyz", 10, "abcdefghi…", true},
		{"runes not bytes", "日本語のテキストです", 5, "日本語の…", true},
		{"combining mark", "cafe\u0301s", 5, "caf…", true},
		{"zwj sequence", "ab" + family + "cd", 5, "ab…", true},
		{"tiny limit", "hello", 1, "…", true},
		{"trailing newline trimmed", "line one\nline two", 10, "line one…", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, cut := cutText(tt.in, tt.limit)
			if got != tt.want || cut != tt.cut {
				t.Errorf("cutText(%q, %d) = %q, %v; want %q, %v", tt.in, tt.limit, got, cut, tt.want, tt.cut)
			}
			if n := utf8.RuneCountInString(got); n > tt.limit {
				t.Errorf("%d runes, limit %d", n, tt.limit)
			}
			if !utf8.ValidString(got) {
				t.Errorf("invalid UTF-8")
			}
		})
	}
}

func TestRenderSanitize(t *testing.T) {
	tests := []struct{ in, want string }{
		{"a\x1b[31mred\x1b[0m", "a[31mred[0m"},
		{"bell\a and nul\x00", "bell and nul"},
		{"c1 \u009b31m", "c1 31m"},
		{"crlf\r\nlf\rcr", "crlf\nlf\ncr"},
		{"tab\tkept", "tab\tkept"},
		{"ls\u2028ps\u2029", "ls\nps\n"},
		{"bad \xff utf8", "bad \uFFFD utf8"},
	}
	for _, tt := range tests {
		if got := renderSanitize(tt.in); got != tt.want {
			t.Errorf("renderSanitize(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	if got, want := renderClean("\n\n a  \n\n\n\nb\t\n\n"), " a\n\nb"; got != want {
		t.Errorf("renderClean = %q, want %q", got, want)
	}
}

func TestRenderMarkdownEscape(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain words", "plain words"},
		{"# not a heading", `\# not a heading`},
		{"1. not a list", `1\. not a list`},
		{"2024) year", `2024\) year`},
		{"- dash", `\- dash`},
		{"+ plus", `\+ plus`},
		{"> quote", `\> quote`},
		{"---", `\---`},
		{"=====", `\=====`},
		{"| a | b |", `\| a | b |`},
		{"<script>x</script>", `\<script\>x\</script\>`},
		{"*em* _em_ `code` [l](u) ~s~", `\*em\* \_em\_ \` + "`code\\`" + ` \[l\](u) \~s\~`},
		{"    indented", "indented"},
		{`back\slash`, `back\\slash`},
	}
	for _, tt := range tests {
		if got := mdLine(tt.in); got != tt.want {
			t.Errorf("mdLine(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	headings := []struct{ in, want string }{
		{"C# in depth", "C# in depth"},
		{"Issue #", `Issue \#`},
		{"Ends ###", `Ends \###`},
		{"#", `\#`},
	}
	for _, tt := range headings {
		if got := mdHeading(tt.in); got != tt.want {
			t.Errorf("mdHeading(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// FuzzRenderOrg renders pages and search results made of arbitrary strings
// and checks that the org structure survives them.
func FuzzRenderOrg(f *testing.F) {
	seeds := [][6]string{
		{"Title", "desc", "text", "https://x.example/", "link", "heading"},
		{"TODO * [[a]] :t:", "* d\n:END:", "* h\n#+T\n:END:\n: f\n%%(x)\n[fn:1]", "https://x.example/]]", "a ]] b [[", "[ ] h"},
		{"", "", ",* x\n,,#+y\n  :D:", "javascript:x", "", "* h"},
		{"\x1b]0;t\a", "<2025-01-01>", "<%%(x)> {{{m}}} src_sh{id}", "http://[::1]/[x]", "<<t>>", ":END:"},
		{"[#A] urgent :a:b:", "DONE", "COMMENT x", "https://x.example/a b", "[#B]", "TODO h"},
		{"a\nb\rc", "\u2028* x", "x\u2028* y\u2029#+z", "https://x.example/\\", "\\", "\u0085:E:"},
	}
	for _, s := range seeds {
		f.Add(s[0], s[1], s[2], s[3], s[4], s[5])
	}
	f.Fuzz(func(t *testing.T, title, desc, text, linkURL, linkText, heading string) {
		p := &airlock.Page{
			URL:         "https://fuzz.example/" + linkText,
			Title:       title,
			Description: desc,
			Text:        text,
			Headings:    []airlock.Heading{{Level: 1, Text: heading}, {Level: 3, Text: title}},
			Links:       []airlock.Link{{URL: linkURL, Text: linkText}, {URL: "https://ok.example/" + title, Text: heading}},
		}
		var b bytes.Buffer
		if err := RenderCrawl(&b, "org", []*airlock.Page{p, p}, nil); err != nil {
			t.Fatal(err)
		}
		doc, problems := parseOrg(b.String())
		for _, pr := range problems {
			t.Error(pr)
		}
		if len(doc.nodes) != 2 {
			t.Fatalf("%d nodes, want 2:\n%s", len(doc.nodes), b.String())
		}
		checkOrgPage(t, doc.nodes[0], p)

		b.Reset()
		rs := []airlock.SearchResult{{Title: title, URL: linkURL, Snippet: text, Engine: linkText, Rank: 1}}
		if err := RenderSearch(&b, "org", desc, rs); err != nil {
			t.Fatal(err)
		}
		doc, problems = parseOrg(b.String())
		for _, pr := range problems {
			t.Error(pr)
		}
		if len(doc.nodes) != 1 {
			t.Fatalf("search: %d nodes, want 1:\n%s", len(doc.nodes), b.String())
		}
	})
}

func ExampleRender() {
	p := &airlock.Page{
		URL:         "https://hexdocs.pm/elixir",
		Title:       "Elixir v1.16 — Documentation",
		Description: "The reference of the Elixir language and its standard library.",
		Headings:    []airlock.Heading{{Level: 2, Text: "Getting started"}, {Level: 2, Text: "Modules and functions"}},
		Links:       []airlock.Link{{URL: "https://hexdocs.pm/elixir/Kernel.html", Text: "Kernel"}},
		Text:        "Elixir is a dynamic, functional language for building scalable applications.\n* Not a headline",
		FetchedAt:   time.Date(2025, 3, 14, 0, 0, 0, 0, time.UTC),
	}
	if err := Render(os.Stdout, "org", p); err != nil {
		fmt.Println(err)
	}
	// Output:
	// * Elixir v1.16 — Documentation :source:point:
	// :PROPERTIES:
	// :URL: https://hexdocs.pm/elixir
	// :HOST: hexdocs.pm
	// :END:
	// The reference of the Elixir language and its standard library.
	// ** outline
	// - Getting started
	// - Modules and functions
	// ** links
	// - [[https://hexdocs.pm/elixir/Kernel.html][Kernel]]
	// ** text
	// Elixir is a dynamic, functional language for building scalable applications.
	// ,* Not a headline
}

// TestRenderOrgLeadOnce: a description that is the opening of the text
// (what a page without a written description gets) is not printed above
// the text again; a written one that says something else is.
func TestRenderOrgLeadOnce(t *testing.T) {
	lead := "This domain is for use in documentation examples without needing permission."
	for _, tt := range []struct {
		name, desc string
		want       int
	}{
		{"derived from the text", lead, 1},
		{"derived and cut", "This domain is for use in documentation …", 1},
		{"written", "Example pages for documentation.", 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var b strings.Builder
			p := &airlock.Page{URL: "https://example.com/", Title: "Example Domain", Description: tt.desc, Text: lead + "\nLearn more"}
			if err := Render(&b, "org", p); err != nil {
				t.Fatal(err)
			}
			if n := strings.Count(b.String(), lead); n != tt.want {
				t.Errorf("lead %d times, want %d:\n%s", n, tt.want, b.String())
			}
			if tt.name == "written" && !strings.Contains(b.String(), tt.desc) {
				t.Errorf("the written description is gone:\n%s", b.String())
			}
		})
	}
}

// TestRenderMetaLine: the metadata line names what the page has, in a
// fixed order, and is left out when the page has none of it.
func TestRenderMetaLine(t *testing.T) {
	t.Parallel()
	p := &airlock.Page{URL: "https://example.com/", Title: "T", Kind: "listing", Lang: "de", Text: "x"}
	tests := []struct{ format, want string }{
		{FormatMarkdown, "\nKind: listing · Language: de\n"},
		{FormatText, "\nKind: listing · Language: de\n"},
		{FormatOrg, "\n:KIND: listing\n:LANG: de\n:END:\n"},
	}
	for _, tt := range tests {
		var b bytes.Buffer
		if err := Render(&b, tt.format, p); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(b.String(), tt.want) {
			t.Errorf("%s: %q does not hold %q", tt.format, b.String(), tt.want)
		}
		var none bytes.Buffer
		if err := Render(&none, tt.format, &airlock.Page{URL: "https://example.com/", Title: "T", Text: "x"}); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(none.String(), "Kind") || strings.Contains(none.String(), "KIND") {
			t.Errorf("%s: %q has a metadata line without metadata", tt.format, none.String())
		}
	}
}
