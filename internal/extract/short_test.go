package extract

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestShortPages: short pages (under airlock.MinMainContent characters of
// main content) come out with one title (the page's, not a heading of the
// Markdown too), nothing outside <main> when the page has one, and a lead
// paragraph once. The fixtures in testdata/short are written for this test.
func TestShortPages(t *testing.T) {
	tests := []struct {
		file string
		want []string // in the Markdown, in this order
		not  []string // not in the Markdown
		once []string // exactly once in the Markdown
	}{
		{
			file: "nav-outside-main.html",
			want: []string{"How to set up the widget in three steps.", "Plug the widget into a free port"},
			not:  []string{"# Widget setup guide", "Pricing", "Related:", "Home"},
		},
		{
			file: "title-heading.html",
			want: []string{"This domain is for use in documentation examples", "[Learn more](https://iana.org/domains/example)"},
			not:  []string{"# Example Domain"},
		},
		{
			file: "title-heading-site-suffix.html",
			want: []string{"The winter ferry timetable starts on Monday", "The summer timetable returns in April."},
			not:  []string{"# Ferry timetable changes", "Harbour News", "Contact"},
		},
		{
			file: "lead-twice.html",
			want: []string{"The winter ferry timetable starts on Monday", "the last crossing moves back to midnight."},
			not:  []string{"# Ferry timetable changes"},
			once: []string{"The winter ferry timetable starts on Monday"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			src, err := os.ReadFile(filepath.Join("testdata", "short", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			p, err := Extract(context.Background(), Input{URL: "https://example.com/page", Body: src, ContentType: "text/html; charset=utf-8"}, Options{})
			if err != nil {
				t.Fatal(err)
			}
			md := p.Markdown
			at := 0
			for _, w := range tt.want {
				i := strings.Index(md[at:], w)
				if i < 0 {
					t.Errorf("markdown lacks %q (after byte %d):\n%s", w, at, md)
					continue
				}
				at += i + len(w)
			}
			for _, n := range tt.not {
				if strings.Contains(md, n) || strings.Contains(p.Text, strings.TrimPrefix(n, "# ")) && !strings.HasPrefix(n, "# ") {
					t.Errorf("markdown or text has %q:\n%s", n, md)
				}
			}
			for _, o := range tt.once {
				if n := strings.Count(md, o); n != 1 {
					t.Errorf("%q %d times in the markdown, want once:\n%s", o, n, md)
				}
				if n := strings.Count(p.Text, o); n != 1 {
					t.Errorf("%q %d times in the text, want once:\n%s", o, n, p.Text)
				}
			}
			if strings.TrimSpace(p.Title) == "" {
				t.Errorf("no title")
			}
		})
	}
}
