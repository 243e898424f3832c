package browse

import (
	"slices"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/provider/native"
)

// Registration is one browse provider as the composition root registers
// it: its name, the verbs it declares, and its constructor.
type Registration struct {
	Name string
	// Capabilities are the verbs it declares (airlock.VerbFetch,
	// VerbCrawl, VerbSearch); what New builds must declare the same.
	Capabilities []string
	// New builds the provider, reading its key or instance through getenv.
	// nil and no error: its key is absent, so the provider is not
	// available. The value implements airlock.Fetcher, airlock.Crawler and
	// airlock.Searcher for the verbs it declares.
	New func(getenv func(string) string) (Provider, error)
}

// Own configures the providers Build always registers: native (its
// keyless search engines and User-Agent) and the engine's browser
// renderer, Chromium, under ChromiumName (a provider package imports this
// one in its tests: it is handed over, not imported).
type Own struct {
	Keyless      native.Search
	UserAgent    string
	ChromiumName string
	Chromium     Provider
}

// Build registers native, chromium and every registered provider that
// getenv makes available, in order, and checks c's choices. Those
// declaring search alone (search APIs) also serve native search, which
// asks them in order before its keyless engines.
func Build(c Config, own Own, getenv func(string) string, regs []Registration) (*Dispatcher, error) {
	d := New(c)
	keyless := own.Keyless
	search := &native.WithAPIs{Keyless: &keyless}
	type built struct {
		name string
		p    Provider
	}
	var bs []built
	for _, r := range regs {
		bp, err := r.New(getenv)
		if err != nil {
			return nil, err
		}
		if bp == nil {
			continue
		}
		if !slices.Equal(bp.Capabilities(), r.Capabilities) {
			return nil, airlock.Errorf(airlock.CodeInternal, airlock.ReasonProvider, "provider %s declares %v, registered as %v", r.Name, bp.Capabilities(), r.Capabilities)
		}
		bs = append(bs, built{r.Name, bp})
		if s, ok := bp.(airlock.Searcher); ok && slices.Equal(r.Capabilities, []string{airlock.VerbSearch}) {
			search.APIs = append(search.APIs, native.API{Name: r.Name, Searcher: s})
		}
	}
	if err := d.Register(NativeName, native.New(search, own.UserAgent)); err != nil {
		return nil, err
	}
	if err := d.Register(own.ChromiumName, own.Chromium); err != nil {
		return nil, err
	}
	for _, b := range bs {
		if err := d.Register(b.name, b.p); err != nil {
			return nil, err
		}
	}
	if err := d.Validate(); err != nil {
		return nil, err
	}
	return d, nil
}
