package config

import (
	"time"

	"github.com/airlockhq/airlock/internal/gate"
)

// descriptorLimit is the process's descriptor limit (a variable for tests).
var descriptorLimit = gate.DescriptorLimit

// connectionCeiling is the most upstream connections the process may
// budget: its descriptor limit less the reserve (0: no known limit).
func connectionCeiling() int {
	n, ok := descriptorLimit()
	if !ok || n == 0 || n > 1<<30 {
		return 0
	}
	reserve := min(uint64(DescriptorReserve), n/2)
	return int(n - reserve)
}

func budgetDefaults(b BudgetsConfig) BudgetsConfig {
	if b.Connections == 0 {
		b.Connections = DefaultBudgetConnections
		if c := connectionCeiling(); c > 0 {
			b.Connections = min(b.Connections, c)
		}
	}
	orDefault(&b.Crawls, DefaultBudgetCrawls)
	orDefault(&b.BrowserSessions, DefaultBudgetBrowserSessions)
	orDefault(&b.ExtractBytes, DefaultBudgetExtractBytes)
	orDefault(&b.ExtractFactor, DefaultExtractFactor)
	orDefault(&b.Wait, DefaultBudgetWait)
	orDefault(&b.Queue, DefaultBudgetQueue)
	t := &b.Tenant
	orDefault(&t.Connections, max(1, min(DefaultBudgetTenantConnections, b.Connections/2)))
	orDefault(&t.BytesInFlight, DefaultBudgetTenantBytesInFlight)
	orDefault(&t.Crawls, min(DefaultBudgetTenantCrawls, b.Crawls))
	orDefault(&t.BrowserSessions, min(DefaultBudgetTenantBrowserSessions, b.BrowserSessions))
	return b
}

// orDefault sets *v to d when it is zero (a negative value is left for
// validation to refuse).
func orDefault[T int | int64 | float64 | time.Duration](v *T, d T) {
	if *v == 0 {
		*v = d
	}
}

// share is a tenant's share: its override where set, else the default.
func (b BudgetsConfig) share(tc TenantConfig) TenantBudgets {
	s := b.Tenant
	o := tc.Budgets
	if o.Connections > 0 {
		s.Connections = o.Connections
	}
	if o.BytesInFlight > 0 {
		s.BytesInFlight = o.BytesInFlight
	}
	if o.Crawls > 0 {
		s.Crawls = o.Crawls
	}
	if o.BrowserSessions > 0 {
		s.BrowserSessions = o.BrowserSessions
	}
	return s
}

// validate checks cfg.Budgets after defaults.
func validateBudgets(cfg Config) error {
	b := cfg.Budgets
	if b.Connections < 0 || b.Crawls < 0 || b.BrowserSessions < 0 || b.ExtractBytes < 0 || b.ExtractFactor < 0 || b.Wait < 0 || b.Queue < 0 {
		return configErr("budgets: values must not be negative")
	}
	if c := connectionCeiling(); c > 0 && b.Connections > c {
		n, _ := descriptorLimit()
		return configErr("budgets.connections %d is above what the descriptor limit allows: %d (RLIMIT_NOFILE %d less %d for the listener, the store and children); lower it or raise the limit (ulimit -n)",
			b.Connections, c, n, n-uint64(c))
	}
	check := func(where string, t TenantBudgets) error {
		switch {
		case t.Connections < 0 || t.BytesInFlight < 0 || t.Crawls < 0 || t.BrowserSessions < 0:
			return configErr("%s: values must not be negative", where)
		case t.Connections > b.Connections:
			return configErr("%s.connections %d is above budgets.connections %d", where, t.Connections, b.Connections)
		case t.Crawls > b.Crawls:
			return configErr("%s.crawls %d is above budgets.crawls %d", where, t.Crawls, b.Crawls)
		case t.BrowserSessions > b.BrowserSessions:
			return configErr("%s.browser_sessions %d is above budgets.browser_sessions %d", where, t.BrowserSessions, b.BrowserSessions)
		}
		return nil
	}
	if err := check("budgets.tenant", b.Tenant); err != nil {
		return err
	}
	for name, tc := range cfg.Tenants {
		if err := check("tenants."+name+".budgets", tc.Budgets); err != nil {
			return err
		}
	}
	return nil
}

// budgetLimits compiles the budgets of cfg (after defaults) for its
// tenants.
func budgetLimits(cfg Config) gate.BudgetsConfig {
	b := cfg.Budgets
	limits := map[string]gate.BudgetLimit{
		gate.BudgetConnections: {Process: int64(b.Connections), Tenants: map[string]int64{}},
		gate.BudgetBytes:       {Tenants: map[string]int64{}},
		gate.BudgetCrawls:      {Process: int64(b.Crawls), Tenants: map[string]int64{}},
		gate.BudgetBrowsers:    {Process: int64(b.BrowserSessions), Tenants: map[string]int64{}},
		gate.BudgetExtract:     {Process: b.ExtractBytes},
	}
	for name, tc := range cfg.Tenants {
		s := b.share(tc)
		limits[gate.BudgetConnections].Tenants[name] = int64(s.Connections)
		limits[gate.BudgetBytes].Tenants[name] = s.BytesInFlight
		limits[gate.BudgetCrawls].Tenants[name] = int64(s.Crawls)
		limits[gate.BudgetBrowsers].Tenants[name] = int64(s.BrowserSessions)
	}
	return gate.BudgetsConfig{Limits: limits, Wait: b.Wait, Queue: b.Queue}
}
