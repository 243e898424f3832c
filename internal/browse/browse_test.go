package browse

import (
	"context"
	"testing"

	"github.com/airlockhq/airlock"
)

type fetchOnly struct{}

func (fetchOnly) Capabilities() []string { return []string{airlock.VerbFetch} }
func (fetchOnly) Fetch(context.Context, airlock.Doer, airlock.FetchRequest) (*airlock.Page, error) {
	return nil, nil
}

type all struct{ fetchOnly }

func (all) Capabilities() []string {
	return []string{airlock.VerbFetch, airlock.VerbCrawl, airlock.VerbSearch}
}
func (all) Crawl(context.Context, airlock.Doer, airlock.CrawlRequest, func(*airlock.Page) error, func(airlock.CrawlProgress)) (*airlock.CrawlSummary, error) {
	return nil, nil
}
func (all) Search(context.Context, airlock.Doer, airlock.SearchRequest) ([]airlock.SearchResult, error) {
	return nil, nil
}

type searchOnly struct{}

func (searchOnly) Capabilities() []string { return []string{airlock.VerbSearch} }
func (searchOnly) Search(context.Context, airlock.Doer, airlock.SearchRequest) ([]airlock.SearchResult, error) {
	return nil, nil
}

type liar struct{ fetchOnly }

func (liar) Capabilities() []string { return []string{airlock.VerbFetch, airlock.VerbCrawl} }

type shy struct{ all }

func (shy) Capabilities() []string { return []string{airlock.VerbFetch} }

func TestResolve(t *testing.T) {
	tests := []struct {
		name      string
		cfg       Config
		verb, req string
		want      string
		wantErr   bool
	}{
		{"default is native", Config{}, airlock.VerbFetch, "", NativeName, false},
		{"configured provider declares fetch", Config{Provider: "fc"}, airlock.VerbFetch, "", "fc", false},
		{"configured provider lacks crawl", Config{Provider: "fc"}, airlock.VerbCrawl, "", NativeName, false},
		{"search provider wins", Config{Provider: "full", SearchProvider: "serp"}, airlock.VerbSearch, "", "serp", false},
		{"search without search provider", Config{Provider: "full"}, airlock.VerbSearch, "", "full", false},
		{"search provider does not touch fetch", Config{SearchProvider: "serp"}, airlock.VerbFetch, "", NativeName, false},
		{"caller names one", Config{}, airlock.VerbSearch, "serp", "serp", false},
		{"caller names one lacking the verb", Config{}, airlock.VerbCrawl, "fc", "", true},
		{"caller names an unknown one", Config{}, airlock.VerbFetch, "nope", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := New(tt.cfg)
			for n, p := range map[string]Provider{NativeName: all{}, "fc": fetchOnly{}, "serp": searchOnly{}, "full": all{}} {
				if err := d.Register(n, p); err != nil {
					t.Fatal(err)
				}
			}
			got, _, err := d.Resolve(tt.verb, tt.req)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("Resolve(%s, %q) = %q, %v; want %q (error %v)", tt.verb, tt.req, got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestDeclarationsMustMatch(t *testing.T) {
	d := New(Config{})
	if err := d.Register("liar", liar{}); err == nil {
		t.Error("a provider declaring crawl without implementing it was registered")
	}
	if err := d.Register("shy", shy{}); err == nil {
		t.Error("a provider implementing verbs it does not declare was registered")
	}
	if err := New(Config{Provider: "missing"}).Validate(); err == nil {
		t.Error("an unknown configured provider validated")
	}
}

func TestProxyMerge(t *testing.T) {
	d := New(Config{Proxy: "corp"})
	if d.Proxy("") != "corp" || d.Proxy("other") != "other" {
		t.Error("proxy merge")
	}
}
