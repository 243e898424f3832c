// Command airlock is the Airlock gateway: see the README. All of its
// behaviour lives in internal/cli; main only wires signals, the exit code
// and the start of the collector.
package main

import (
	"os"
	"runtime"
	"runtime/debug"

	"github.com/airlockhq/airlock/internal/cli"
)

func main() {
	deferFirstGC(os.Getenv)
	ctx := &signalContext{} // SIGINT and SIGTERM cancel it
	code := cli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	ctx.Stop()
	os.Exit(code)
}

// firstGCPercent is the GOGC until the first collection: the runtime
// collects first at 4 MB of heap times GOGC/100, so the first collection
// comes at about 32 MB instead of 4 MB.
const firstGCPercent = 800

// deferFirstGC lets the heap grow to about 32 MB before the first garbage
// collection, then restores the default (GOGC=100). Most airlock processes
// are one call (fetch, http, policy check) that an agent runs many times
// and that allocates a few MB: they now end before any collection, which
// cost them about a tenth of their CPU. A process that allocates more
// (serve, a crawl, a large page) collects once at 32 MB and from then on
// as before. A GOGC or GOMEMLIMIT in the environment is left alone.
func deferFirstGC(getenv func(string) string) {
	if getenv("GOGC") != "" || getenv("GOMEMLIMIT") != "" {
		return
	}
	prev := debug.SetGCPercent(firstGCPercent)
	// The finalizer of an object dropped at once runs after the first
	// collection.
	// It restores prev only over its own setting: a GOGC the process chose
	// since (airlock crawl raises it) stays.
	runtime.SetFinalizer(new([16]byte), func(*[16]byte) {
		if cur := debug.SetGCPercent(prev); cur != firstGCPercent {
			debug.SetGCPercent(cur)
		}
	})
}
