package wasmhost_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
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
	h := newHost(t, en)
	g, err := h.Load(context.Background(), airlock.Principal{Tenant: tenant, Instance: "served"}, "handler.wasm", wasm)
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	t.Cleanup(func() { g.Close(context.Background()) })
	cfg.Guest, cfg.Admitter = g, en
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
