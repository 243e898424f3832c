package main

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"
)

// TestSignalContext: a context derived from signalContext is cancelled by
// SIGINT once anything asked (deriving it does); Stop restores the
// default handling.
func TestSignalContext(t *testing.T) {
	sc := &signalContext{}
	ctx, cancel := context.WithCancel(sc) // asks sc's Done and Value: installs
	defer cancel()
	if err := ctx.Err(); err != nil {
		t.Fatalf("before any signal: %v", err)
	}
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(time.Minute): // hang guard
		t.Fatal("SIGINT did not cancel the derived context")
	}
	if !errors.Is(sc.Err(), context.Canceled) || !errors.Is(ctx.Err(), context.Canceled) {
		t.Errorf("Err = %v, %v; want context.Canceled", sc.Err(), ctx.Err())
	}
	sc.Stop()
	sc.Stop()

	// Stopped before anything asked: nothing is ever installed.
	unused := &signalContext{}
	unused.Stop()
	if unused.stop != nil {
		t.Error("Stop installed signal handling")
	}
	if unused.Done() != nil || unused.Err() != nil || unused.Value("k") != nil {
		t.Error("a context stopped before use is not a plain background context")
	}
}
