package engine_test

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/engine"
	"github.com/airlockhq/airlock/internal/crawl/crawltest"
	"github.com/airlockhq/airlock/internal/gate"
)

// requestTypes are the request and option types every surface maps into:
// the root package's and the browser's the engine exposes.
var requestTypes = []reflect.Type{
	reflect.TypeFor[airlock.HTTPRequest](),
	reflect.TypeFor[airlock.ExchangeRequest](),
	reflect.TypeFor[airlock.RouteRequest](),
	reflect.TypeFor[airlock.AuditQuery](),
	reflect.TypeFor[airlock.FetchRequest](),
	reflect.TypeFor[airlock.ScrapeRequest](),
	reflect.TypeFor[airlock.BrowserScrape](),
	reflect.TypeFor[airlock.PageAction](),
	reflect.TypeFor[airlock.CrawlRequest](),
	reflect.TypeFor[airlock.SearchRequest](),
	reflect.TypeFor[airlock.Narrowing](),
	reflect.TypeFor[engine.BrowserOpenRequest](),
	reflect.TypeFor[engine.BrowserOp](),
	reflect.TypeFor[engine.BrowserAction](),
}

// TestRequestFieldsHaveCeilings: every numeric field of the request types
// (integers, floats, durations and pointers to them) is in a row of
// gate.Ceilings or exempt with a reason; and every root type named
// *Request or *Query is in requestTypes, so a new type cannot be missed.
func TestRequestFieldsHaveCeilings(t *testing.T) {
	for _, typ := range requestTypes {
		for _, f := range gate.NumericFields(typ) {
			if !gate.HasCeiling(f) {
				t.Errorf("%s has no row in gate.Ceilings: add a ceiling (limits.<name>) or an exemption with its reason", f)
			}
		}
	}
	listed := map[string]bool{}
	for _, typ := range requestTypes {
		if typ.PkgPath() == reflect.TypeFor[airlock.HTTPRequest]().PkgPath() {
			listed[typ.Name()] = true
		}
	}
	fset := token.NewFileSet()
	entries, err := os.ReadDir("..")
	if err != nil {
		t.Fatal(err)
	}
	for _, ent := range entries {
		if !strings.HasSuffix(ent.Name(), ".go") || strings.HasSuffix(ent.Name(), "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, filepath.Join("..", ent.Name()), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range file.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.TYPE {
				continue
			}
			for _, spec := range gd.Specs {
				name := spec.(*ast.TypeSpec).Name.Name
				if (strings.HasSuffix(name, "Request") || strings.HasSuffix(name, "Query")) && !listed[name] {
					t.Errorf("root type %s is not in requestTypes: list it so that its numeric fields get ceilings", name)
				}
			}
		}
	}
}

// TestCeilingsConfigMatchesTable: each key of CeilingsConfig is a row of
// gate.Ceilings and each row has a key, of the row's kind.
func TestCeilingsConfigMatchesTable(t *testing.T) {
	typ := reflect.TypeFor[engine.CeilingsConfig]()
	var keys []string
	for i := range typ.NumField() {
		f := typ.Field(i)
		key, _, _ := strings.Cut(f.Tag.Get("koanf"), ",")
		keys = append(keys, key)
		c, ok := gate.LookupCeiling(key)
		if !ok {
			t.Errorf("limits.%s has no row in gate.Ceilings", key)
			continue
		}
		if isDur := f.Type == reflect.TypeFor[time.Duration](); isDur != (c.Kind == gate.KindDuration) {
			t.Errorf("limits.%s: field type %s for a row of kind %d", key, f.Type, c.Kind)
		}
	}
	for _, name := range gate.LimitNames() {
		if !slices.Contains(keys, name) {
			t.Errorf("row %s has no key in CeilingsConfig", name)
		}
	}
}

// TestCrawlPerHostCeiling is issue 14's finding 3 in the engine: a crawl
// asking for 100,000 requests at once, or per host, is refused before
// any request; at the ceiling (64 at once, 8 per host) no more than 8
// requests to the one origin are ever in flight.
func TestCrawlPerHostCeiling(t *testing.T) {
	t.Parallel()
	site := crawltest.NewTreeSite(t, 400, "", 20*time.Millisecond)
	e := newEngine(t, engine.Config{Egress: engine.EgressConfig{Exceptions: []string{"127.0.0.1"}}})
	ctx := testCtx(t)
	seed := site.URL + "/p0"
	for _, req := range []airlock.CrawlRequest{
		{Seed: seed, Concurrency: 100000, PerHostConcurrency: 100000},
		{Seed: seed, PerHostConcurrency: 9},
		{URLs: []string{seed}, Concurrency: 65},
	} {
		_, err := e.Crawl(ctx, e.Principal(), req, nil, nil)
		wantErr(t, err, airlock.CodeInvalid, string(airlock.ReasonLimit))
		_, err = e.StartCrawlJob(ctx, e.Principal(), req)
		wantErr(t, err, airlock.CodeInvalid, string(airlock.ReasonLimit))
	}
	if n := site.Requests(); n != 0 {
		t.Fatalf("refused crawls made %d requests", n)
	}
	sum, err := e.Crawl(ctx, e.Principal(), airlock.CrawlRequest{Seed: seed, MaxPages: 200, Depth: 20, Concurrency: 64, PerHostConcurrency: 8}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := site.MaxInflight(); got > 8 || got < 2 || sum.Pages != 200 {
		t.Errorf("at most %d requests at once to the origin (want 2 to 8), %d pages", got, sum.Pages)
	}
}

// TestTenantCeilingBelowDefault: a tenant whose ceiling is below a
// default gets the ceiling as its default (a request that asks for
// nothing is never refused), and a request may lower per-host
// concurrency, not raise it.
func TestTenantCeilingBelowDefault(t *testing.T) {
	site := crawltest.NewTreeSite(t, 100, "", 10*time.Millisecond)
	e := newEngine(t, engine.Config{
		Egress: engine.EgressConfig{Exceptions: []string{"127.0.0.1"}},
		Tenants: map[string]engine.TenantConfig{
			"local": {Profile: "posix", Limits: engine.CeilingsConfig{CrawlPerHost: 1}},
		},
	})
	ctx := testCtx(t)
	if _, err := e.Crawl(ctx, e.Principal(), airlock.CrawlRequest{Seed: site.URL + "/p0", PerHostConcurrency: 2}, nil, nil); airlock.ReasonOf(err) != airlock.ReasonLimit ||
		!strings.Contains(err.Error(), "(tenants.local.limits.crawl_per_host_concurrency)") {
		t.Fatalf("per host 2 over a tenant ceiling of 1: %v", err)
	}
	sum, err := e.Crawl(ctx, e.Principal(), airlock.CrawlRequest{Seed: site.URL + "/p0", MaxPages: 20, Depth: 10, Concurrency: 8}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := site.MaxInflight(); got != 1 || sum.Pages != 20 {
		t.Errorf("%d requests at once (want 1), %d pages", got, sum.Pages)
	}
}

// TestIgnoreRobotsPermission: ignore_robots is refused (denied, audited)
// for a tenant without allow_ignore_robots and honoured for one with it.
func TestIgnoreRobotsPermission(t *testing.T) {
	site := crawltest.NewTreeSite(t, 10, "User-agent: *\nDisallow: /\n", 0)
	e := newEngine(t, engine.Config{
		Egress: engine.EgressConfig{Exceptions: []string{"127.0.0.1"}},
		Tenants: map[string]engine.TenantConfig{
			"local":  {Profile: "posix"},
			"crawly": {Profile: "posix", AllowIgnoreRobots: true},
		},
	})
	ctx := testCtx(t)
	req := airlock.CrawlRequest{Seed: site.URL + "/p0", MaxPages: 3, IgnoreRobots: true}
	_, err := e.Crawl(ctx, e.Principal(), req, nil, nil)
	wantErr(t, err, airlock.CodeDenied, string(airlock.ReasonIgnoreRobots))
	_, err = e.StartCrawlJob(ctx, e.Principal(), req)
	wantErr(t, err, airlock.CodeDenied, string(airlock.ReasonIgnoreRobots))
	if n := site.Requests(); n != 0 {
		t.Fatalf("refused crawls made %d requests", n)
	}
	if err := e.FlushAudit(ctx); err != nil {
		t.Fatal(err)
	}
	recs, err := e.AuditQuery(ctx, airlock.AuditQuery{Reason: string(airlock.ReasonIgnoreRobots)})
	if err != nil || len(recs) != 2 || recs[0].Outcome != gate.OutcomeDeny {
		t.Errorf("audit = %+v, %v; want two denials", recs, err)
	}
	sum, err := e.Crawl(ctx, airlock.Principal{Tenant: "crawly"}, req, nil, nil)
	if err != nil || sum.Pages != 3 {
		t.Errorf("allowed tenant: %+v, %v", sum, err)
	}
}

// TestExchangeAndHTTPCeilingsPerTenant: a tenant's override is the
// ceiling named in the refusal, and a zero value gets the ceiling when
// it is below egress's default.
func TestExchangeAndHTTPCeilingsPerTenant(t *testing.T) {
	e := newEngine(t, engine.Config{
		Tenants: map[string]engine.TenantConfig{
			"local": {Profile: "posix", Limits: engine.CeilingsConfig{ExchangeMaxReply: 100, HTTPBody: 10}},
		},
	})
	ctx := testCtx(t)
	_, err := e.Exchange(ctx, e.Principal(), airlock.ExchangeRequest{Lane: "tcp", Target: "127.0.0.1:1", MaxReply: 101})
	wantErr(t, err, airlock.CodeInvalid, string(airlock.ReasonLimit))
	if want := "max_reply 101 is above the ceiling 100 (tenants.local.limits.exchange_max_reply)"; err.Error() != want {
		t.Errorf("error = %q, want %q", err, want)
	}
	_, err = e.HTTP(ctx, e.Principal(), airlock.HTTPRequest{Method: "POST", URL: "http://127.0.0.1:1/", Body: make([]byte, 11)})
	wantErr(t, err, airlock.CodeInvalid, string(airlock.ReasonLimit))
	_, err = e.Route(ctx, e.Principal(), airlock.RouteRequest{Name: "x", Path: "/", Body: make([]byte, 11)})
	wantErr(t, err, airlock.CodeInvalid, string(airlock.ReasonLimit))
	_, err = e.AuditQuery(ctx, airlock.AuditQuery{Limit: 10001})
	wantCode(t, err, airlock.CodeInvalid, string(airlock.ReasonLimit)) // a read, not a broker call
	_, _, err = e.Search(ctx, e.Principal(), airlock.SearchRequest{Query: "q", Limit: 101})
	wantErr(t, err, airlock.CodeInvalid, string(airlock.ReasonLimit))
	if err := e.CheckLimit(ctx, e.Principal(), "fetch", engine.LimitMCPMaxLength, "max_length", 1000001); airlock.ReasonOf(err) != airlock.ReasonLimit {
		t.Errorf("CheckLimit: %v", err)
	}
}

// TestCeilingConfigErrors: unknown keys fail at load (the CLI's decoder),
// negative and impossible values here.
func TestCeilingConfigErrors(t *testing.T) {
	for _, cfg := range []engine.Config{
		{Limits: engine.LimitsConfig{CeilingsConfig: engine.CeilingsConfig{CrawlConcurrency: -1}}},
		{Limits: engine.LimitsConfig{CeilingsConfig: engine.CeilingsConfig{UDPMaxReply: 1 << 20}}},
		{Tenants: map[string]engine.TenantConfig{"local": {Limits: engine.CeilingsConfig{BrowserWaitTimeout: time.Hour}}}},
	} {
		if err := engine.Validate(cfg); airlock.CodeOf(err) != airlock.CodeInvalid {
			t.Errorf("Validate(%+v) = %v, want invalid", cfg, err)
		}
	}
}

// TestBrowserCeilings: a browser op or interact sequence above the
// tenant's ceilings is refused (invalid, limit) as one audited decision,
// before the session runs it.
func TestBrowserCeilings(t *testing.T) {
	t.Parallel()
	e, p := browserEngine(t, func(cfg *engine.Config) {
		tc := cfg.Tenants["local"]
		tc.Limits = engine.CeilingsConfig{BrowserWaitTimeout: time.Second, BrowserSnapshotChars: 1000, BrowserActions: 2}
		cfg.Tenants["local"] = tc
	})
	ctx := testCtx(t)
	info, err := e.BrowserOpen(ctx, p, engine.BrowserOpenRequest{})
	if err != nil {
		t.Fatalf("BrowserOpen: %v", err)
	}
	defer e.BrowserClose(ctx, p, info.ID, true)
	ae := wantErr(t, doOp(ctx, e, p, info.ID, engine.BrowserOp{Kind: "wait_for", Selector: "body", TimeoutMS: 1001}), airlock.CodeInvalid, string(airlock.ReasonLimit))
	if want := "timeout_ms 1.001s is above the ceiling 1s (tenants.local.limits.browser_wait_timeout)"; ae.Message != want {
		t.Errorf("message = %q, want %q", ae.Message, want)
	}
	wantErr(t, doOp(ctx, e, p, info.ID, engine.BrowserOp{Kind: "snapshot", MaxChars: 1001}), airlock.CodeInvalid, string(airlock.ReasonLimit))
	if err := doOp(ctx, e, p, info.ID, engine.BrowserOp{Kind: "snapshot", MaxChars: 1000}); err != nil {
		t.Errorf("snapshot at the ceiling: %v", err)
	}
	sleep := engine.BrowserAction{Action: "sleep", MS: 1}
	_, err = e.BrowserInteract(ctx, p, info.ID, []engine.BrowserAction{sleep, sleep, sleep}, true)
	wantErr(t, err, airlock.CodeInvalid, string(airlock.ReasonLimit))
	_, err = e.BrowserInteract(ctx, p, info.ID, []engine.BrowserAction{{Action: "wait_for_selector", Selector: "body", TimeoutMS: 2000}}, true)
	wantErr(t, err, airlock.CodeInvalid, string(airlock.ReasonLimit))
	if _, err := e.BrowserInteract(ctx, p, info.ID, []engine.BrowserAction{sleep, sleep}, true); err != nil {
		t.Errorf("two steps: %v", err)
	}
}

func doOp(ctx context.Context, e *engine.Engine, p airlock.Principal, id string, op engine.BrowserOp) error {
	_, err := e.BrowserDo(ctx, p, id, op)
	return err
}
