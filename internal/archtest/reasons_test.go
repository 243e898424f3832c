package archtest

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/airlockhq/airlock"
)

// ---------------------------------------------------------------------------
// Reasons are a checked contract: every reason a surface can emit is a
// constant of the root catalogue (reasons.go).

// reasonSite is one place that gives an error its reason, and what is wrong
// with it ("" when nothing is).
type reasonSite struct {
	pos     token.Position
	via     string // "airlock.Errorf", "airlock.Error{Reason}", "forwarder f"
	expr    string // the reason expression as written
	problem string
	// code and reason are the names of the Code and catalogue constants
	// of an airlock.Errorf call that names both ("" otherwise).
	code, reason string
}

func (s reasonSite) String() string {
	return fmt.Sprintf("%s:%d:%d: %s reason %s: %s", s.pos.Filename, s.pos.Line, s.pos.Column, s.via, s.expr, s.problem)
}

// srcFile is one Go file of the module: rel is its slash path from the
// module root.
type srcFile struct {
	rel string
	src []byte
}

// reasonChecker finds the reasons given to errors of the vocabulary in the
// module's non-test files:
//   - the reason argument of airlock.Errorf (Errorf in the root package);
//   - the Reason field of airlock.Error composite literals;
//   - the value assigned to a Reason field (x.Reason = ...);
//   - the reason argument of a function of ours that forwards one of its
//     parameters to either of those (found to a fixpoint), so that a helper
//     such as usageErrorf(reason string, ...) cannot launder a literal.
//
// A reason must be a constant of the catalogue (airlock.ReasonX, ReasonX in
// the root package), or a value computed at run time (a variable, a field,
// a call such as airlock.ReasonOf(err)); a string literal, or a constant
// declared anywhere else, is a problem. Conversions (airlock.Reason(x),
// string(x)) are looked through.
type reasonChecker struct {
	fset      *token.FileSet
	catalogue map[string]bool            // names of the root package's Reason constants
	consts    map[string]map[string]bool // package path -> its package-level constant names
	files     []*parsedFile
	// forwarders: package path -> function or method name -> index of the
	// parameter it forwards as a reason.
	forwarders map[string]map[string]int
}

type parsedFile struct {
	rel     string
	pkg     string // import path
	file    *ast.File
	imports map[string]string // local name -> import path
}

// pkgPathOf is the import path of the package of a module file.
func pkgPathOf(rel string) string {
	dir := path.Dir(rel)
	if dir == "." {
		return modulePath
	}
	return modulePath + "/" + dir
}

// newReasonChecker parses files (checked) and extra (read only for their
// constant names, e.g. egress/).
func newReasonChecker(catalogue []string, files, extra []srcFile) (*reasonChecker, error) {
	c := &reasonChecker{
		fset:       token.NewFileSet(),
		catalogue:  map[string]bool{},
		consts:     map[string]map[string]bool{},
		forwarders: map[string]map[string]int{},
	}
	for _, n := range catalogue {
		c.catalogue[n] = true
	}
	parse := func(sf srcFile, keep bool) error {
		f, err := parser.ParseFile(c.fset, sf.rel, sf.src, 0)
		if err != nil {
			return err
		}
		pkg := pkgPathOf(sf.rel)
		if c.consts[pkg] == nil {
			c.consts[pkg] = map[string]bool{}
		}
		for _, d := range f.Decls {
			if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.CONST {
				for _, s := range g.Specs {
					for _, n := range s.(*ast.ValueSpec).Names {
						c.consts[pkg][n.Name] = true
					}
				}
			}
		}
		if !keep {
			return nil
		}
		pf := &parsedFile{rel: sf.rel, pkg: pkg, file: f, imports: map[string]string{}}
		for _, im := range f.Imports {
			p, _ := strconv.Unquote(im.Path.Value)
			name := path.Base(p)
			if im.Name != nil {
				name = im.Name.Name
			}
			pf.imports[name] = p
		}
		c.files = append(c.files, pf)
		return nil
	}
	for _, sf := range extra {
		if err := parse(sf, false); err != nil {
			return nil, err
		}
	}
	for _, sf := range files {
		if err := parse(sf, true); err != nil {
			return nil, err
		}
	}
	c.findForwarders()
	return c, nil
}

// reasonArg returns the reason expression of a call or literal that gives an
// error of the vocabulary its reason, and how it does so.
func (c *reasonChecker) reasonArg(pf *parsedFile, n ast.Node) (ast.Expr, string) {
	switch n := n.(type) {
	case *ast.CallExpr:
		var pkg, name string
		method := false
		switch fun := n.Fun.(type) {
		case *ast.Ident:
			pkg, name = pf.pkg, fun.Name
		case *ast.SelectorExpr:
			if x, ok := fun.X.(*ast.Ident); ok && pf.imports[x.Name] != "" {
				pkg, name = pf.imports[x.Name], fun.Sel.Name
			} else {
				pkg, name, method = pf.pkg, fun.Sel.Name, true
			}
		default:
			return nil, ""
		}
		if pkg == modulePath && name == "Errorf" && !method && len(n.Args) >= 2 {
			return n.Args[1], "airlock.Errorf"
		}
		key := name
		if method {
			key = "." + name
		}
		if i, ok := c.forwarders[pkg][key]; ok && i < len(n.Args) {
			return n.Args[i], "forwarder " + name
		}
	case *ast.AssignStmt:
		if len(n.Lhs) != len(n.Rhs) {
			return nil, ""
		}
		for i, l := range n.Lhs {
			if sel, ok := l.(*ast.SelectorExpr); ok && sel.Sel.Name == "Reason" {
				return n.Rhs[i], "x.Reason ="
			}
		}
	case *ast.CompositeLit:
		if freeTextReason[typeName(n.Type)] {
			return nil, ""
		}
		for _, e := range n.Elts {
			if kv, ok := e.(*ast.KeyValueExpr); ok {
				if k, ok := kv.Key.(*ast.Ident); ok && k.Name == "Reason" {
					return kv.Value, typeName(n.Type) + "{Reason}"
				}
			}
		}
	}
	return nil, ""
}

// freeTextReason are the types whose Reason field is an operator's free
// text (a revocation's), not a reason of the vocabulary.
var freeTextReason = map[string]bool{"Revocation": true, "store.Revocation": true, "revocationValue": true}

// typeName renders the type of a composite literal.
func typeName(t ast.Expr) string {
	if t == nil {
		return "literal"
	}
	return types2String(t)
}

// findForwarders records, to a fixpoint, the functions that pass one of
// their parameters on as a reason.
func (c *reasonChecker) findForwarders() {
	for changed := true; changed; {
		changed = false
		for _, pf := range c.files {
			for _, d := range pf.file.Decls {
				fd, ok := d.(*ast.FuncDecl)
				if !ok || fd.Body == nil {
					continue
				}
				var params []string
				for _, f := range fd.Type.Params.List {
					if len(f.Names) == 0 {
						params = append(params, "_")
					}
					for _, n := range f.Names {
						params = append(params, n.Name)
					}
				}
				key := fd.Name.Name
				if fd.Recv != nil {
					key = "." + key
				}
				ast.Inspect(fd.Body, func(n ast.Node) bool {
					arg, _ := c.reasonArg(pf, n)
					id, ok := unwrapReason(pf, arg).(*ast.Ident)
					if !ok {
						return true
					}
					if i := slices.Index(params, id.Name); i >= 0 {
						if c.forwarders[pf.pkg] == nil {
							c.forwarders[pf.pkg] = map[string]int{}
						}
						if _, seen := c.forwarders[pf.pkg][key]; !seen {
							c.forwarders[pf.pkg][key] = i
							changed = true
						}
					}
					return true
				})
			}
		}
	}
}

const egressPath = modulePath + "/egress"

// unwrapReason looks through parentheses and conversions to Reason (the
// root's or egress's) or string.
func unwrapReason(pf *parsedFile, e ast.Expr) ast.Expr {
	for {
		switch x := e.(type) {
		case *ast.ParenExpr:
			e = x.X
			continue
		case *ast.CallExpr:
			if len(x.Args) == 1 {
				switch f := x.Fun.(type) {
				case *ast.Ident:
					if f.Name == "string" || (f.Name == "Reason" && pf.pkg == modulePath) {
						e = x.Args[0]
						continue
					}
				case *ast.SelectorExpr:
					if id, ok := f.X.(*ast.Ident); ok && (pf.imports[id.Name] == modulePath || pf.imports[id.Name] == egressPath) && f.Sel.Name == "Reason" {
						e = x.Args[0]
						continue
					}
				}
			}
		}
		return e
	}
}

// judge says what is wrong with a reason expression ("" when nothing is).
func (c *reasonChecker) judge(pf *parsedFile, e ast.Expr) string {
	switch x := unwrapReason(pf, e).(type) {
	case *ast.BasicLit:
		return "a string literal; use a catalogue constant (reasons.go)"
	case *ast.Ident:
		if pf.pkg == modulePath && c.catalogue[x.Name] {
			return ""
		}
		if (x.Obj != nil && x.Obj.Kind == ast.Con) || (x.Obj == nil && c.consts[pf.pkg][x.Name]) {
			return "a constant outside the catalogue; use a catalogue constant (reasons.go)"
		}
	case *ast.SelectorExpr:
		id, ok := x.X.(*ast.Ident)
		if !ok || id.Obj != nil {
			return "" // a field of a value
		}
		p := pf.imports[id.Name]
		switch {
		case p == modulePath:
			if !c.catalogue[x.Sel.Name] {
				return "not a catalogue constant (reasons.go)"
			}
		case p == egressPath && strings.HasPrefix(x.Sel.Name, "Reason") && c.consts[p][x.Sel.Name]:
			// egress's own reasons: TestEgressReasonsInCatalogue holds
			// them to the catalogue.
		case c.consts[p][x.Sel.Name]:
			return "a constant outside the catalogue; use a catalogue constant (reasons.go)"
		}
	}
	return ""
}

// rootName is the name of the root package's constant e names, or "".
func (c *reasonChecker) rootName(pf *parsedFile, e ast.Expr) string {
	switch x := e.(type) {
	case *ast.Ident:
		if pf.pkg == modulePath && x.Obj == nil {
			return x.Name
		}
	case *ast.SelectorExpr:
		if id, ok := x.X.(*ast.Ident); ok && id.Obj == nil && pf.imports[id.Name] == modulePath {
			return x.Sel.Name
		}
	}
	return ""
}

// check returns every reason site of the checked files.
func (c *reasonChecker) check() []reasonSite {
	var sites []reasonSite
	for _, pf := range c.files {
		ast.Inspect(pf.file, func(n ast.Node) bool {
			arg, via := c.reasonArg(pf, n)
			if arg == nil {
				return true
			}
			site := reasonSite{pos: c.fset.Position(arg.Pos()), via: via, expr: types2String(arg), problem: c.judge(pf, arg)}
			if call, ok := n.(*ast.CallExpr); ok && via == "airlock.Errorf" && site.problem == "" {
				site.code = c.rootName(pf, call.Args[0])
				site.reason = c.rootName(pf, unwrapReason(pf, arg))
			}
			sites = append(sites, site)
			return true
		})
	}
	return sites
}

// types2String renders a small expression.
func types2String(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.BasicLit:
		return x.Value
	case *ast.Ident:
		return x.Name
	case *ast.SelectorExpr:
		return types2String(x.X) + "." + x.Sel.Name
	case *ast.ParenExpr:
		return "(" + types2String(x.X) + ")"
	case *ast.CallExpr:
		args := make([]string, len(x.Args))
		for i, a := range x.Args {
			args[i] = types2String(a)
		}
		return types2String(x.Fun) + "(" + strings.Join(args, ", ") + ")"
	}
	return fmt.Sprintf("%T", e)
}

// readModule reads the module's non-test files (outside egress/) and
// egress/'s non-test files.
func readModule(t *testing.T, root string) (files, egressFiles []srcFile) {
	t.Helper()
	rels, err := moduleGoFiles(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, rel := range rels {
		src, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, srcFile{rel, src})
	}
	ents, err := os.ReadDir(filepath.Join(root, "egress"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if n := e.Name(); strings.HasSuffix(n, ".go") && !strings.HasSuffix(n, "_test.go") {
			src, err := os.ReadFile(filepath.Join(root, "egress", n))
			if err != nil {
				t.Fatal(err)
			}
			egressFiles = append(egressFiles, srcFile{"egress/" + n, src})
		}
	}
	return files, egressFiles
}

// reasonDebt lists the files whose reasons are still to be converted to
// catalogue constants: debt, to shrink to nothing. A listed file with
// nothing left to convert fails the test, so the list only shrinks.
var reasonDebt = map[string]bool{}

// testSupport reports whether rel is in a package of test support
// (storetest, providertest, crawlbench, ...), whose fixtures are not
// reasons Airlock emits.
func testSupport(rel string) bool {
	base := path.Base(path.Dir(rel))
	return strings.HasSuffix(base, "test") || strings.HasSuffix(base, "bench")
}

// namedConsts returns the constants of a Go file declared with the given
// type name (e.g. "Reason", "Code"), name -> string value.
func namedConsts(t *testing.T, file, typ string) map[string]string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, sp := range g.Specs {
			vs := sp.(*ast.ValueSpec)
			if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != typ {
				continue
			}
			for i, n := range vs.Names {
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					t.Fatalf("%s: %s is not a string literal", file, n.Name)
				}
				v, err := strconv.Unquote(lit.Value)
				if err != nil {
					t.Fatal(err)
				}
				out[n.Name] = v
			}
		}
	}
	return out
}

// TestReasonsAreCatalogued: every reason given to an error of the
// vocabulary (airlock.Errorf, airlock.Error and other literals with a
// Reason field, functions that forward a reason) is a catalogue constant or
// a value computed at run time; and an airlock.Errorf that names its code
// and its reason pairs them as the catalogue says.
func TestReasonsAreCatalogued(t *testing.T) {
	root := moduleRoot(t)
	files, eg := readModule(t, root)
	files = slices.DeleteFunc(files, func(f srcFile) bool { return testSupport(f.rel) })
	reasons := namedConsts(t, filepath.Join(root, "reasons.go"), "Reason")
	codes := namedConsts(t, filepath.Join(root, "errors.go"), "Code")
	c, err := newReasonChecker(slices.Collect(mapsKeys(reasons)), files, eg)
	if err != nil {
		t.Fatal(err)
	}
	sites := c.check()
	// Guard against a vacuous pass.
	if len(sites) < 300 {
		t.Fatalf("only %d reason sites found; the checker no longer sees them", len(sites))
	}
	debt := map[string]int{}
	for _, s := range sites {
		if s.problem != "" {
			if reasonDebt[s.pos.Filename] {
				debt[s.pos.Filename]++
				continue
			}
			t.Errorf("%s", s)
			continue
		}
		if s.code == "" || s.reason == "" {
			continue
		}
		code, ok := codes[s.code]
		if !ok {
			continue // not a code constant: computed
		}
		info, ok := airlock.Reason(reasons[s.reason]).Info()
		if !ok {
			t.Errorf("%s:%d: %s is not in the catalogue (reasons.go)", s.pos.Filename, s.pos.Line, s.reason)
			continue
		}
		if !slices.Contains(info.Codes, airlock.Code(code)) {
			t.Errorf("%s:%d: reason %s with code %s; the catalogue gives it %v (reasons.go)", s.pos.Filename, s.pos.Line, s.reason, code, info.Codes)
		}
	}
	for f := range reasonDebt {
		if debt[f] == 0 {
			t.Errorf("%s has no reason left to convert: remove it from reasonDebt", f)
		}
	}
	if len(debt) > 0 {
		t.Logf("reason debt: %v", debt)
	}
}

func mapsKeys(m map[string]string) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// TestEgressReasonsInCatalogue: egress imports nothing of ours and keeps
// its own reasons; each is in the catalogue, under a root constant of the
// same name and the same string.
func TestEgressReasonsInCatalogue(t *testing.T) {
	root := moduleRoot(t)
	egressReasons := namedConsts(t, filepath.Join(root, "egress", "errors.go"), "Reason")
	if len(egressReasons) < 40 {
		t.Fatalf("only %d egress reasons found in egress/errors.go", len(egressReasons))
	}
	rootReasons := namedConsts(t, filepath.Join(root, "reasons.go"), "Reason")
	for name, v := range egressReasons {
		if _, ok := airlock.Reason(v).Info(); !ok {
			t.Errorf("egress.%s = %q is not in the catalogue (reasons.go)", name, v)
		}
		if rv, ok := rootReasons[name]; !ok || rv != v {
			t.Errorf("egress.%s = %q; airlock.%s = %q, want the same string", name, v, name, rv)
		}
	}
}

// reasonFixture is a synthetic package the checker must find fault with:
// each line ending in "// want" must give exactly one problem, and no other
// line any.
const reasonFixture = `package fixture

import (
	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/egress"
	"github.com/airlockhq/airlock/internal/other"
	"github.com/airlockhq/airlock/internal/store"
)

const reasonLocal = "local"

func f1() error { return airlock.Errorf(airlock.CodeInvalid, "literal", "x") } // want
func f2() error { return airlock.Errorf(airlock.CodeInvalid, reasonLocal, "x") } // want
func f3() error { return &airlock.Error{Code: airlock.CodeDenied, Reason: "lit"} } // want
func f4() error { return airlock.Errorf(airlock.CodeInvalid, airlock.ReasonNope, "x") } // want
func f5() error { return airlock.Errorf(airlock.CodeInvalid, other.ReasonOther, "x") } // want
func f6() error { return airlock.Errorf(airlock.CodeInvalid, airlock.Reason("conv"), "x") } // want
func f7() error { return &egress.Error{Reason: egress.Reason("session")} } // want
func f8() error { return fw("laundered") } // want
func f9() error { return (&T{}).m(1, "through a method") } // want
func f10() error { const r = "local const"; return airlock.Errorf(airlock.CodeInvalid, r, "x") } // want
func f11() error { return fw2("twice laundered") } // want
func f12(e *airlock.Error) { e.Code, e.Reason = airlock.CodeDenied, "assigned" } // want

func fw(reason airlock.Reason) error { return airlock.Errorf(airlock.CodeInvalid, reason, "x") }
func fw2(r airlock.Reason) error { return fw(r) }

type T struct{}

func (*T) m(n int, why airlock.Reason) error { return &airlock.Error{Code: airlock.CodeInvalid, Reason: why} }

func ok1() error { return airlock.Errorf(airlock.CodeInvalid, airlock.ReasonUsage, "x") }
func ok2(err error) error { return airlock.Errorf(airlock.CodeInvalid, airlock.ReasonOf(err), "x") }
func ok3() error { return &egress.Error{Reason: egress.ReasonLoopback} }
func ok4() store.Revocation { return store.Revocation{Reason: "an operator's free text"} }
func ok5(e *egress.Error) error { return airlock.Errorf(airlock.CodeDenied, airlock.Reason(e.Reason), "x") }
func ok6() error { return &egress.Error{Reason: egress.Reason(airlock.ReasonBudget)} }
`

const reasonFixtureOther = `package other

const ReasonOther = "other"
`

const reasonFixtureEgress = `package egress

type Reason string

const ReasonLoopback Reason = "loopback"
`

// TestReasonCheckerCatches proves the checker can fail.
func TestReasonCheckerCatches(t *testing.T) {
	c, err := newReasonChecker([]string{"ReasonUsage", "ReasonBudget"},
		[]srcFile{{"internal/fixture/fixture.go", []byte(reasonFixture)}},
		[]srcFile{{"internal/other/other.go", []byte(reasonFixtureOther)}, {"egress/errors.go", []byte(reasonFixtureEgress)}})
	if err != nil {
		t.Fatal(err)
	}
	got := map[int]int{}
	for _, s := range c.check() {
		if s.problem != "" {
			got[s.pos.Line]++
		}
	}
	for i, line := range strings.Split(reasonFixture, "\n") {
		want := 0
		if strings.HasSuffix(line, "// want") {
			want = 1
		}
		if got[i+1] != want {
			t.Errorf("line %d %q: %d problems, want %d", i+1, line, got[i+1], want)
		}
	}
}
