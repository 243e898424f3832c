package engine_test

import (
	"testing"

	"github.com/airlockhq/airlock/engine"
)

// TestRuntimeMetricsGathered: the Go and process collectors, built only
// when the metrics are first gathered (issue #20: every CLI verb's engine
// built them at start), still report, gather after gather.
func TestRuntimeMetricsGathered(t *testing.T) {
	e := newEngine(t, engine.Config{InMemory: true})
	for round := range 2 {
		mfs, err := e.Registry().Gather()
		if err != nil {
			t.Fatalf("gather #%d: %v", round+1, err)
		}
		want := map[string]bool{"go_goroutines": false, "go_memstats_alloc_bytes": false, "process_open_fds": false, "airlock_build_info": false}
		for _, mf := range mfs {
			if _, ok := want[mf.GetName()]; ok {
				want[mf.GetName()] = true
			}
		}
		for name, seen := range want {
			if !seen {
				t.Errorf("gather #%d: no %s", round+1, name)
			}
		}
	}
}
