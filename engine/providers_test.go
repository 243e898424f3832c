package engine_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/engine"
	"github.com/airlockhq/airlock/internal/extract"
	"github.com/airlockhq/airlock/internal/provider/firecrawl"
)

// fakeFirecrawl implements the documented /v1/scrape shape; it reports the
// final URL it is told to, to test that the engine decides it again.
func fakeFirecrawl(t *testing.T, key string, finalURL func(asked string) string) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+key {
			w.WriteHeader(http.StatusUnauthorized)
			json.NewEncoder(w).Encode(map[string]any{"success": false, "error": "bad key " + r.Header.Get("Authorization")})
			return
		}
		var body struct{ URL string }
		json.NewDecoder(r.Body).Decode(&body)
		html := `<html lang="en"><head><title>Remote page</title></head><body><h1>Remote</h1><p>` + strings.Repeat("Text scraped by the remote provider. ", 20) + `</p></body></html>`
		json.NewEncoder(w).Encode(map[string]any{"success": true, "data": map[string]any{
			"html": html, "rawHtml": html,
			"metadata": map[string]any{"sourceURL": body.URL, "url": finalURL(body.URL), "statusCode": 200},
		}})
	}))
}

// firecrawlAt registers Firecrawl at baseURL, keyed by FIRECRAWL_API_KEY
// from the engine's getenv, as the CLI's registry does.
func firecrawlAt(baseURL string) engine.Option {
	return engine.WithProviders(engine.Provider{Name: firecrawl.Name, Capabilities: []string{airlock.VerbFetch, airlock.VerbCrawl, airlock.VerbSearch},
		New: func(getenv func(string) string) (engine.BrowseProvider, error) {
			key := getenv(firecrawl.EnvAPIKey)
			if key == "" {
				return nil, nil
			}
			return firecrawl.New(firecrawl.Options{APIKey: key, BaseURL: baseURL, Format: firecrawl.FormatRawHTML,
				Extract: func(ctx context.Context, html []byte, pageURL, mode string) (*airlock.Page, error) {
					return extract.Extract(ctx, extract.Input{URL: pageURL, Body: html, ContentType: "text/html; charset=utf-8"}, extract.Options{Mode: mode})
				}})
		}})
}

func TestFirecrawlProviderGoesThroughThePolicy(t *testing.T) {
	const key = "fc-CANARY-51f0"
	final := func(asked string) string { return asked }
	srv := fakeFirecrawl(t, key, func(a string) string { return final(a) })
	defer srv.Close()
	e := newEngine(t, engine.Config{
		Egress: engine.EgressConfig{Exceptions: []string{"127.0.0.1"}, Resolve: map[string][]string{"public.example": {"93.184.215.14"}, "inside.example": {"10.1.1.1"}}},
		Browse: engine.BrowseConfig{Provider: "firecrawl", FirecrawlURL: srv.URL},
	}, envMap(map[string]string{"FIRECRAWL_API_KEY": key}), firecrawlAt(srv.URL))
	ctx := testCtx(t)
	p := e.Principal()

	// As a person: a model's fetch would first ask public.example for its
	// robots.txt, off loopback (TestInitiatorRobotsRemoteProvider).
	page, err := e.Fetch(ctx, p, airlock.FetchRequest{Initiator: airlock.InitiatorPerson, URL: "https://public.example/a"})
	if err != nil {
		t.Fatal(err)
	}
	if page.Provider != "firecrawl" || page.Title != "Remote page" || !strings.Contains(page.Text, "remote provider") || page.Lang != "en" {
		t.Errorf("page = %+v", page)
	}
	// The target is decided before delegating: an internal name never
	// reaches the provider.
	if _, err := e.Fetch(ctx, p, airlock.FetchRequest{URL: "http://inside.example/"}); airlock.ReasonOf(err) != "internal_address" {
		t.Errorf("internal target through firecrawl: %v", err)
	}
	// The final URL the provider reports is decided too.
	final = func(string) string { return "http://169.254.169.254/latest/meta-data/" }
	if _, err := e.Fetch(ctx, p, airlock.FetchRequest{Initiator: airlock.InitiatorPerson, URL: "https://public.example/b"}); airlock.ReasonOf(err) != "metadata" {
		t.Errorf("provider-reported final URL on metadata: %v", err)
	}
	// native stays available by name.
	if _, err := e.Fetch(ctx, p, airlock.FetchRequest{URL: "http://10.0.0.1/", Provider: "native"}); airlock.ReasonOf(err) != "private" {
		t.Errorf("native by name: %v", err)
	}
	// A wrong key: the error never shows the key.
	e2 := newEngine(t, engine.Config{
		Egress: engine.EgressConfig{Exceptions: []string{"127.0.0.1"}, Resolve: map[string][]string{"public.example": {"93.184.215.14"}}},
		Browse: engine.BrowseConfig{Provider: "firecrawl", FirecrawlURL: srv.URL},
	}, envMap(map[string]string{"FIRECRAWL_API_KEY": "fc-WRONG-CANARY"}), firecrawlAt(srv.URL))
	_, err = e2.Fetch(ctx, e2.Principal(), airlock.FetchRequest{Initiator: airlock.InitiatorPerson, URL: "https://public.example/a"})
	if err == nil || strings.Contains(err.Error(), "fc-WRONG-CANARY") {
		t.Errorf("wrong key: %v", err)
	}
}

func TestUnknownConfiguredProvider(t *testing.T) {
	_, err := engine.New(context.Background(), engine.Config{InMemory: true, Browse: engine.BrowseConfig{Provider: "firecrawl"}},
		envMap(nil), firecrawlAt("http://127.0.0.1:1"))
	if airlock.CodeOf(err) != airlock.CodeInvalid {
		t.Errorf("firecrawl without its key: %v, want invalid", err)
	}
}
