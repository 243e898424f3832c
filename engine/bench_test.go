package engine

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/egress"
	"github.com/airlockhq/airlock/internal/config"
	"github.com/airlockhq/airlock/internal/gate"
	"github.com/airlockhq/airlock/internal/store"
)

// Run these outside -race:
//
//	go test -run XXX -bench . -benchmem ./engine/

// discardLog is a store.AuditLog that accepts every batch and keeps
// nothing: the gate benchmarks measure the request path, not the store.
type discardLog struct{}

func (discardLog) AppendAudit(context.Context, []store.AuditRecord) error { return nil }
func (discardLog) QueryAudit(context.Context, store.AuditQuery) ([]store.AuditRecord, error) {
	return nil, nil
}
func (discardLog) AuditStats(context.Context, time.Time, string) ([]store.AuditStat, error) {
	return nil, nil
}
func (discardLog) PruneAudit(context.Context, time.Time, int64) (int64, error) { return 0, nil }

// benchGate is a gate wired as New wires it (metrics registry, discarding
// logger, revocation set on a store, a tenant with the default rate limit
// and policy), with an audit sink that discards.
func benchGate(b *testing.B) (*gate.Gate, *gate.Tenant) {
	b.Helper()
	st, err := store.OpenMemory()
	if err != nil {
		b.Fatal(err)
	}
	logger := slog.New(slog.DiscardHandler)
	a := gate.NewAuditor(gate.AuditorConfig{Sink: discardLog{}, Registry: prometheus.NewRegistry(), Logger: logger})
	revs, err := gate.NewRevocationSet(context.Background(), st, DefaultRevocationPoll, logger, nil)
	if err != nil {
		b.Fatal(err)
	}
	// Another principal is revoked, so the revocation check is not the
	// empty-set shortcut.
	if err := revs.Revoke(context.Background(), "someone-else", "bench"); err != nil {
		b.Fatal(err)
	}
	prof := gate.BuiltinProfiles()[gate.ProfilePosix]
	chk, err := config.TenantChecker(EgressConfig{Deny: []string{"*.blocked.example"}}, TenantConfig{Exceptions: []string{"127.0.0.1"}}, prof)
	if err != nil {
		b.Fatal(err)
	}
	t := &gate.Tenant{Name: "t", Profile: prof, Limit: gate.Limit{Rate: 1e12, Burst: 1 << 30}, Dialer: &egress.Dialer{Policy: chk}}
	m := &gate.Tenant{Name: "m", Profile: gate.BuiltinProfiles()[gate.ProfileMinimal], Limit: t.Limit}
	g := gate.New(gate.Config{Tenants: map[string]*gate.Tenant{"t": t, "m": m}, Revocations: revs, Auditor: a, Logger: logger,
		Connect: gate.Limit{Rate: 1e12, Burst: 1 << 30}})
	b.Cleanup(func() {
		revs.Close()
		a.Close(context.Background())
		st.Close()
	})
	return g, t
}

// BenchmarkGateOverhead is the per-call cost of the cadence for an allowed
// call, in memory: Begin (principal, revocation, tenant rate limit,
// capability), the policy decision of an IP-literal target, and End (the
// decision record: counters, metrics, log, enqueued for the batch writer).
// The target is ≤ 2 µs per call.
func BenchmarkGateOverhead(b *testing.B) {
	g, t := benchGate(b)
	ctx := context.Background()
	p := airlock.Principal{Tenant: "t", Instance: "guest-1"}
	target, err := egress.ParseURL("http://127.0.0.1:8080/path")
	if err != nil {
		b.Fatal(err)
	}

	b.Run("cadence", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			c, err := g.Begin(ctx, p, airlock.CapabilityHTTP, "http", "http://127.0.0.1:8080/path")
			if err != nil {
				b.Fatal(err)
			}
			if v := t.Dialer.Policy.CheckName(egress.LaneHTTP, target); !v.Allow {
				b.Fatal(v)
			}
			if err := t.Dialer.Limiter(ctx, c.Key()); err != nil {
				b.Fatal(err)
			}
			c.End(nil, 512, 0)
		}
	})

	b.Run("cadence-parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				c, err := g.Begin(ctx, p, airlock.CapabilityHTTP, "http", "http://127.0.0.1:8080/path")
				if err != nil {
					b.Fatal(err)
				}
				t.Dialer.Policy.CheckName(egress.LaneHTTP, target)
				c.End(nil, 512, 0)
			}
		})
	})

	b.Run("capability-denied", func(b *testing.B) {
		b.ReportAllocs()
		pm := airlock.Principal{Tenant: "m", Instance: "guest-1"}
		for b.Loop() {
			if _, err := g.Begin(ctx, pm, airlock.CapabilityHTTP, "http", "http://127.0.0.1:8080/path"); err == nil {
				b.Fatal("allowed")
			}
		}
	})
}

// BenchmarkSign is the whole facade for the cheapest call (HMAC-SHA256 of
// 64 bytes), with an in-memory engine. Records past what the in-memory
// store writes are dropped from the persistent log, as designed; the
// request path is what is measured.
func BenchmarkSign(b *testing.B) {
	e, err := New(context.Background(), Config{InMemory: true, Tenants: map[string]TenantConfig{"local": {Profile: "posix", Rate: 1e12, Burst: 1 << 30,
		Secrets: map[string]SecretRef{"k": {Env: "K"}}}}}, WithGetenv(func(string) string { return "bench-key" }))
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close(context.Background())
	ctx := context.Background()
	p := airlock.Principal{Tenant: "local"}
	data := make([]byte, 64)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := e.Sign(ctx, p, "k", data); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAuditPipeline is the sustained rate of the persistent audit log:
// b.N records through Auditor.Record into a SQLite file, timed until Flush
// has them all on disk. The queue is sized so that nothing is dropped. The
// target is ≥ 50,000 records/s.
func BenchmarkAuditPipeline(b *testing.B) {
	st, err := store.Open(filepath.Join(b.TempDir(), "airlock.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	a := gate.NewAuditor(gate.AuditorConfig{Sink: st, Queue: max(b.N, DefaultAuditQueue), Registry: prometheus.NewRegistry(),
		Logger: slog.New(slog.DiscardHandler)})
	defer a.Close(context.Background())
	g := gate.New(gate.Config{Auditor: a})
	now := time.Now()
	recs := make([]gate.Record, b.N)
	for i := range recs {
		recs[i] = gate.Record{ID: g.NewID(), Time: now, Tenant: "acme", Instance: "guest-7", Broker: "http",
			Outcome: gate.OutcomeDeny, Code: "denied", Reason: "private", Target: "http://10.0.0.1:8080/some/path?q=1",
			Detail: `egress: check "http://10.0.0.1:8080/some/path?q=1" [10.0.0.1:8080] denied (private)`, DurationMS: 1, BytesOut: 120}
	}
	b.ResetTimer()
	start := time.Now()
	for i := range recs {
		a.Record(recs[i])
	}
	if err := a.Flush(context.Background()); err != nil {
		b.Fatal(err)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	if a.Dropped() != 0 || a.Written() != int64(b.N) {
		b.Fatalf("written %d, dropped %d of %d", a.Written(), a.Dropped(), b.N)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "records/s")
}
