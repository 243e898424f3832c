package engine_test

import (
	"strings"
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/engine"
)

func TestAuthenticateAdmin(t *testing.T) {
	admin := engine.NewToken()
	other := engine.NewToken()
	if admin == other || !strings.HasPrefix(admin, "alk_") {
		t.Fatalf("NewToken gave %q and %q", admin, other)
	}
	e := newEngine(t, engine.Config{AdminTokens: []string{engine.HashToken(admin)}})
	ctx := testCtx(t)
	if err := e.AuthenticateAdmin(ctx, admin); err != nil {
		t.Fatalf("AuthenticateAdmin(admin) = %v", err)
	}
	wantCode(t, e.AuthenticateAdmin(ctx, other), airlock.CodeDenied, "admin_token")
	wantCode(t, e.AuthenticateAdmin(ctx, ""), airlock.CodeDenied, "token")
	// A tenant token is not an admin token.
	tok, err := e.CreateToken(ctx, airlock.LocalTenant, "t")
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, e.AuthenticateAdmin(ctx, tok), airlock.CodeDenied, "admin_token")
	// And an engine without admin tokens has no admin.
	e2 := newEngine(t, engine.Config{})
	wantCode(t, e2.AuthenticateAdmin(ctx, admin), airlock.CodeDenied, "admin_token")
}

func TestAdminTokensValidated(t *testing.T) {
	for _, bad := range []string{"plain-token", "sha256:xyz"} {
		err := engine.Validate(engine.Config{AdminTokens: []string{bad}})
		if err == nil || strings.Contains(err.Error(), "plain-token") {
			t.Errorf("Validate(admin_tokens %q) = %v, want a config error that does not echo the token", bad, err)
		}
	}
	h := engine.HashToken("x")
	err := engine.Validate(engine.Config{AdminTokens: []string{h}, Tenants: map[string]engine.TenantConfig{"local": {Tokens: []string{h}}}})
	if err == nil {
		t.Error("Validate accepted one hash as both an admin and a tenant token")
	}
}
