package cli

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/airlockhq/airlock/internal/wasmhost/wasmtest"
)

// buildDir holds what the package's tests build once per test binary (the
// airlock binary, the guests and their compilation cache); TestMain makes
// it and removes it.
var buildDir string

// testGuests are the guest packages (relative to the module root) that
// run and serve-guest load in the tests.
var testGuests = []string{"examples/guests/summarise", "examples/guests/handler"}

// guests builds testGuests and compiles them once per test binary
// (wasmtest.Build): the commands would compile a guest in this
// race-instrumented binary many times slower. TestMain starts it in the
// background.
var guests = sync.OnceValue(func() *wasmtest.Guests {
	g := wasmtest.Build(buildDir, testGuests)
	if g.CacheErr != nil {
		fmt.Fprintf(os.Stderr, "cli tests: %v\n", g.CacheErr)
	}
	return g
})

// guestIn returns the guest package pkg (one of testGuests) built for
// wasip1, and gives dataDir a wasm-cache (where run and serve-guest keep
// compiled guests) holding it compiled. check, called after the commands
// ran, fails t if they compiled anything themselves: a missed cache costs
// minutes under the race detector.
func guestIn(t *testing.T, pkg, dataDir string) (wasm string, check func()) {
	t.Helper()
	g := guests()
	if err := g.Errs[pkg]; err != nil {
		t.Fatal(err)
	}
	wasm, ok := g.Wasm[pkg]
	if !ok {
		t.Fatalf("guest %s is not in testGuests", pkg)
	}
	if g.CacheErr != nil {
		t.Log("the guests are not precompiled (see the test binary's stderr): the commands compile them")
		return wasm, func() {}
	}
	dst := filepath.Join(dataDir, "wasm-cache")
	before, err := copyTree(g.Cache, dst)
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
			t.Errorf("%s: %d files after the commands ran, %d before: they compiled %s instead of finding it in the cache (see wasmtest.Build)", dst, after, before, pkg)
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
