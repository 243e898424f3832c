package gate

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/egress"
)

func testBudgets(wait time.Duration, limits map[string]BudgetLimit) *Budgets {
	return NewBudgets(BudgetsConfig{Limits: limits, Wait: wait, Queue: 64})
}

// TestBudgetTenantShare: a tenant holds at most its share; past it, and
// past the process total, a caller is refused rate_limited (reason budget,
// with a retry-after) while the other tenant keeps its own share.
func TestBudgetTenantShare(t *testing.T) {
	b := testBudgets(20*time.Millisecond, map[string]BudgetLimit{
		BudgetConnections: {Process: 3, Tenants: map[string]int64{"a": 2, "b": 2}},
	})
	ctx := context.Background()
	for i := range 2 {
		if _, err := b.Acquire(ctx, BudgetConnections, "a", 1); err != nil {
			t.Fatalf("a's slot %d: %v", i, err)
		}
	}
	_, err := b.Acquire(ctx, BudgetConnections, "a", 1)
	if got := airlock.CodeOf(err); got != airlock.CodeRateLimited || airlock.ReasonOf(err) != airlock.ReasonBudget {
		t.Fatalf("a past its share: got %v (%s), want rate_limited budget", err, got)
	}
	if airlock.RetryAfter(err) <= 0 {
		t.Errorf("a budget refusal carries no retry-after: %v", err)
	}
	var be *BudgetError
	if !errors.As(err, &be) || be.Scope != "tenant a" {
		t.Errorf("refusal scope: got %+v, want tenant a", be)
	}
	relB, err := b.Acquire(ctx, BudgetConnections, "b", 1)
	if err != nil {
		t.Fatalf("b while a is at its share: %v", err)
	}
	_, err = b.Acquire(ctx, BudgetConnections, "b", 1)
	if !errors.As(err, &be) || be.Scope != "process" || !be.Full {
		t.Fatalf("b past the process total: got %v, want the process budget full", err)
	}
	// The tenant's unit taken before the process refused is given back.
	if u := usageOf(b, BudgetConnections, "tenant b"); u.InUse != 1 {
		t.Errorf("b's units after a process refusal: got %d, want 1", u.InUse)
	}
	relB()
	relB() // twice is harmless
	if u := usageOf(b, BudgetConnections, "process"); u.InUse != 2 {
		t.Errorf("process units after b's release: got %d, want 2", u.InUse)
	}
	// A tenant with no share of its own is bounded by the process only.
	if _, err := b.Acquire(ctx, BudgetConnections, "c", 1); err != nil {
		t.Errorf("c, no share, room in the process: %v", err)
	}
}

func usageOf(b *Budgets, name, scope string) Usage {
	for _, u := range b.Usage() {
		if u.Budget == name && u.Scope == scope {
			return u
		}
	}
	return Usage{}
}

// TestBudgetTooLarge: one request larger than the whole budget is
// too_large at once, without waiting.
func TestBudgetTooLarge(t *testing.T) {
	b := testBudgets(time.Hour, map[string]BudgetLimit{BudgetExtract: {Process: 100}})
	_, err := b.Acquire(context.Background(), BudgetExtract, "a", 101)
	if got := airlock.CodeOf(err); got != airlock.CodeTooLarge || airlock.ReasonOf(err) != airlock.ReasonBudget {
		t.Fatalf("over the whole budget: got %v (%s), want too_large budget", err, got)
	}
	if airlock.RetryAfter(err) != 0 {
		t.Errorf("too_large has a retry-after: %v", airlock.RetryAfter(err))
	}
	// Unlisted budgets and a nil *Budgets admit everything.
	if _, err := b.Acquire(context.Background(), BudgetCrawls, "a", 1<<40); err != nil {
		t.Errorf("unlisted budget: %v", err)
	}
	var nb *Budgets
	if _, err := nb.Acquire(context.Background(), BudgetCrawls, "a", 1); err != nil {
		t.Errorf("nil budgets: %v", err)
	}
}

// TestBudgetNeverOver: many goroutines taking random amounts, waiting in
// line: the units in use never pass the limit (counted by the test and by
// the pool's own peak), and every waiter is served in time.
func TestBudgetNeverOver(t *testing.T) {
	const limit = 50
	b := NewBudgets(BudgetsConfig{Limits: map[string]BudgetLimit{BudgetExtract: {Process: limit, Tenants: map[string]int64{"a": 30}}},
		Wait: time.Minute, Queue: 1000})
	var inUse, peak atomic.Int64
	var wg sync.WaitGroup
	rng := rand.New(rand.NewPCG(1, 2))
	sizes := make([]int64, 400)
	for i := range sizes {
		sizes[i] = 1 + rng.Int64N(20)
	}
	for i, n := range sizes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tenant := []string{"a", "b"}[i%2]
			rel, err := b.Acquire(context.Background(), BudgetExtract, tenant, n)
			if err != nil {
				t.Errorf("acquire %d: %v", n, err)
				return
			}
			now := inUse.Add(n)
			for {
				p := peak.Load()
				if now <= p || peak.CompareAndSwap(p, now) {
					break
				}
			}
			time.Sleep(time.Duration(n) * 10 * time.Microsecond)
			inUse.Add(-n)
			rel()
		}()
	}
	wg.Wait()
	if p := peak.Load(); p > limit {
		t.Errorf("peak units in use: got %d, limit %d", p, limit)
	}
	if u := usageOf(b, BudgetExtract, "process"); u.Peak > limit || u.InUse != 0 || u.Waiting != 0 {
		t.Errorf("process pool: %+v; want peak <= %d, nothing in use or waiting", u, limit)
	}
	if u := usageOf(b, BudgetExtract, "tenant a"); u.Peak > 30 {
		t.Errorf("tenant a peak: got %d, want <= 30", u.Peak)
	}
}

// TestBudgetWaitAndCancel: a waiter is served when room frees; a waiter
// whose context ends leaves the line with the context's cause, and the one
// behind it is served.
func TestBudgetWaitAndCancel(t *testing.T) {
	b := testBudgets(time.Minute, map[string]BudgetLimit{BudgetCrawls: {Process: 2}})
	ctx := context.Background()
	rel1, _ := b.Acquire(ctx, BudgetCrawls, "a", 2)
	cctx, cancel := context.WithCancelCause(ctx)
	cause := errors.New("revoked")
	first := make(chan error, 1)
	go func() {
		_, err := b.Acquire(cctx, BudgetCrawls, "a", 2) // the head of the line
		first <- err
	}()
	waitFor(t, func() bool { return usageOf(b, BudgetCrawls, "process").Waiting == 1 })
	second := make(chan error, 1)
	go func() {
		_, err := b.Acquire(ctx, BudgetCrawls, "b", 1)
		second <- err
	}()
	waitFor(t, func() bool { return usageOf(b, BudgetCrawls, "process").Waiting == 2 })
	cancel(cause)
	if err := <-first; !errors.Is(err, cause) {
		t.Errorf("cancelled waiter: got %v, want the context's cause", err)
	}
	rel1()
	if err := <-second; err != nil {
		t.Errorf("the waiter behind: %v", err)
	}
	if u := usageOf(b, BudgetCrawls, "process"); u.InUse != 1 || u.Waiting != 0 {
		t.Errorf("after: %+v, want 1 in use, none waiting", u)
	}
}

// TestBudgetQueueBound: past the queue bound a caller is refused at once.
func TestBudgetQueueBound(t *testing.T) {
	b := NewBudgets(BudgetsConfig{Limits: map[string]BudgetLimit{BudgetCrawls: {Process: 1}}, Wait: time.Minute, Queue: 1})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b.Acquire(ctx, BudgetCrawls, "a", 1)
	go b.Acquire(ctx, BudgetCrawls, "a", 1)
	waitFor(t, func() bool { return usageOf(b, BudgetCrawls, "process").Waiting == 1 })
	done := make(chan error, 1)
	go func() { _, err := b.Acquire(ctx, BudgetCrawls, "a", 1); done <- err }()
	select {
	case err := <-done:
		if airlock.CodeOf(err) != airlock.CodeRateLimited {
			t.Errorf("past the queue: got %v, want rate_limited", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a caller past the queue bound waited")
	}
}

// TestBudgetOnFull: a full budget asks its reclaimers to free idle units
// before a caller waits.
func TestBudgetOnFull(t *testing.T) {
	b := testBudgets(time.Minute, map[string]BudgetLimit{BudgetConnections: {Tenants: map[string]int64{"a": 1}}})
	idle, _ := b.Acquire(context.Background(), BudgetConnections, "a", 1)
	var calls atomic.Int64
	b.OnFull(BudgetConnections, "a", func() { calls.Add(1); idle() })
	if _, err := b.Acquire(context.Background(), BudgetConnections, "a", 1); err != nil {
		t.Fatalf("with an idle unit to reclaim: %v", err)
	}
	if calls.Load() != 1 {
		t.Errorf("reclaim calls: got %d, want 1", calls.Load())
	}
}

// TestBudgetConnSlots: the egress hook refuses with an *egress.Error that
// keeps the budget's code and reason.
func TestBudgetConnSlots(t *testing.T) {
	b := testBudgets(0, map[string]BudgetLimit{BudgetConnections: {Tenants: map[string]int64{"a": 1}}})
	s := b.ConnSlots("a")
	rel, err := s.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Acquire(context.Background())
	var ee *egress.Error
	if !errors.As(err, &ee) || ee.Code != egress.CodeRateLimited || ee.Reason != egress.Reason(airlock.ReasonBudget) {
		t.Fatalf("second slot: got %v, want an egress rate_limited budget error", err)
	}
	if airlock.RetryAfter(err) <= 0 {
		t.Errorf("no retry-after through the egress error")
	}
	rel()
	if _, err := s.Acquire(context.Background()); err != nil {
		t.Errorf("after release: %v", err)
	}
}

// TestBudgetReader: bytes are counted as they are read, never less than
// what was read, refused past the budget, and given back on release.
func TestBudgetReader(t *testing.T) {
	b := testBudgets(0, map[string]BudgetLimit{BudgetBytes: {Tenants: map[string]int64{"a": 1 << 20}}})
	r, release := b.Reader(context.Background(), BudgetBytes, "a", bytes.NewReader(make([]byte, 300<<10)))
	buf := make([]byte, 10<<10)
	var read int64
	for {
		n, err := r.Read(buf)
		read += int64(n)
		if u := usageOf(b, BudgetBytes, "tenant a"); u.InUse < read {
			t.Fatalf("in use %d below the %d bytes read", u.InUse, read)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	release()
	if u := usageOf(b, BudgetBytes, "tenant a"); u.InUse != 0 {
		t.Errorf("after release: %d in use", u.InUse)
	}
	// A body larger than the budget is refused once it passes it.
	r, release = b.Reader(context.Background(), BudgetBytes, "a", strings.NewReader(strings.Repeat("x", 2<<20)))
	_, err := io.Copy(io.Discard, r)
	release()
	if airlock.CodeOf(err) != airlock.CodeTooLarge || airlock.ReasonOf(err) != airlock.ReasonBudget {
		t.Errorf("a body over the whole budget: got %v, want too_large budget", err)
	}
	// Bodies that fit alone but not together: the second waits, then is
	// refused rate_limited.
	r1, rel1 := b.Reader(context.Background(), BudgetBytes, "a", strings.NewReader(strings.Repeat("x", 700<<10)))
	defer rel1()
	if _, err := io.Copy(io.Discard, r1); err != nil {
		t.Fatal(err)
	}
	r2, rel2 := b.Reader(context.Background(), BudgetBytes, "a", strings.NewReader(strings.Repeat("x", 700<<10)))
	defer rel2()
	_, err = io.Copy(io.Discard, r2)
	if airlock.CodeOf(err) != airlock.CodeRateLimited || airlock.ReasonOf(err) != airlock.ReasonBudget {
		t.Errorf("a body that does not fit beside another: got %v, want rate_limited budget", err)
	}
}

// TestBudgetMetrics: the budgets export a gauge per pool.
func TestBudgetMetrics(t *testing.T) {
	b := testBudgets(0, map[string]BudgetLimit{BudgetCrawls: {Process: 4, Tenants: map[string]int64{"a": 2}}})
	b.Acquire(context.Background(), BudgetCrawls, "a", 1)
	reg := prometheus.NewRegistry()
	reg.MustRegister(b)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "airlock_budget_in_use" {
			continue
		}
		for _, m := range mf.GetMetric() {
			var scope string
			for _, l := range m.GetLabel() {
				if l.GetName() == "scope" {
					scope = l.GetValue()
				}
			}
			got[scope] = m.GetGauge().GetValue()
		}
	}
	if got["process"] != 1 || got["tenant a"] != 1 || len(got) != 2 {
		t.Errorf("airlock_budget_in_use: got %v, want process 1 and tenant a 1", got)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 30s (hang guard)")
		}
		time.Sleep(time.Millisecond)
	}
}
