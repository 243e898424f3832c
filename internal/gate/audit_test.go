package gate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/airlockhq/airlock/internal/store"
)

// memSink is an in-memory store.AuditLog that can block or fail writes.
type memSink struct {
	mu      sync.Mutex
	recs    []Record
	batches []int
	fails   int           // fail this many writes before succeeding
	block   chan struct{} // when set, writes wait until it is closed
	entered chan struct{} // when set, receives once per write attempt (non-blocking)
}

var errSinkDown = errors.New("sink down")

func (s *memSink) AppendAudit(ctx context.Context, recs []Record) error {
	if s.entered != nil {
		select {
		case s.entered <- struct{}{}:
		default:
		}
	}
	if s.block != nil {
		select {
		case <-s.block:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fails > 0 {
		s.fails--
		return errSinkDown
	}
	s.recs = append(s.recs, recs...)
	s.batches = append(s.batches, len(recs))
	return nil
}

func (s *memSink) QueryAudit(context.Context, store.AuditQuery) ([]Record, error) { return nil, nil }
func (s *memSink) AuditStats(context.Context, time.Time, string) ([]store.AuditStat, error) {
	return nil, nil
}
func (s *memSink) PruneAudit(context.Context, time.Time, int64) (int64, error) { return 0, nil }

func (s *memSink) ids() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, len(s.recs))
	for i, r := range s.recs {
		out[i] = r.ID
	}
	return out
}

// syncBuffer is a bytes.Buffer safe for the concurrent writes of a log
// handler and a reading test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func newTestAuditor(t *testing.T, cfg AuditorConfig) *Auditor {
	t.Helper()
	a := NewAuditor(cfg)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		a.Close(ctx)
	})
	return a
}

var testIDs ulidGen

func rec(outcome, reason string) Record {
	return Record{ID: testIDs.next(time.Now()), Time: time.Now(), Tenant: "t", Broker: "http", Outcome: outcome, Reason: reason, Target: "http://x/"}
}

// counterValue reads a counter (or a labelled counter's child) from reg.
func counterValue(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, lp := range m.GetLabel() {
				got[lp.GetName()] = lp.GetValue()
			}
			for k, v := range labels {
				if got[k] != v {
					continue metrics
				}
			}
			return m.GetCounter().GetValue(), true
		}
	}
	return 0, false
}

func TestCut(t *testing.T) {
	tests := []struct {
		name string
		in   string
		n    int
		want string
	}{
		{"short", "abc", 5, "abc"},
		{"exact", "abcde", 5, "abcde"},
		{"ascii", "abcdef", 5, "abcde"},
		{"2-byte rune straddles", "abcdé", 5, "abcd"}, // é is 2 bytes at 4..5
		{"3-byte rune straddles", "ab€x", 3, "ab"},    // € is 3 bytes at 2..4
		{"3-byte rune straddles late", "ab€x", 4, "ab"},
		{"3-byte rune fits", "ab€x", 5, "ab€"},
		{"4-byte rune straddles", "a😀", 4, "a"}, // 😀 is 4 bytes at 1..4
		{"4-byte rune fits", "a😀b", 5, "a😀"},
		{"zero", "abc", 0, ""},
		{"invalid utf-8 is cut by bytes", "a\xff\xfeb", 2, "a\xff"}, // no continuation bytes to back over
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := cut(tt.in, tt.n)
			if got != tt.want {
				t.Errorf("cut(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.want)
			}
			if len(got) > tt.n {
				t.Errorf("cut(%q, %d) has %d bytes", tt.in, tt.n, len(got))
			}
		})
	}
}

func TestRingTruncation(t *testing.T) {
	sink := &memSink{}
	a := newTestAuditor(t, AuditorConfig{Sink: sink, Interval: time.Hour})
	tests := []struct {
		name   string
		target string
	}{
		{"ascii", strings.Repeat("a", 3000)},
		{"2-byte runes off by one", "a" + strings.Repeat("é", 1500)},
		{"3-byte runes", strings.Repeat("€", 1000)},
		{"4-byte runes off by two", "ab" + strings.Repeat("😀", 800)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := rec(OutcomeDeny, "loopback")
			r.Tenant = "trunc-" + strings.ReplaceAll(tt.name, " ", "-")
			r.Target, r.Detail = tt.target, tt.target
			a.Record(r)
			got := a.Recent(r.Tenant, 1)
			if len(got) != 1 {
				t.Fatalf("Recent(%q) = %d records, want 1", r.Tenant, len(got))
			}
			for field, v := range map[string]string{"Target": got[0].Target, "Detail": got[0].Detail} {
				if len(v) > RingStringCap || len(v) < RingStringCap-3 {
					t.Errorf("ring %s is %d bytes, want (%d-3)..%d", field, len(v), RingStringCap, RingStringCap)
				}
				if !utf8.ValidString(v) || !strings.HasPrefix(tt.target, v) {
					t.Errorf("ring %s is not a valid UTF-8 prefix of the original", field)
				}
			}
			if err := a.Flush(context.Background()); err != nil {
				t.Fatalf("Flush: %v", err)
			}
			sink.mu.Lock()
			persisted := sink.recs[len(sink.recs)-1]
			sink.mu.Unlock()
			if persisted.ID != r.ID {
				t.Fatalf("last persisted record is %s, want %s", persisted.ID, r.ID)
			}
			if n := len(persisted.Target); n > PersistStringCap || n < PersistStringCap-3 || !utf8.ValidString(persisted.Target) {
				t.Errorf("persisted Target is %d bytes (valid UTF-8: %v), want about %d", n, utf8.ValidString(persisted.Target), PersistStringCap)
			}
		})
	}
}

func TestRingKeepsLatestDenials(t *testing.T) {
	a := newTestAuditor(t, AuditorConfig{Interval: time.Hour})
	var denied []string
	for i := range 300 {
		r := rec(OutcomeDeny, "private")
		if i%3 == 0 {
			r.Outcome, r.Reason = OutcomeAllow, "ok" // allowed calls never enter the ring
		} else {
			denied = append(denied, r.ID)
		}
		r.Instance = fmt.Sprint("i", i%2)
		a.Record(r)
	}
	got := a.Recent("", 0)
	if len(got) != DefaultRingSize {
		t.Fatalf("Recent(\"\", 0) = %d records, want %d", len(got), DefaultRingSize)
	}
	for i, r := range got {
		if want := denied[len(denied)-1-i]; r.ID != want {
			t.Fatalf("Recent[%d] = %s, want %s (newest first)", i, r.ID, want)
		}
		if r.Outcome == OutcomeAllow {
			t.Fatalf("Recent[%d] is an allowed call", i)
		}
	}
	if got := a.Recent("", 5); len(got) != 5 || got[0].ID != denied[len(denied)-1] {
		t.Errorf("Recent(\"\", 5) = %d records starting %v, want 5 starting with the newest", len(got), got)
	}
	for _, inst := range []string{"i0", "i1"} {
		got := a.Recent("t/"+inst, 0)
		if len(got) == 0 {
			t.Errorf("Recent(t/%s) is empty", inst)
		}
		for _, r := range got {
			if r.Instance != inst {
				t.Errorf("Recent(t/%s) holds a record of instance %q", inst, r.Instance)
			}
		}
	}
	if got := a.Recent("nobody", 10); got != nil {
		t.Errorf("Recent(nobody) = %v, want nil", got)
	}
}

func TestAuditorCountersAndLog(t *testing.T) {
	var logs syncBuffer
	reg := prometheus.NewRegistry()
	a := newTestAuditor(t, AuditorConfig{Interval: time.Hour, Registry: reg,
		Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	var ids []string
	for i := range 7 {
		r := rec(OutcomeDeny, "private")
		if i < 4 {
			r.Outcome, r.Reason = OutcomeAllow, "ok"
		}
		r.BytesIn, r.BytesOut = 10, 3
		ids = append(ids, r.ID)
		a.Record(r)
	}
	want := []Stat{{Broker: "http", Outcome: OutcomeAllow, Reason: "ok", Count: 4}, {Broker: "http", Outcome: OutcomeDeny, Reason: "private", Count: 3}}
	if got := a.Stats(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Stats() = %v, want %v", got, want)
	}
	if v, _ := counterValue(t, reg, "airlock_broker_calls_total", map[string]string{"broker": "http", "outcome": "deny", "reason": "private"}); v != 3 {
		t.Errorf("airlock_broker_calls_total{deny,private} = %v, want 3", v)
	}
	if v, _ := counterValue(t, reg, "airlock_broker_bytes_total", map[string]string{"broker": "http", "direction": "in"}); v != 70 {
		t.Errorf("airlock_broker_bytes_total{in} = %v, want 70", v)
	}
	// One JSON log record per decision, carrying its id.
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != len(ids) {
		t.Fatalf("got %d log lines, want %d:\n%s", len(lines), len(ids), logs.String())
	}
	for i, line := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %d is not JSON: %v", i, err)
		}
		if m["decision_id"] != ids[i] || m["msg"] != "broker decision" {
			t.Errorf("log line %d = %s, want decision %s", i, line, ids[i])
		}
		wantLevel := "INFO"
		if i >= 4 {
			wantLevel = "WARN"
		}
		if m["level"] != wantLevel {
			t.Errorf("log line %d level = %v, want %s", i, m["level"], wantLevel)
		}
	}
}

// TestAuditorOverflow fills a one-slot queue while the store is stuck: the
// overflow is counted, in Dropped and in the metric, and logged; the
// counters still see every decision; what was queued is written once the
// store recovers.
func TestAuditorOverflow(t *testing.T) {
	var logs syncBuffer
	reg := prometheus.NewRegistry()
	sink := &memSink{block: make(chan struct{}), entered: make(chan struct{}, 1)}
	a := newTestAuditor(t, AuditorConfig{Sink: sink, Interval: 5 * time.Millisecond, Queue: 1, Registry: reg,
		Logger: slog.New(slog.NewJSONHandler(&logs, nil))})

	first := rec(OutcomeAllow, "ok")
	a.Record(first)
	select { // the writer holds the first record and is stuck in the store
	case <-sink.entered:
	case <-time.After(5 * time.Second):
		t.Fatal("the writer never tried to write")
	}
	queued := rec(OutcomeAllow, "ok")
	a.Record(queued)
	const overflow = 9
	for range overflow {
		a.Record(rec(OutcomeDeny, "private"))
	}

	if got := a.Dropped(); got != overflow {
		t.Errorf("Dropped() = %d, want %d", got, overflow)
	}
	if v, ok := counterValue(t, reg, "airlock_audit_dropped_total", nil); !ok || v != overflow {
		t.Errorf("airlock_audit_dropped_total = %v (present %v), want %d", v, ok, overflow)
	}
	if !strings.Contains(logs.String(), "audit record not persisted") || !strings.Contains(logs.String(), "audit queue full") {
		t.Errorf("overflow not logged; log:\n%s", logs.String())
	}
	var total int64
	for _, s := range a.Stats() {
		total += s.Count
	}
	if total != 2+overflow {
		t.Errorf("counters hold %d decisions, want %d: overflow is dropped from the persistent log only", total, 2+overflow)
	}

	close(sink.block)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := a.Flush(ctx); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	if got, want := strings.Join(sink.ids(), ","), first.ID+","+queued.ID; got != want {
		t.Errorf("persisted %s, want %s", got, want)
	}
	if a.Written() != 2 {
		t.Errorf("Written() = %d, want 2", a.Written())
	}
}

func TestAuditorFlush(t *testing.T) {
	ctx := context.Background()

	t.Run("persists everything recorded before", func(t *testing.T) {
		sink := &memSink{}
		a := newTestAuditor(t, AuditorConfig{Sink: sink, Interval: time.Hour}) // only Flush writes
		var want []string
		for round, n := range []int{100, 1, 0, 4500} {
			for range n {
				r := rec(OutcomeAllow, "ok")
				want = append(want, r.ID)
				a.Record(r)
			}
			if err := a.Flush(ctx); err != nil {
				t.Fatalf("round %d: Flush: %v", round, err)
			}
			if got := sink.ids(); strings.Join(got, ",") != strings.Join(want, ",") {
				t.Fatalf("round %d: persisted %d records, want %d in order", round, len(got), len(want))
			}
		}
		sink.mu.Lock()
		for _, n := range sink.batches {
			if n > maxBatch {
				t.Errorf("a batch of %d records, want at most %d", n, maxBatch)
			}
		}
		sink.mu.Unlock()
	})

	t.Run("without a sink", func(t *testing.T) {
		a := newTestAuditor(t, AuditorConfig{Interval: time.Hour})
		a.Record(rec(OutcomeAllow, "ok"))
		if err := a.Flush(ctx); err != nil {
			t.Errorf("Flush = %v, want nil", err)
		}
	})

	t.Run("honours its context", func(t *testing.T) {
		sink := &memSink{block: make(chan struct{})}
		a := newTestAuditor(t, AuditorConfig{Sink: sink, Interval: time.Hour})
		defer close(sink.block)
		a.Record(rec(OutcomeAllow, "ok"))
		ctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		if err := a.Flush(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Flush with a stuck store = %v, want context.DeadlineExceeded", err)
		}
	})

	t.Run("retries a failed write", func(t *testing.T) {
		reg := prometheus.NewRegistry()
		sink := &memSink{fails: 2}
		a := newTestAuditor(t, AuditorConfig{Sink: sink, Interval: time.Hour, Registry: reg})
		var want []string
		for range 10 {
			r := rec(OutcomeAllow, "ok")
			want = append(want, r.ID)
			a.Record(r)
		}
		for i := range 2 {
			if err := a.Flush(ctx); !errors.Is(err, errSinkDown) {
				t.Fatalf("Flush %d = %v, want the store's error", i, err)
			}
		}
		if err := a.Flush(ctx); err != nil {
			t.Fatalf("Flush after recovery: %v", err)
		}
		if got := sink.ids(); strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("persisted %v, want %v once each", got, want)
		}
		if v, _ := counterValue(t, reg, "airlock_audit_write_errors_total", nil); v != 2 {
			t.Errorf("airlock_audit_write_errors_total = %v, want 2", v)
		}
		if a.Dropped() != 0 {
			t.Errorf("Dropped() = %d, want 0", a.Dropped())
		}
	})

	t.Run("close drains, later records are dropped", func(t *testing.T) {
		sink := &memSink{}
		a := NewAuditor(AuditorConfig{Sink: sink, Interval: time.Hour})
		for range 2500 {
			a.Record(rec(OutcomeAllow, "ok"))
		}
		if err := a.Close(ctx); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if n := len(sink.ids()); n != 2500 {
			t.Errorf("Close persisted %d records, want 2500", n)
		}
		a.Record(rec(OutcomeAllow, "ok"))
		if a.Dropped() != 1 {
			t.Errorf("Dropped() after a record past Close = %d, want 1", a.Dropped())
		}
		if err := a.Flush(ctx); err == nil {
			t.Error("Flush after Close = nil, want an error")
		}
		if err := a.Close(ctx); err != nil {
			t.Errorf("second Close = %v, want nil", err)
		}
	})

	t.Run("the interval writes without Flush", func(t *testing.T) {
		sink := &memSink{}
		a := newTestAuditor(t, AuditorConfig{Sink: sink, Interval: 10 * time.Millisecond})
		a.Record(rec(OutcomeAllow, "ok"))
		deadline := time.Now().Add(5 * time.Second)
		for len(sink.ids()) == 0 {
			if time.Now().After(deadline) {
				t.Fatal("the batch writer never wrote")
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
}

// TestAuditorAllocatesForRecordsNotQueue: the queue bound is a ceiling,
// not a reservation. Every engine start (each CLI call) makes an
// Auditor; a queue allocated up front at the default 65,536 records
// cost 13 MB, to zero and for the GC to scan, for a call that audits one
// record.
func TestAuditorAllocatesForRecordsNotQueue(t *testing.T) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	a := NewAuditor(AuditorConfig{Sink: &memSink{}, Queue: defaultAuditQueue})
	runtime.ReadMemStats(&after)
	defer a.Close(context.Background())
	if got := after.TotalAlloc - before.TotalAlloc; got > 1<<20 {
		t.Errorf("NewAuditor allocated %d bytes with a queue of %d, want under 1 MiB", got, defaultAuditQueue)
	}
}
