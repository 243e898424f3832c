package providertest

import (
	"testing"

	"github.com/airlockhq/airlock/internal/leakcheck"
)

// Main runs the package's tests and fails them when they leave goroutines
// behind: every test server, response body and crawl worker must be gone
// when they end. Call it from TestMain: os.Exit(providertest.Main(m, "name")).
func Main(m *testing.M, pkg string) int { return leakcheck.Main(m, pkg, leakcheck.Options{}) }
