package chromium

import (
	"context"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/browse"
	"github.com/airlockhq/airlock/internal/browser"
	"github.com/airlockhq/airlock/internal/provider/providertest"
)

func TestMain(m *testing.M) { os.Exit(providertest.Main(m, "chromium")) }

// fakeRenderer answers every URL with a page naming it, and records whom
// it rendered for.
type fakeRenderer struct {
	mu      sync.Mutex
	callers []airlock.Principal
	urls    []string
}

func (f *fakeRenderer) Render(_ context.Context, p airlock.Principal, url string) (browser.Rendered, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.callers = append(f.callers, p)
	f.urls = append(f.urls, url)
	html := `<html><head><title>Rendered ` + url + `</title></head><body><main><h1>Rendered</h1>` +
		`<p>Only a browser sees this paragraph of text.</p><a href="/b">b</a></main></body></html>`
	return browser.Rendered{HTML: []byte(html), URL: url, Status: 200, MIMEType: "text/html"}, nil
}

func TestDeclarations(t *testing.T) {
	if err := browse.CheckDeclarations(New(Options{})); err != nil {
		t.Fatal(err)
	}
}

// TestFetchRendersForTheContextsPrincipal: the provider learns its caller
// from the call's context and renders in that caller's tenant; without a
// principal it refuses (fails closed) instead of rendering for no one.
func TestFetchRendersForTheContextsPrincipal(t *testing.T) {
	r := &fakeRenderer{}
	c := New(Options{Renderer: r})
	p := airlock.Principal{Tenant: "acme", Instance: "agent"}
	ctx := airlock.ContextWithPrincipal(t.Context(), p)
	page, err := c.Fetch(ctx, nil, airlock.FetchRequest{URL: "http://127.0.0.1:1/a"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(page.Title, "Rendered") {
		t.Errorf("title = %q, want the rendered page's", page.Title)
	}
	if len(r.callers) != 1 || r.callers[0] != p {
		t.Errorf("rendered for %v, want [%v]", r.callers, p)
	}
	_, err = c.Fetch(t.Context(), nil, airlock.FetchRequest{URL: "http://127.0.0.1:1/a"})
	if airlock.CodeOf(err) != airlock.CodeInternal || airlock.ReasonOf(err) != "chromium" {
		t.Errorf("fetch without a principal: %v, want internal (chromium)", err)
	}
	if len(r.callers) != 1 {
		t.Errorf("rendered %d times, want once: nothing without a principal", len(r.callers))
	}
	if _, err := New(Options{}).Fetch(ctx, nil, airlock.FetchRequest{URL: "http://127.0.0.1:1/a"}); airlock.CodeOf(err) != airlock.CodeInternal {
		t.Errorf("fetch with no renderer: %v, want internal", err)
	}
}

// TestCrawlRendersPagesAndFetchesRobots: pages go through the renderer,
// robots.txt through the call's Doer, each page for the context's
// principal.
func TestCrawlRendersPagesAndFetchesRobots(t *testing.T) {
	d := providertest.NewDoer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			w.Write([]byte("User-agent: *\nAllow: /\n"))
			return
		}
		t.Errorf("the Doer fetched %s: pages are the renderer's", r.URL)
		http.NotFound(w, r)
	}))
	r := &fakeRenderer{}
	c := New(Options{Renderer: r, UserAgent: "airlock-test", Concurrency: 2})
	p := airlock.Principal{Tenant: "acme"}
	var got []string
	sum, err := c.Crawl(airlock.ContextWithPrincipal(t.Context(), p), d, airlock.CrawlRequest{Seed: d.Server.URL + "/a", MaxPages: 2, Depth: 1, Concurrency: 50},
		func(pg *airlock.Page) error {
			if pg.Provider != Name {
				t.Errorf("page %s provider = %q, want %q", pg.URL, pg.Provider, Name)
			}
			got = append(got, pg.URL)
			return nil
		}, nil)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	if want := []string{d.Server.URL + "/a", d.Server.URL + "/b"}; !slices.Equal(got, want) {
		t.Errorf("pages = %q, want %q (summary %+v)", got, want, sum)
	}
	for _, who := range r.callers {
		if who != p {
			t.Errorf("rendered for %v, want %v", who, p)
		}
	}
	var robots bool
	for _, q := range d.Requests() {
		robots = robots || strings.HasSuffix(q.URL, "/robots.txt")
	}
	if !robots {
		t.Error("robots.txt was not fetched through the Doer")
	}
}
