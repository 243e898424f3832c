package engine_test

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// unnameable walks the exported API of pkg (every exported func, var,
// const, type, struct field and method, transitively through the types
// they reach) and returns the named types it reaches that live in an
// internal/ package and that pkg gives no alias for: outside code gets
// values of them but cannot name them (declare a variable, a field, a
// func parameter). Each is reported once, with the first path that
// reached it.
func unnameable(pkg *types.Package) []string {
	aliased := map[*types.TypeName]bool{}
	scope := pkg.Scope()
	for _, name := range scope.Names() {
		tn, ok := scope.Lookup(name).(*types.TypeName)
		if !ok || !tn.Exported() || !tn.IsAlias() {
			continue
		}
		if n, ok := types.Unalias(tn.Type()).(*types.Named); ok {
			aliased[n.Origin().Obj()] = true
		}
	}
	seen := map[types.Type]bool{}
	var out []string
	var walk func(t types.Type, via string)
	walkMethods := func(t types.Type, via string) {
		ms := types.NewMethodSet(types.NewPointer(t))
		if types.IsInterface(t) {
			ms = types.NewMethodSet(t)
		}
		for m := range ms.Methods() {
			if m.Obj().Exported() {
				walk(m.Type(), via+"."+m.Obj().Name())
			}
		}
	}
	walk = func(t types.Type, via string) {
		if t == nil || seen[t] {
			return
		}
		seen[t] = true
		switch t := t.(type) {
		case *types.Alias:
			walk(types.Unalias(t), via)
		case *types.Named:
			obj := t.Origin().Obj()
			if ta := t.TypeArgs(); ta != nil {
				for a := range ta.Types() {
					walk(a, via+"[]")
				}
			}
			if obj.Pkg() == nil {
				return // error, comparable
			}
			path := obj.Pkg().Path()
			internal := strings.Contains(path, "/internal/") || strings.HasPrefix(path, "internal/")
			if internal && !aliased[obj] {
				out = append(out, fmt.Sprintf("%s.%s (via %s)", path, obj.Name(), via))
			}
			// Descend into our own types and the internal ones (an
			// aliased internal type may reach another); a public
			// package's types are that package's business.
			if obj.Pkg() == pkg || internal {
				walk(t.Underlying(), via)
				walkMethods(t, via)
			}
		case *types.Pointer:
			walk(t.Elem(), via)
		case *types.Slice:
			walk(t.Elem(), via)
		case *types.Array:
			walk(t.Elem(), via)
		case *types.Map:
			walk(t.Key(), via)
			walk(t.Elem(), via)
		case *types.Chan:
			walk(t.Elem(), via)
		case *types.Signature:
			for v := range t.Params().Variables() {
				walk(v.Type(), via+"()")
			}
			for v := range t.Results().Variables() {
				walk(v.Type(), via+"()")
			}
		case *types.Struct:
			for f := range t.Fields() {
				if f.Exported() {
					walk(f.Type(), via+"."+f.Name())
				}
			}
		case *types.Interface:
			walkMethods(t, via)
		}
	}
	for _, name := range scope.Names() {
		obj := scope.Lookup(name)
		if !obj.Exported() {
			continue
		}
		walk(obj.Type(), pkg.Name()+"."+name)
		if tn, ok := obj.(*types.TypeName); ok && !tn.IsAlias() {
			walkMethods(obj.Type(), pkg.Name()+"."+name)
		}
	}
	slices.Sort(out)
	return out
}

// TestPublicAPINamesNoInternalType: every type the engine's API reaches
// that lives in an internal/ package has an engine alias (e.g.
// BrowserPageInfo for internal/browser's PageInfo), so a Go program
// embedding the engine can name everything it is handed.
func TestPublicAPINamesNoInternalType(t *testing.T) {
	t.Parallel()
	pkg := typecheckEngine(t)
	if bad := unnameable(pkg); len(bad) > 0 {
		t.Errorf("the engine's API reaches %d internal types with no engine alias:\n%s", len(bad), strings.Join(bad, "\n"))
	}
}

// TestUnnameableCatches proves the walk finds each way an internal type
// can leak, on fake packages, and accepts the aliased one.
func TestUnnameableCatches(t *testing.T) {
	const internalSrc = `package x
type Named struct{ Deep Deeper }
type Deeper struct{ N int }
type Hidden struct{}
type Iface interface{ Get() Returned }
type Returned struct{}
type Embedded struct{}
func (Named) M() MethodResult { return MethodResult{} }
type MethodResult struct{}
type Elem struct{}
`
	tests := []struct {
		name, src string
		want      []string
	}{
		{"aliased", `package engine
import "example.com/m/internal/x"
type Result = x.Hidden
func F() Result { return Result{} }`, nil},
		{"func result", `package engine
import "example.com/m/internal/x"
func F() x.Hidden { return x.Hidden{} }`, []string{"x.Hidden (via engine.F()"}},
		{"field of an aliased type", `package engine
import "example.com/m/internal/x"
type Named = x.Named
type MethodResult = x.MethodResult`, []string{"x.Deeper (via engine.Named.Deep"}},
		{"method of an aliased type", `package engine
import "example.com/m/internal/x"
type Named = x.Named
type Deeper = x.Deeper`, []string{"x.MethodResult (via engine.Named.M()"}},
		{"interface method", `package engine
import "example.com/m/internal/x"
type Iface = x.Iface`, []string{"x.Returned (via engine.Iface.Get()"}},
		{"embedded field", `package engine
import "example.com/m/internal/x"
type Page struct{ x.Embedded; ID string }`, []string{"x.Embedded (via engine.Page.Embedded"}},
		{"method of an engine type, in a map of channels", `package engine
import "example.com/m/internal/x"
type Engine struct{}
func (*Engine) Events() map[string]<-chan []*x.Elem { return nil }`, []string{"x.Elem (via engine.Engine.Events()"}},
		{"unexported is fine", `package engine
import "example.com/m/internal/x"
type Engine struct{ h x.Hidden }
func (*Engine) get() x.Hidden { return x.Hidden{} }
func helper() x.Hidden { return x.Hidden{} }`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fset := token.NewFileSet()
			xpkg := check(t, fset, "example.com/m/internal/x", internalSrc, nil)
			pkg := check(t, fset, "example.com/m/engine", tt.src, importerFunc(func(string) (*types.Package, error) { return xpkg, nil }))
			got := unnameable(pkg)
			if len(got) != len(tt.want) {
				t.Fatalf("unnameable = %q, want %d matching %q", got, len(tt.want), tt.want)
			}
			for i, w := range tt.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("unnameable[%d] = %q, want it to contain %q", i, got[i], w)
				}
			}
		})
	}
}

type importerFunc func(string) (*types.Package, error)

func (f importerFunc) Import(path string) (*types.Package, error) { return f(path) }

func check(t *testing.T, fset *token.FileSet, path, src string, imp types.Importer) *types.Package {
	t.Helper()
	f, err := parser.ParseFile(fset, path+".go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	pkg, err := (&types.Config{Importer: imp}).Check(path, fset, []*ast.File{f}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return pkg
}

// typecheckEngine type-checks package engine from its source, importing
// its dependencies from the export data the go command builds.
func typecheckEngine(t *testing.T) *types.Package {
	t.Helper()
	cmd := exec.Command("go", "list", "-export", "-deps", "-json=ImportPath,Export", ".")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -export: %v\n%s", err, stderr.String())
	}
	exports := map[string]string{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p struct{ ImportPath, Export string }
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		exports[p.ImportPath] = p.Export
	}
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		if exports[path] == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(exports[path])
	})
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	pkg, err := (&types.Config{Importer: imp}).Check("github.com/airlockhq/airlock/engine", fset, files, nil)
	if err != nil {
		t.Fatal(err)
	}
	return pkg
}
