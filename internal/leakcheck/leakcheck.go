// Package leakcheck fails a package's tests when they leave goroutines
// behind, and sets how many of them run at once (RaiseParallel). It is for
// TestMain only:
//
//	func TestMain(m *testing.M) { os.Exit(leakcheck.Main(m, "crawl", leakcheck.Options{})) }
package leakcheck

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Wait is how long Main lets the tests' goroutines end before it reports
// the ones still running.
const Wait = 5 * time.Second

// Options tune what is not a leak.
type Options struct {
	// IdleHTTP ignores the loops of idle keep-alive connections held by
	// clients the tests did not close (they end with the idle timeout). An
	// HTTP/1 read loop counts as idle only while it waits for the next
	// response: one that waits for a caller to finish a body is a leak.
	IdleHTTP bool
	// Benign lists more stack substrings that mark goroutines that are
	// not leaks.
	Benign []string
}

// benign marks the test runtime's own goroutines.
var benign = []string{
	"testing.(*M).", "testing.tRunner", "testing.Main(", "runtime.goexit",
	"created by runtime.gc", "signal.signal_recv", "os/signal.loop",
	"leakcheck.interesting",
}

var idleHTTP = []string{
	"net/http.(*persistConn).writeLoop",
	"http2.(*ClientConn).readLoop",
	"http2.(*clientConnReadLoop).run",
}

// Main runs the tests and returns the exit code: 1 if they passed but left
// goroutines behind, printing their stacks under pkg's name.
func Main(m *testing.M, pkg string, o Options) int {
	code := m.Run()
	if code != 0 {
		return code
	}
	deadline := time.Now().Add(Wait)
	for {
		leaked := interesting(o)
		if len(leaked) == 0 {
			return code
		}
		if time.Now().After(deadline) {
			fmt.Fprintf(os.Stderr, "%s: %d goroutines leaked by the tests:\n\n%s\n", pkg, len(leaked), strings.Join(leaked, "\n\n"))
			return 1
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func interesting(o Options) []string {
	skip := slices.Concat(benign, o.Benign)
	if o.IdleHTTP {
		skip = append(skip, idleHTTP...)
	}
	buf := make([]byte, 2<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		_, stack, ok := strings.Cut(g, "\n")
		if !ok || stack == "" || slices.ContainsFunc(skip, func(s string) bool { return strings.Contains(stack, s) }) {
			continue
		}
		if o.IdleHTTP && strings.Contains(stack, "net/http.(*persistConn).readLoop") && strings.Contains(stack, "bufio.(*Reader).Peek") {
			continue
		}
		out = append(out, strings.TrimSpace(g))
	}
	slices.Sort(out)
	return out
}

// RaiseParallel sets go test's -parallel to n unless the command line
// gives it: by default it is GOMAXPROCS, and a package whose tests mostly
// wait (on Chromium, child processes, Redis, product timeouts) overlaps
// more of them than that. Call it from TestMain before m.Run; tests that
// are not parallel still run first, one at a time.
func RaiseParallel(n int) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		if err := flag.Set("test.parallel", strconv.Itoa(n)); err != nil {
			panic(err)
		}
	}
}
