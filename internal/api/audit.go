package api

import (
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/airlockhq/airlock"
)

// Audit paging.
const (
	// DefaultAuditLimit records a page; the most is the engine's
	// limits.audit_records, above which a query is refused.
	DefaultAuditLimit = 100
	// DefaultStatsWindow is how far back GET /api/audit/stats counts
	// without a since parameter.
	DefaultStatsWindow = 24 * time.Hour
)

// auditResponse is the answer of GET /api/audit, newest first.
// NextBeforeID, when set, is the before_id of the next (older) page.
type auditResponse struct {
	Records      []airlock.AuditRecord `json:"records"`
	NextBeforeID string                `json:"next_before_id,omitempty"`
}

// statsResponse is the answer of GET /api/audit/stats.
type statsResponse struct {
	Since time.Time           `json:"since"`
	Stats []airlock.AuditStat `json:"stats"`
}

// queryParams reads r's query, refusing parameters outside allowed and
// repeated ones.
func queryParams(r *http.Request, allowed ...string) (url.Values, error) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonQuery, "query string: %v", err)
	}
	for k, vs := range q {
		if !slices.Contains(allowed, k) {
			return nil, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonQuery, "unknown query parameter %q (known: %v)", k, allowed)
		}
		if len(vs) > 1 {
			return nil, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonQuery, "query parameter %q given %d times", k, len(vs))
		}
	}
	return q, nil
}

func timeParam(q url.Values, name string) (time.Time, error) {
	v := q.Get(name)
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonQuery, "%s=%q: want an RFC 3339 time such as 2026-01-02T15:04:05Z", name, v)
	}
	return t, nil
}

// intParam reads a non-negative integer parameter; def when absent.
func intParam(q url.Values, name string, def int) (int, error) {
	v := q.Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonQuery, "%s=%q: want a non-negative integer", name, v)
	}
	return n, nil
}

// scopePrincipal returns the principal filter a caller may use: the admin
// any; a tenant only itself or its own instances (its whole tenant when
// none is asked for).
func scopePrincipal(c caller, asked string) (string, error) {
	if c.admin {
		if asked != "" {
			if _, err := airlock.ParsePrincipal(asked); err != nil {
				return "", err
			}
		}
		return asked, nil
	}
	if asked == "" {
		return c.principal.Tenant, nil
	}
	p, err := airlock.ParsePrincipal(asked)
	if err != nil {
		return "", err
	}
	if p.Tenant != c.principal.Tenant {
		return "", airlock.Errorf(airlock.CodeDenied, airlock.ReasonTenant, "tenant %s may read only its own audit records", c.principal.Tenant)
	}
	return asked, nil
}

// audit serves GET /api/audit. It flushes the audit pipeline first, so a
// caller sees the decisions of the calls it has just made.
func (s *server) audit(w http.ResponseWriter, r *http.Request, c caller) error {
	q, err := queryParams(r, "since", "until", "principal", "outcome", "broker", "reason", "limit", "before_id")
	if err != nil {
		return err
	}
	aq := airlock.AuditQuery{Outcome: q.Get("outcome"), Broker: q.Get("broker"), Reason: q.Get("reason"), BeforeID: q.Get("before_id")}
	if aq.Since, err = timeParam(q, "since"); err != nil {
		return err
	}
	if aq.Until, err = timeParam(q, "until"); err != nil {
		return err
	}
	if aq.Limit, err = intParam(q, "limit", DefaultAuditLimit); err != nil {
		return err
	}
	if aq.Limit == 0 {
		aq.Limit = DefaultAuditLimit
	}
	if aq.Principal, err = scopePrincipal(c, q.Get("principal")); err != nil {
		return err
	}
	s.flushAudit(r)
	recs, err := s.en.AuditQuery(r.Context(), aq)
	if err != nil {
		return err
	}
	resp := auditResponse{Records: recs}
	if resp.Records == nil {
		resp.Records = []airlock.AuditRecord{}
	}
	if len(recs) == aq.Limit {
		resp.NextBeforeID = recs[len(recs)-1].ID
	}
	writeJSON(w, http.StatusOK, resp)
	return nil
}

// flushAudit writes the decisions made so far to the audit log, so that a
// caller reads the records of the calls it has just made. It is best
// effort: when it fails (an engine closing), the query still answers with
// what is stored.
func (s *server) flushAudit(r *http.Request) {
	if err := s.en.FlushAudit(r.Context()); err != nil && r.Context().Err() == nil {
		s.log.Warn("flush the audit log before a query", slog.String("error", err.Error()))
	}
}

// auditStats serves GET /api/audit/stats: decisions since a time (default
// the last DefaultStatsWindow) by broker, outcome and reason; engine-wide
// for the admin, the caller's own for a tenant.
func (s *server) auditStats(w http.ResponseWriter, r *http.Request, c caller) error {
	q, err := queryParams(r, "since")
	if err != nil {
		return err
	}
	since, err := timeParam(q, "since")
	if err != nil {
		return err
	}
	if since.IsZero() {
		since = time.Now().Add(-DefaultStatsWindow).UTC()
	}
	s.flushAudit(r)
	resp := statsResponse{Since: since}
	tenant := c.principal.Tenant
	if c.admin {
		tenant = "" // engine-wide
	}
	resp.Stats, err = s.en.AuditStats(r.Context(), since, tenant)
	if err != nil {
		return err
	}
	if resp.Stats == nil {
		resp.Stats = []airlock.AuditStat{}
	}
	writeJSON(w, http.StatusOK, resp)
	return nil
}

// revokeRequest is the body of POST /api/admin/revoke and (without
// reason) /api/admin/unrevoke.
type revokeRequest struct {
	Subject string `json:"subject"`
	Reason  string `json:"reason,omitempty"`
}

type unrevokeRequest struct {
	Subject string `json:"subject"`
}

// revocationResponse confirms a revocation change.
type revocationResponse struct {
	Subject string `json:"subject"`
	Revoked bool   `json:"revoked"`
}

func (s *server) revoke(w http.ResponseWriter, r *http.Request, _ caller) error {
	var req revokeRequest
	if err := decodeJSON(r, &req); err != nil {
		return err
	}
	if err := s.en.Revoke(r.Context(), req.Subject, req.Reason); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, revocationResponse{Subject: req.Subject, Revoked: true})
	return nil
}

func (s *server) unrevoke(w http.ResponseWriter, r *http.Request, _ caller) error {
	var req unrevokeRequest
	if err := decodeJSON(r, &req); err != nil {
		return err
	}
	if err := s.en.Unrevoke(r.Context(), req.Subject); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, revocationResponse{Subject: req.Subject, Revoked: false})
	return nil
}
