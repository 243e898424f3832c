package gate

import (
	"context"
	"strconv"
	"testing"
	"time"
)

// The common semantics are the conformance suite's (conformance_test.go).

// A changed limit for a key (a config reload) starts a fresh bucket.
func TestMemoryLimiterLimitChange(t *testing.T) {
	var l MemoryLimiter
	ctx := context.Background()
	l.Allow(ctx, "k", Limit{Rate: 1, Burst: 1})
	if ok, _, _ := l.Allow(ctx, "k", Limit{Rate: 1, Burst: 1}); ok {
		t.Fatal("second call allowed past a burst of 1")
	}
	if ok, _, _ := l.Allow(ctx, "k", Limit{Rate: 1, Burst: 3}); !ok {
		t.Error("call under a new, larger limit refused")
	}
}

// The key table is bounded: idle buckets are swept when it is full.
func TestMemoryLimiterSweep(t *testing.T) {
	var l MemoryLimiter
	ctx := context.Background()
	lim := Limit{Rate: 10, Burst: 10}
	l.Allow(ctx, "old", lim)
	l.Allow(ctx, "fresh", lim)
	l.mu.Lock()
	l.m["old"].used = time.Now().Add(-2 * time.Minute)
	for i := len(l.m); i < maxLimiterKeys; i++ {
		l.m["filler-"+strconv.Itoa(i)] = &limEntry{at: lim, used: time.Now().Add(-2 * time.Minute)}
	}
	l.mu.Unlock()
	l.Allow(ctx, "new", lim)
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.m["old"]; ok {
		t.Error("an idle bucket survived the sweep of a full table")
	}
	if _, ok := l.m["fresh"]; !ok {
		t.Error("a recently used bucket was swept")
	}
	if len(l.m) > maxLimiterKeys {
		t.Errorf("table holds %d keys, want at most %d", len(l.m), maxLimiterKeys)
	}
}
