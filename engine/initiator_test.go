package engine_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/engine"
)

// robotsSite serves a robots.txt that disallows /private to Airlock (and
// nothing to anyone else), counts the robots.txt requests and keeps the
// User-Agent of every other request by path.
type robotsSite struct {
	*httptest.Server
	mu     sync.Mutex
	robots int
	agents map[string][]string
	status int // of robots.txt; 0: 200
}

func newRobotsSite(t *testing.T) *robotsSite {
	t.Helper()
	s := &robotsSite{agents: map[string][]string{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if r.URL.Path == "/robots.txt" {
			s.robots++
			if s.status != 0 {
				w.WriteHeader(s.status)
				return
			}
			fmt.Fprint(w, "User-agent: airlock\nDisallow: /private\n\nUser-agent: *\nAllow: /\n")
			return
		}
		s.agents[r.URL.Path] = append(s.agents[r.URL.Path], r.Header.Get("User-Agent"))
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, "<html><head><title>%s</title></head><body><main><h1>%s</h1><p>The page at %s, long enough to be read as content by the extractor.</p></main></body></html>", r.URL.Path, r.URL.Path, r.URL.Path)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *robotsSite) counts(path string) (robots int, agents []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.robots, append([]string(nil), s.agents[path]...)
}

func TestInitiatorRobotsAndIdentity(t *testing.T) {
	s := newRobotsSite(t)
	e := newEngine(t, engine.Config{Egress: engine.EgressConfig{Exceptions: []string{"127.0.0.1"}}})
	ctx := testCtx(t)

	// A model (the default) honours robots.txt: refused before any request
	// for the page, with a message that says why.
	_, err := e.Fetch(ctx, e.Principal(), airlock.FetchRequest{URL: s.URL + "/private"})
	if airlock.CodeOf(err) != airlock.CodeDenied || airlock.ReasonOf(err) != "robots" || !strings.Contains(err.Error(), "robots.txt") {
		t.Fatalf("model fetch of a disallowed path: %v, want denied (robots) naming robots.txt", err)
	}
	if n, agents := s.counts("/private"); n != 1 || len(agents) != 0 {
		t.Fatalf("after the refusal: %d robots.txt requests, page requests %q; want 1 and none", n, agents)
	}
	// A person fetches what they asked for, as Chrome, without robots.txt.
	page, err := e.Fetch(ctx, e.Principal(), airlock.FetchRequest{URL: s.URL + "/private", Initiator: airlock.InitiatorPerson})
	if err != nil || page.Title != "/private" {
		t.Fatalf("person fetch: %v %+v", err, page)
	}
	// A model's allowed page is fetched as Airlock; robots.txt is cached.
	if _, err := e.Fetch(ctx, e.Principal(), airlock.FetchRequest{URL: s.URL + "/public", Initiator: airlock.InitiatorModel}); err != nil {
		t.Fatalf("model fetch of an allowed path: %v", err)
	}
	n, person := s.counts("/private")
	_, model := s.counts("/public")
	if n != 1 {
		t.Errorf("robots.txt requested %d times, want 1 (cached per tenant and origin)", n)
	}
	if len(person) != 1 || !strings.Contains(person[0], "Chrome/") {
		t.Errorf("person's User-Agent = %q, want Chrome's", person)
	}
	if len(model) != 1 || !strings.HasPrefix(model[0], "airlock/") {
		t.Errorf("model's User-Agent = %q, want Airlock's own", model)
	}

	// Every fetch's audit record says its initiator; the refusal says robots.
	if err := e.FlushAudit(ctx); err != nil {
		t.Fatal(err)
	}
	recs, err := e.AuditQuery(ctx, airlock.AuditQuery{Broker: "fetch"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range recs {
		got = append(got, r.Outcome+" "+r.Reason+" "+r.Detail)
	}
	if len(recs) != 3 || recs[2].Outcome != "deny" || recs[2].Reason != "robots" || !strings.Contains(recs[2].Detail, "initiator=model") ||
		recs[1].Outcome != "allow" || recs[1].Detail != "initiator=person" || recs[0].Outcome != "allow" || recs[0].Detail != "initiator=model" {
		t.Errorf("fetch records (newest first) = %q", got)
	}
}

func TestInitiatorRobotsUnreachable(t *testing.T) {
	s := newRobotsSite(t)
	s.status = http.StatusServiceUnavailable
	e := newEngine(t, engine.Config{Egress: engine.EgressConfig{Exceptions: []string{"127.0.0.1"}}})
	ctx := testCtx(t)
	_, err := e.Fetch(ctx, e.Principal(), airlock.FetchRequest{URL: s.URL + "/public"})
	if airlock.CodeOf(err) != airlock.CodeDenied || airlock.ReasonOf(err) != "robots" || !strings.Contains(err.Error(), "503") {
		t.Fatalf("model fetch with robots.txt answering 503: %v, want denied (robots) saying 503", err)
	}
	if _, agents := s.counts("/public"); len(agents) != 0 {
		t.Errorf("page requested %d times, want none", len(agents))
	}
}

func TestInitiatorPersonNeedsPermission(t *testing.T) {
	s := newRobotsSite(t)
	tenant := func(initiators ...string) engine.Config {
		return engine.Config{DefaultTenant: "agents", Tenants: map[string]engine.TenantConfig{
			"agents": {Profile: "posix", Exceptions: []string{"127.0.0.1"}, Initiators: initiators}}}
	}
	ctx := testCtx(t)

	e := newEngine(t, tenant())
	for _, try := range []struct {
		name string
		do   func() error
	}{
		{"fetch", func() error {
			_, err := e.Fetch(ctx, e.Principal(), airlock.FetchRequest{URL: s.URL + "/private", Initiator: airlock.InitiatorPerson})
			return err
		}},
		{"fetch_many", func() error {
			_, _, err := e.FetchMany(ctx, e.Principal(), []string{s.URL + "/private"}, airlock.FetchRequest{Initiator: airlock.InitiatorPerson})
			return err
		}},
		{"crawl", func() error {
			_, err := e.Crawl(ctx, e.Principal(), airlock.CrawlRequest{Seed: s.URL + "/", Initiator: airlock.InitiatorPerson}, nil, nil)
			return err
		}},
		{"crawl job", func() error {
			_, err := e.StartCrawlJob(ctx, e.Principal(), airlock.CrawlRequest{Seed: s.URL + "/", Initiator: airlock.InitiatorPerson})
			return err
		}},
	} {
		err := try.do()
		if airlock.CodeOf(err) != airlock.CodeDenied || airlock.ReasonOf(err) != "initiator" || !strings.Contains(err.Error(), "tenants.agents.initiators") {
			t.Errorf("%s as person by a model-only tenant: %v, want denied (initiator) naming the key", try.name, err)
		}
	}
	if _, err := e.Fetch(ctx, e.Principal(), airlock.FetchRequest{URL: s.URL + "/public", Initiator: "robot"}); airlock.CodeOf(err) != airlock.CodeInvalid || airlock.ReasonOf(err) != "initiator" {
		t.Errorf("initiator robot: %v, want invalid (initiator)", err)
	}
	if n, agents := s.counts("/private"); n != 0 || len(agents) != 0 {
		t.Errorf("refused claims reached the site: %d robots.txt, %d page requests", n, len(agents))
	}

	e = newEngine(t, tenant(airlock.InitiatorModel, airlock.InitiatorPerson))
	if _, err := e.Fetch(ctx, e.Principal(), airlock.FetchRequest{URL: s.URL + "/private", Initiator: airlock.InitiatorPerson}); err != nil {
		t.Errorf("person fetch by a tenant that lists person: %v", err)
	}
}

func TestInitiatorIdentitiesConfigured(t *testing.T) {
	s := newRobotsSite(t)
	e := newEngine(t, engine.Config{Tenants: map[string]engine.TenantConfig{"local": {Profile: "posix", Exceptions: []string{"127.0.0.1"},
		Identities: map[string]engine.IdentityConfig{
			airlock.InitiatorModel:  {Identity: "chrome", Robots: engine.RobotsIgnore},
			airlock.InitiatorPerson: {Identity: "airlock", Robots: engine.RobotsObey},
		}}}})
	ctx := testCtx(t)
	if _, err := e.Fetch(ctx, e.Principal(), airlock.FetchRequest{URL: s.URL + "/private"}); err != nil {
		t.Fatalf("model with robots: ignore: %v", err)
	}
	_, err := e.Fetch(ctx, e.Principal(), airlock.FetchRequest{URL: s.URL + "/private", Initiator: airlock.InitiatorPerson})
	if airlock.ReasonOf(err) != "robots" {
		t.Fatalf("person with robots: obey: %v, want denied (robots)", err)
	}
	if _, err := e.Fetch(ctx, e.Principal(), airlock.FetchRequest{URL: s.URL + "/public", Initiator: airlock.InitiatorPerson}); err != nil {
		t.Fatal(err)
	}
	_, private := s.counts("/private")
	_, public := s.counts("/public")
	if len(private) != 1 || !strings.Contains(private[0], "Chrome/") || len(public) != 1 || !strings.HasPrefix(public[0], "airlock/") {
		t.Errorf("User-Agents: model %q (want Chrome's), person %q (want Airlock's)", private, public)
	}

	for name, tc := range map[string]engine.TenantConfig{
		"unknown initiator":   {Initiators: []string{"robot"}},
		"unknown identity":    {Identities: map[string]engine.IdentityConfig{"model": {Identity: "firefox"}}},
		"unknown robots":      {Identities: map[string]engine.IdentityConfig{"person": {Robots: "maybe"}}},
		"identity of nothing": {Identities: map[string]engine.IdentityConfig{"robot": {}}},
	} {
		cfg := engine.Config{InMemory: true, DefaultTenant: "a", Tenants: map[string]engine.TenantConfig{"a": tc}}
		if err := engine.Validate(cfg); airlock.CodeOf(err) != airlock.CodeInvalid || !strings.Contains(err.Error(), "tenants.a.") {
			t.Errorf("%s: Validate: %v, want a config error naming the key", name, err)
		}
		en, err := engine.New(context.Background(), cfg)
		if err == nil {
			en.Close(context.Background())
		}
		if airlock.CodeOf(err) != airlock.CodeInvalid || !strings.Contains(err.Error(), "tenants.a.") {
			t.Errorf("%s: %v, want a config error naming the key", name, err)
		}
	}
}

// TestInitiatorRobotsRemoteProvider: robots.txt is the engine's decision
// whichever provider fetches, so a model cannot lift it by naming a
// remote provider; the engine reads robots.txt itself, through egress.
func TestInitiatorRobotsRemoteProvider(t *testing.T) {
	const key = "fc-robots-key"
	s := newRobotsSite(t)
	fc := fakeFirecrawl(t, key, func(a string) string { return a })
	defer fc.Close()
	e := newEngine(t, engine.Config{
		Egress: engine.EgressConfig{Exceptions: []string{"127.0.0.1"}},
		Browse: engine.BrowseConfig{Provider: "firecrawl", FirecrawlURL: fc.URL},
	}, envMap(map[string]string{"FIRECRAWL_API_KEY": key}), firecrawlAt(fc.URL))
	ctx := testCtx(t)
	if _, err := e.Fetch(ctx, e.Principal(), airlock.FetchRequest{URL: s.URL + "/private"}); airlock.ReasonOf(err) != "robots" {
		t.Errorf("model fetch through firecrawl of a disallowed page: %v, want denied (robots)", err)
	}
	page, err := e.Fetch(ctx, e.Principal(), airlock.FetchRequest{URL: s.URL + "/private", Initiator: airlock.InitiatorPerson})
	if err != nil || page.Provider != "firecrawl" {
		t.Errorf("person fetch through firecrawl: %v %+v", err, page)
	}
	if n, _ := s.counts("/private"); n != 1 {
		t.Errorf("robots.txt requested %d times, want 1", n)
	}
}
