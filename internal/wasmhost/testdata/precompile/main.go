// Command precompile compiles WebAssembly modules into a wazero compilation
// cache directory, as wasmhost's runtimes do (compiled to stop when their
// context is done). wasmhost's tests run it once per test binary: built
// without the race detector, it compiles the test guests in a fraction of
// the time the race-instrumented test binary would, and every host of the
// tests then finds them in the cache.
//
// Usage: precompile CACHEDIR MODULE.wasm...
package main

import (
	"context"
	"fmt"
	"os"
	"sync"

	"github.com/tetratelabs/wazero"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: precompile CACHEDIR MODULE.wasm...")
		os.Exit(2)
	}
	ctx := context.Background()
	cache, err := wazero.NewCompilationCacheWithDir(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer cache.Close(ctx)
	failed := false
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, name := range os.Args[2:] {
		wg.Go(func() {
			err := compile(ctx, cache, name)
			if err != nil {
				mu.Lock()
				fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
				failed = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if failed {
		os.Exit(1)
	}
}

func compile(ctx context.Context, cache wazero.CompilationCache, name string) error {
	wasm, err := os.ReadFile(name)
	if err != nil {
		return err
	}
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCompilationCache(cache).WithCloseOnContextDone(true))
	defer rt.Close(ctx)
	_, err = rt.CompileModule(ctx, wasm)
	return err
}
