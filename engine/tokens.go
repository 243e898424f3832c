package engine

import (
	"context"
	"errors"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/gate"
	"github.com/airlockhq/airlock/internal/store"
)

// StoredToken is an API token made by CreateToken, as the store keeps it:
// its hash, never the token.
type StoredToken struct {
	Hash    string    `json:"hash"` // "sha256:<64 hex>"
	Tenant  string    `json:"tenant"`
	Label   string    `json:"label"`
	Created time.Time `json:"created"`
}

// ID is the short name of the token that RevokeToken accepts: "sha256:"
// and the first 12 hex digits of its hash.
func (t StoredToken) ID() string { return gate.TokenID(t.Hash) }

// ListTokens returns the API tokens made by CreateToken for tenant (""
// for every tenant), oldest first. Tokens listed in the configuration
// (tenants.*.tokens) are not in the store and not listed.
func (e *Engine) ListTokens(ctx context.Context, tenant string) ([]StoredToken, error) {
	ts, err := e.st.ListTokens(ctx, tenant)
	if err != nil {
		return nil, err
	}
	out := make([]StoredToken, 0, len(ts))
	for _, t := range ts {
		out = append(out, StoredToken{Hash: t.Hash, Tenant: t.Tenant, Label: t.Label, Created: t.Created})
	}
	return out, nil
}

// RevokeToken deletes a token made by CreateToken, named by its hash, a
// prefix of its hash of at least 12 hex digits (with or without
// "sha256:"), or the token itself. The next call with it is denied, in
// every process sharing the data directory. The revocation is audited.
// Errors: not_found (no such token), invalid (a short or ambiguous
// prefix).
func (e *Engine) RevokeToken(ctx context.Context, id string) (StoredToken, error) {
	t, err := e.findToken(ctx, id)
	if err == nil {
		err = e.st.DeleteToken(ctx, t.Hash)
		if errors.Is(err, store.ErrNotFound) {
			err = airlock.Errorf(airlock.CodeNotFound, airlock.ReasonToken, "no stored API token %s", t.ID())
		}
	}
	subject := t.ID()
	if subject == "" {
		subject = "token"
	} else {
		subject = t.Tenant + " " + subject
	}
	e.gate.RecordAdmin("token_revoke", subject, err)
	return t, err
}

func (e *Engine) findToken(ctx context.Context, id string) (StoredToken, error) {
	t, err := gate.FindToken(ctx, e.st.ListTokens, id)
	return StoredToken{Hash: t.Hash, Tenant: t.Tenant, Label: t.Label, Created: t.Created}, err
}
