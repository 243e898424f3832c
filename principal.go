package airlock

import (
	"context"
	"strings"
)

// LocalTenant is the tenant of a person at their own terminal: the CLI
// verbs, `airlock mcp` and the development tenant of `airlock serve` run as
// principal "local" when no configuration names another.
const LocalTenant = "local"

// Principal is who a call is made for: a tenant, and optionally an instance
// under it (a browser session, a guest, an MCP connection). Revoking a
// tenant revokes all of its instances. The zero Principal is invalid.
type Principal struct {
	Tenant   string `json:"tenant"`
	Instance string `json:"instance,omitempty"`
}

// String returns "tenant" or "tenant/instance".
func (p Principal) String() string {
	if p.Instance == "" {
		return p.Tenant
	}
	return p.Tenant + "/" + p.Instance
}

// ParsePrincipal parses "tenant" or "tenant/instance".
func ParsePrincipal(s string) (Principal, error) {
	t, i, _ := strings.Cut(s, "/")
	p := Principal{Tenant: t, Instance: i}
	if !validName(t) || (i != "" && !validName(i)) || strings.Count(s, "/") > 1 {
		return Principal{}, Errorf(CodeInvalid, ReasonPrincipal, "airlock: bad principal %q: want tenant or tenant/instance of letters, digits, '-', '_', '.'", s)
	}
	return p, nil
}

// Valid reports whether p names a tenant (and a well-formed instance).
func (p Principal) Valid() bool {
	return validName(p.Tenant) && (p.Instance == "" || validName(p.Instance))
}

func validName(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' || c == ':') {
			return false
		}
	}
	return true
}

type principalKey struct{}

// ContextWithPrincipal returns a context that carries p: the gate puts the
// caller's principal on every call's context, so that a provider (which
// gets that context) knows whom it works for.
func ContextWithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalFromContext returns the principal ctx carries, if any.
func PrincipalFromContext(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok
}
