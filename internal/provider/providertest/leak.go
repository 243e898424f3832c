package providertest

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// Main runs the package's tests and fails them when they leave goroutines
// behind: every test server, response body and crawl worker must be gone
// when they end. Call it from TestMain: os.Exit(providertest.Main(m, "name")).
func Main(m *testing.M, pkg string) int {
	code := m.Run()
	if code == 0 {
		if leaked := leakedGoroutines(5 * time.Second); len(leaked) > 0 {
			fmt.Fprintf(os.Stderr, "%s: %d goroutines leaked by the tests:\n\n%s\n", pkg, len(leaked), strings.Join(leaked, "\n\n"))
			code = 1
		}
	}
	return code
}

func leakedGoroutines(wait time.Duration) []string {
	deadline := time.Now().Add(wait)
	for {
		leaked := interestingGoroutines()
		if len(leaked) == 0 || time.Now().After(deadline) {
			return leaked
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// benign marks goroutines that are not leaks: the test runtime's own.
var benign = []string{"testing.(*M).", "testing.tRunner", "testing.Main(", "runtime.goexit", "created by runtime.gc", "signal.signal_recv", "os/signal.loop", "interestingGoroutines"}

func interestingGoroutines() []string {
	buf := make([]byte, 2<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		_, stack, ok := strings.Cut(g, "\n")
		if !ok || stack == "" || slices.ContainsFunc(benign, func(s string) bool { return strings.Contains(stack, s) }) {
			continue
		}
		out = append(out, strings.TrimSpace(g))
	}
	return out
}
