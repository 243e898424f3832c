package cli

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/engine"
)

// Every entry of the registry is unavailable without its credential, and
// with it builds a provider that declares the entry's verbs and
// implements the interface of each.
func TestProviderRegistry(t *testing.T) {
	t.Parallel()
	keys := map[string]string{"DATAFORSEO_AUTH": "login:password", "BRAVE_SEARCH_API_KEY": "brave-key",
		"SEARXNG_URL": "http://127.0.0.1:1/", "FIRECRAWL_API_KEY": "fc-key"}
	var names []string
	for _, p := range providers(engine.BrowseConfig{}) {
		names = append(names, p.Name)
		if got, err := p.New(func(string) string { return "" }); got != nil || err != nil {
			t.Errorf("%s without its credential = %v, %v; want not available", p.Name, got, err)
		}
		got, err := p.New(func(k string) string { return keys[k] })
		if err != nil || got == nil {
			t.Fatalf("%s with its credential: %v, %v", p.Name, got, err)
		}
		if !slices.Equal(got.Capabilities(), p.Capabilities) {
			t.Errorf("%s declares %v, registered as %v", p.Name, got.Capabilities(), p.Capabilities)
		}
		for _, verb := range p.Capabilities {
			var ok bool
			switch verb {
			case airlock.VerbFetch:
				_, ok = got.(airlock.Fetcher)
			case airlock.VerbCrawl:
				_, ok = got.(airlock.Crawler)
			case airlock.VerbSearch:
				_, ok = got.(airlock.Searcher)
			}
			if !ok {
				t.Errorf("%s declares %s but does not implement it", p.Name, verb)
			}
		}
	}
	if want := []string{"dataforseo", "brave-api", "searxng", "firecrawl"}; !slices.Equal(names, want) {
		t.Errorf("registry = %v, want %v (the search cascade's order)", names, want)
	}
}

// The CLI hands its registry to the engine: a provider is available when
// its credential is in the environment, for config check as for a start.
func TestConfigCheckUsesTheRegistry(t *testing.T) {
	t.Parallel()
	f := filepath.Join(t.TempDir(), "airlock.yaml")
	if err := os.WriteFile(f, []byte("browse:\n  search_provider: searxng\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"config", "check", "--config", f}
	if r := invokeEnv(t, context.Background(), map[string]string{"SEARXNG_URL": "http://127.0.0.1:1/"}, args); r.code != 0 {
		t.Errorf("with SEARXNG_URL: exit %d %q, want 0", r.code, r.stderr)
	}
	if r := invokeEnv(t, context.Background(), nil, args); r.code != 2 || !strings.Contains(r.stderr, `"searxng" is not available`) {
		t.Errorf("without SEARXNG_URL: exit %d %q, want 2 and searxng not available", r.code, r.stderr)
	}
}
