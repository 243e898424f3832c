package engine

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/airlockhq/airlock"
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
func (t StoredToken) ID() string {
	return t.Hash[:min(len(t.Hash), len(store.TokenHashPrefix)+minTokenIDDigits)]
}

// minTokenIDDigits is the shortest hash prefix RevokeToken accepts.
const minTokenIDDigits = 12

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
	id = strings.TrimSpace(id)
	var prefix string
	if strings.HasPrefix(id, "alk_") {
		prefix = store.HashToken(id)
	} else {
		prefix = store.TokenHashPrefix + strings.ToLower(strings.TrimPrefix(id, store.TokenHashPrefix))
		if len(prefix) < len(store.TokenHashPrefix)+minTokenIDDigits {
			return StoredToken{}, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonToken, "token id %q is too short: give at least %d hex digits of the hash (airlock token list shows them)", id, minTokenIDDigits)
		}
	}
	all, err := e.ListTokens(ctx, "")
	if err != nil {
		return StoredToken{}, err
	}
	var found []StoredToken
	for _, t := range all {
		if strings.HasPrefix(t.Hash, prefix) {
			found = append(found, t)
		}
	}
	switch len(found) {
	case 0:
		shown := id
		if strings.HasPrefix(id, "alk_") {
			shown = "the given token"
		}
		return StoredToken{}, airlock.Errorf(airlock.CodeNotFound, airlock.ReasonToken, "no stored API token matches %q (airlock token list shows them)", shown)
	case 1:
		return found[0], nil
	default:
		return StoredToken{}, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonToken, "%q matches %d tokens: give more digits of the hash", id, len(found))
	}
}
