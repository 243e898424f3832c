package fleet

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/gate"
	"github.com/airlockhq/airlock/internal/store"
)

// What a replica of the engine does with the fleet: its name, the
// connection, the owners of its browser sessions, its fallbacks to local
// state and the loops that follow the other replicas.

// DefaultMaxStale is how long a replica keeps serving on the last
// revocation set it read from Redis: past it, every call is refused as
// unavailable until Redis answers again.
const DefaultMaxStale = time.Second

// FallbackAuditEvery bounds the audit records of state.fallback_local.
const FallbackAuditEvery = 10 * time.Second

// ReplicaName is name (state.replica), or the host name with a random
// suffix.
func ReplicaName(name string) string {
	if name != "" {
		return name
	}
	h, err := os.Hostname()
	if err != nil || h == "" {
		h = "replica"
	}
	b := make([]byte, 3)
	rand.Read(b)
	return h + "-" + hex.EncodeToString(b)
}

// Connect connects to redisURL (within ctx and twice the dial timeout),
// or returns nil without one.
func Connect(ctx context.Context, redisURL string, logger *slog.Logger) (*Fleet, error) {
	if redisURL == "" {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 2*DialTimeout)
	defer cancel()
	return Open(ctx, redisURL, logger)
}

// SessionOwners records in the fleet which replica runs each browser
// session (the browser sessions manager's Owners).
type SessionOwners struct {
	fleet   *Fleet
	replica string
	logger  *slog.Logger
}

// SessionOwners returns the owners of replica's browser sessions.
func (f *Fleet) SessionOwners(replica string, logger *slog.Logger) *SessionOwners {
	return &SessionOwners{fleet: f, replica: replica, logger: logger}
}

// Claim records this replica as the owner of a browser session.
func (o *SessionOwners) Claim(ctx context.Context, id string) {
	if err := o.fleet.Owners("browser").Claim(ctx, id, o.replica); err != nil {
		o.logger.Warn("browser session owner not recorded", slog.String("session", id), slog.String("error", err.Error()))
	}
}

// Release forgets a closed session's owner.
func (o *SessionOwners) Release(ctx context.Context, id string) {
	if err := o.fleet.Owners("browser").Release(ctx, id); err != nil {
		o.logger.Warn("browser session owner not released", slog.String("session", id), slog.String("error", err.Error()))
	}
}

// Elsewhere is the error for a session this replica does not have: the
// replica that owns it is named (unavailable, session_elsewhere: retry on
// that replica); when no owner is recorded, no_session.
func (o *SessionOwners) Elsewhere(ctx context.Context, id string) error {
	if owner, err := o.fleet.Owners("browser").Owner(ctx, id); err == nil && owner != "" && owner != o.replica {
		return airlock.Errorf(airlock.CodeUnavailable, airlock.ReasonSessionElsewhere,
			"browser: session %s is on replica %s (its Chromium runs there): send its calls to that replica", id, owner)
	}
	return airlock.Errorf(airlock.CodeNotFound, airlock.ReasonNoSession, "browser: no session %q", id)
}

// Fallbacks notes a replica's fallbacks to local state
// (state.fallback_local): each is logged, and recorded in the audit log
// through Record at most once per FallbackAuditEvery.
type Fallbacks struct {
	Logger *slog.Logger
	// Record audits a fallback (broker fleet, reason redis_fallback).
	Record func(now time.Time, detail string)
	n      atomic.Int64
	last   atomic.Int64
}

// Note logs a fallback of what and records it in the audit log, at most
// once per FallbackAuditEvery.
func (f *Fallbacks) Note(what string, err error) {
	n := f.n.Add(1)
	f.Logger.Warn("shared state (Redis) unavailable: falling back to local state (state.fallback_local)",
		slog.String("what", what), slog.Int64("fallbacks", n), slog.String("error", err.Error()))
	now := time.Now()
	last := f.last.Load()
	if now.UnixNano()-last < int64(FallbackAuditEvery) || !f.last.CompareAndSwap(last, now.UnixNano()) {
		return
	}
	f.Record(now, fmt.Sprintf("%s: %v (%d fallbacks so far)", what, err, n))
}

// FallbackOrShared is the Redis limiter, with a local fallback that notes each
// fallback when note is not nil (state.fallback_local).
func (f *Fleet) FallbackOrShared(note func(string, error)) gate.RateLimiter {
	if note == nil {
		return f.Limiter()
	}
	return &FallbackLimiter{Shared: f.Limiter(), Local: &gate.MemoryLimiter{}, Note: note}
}

// Follow is what a replica follows of the others: their revocations,
// applied to Revs at once, and their audit records, appended to Log and
// observed.
type Follow struct {
	Revs    *gate.RevocationSet
	Stream  *AuditStream
	Log     store.AuditLog
	Observe func(gate.Record)
	// Note notes a fallback to local state; nil without
	// state.fallback_local, and the revocation set then goes stale after
	// DefaultMaxStale.
	Note   func(string, error)
	Logger *slog.Logger
}

// Watch makes revocations announced by any replica apply here at once
// (pub/sub), bounds how stale the set may get when Redis cannot be read,
// and follows the other replicas' audit records: loops in loops under
// ctx.
func (f *Fleet) Watch(ctx context.Context, loops *sync.WaitGroup, w Follow) error {
	if w.Note == nil {
		w.Revs.SetMaxStale(DefaultMaxStale)
	}
	loops.Go(func() {
		w.Stream.Follow(ctx, func(recs []gate.Record) error {
			if err := w.Log.AppendAudit(ctx, recs); err != nil {
				return err
			}
			for _, r := range recs {
				w.Observe(r)
			}
			return nil
		}, w.Logger)
	})
	return f.Revocations().Watch(ctx, loops, func() {
		rctx, c := context.WithTimeout(ctx, IOTimeout)
		defer c()
		if err := w.Revs.Refresh(rctx); err != nil && ctx.Err() == nil && w.Revs.Lost() == nil {
			if w.Note != nil {
				w.Note("revocations", err)
			}
			w.Logger.Warn("revocation refresh after a change notice failed", slog.String("error", err.Error()))
		}
	}, w.Logger)
}
