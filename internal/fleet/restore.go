package fleet

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/gate"
	"github.com/airlockhq/airlock/internal/store"
)

// Revocation is one revoked subject, as `airlock admin revocations export`
// prints it and `restore --from` reads it.
type Revocation struct {
	Subject string    `json:"subject"`
	Reason  string    `json:"reason,omitempty"`
	Created time.Time `json:"created,omitzero"`
}

// FromStore returns list by subject.
func FromStore(list []store.Revocation) []Revocation {
	out := make([]Revocation, 0, len(list))
	for _, r := range list {
		out = append(out, Revocation{Subject: r.Subject, Reason: r.Reason, Created: r.Created})
	}
	slices.SortFunc(out, func(a, b Revocation) int { return strings.Compare(a.Subject, b.Subject) })
	return out
}

// ReadLocalCopy returns the copy of the fleet's revocation set kept in
// local by the replicas that ran on it. Errors: not_found
// (revocation_copy) when no replica with state.redis_url ever ran on it,
// unavailable (store).
func ReadLocalCopy(ctx context.Context, local LocalCopy) ([]Revocation, error) {
	mark, err := local.RevocationMark(ctx)
	if err != nil {
		return nil, airlock.Errorf(airlock.CodeUnavailable, airlock.ReasonStore, "read the revocation copy: %v", err)
	}
	if mark.Epoch == 0 {
		return nil, airlock.Errorf(airlock.CodeNotFound, airlock.ReasonRevocationCopy,
			"this data directory holds no copy of a fleet's revocation set (no replica with state.redis_url ran on it): restore from a file (--from)")
	}
	list, err := local.ListRevocations(ctx)
	if err != nil {
		return nil, airlock.Errorf(airlock.CodeUnavailable, airlock.ReasonStore, "read the revocation copy: %v", err)
	}
	return FromStore(list), nil
}

// RestoreSet writes list to Redis as the fleet's whole revocation set
// (Restore), audited through g as by (the replica's name), then reloads
// revs. Unless force, it refuses (invalid, not_lost) when revs does not
// find the set lost. g nil (no shared state) is invalid (redis_url); a bad
// subject is invalid (principal).
func (g *ReplicaRevocations) RestoreSet(ctx context.Context, list []Revocation, force bool, revs *gate.RevocationSet, gt *gate.Gate, by string, logger *slog.Logger) error {
	if g == nil {
		return airlock.Errorf(airlock.CodeInvalid, airlock.ReasonRedisURL, "revocations restore: no shared state is configured (state.redis_url): there is nothing to restore")
	}
	recs := make([]store.Revocation, 0, len(list))
	for _, r := range list {
		if err := gate.CheckSubject(r.Subject); err != nil {
			return err
		}
		recs = append(recs, store.Revocation{Subject: r.Subject, Reason: r.Reason, Created: r.Created})
	}
	if !force && revs.Lost() == nil {
		return airlock.Errorf(airlock.CodeInvalid, airlock.ReasonNotLost,
			"revocations restore: the shared revocation set is not lost as this process sees it; --force replaces it anyway")
	}
	err := g.Restore(ctx, recs, "airlock admin on "+by)
	gt.RecordAdmin("revocations_restore", fmt.Sprintf("%d subjects", len(recs)), err)
	if err != nil {
		return err
	}
	if err := revs.Refresh(ctx); err != nil {
		logger.Warn("revocations restored; reloading them here failed (the next poll retries)", slog.String("error", err.Error()))
	}
	return nil
}
