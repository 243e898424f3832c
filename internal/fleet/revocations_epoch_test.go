package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/fleet/fleettest"
	"github.com/airlockhq/airlock/internal/store"
	"github.com/airlockhq/airlock/internal/store/storetest"
)

// memCopy is a replica's data directory: an in-memory SQLite store.
func memCopy(t *testing.T) *store.SQLite {
	t.Helper()
	s, err := store.OpenMemory()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// ReplicaRevocations is a store.Revocations like any other.
func TestReplicaRevocationsConformance(t *testing.T) {
	t.Parallel()
	storetest.RunRevocations(t, func(t *testing.T) store.Revocations {
		f := open(t)
		if p, ok := subtestPrefix.Load("replica:" + t.Name()); ok {
			f = f.WithPrefix(p.(string))
		} else {
			subtestPrefix.Store("replica:"+t.Name(), f.prefix)
		}
		return f.ReplicaRevocations(memCopy(t), "r", nil)
	})
}

// loseData deletes every key of f's prefix: what a Redis restarted without
// persistence (or FLUSHALL) does to this fleet.
func loseData(t *testing.T, f *Fleet) {
	t.Helper()
	ctx := t.Context()
	keys, err := f.rdb.Keys(ctx, f.prefix+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) > 0 {
		if err := f.rdb.Del(ctx, keys...).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

func storedEpoch(t *testing.T, f *Fleet) Epoch {
	t.Helper()
	raw, err := f.rdb.Get(t.Context(), f.key("revocations", "epoch")).Result()
	if err != nil {
		t.Fatalf("epoch: %v", err)
	}
	var e Epoch
	if err := json.Unmarshal([]byte(raw), &e); err != nil {
		t.Fatal(err)
	}
	return e
}

func wantStale(t *testing.T, what string, err error) {
	t.Helper()
	if airlock.CodeOf(err) != airlock.CodeUnavailable || airlock.ReasonOf(err) != airlock.ReasonRevocationsStale {
		t.Fatalf("%s: %v, want unavailable revocations_stale", what, err)
	}
}

func subjectsOf(list []store.Revocation) []string {
	var out []string
	for _, r := range list {
		out = append(out, r.Subject)
	}
	return out
}

// A new fleet creates its epoch; a replica that joins adopts it; every
// change reaches the replicas' durable copies with the mark.
func TestReplicaRevocationsNewFleet(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	f := open(t)
	la, lb := memCopy(t), memCopy(t)
	a := f.ReplicaRevocations(la, "a", nil)
	if list, err := a.ListRevocations(ctx); err != nil || list != nil {
		t.Fatalf("a fresh Redis: %v %v, want an empty set", list, err)
	}
	e := storedEpoch(t, f)
	if e.State != EpochInit || e.ID <= 0 || e.By != "a" {
		t.Fatalf("epoch after the first replica: %+v", e)
	}
	b := second(t, f).ReplicaRevocations(lb, "b", nil)
	if err := b.Revoke(ctx, "acme/p", "leaked"); err != nil {
		t.Fatal(err)
	}
	if got := storedEpoch(t, f); got != e {
		t.Fatalf("a joining replica replaced the epoch: %+v, was %+v", got, e)
	}
	for name, g := range map[string]*ReplicaRevocations{"a": a, "b": b} {
		list, err := g.ListRevocations(ctx)
		if err != nil || len(list) != 1 || list[0].Subject != "acme/p" {
			t.Fatalf("%s: %v %v", name, list, err)
		}
	}
	for name, l := range map[string]*store.SQLite{"a": la, "b": lb} {
		m, err := l.RevocationMark(ctx)
		if err != nil || m.Epoch != e.ID || m.Generation != 1 {
			t.Errorf("%s's mark: %+v %v, want epoch %d generation 1", name, m, err, e.ID)
		}
		list, err := l.ListRevocations(ctx)
		if err != nil || len(list) != 1 || list[0].Subject != "acme/p" || list[0].Reason != "leaked" {
			t.Errorf("%s's copy: %+v %v", name, list, err)
		}
	}
	if a.Lost() != nil || b.Lost() != nil {
		t.Fatal("lost on a healthy fleet")
	}
}

// Redis loses the set in each way it can; the replica that remembers an
// epoch refuses, tells Redis, and so every replica refuses (even one that
// remembers nothing), until a restore, which they all adopt.
func TestReplicaRevocationsLost(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		lose func(t *testing.T, f *Fleet)
	}{
		{"flushed", loseData},
		{"older snapshot", func(t *testing.T, f *Fleet) {
			// The same epoch, an earlier generation: the revocation of
			// acme/p is gone.
			if err := f.rdb.HDel(t.Context(), f.key("revocations"), "acme/p").Err(); err != nil {
				t.Fatal(err)
			}
			if err := f.rdb.Set(t.Context(), f.key("revocations", "version"), 0, 0).Err(); err != nil {
				t.Fatal(err)
			}
		}},
		{"flushed, then a new replica created an epoch", func(t *testing.T, f *Fleet) {
			loseData(t, f)
			n := f.ReplicaRevocations(memCopy(t), "newcomer", nil)
			if _, err := n.ListRevocations(t.Context()); err != nil {
				t.Fatalf("the newcomer, before anyone noticed: %v", err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			f := open(t)
			la := memCopy(t)
			a := f.ReplicaRevocations(la, "a", nil)
			if err := a.Revoke(ctx, "acme/p", "leaked"); err != nil {
				t.Fatal(err)
			}
			if _, err := a.ListRevocations(ctx); err != nil {
				t.Fatal(err)
			}
			tc.lose(t, f)

			_, err := a.RevocationVersion(ctx)
			wantStale(t, "version", err)
			_, err = a.ListRevocations(ctx)
			wantStale(t, "list", err)
			wantStale(t, "revoke", a.Revoke(ctx, "acme/q", ""))
			wantStale(t, "unrevoke", a.Unrevoke(ctx, "acme/p"))
			wantStale(t, "Lost", a.Lost())
			if e := storedEpoch(t, f); e.State != EpochLost || e.Cause == "" {
				t.Fatalf("Redis was not told: %+v", e)
			}
			// A replica restarted on a's data directory, and one that
			// remembers nothing, refuse too.
			for name, l := range map[string]*store.SQLite{"restarted": la, "new": memCopy(t)} {
				g := second(t, f).ReplicaRevocations(l, name, nil)
				_, err := g.ListRevocations(ctx)
				wantStale(t, name, err)
			}
			// The durable copy still has the revocation.
			last, err := a.LastKnown(ctx)
			if err != nil || len(last) != 1 || last[0].Subject != "acme/p" {
				t.Fatalf("last known: %v %v", last, err)
			}
			// Still refused after more polls: only a restore ends it.
			for range 3 {
				_, err := a.RevocationVersion(ctx)
				wantStale(t, "version, later", err)
			}

			// The operator restores from the copy through another process.
			c := second(t, f).ReplicaRevocations(la, "cli", nil)
			if err := c.Restore(ctx, last, "cli"); err != nil {
				t.Fatal(err)
			}
			if e := storedEpoch(t, f); e.State != EpochRestored {
				t.Fatalf("after the restore: %+v", e)
			}
			list, err := a.ListRevocations(ctx)
			if err != nil || len(list) != 1 || list[0].Subject != "acme/p" || list[0].Reason != "leaked" {
				t.Fatalf("a after the restore: %v %v", list, err)
			}
			if a.Lost() != nil {
				t.Fatal("a still lost after the restore")
			}
			if err := a.Revoke(ctx, "acme/q", ""); err != nil {
				t.Fatalf("revoke after the restore: %v", err)
			}
			if got, _ := a.ListRevocations(ctx); len(got) != 2 {
				t.Fatalf("after a revoke: %v", subjectsOf(got))
			}
		})
	}
}

// RevocationVersion never goes back, across a loss and a restore that
// reset the generation in Redis, so a poller reloads the restored set.
func TestReplicaRevocationsVersionAcrossRestore(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	f := open(t)
	a := f.ReplicaRevocations(memCopy(t), "a", nil)
	for _, s := range []string{"t1", "t2", "t3"} {
		if err := a.Revoke(ctx, s, ""); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.ListRevocations(ctx); err != nil {
		t.Fatal(err)
	}
	before, err := a.RevocationVersion(ctx)
	if err != nil {
		t.Fatal(err)
	}
	loseData(t, f)
	if _, err := a.RevocationVersion(ctx); err == nil {
		t.Fatal("no error after the loss")
	}
	if err := a.Restore(ctx, []store.Revocation{{Subject: "t1"}}, "test"); err != nil {
		t.Fatal(err)
	}
	after, err := a.RevocationVersion(ctx)
	if err != nil || after <= before {
		t.Fatalf("version %d then %d (%v): want it to move forward", before, after, err)
	}
	if gen, _ := f.rdb.Get(ctx, f.key("revocations", "version")).Uint64(); gen != 1 {
		t.Fatalf("generation in Redis after the restore: %d, want 1 (reset by the loss)", gen)
	}
}

// A Redis that cannot be reached is unavailable (redis), not lost: it
// ends when Redis answers again.
func TestReplicaRevocationsRedisDownIsNotLost(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	f := open(t)
	a := f.ReplicaRevocations(memCopy(t), "a", nil)
	if _, err := a.ListRevocations(ctx); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err := a.ListRevocations(cctx)
	if err == nil || a.Lost() != nil {
		t.Fatalf("a failed read: %v, lost %v", err, a.Lost())
	}
	if _, err := a.ListRevocations(ctx); err != nil {
		t.Fatalf("after Redis answers again: %v", err)
	}
}

func TestCopyRevocationsSkipsOlder(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	l := memCopy(t)
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(l.CopyRevocations(ctx, []store.Revocation{{Subject: "a", Reason: "r", Created: t0}, {Subject: "b", Created: t0}}, store.RevocationMark{Epoch: 7, Generation: 5}))
	v1, _ := l.RevocationVersion(ctx)
	// An older generation of the same epoch is skipped.
	must(l.CopyRevocations(ctx, []store.Revocation{{Subject: "c", Created: t0}}, store.RevocationMark{Epoch: 7, Generation: 4}))
	list, _ := l.ListRevocations(ctx)
	if got := subjectsOf(list); len(got) != 2 || got[0] != "a" || !list[0].Created.Equal(t0) || list[0].Reason != "r" {
		t.Fatalf("after an older copy: %+v", list)
	}
	// The same content again changes nothing.
	must(l.CopyRevocations(ctx, []store.Revocation{{Subject: "a", Reason: "r", Created: t0}, {Subject: "b", Created: t0}}, store.RevocationMark{Epoch: 7, Generation: 5}))
	if v, _ := l.RevocationVersion(ctx); v != v1 {
		t.Fatalf("version moved without a change: %d then %d", v1, v)
	}
	// Another epoch replaces it, whatever its generation.
	must(l.CopyRevocations(ctx, []store.Revocation{{Subject: "c", Created: t0}}, store.RevocationMark{Epoch: 9, Generation: 1}))
	list, _ = l.ListRevocations(ctx)
	if got := subjectsOf(list); len(got) != 1 || got[0] != "c" {
		t.Fatalf("after a new epoch: %v", got)
	}
	if m, _ := l.RevocationMark(ctx); m != (store.RevocationMark{Epoch: 9, Generation: 1}) {
		t.Fatalf("mark: %+v", m)
	}
	if err := l.CopyRevocations(ctx, nil, store.RevocationMark{}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("zero mark: %v", err)
	}
}

// An epoch that cannot be read is never adopted, even by a replica that
// remembers nothing.
func TestReplicaRevocationsUnreadableEpoch(t *testing.T) {
	t.Parallel()
	f := open(t)
	if err := f.rdb.Set(t.Context(), f.key("revocations", "epoch"), "garbage", 0).Err(); err != nil {
		t.Fatal(err)
	}
	_, err := f.ReplicaRevocations(memCopy(t), "a", nil).ListRevocations(t.Context())
	wantStale(t, "unreadable epoch", err)
	if e := storedEpoch(t, f); e.State != EpochLost {
		t.Fatalf("epoch: %+v", e)
	}
}

// BenchmarkRevocationVersion: the poll's cost (every 250 ms per replica),
// the plain version read against the epoch-checked one.
func BenchmarkRevocationVersion(b *testing.B) {
	srv := fleettest.Shared(b)
	f, err := Open(b.Context(), srv.URL(0), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	f = f.WithPrefix("airlock-bench:" + time.Now().Format("150405.000000000") + ":")
	l, err := store.OpenMemory()
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	for _, bc := range []struct {
		name string
		r    store.Revocations
	}{{"plain", f.Revocations()}, {"epoch", f.ReplicaRevocations(l, "bench", nil)}} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := bc.r.RevocationVersion(b.Context()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
