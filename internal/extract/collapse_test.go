package extract

import (
	"strings"
	"testing"
	"unicode"
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

// isSpace agrees with unicode.IsSpace (and takes the no-break space too).
func TestIsSpace(t *testing.T) {
	t.Parallel()
	for r := rune(0); r < 0x3100; r++ {
		want := unicode.IsSpace(r) || r == 0xa0
		if got := isSpace(r); got != want {
			t.Errorf("isSpace(%U) = %v, want %v", r, got, want)
		}
	}
}

func TestWriteLower(t *testing.T) {
	t.Parallel()
	for _, s := range append(collapseCases, "Just A Moment", "ATTENTION REQUIRED! | CLOUDFLARE", "Zugriff VERWEIGERT: Ärger", "İSTANBUL", "x\xffY") {
		var b strings.Builder
		b.WriteString("prefix ")
		writeLower(&b, s)
		if got, want := b.String(), "prefix "+strings.ToLower(s); got != want {
			t.Errorf("writeLower(%q) wrote %q, want %q", s, got, want)
		}
	}
}
