package engine

import (
	"github.com/airlockhq/airlock/internal/browse"
	"github.com/airlockhq/airlock/internal/provider/native"
)

// crawlerUserAgent is how the crawler identifies itself.
func crawlerUserAgent() string {
	return "airlock/" + Version + " (+https://github.com/airlockhq/airlock)"
}

// buildDispatcher registers native and every API provider whose key is in
// the environment, and checks the configured choices.
func buildDispatcher(bc BrowseConfig, getenv func(string) string) (*browse.Dispatcher, error) {
	d := browse.New(browse.Config{Provider: bc.Provider, SearchProvider: bc.SearchProvider, Proxy: bc.Proxy})
	search := &native.Search{}
	if err := d.Register(browse.NativeName, native.New(search, crawlerUserAgent())); err != nil {
		return nil, err
	}
	if err := d.Validate(); err != nil {
		return nil, err
	}
	return d, nil
}
