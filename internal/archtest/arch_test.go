package archtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

const modulePath = "github.com/airlockhq/airlock"

// surfaces translate requests into engine calls; they hold no policy and
// never touch the network layer, providers or each other. Each must exist
// (TestForbiddenImports checks): the list describes the tree as it is.
var surfaces = []string{"internal/api", "internal/mcp", "internal/wasmhost"}

// ---------------------------------------------------------------------------
// Forbidden imports

// pkg is one package as `go list -deps -json` reports it. Rel is its path
// inside the module ("." for the root), "" when it is not ours.
type pkg struct {
	ImportPath string
	Standard   bool
	Imports    []string
	Deps       []string
	Module     *struct{ Path string }
	Rel        string `json:"-"`
}

// importRule forbids some dependencies to the module packages it applies
// to. Rules are written by path prefix, so a package that does not exist yet
// is covered as soon as it appears.
type importRule struct {
	name       string
	applies    func(rel string) bool
	transitive bool // check everything linked in (Deps), not only direct Imports
	forbidden  func(dep pkg) bool
}

// under reports whether rel is dir or inside it ("." is the root package only).
func under(rel, dir string) bool {
	if rel == "" {
		return false
	}
	return rel == dir || strings.HasPrefix(rel, dir+"/")
}

func underAny(rel string, dirs ...string) bool {
	for _, d := range dirs {
		if under(rel, d) {
			return true
		}
	}
	return false
}

func importRules() []importRule {
	rules := []importRule{
		{
			name:       "the root package imports only the standard library",
			applies:    func(rel string) bool { return rel == "." },
			transitive: true,
			forbidden:  func(dep pkg) bool { return !dep.Standard },
		},
		{
			name:       "egress imports nothing of ours outside egress/",
			applies:    func(rel string) bool { return under(rel, "egress") },
			transitive: true,
			forbidden:  func(dep pkg) bool { return dep.Rel != "" && !under(dep.Rel, "egress") },
		},
		{
			name:      "only cmd/ imports internal/cli",
			applies:   func(rel string) bool { return !underAny(rel, "cmd", "internal/cli") },
			forbidden: func(dep pkg) bool { return under(dep.Rel, "internal/cli") },
		},
		{
			name:       "providers never import a surface, the CLI or the engine facade",
			applies:    func(rel string) bool { return under(rel, "internal/provider") },
			transitive: true,
			forbidden: func(dep pkg) bool {
				return underAny(dep.Rel, append([]string{"internal/cli", "engine"}, surfaces...)...)
			},
		},
		{
			// API providers and their environment variables are the
			// composition root's registry (internal/cli), handed to the
			// engine with WithProviders; the engine builds only its own
			// (native, and chromium, which renders through the engine's
			// browser sessions).
			name:    "the engine facade imports no provider but native and chromium",
			applies: func(rel string) bool { return rel == "engine" },
			forbidden: func(dep pkg) bool {
				return under(dep.Rel, "internal/provider") && !underAny(dep.Rel, "internal/provider/native", "internal/provider/chromium")
			},
		},
		{
			// The engine hands its subsystems narrow dependencies; one
			// that imported the facade would hold it by the back door.
			name:       "the crawl-jobs runner never imports the engine facade, a surface or the CLI",
			applies:    func(rel string) bool { return under(rel, "internal/jobs") },
			transitive: true,
			forbidden: func(dep pkg) bool {
				return underAny(dep.Rel, append([]string{"internal/cli", "engine"}, surfaces...)...)
			},
		},
		{
			// The browser sessions manager gets a per-tenant dialer, a
			// revocation check and an audit func from its owner, never
			// the owner itself.
			name:       "the browser sessions manager never imports the engine facade, a surface or the CLI",
			applies:    func(rel string) bool { return under(rel, "internal/browser") },
			transitive: true,
			forbidden: func(dep pkg) bool {
				return underAny(dep.Rel, append([]string{"internal/cli", "engine"}, surfaces...)...)
			},
		},
		{
			// The requests of a call (internal/doer) join the gate and the
			// dispatcher below the facade: holding the facade instead of
			// the narrow Env it is given would run the dependency the
			// wrong way.
			name:       "the call doers never import the engine facade, a surface or the CLI",
			applies:    func(rel string) bool { return under(rel, "internal/doer") },
			transitive: true,
			forbidden: func(dep pkg) bool {
				return underAny(dep.Rel, append([]string{"internal/cli", "engine"}, surfaces...)...)
			},
		},
		{
			// The facade delegates to its subsystems (config, fleet,
			// browse, gate, the caches, and those with rules of their own
			// above: providers, jobs, the browser sessions); one that
			// imported the facade or a surface would run the dependency
			// the wrong way.
			name: "an internal package never imports the engine facade, a surface or the CLI",
			applies: func(rel string) bool {
				return under(rel, "internal") && !underAny(rel, append([]string{"internal/cli", "internal/archtest",
					"internal/provider", "internal/jobs", "internal/browser", "internal/doer"}, surfaces...)...)
			},
			transitive: true,
			forbidden: func(dep pkg) bool {
				return underAny(dep.Rel, append([]string{"internal/cli", "engine"}, surfaces...)...)
			},
		},
		{
			name:       "commands link no test support (package testing, *test and *bench helpers)",
			applies:    func(rel string) bool { return under(rel, "cmd") },
			transitive: true,
			forbidden: func(dep pkg) bool {
				base := path.Base(dep.ImportPath)
				return (dep.Standard && under(dep.ImportPath, "testing")) ||
					(dep.Rel != "" && (strings.HasSuffix(base, "test") || strings.HasSuffix(base, "bench")))
			},
		},
		{
			name:       "internal/render imports nothing of ours but the root package",
			applies:    func(rel string) bool { return under(rel, "internal/render") },
			transitive: true,
			forbidden:  func(dep pkg) bool { return dep.Rel != "" && dep.Rel != "." },
		},
	}
	for _, s := range surfaces {
		others := slices.DeleteFunc(slices.Clone(surfaces), func(o string) bool { return o == s })
		rules = append(rules,
			importRule{
				name:      s + " never imports egress or a provider",
				applies:   func(rel string) bool { return under(rel, s) },
				forbidden: func(dep pkg) bool { return underAny(dep.Rel, "egress", "internal/provider") },
			},
			importRule{
				name:      s + " never imports internal/gate (the engine holds the policy)",
				applies:   func(rel string) bool { return under(rel, s) },
				forbidden: func(dep pkg) bool { return under(dep.Rel, "internal/gate") },
			},
			importRule{
				name:      s + " never imports internal/extract (output formatting is internal/render)",
				applies:   func(rel string) bool { return under(rel, s) },
				forbidden: func(dep pkg) bool { return under(dep.Rel, "internal/extract") },
			},
			importRule{
				name:       s + " never imports another surface",
				applies:    func(rel string) bool { return under(rel, s) },
				transitive: true,
				forbidden:  func(dep pkg) bool { return underAny(dep.Rel, others...) },
			})
	}
	return rules
}

// checkImports applies rules to every package of ours in pkgs.
func checkImports(pkgs []pkg, rules []importRule) []string {
	byPath := make(map[string]pkg, len(pkgs))
	for _, p := range pkgs {
		byPath[p.ImportPath] = p
	}
	var bad []string
	for _, p := range pkgs {
		if p.Rel == "" {
			continue
		}
		for _, r := range rules {
			if !r.applies(p.Rel) {
				continue
			}
			deps := p.Imports
			if r.transitive {
				deps = p.Deps
			}
			for _, d := range deps {
				dep, ok := byPath[d]
				if !ok { // "C" and the like: never ours
					dep = pkg{ImportPath: d, Standard: !strings.Contains(strings.Split(d, "/")[0], ".")}
				}
				if r.forbidden(dep) {
					bad = append(bad, fmt.Sprintf("%s imports %s: %s", p.ImportPath, d, r.name))
				}
			}
		}
	}
	return bad
}

// relPath returns the path of importPath inside the module, or "".
func relPath(importPath string) string {
	switch {
	case importPath == modulePath:
		return "."
	case strings.HasPrefix(importPath, modulePath+"/"):
		return strings.TrimPrefix(importPath, modulePath+"/")
	}
	return ""
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		t.Fatal("not inside a module")
	}
	return filepath.Dir(gomod)
}

// listPackages runs `go list -deps` on every package of the module.
func listPackages(t *testing.T, root string) []pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-e", "-deps", "-json=ImportPath,Standard,Imports,Deps,Module", "./...")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.Bytes())
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		if p.Module != nil && p.Module.Path == modulePath {
			p.Rel = relPath(p.ImportPath)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

func TestForbiddenImports(t *testing.T) {
	pkgs := listPackages(t, moduleRoot(t))
	var ours []string
	for _, p := range pkgs {
		if p.Rel != "" {
			ours = append(ours, p.Rel)
		}
	}
	// Guard against a vacuous pass: the packages that exist today must be seen.
	for _, want := range append([]string{".", "egress", "internal/cli", "cmd/airlock", "internal/render", "internal/fleet", "internal/browser/sessions", "internal/provider/chromium", "internal/config", "internal/doer"}, surfaces...) {
		if !slices.Contains(ours, want) {
			t.Fatalf("go list did not report %q among the module's packages %q", want, ours)
		}
	}
	for _, v := range checkImports(pkgs, importRules()) {
		t.Error(v)
	}
}

// TestImportRulesCatch proves each rule can fail, on a synthetic graph.
func TestImportRulesCatch(t *testing.T) {
	ours := func(rel string, imports ...string) pkg {
		ip := modulePath
		if rel != "." {
			ip += "/" + rel
		}
		return pkg{ImportPath: ip, Rel: rel, Imports: imports, Deps: imports}
	}
	m := func(rel string) string { return modulePath + "/" + rel }
	tests := []struct {
		name string
		pkgs []pkg
		want []string // substrings, one per expected violation
	}{
		{
			name: "clean graph",
			pkgs: []pkg{
				ours(".", "errors", "context"),
				ours("egress", "net", "golang.org/x/net/idna", m("egress/internal/table")),
				ours("egress/internal/table", "net/netip"),
				ours("engine", modulePath, m("egress")),
				ours("internal/api", modulePath, m("engine"), "net/http"),
				ours("internal/provider/brave", modulePath),
				ours("internal/extract", modulePath),
				ours("internal/render", modulePath),
				ours("internal/mcp", modulePath, m("engine"), m("internal/render")),
				ours("internal/cli", m("engine"), m("egress"), m("internal/api"), m("internal/extract"), m("internal/render")),
				ours("cmd/airlock", m("internal/cli")),
				{ImportPath: "golang.org/x/net/idna"},
				{ImportPath: "errors", Standard: true},
				{ImportPath: "context", Standard: true},
				{ImportPath: "net", Standard: true},
				{ImportPath: "net/netip", Standard: true},
				{ImportPath: "net/http", Standard: true},
			},
		},
		{
			name: "root imports a third-party package",
			pkgs: []pkg{ours(".", "github.com/google/go-cmp/cmp"), {ImportPath: "github.com/google/go-cmp/cmp"}},
			want: []string{"imports github.com/google/go-cmp/cmp: the root package imports only the standard library"},
		},
		{
			name: "root imports one of ours",
			pkgs: []pkg{ours(".", m("egress")), ours("egress")},
			want: []string{"the root package imports only the standard library"},
		},
		{
			name: "egress imports the root package",
			pkgs: []pkg{ours("egress", modulePath), ours(".")},
			want: []string{"egress imports nothing of ours outside egress/"},
		},
		{
			name: "egress subpackage imports internal",
			pkgs: []pkg{ours("egress/egresstest", m("internal/gate")), ours("internal/gate")},
			want: []string{"egress/egresstest imports " + m("internal/gate")},
		},
		{
			name: "surface imports egress",
			pkgs: []pkg{ours("internal/api", m("egress")), ours("egress")},
			want: []string{"internal/api never imports egress or a provider"},
		},
		{
			name: "surface subpackage imports a provider",
			pkgs: []pkg{ours("internal/mcp/tools", m("internal/provider/brave")), ours("internal/provider/brave")},
			want: []string{"internal/mcp never imports egress or a provider"},
		},
		{
			name: "surface imports another surface",
			pkgs: []pkg{ours("internal/wasmhost", m("internal/api")), ours("internal/api")},
			want: []string{"internal/wasmhost never imports another surface"},
		},
		{
			name: "surface imports another surface transitively",
			pkgs: []pkg{
				{ImportPath: m("internal/api"), Rel: "internal/api", Imports: []string{m("engine")}, Deps: []string{m("engine"), m("internal/mcp")}},
				ours("engine", m("internal/mcp")), ours("internal/mcp"),
			},
			want: []string{"internal/api imports " + m("internal/mcp") + ": internal/api never imports another surface"},
		},
		{
			name: "the binary links a benchmark helper",
			pkgs: []pkg{
				{ImportPath: m("cmd/airlock"), Rel: "cmd/airlock", Imports: []string{m("internal/cli")}, Deps: []string{m("internal/cli"), m("internal/crawl/crawlbench"), "testing"}},
				ours("internal/cli", m("internal/crawl/crawlbench")), ours("internal/crawl/crawlbench", "testing"),
				{ImportPath: "testing", Standard: true},
			},
			want: []string{
				"cmd/airlock imports " + m("internal/crawl/crawlbench") + ": commands link no test support",
				"cmd/airlock imports testing: commands link no test support",
			},
		},
		{
			name: "surface imports the gate",
			pkgs: []pkg{ours("internal/wasmhost", modulePath, m("internal/gate")), ours("."), ours("internal/gate")},
			want: []string{"internal/wasmhost never imports internal/gate"},
		},
		{
			name: "surface imports the extractor",
			pkgs: []pkg{ours("internal/api", m("internal/extract")), ours("internal/extract")},
			want: []string{"internal/api never imports internal/extract"},
		},
		{
			name: "render imports the extractor",
			pkgs: []pkg{ours("internal/render", m("internal/extract")), ours("internal/extract")},
			want: []string{"internal/render imports " + m("internal/extract") + ": internal/render imports nothing of ours but the root package"},
		},
		{
			name: "render imports the extractor transitively",
			pkgs: []pkg{
				{ImportPath: m("internal/render"), Rel: "internal/render", Imports: []string{modulePath}, Deps: []string{modulePath, m("internal/extract")}},
				ours("."), ours("internal/extract"),
			},
			want: []string{"internal/render imports " + m("internal/extract")},
		},
		{
			name: "a library imports the CLI",
			pkgs: []pkg{ours("engine", m("internal/cli")), ours("internal/cli")},
			want: []string{"only cmd/ imports internal/cli"},
		},
		{
			name: "provider imports a surface",
			pkgs: []pkg{ours("internal/provider/native", m("internal/api")), ours("internal/api")},
			want: []string{"providers never import a surface, the CLI or the engine facade"},
		},
		{
			name: "the engine builds an API provider",
			pkgs: []pkg{ours("engine", m("internal/provider/brave")), ours("internal/provider/brave")},
			want: []string{"the engine facade imports no provider but native and chromium"},
		},
		{
			name: "the browser sessions manager imports the engine",
			pkgs: []pkg{ours("internal/browser/sessions", m("engine")), ours("engine")},
			want: []string{"the browser sessions manager never imports the engine facade, a surface or the CLI"},
		},
		{
			name: "the browser sessions manager imports a surface transitively",
			pkgs: []pkg{
				{ImportPath: m("internal/browser/sessions"), Rel: "internal/browser/sessions", Imports: []string{m("internal/browser")}, Deps: []string{m("internal/browser"), m("internal/mcp")}},
				ours("internal/browser", m("internal/mcp")), ours("internal/mcp"),
			},
			want: []string{
				"internal/browser/sessions imports " + m("internal/mcp") + ": the browser sessions manager never imports",
				"internal/browser imports " + m("internal/mcp") + ": the browser sessions manager never imports",
			},
		},
		{
			name: "the jobs runner imports the engine",
			pkgs: []pkg{ours("internal/jobs", m("engine")), ours("engine")},
			want: []string{"the crawl-jobs runner never imports the engine facade, a surface or the CLI"},
		},
		{
			name: "the call doers import the engine",
			pkgs: []pkg{ours("internal/doer", m("engine")), ours("engine")},
			want: []string{"the call doers never import the engine facade, a surface or the CLI"},
		},
		{
			name: "the call doers import a surface transitively",
			pkgs: []pkg{
				{ImportPath: m("internal/doer"), Rel: "internal/doer", Imports: []string{m("internal/gate")}, Deps: []string{m("internal/gate"), m("internal/api")}},
				ours("internal/gate", m("internal/api")), ours("internal/api"),
			},
			want: []string{
				"internal/doer imports " + m("internal/api") + ": the call doers never import",
				"internal/gate imports " + m("internal/api") + ": an internal package never imports",
			},
		},
		{
			name: "the compiled configuration imports the engine",
			pkgs: []pkg{ours("internal/config", m("engine")), ours("engine")},
			want: []string{"an internal package never imports the engine facade, a surface or the CLI"},
		},
		{
			name: "the fleet glue imports a surface",
			pkgs: []pkg{ours("internal/fleet", m("internal/api")), ours("internal/api")},
			want: []string{"an internal package never imports the engine facade, a surface or the CLI"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := checkImports(tt.pkgs, importRules())
			if len(got) != len(tt.want) {
				t.Fatalf("violations = %q, want %d matching %q", got, len(tt.want), tt.want)
			}
			for i, w := range tt.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("violation %d = %q, want it to contain %q", i, got[i], w)
				}
			}
		})
	}
}

// ---------------------------------------------------------------------------
// No direct network access outside egress

// netPackage lists the exported names of one package that reach the
// network directly: only egress may use them.
type netPackage struct {
	path     string   // import path
	name     string   // package name, when the import is not renamed
	names    []string // forbidden names
	prefixes []string // forbidden name prefixes
}

var netPackages = []netPackage{
	{
		path: "net", name: "net",
		names: []string{
			"Dial", "DialTimeout", "DialTCP", "DialUDP", "DialIP", "DialUnix",
			"Dialer", "Resolver", "DefaultResolver",
			// A packet socket can send to any address.
			"ListenPacket", "ListenUDP", "ListenIP", "ListenMulticastUDP",
		},
		prefixes: []string{"Lookup"},
	},
	{path: "crypto/tls", name: "tls", names: []string{"Dial", "DialWithDialer", "Dialer"}},
	{
		path: "net/http", name: "http",
		names: []string{"Transport", "DefaultClient", "DefaultTransport", "Get", "Post", "Head", "PostForm"},
	},
	{path: "golang.org/x/net/http2", name: "http2", names: []string{"Transport", "ConfigureTransport", "ConfigureTransports"}},
	{path: "golang.org/x/net/proxy", name: "proxy", names: []string{"Dial", "Direct", "FromEnvironment", "FromEnvironmentUsing", "FromURL", "SOCKS5"}},
	{path: "github.com/refraction-networking/utls", name: "tls", names: []string{"Dial", "DialWithDialer", "Dialer"}},
	{path: "github.com/miekg/dns", name: "dns", names: []string{"Client", "Exchange", "ExchangeContext", "Dial", "DialTimeout", "DialWithTLS", "DialTimeoutWithTLS"}},
	{path: "syscall", name: "syscall", names: []string{"Socket", "Connect"}},
	{path: "golang.org/x/sys/unix", name: "unix", names: []string{"Socket", "Connect"}},
	// egress's unguarded dialler for the operator's own infrastructure
	// (Redis): no floor, no audit. Only infraDialers may call it.
	{path: modulePath + "/egress", name: "egress", names: []string{"DialInfrastructure"}},
}

// infraDialers are the directories (with their subdirectories) whose
// non-test files may call egress.DialInfrastructure: the Redis fleet and its
// test server helper.
var infraDialers = []string{"internal/fleet"}

// allowedOutsideEgress reports whether the file rel (a slash path inside
// the module) may use symbol, one that checkNetwork reports.
func allowedOutsideEgress(rel, symbol string) bool {
	return symbol == modulePath+"/egress.DialInfrastructure" && underAny(path.Dir(rel), infraDialers...)
}

// needTransport lists struct types whose nil Transport falls back to
// http.DefaultTransport: a literal (or new) of one must set Transport.
var needTransport = []struct{ path, name, typ string }{
	{"net/http", "http", "Client"},
	{"net/http/httputil", "httputil", "ReverseProxy"},
}

func (p netPackage) forbids(sel string) bool {
	if slices.Contains(p.names, sel) {
		return true
	}
	for _, pre := range p.prefixes {
		if strings.HasPrefix(sel, pre) {
			return true
		}
	}
	return false
}

type violation struct {
	pos    token.Position
	symbol string
}

func (v violation) String() string {
	return fmt.Sprintf("%s:%d: %s", v.pos.Filename, v.pos.Line, v.symbol)
}

// checkNetwork reports the direct network access in one Go source file.
// Names are resolved through the file's own import specs, so a renamed
// import is still caught; dot-imports of the listed packages are refused
// outright since their names could not be told from local ones.
func checkNetwork(fset *token.FileSet, filename string, src []byte) ([]violation, error) {
	f, err := parser.ParseFile(fset, filename, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	var out []violation
	report := func(n ast.Node, symbol string) {
		out = append(out, violation{pos: fset.Position(n.Pos()), symbol: symbol})
	}

	forbidden := map[string]netPackage{} // local name → package
	transport := map[string]string{}     // local name + "." + type → import path
	for _, imp := range f.Imports {
		p, err := strconv.Unquote(imp.Path.Value)
		if err != nil {
			return nil, err
		}
		local := ""
		if imp.Name != nil {
			local = imp.Name.Name
		}
		for _, np := range netPackages {
			if np.path != p {
				continue
			}
			switch local {
			case ".":
				report(imp, "dot-import "+p)
			case "_":
			case "":
				forbidden[np.name] = np
			default:
				forbidden[local] = np
			}
		}
		for _, nt := range needTransport {
			if nt.path != p {
				continue
			}
			switch local {
			case ".":
				if !slices.ContainsFunc(netPackages, func(np netPackage) bool { return np.path == p }) {
					report(imp, "dot-import "+p)
				}
			case "_":
			case "":
				transport[nt.name+"."+nt.typ] = p
			default:
				transport[local+"."+nt.typ] = p
			}
		}
	}

	// selector returns "x.Sel" for a package-qualified identifier.
	selector := func(e ast.Expr) string {
		s, ok := e.(*ast.SelectorExpr)
		if !ok {
			return ""
		}
		x, ok := s.X.(*ast.Ident)
		if !ok {
			return ""
		}
		return x.Name + "." + s.Sel.Name
	}

	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.SelectorExpr:
			x, ok := n.X.(*ast.Ident)
			if !ok {
				return true
			}
			if np, ok := forbidden[x.Name]; ok && np.forbids(n.Sel.Name) {
				report(n, np.path+"."+n.Sel.Name)
			}
		case *ast.CompositeLit:
			name := selector(n.Type)
			p, ok := transport[name]
			if !ok {
				return true
			}
			if !setsTransport(n) {
				report(n, p+"."+strings.SplitN(name, ".", 2)[1]+" without Transport")
			}
		case *ast.CallExpr:
			fn, ok := n.Fun.(*ast.Ident)
			if !ok || fn.Name != "new" || len(n.Args) != 1 {
				return true
			}
			name := selector(n.Args[0])
			if p, ok := transport[name]; ok {
				report(n, p+"."+strings.SplitN(name, ".", 2)[1]+" without Transport")
			}
		}
		return true
	})
	return out, nil
}

// setsTransport reports whether a struct literal gives Transport a value:
// by key, or positionally (every field given).
func setsTransport(lit *ast.CompositeLit) bool {
	for _, e := range lit.Elts {
		kv, ok := e.(*ast.KeyValueExpr)
		if !ok {
			return true
		}
		if k, ok := kv.Key.(*ast.Ident); ok && k.Name == "Transport" {
			return true
		}
	}
	return false
}

// moduleGoFiles lists the non-test Go files of the module outside egress/,
// testdata, vendor, hidden directories and nested modules, relative to root.
func moduleGoFiles(root string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel == "." {
				return nil
			}
			name := d.Name()
			if rel == "egress" || name == "testdata" || name == "vendor" ||
				strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(rel, ".go") && !strings.HasSuffix(rel, "_test.go") {
			files = append(files, rel)
		}
		return nil
	})
	return files, err
}

func TestNoDirectNetworkOutsideEgress(t *testing.T) {
	root := moduleRoot(t)
	files, err := moduleGoFiles(root)
	if err != nil {
		t.Fatal(err)
	}
	// Guard against a vacuous pass.
	for _, want := range []string{"errors.go", "internal/cli/cli.go", "cmd/airlock/main.go"} {
		if !slices.Contains(files, want) {
			t.Fatalf("%s was not checked; checked %q", want, files)
		}
	}
	for _, f := range files {
		if strings.HasPrefix(f, "egress/") {
			t.Fatalf("%s is inside egress/ and must not be checked", f)
		}
	}
	fset := token.NewFileSet()
	for _, rel := range files {
		src, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		vs, err := checkNetwork(fset, rel, src)
		if err != nil {
			t.Errorf("%s: %v", rel, err)
			continue
		}
		for _, v := range vs {
			if allowedOutsideEgress(rel, v.symbol) {
				continue
			}
			t.Errorf("%s: direct network access outside egress; take a guarded client or dialer from egress", v)
		}
	}
}

// TestAllowedOutsideEgress proves the one exception to the network check is
// no wider than infraDialers: DialInfrastructure, in internal/fleet and
// below, and nothing else anywhere.
func TestAllowedOutsideEgress(t *testing.T) {
	infra := modulePath + "/egress.DialInfrastructure"
	tests := []struct {
		rel, symbol string
		want        bool
	}{
		{"internal/fleet/fleet.go", infra, true},
		{"internal/fleet/fleettest/fleettest.go", infra, true},
		{"internal/fleetx/fleet.go", infra, false},
		{"engine/fleet.go", infra, false},
		{"internal/cli/serve.go", infra, false},
		{"fleet.go", infra, false},
		{"internal/fleet/fleet.go", "net.Dial", false},
		{"internal/fleet/fleet.go", "net/http.Transport", false},
	}
	for _, tt := range tests {
		if got := allowedOutsideEgress(tt.rel, tt.symbol); got != tt.want {
			t.Errorf("allowedOutsideEgress(%q, %q) = %v, want %v", tt.rel, tt.symbol, got, tt.want)
		}
	}
}

var (
	wantComment = regexp.MustCompile(`// want (.*)$`)
	wantSymbol  = regexp.MustCompile(`"([^"]+)"`)
)

// TestNetworkCheckerFixtures proves the AST check can fail: every fixture
// line annotated `// want "symbol" ...` must be reported with exactly those
// symbols, no other line may be, and together the fixtures must exercise
// every forbidden name.
func TestNetworkCheckerFixtures(t *testing.T) {
	fixtures, err := filepath.Glob(filepath.Join("testdata", "violations", "*.go.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if len(fixtures) == 0 {
		t.Fatal("no fixtures in testdata/violations")
	}
	seen := map[string]bool{}
	var sawClean bool
	for _, fx := range fixtures {
		t.Run(filepath.Base(fx), func(t *testing.T) {
			src, err := os.ReadFile(fx)
			if err != nil {
				t.Fatal(err)
			}
			want := map[int][]string{}
			for i, line := range strings.Split(string(src), "\n") {
				if m := wantComment.FindStringSubmatch(line); m != nil {
					for _, s := range wantSymbol.FindAllStringSubmatch(m[1], -1) {
						want[i+1] = append(want[i+1], s[1])
					}
				}
			}
			vs, err := checkNetwork(token.NewFileSet(), fx, src)
			if err != nil {
				t.Fatal(err)
			}
			got := map[int][]string{}
			for _, v := range vs {
				got[v.pos.Line] = append(got[v.pos.Line], v.symbol)
				seen[v.symbol] = true
			}
			for _, m := range []map[int][]string{want, got} {
				for _, syms := range m {
					sort.Strings(syms)
				}
			}
			lines := map[int]bool{}
			for l := range want {
				lines[l] = true
			}
			for l := range got {
				lines[l] = true
			}
			for l := range lines {
				if !slices.Equal(got[l], want[l]) {
					t.Errorf("%s:%d: reported %q, want %q", fx, l, got[l], want[l])
				}
			}
			if strings.HasPrefix(path.Base(filepath.ToSlash(fx)), "clean") {
				sawClean = true
				if len(want) != 0 || len(got) != 0 {
					t.Errorf("clean fixture: reported %v, want nothing", got)
				}
			}
		})
	}
	if !sawClean {
		t.Error("no clean*.go.txt fixture: the checker is never shown to pass legitimate code")
	}
	// Every forbidden name is proved detectable by some fixture.
	for _, np := range netPackages {
		for _, n := range np.names {
			if !seen[np.path+"."+n] {
				t.Errorf("no fixture reports %s.%s", np.path, n)
			}
		}
		for _, pre := range np.prefixes {
			if !slices.ContainsFunc(slices.Collect(maps.Keys(seen)), func(s string) bool { return strings.HasPrefix(s, np.path+"."+pre) }) {
				t.Errorf("no fixture reports %s.%s*", np.path, pre)
			}
		}
	}
	for _, nt := range needTransport {
		if !seen[nt.path+"."+nt.typ+" without Transport"] {
			t.Errorf("no fixture reports %s.%s without Transport", nt.path, nt.typ)
		}
	}
	for _, p := range []string{"net", "net/http", "crypto/tls"} {
		if !seen["dot-import "+p] {
			t.Errorf("no fixture reports a dot-import of %s", p)
		}
	}
}

// outsideRepo matches a path literal that climbs to the shared checkout
// beside the repository (a "..", "/shared" path, or "shared" as a filepath.Join
// element after ".." elements).
var outsideRepo = regexp.MustCompile(`\.\./shared\b|"\.\.",\s*"shared"`)

// TestNoTestReadsOutsideRepo keeps the standing rule that a fresh clone with
// nothing beside it passes: no test reads the shared checkout beside it.
func TestNoTestReadsOutsideRepo(t *testing.T) {
	root := moduleRoot(t)
	shared := "sha" + "red" // split so that this file does not match itself
	if !outsideRepo.MatchString(`filepath.Join("..", "..", "`+shared+`", "corpus")`) ||
		!outsideRepo.MatchString(`"../`+shared+`/corpus/readability"`) {
		t.Fatal("the pattern misses the forms it is meant to catch")
	}
	checked := 0
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if p != root && (name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") {
			return nil
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		checked++
		for i, line := range strings.Split(string(src), "\n") {
			code, _, _ := strings.Cut(line, "//")
			if outsideRepo.MatchString(code) {
				rel, _ := filepath.Rel(root, p)
				t.Errorf("%s:%d reads outside the repository: %s", rel, i+1, strings.TrimSpace(line))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 100 {
		t.Fatalf("checked only %d Go files", checked)
	}
}
