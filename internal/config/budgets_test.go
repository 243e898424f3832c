package config

import (
	"strings"
	"testing"
)

// TestConnectionBudgetFollowsDescriptorLimit: the default connection
// budget is the descriptor limit less the reserve when that is lower than
// DefaultBudgetConnections, a tenant's default share is half of it, and a
// configured total above it is a configuration error naming the key.
func TestConnectionBudgetFollowsDescriptorLimit(t *testing.T) {
	saved := descriptorLimit
	t.Cleanup(func() { descriptorLimit = saved })
	tests := []struct {
		name         string
		nofile       uint64
		known        bool
		wantTotal    int
		wantTenant   int
		configured   int
		wantErrorKey string
	}{
		{name: "large limit", nofile: 1 << 20, known: true, wantTotal: DefaultBudgetConnections, wantTenant: DefaultBudgetTenantConnections},
		{name: "20000", nofile: 20000, known: true, wantTotal: DefaultBudgetConnections, wantTenant: DefaultBudgetTenantConnections},
		{name: "1024", nofile: 1024, known: true, wantTotal: 512, wantTenant: 256},
		{name: "small", nofile: 200, known: true, wantTotal: 100, wantTenant: 50},
		{name: "unknown", known: false, wantTotal: DefaultBudgetConnections, wantTenant: DefaultBudgetTenantConnections},
		{name: "configured within", nofile: 1024, known: true, configured: 512, wantTotal: 512, wantTenant: 256},
		{name: "configured above", nofile: 1024, known: true, configured: 513, wantErrorKey: "budgets.connections 513"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			descriptorLimit = func() (uint64, bool) { return tt.nofile, tt.known }
			cfg := Config{InMemory: true, Budgets: BudgetsConfig{Connections: tt.configured}}
			err := check(Defaults(cfg))
			if tt.wantErrorKey != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErrorKey) {
					t.Fatalf("check: got %v, want an error naming %q", err, tt.wantErrorKey)
				}
				return
			}
			if err != nil {
				t.Fatalf("check: %v", err)
			}
			b := Defaults(cfg).Budgets
			if b.Connections != tt.wantTotal || b.Tenant.Connections != tt.wantTenant {
				t.Errorf("connections: got total %d, tenant %d; want %d, %d", b.Connections, b.Tenant.Connections, tt.wantTotal, tt.wantTenant)
			}
		})
	}
}
