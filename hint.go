package airlock

import "errors"

// FloorHint is the way out of a floor denial for a person testing against
// their own services. A surface that may name the address replaces ADDR.
const FloorHint = "the address is below the egress floor; to reach your own service there, lift the floor for it with --except ADDR (or tenants.NAME.exceptions in the config)"

// hints say what to do next after the refusals people meet most, by reason.
var hints = map[string]string{
	"loopback":       FloorHint,
	"private":        FloorHint,
	"link_local":     FloorHint,
	"cgnat":          FloorHint,
	"metadata":       "cloud metadata addresses are never reachable, whatever the configuration",
	"not_allowed":    "an allow-list is in force and the target is not on it: add it with --allow PATTERN (or tenants.NAME.allow)",
	"deny_list":      "the target matches a deny pattern (--deny, tenants.NAME.deny or egress.deny)",
	"dns_not_found":  "the name does not resolve; --resolve HOST=IP answers it without DNS",
	"capability":     "the tenant's profile does not grant this capability; 'airlock config check' shows the tenant's profile",
	"revoked":        "lift the revocation with: airlock admin unrevoke SUBJECT ('airlock admin revocations' lists them)",
	"tenant_rate":    "the tenant's rate limit (limits.tenant_rate) was reached; wait and retry",
	"unknown_tenant": "configure the tenant under tenants in airlock.yaml, or use default_tenant",
	"token":          "create a token with: airlock token create --tenant NAME",
	"bot_wall":       "the site answered with a bot wall (captcha, challenge); try later or another provider with --provider",
}

// HintFor returns what to do next after a refusal with this reason, or ""
// when there is no advice for it.
func HintFor(reason string) string { return hints[reason] }

// HintOf returns what the caller can do about err, the same sentence on
// every surface (the CLI's "hint:" line, the "hint" of an API error body):
// the Hint of the outermost *Error in the chain that has one, else
// HintFor(ReasonOf(err)). It is "" for nil, for internal errors and for
// reasons without advice.
func HintOf(err error) string {
	if err == nil || CodeOf(err) == CodeInternal {
		return ""
	}
	for e := err; e != nil; {
		var ae *Error
		if !errors.As(e, &ae) {
			break
		}
		if ae.Hint != "" {
			return ae.Hint
		}
		e = ae.Err
	}
	return HintFor(ReasonOf(err))
}
