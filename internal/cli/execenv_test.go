package cli

import (
	"slices"
	"strings"
	"testing"

	"github.com/airlockhq/airlock/engine"
)

func TestExecCommandEnv(t *testing.T) {
	cfg := engine.Config{
		Routes: map[string]engine.RouteConfig{"r": {ValueEnv: "HOME", ValueFile: ""}, "f": {ValueFile: "/etc/route.key"}},
		Tenants: map[string]engine.TenantConfig{"t": {Secrets: map[string]engine.SecretRef{
			"k": {Env: "SIGNING_KEY"}, "g": {File: "rel/tenant.key"}}}},
	}
	vars, files := secretSources(&cfg)
	slices.Sort(files)
	if !slices.Equal(files, []string{"/etc/route.key", "rel/tenant.key"}) {
		t.Errorf("secret files %q", files)
	}
	for _, v := range []string{"HOME", "SIGNING_KEY", "BRAVE_SEARCH_API_KEY", "FIRECRAWL_API_KEY", "DATAFORSEO_AUTH", "SEARXNG_URL"} {
		if _, ok := vars[v]; !ok {
			t.Errorf("%s is not a secret source", v)
		}
	}
	environ := []string{"PATH=/bin", "HOME=/root", "LC_CTYPE=C", "OTHER=o", "SIGNING_KEY=s", "DUP=1", "DUP=2"}
	tests := []struct {
		flags   []string
		want    []string
		wantErr string
	}{
		// HOME is a route's value_env here: even the allowlist drops it.
		{nil, []string{"PATH=/bin", "LC_CTYPE=C"}, ""},
		{[]string{"OTHER", "NEW=n", "UNSET_HERE", "DUP", "PATH=/x"}, []string{"PATH=/x", "LC_CTYPE=C", "OTHER=o", "NEW=n", "DUP=2"}, ""},
		{[]string{"EMPTY="}, []string{"PATH=/bin", "LC_CTYPE=C", "EMPTY="}, ""},
		{[]string{"SIGNING_KEY"}, nil, "tenants.t.secrets.k.env"},
		{[]string{"HOME=/tmp"}, nil, "routes.r.value_env"},
		{[]string{"AIRLOCK_TOKEN"}, nil, "Airlock's own configuration"},
		{[]string{"=x"}, nil, "want NAME or NAME=VALUE"},
	}
	for _, tt := range tests {
		got, err := commandEnv(environ, tt.flags, vars)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("--env %q: %v, want an error with %q", tt.flags, err, tt.wantErr)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("--env %q:\ngot  %q %v\nwant %q", tt.flags, got, err, tt.want)
		}
	}
}
