package wasmhost_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/engine"
	"github.com/airlockhq/airlock/internal/wasmhost"
)

// flipServer serves wasm for tenant through a Handler on loopback.
func flipServer(t testing.TB, en *engine.Engine, tenant string, wasm []byte, cfg wasmhost.ServeConfig) (*httptest.Server, *wasmhost.Handler) {
	t.Helper()
	return flipServerOn(t, newHost(t, en), tenant, wasm, cfg)
}

// flipServerOn serves wasm for tenant on host h.
func flipServerOn(t testing.TB, h *wasmhost.Host, tenant string, wasm []byte, cfg wasmhost.ServeConfig) (*httptest.Server, *wasmhost.Handler) {
	t.Helper()
	g, err := h.Load(context.Background(), airlock.Principal{Tenant: tenant, Instance: "served"}, "handler.wasm", wasm)
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	t.Cleanup(func() { g.Close(context.Background()) })
	cfg.Guest = g
	hd, err := wasmhost.NewHandler(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(hd)
	t.Cleanup(srv.Close)
	return srv, hd
}

func do(t testing.TB, method, url, body string) (int, http.Header, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

func flipEngine(t testing.TB) *engine.Engine {
	return newEngine(t, engine.Config{
		Profiles: map[string]engine.ProfileConfig{"served": {Deadline: 2 * time.Second, MemoryMiB: 64}},
		Tenants:  map[string]engine.TenantConfig{"served": {Profile: "served"}},
	})
}

func TestServeFlip(t *testing.T) {
	t.Parallel() // builds or compiles a guest: overlaps the others
	en := flipEngine(t)
	srv, hd := flipServer(t, en, "served", testGuest(t, "flip"), wasmhost.ServeConfig{MaxResponse: 1 << 20})

	for _, tc := range []struct {
		method, path, body string
		status             int
		want               string // body prefix
		header             string // a header the response must carry: name=value
	}{
		{"GET", "/plain", "", 200, "plain body", "Content-Type=text/plain; charset=utf-8"},
		{"GET", "/status", "", 201, "ok", "X-Thing=1"},
		{"POST", "/echo", strings.Repeat("x", 1000), 200, "got 1000 bytes", ""},
		{"GET", "/nothing", "", 404, "", ""},
		{"GET", "/fail", "", 502, `{"error":{"code":"upstream","reason":"guest_exit"`, ""},
		{"GET", "/spin", "", 502, `{"error":{"code":"timeout","reason":"cpu_deadline"`, ""},
		{"GET", "/big", "", 502, `{"error":{"code":"too_large","reason":"response"`, ""},
		{"POST", "/echo", strings.Repeat("x", 4<<20+1), 413, `{"error":{"code":"too_large","reason":"body"`, ""},
	} {
		t.Run(tc.method+tc.path, func(t *testing.T) {
			status, hdr, body := do(t, tc.method, srv.URL+tc.path, tc.body)
			if status != tc.status || !strings.HasPrefix(body, tc.want) {
				t.Fatalf("%d %q, want %d %q", status, cut(body), tc.status, tc.want)
			}
			if k, v, ok := strings.Cut(tc.header, "="); ok && hdr.Get(k) != v {
				t.Fatalf("header %s: %q, want %q", k, hdr.Get(k), v)
			}
			if status != 413 && hdr.Get("X-Airlock-Decision") == "" {
				t.Fatalf("no decision id on a %d", status)
			}
		})
	}
	// The 413 was refused before any guest ran: 7 runs for 8 requests.
	if n := hd.Runs(); n != 7 {
		t.Fatalf("%d guest runs, want 7", n)
	}
}

func cut(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}

func TestServeFlipClientRate(t *testing.T) {
	en := flipEngine(t)
	srv, hd := flipServer(t, en, "served", testGuest(t, "flip"), wasmhost.ServeConfig{ClientRate: 0.001, ClientBurst: 2})
	for i, want := range []int{200, 200, 429, 429} {
		status, hdr, _ := do(t, "GET", srv.URL+"/plain", "")
		if status != want {
			t.Fatalf("request %d: %d, want %d", i, status, want)
		}
		if status == 429 && hdr.Get("Retry-After") == "" {
			t.Fatalf("429 without Retry-After")
		}
	}
	// The rate check runs before the guest: two runs, not four.
	if n := hd.Runs(); n != 2 {
		t.Fatalf("%d guest runs, want 2", n)
	}
}

func TestServeFlipRevoked(t *testing.T) {
	en := flipEngine(t)
	srv, hd := flipServer(t, en, "served", testGuest(t, "flip"), wasmhost.ServeConfig{})
	if status, _, _ := do(t, "GET", srv.URL+"/plain", ""); status != 200 {
		t.Fatalf("before revocation: %d", status)
	}
	if err := en.Revoke(context.Background(), "served", "test"); err != nil {
		t.Fatal(err)
	}
	status, _, body := do(t, "GET", srv.URL+"/plain", "")
	if status != 503 || !strings.Contains(body, `"code":"revoked"`) {
		t.Fatalf("revoked: %d %s", status, body)
	}
	if n := hd.Runs(); n != 1 {
		t.Fatalf("%d guest runs, want 1", n)
	}
}

func TestServedGuestIsNoPivot(t *testing.T) {
	t.Parallel() // builds or compiles a guest: overlaps the others
	var internalHits atomic.Int64
	internal := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		internalHits.Add(1)
		w.Write([]byte("<title>internal admin</title>"))
	}))
	defer internal.Close()
	// The tenant has no floor exception: the internal server on loopback is
	// below the floor for it, whoever asks.
	en := newEngine(t, engine.Config{Tenants: map[string]engine.TenantConfig{"network": {Profile: "network"}}})
	srv, _ := flipServer(t, en, "network", guestWasm(t, "examples/guests/handler"), wasmhost.ServeConfig{})

	status, _, body := do(t, "GET", srv.URL+"/", "")
	if status != 200 || !strings.HasPrefix(body, "hello from a guest") {
		t.Fatalf("hello: %d %q", status, body)
	}
	for _, target := range []string{internal.URL + "/admin", "http://169.254.169.254/latest/meta-data/", "http://[::1]/", "http://10.0.0.1/"} {
		status, _, body = do(t, "GET", srv.URL+"/title?url="+target, "")
		if status != 502 || !strings.HasPrefix(body, "outbound=blocked code=denied") {
			t.Fatalf("pivot to %s: %d %q", target, status, body)
		}
	}
	if n := internalHits.Load(); n != 0 {
		t.Fatalf("the internal server got %d requests through the served guest", n)
	}
	denied := 0
	for _, r := range en.RecentDenials("network/served", 128) {
		if r.Broker == "fetch" {
			denied++
		}
	}
	if denied != 4 {
		t.Fatalf("%d fetch denials audited for network/served, want 4", denied)
	}
}

// result is one response of a request made off the test goroutine.
type result struct {
	status int
	hdr    http.Header
	body   string
	err    error
}

func get(c *http.Client, url string) result {
	resp, err := c.Get(url)
	if err != nil {
		return result{err: err}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return result{status: resp.StatusCode, hdr: resp.Header, body: string(b)}
}

// A revocation cancels the served instance already running for the
// principal: the request is answered 503 revoked at once, not at the
// guest's deadline with a 502.
func TestServeFlipRevokedMidFlight(t *testing.T) {
	en := newEngine(t, engine.Config{
		Profiles: map[string]engine.ProfileConfig{"served": {Deadline: 10 * time.Second, MemoryMiB: 64}},
		Tenants:  map[string]engine.TenantConfig{"served": {Profile: "served"}},
	})
	srv, hd := flipServer(t, en, "served", testGuest(t, "flip"), wasmhost.ServeConfig{})
	done := make(chan result, 1)
	go func() { done <- get(srv.Client(), srv.URL+"/spin") }()
	for hd.Runs() == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	if err := en.Revoke(context.Background(), "served", "test"); err != nil {
		t.Fatal(err)
	}
	var r result
	select {
	case r = <-done:
	case <-time.After(60 * time.Second): // hang guard only
		t.Fatal("no answer a minute after the revocation")
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.status != 503 || !strings.Contains(r.body, `"code":"revoked"`) {
		t.Fatalf("revoked mid-flight: %d %s, want 503 revoked", r.status, cut(r.body))
	}
	if err := en.FlushAudit(context.Background()); err != nil {
		t.Fatal(err)
	}
	recs, err := en.AuditQuery(context.Background(), airlock.AuditQuery{Broker: "serve", Reason: "revoked"})
	if err != nil || len(recs) != 1 || recs[0].Outcome != "deny" {
		t.Fatalf("serve decisions with reason revoked: %+v %v, want one deny", recs, err)
	}
}

// clientFrom is an HTTP client whose connections leave from the loopback
// address ip, so that one test plays several clients.
func clientFrom(t testing.TB, ip string) *http.Client {
	tr := &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}).DialContext, DisableKeepAlives: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// A flood from several client addresses to a handler that runs to its
// deadline never runs more instances at once than the host's budget: the
// rest are answered 503 with Retry-After before any guest runs.
func TestServeFlipInstanceBudget(t *testing.T) {
	en := newEngine(t, engine.Config{
		Profiles: map[string]engine.ProfileConfig{"served": {Deadline: time.Second, MemoryMiB: 64}},
		Tenants:  map[string]engine.TenantConfig{"served": {Profile: "served"}},
	})
	const capInstances, clients, perClient = 4, 3, 8
	h := newHostBudget(t, en, wasmhost.Budget{Instances: capInstances})
	// No per-client cap in the way: this is the host's budget alone (a
	// client's requests refused by the budget still pass through its
	// client count, so a client cap could answer 429 first).
	srv, hd := flipServerOn(t, h, "served", testGuest(t, "flip"), wasmhost.ServeConfig{ClientInstances: clients * perClient})
	var wg sync.WaitGroup
	results := make(chan result, clients*perClient)
	for c := range clients {
		cl := clientFrom(t, fmt.Sprintf("127.0.0.%d", c+2))
		for range perClient {
			wg.Add(1)
			go func() {
				defer wg.Done()
				results <- get(cl, srv.URL+"/spin")
			}()
		}
	}
	wg.Wait()
	close(results)
	ran, refused := 0, 0
	for r := range results {
		switch {
		case r.err != nil:
			t.Fatal(r.err)
		case r.status == 502 && strings.Contains(r.body, `"reason":"cpu_deadline"`):
			ran++
		case r.status == 503 && strings.Contains(r.body, `"reason":"guest_instances"`):
			refused++
			if r.hdr.Get("Retry-After") == "" {
				t.Fatalf("503 without Retry-After: %s", r.body)
			}
		default:
			t.Fatalf("%d %s", r.status, cut(r.body))
		}
	}
	if peak := h.Peak(); peak > capInstances || peak == 0 {
		t.Fatalf("%d instances at once, want 1 to %d", peak, capInstances)
	}
	if refused == 0 || int64(ran) != hd.Runs() {
		t.Fatalf("%d ran (%d runs counted), %d refused: want some refused before running", ran, hd.Runs(), refused)
	}
	t.Logf("%d ran, %d refused; at most %d at once", ran, refused, h.Peak())
}

// One client address holds at most ClientInstances instances at once; the
// others get 429 with Retry-After.
func TestServeFlipClientInstances(t *testing.T) {
	en := newEngine(t, engine.Config{
		Profiles: map[string]engine.ProfileConfig{"served": {Deadline: time.Second, MemoryMiB: 64}},
		Tenants:  map[string]engine.TenantConfig{"served": {Profile: "served"}},
	})
	h := newHostBudget(t, en, wasmhost.Budget{Instances: 8})
	srv, _ := flipServerOn(t, h, "served", testGuest(t, "flip"), wasmhost.ServeConfig{ClientInstances: 1})
	cl := clientFrom(t, "127.0.0.2")
	var wg sync.WaitGroup
	results := make(chan result, 3)
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results <- get(cl, srv.URL+"/spin")
		}()
	}
	wg.Wait()
	close(results)
	limited := 0
	for r := range results {
		if r.status == 429 && strings.Contains(r.body, `"reason":"client_instances"`) && r.hdr.Get("Retry-After") != "" {
			limited++
		}
	}
	if limited == 0 || h.Peak() != 1 {
		t.Fatalf("%d refused, %d at once: want one client held to one instance", limited, h.Peak())
	}
}
