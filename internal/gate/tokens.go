package gate

import (
	"context"
	"crypto/subtle"
	"strings"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/store"
)

// MinTokenIDDigits is the shortest hash prefix that names a stored token.
const MinTokenIDDigits = 12

// TokenID is the short name of a token hash: "sha256:" and the first
// MinTokenIDDigits hex digits.
func TokenID(hash string) string {
	return hash[:min(len(hash), len(store.TokenHashPrefix)+MinTokenIDDigits)]
}

// CheckAdminToken accepts token when its hash is one of hashes (the
// configured admin tokens). The lookup is by SHA-256 hash, so comparing
// never touches the token itself; the loop compares every hash in
// constant time. Errors: denied (token when empty, admin_token).
func CheckAdminToken(hashes []string, token string) error {
	if token == "" {
		return airlock.Errorf(airlock.CodeDenied, airlock.ReasonToken, "missing admin token")
	}
	h := []byte(store.HashToken(token))
	ok := 0
	for _, a := range hashes {
		ok |= subtle.ConstantTimeCompare(h, []byte(a))
	}
	if ok != 1 {
		return airlock.Errorf(airlock.CodeDenied, airlock.ReasonAdminToken, "not an admin token")
	}
	return nil
}

// CheckApproverToken checks an approver token against hashes
// (browser.approver_tokens) in constant time and returns how the audit log
// names it: "approver sha256:<first 12 hex>". Errors: denied
// (approver_token).
func CheckApproverToken(hashes []string, token string) (string, error) {
	h := store.HashToken(token)
	found := -1
	for i, a := range hashes {
		if subtle.ConstantTimeCompare([]byte(h), []byte(a)) == 1 {
			found = i
		}
	}
	if token == "" || found < 0 {
		return "", airlock.Errorf(airlock.CodeDenied, airlock.ReasonApproverToken, "not an approver token")
	}
	return "approver " + TokenID(h), nil
}

// FindToken finds the one stored token that id names among list's: its
// hash, a prefix of its hash of at least MinTokenIDDigits hex digits (with
// or without "sha256:"), or the token itself. Errors: not_found (no such
// token), invalid (a short or ambiguous prefix).
func FindToken(ctx context.Context, list func(context.Context, string) ([]store.Token, error), id string) (store.Token, error) {
	id = strings.TrimSpace(id)
	var prefix string
	if strings.HasPrefix(id, "alk_") {
		prefix = store.HashToken(id)
	} else {
		prefix = store.TokenHashPrefix + strings.ToLower(strings.TrimPrefix(id, store.TokenHashPrefix))
		if len(prefix) < len(store.TokenHashPrefix)+MinTokenIDDigits {
			return store.Token{}, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonToken, "token id %q is too short: give at least %d hex digits of the hash (airlock token list shows them)", id, MinTokenIDDigits)
		}
	}
	all, err := list(ctx, "")
	if err != nil {
		return store.Token{}, err
	}
	var found []store.Token
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
		return store.Token{}, airlock.Errorf(airlock.CodeNotFound, airlock.ReasonToken, "no stored API token matches %q (airlock token list shows them)", shown)
	case 1:
		return found[0], nil
	default:
		return store.Token{}, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonToken, "%q matches %d tokens: give more digits of the hash", id, len(found))
	}
}
