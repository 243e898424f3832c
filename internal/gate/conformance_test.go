package gate_test

import (
	"testing"

	"github.com/airlockhq/airlock/internal/gate"
	"github.com/airlockhq/airlock/internal/gate/gatetest"
)

func TestMemoryLimiterConformance(t *testing.T) {
	gatetest.RunLimiter(t, func(*testing.T) gate.RateLimiter { return &gate.MemoryLimiter{} })
}
