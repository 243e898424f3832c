package engine_test

import (
	"strings"
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/engine"
)

func TestListAndRevokeTokens(t *testing.T) {
	e := newEngine(t, engine.Config{})
	ctx := testCtx(t)
	if ts, err := e.ListTokens(ctx, ""); err != nil || len(ts) != 0 {
		t.Fatalf("ListTokens of a new store = %v, %v", ts, err)
	}
	var toks []string
	for _, label := range []string{"one", "two", "three"} {
		tok, err := e.CreateToken(ctx, airlock.LocalTenant, label)
		if err != nil {
			t.Fatal(err)
		}
		toks = append(toks, tok)
	}
	ts, err := e.ListTokens(ctx, airlock.LocalTenant)
	if err != nil || len(ts) != 3 {
		t.Fatalf("ListTokens = %d tokens, %v; want 3", len(ts), err)
	}
	for _, st := range ts {
		if strings.Contains(st.Hash, "alk_") || !strings.HasPrefix(st.ID(), "sha256:") || len(st.ID()) != len("sha256:")+12 {
			t.Errorf("listed token %+v (id %q)", st, st.ID())
		}
	}
	if ts, _ := e.ListTokens(ctx, "nobody"); len(ts) != 0 {
		t.Errorf("ListTokens(nobody) = %v", ts)
	}

	_, err = e.RevokeToken(ctx, "sha256:ab")
	wantCode(t, err, airlock.CodeInvalid, "token")
	_, err = e.RevokeToken(ctx, "sha256:"+strings.Repeat("0", 64))
	wantCode(t, err, airlock.CodeNotFound, "token")

	// By id (without "sha256:" too), and by the token itself.
	one := ts[0]
	for _, st := range ts {
		if st.Label == "one" {
			one = st
		}
	}
	got, err := e.RevokeToken(ctx, strings.TrimPrefix(one.ID(), "sha256:"))
	if err != nil || got.Hash != one.Hash || got.Hash != engine.HashToken(toks[0]) {
		t.Fatalf("RevokeToken(id) = %+v, %v", got, err)
	}
	if _, err := e.RevokeToken(ctx, toks[1]); err != nil {
		t.Fatalf("RevokeToken(token) = %v", err)
	}
	for i, tok := range toks {
		_, err := e.Authenticate(ctx, tok)
		if revoked := i < 2; revoked != (err != nil) {
			t.Errorf("token %d: Authenticate = %v", i, err)
		}
	}
	if ts, _ := e.ListTokens(ctx, ""); len(ts) != 1 {
		t.Errorf("after two revocations: %d tokens", len(ts))
	}
}
