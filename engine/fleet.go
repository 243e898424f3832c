package engine

import (
	"context"
	"log/slog"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/browser/sessions"
	"github.com/airlockhq/airlock/internal/fleet"
	"github.com/airlockhq/airlock/internal/gate"
	"github.com/airlockhq/airlock/internal/store"
)

// DefaultFleetMaxStale is how long a replica keeps serving on the last
// revocation set it read from Redis: past it, every call is refused as
// unavailable until Redis answers again.
const DefaultFleetMaxStale = fleet.DefaultMaxStale

// FleetPinTTL is how long a fleet pins a DNS answer when egress.pin_dns
// is off: the bound of the resolver's cache.
const FleetPinTTL = fleet.PinTTL

// FallbackAuditEvery bounds the audit records of state.fallback_local.
const FallbackAuditEvery = fleet.FallbackAuditEvery

// browserOwners is the sessions manager's Owners: nil without a fleet.
func browserOwners(fl *fleet.Fleet, replica string, logger *slog.Logger) sessions.Owners {
	if fl == nil {
		return nil
	}
	return fl.SessionOwners(replica, logger)
}

// watchFleet follows the other replicas (fleet.Watch) under the
// engine's context, which Close cancels.
func (e *Engine) watchFleet() error {
	if e.fleet == nil {
		return nil
	}
	return e.fleet.Watch(e.ctx, &e.loops, fleet.Follow{Revs: e.revs, Stream: e.auditStream, Log: e.st, Observe: e.audit.Observe,
		Note: e.fallbackNote(), Logger: e.logger})
}

// fallbackNote notes fallbacks to local state: nil without
// state.fallback_local.
func (e *Engine) fallbackNote() func(string, error) {
	if !e.cfg.State.FallbackLocal {
		return nil
	}
	return e.fallbacks.Note
}

// recordFallback audits a fallback to local state (broker fleet, reason
// redis_fallback).
func (e *Engine) recordFallback(now time.Time, detail string) {
	if e.gate == nil {
		return
	}
	e.audit.Record(gate.Record{ID: e.gate.NewID(), Time: now, Tenant: e.cfg.DefaultTenant, Broker: "fleet",
		Outcome: gate.OutcomeError, Code: string(airlock.CodeUnavailable), Reason: string(airlock.ReasonRedisFallback), Target: e.fleet.String(),
		Detail: detail})
}

// Ready reports whether the engine can take calls: with shared state,
// whether Redis answers and the revocation set is fresh and not lost.
func (e *Engine) Ready(ctx context.Context) error {
	if e.fleet == nil {
		return nil
	}
	if err := e.fleet.Ping(ctx); err != nil {
		return err
	}
	if err := e.revs.Lost(); err != nil {
		return err
	}
	if e.revs.Stale() {
		return airlock.Errorf(airlock.CodeUnavailable, airlock.ReasonRevocationsStale, "the revocation set cannot be refreshed from Redis")
	}
	return nil
}

// fleetRevocations is the fleet's revocation set as this replica uses it:
// checked against the epoch the replica remembers in its data directory,
// and copied there (see fleet.ReplicaRevocations). A set found lost
// refuses every call, with or without state.fallback_local, until an
// operator restores it (RestoreRevocations).
func (e *Engine) fleetRevocations(fl *fleet.Fleet, logger *slog.Logger) store.Revocations {
	e.fleetRevs = fl.ReplicaRevocations(e.st, e.replica, logger)
	if err := e.fleetRevs.Register(e.registry); err != nil {
		logger.Error("revocation metrics not registered", slog.String("error", err.Error()))
	}
	return e.fleetRevs
}

// Revocation is one revoked subject, as `airlock admin revocations export`
// prints it and `restore --from` reads it.
type Revocation = fleet.Revocation

// RevocationList returns the current revocations with their reasons, by
// subject. While the shared set is lost it is the set as this process
// last knew it.
func (e *Engine) RevocationList() []Revocation { return fleet.FromStore(e.revs.List()) }

// LocalRevocationCopy returns the copy of the fleet's revocation set kept
// in this data directory by the replicas that ran on it, as of the last
// change they saw. Errors: not_found (revocation_copy) when no replica
// with state.redis_url ever ran on this data directory.
func (e *Engine) LocalRevocationCopy(ctx context.Context) ([]Revocation, error) {
	return fleet.ReadLocalCopy(ctx, e.st)
}

// RestoreRevocations writes list to Redis as the fleet's whole revocation
// set, under a new epoch that every replica adopts: the operator's answer
// to a set found lost (every call refused, revocations_stale), which then
// ends on every replica. Unless force, it refuses (invalid, not_lost) when
// this process does not find the set lost. Errors: invalid (redis_url)
// without shared state, invalid (principal) for a bad subject, unavailable
// (redis).
func (e *Engine) RestoreRevocations(ctx context.Context, list []Revocation, force bool) error {
	return e.fleetRevs.RestoreSet(ctx, list, force, e.revs, e.gate, e.replica, e.logger)
}
