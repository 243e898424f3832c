package gate

import (
	"context"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/store"
)

// AuditReader reads the persistent audit log.
type AuditReader interface {
	QueryAudit(ctx context.Context, q store.AuditQuery) ([]store.AuditRecord, error)
}

// QueryAudit reads the persistent audit log through r, newest first,
// under l, the ceilings of the tenant the query is about (nil: the
// defaults). An outcome other than allow, deny or error is invalid
// (reason audit_query).
func QueryAudit(ctx context.Context, r AuditReader, l *Limits, q airlock.AuditQuery) ([]airlock.AuditRecord, error) {
	if err := l.Check(q, ""); err != nil {
		return nil, err
	}
	switch q.Outcome {
	case "", OutcomeAllow, OutcomeDeny, OutcomeError:
	default:
		// A filter nothing can match would answer "no records", silently.
		return nil, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonAuditQuery,
			"audit: outcome %q is not one of %s, %s or %s", q.Outcome, OutcomeAllow, OutcomeDeny, OutcomeError)
	}
	sq := store.AuditQuery{Since: q.Since, Until: q.Until, Outcome: q.Outcome, Broker: q.Broker, Reason: q.Reason, Limit: q.Limit, BeforeID: q.BeforeID}
	if q.Principal != "" {
		p, err := airlock.ParsePrincipal(q.Principal)
		if err != nil {
			return nil, err
		}
		sq.Tenant, sq.Instance = p.Tenant, p.Instance
	}
	recs, err := r.QueryAudit(ctx, sq)
	if err != nil {
		return nil, err
	}
	return PublicRecords(recs), nil
}

// PublicRecords are recs in the root vocabulary.
func PublicRecords(recs []Record) []airlock.AuditRecord {
	out := make([]airlock.AuditRecord, len(recs))
	for i, r := range recs {
		out[i] = airlock.AuditRecord{ID: r.ID, Time: r.Time, Tenant: r.Tenant, Instance: r.Instance, Broker: r.Broker, Outcome: r.Outcome,
			Code: r.Code, Reason: r.Reason, Target: r.Target, Detail: r.Detail, DurationMS: r.DurationMS, BytesIn: r.BytesIn, BytesOut: r.BytesOut}
	}
	return out
}

// PublicStats are st in the root vocabulary.
func PublicStats(st []Stat) []airlock.AuditStat {
	out := make([]airlock.AuditStat, len(st))
	for i, s := range st {
		out[i] = airlock.AuditStat(s)
	}
	return out
}
