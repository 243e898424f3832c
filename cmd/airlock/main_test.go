package main

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

// TestDeferFirstGC: until the first collection GOGC is firstGCPercent;
// after it, the previous setting is back. A GOGC or GOMEMLIMIT in the
// environment turns it off.
func TestDeferFirstGC(t *testing.T) {
	prev := debug.SetGCPercent(100)
	defer debug.SetGCPercent(prev)

	deferFirstGC(func(k string) string { return map[string]string{"GOGC": "50"}[k] })
	if got := debug.SetGCPercent(100); got != 100 {
		t.Fatalf("with GOGC set, GOGC became %d", got)
	}

	deferFirstGC(func(string) string { return "" })
	if got := debug.SetGCPercent(firstGCPercent); got != firstGCPercent {
		t.Fatalf("before the first collection GOGC = %d, want %d", got, firstGCPercent)
	}
	deadline := time.Now().Add(time.Minute) // hang guard
	for {
		runtime.GC()
		got := debug.SetGCPercent(-1)
		debug.SetGCPercent(got)
		if got == 100 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after collections GOGC = %d, want 100 back", got)
		}
		time.Sleep(time.Millisecond)
	}
}
