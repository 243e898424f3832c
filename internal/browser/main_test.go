package browser

import (
	"os"
	"testing"

	"github.com/airlockhq/airlock/internal/leakcheck"
)

// liveSessions is how many tests run at once (go test's -parallel, unless
// given): each launches its own Chromium and mostly waits on it (launch,
// loads, the product's bounded waits), so more of them overlap than there
// are cores (-parallel defaults to GOMAXPROCS, 2 on CI); more than this
// many browsers at once only slows each of them on a 2-core machine.
const liveSessions = 4

// TestMain sets the package's default -parallel to liveSessions. The tests
// share no mutable package state: each has its own Chromium, proxy, site
// and temporary directories (the one that sets HOME is not parallel).
func TestMain(m *testing.M) {
	leakcheck.RaiseParallel(liveSessions)
	os.Exit(m.Run())
}
