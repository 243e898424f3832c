package egress_test

import (
	"testing"

	"github.com/airlockhq/airlock/egress"
	"github.com/airlockhq/airlock/egress/egresstest"
)

func TestMemoryPinsConformance(t *testing.T) {
	t.Parallel()
	egresstest.RunPins(t, func(*testing.T) egresstest.PinStore { return &egress.MemoryPins{} })
}
