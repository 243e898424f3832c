// Package wasmtest builds WebAssembly guests for tests, once per test
// binary, and compiles them into a wazero compilation cache with
// internal/wasmhost/testdata/precompile, a program built without the race
// detector: a race-instrumented test binary compiles a guest many times
// slower. wazero's cache key covers only the module, wazero's version, the
// CPU and the runtime's settings, so every host of the tests that uses the
// cache finds the guests compiled.
package wasmtest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
)

// Guests is what Build made.
type Guests struct {
	Wasm map[string]string // guest package → its module file
	Errs map[string]error  // guest package → why it did not build
	// Cache is the compilation cache, dir/cache. When CacheErr is set it
	// holds nothing, and hosts compile the guests themselves.
	Cache    string
	CacheErr error
}

// Build builds pkgs (paths relative to the module root) for wasip1 into
// dir, two at a time while the precompiler builds, then compiles the ones
// that built into dir/cache.
func Build(dir string, pkgs []string) *Guests {
	g := &Guests{Wasm: map[string]string{}, Errs: map[string]error{}, Cache: filepath.Join(dir, "cache")}
	root, err := moduleRoot()
	if err != nil {
		for _, pkg := range pkgs {
			g.Errs[pkg] = err
		}
		g.CacheErr = err
		return g
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 2)
	for _, pkg := range pkgs {
		out := filepath.Join(dir, strings.ReplaceAll(pkg, "/", "_")+".wasm")
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			cmd := exec.Command("go", "build", "-o", out, "./"+pkg)
			cmd.Dir = root
			cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
			msg, err := cmd.CombinedOutput()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				g.Errs[pkg] = fmt.Errorf("go build %s: %v\n%s", pkg, err, msg)
				return
			}
			g.Wasm[pkg] = out
		})
	}
	// wazero keeps its cache per wazero version, which it reads from the
	// binary's build information: a test binary has none and says "dev".
	// Give the precompiler the version this binary reports.
	pre := filepath.Join(dir, "precompile")
	cmd := exec.Command("go", "build", "-o", pre,
		"-ldflags=-X github.com/tetratelabs/wazero/internal/version.version="+wazeroVersion(),
		"./internal/wasmhost/testdata/precompile")
	cmd.Dir = root
	preMsg, preErr := cmd.CombinedOutput()
	wg.Wait()
	if preErr != nil {
		g.CacheErr = fmt.Errorf("building the precompiler: %v\n%s", preErr, preMsg)
		return g
	}
	args := []string{g.Cache}
	for _, pkg := range pkgs {
		if w, ok := g.Wasm[pkg]; ok {
			args = append(args, w)
		}
	}
	if len(args) == 1 {
		g.CacheErr = errors.New("no guest built")
		return g
	}
	if msg, err := exec.Command(pre, args...).CombinedOutput(); err != nil {
		g.CacheErr = fmt.Errorf("precompiling the guests: %v\n%s", err, msg)
	}
	return g
}

func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %v", err)
	}
	return filepath.Dir(strings.TrimSpace(string(out))), nil
}

// wazeroVersion is the version wazero finds in this binary's build
// information (internal/version.GetWazeroVersion), "dev" when it has none.
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
