package proxy_test

import (
	"os"
	"testing"

	"github.com/airlockhq/airlock/internal/leakcheck"
)

func TestMain(m *testing.M) {
	os.Exit(leakcheck.Main(m, "proxy", leakcheck.Options{IdleHTTP: true}))
}
