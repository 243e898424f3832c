package gate

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/store"
)

// restoringStore is a lost set that an operator restores while this
// process refreshes: the version read finds the set back (the latch
// clears), and the list read that follows waits on listing.
type restoringStore struct {
	lostStore
	listing chan struct{} // closed to let ListRevocations go on
	waiting chan struct{} // closed when ListRevocations waits
	armed   atomic.Bool   // the restore lands at the next refresh
}

func (s *restoringStore) RevocationVersion(ctx context.Context) (uint64, error) {
	if s.armed.Load() {
		s.lost.Store(false) // the restore lands
	}
	return s.lostStore.RevocationVersion(ctx)
}

func (s *restoringStore) ListRevocations(ctx context.Context) ([]store.Revocation, error) {
	if s.armed.Load() {
		close(s.waiting)
		<-s.listing
	}
	return s.lostStore.ListRevocations(ctx)
}

// Between the refresh that finds a lost set restored and the load of the
// restored list, the set in memory is still the one from before (here
// empty): it must stay Stale until the list is loaded, or a revoked
// principal passes in that window.
func TestRestoredSetStaleUntilLoaded(t *testing.T) {
	st, err := store.OpenMemory()
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	rs := &restoringStore{lostStore: lostStore{Revocations: store.Revocations(emptyRevocations{})}, listing: make(chan struct{}), waiting: make(chan struct{})}
	rs.lost.Store(true)
	revs, err := NewRevocationSet(ctx, rs, time.Hour, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer revs.Close()
	if !revs.Stale() {
		t.Fatal("a lost set is not stale")
	}
	// The restored set holds acme/p.
	if err := st.Revoke(ctx, "acme/p", "leaked"); err != nil {
		t.Fatal(err)
	}
	rs.Revocations = st
	rs.armed.Store(true)
	done := make(chan error, 1)
	go func() { done <- revs.Refresh(ctx) }()
	<-rs.waiting
	if !revs.Stale() && !revs.Revoked(airlock.Principal{Tenant: "acme", Instance: "p"}) {
		t.Error("the set is trusted before the restored list is loaded: acme/p passes")
	}
	close(rs.listing)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if revs.Stale() {
		t.Error("still stale after the restored list was loaded")
	}
	if !revs.Revoked(airlock.Principal{Tenant: "acme", Instance: "p"}) {
		t.Error("acme/p is not revoked after the restore")
	}
}

// emptyRevocations is a last copy with nothing in it (a new replica).
type emptyRevocations struct{ store.Revocations }

func (emptyRevocations) ListRevocations(context.Context) ([]store.Revocation, error) {
	return nil, nil
}

func (emptyRevocations) RevocationVersion(context.Context) (uint64, error) { return 0, nil }
