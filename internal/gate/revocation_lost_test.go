package gate

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/store"
)

// lostStore is a shared store that has found its set lost: every read
// fails until restored.
type lostStore struct {
	store.Revocations // the last copy
	lost              atomic.Bool
}

func (l *lostStore) err() error {
	return airlock.Errorf(airlock.CodeUnavailable, airlock.ReasonRevocationsStale, "the set is lost")
}

func (l *lostStore) Lost() error {
	if l.lost.Load() {
		return l.err()
	}
	return nil
}

func (l *lostStore) LastKnown(ctx context.Context) ([]store.Revocation, error) {
	return l.Revocations.ListRevocations(ctx)
}

func (l *lostStore) RevocationVersion(ctx context.Context) (uint64, error) {
	if l.lost.Load() {
		return 0, l.err()
	}
	return l.Revocations.RevocationVersion(ctx)
}

func (l *lostStore) ListRevocations(ctx context.Context) ([]store.Revocation, error) {
	if l.lost.Load() {
		return nil, l.err()
	}
	return l.Revocations.ListRevocations(ctx)
}

// A set that starts lost starts anyway, on the last copy, refusing every
// call (also with no staleness bound, as with state.fallback_local), and
// takes calls again once the store is restored.
func TestLostRevocationsFailClosed(t *testing.T) {
	st, err := store.OpenMemory()
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	if err := st.Revoke(ctx, "acme/p", "leaked"); err != nil {
		t.Fatal(err)
	}
	ls := &lostStore{Revocations: st}
	ls.lost.Store(true)
	revs, err := NewRevocationSet(ctx, ls, 10*time.Millisecond, nil, nil)
	if err != nil {
		t.Fatalf("a lost set must not stop the process from starting: %v", err)
	}
	defer revs.Close()
	if !revs.Stale() || revs.Lost() == nil {
		t.Fatal("a lost set is not stale")
	}
	if !revs.Revoked(airlock.Principal{Tenant: "acme", Instance: "p"}) {
		t.Error("the last copy is not loaded")
	}
	a := NewAuditor(AuditorConfig{Sink: &memSink{}, Interval: time.Hour})
	defer a.Close(ctx)
	g := New(Config{Tenants: map[string]*Tenant{"acme": {Name: "acme", Profile: BuiltinProfiles()[ProfilePosix]}}, Revocations: revs, Auditor: a})
	for _, inst := range []string{"p", "q"} {
		_, err := g.Begin(ctx, airlock.Principal{Tenant: "acme", Instance: inst}, airlock.CapabilityHTTP, "http", "x")
		if airlock.CodeOf(err) != airlock.CodeUnavailable || airlock.ReasonOf(err) != airlock.ReasonRevocationsStale {
			t.Fatalf("acme/%s while lost: %v, want unavailable/%s", inst, err, airlock.ReasonRevocationsStale)
		}
	}
	time.Sleep(50 * time.Millisecond) // polls fail meanwhile; still lost
	if !revs.Stale() {
		t.Fatal("no longer stale without a restore")
	}
	ls.lost.Store(false)
	if err := revs.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if revs.Stale() {
		t.Fatal("still stale after the restore")
	}
	call, err := g.Begin(ctx, airlock.Principal{Tenant: "acme", Instance: "q"}, airlock.CapabilityHTTP, "http", "x")
	if err != nil {
		t.Fatalf("acme/q after the restore: %v", err)
	}
	call.End(nil, 0, 0)
	if _, err := g.Begin(ctx, airlock.Principal{Tenant: "acme", Instance: "p"}, airlock.CapabilityHTTP, "http", "x"); airlock.CodeOf(err) != airlock.CodeRevoked {
		t.Fatalf("acme/p after the restore: %v, want revoked", err)
	}
}
