package cli

import (
	"github.com/spf13/cobra"

	"github.com/airlockhq/airlock/engine"
)

// browserFlags shape the browser's origin policy (browser.policy) from the
// command line, so a person can let an agent's browser reach a page
// without writing a config file: airlock mcp, airlock serve (development
// mode only) and airlock browser run take them.
type browserFlags struct {
	allowOrigins  []string
	denyOrigins   []string
	defaultAction string
	// devOnly refuses the flags when tenants are configured (airlock
	// serve: they shape the development tenant, not a configured fleet).
	devOnly bool
}

func (b *browserFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringArrayVar(&b.allowOrigins, "allow-origin", nil, "let the browser load this origin: scheme://host[:port], a host name or *.suffix (repeatable; browser.policy.allowed_origins)")
	f.StringArrayVar(&b.denyOrigins, "deny-origin", nil, "never let the browser load this origin, same forms (repeatable; deny wins; browser.policy.denied_origins)")
	f.StringVar(&b.defaultAction, "browser-default", "", "what the browser does with an origin no list names: deny, allow or ask (browser.policy.default_action; default deny)")
}

func (b *browserFlags) set() bool {
	return len(b.allowOrigins)+len(b.denyOrigins) > 0 || b.defaultAction != ""
}

// applyTo folds the flags into cfg.Browser.Policy. dev says whether cfg
// configures no tenant.
func (b *browserFlags) applyTo(cfg *engine.Config, dev bool) error {
	if !b.set() {
		return nil
	}
	if b.devOnly && !dev {
		return usageErrorf("--allow-origin, --deny-origin and --browser-default shape the development tenant only; with tenants configured, set browser.policy in the configuration")
	}
	pol := &cfg.Browser.Policy
	pol.AllowedOrigins = append(pol.AllowedOrigins, b.allowOrigins...)
	pol.DeniedOrigins = append(pol.DeniedOrigins, b.denyOrigins...)
	if b.defaultAction != "" {
		pol.DefaultAction = b.defaultAction
	}
	if err := pol.Validate(); err != nil {
		return usageErrorf("%v", err)
	}
	return nil
}
