package sessions

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/egress"
	"github.com/airlockhq/airlock/internal/config"
	"github.com/airlockhq/airlock/internal/gate"
)

// Gate is what a manager built by OnGate takes from its owner's gate.
type Gate struct {
	Gate    *gate.Gate
	Audit   *gate.Auditor
	Revs    *gate.RevocationSet
	Budgets *gate.Budgets
	// Narrow compiles a request's narrowing (browse.Narrowing).
	Narrow func(*airlock.Narrowing) (*egress.Checker, error)
}

// OnGate builds the manager that cfg's browser section configures, each
// of g's parts handed over as the narrow dependency Deps declares: a
// tenant's dialer, the revocation check, the audit record with a fresh
// decision id, the browser-sessions and connections budgets.
func OnGate(ctx context.Context, cfg config.Config, g Gate, owners Owners, logger *slog.Logger) *Manager {
	bc := cfg.Browser.WithDefaults()
	sc := Config{ExecPath: bc.ExecPath, MaxSessions: bc.MaxSessions, IdleTimeout: bc.IdleTimeout,
		OpTimeout: bc.OpTimeout, AskTimeout: bc.AskTimeout, Policy: bc.Policy, ProxyHeaderTimeout: cfg.Egress.FetchTimeout,
		// In-memory engines, whose roots are temporary, record their
		// browsers in one directory per user.
		RuntimeDir: filepath.Join(os.TempDir(), fmt.Sprintf("airlock-browser-run-%d", os.Geteuid()))}
	if !cfg.InMemory {
		sc.Dir = filepath.Join(cfg.DataDir, "browser")
		sc.RuntimeDir = filepath.Join(sc.Dir, "run")
	}
	return New(ctx, sc, Deps{
		Dialer: func(tenant string) *egress.Dialer {
			if t := g.Gate.Tenant(tenant); t != nil {
				return t.Dialer
			}
			return nil
		},
		Narrow:  g.Narrow,
		Revoked: g.Revs.Revoked,
		Audit: func(r gate.Record) {
			r.ID = g.Gate.NewID()
			g.Audit.Record(r)
		},
		AcquireSession: func(ctx context.Context, tenant string, wait bool) (func(), error) {
			if wait {
				return g.Budgets.Acquire(ctx, gate.BudgetBrowsers, tenant, 1)
			}
			return g.Budgets.TryAcquire(ctx, gate.BudgetBrowsers, tenant, 1)
		},
		OnConnectionsFull: func(tenant string, f func()) { g.Budgets.OnFull(gate.BudgetConnections, tenant, f) },
		Owners:            owners,
		Logger:            logger,
	})
}
