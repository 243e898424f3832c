package airlock_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/airlockhq/airlock"
)

// reasonConstants parses reasons.go for its Reason constants: name -> value.
func reasonConstants(t *testing.T) map[string]airlock.Reason {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "reasons.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]airlock.Reason{}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, sp := range g.Specs {
			vs := sp.(*ast.ValueSpec)
			if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "Reason" {
				continue
			}
			for i, n := range vs.Names {
				v, err := strconv.Unquote(vs.Values[i].(*ast.BasicLit).Value)
				if err != nil {
					t.Fatal(err)
				}
				out[n.Name] = airlock.Reason(v)
			}
		}
	}
	return out
}

// TestReasonCatalogue: every Reason constant has exactly one catalogue
// entry and every entry a constant; each entry has valid codes and a
// one-line meaning.
func TestReasonCatalogue(t *testing.T) {
	consts := reasonConstants(t)
	if len(consts) < 150 {
		t.Fatalf("only %d Reason constants found in reasons.go", len(consts))
	}
	byValue := map[airlock.Reason]string{}
	for name, v := range consts {
		if other, dup := byValue[v]; dup {
			t.Errorf("%s and %s are both %q", name, other, v)
		}
		byValue[v] = name
	}
	seen := map[airlock.Reason]bool{}
	for _, info := range airlock.Reasons() {
		r := info.Reason
		if seen[r] {
			t.Errorf("%q is in the catalogue twice", r)
		}
		seen[r] = true
		if _, ok := byValue[r]; !ok {
			t.Errorf("%q is in the catalogue but has no constant", r)
		}
		for _, c := range info.Codes {
			if !c.Valid() {
				t.Errorf("%q: code %q is not one of the ten", r, c)
			}
		}
		if info.Meaning == "" || strings.Contains(info.Meaning, "\n") || !strings.HasSuffix(info.Meaning, ".") {
			t.Errorf("%q: meaning %q, want one line ending in a period", r, info.Meaning)
		}
		if strings.Contains(info.Hint, "\n") || strings.HasSuffix(info.Hint, ".") {
			t.Errorf("%q: hint %q, want one line without a final period", r, info.Hint)
		}
		got, ok := r.Info()
		if !ok || got.Meaning != info.Meaning || r.Hint() != info.Hint {
			t.Errorf("%q: Info() = %+v, %v; Hint() = %q", r, got, ok, r.Hint())
		}
	}
	for name, v := range consts {
		if !seen[v] {
			t.Errorf("%s (%q) has no catalogue entry", name, v)
		}
	}
	if _, ok := airlock.Reason("no such reason").Info(); ok {
		t.Error(`Info("no such reason") found an entry`)
	}
}

// TestReasonHints: a refusal (denied, revoked, rate_limited) is what a
// person at the terminal meets and can act on, so each such reason has a
// CLI hint.
func TestReasonHints(t *testing.T) {
	for _, info := range airlock.Reasons() {
		refusal := slices.ContainsFunc(info.Codes, func(c airlock.Code) bool {
			return c == airlock.CodeDenied || c == airlock.CodeRevoked || c == airlock.CodeRateLimited
		})
		if refusal && info.Hint == "" {
			t.Errorf("%q (%v) is a refusal without a hint", info.Reason, info.Codes)
		}
	}
}

// TestReasonsCopy: Reasons and Info return copies; the catalogue cannot be
// changed through them.
func TestReasonsCopy(t *testing.T) {
	rs := airlock.Reasons()
	rs[0].Meaning = "changed"
	i := slices.IndexFunc(rs, func(r airlock.ReasonInfo) bool { return len(r.Codes) > 0 })
	rs[i].Codes[0] = "changed"
	again := airlock.Reasons()
	if again[0].Meaning == "changed" || again[i].Codes[0] == "changed" {
		t.Error("changing Reasons' result changed the catalogue")
	}
	info, _ := airlock.ReasonLoopback.Info()
	info.Codes[0] = "changed"
	if info2, _ := airlock.ReasonLoopback.Info(); info2.Codes[0] == "changed" {
		t.Error("changing Info's result changed the catalogue")
	}
}
