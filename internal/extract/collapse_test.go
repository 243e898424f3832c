package extract

import (
	"strings"
	"testing"
)

// collapseReference is what collapse computes, written the obvious way.
func collapseReference(s string) string { return strings.Join(strings.FieldsFunc(s, isSpace), " ") }

var collapseCases = []string{
	"", " ", "  \t\n", "a", " a", "a ", "a  b", "a b", "a\tb", "a\u00a0b", "\u00a0a\u00a0", "a\u3000b\u2003c",
	"plain words, already collapsed.", "  Lorem\n\tipsum  dolor  ", "x\xffy z", "\xff \xfe", "é à", "line\r\nnext",
	"\u0085nel\u0085", "a\fb\vc",
}

func TestCollapse(t *testing.T) {
	t.Parallel()
	for _, s := range collapseCases {
		if got, want := collapse(s), collapseReference(s); got != want {
			t.Errorf("collapse(%q) = %q, want %q", s, got, want)
		}
	}
}

func FuzzCollapse(f *testing.F) {
	for _, s := range collapseCases {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := collapse(s), collapseReference(s); got != want {
			t.Fatalf("collapse(%q) = %q, want %q", s, got, want)
		}
	})
}
