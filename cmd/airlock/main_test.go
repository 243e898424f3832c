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

// TestDeferFirstGCKeepsLaterSetting: a GOGC the process chose after start
// (a crawl raises it) outlives the first collection; only the deferral's
// own setting is put back.
func TestDeferFirstGCKeepsLaterSetting(t *testing.T) {
	prev := debug.SetGCPercent(100)
	defer debug.SetGCPercent(prev)

	deferFirstGC(func(string) string { return "" })
	debug.SetGCPercent(400)                 // as airlock crawl does
	deadline := time.Now().Add(time.Second) // the finalizer runs after the first collection
	for time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	if got := debug.SetGCPercent(100); got != 400 {
		t.Fatalf("after the first collection GOGC = %d, want the 400 set after start", got)
	}
}
