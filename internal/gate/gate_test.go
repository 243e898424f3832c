package gate

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/egress"
	"github.com/airlockhq/airlock/internal/leakcheck"
	"github.com/airlockhq/airlock/internal/store"
)

// TestMain fails the package when a test leaves goroutines behind (batch
// writers, revocation pollers, store connections).
func TestMain(m *testing.M) { os.Exit(leakcheck.Main(m, "gate", leakcheck.Options{})) }

type testGate struct {
	*Gate
	sink *memSink
	st   *store.SQLite
	revs *RevocationSet
}

func newTestGate(t *testing.T, tenants map[string]*Tenant) *testGate {
	t.Helper()
	st, err := store.OpenMemory()
	if err != nil {
		t.Fatal(err)
	}
	sink := &memSink{}
	a := NewAuditor(AuditorConfig{Sink: sink, Interval: time.Hour})
	tg := &testGate{sink: sink, st: st}
	var mu sync.Mutex
	var g *Gate
	revs, err := NewRevocationSet(context.Background(), st, 10*time.Millisecond, nil, func() {
		mu.Lock()
		defer mu.Unlock()
		if g != nil {
			g.RevocationsChanged()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	g = New(Config{Tenants: tenants, Revocations: revs, Auditor: a, Connect: Limit{Rate: 1, Burst: 2}})
	mu.Unlock()
	tg.Gate, tg.revs = g, revs
	t.Cleanup(func() {
		revs.Close()
		a.Close(context.Background())
		st.Close()
	})
	return tg
}

// flushed returns the records persisted so far.
func (tg *testGate) flushed(t *testing.T) []Record {
	t.Helper()
	if err := tg.Auditor().Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	tg.sink.mu.Lock()
	defer tg.sink.mu.Unlock()
	return slices.Clone(tg.sink.recs)
}

func builtinTenant(name, profile string, lim Limit) *Tenant {
	return &Tenant{Name: name, Profile: BuiltinProfiles()[profile], Limit: lim}
}

func wantAirlockErr(t *testing.T, err error, code airlock.Code, reason airlock.Reason) *airlock.Error {
	t.Helper()
	var ae *airlock.Error
	if !errors.As(err, &ae) {
		t.Fatalf("error %v (%T) is not an *airlock.Error", err, err)
	}
	if ae.Code != code || ae.Reason != reason {
		t.Fatalf("error = %q (code %q, reason %q), want code %q, reason %q", ae.Message, ae.Code, ae.Reason, code, reason)
	}
	if len(ae.DecisionID) != 26 {
		t.Fatalf("error decision id %q is not a ULID", ae.DecisionID)
	}
	return ae
}

func TestBeginCadence(t *testing.T) {
	tg := newTestGate(t, map[string]*Tenant{
		"net":     builtinTenant("net", ProfileNetwork, Limit{}),
		"compute": builtinTenant("compute", ProfileCompute, Limit{}),
		"slow":    builtinTenant("slow", ProfilePosix, Limit{Rate: 0.001, Burst: 1}),
		"gone":    builtinTenant("gone", ProfilePosix, Limit{Rate: 0.001, Burst: 1}),
	})
	ctx := context.Background()
	if err := tg.revs.Revoke(ctx, "gone", "test"); err != nil {
		t.Fatal(err)
	}
	// Use up the slow tenant's only token.
	if c, err := tg.Begin(ctx, airlock.Principal{Tenant: "slow"}, airlock.CapabilityHTTP, "http", "x"); err != nil {
		t.Fatal(err)
	} else {
		c.End(nil, 0, 0)
	}
	tests := []struct {
		name       string
		p          airlock.Principal
		capability airlock.Capability
		code       airlock.Code
		reason     string
	}{
		{"allowed", airlock.Principal{Tenant: "net", Instance: "i1"}, airlock.CapabilityHTTP, "", ""},
		{"capability absent", airlock.Principal{Tenant: "net"}, airlock.CapabilityBrowser, airlock.CodeDenied, string(airlock.ReasonCapability)},
		{"compute has nothing", airlock.Principal{Tenant: "compute"}, airlock.CapabilityTCP, airlock.CodeDenied, string(airlock.ReasonCapability)},
		{"empty capability skips the check", airlock.Principal{Tenant: "compute"}, "", "", ""},
		{"unknown tenant", airlock.Principal{Tenant: "nobody"}, airlock.CapabilityHTTP, airlock.CodeDenied, string(airlock.ReasonUnknownTenant)},
		{"bad principal", airlock.Principal{Tenant: "a b"}, airlock.CapabilityHTTP, airlock.CodeInvalid, string(airlock.ReasonPrincipal)},
		{"zero principal", airlock.Principal{}, airlock.CapabilityHTTP, airlock.CodeInvalid, string(airlock.ReasonPrincipal)},
		{"rate limited", airlock.Principal{Tenant: "slow"}, airlock.CapabilityHTTP, airlock.CodeRateLimited, string(airlock.ReasonTenantRate)},
		// Revocation comes before the rate limit: a revoked tenant does not
		// spend tokens, and says revoked rather than rate_limited.
		{"revoked before rate", airlock.Principal{Tenant: "gone", Instance: "x"}, airlock.CapabilityHTTP, airlock.CodeRevoked, string(airlock.ReasonRevoked)},
		{"revoked before capability", airlock.Principal{Tenant: "gone"}, airlock.CapabilityBrowser, airlock.CodeRevoked, string(airlock.ReasonRevoked)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := tg.Begin(ctx, tt.p, tt.capability, "http", "http://example.com/")
			var id string
			if tt.code == "" {
				if err != nil {
					t.Fatalf("Begin: %v", err)
				}
				id = c.ID
				if err := c.End(nil, 5, 7); err != nil {
					t.Fatalf("End: %v", err)
				}
			} else {
				if c != nil {
					t.Error("Begin returned a call with an error")
				}
				ae := wantAirlockErr(t, err, tt.code, airlock.Reason(tt.reason))
				id = ae.DecisionID
				if tt.code == airlock.CodeRateLimited && airlock.RetryAfter(err) <= 0 {
					t.Errorf("RetryAfter = %s, want > 0", airlock.RetryAfter(err))
				}
				if tt.code == airlock.CodeRevoked {
					var re *RevokedError
					if !errors.As(err, &re) {
						t.Errorf("revoked error does not unwrap to *RevokedError")
					}
				}
			}
			var found []Record
			for _, r := range tg.flushed(t) {
				if r.ID == id {
					found = append(found, r)
				}
			}
			if len(found) != 1 {
				t.Fatalf("%d records with the decision id, want 1", len(found))
			}
			r := found[0]
			wantOutcome, wantReason := OutcomeAllow, "ok"
			if tt.code != "" {
				wantOutcome, wantReason = OutcomeDeny, tt.reason
			}
			if tt.code == airlock.CodeInvalid {
				wantOutcome = OutcomeDeny // refusals by the gate are denials
			}
			if r.Outcome != wantOutcome || r.Reason != wantReason || r.Code != string(tt.code) {
				t.Errorf("record = %s/%s/%s, want %s/%s/%s", r.Outcome, r.Code, r.Reason, wantOutcome, tt.code, wantReason)
			}
			if r.Tenant != tt.p.Tenant || r.Instance != tt.p.Instance || r.Broker != "http" || r.Target != "http://example.com/" {
				t.Errorf("record principal/broker/target = %s/%s %s %s", r.Tenant, r.Instance, r.Broker, r.Target)
			}
		})
	}
	if n := tg.Active(); n != 0 {
		t.Errorf("Active() = %d after every call ended, want 0", n)
	}
}

func TestEndOutcomes(t *testing.T) {
	tg := newTestGate(t, map[string]*Tenant{"t": builtinTenant("t", ProfilePosix, Limit{})})
	ctx := context.Background()
	tests := []struct {
		name    string
		err     error
		outcome string
		code    airlock.Code
		reason  string
	}{
		{"ok", nil, OutcomeAllow, "", "ok"},
		{"egress denial", &egress.Error{Code: egress.CodeDenied, Reason: egress.ReasonLoopback}, OutcomeDeny, airlock.CodeDenied, "loopback"},
		{"rate limited", &egress.Error{Code: egress.CodeRateLimited, Reason: egress.Reason(airlock.ReasonConnectRate)}, OutcomeDeny, airlock.CodeRateLimited, string(airlock.ReasonConnectRate)},
		{"upstream failure", &egress.Error{Code: egress.CodeUpstream, Reason: egress.ReasonConnect}, OutcomeError, airlock.CodeUpstream, "connect"},
		{"too large", &egress.Error{Code: egress.CodeTooLarge, Reason: egress.ReasonBodyTooLarge}, OutcomeError, airlock.CodeTooLarge, "body_too_large"},
		{"deadline", context.DeadlineExceeded, OutcomeError, airlock.CodeTimeout, string(airlock.ReasonTimeout)},
		{"unclassified", errors.New("boom"), OutcomeError, airlock.CodeInternal, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := tg.Begin(ctx, airlock.Principal{Tenant: "t"}, airlock.CapabilityHTTP, "http", "x")
			if err != nil {
				t.Fatal(err)
			}
			err = c.End(tt.err, 1, 2)
			if tt.err == nil {
				if err != nil {
					t.Fatalf("End(nil) = %v", err)
				}
			} else {
				ae := wantAirlockErr(t, err, tt.code, airlock.Reason(tt.reason))
				if ae.DecisionID != c.ID {
					t.Errorf("error decision id %s, want the call's %s", ae.DecisionID, c.ID)
				}
				if !errors.Is(err, tt.err) {
					t.Errorf("error does not wrap the cause")
				}
			}
			// Ending twice records nothing more.
			c.End(errors.New("again"), 0, 0)
			var n int
			for _, r := range tg.flushed(t) {
				if r.ID == c.ID {
					n++
					if r.Outcome != tt.outcome || r.Code != string(tt.code) || r.Reason != tt.reason {
						t.Errorf("record = %s/%s/%s, want %s/%s/%s", r.Outcome, r.Code, r.Reason, tt.outcome, tt.code, tt.reason)
					}
					if r.BytesIn != 1 || r.BytesOut != 2 {
						t.Errorf("record bytes = %d/%d, want 1/2", r.BytesIn, r.BytesOut)
					}
				}
			}
			if n != 1 {
				t.Errorf("%d records for the call, want 1", n)
			}
			if c.Ctx.Err() == nil {
				t.Error("the call's context is still live after End")
			}
		})
	}
}

func TestRevocationMidFlight(t *testing.T) {
	tests := []struct {
		subject  string
		affected []airlock.Principal
		spared   []airlock.Principal
	}{
		{
			subject:  "acme",
			affected: []airlock.Principal{{Tenant: "acme"}, {Tenant: "acme", Instance: "i1"}, {Tenant: "acme", Instance: "i2"}},
			spared:   []airlock.Principal{{Tenant: "other"}, {Tenant: "other", Instance: "i1"}},
		},
		{
			subject:  "acme/i1",
			affected: []airlock.Principal{{Tenant: "acme", Instance: "i1"}},
			spared:   []airlock.Principal{{Tenant: "acme"}, {Tenant: "acme", Instance: "i2"}, {Tenant: "other", Instance: "i1"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.subject, func(t *testing.T) {
			tg := newTestGate(t, map[string]*Tenant{
				"acme":  builtinTenant("acme", ProfilePosix, Limit{}),
				"other": builtinTenant("other", ProfilePosix, Limit{}),
			})
			ctx := context.Background()
			calls := map[airlock.Principal]*Call{}
			for _, p := range append(slices.Clone(tt.affected), tt.spared...) {
				c, err := tg.Begin(ctx, p, airlock.CapabilityHTTP, "http", "x")
				if err != nil {
					t.Fatal(err)
				}
				calls[p] = c
			}
			if err := tg.revs.Revoke(ctx, tt.subject, "test"); err != nil {
				t.Fatal(err)
			}
			for _, p := range tt.affected {
				c := calls[p]
				if c.Ctx.Err() == nil {
					t.Errorf("%s: call context not cancelled by the revocation", p)
					continue
				}
				var re *RevokedError
				if !errors.As(context.Cause(c.Ctx), &re) {
					t.Errorf("%s: cancel cause = %v, want a *RevokedError", p, context.Cause(c.Ctx))
				}
				// Whatever the work reports, the call ends revoked.
				wantAirlockErr(t, c.End(c.Ctx.Err(), 0, 0), airlock.CodeRevoked, airlock.ReasonRevoked)
				if _, err := tg.Begin(ctx, p, airlock.CapabilityHTTP, "http", "x"); err == nil {
					t.Errorf("%s: next call allowed after revocation", p)
				} else {
					wantAirlockErr(t, err, airlock.CodeRevoked, airlock.ReasonRevoked)
				}
			}
			for _, p := range tt.spared {
				c := calls[p]
				if c.Ctx.Err() != nil {
					t.Errorf("%s: call cancelled by a revocation of %s", p, tt.subject)
				}
				if err := c.End(nil, 0, 0); err != nil {
					t.Errorf("%s: End: %v", p, err)
				}
			}
			if err := tg.revs.Unrevoke(ctx, tt.subject); err != nil {
				t.Fatal(err)
			}
			for _, p := range tt.affected {
				c, err := tg.Begin(ctx, p, airlock.CapabilityHTTP, "http", "x")
				if err != nil {
					t.Fatalf("%s after unrevoke: %v", p, err)
				}
				c.End(nil, 0, 0)
			}
		})
	}
}

// TestRevocationPoll: a revocation written to the shared store by another
// process reaches this one's set, and its calls in flight, by polling.
func TestRevocationPoll(t *testing.T) {
	tg := newTestGate(t, map[string]*Tenant{"acme": builtinTenant("acme", ProfilePosix, Limit{})})
	ctx := context.Background()
	c, err := tg.Begin(ctx, airlock.Principal{Tenant: "acme", Instance: "w"}, airlock.CapabilityHTTP, "http", "x")
	if err != nil {
		t.Fatal(err)
	}
	if err := tg.st.Revoke(ctx, "acme", "elsewhere"); err != nil { // behind the set's back
		t.Fatal(err)
	}
	select {
	case <-c.Ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the poller never applied the revocation to the call in flight")
	}
	wantAirlockErr(t, c.End(c.Ctx.Err(), 0, 0), airlock.CodeRevoked, airlock.ReasonRevoked)
	if got := tg.revs.List(); len(got) != 1 || got[0].Subject != "acme" || got[0].Reason != "elsewhere" {
		t.Errorf("List() = %v, want [acme elsewhere]", got)
	}
	if err := tg.st.Unrevoke(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for tg.revs.Revoked(airlock.Principal{Tenant: "acme"}) {
		if time.Now().After(deadline) {
			t.Fatal("the poller never applied the unrevocation")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := tg.revs.Unrevoke(ctx, "acme"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Unrevoke of a subject not revoked = %v, want store.ErrNotFound", err)
	}
}

func TestConnectLimiter(t *testing.T) {
	d := &egress.Dialer{}
	tg := newTestGate(t, map[string]*Tenant{"t": {Name: "t", Profile: BuiltinProfiles()[ProfilePosix], Dialer: d}})
	if d.Limiter == nil {
		t.Fatal("New did not install the connect limiter on the tenant's dialer")
	}
	_ = tg
	ctx := context.Background()
	for i := range 2 { // burst 2
		if err := d.Limiter(ctx, "t/a"); err != nil {
			t.Fatalf("attempt %d: %v", i, err)
		}
	}
	err := d.Limiter(ctx, "t/a")
	var ee *egress.Error
	if !errors.As(err, &ee) || ee.Code != egress.CodeRateLimited || ee.Reason != egress.Reason(airlock.ReasonConnectRate) {
		t.Fatalf("third attempt = %v, want an *egress.Error rate_limited/connect_rate", err)
	}
	if airlock.RetryAfter(err) <= 0 {
		t.Errorf("RetryAfter(%v) = %s, want > 0", err, airlock.RetryAfter(err))
	}
	if err := d.Limiter(ctx, "t/b"); err != nil {
		t.Errorf("another instance's attempt: %v (connect limits are per instance)", err)
	}
}

func TestRecordAdmin(t *testing.T) {
	tg := newTestGate(t, map[string]*Tenant{})
	id := tg.RecordAdmin("revoke", "acme/x", nil)
	idErr := tg.RecordAdmin("unrevoke", "acme/y", airlock.Errorf(airlock.CodeNotFound, "revocation", "not revoked"))
	recs := tg.flushed(t)
	byID := map[string]Record{}
	for _, r := range recs {
		byID[r.ID] = r
	}
	if r := byID[id]; r.Broker != "admin" || r.Outcome != OutcomeAllow || r.Reason != "revoke" || r.Target != "acme/x" {
		t.Errorf("admin record = %+v", r)
	}
	if r := byID[idErr]; r.Outcome != OutcomeError || r.Code != "not_found" || r.Reason != "unrevoke" {
		t.Errorf("failed admin record = %+v", r)
	}
}

// flakyReads is a revocation store whose reads can be made to fail, as a
// store busy under load does.
type flakyReads struct {
	store.Revocations
	fail atomic.Bool
}

func (f *flakyReads) RevocationVersion(ctx context.Context) (uint64, error) {
	if f.fail.Load() {
		return 0, errors.New("database is locked")
	}
	return f.Revocations.RevocationVersion(ctx)
}

// TestRevokeWhenReloadFails: a revocation that reached the store takes
// effect here at once, even when reading the set back fails.
func TestRevokeWhenReloadFails(t *testing.T) {
	st, err := store.OpenMemory()
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	fr := &flakyReads{Revocations: st}
	var changes atomic.Int64
	revs, err := NewRevocationSet(context.Background(), fr, 10*time.Millisecond, nil, func() { changes.Add(1) })
	if err != nil {
		t.Fatal(err)
	}
	defer revs.Close()
	ctx := context.Background()
	p := airlock.Principal{Tenant: "acme", Instance: "x"}

	fr.fail.Store(true)
	before := changes.Load()
	if err := revs.Revoke(ctx, "acme", "busy store"); err != nil {
		t.Fatalf("Revoke = %v, want nil: the revocation is stored", err)
	}
	if !revs.Revoked(p) {
		t.Error("a stored revocation is not in effect while the store cannot be read")
	}
	if changes.Load() == before {
		t.Error("onChange not called: calls in flight would not be cancelled")
	}
	if err := revs.Unrevoke(ctx, "acme"); err != nil {
		t.Fatalf("Unrevoke = %v", err)
	}
	if revs.Revoked(p) {
		t.Error("an unrevocation is not in effect while the store cannot be read")
	}

	// Once reads work again, the poller reconciles with the store.
	if err := st.Revoke(ctx, "acme/x", "elsewhere"); err != nil {
		t.Fatal(err)
	}
	fr.fail.Store(false)
	deadline := time.Now().Add(5 * time.Second)
	for !revs.Revoked(p) {
		if time.Now().After(deadline) {
			t.Fatal("the poller never reloaded the set")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if got := revs.List(); len(got) != 1 || got[0].Subject != "acme/x" {
		t.Errorf("List() = %v, want just acme/x", got)
	}
}

// TestStaleRevocationsFailClosed: a set that cannot be refreshed from its
// shared store for longer than its bound refuses every call as
// unavailable, and recovers when the store answers again.
func TestStaleRevocationsFailClosed(t *testing.T) {
	st, err := store.OpenMemory()
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	fr := &flakyReads{Revocations: st}
	revs, err := NewRevocationSet(context.Background(), fr, 10*time.Millisecond, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer revs.Close()
	revs.SetMaxStale(100 * time.Millisecond)
	a := NewAuditor(AuditorConfig{Sink: &memSink{}, Interval: time.Hour})
	defer a.Close(context.Background())
	g := New(Config{Tenants: map[string]*Tenant{"acme": {Name: "acme", Profile: BuiltinProfiles()[ProfilePosix]}}, Revocations: revs, Auditor: a})
	p := airlock.Principal{Tenant: "acme"}
	call, err := g.Begin(context.Background(), p, airlock.CapabilityHTTP, "http", "x")
	if err != nil {
		t.Fatalf("healthy: %v", err)
	}
	call.End(nil, 0, 0)
	fr.fail.Store(true)
	time.Sleep(200 * time.Millisecond)
	if !revs.Stale() {
		t.Fatal("not stale after the bound")
	}
	_, err = g.Begin(context.Background(), p, airlock.CapabilityHTTP, "http", "x")
	if airlock.CodeOf(err) != airlock.CodeUnavailable || airlock.ReasonOf(err) != airlock.ReasonRevocationsStale {
		t.Fatalf("stale: %v, want unavailable/%s", err, airlock.ReasonRevocationsStale)
	}
	fr.fail.Store(false)
	deadline := time.Now().Add(5 * time.Second)
	for revs.Stale() {
		if time.Now().After(deadline) {
			t.Fatal("still stale after the store came back")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := g.Begin(context.Background(), p, airlock.CapabilityHTTP, "http", "x"); err != nil {
		t.Fatalf("recovered: %v", err)
	}
}

// TestEndPublicMessage: the caller's message is the public text of the
// error chain (no resolved address, no class of a refused answer), wrapped
// or not; the audit record keeps the full detail.
func TestEndPublicMessage(t *testing.T) {
	tg := newTestGate(t, map[string]*Tenant{"t": builtinTenant("t", ProfilePosix, Limit{})})
	denial := &egress.Error{Code: egress.CodeDenied, Reason: egress.ReasonInternalAddress, Class: egress.ReasonPrivate,
		Name: "internal.test", Op: "check", Target: "http://internal.test/", Addr: netip.MustParseAddrPort("10.1.2.3:80")}
	for name, err := range map[string]error{
		"bare":    denial,
		"wrapped": fmt.Errorf("fetch %s: %w", "http://internal.test/", denial),
		"vocab":   airlock.Errorf(airlock.CodeDenied, "internal_address", "crawl: %w", denial),
	} {
		t.Run(name, func(t *testing.T) {
			c, berr := tg.Begin(context.Background(), airlock.Principal{Tenant: "t"}, airlock.CapabilityHTTP, "http", "x")
			if berr != nil {
				t.Fatal(berr)
			}
			ae := wantAirlockErr(t, c.End(err, 0, 0), airlock.CodeDenied, "internal_address")
			for _, s := range []string{ae.Message, ae.Error(), airlock.Public(ae, "").Message} {
				if strings.Contains(s, "10.1.2.3") || strings.Contains(s, "private") {
					t.Errorf("public text %q carries the answer or its class", s)
				}
				if !strings.Contains(s, "internal.test resolves to an address the policy refuses") {
					t.Errorf("public text %q does not say why", s)
				}
			}
			for _, r := range tg.flushed(t) {
				if r.ID == c.ID && (!strings.Contains(r.Detail, "10.1.2.3") || !strings.Contains(r.Detail, "private")) {
					t.Errorf("audit detail %q lacks the answer or its class", r.Detail)
				}
			}
		})
	}
}

// TestCallContextCarriesPrincipal: whatever serves a call (a provider)
// learns the caller from the call's context, and a principal the caller's
// own context carried does not survive Begin.
func TestCallContextCarriesPrincipal(t *testing.T) {
	tg := newTestGate(t, map[string]*Tenant{"acme": builtinTenant("acme", ProfilePosix, Limit{})})
	p := airlock.Principal{Tenant: "acme", Instance: "agent-1"}
	ctx := airlock.ContextWithPrincipal(context.Background(), airlock.Principal{Tenant: "other"})
	c, err := tg.Begin(ctx, p, airlock.CapabilityBrowse, "fetch", "x")
	if err != nil {
		t.Fatal(err)
	}
	defer c.End(nil, 0, 0)
	got, ok := airlock.PrincipalFromContext(c.Ctx)
	if !ok || got != p {
		t.Fatalf("PrincipalFromContext(call.Ctx) = %v, %v; want %v, true", got, ok, p)
	}
	if _, ok := airlock.PrincipalFromContext(context.Background()); ok {
		t.Fatal("a bare context carries a principal")
	}
}
