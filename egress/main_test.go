package egress

import (
	"fmt"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestMain fails the package when tests leave goroutines behind: every
// server, client body and proxy a test starts must be gone when it ends.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if leaked := leakedGoroutines(5 * time.Second); len(leaked) > 0 {
			fmt.Fprintf(os.Stderr, "egress: %d goroutines leaked by the tests:\n\n%s\n", len(leaked), strings.Join(leaked, "\n\n"))
			code = 1
		}
	}
	os.Exit(code)
}

// leakedGoroutines waits up to wait for the goroutines that tests started to
// end, and returns the stacks of those still running.
func leakedGoroutines(wait time.Duration) []string {
	if t, ok := http.DefaultTransport.(*http.Transport); ok {
		t.CloseIdleConnections()
	}
	deadline := time.Now().Add(wait)
	for {
		leaked := interestingGoroutines()
		if len(leaked) == 0 || time.Now().After(deadline) {
			return leaked
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// benignStacks mark goroutines that are not leaks: the test runtime's own,
// and the loops of idle keep-alive connections held by the pools of Clients
// that tests did not close (they end with the idle timeout; the server side
// of each was closed with its server). An HTTP/1 read loop counts as idle
// only while it waits for the next response (in Peek): one that waits for
// a caller to finish a body is a leaked body.
var benignStacks = []string{
	"testing.(*M).",
	"testing.tRunner",
	"testing.Main(",
	"runtime.goexit",
	"created by runtime.gc",
	"runtime.MHeap_Scavenger",
	"signal.signal_recv",
	"sigterm.handler",
	"runtime_mcall",
	"os/signal.loop",
	"egress.interestingGoroutines",
	"net/http.(*persistConn).writeLoop",
	"http2.(*ClientConn).readLoop",
	"http2.(*clientConnReadLoop).run",
}

func interestingGoroutines() []string {
	buf := make([]byte, 2<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		_, stack, ok := strings.Cut(g, "\n")
		if !ok || stack == "" {
			continue
		}
		if slices.ContainsFunc(benignStacks, func(s string) bool { return strings.Contains(stack, s) }) {
			continue
		}
		if strings.Contains(stack, "net/http.(*persistConn).readLoop") && strings.Contains(stack, "bufio.(*Reader).Peek") {
			continue
		}
		out = append(out, strings.TrimSpace(g))
	}
	slices.Sort(out)
	return out
}
