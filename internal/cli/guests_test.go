package cli

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
)

// buildDir holds what the package's tests build once per test binary (the
// airlock binary, the guests and their compilation cache); TestMain makes
// it and removes it.
var buildDir string

// moduleRoot is the directory of the module's go.mod.
var moduleRoot = sync.OnceValues(func() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %v", err)
	}
	return filepath.Dir(strings.TrimSpace(string(out))), nil
})

// testGuests are the guest packages (relative to the module root) that
// run and serve-guest load in the tests.
var testGuests = []string{"examples/guests/summarise", "examples/guests/handler"}

type builtGuests struct {
	wasm  map[string]string // package → module file
	cache string            // compilation cache holding them; "" if precompiling failed
	err   error
}

// guests builds testGuests for wasip1 once per test binary, both at once,
// then compiles them into a wazero compilation cache with
// internal/wasmhost/testdata/precompile, a program built without the race
// detector: the commands would compile a guest in this race-instrumented
// binary many times slower. TestMain starts it in the background.
var guests = sync.OnceValue(func() *builtGuests {
	g := &builtGuests{wasm: map[string]string{}}
	root, err := moduleRoot()
	if err != nil {
		g.err = err
		return g
	}
	errs := make([]error, len(testGuests))
	var wg sync.WaitGroup
	for i, pkg := range testGuests {
		out := filepath.Join(buildDir, filepath.Base(pkg)+".wasm")
		g.wasm[pkg] = out
		wg.Go(func() {
			cmd := exec.Command("go", "build", "-o", out, "./"+pkg)
			cmd.Dir = root
			cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
			if msg, err := cmd.CombinedOutput(); err != nil {
				errs[i] = fmt.Errorf("go build %s: %v\n%s", pkg, err, msg)
			}
		})
	}
	// The precompiler builds meanwhile.
	pre := filepath.Join(buildDir, "precompile")
	// wazero keeps its cache per wazero version, which it reads from the
	// binary's build information: a test binary has none and says "dev".
	// Give the precompiler the version this binary reports.
	cmd := exec.Command("go", "build", "-o", pre,
		"-ldflags=-X github.com/tetratelabs/wazero/internal/version.version="+wazeroVersion(),
		"./internal/wasmhost/testdata/precompile")
	cmd.Dir = root
	preMsg, preErr := cmd.CombinedOutput()
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			g.err = err
			return g
		}
	}
	if preErr != nil {
		fmt.Fprintf(os.Stderr, "cli tests: building the precompiler: %v\n%s", preErr, preMsg)
		return g
	}
	cache := filepath.Join(buildDir, "wasm-cache")
	args := []string{cache}
	for _, pkg := range testGuests {
		args = append(args, g.wasm[pkg])
	}
	if msg, err := exec.Command(pre, args...).CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "cli tests: precompiling the guests: %v\n%s", err, msg)
		return g
	}
	g.cache = cache
	return g
})

// wazeroVersion is the version wazero finds in this binary's build
// information, "dev" when it has none.
func wazeroVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if dep.Path == "github.com/tetratelabs/wazero" && dep.Version != "" && dep.Version != "(devel)" {
				return dep.Version
			}
		}
	}
	return "dev"
}

// guestIn returns the guest package pkg (one of testGuests) built for
// wasip1, and gives dataDir a wasm-cache (where run and serve-guest keep
// compiled guests) holding it compiled. check, called after the commands
// ran, fails t if they compiled anything themselves: a missed cache costs
// minutes under the race detector.
func guestIn(t *testing.T, pkg, dataDir string) (wasm string, check func()) {
	t.Helper()
	g := guests()
	if g.err != nil {
		t.Fatal(g.err)
	}
	wasm, ok := g.wasm[pkg]
	if !ok {
		t.Fatalf("guest %s is not in testGuests", pkg)
	}
	if g.cache == "" {
		t.Log("the guests are not precompiled (see the test binary's stderr): the commands compile them")
		return wasm, func() {}
	}
	dst := filepath.Join(dataDir, "wasm-cache")
	before, err := copyTree(g.cache, dst)
	if err != nil {
		t.Fatal(err)
	}
	return wasm, func() {
		t.Helper()
		after, err := countFiles(dst)
		if err != nil {
			t.Fatal(err)
		}
		if after != before {
			t.Errorf("%s: %d files after the commands ran, %d before: they compiled %s instead of finding it in the cache (see wazeroVersion)", dst, after, before, pkg)
		}
	}
}

// copyTree copies the regular files under src to dst and returns how many.
func copyTree(src, dst string) (int, error) {
	n := 0
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o700)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		n++
		return os.WriteFile(to, b, 0o600)
	})
	return n, err
}

func countFiles(dir string) (int, error) {
	n := 0
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			n++
		}
		return err
	})
	return n, err
}
