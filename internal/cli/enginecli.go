package cli

import (
	"context"
	"os"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/engine"
)

// config loads the configuration and applies the global flags and, when
// given, the policy flags (which shape the global egress settings and the
// default tenant, so a person can try things without a config file).
func (e *env) config(pf *policyFlags) (fileConfig, string, error) {
	cfg, path, err := loadConfig(e.configPath, e.environ)
	if err != nil {
		return cfg, path, err
	}
	if e.dataDir != "" {
		cfg.DataDir = e.dataDir
	}
	if pf != nil {
		if err := pf.applyTo(&cfg.Config); err != nil {
			return cfg, path, err
		}
	}
	return cfg, path, nil
}

// openEngine starts an engine for one CLI verb. The caller closes it with
// closeEngine, which flushes the audit log.
func (e *env) openEngine(pf *policyFlags) (*engine.Engine, error) {
	cfg, _, err := e.config(pf)
	if err != nil {
		return nil, err
	}
	return engine.New(context.Background(), cfg.Config, e.engineOptions(cfg.Config)...)
}

// engineOptions are the options every engine (and Validate) of this
// invocation gets: where secrets and provider keys are read from, and the
// providers registry.
func (e *env) engineOptions(cfg engine.Config, opts ...engine.Option) []engine.Option {
	getenv := e.getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	return append([]engine.Option{engine.WithGetenv(getenv), engine.WithProviders(providers(cfg.Browse)...)}, opts...)
}

func closeEngine(en *engine.Engine) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return en.Close(ctx)
}

// withEngine runs f with an engine and closes it, keeping f's error first.
func (e *env) withEngine(pf *policyFlags, f func(*engine.Engine, airlock.Principal) error) error {
	en, err := e.openEngine(pf)
	if err != nil {
		return err
	}
	ferr := f(en, en.Principal())
	cerr := closeEngine(en)
	if ferr != nil {
		return ferr
	}
	return cerr
}
