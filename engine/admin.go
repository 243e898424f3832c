package engine

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/gate"
	"github.com/airlockhq/airlock/internal/store"
)

// Authenticate maps an API token to its tenant's principal: tokens listed
// (as hashes) in the configuration, or created with CreateToken.
func (e *Engine) Authenticate(ctx context.Context, token string) (airlock.Principal, error) {
	if token == "" {
		return airlock.Principal{}, airlock.Errorf(airlock.CodeDenied, airlock.ReasonToken, "missing token")
	}
	h := store.HashToken(token)
	if t, ok := e.tokens[h]; ok {
		return airlock.Principal{Tenant: t}, nil
	}
	tok, err := e.st.LookupToken(ctx, h)
	if err == nil && e.gate.Tenant(tok.Tenant) != nil {
		return airlock.Principal{Tenant: tok.Tenant}, nil
	}
	return airlock.Principal{}, airlock.Errorf(airlock.CodeDenied, airlock.ReasonToken, "unknown token")
}

// AuthenticateAdmin accepts token when its hash is one of the configured
// admin tokens, compared in constant time.
func (e *Engine) AuthenticateAdmin(ctx context.Context, token string) error {
	return gate.CheckAdminToken(e.cfg.AdminTokens, token)
}

// AuthenticateApprover checks an approver token (browser.approver_tokens)
// and returns how the audit log names it: "approver sha256:<first 12
// hex>". Errors: denied (approver_token).
func (e *Engine) AuthenticateApprover(token string) (string, error) {
	return gate.CheckApproverToken(e.cfg.Browser.ApproverTokens, token)
}

// HashToken is the form tokens are configured and stored in: "sha256:<hex>".
func HashToken(token string) string { return store.HashToken(token) }

// NewToken returns a fresh random API token ("alk_" and 256 random bits).
func NewToken() string {
	var b [32]byte
	rand.Read(b[:])
	return "alk_" + base64.RawURLEncoding.EncodeToString(b[:])
}

// CreateToken makes a new API token for tenant, stores only its hash, and
// returns the token (shown once).
func (e *Engine) CreateToken(ctx context.Context, tenant, label string) (string, error) {
	if e.gate.Tenant(tenant) == nil {
		return "", airlock.Errorf(airlock.CodeNotFound, airlock.ReasonTenant, "unknown tenant %q", tenant)
	}
	tok := NewToken()
	err := e.st.AddToken(ctx, store.Token{Hash: store.HashToken(tok), Tenant: tenant, Label: label, Created: time.Now()})
	e.gate.RecordAdmin("token_create", tenant, err)
	if err != nil {
		return "", err
	}
	return tok, nil
}

// Revoke revokes a principal ("tenant/instance") or a whole tenant: its
// next broker call fails with revoked, and its calls in flight are
// cancelled. Every process sharing the data directory sees it within a
// second.
func (e *Engine) Revoke(ctx context.Context, subject, reason string) error {
	if err := gate.CheckSubject(subject); err != nil {
		return err
	}
	err := e.revs.Revoke(ctx, subject, reason)
	e.gate.RecordAdmin("revoke", subject, err)
	return err
}

// Unrevoke lifts a revocation.
func (e *Engine) Unrevoke(ctx context.Context, subject string) error {
	if err := gate.CheckSubject(subject); err != nil {
		return err
	}
	err := e.revs.Unrevoke(ctx, subject)
	if errors.Is(err, store.ErrNotFound) {
		err = airlock.Errorf(airlock.CodeNotFound, airlock.ReasonRevocation, "%s is not revoked", subject)
	}
	e.gate.RecordAdmin("unrevoke", subject, err)
	return err
}

// Revocations lists the current revocations.
func (e *Engine) Revocations() []string {
	var out []string
	for _, r := range e.revs.List() {
		out = append(out, r.Subject)
	}
	slices.Sort(out)
	return out
}

// AuditQuery reads the persistent audit log, newest first. An outcome
// other than allow, deny or error is invalid (reason audit_query).
func (e *Engine) AuditQuery(ctx context.Context, q airlock.AuditQuery) ([]airlock.AuditRecord, error) {
	tenant := e.cfg.DefaultTenant
	if p, err := airlock.ParsePrincipal(q.Principal); err == nil && q.Principal != "" {
		tenant = p.Tenant
	}
	return gate.QueryAudit(ctx, e.st, e.gate.Limits(tenant), q)
}

// AuditStats counts persisted decisions since a time by broker, outcome and
// reason, for one tenant or ("") every tenant.
func (e *Engine) AuditStats(ctx context.Context, since time.Time, tenant string) ([]airlock.AuditStat, error) {
	st, err := e.st.AuditStats(ctx, since, tenant)
	if err != nil {
		return nil, err
	}
	return gate.PublicStats(st), nil
}

// RecentDenials returns the deny ring (the last 128 denials, strings cut to
// 512 bytes), engine-wide or for one principal.
func (e *Engine) RecentDenials(principal string, n int) []airlock.AuditRecord {
	return gate.PublicRecords(e.audit.Recent(principal, n))
}

// Counters returns this process's decision counters since start.
func (e *Engine) Counters() []airlock.AuditStat { return gate.PublicStats(e.audit.Stats()) }

// FlushAudit waits until every decision made so far is in the persistent
// log.
func (e *Engine) FlushAudit(ctx context.Context) error { return e.audit.Flush(ctx) }

// Metrics serves the Prometheus metrics of this engine.
func (e *Engine) Metrics() http.Handler {
	return promhttp.HandlerFor(e.registry, promhttp.HandlerOpts{})
}

// Registry returns the Prometheus registry, for surfaces that add their own
// metrics.
func (e *Engine) Registry() *prometheus.Registry { return e.registry }
