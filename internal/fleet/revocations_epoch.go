package fleet

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/store"
)

// LocalCopy is a replica's durable memory of the shared revocation set:
// the SQLite store of its data directory (store.SQLite). It keeps the
// epoch and generation the replica last saw, and a copy of the set then.
type LocalCopy interface {
	RevocationMark(ctx context.Context) (store.RevocationMark, error)
	CopyRevocations(ctx context.Context, list []store.Revocation, mark store.RevocationMark) error
	ListRevocations(ctx context.Context) ([]store.Revocation, error)
}

// ReplicaRevocations is the fleet's revocation set as one replica uses it:
// a store.Revocations on Redis that checks, on every read and write, that
// the set is the one this replica knew, and keeps a copy of it in the
// replica's data directory.
//
// The check compares the set's Epoch in Redis with the epoch and
// generation the replica remembers (in memory and in its LocalCopy, so a
// restarted replica remembers too):
//
//   - no epoch, and the replica remembers none: a new fleet; the replica
//     creates the epoch (EpochInit);
//   - no epoch, but the replica remembers one: Redis lost its data
//     (restarted without persistence, flushed);
//   - the remembered epoch with a lower generation: Redis went back to an
//     older copy (a snapshot restored);
//   - another epoch: lost, unless it is one an operator restored
//     (EpochRestored), which every replica adopts; a replica that remembers
//     nothing adopts any live epoch (it joins the fleet);
//   - EpochLost: another replica found the set lost.
//
// A replica that finds the set lost writes EpochLost to Redis (so that
// every replica, including one that starts later and remembers nothing,
// refuses too) and from then on refuses every read and write with
// unavailable (reason revocations_stale), whatever Redis answers, until an
// operator restores the set (Restore). Lost reports it; the gate refuses
// every call meanwhile.
//
// Its methods are safe for concurrent use; they serialise on one mutex,
// held across their Redis round trips.
type ReplicaRevocations struct {
	r      *Revocations
	local  LocalCopy
	name   string
	logger *slog.Logger

	lost       atomic.Pointer[airlock.Error]
	detections atomic.Int64

	mu      sync.Mutex
	marked  bool   // the LocalCopy's mark was read
	seen    int64  // the epoch id this replica adopted (0: none)
	seenRaw string // that epoch as stored, for the writes' check
	seenGen uint64 // the highest generation seen in it
	cause   string // why the set is lost, while it is
	// version is what RevocationVersion reports: bumped whenever the
	// (epoch, generation) read differs from the one last reported.
	reported [2]uint64
	version  uint64
	copied   [2]uint64 // the (epoch, generation) of the last local copy
}

// ReplicaRevocations returns the revocation set for the replica named
// name whose durable memory is local.
func (f *Fleet) ReplicaRevocations(local LocalCopy, name string, logger *slog.Logger) *ReplicaRevocations {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &ReplicaRevocations{r: f.Revocations(), local: local, name: name, logger: logger}
}

// Lost is nil, or why the set is lost: an *airlock.Error (unavailable,
// revocations_stale) naming the cause.
func (g *ReplicaRevocations) Lost() error {
	if e := g.lost.Load(); e != nil {
		return e
	}
	return nil
}

// LastKnown is the replica's durable copy of the set.
func (g *ReplicaRevocations) LastKnown(ctx context.Context) ([]store.Revocation, error) {
	return g.local.ListRevocations(ctx)
}

// Register adds airlock_revocations_lost (1 while this replica finds the
// set lost) and airlock_revocations_lost_total (how many times it found
// it lost) to reg.
func (g *ReplicaRevocations) Register(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "airlock_revocations_lost",
			Help: "1 while this replica finds the shared revocation set lost (Redis lost its data) and refuses every call."},
			func() float64 {
				if g.lost.Load() != nil {
					return 1
				}
				return 0
			}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "airlock_revocations_lost_total",
			Help: "Times this replica found the shared revocation set lost."},
			func() float64 { return float64(g.detections.Load()) }),
	} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// RevocationVersion implements store.Revocations: a counter of this
// replica's own, bumped whenever the set's (epoch, generation) moves, so
// that it never goes back even when the set is restored.
func (g *ReplicaRevocations) RevocationVersion(ctx context.Context) (uint64, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	s, err := g.sync(ctx, false)
	if err != nil {
		return 0, err
	}
	return g.versionAt(s.gen), nil
}

// versionAt is the version to report for the set at generation gen of the
// adopted epoch. Called with g.mu held.
func (g *ReplicaRevocations) versionAt(gen uint64) uint64 {
	if at := [2]uint64{uint64(g.seen), gen}; g.reported != at {
		g.reported = at
		g.version++
	}
	return g.version
}

// ListRevocations implements store.Revocations, and copies the set into
// the LocalCopy when it moved.
func (g *ReplicaRevocations) ListRevocations(ctx context.Context) ([]store.Revocation, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	s, err := g.sync(ctx, true)
	if err != nil {
		return nil, err
	}
	g.versionAt(s.gen)
	g.copyLocal(ctx, s.list, s.gen)
	if len(s.list) == 0 {
		return nil, nil
	}
	return s.list, nil
}

// copyLocal keeps the durable copy; a failure is logged, not returned: the
// set in Redis is sound, only the copy lags.
func (g *ReplicaRevocations) copyLocal(ctx context.Context, list []store.Revocation, gen uint64) {
	at := [2]uint64{uint64(g.seen), gen}
	if g.copied == at {
		return
	}
	if err := g.local.CopyRevocations(ctx, list, store.RevocationMark{Epoch: g.seen, Generation: gen}); err != nil {
		g.logger.Warn("revocations: the durable copy in the data directory was not updated", slog.String("error", err.Error()))
		return
	}
	g.copied = at
}

// Revoke implements store.Revocations, in the epoch this replica knows.
func (g *ReplicaRevocations) Revoke(ctx context.Context, subject, reason string) error {
	if err := store.ValidateSubject(subject); err != nil {
		return err
	}
	v, err := json.Marshal(revocationValue{Reason: reason, Created: time.Now().UTC()})
	if err != nil {
		return err
	}
	_, err = g.write(ctx, "revoke", subject, v)
	return err
}

// Unrevoke implements store.Revocations, in the epoch this replica knows.
func (g *ReplicaRevocations) Unrevoke(ctx context.Context, subject string) error {
	if err := store.ValidateSubject(subject); err != nil {
		return err
	}
	n, err := g.write(ctx, "unrevoke", subject, nil)
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("unrevoke %s: %w", subject, store.ErrNotFound)
	}
	return nil
}

func (g *ReplicaRevocations) write(ctx context.Context, op, subject string, value []byte) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for range 3 {
		if _, err := g.sync(ctx, false); err != nil {
			return 0, err
		}
		n, err := g.r.writeAt(ctx, g.seenRaw, subject, value)
		if errors.Is(err, errEpochMoved) {
			continue // judge the new epoch
		}
		if err != nil {
			return 0, fmt.Errorf("%s %s: %w", op, subject, err)
		}
		return n, nil
	}
	return 0, staleErr("the epoch of the revocation set in Redis keeps changing")
}

// Restore replaces the set in Redis with list under a new epoch
// (EpochRestored) that every replica adopts, and ends this replica's lost
// state: the operator's answer to a lost set. by names who restored it.
func (g *ReplicaRevocations) Restore(ctx context.Context, list []store.Revocation, by string) error {
	now := time.Now().UTC()
	list = append([]store.Revocation(nil), list...)
	for i := range list {
		if err := store.ValidateSubject(list[i].Subject); err != nil {
			return err
		}
		if list[i].Created.IsZero() {
			list[i].Created = now
		}
		list[i].Created = list[i].Created.UTC()
	}
	sortRevocations(list)
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.loadMark(ctx); err != nil {
		return err
	}
	e := Epoch{ID: newEpochID(), State: EpochRestored, At: now, By: by}
	raw, gen, err := g.r.restore(ctx, list, e)
	if err != nil {
		return err
	}
	g.adopt(e, raw, gen)
	g.copyLocal(ctx, list, gen)
	return nil
}

// loadMark reads what the replica remembers from its durable copy, once.
func (g *ReplicaRevocations) loadMark(ctx context.Context) error {
	if g.marked {
		return nil
	}
	m, err := g.local.RevocationMark(ctx)
	if err != nil {
		return airlock.Errorf(airlock.CodeUnavailable, airlock.ReasonStore, "read the replica's revocation mark: %v", err)
	}
	g.seen, g.seenGen = m.Epoch, m.Generation
	g.copied = [2]uint64{uint64(m.Epoch), m.Generation}
	g.marked = true
	return nil
}

// sync reads the set's epoch (and members) and judges it against what
// this replica remembers: see ReplicaRevocations. Called with g.mu held.
func (g *ReplicaRevocations) sync(ctx context.Context, members bool) (snapshot, error) {
	if err := g.loadMark(ctx); err != nil {
		return snapshot{}, err
	}
	for range 4 {
		s, err := g.r.read(ctx, members)
		if err != nil {
			return s, err
		}
		lost := g.lost.Load() != nil
		switch {
		case s.raw != "" && s.epoch.ID <= 0:
			if err := g.declareLost(ctx, s, "the epoch of the revocation set in Redis is unreadable"); err != nil {
				return s, err
			}
			continue
		case s.epoch.State == EpochRestored && s.epoch.ID != g.seen:
			g.adopt(s.epoch, s.raw, s.gen)
			return s, nil
		case s.raw == "" && g.seen == 0 && !lost:
			// A new fleet: create its epoch, then judge it again.
			e := Epoch{ID: newEpochID(), State: EpochInit, At: time.Now().UTC(), By: g.name}
			if _, _, err := g.r.swapEpoch(ctx, "", e); err != nil {
				return s, err
			}
			continue
		case s.raw == "":
			if err := g.declareLost(ctx, s, "the epoch of the revocation set is gone from Redis: Redis lost its data (restarted without persistence, or flushed)"); err != nil {
				return s, err
			}
			continue
		case s.epoch.State == EpochLost:
			cause := s.epoch.Cause
			if cause == "" {
				cause = "another replica found it lost"
			}
			return s, g.latch(cause)
		case lost:
			// Sticky: only a restore ends it. Say so again to Redis (a
			// replica that remembers nothing may have created an epoch).
			if err := g.declareLost(ctx, s, g.cause); err != nil {
				return s, err
			}
			continue
		case s.epoch.ID == g.seen && s.gen < g.seenGen:
			if err := g.declareLost(ctx, s, fmt.Sprintf("the revocation set in Redis went back to an older copy (generation %d, this replica saw %d)", s.gen, g.seenGen)); err != nil {
				return s, err
			}
			continue
		case s.epoch.ID == g.seen:
			g.seenRaw, g.seenGen = s.raw, max(g.seenGen, s.gen)
			return s, nil
		case g.seen == 0:
			// A replica joining the fleet.
			g.adopt(s.epoch, s.raw, s.gen)
			return s, nil
		default:
			if err := g.declareLost(ctx, s, fmt.Sprintf("the revocation set in Redis has another epoch (%s %d) than the one this replica knew (%d), not restored by an operator", s.epoch.State, s.epoch.ID, g.seen)); err != nil {
				return s, err
			}
			continue
		}
	}
	return snapshot{}, staleErr("the epoch of the revocation set in Redis keeps changing")
}

// declareLost writes EpochLost over what s read, so that every replica
// refuses too; when the epoch changed meanwhile the caller judges again.
func (g *ReplicaRevocations) declareLost(ctx context.Context, s snapshot, cause string) error {
	id := g.seen
	if id == 0 {
		id = newEpochID()
	}
	_, ok, err := g.r.swapEpoch(ctx, s.raw, Epoch{ID: id, State: EpochLost, At: time.Now().UTC(), By: g.name, Cause: cause})
	if err != nil {
		// Refuse even if Redis could not be told.
		g.latch(cause)
		return err
	}
	if ok {
		g.latch(cause)
	}
	return nil
}

// latch enters the lost state (logged once) and returns its error.
func (g *ReplicaRevocations) latch(cause string) error {
	if e := g.lost.Load(); e != nil {
		return e
	}
	g.cause = cause
	e := staleErr("the shared revocation set is lost: " + cause + "; every call is refused until an operator restores it (airlock admin revocations restore)")
	g.lost.Store(e)
	g.detections.Add(1)
	g.logger.Error("revocations: the shared revocation set is lost; refusing every call until an operator restores it with `airlock admin revocations restore`",
		slog.String("cause", cause), slog.Int64("epoch", g.seen), slog.Uint64("generation", g.seenGen))
	return e
}

// adopt makes e the epoch this replica knows and ends a lost state.
func (g *ReplicaRevocations) adopt(e Epoch, raw string, gen uint64) {
	if g.seen != 0 && e.ID != g.seen || g.lost.Load() != nil {
		g.logger.Warn("revocations: adopting the revocation set restored by an operator",
			slog.Int64("epoch", e.ID), slog.String("by", e.By), slog.Time("at", e.At), slog.Int64("previous_epoch", g.seen))
	}
	g.seen, g.seenRaw, g.seenGen = e.ID, raw, gen
	g.lost.Store(nil)
}

func staleErr(msg string) *airlock.Error {
	return airlock.Errorf(airlock.CodeUnavailable, airlock.ReasonRevocationsStale, "%s", msg)
}

// newEpochID is a random positive int64.
func newEpochID() int64 {
	var b [8]byte
	rand.Read(b[:])
	id := int64(binary.BigEndian.Uint64(b[:]) >> 1)
	if id == 0 {
		id = 1
	}
	return id
}

var _ store.Revocations = (*ReplicaRevocations)(nil)
