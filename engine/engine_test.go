package engine_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/engine"
	"github.com/airlockhq/airlock/internal/leakcheck"
	"github.com/airlockhq/airlock/internal/store"
)

// TestMain fails the package when the tests leave goroutines behind: every
// engine (batch writer, revocation poller, retention loop, store pools),
// server and connection a test starts must be gone when it ends.
func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" || os.Getenv(replicaEnv) != "" || os.Getenv(browserHelperEnv) != "" {
		os.Exit(m.Run()) // the kill -9 child: it never ends cleanly
	}
	// The parallel tests mostly wait, on Chromium, child processes, Redis
	// and product timeouts, and each has its own engine, servers and
	// directories; the timing-bound tests stay serial.
	leakcheck.RaiseParallel(4)
	os.Exit(leakcheck.Main(m, "engine", leakcheck.Options{}))
}

// ---------------------------------------------------------------------------
// Helpers

const testTimeout = 30 * time.Second

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// newEngine starts an engine that the test closes at its end. A config
// without a DataDir is in memory.
func newEngine(t *testing.T, cfg engine.Config, opts ...engine.Option) *engine.Engine {
	t.Helper()
	if cfg.DataDir == "" {
		cfg.InMemory = true
	}
	e, err := engine.New(context.Background(), cfg, opts...)
	if err != nil {
		t.Fatalf("engine.New: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := e.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return e
}

func envMap(m map[string]string) engine.Option {
	return engine.WithGetenv(func(k string) string { return m[k] })
}

// serveOn starts an HTTP server on ip (a loopback address), port chosen by
// the kernel.
func serveOn(t *testing.T, ip string, h http.Handler) *httptest.Server {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatalf("listen on %s: %v", ip, err)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

// counting wraps h and counts the requests it gets.
type counting struct {
	n atomic.Int64
	h http.Handler
}

func (c *counting) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.n.Add(1)
	c.h.ServeHTTP(w, r)
}

func okHandler(body string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, body) })
}

// slowServer answers /slow only when the request ends (or after 30 s), and
// everything else at once.
type slowServer struct {
	*httptest.Server
	started chan struct{}
	hits    atomic.Int64
}

func newSlowServer(t *testing.T) *slowServer {
	s := &slowServer{started: make(chan struct{}, 16)}
	release := make(chan struct{})
	s.Server = serveOn(t, "127.0.0.1", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		if r.URL.Path != "/slow" {
			io.WriteString(w, "fast")
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		s.started <- struct{}{}
		select {
		case <-r.Context().Done():
		case <-release:
		case <-time.After(30 * time.Second):
		}
		io.WriteString(w, "slow")
	}))
	t.Cleanup(func() { close(release) }) // runs before the server's Close
	return s
}

// tcpEcho serves one read-and-echo per connection on 127.0.0.1.
func tcpEcho(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(5 * time.Second))
				buf := make([]byte, 1024)
				n, _ := c.Read(buf)
				c.Write(buf[:n])
			})
		}
	})
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	return ln.Addr().String()
}

// udpEcho echoes datagrams on 127.0.0.1.
func udpEcho(t *testing.T) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 2048)
		for {
			n, addr, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			pc.WriteTo(buf[:n], addr)
		}
	}()
	t.Cleanup(func() { pc.Close(); <-done })
	return pc.LocalAddr().String()
}

// wantCode checks that err is an *airlock.Error with code and reason (""
// matches any reason), and returns it.
func wantCode(t *testing.T, err error, code airlock.Code, reason string) *airlock.Error {
	t.Helper()
	if err == nil {
		t.Fatalf("error = nil, want code %s reason %s", code, reason)
	}
	var ae *airlock.Error
	if !errors.As(err, &ae) {
		t.Fatalf("error %v (%T) is not an *airlock.Error", err, err)
	}
	if ae.Code != code || (reason != "" && ae.Reason != airlock.Reason(reason)) {
		t.Fatalf("error %q: code %q reason %q, want code %q reason %q", ae.Error(), ae.Code, ae.Reason, code, reason)
	}
	return ae
}

// wantErr is wantCode for the error of a broker call: it also carries the
// call's decision id.
func wantErr(t *testing.T, err error, code airlock.Code, reason string) *airlock.Error {
	t.Helper()
	ae := wantCode(t, err, code, reason)
	wantULID(t, ae.DecisionID)
	return ae
}

func wantULID(t *testing.T, id string) {
	t.Helper()
	const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
	if len(id) != 26 || strings.Trim(id, crockford) != "" {
		t.Fatalf("decision id %q is not a ULID", id)
	}
}

// decisionOf returns the decision id a facade call reported, from its
// result or its error.
func decisionOf(t *testing.T, id string, err error) string {
	t.Helper()
	if err != nil {
		var ae *airlock.Error
		if !errors.As(err, &ae) {
			t.Fatalf("error %v is not an *airlock.Error", err)
		}
		id = ae.DecisionID
	}
	wantULID(t, id)
	return id
}

// auditAll reads every persisted record matching q, paging.
func auditAll(t *testing.T, e *engine.Engine, q airlock.AuditQuery) []airlock.AuditRecord {
	t.Helper()
	q.Limit = store.MaxQueryLimit
	var out []airlock.AuditRecord
	for {
		page, err := e.AuditQuery(context.Background(), q)
		if err != nil {
			t.Fatalf("AuditQuery: %v", err)
		}
		out = append(out, page...)
		if len(page) < q.Limit {
			return out
		}
		q.BeforeID = page[len(page)-1].ID
	}
}

func flush(t *testing.T, e *engine.Engine) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.FlushAudit(ctx); err != nil {
		t.Fatalf("FlushAudit: %v", err)
	}
}

// scrape parses the engine's metrics with the Prometheus text parser.
func scrape(t *testing.T, e *engine.Engine) (map[string]*dto.MetricFamily, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	e.Metrics().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("metrics status %d", rec.Code)
	}
	text := rec.Body.String()
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatalf("metrics do not parse: %v\n%s", err, text)
	}
	return mfs, text
}

// metricValue returns the value of the series of family name whose labels
// include labels.
func metricValue(mfs map[string]*dto.MetricFamily, name string, labels map[string]string) (float64, bool) {
	mf, ok := mfs[name]
	if !ok {
		return 0, false
	}
series:
	for _, m := range mf.GetMetric() {
		got := map[string]string{}
		for _, lp := range m.GetLabel() {
			got[lp.GetName()] = lp.GetValue()
		}
		for k, v := range labels {
			if got[k] != v {
				continue series
			}
		}
		switch {
		case m.Counter != nil:
			return m.GetCounter().GetValue(), true
		case m.Gauge != nil:
			return m.GetGauge().GetValue(), true
		case m.Untyped != nil:
			return m.GetUntyped().GetValue(), true
		}
		return 0, true
	}
	return 0, false
}

func sumStats(st []airlock.AuditStat, broker string) int64 {
	var n int64
	for _, s := range st {
		if broker == "" || s.Broker == broker {
			n += s.Count
		}
	}
	return n
}

func statCount(st []airlock.AuditStat, broker, outcome, reason string) int64 {
	for _, s := range st {
		if s.Broker == broker && s.Outcome == outcome && s.Reason == reason {
			return s.Count
		}
	}
	return 0
}

// syncBuffer is a bytes.Buffer for a log handler written from many
// goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func jsonLogger(buf *syncBuffer) engine.Option {
	return engine.WithLogger(slog.New(slog.NewJSONHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
}

// ---------------------------------------------------------------------------
// 1. Capabilities per profile

// TestCapabilityAbsence calls every facade method as a tenant of every
// built-in profile: a capability the profile lacks is absent (denied,
// reason capability, before any network), one it grants lets the call
// proceed. The want column is ARCHITECTURE.md's profile table.
func TestCapabilityAbsence(t *testing.T) {
	web := &counting{h: okHandler("hello")}
	srv := serveOn(t, "127.0.0.1", web)
	tcpAddr, udpAddr := tcpEcho(t), udpEcho(t)
	tlsSrv := httptest.NewUnstartedServer(okHandler("tls"))
	tlsSrv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes are expected
	tlsSrv.StartTLS()
	t.Cleanup(tlsSrv.Close)
	tlsAddr := strings.TrimPrefix(tlsSrv.URL, "https://")

	profiles := []string{"compute", "minimal", "network", "posix"}
	tenants := map[string]engine.TenantConfig{}
	for _, p := range profiles {
		tenants[p] = engine.TenantConfig{Profile: p, Secrets: map[string]engine.SecretRef{"k": {Env: "SECRET_K"}}, Routes: []string{engine.AllRoutes}}
	}
	key := []byte("sign-key-for-capability-test")
	e := newEngine(t, engine.Config{
		DefaultTenant: "posix",
		Tenants:       tenants,
		Egress:        engine.EgressConfig{Exceptions: []string{"127.0.0.1"}},
		Routes:        map[string]engine.RouteConfig{"web": {BaseURL: srv.URL, Header: "X-Key", ValueEnv: "ROUTE_KEY"}},
	}, envMap(map[string]string{"SECRET_K": string(key), "ROUTE_KEY": "route-credential"}))

	type method struct {
		name string
		call func(ctx context.Context, p airlock.Principal) error
	}
	methods := []method{
		{"http", func(ctx context.Context, p airlock.Principal) error {
			resp, err := e.HTTP(ctx, p, airlock.HTTPRequest{URL: srv.URL + "/"})
			if err == nil && (resp.Status != 200 || string(resp.Body) != "hello") {
				return fmt.Errorf("got %d %q", resp.Status, resp.Body)
			}
			return err
		}},
		{"tcp", func(ctx context.Context, p airlock.Principal) error {
			resp, err := e.Exchange(ctx, p, airlock.ExchangeRequest{Lane: airlock.LaneTCP, Target: tcpAddr, Data: []byte("ping\n"), Idle: 50 * time.Millisecond})
			if err == nil && string(resp.Data) != "ping\n" {
				return fmt.Errorf("got %q", resp.Data)
			}
			return err
		}},
		{"udp", func(ctx context.Context, p airlock.Principal) error {
			resp, err := e.Exchange(ctx, p, airlock.ExchangeRequest{Lane: airlock.LaneUDP, Target: udpAddr, Data: []byte("dgram")})
			if err == nil && string(resp.Data) != "dgram" {
				return fmt.Errorf("got %q", resp.Data)
			}
			return err
		}},
		{"tls", func(ctx context.Context, p airlock.Principal) error {
			// The test server's certificate is not in the system roots: a
			// call that proceeds fails the handshake, with reason tls.
			_, err := e.Exchange(ctx, p, airlock.ExchangeRequest{Lane: airlock.LaneTLS, Target: tlsAddr, Data: []byte("x")})
			if airlock.ReasonOf(err) == "tls" {
				return nil
			}
			if err == nil {
				return errors.New("TLS exchange with an untrusted certificate succeeded")
			}
			return err
		}},
		{"sign", func(ctx context.Context, p airlock.Principal) error {
			sum, _, err := e.Sign(ctx, p, "k", []byte("data"))
			m := hmac.New(sha256.New, key)
			m.Write([]byte("data"))
			if err == nil && !hmac.Equal(sum, m.Sum(nil)) {
				return errors.New("wrong HMAC")
			}
			return err
		}},
		{"route", func(ctx context.Context, p airlock.Principal) error {
			resp, err := e.Route(ctx, p, airlock.RouteRequest{Name: "web", Path: "/r"})
			if err == nil && resp.Status != 200 {
				return fmt.Errorf("got %d", resp.Status)
			}
			return err
		}},
	}
	// ARCHITECTURE.md: compute none; minimal tcp, udp, tls, secrets;
	// network minimal + http, browse, routes; posix network + parallel,
	// browser.
	want := map[string][]string{
		"compute": {},
		"minimal": {"tcp", "udp", "tls", "sign"},
		"network": {"tcp", "udp", "tls", "sign", "http", "route"},
		"posix":   {"tcp", "udp", "tls", "sign", "http", "route"},
	}
	for _, profile := range profiles {
		for _, m := range methods {
			t.Run(profile+"/"+m.name, func(t *testing.T) {
				ctx := testCtx(t)
				p := airlock.Principal{Tenant: profile, Instance: "cap-test"}
				hits := web.n.Load()
				err := m.call(ctx, p)
				if slices.Contains(want[profile], m.name) {
					if err != nil {
						t.Fatalf("%s as %s: %v, want the call to proceed", m.name, profile, err)
					}
					return
				}
				wantErr(t, err, airlock.CodeDenied, "capability")
				if web.n.Load() != hits {
					t.Error("a call refused for a missing capability reached the server")
				}
			})
		}
	}
	for _, p := range profiles {
		if got := e.Profile(p); got != p {
			t.Errorf("Profile(%q) = %q", p, got)
		}
	}
}

func TestProfileConfig(t *testing.T) {
	tests := []struct {
		name    string
		cfg     engine.Config
		wantErr airlock.Code
	}{
		{"unknown profile", engine.Config{DefaultTenant: "a", Tenants: map[string]engine.TenantConfig{"a": {Profile: "superuser"}}}, airlock.CodeInvalid},
		{"unknown capability", engine.Config{Profiles: map[string]engine.ProfileConfig{"x": {Capabilities: []string{"sockets"}}}}, airlock.CodeInvalid},
		{"capability in another case", engine.Config{Profiles: map[string]engine.ProfileConfig{"x": {Capabilities: []string{"HTTP"}}}}, airlock.CodeInvalid},
		{"default tenant missing", engine.Config{DefaultTenant: "b", Tenants: map[string]engine.TenantConfig{"a": {}}}, airlock.CodeInvalid},
		{"plain token", engine.Config{Tenants: map[string]engine.TenantConfig{"local": {Tokens: []string{"alk_plaintext"}}}}, airlock.CodeInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.InMemory = true
			e, err := engine.New(context.Background(), tt.cfg)
			if err == nil {
				e.Close(context.Background())
				t.Fatal("New succeeded")
			}
			if code := airlock.CodeOf(err); code != tt.wantErr {
				t.Fatalf("New: %v (code %q), want code %q", err, code, tt.wantErr)
			}
			if err := engine.Validate(tt.cfg); airlock.CodeOf(err) != tt.wantErr {
				t.Errorf("Validate: %v, want code %q", err, tt.wantErr)
			}
		})
	}

	t.Run("custom profile", func(t *testing.T) {
		ctx := testCtx(t)
		e := newEngine(t, engine.Config{
			DefaultTenant: "signer",
			Profiles:      map[string]engine.ProfileConfig{"sign-only": {Capabilities: []string{"secrets"}, MemoryMiB: 32}},
			Tenants: map[string]engine.TenantConfig{
				"signer": {Profile: "sign-only", Secrets: map[string]engine.SecretRef{"k": {Env: "K"}}},
				"anon":   {Secrets: map[string]engine.SecretRef{"k": {Env: "K"}}}, // no profile: compute
				"local":  {},                                                      // no profile: posix
			},
		}, envMap(map[string]string{"K": "key"}))
		if got := e.Profile("signer"); got != "sign-only" {
			t.Errorf("Profile(signer) = %q", got)
		}
		if got := e.Profile("anon"); got != "compute" {
			t.Errorf("Profile(anon) = %q, want compute for a tenant without a profile", got)
		}
		if got := e.Profile("local"); got != "posix" {
			t.Errorf("Profile(local) = %q, want posix", got)
		}
		if _, _, err := e.Sign(ctx, airlock.Principal{Tenant: "signer"}, "k", []byte("x")); err != nil {
			t.Errorf("Sign as sign-only: %v", err)
		}
		_, err := e.HTTP(ctx, airlock.Principal{Tenant: "signer"}, airlock.HTTPRequest{URL: "http://10.0.0.1/"})
		wantErr(t, err, airlock.CodeDenied, "capability")
		_, err = e.Exchange(ctx, airlock.Principal{Tenant: "signer"}, airlock.ExchangeRequest{Lane: "tcp", Target: "10.0.0.1:80"})
		wantErr(t, err, airlock.CodeDenied, "capability")
		_, _, err = e.Sign(ctx, airlock.Principal{Tenant: "anon"}, "k", []byte("x"))
		wantErr(t, err, airlock.CodeDenied, "capability")
	})
}

// ---------------------------------------------------------------------------
// 2. Policy intersection

// TestPolicyIntersection: the effective policy is the global policy ∩ the
// tenant's lists (its exceptions lifting the floor for it alone) ∩ the
// request's narrowing, which can only narrow.
func TestPolicyIntersection(t *testing.T) {
	var servers [4]*counting
	var urls [4]string
	for i := 1; i <= 3; i++ {
		servers[i] = &counting{h: okHandler(fmt.Sprint("server ", i))}
		urls[i] = serveOn(t, fmt.Sprintf("127.0.0.%d", i), servers[i]).URL + "/"
	}
	port1 := strings.TrimPrefix(urls[1], "http://127.0.0.1:")
	port1 = strings.TrimSuffix(port1, "/")
	e := newEngine(t, engine.Config{
		DefaultTenant: "alpha",
		Egress: engine.EgressConfig{
			Deny:    []string{"127.0.0.2", "*.blocked.test"},
			Resolve: map[string][]string{"svc.test": {"127.0.0.1"}, "api.blocked.test": {"127.0.0.1"}},
		},
		Tenants: map[string]engine.TenantConfig{
			// alpha may reach 127.0.0.1-3 past the floor, but its allow-list
			// names only .1 and .2.
			"alpha": {Profile: "network", Exceptions: []string{"127.0.0.1", "127.0.0.2", "127.0.0.3"}, Allow: []string{"127.0.0.1", "127.0.0.2"}},
			// gamma: names, no allow-list.
			"gamma": {Profile: "network", Exceptions: []string{"127.0.0.1"}, Deny: []string{"127.0.0.1:1"}},
			// beta: no exceptions of its own.
			"beta": {Profile: "network"},
		},
	})
	u1Name := "http://svc.test:" + port1 + "/"
	tests := []struct {
		name   string
		tenant string
		url    string
		narrow *airlock.Narrowing
		server int    // the server that must answer; 0 when denied
		reason string // the denial's reason
	}{
		{name: "allowed", tenant: "alpha", url: urls[1], server: 1},
		{name: "global deny beats tenant allow and exception", tenant: "alpha", url: urls[2], reason: "deny_list"},
		{name: "exception never widens the allow-list", tenant: "alpha", url: urls[3], reason: "not_allowed"},
		{name: "floor without exception", tenant: "alpha", url: "http://10.0.0.1/", reason: "private"},
		{name: "metadata is never excepted", tenant: "alpha", url: "http://169.254.169.254/", reason: "metadata"},
		{name: "narrowing to an allowed target", tenant: "alpha", url: urls[1], narrow: &airlock.Narrowing{Allow: []string{"127.0.0.1"}}, server: 1},
		{name: "narrowing excludes the target", tenant: "alpha", url: urls[1], narrow: &airlock.Narrowing{Allow: []string{"127.0.0.3"}}, reason: "not_allowed"},
		{name: "narrowing cannot widen the allow-list", tenant: "alpha", url: urls[3], narrow: &airlock.Narrowing{Allow: []string{"127.0.0.3"}}, reason: "not_allowed"},
		{name: "narrowing cannot lift a global deny", tenant: "alpha", url: urls[2], narrow: &airlock.Narrowing{Allow: []string{"127.0.0.2"}}, reason: "deny_list"},
		{name: "narrowing cannot lift the floor", tenant: "alpha", url: "http://10.0.0.1/", narrow: &airlock.Narrowing{Allow: []string{"10.0.0.1"}}, reason: "private"},
		{name: "narrowing deny applies", tenant: "alpha", url: urls[1], narrow: &airlock.Narrowing{Deny: []string{"127.0.0.1"}}, reason: "deny_list"},
		{name: "narrowing deny by port", tenant: "alpha", url: urls[1], narrow: &airlock.Narrowing{Deny: []string{"*:" + port1}}, reason: "deny_list"},
		{name: "name allowed", tenant: "gamma", url: u1Name, server: 1},
		{name: "name narrowed away", tenant: "gamma", url: u1Name, narrow: &airlock.Narrowing{Allow: []string{"other.test"}}, reason: "not_allowed"},
		{name: "name narrowing deny wildcard", tenant: "gamma", url: u1Name, narrow: &airlock.Narrowing{Deny: []string{"*.test"}}, reason: "deny_list"},
		{name: "name narrowed to itself", tenant: "gamma", url: u1Name, narrow: &airlock.Narrowing{Allow: []string{"svc.test"}}, server: 1},
		{name: "global name deny", tenant: "gamma", url: "http://api.blocked.test:" + port1 + "/", reason: "deny_list"},
		{name: "address of another tenant's exception", tenant: "gamma", url: urls[3], reason: "loopback"},
		{name: "exceptions do not leak to another tenant", tenant: "beta", url: urls[1], reason: "loopback"},
		{name: "narrowing cannot borrow an exception", tenant: "beta", url: urls[1], narrow: &airlock.Narrowing{Allow: []string{"127.0.0.1"}}, reason: "loopback"},
		{name: "beta reaches nothing on loopback by name", tenant: "beta", url: u1Name, reason: "internal_address"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testCtx(t)
			var before [4]int64
			for i := 1; i <= 3; i++ {
				before[i] = servers[i].n.Load()
			}
			resp, err := e.HTTP(ctx, airlock.Principal{Tenant: tt.tenant}, airlock.HTTPRequest{URL: tt.url, Narrow: tt.narrow})
			if tt.server != 0 {
				if err != nil {
					t.Fatalf("HTTP: %v", err)
				}
				if want := fmt.Sprint("server ", tt.server); string(resp.Body) != want {
					t.Errorf("body %q, want %q", resp.Body, want)
				}
				wantULID(t, resp.DecisionID)
				return
			}
			wantErr(t, err, airlock.CodeDenied, tt.reason)
			for i := 1; i <= 3; i++ {
				if servers[i].n.Load() != before[i] {
					t.Errorf("server %d was reached by a denied call", i)
				}
			}
		})
	}

	t.Run("exchange narrowing", func(t *testing.T) {
		ctx := testCtx(t)
		addr := tcpEcho(t)
		_, err := e.Exchange(ctx, airlock.Principal{Tenant: "gamma"}, airlock.ExchangeRequest{Lane: "tcp", Target: addr, Data: []byte("x"),
			Narrow: &airlock.Narrowing{Deny: []string{"127.0.0.0/8"}}})
		wantErr(t, err, airlock.CodeDenied, "deny_list")
		resp, err := e.Exchange(ctx, airlock.Principal{Tenant: "gamma"}, airlock.ExchangeRequest{Lane: "tcp", Target: addr, Data: []byte("x"),
			Narrow: &airlock.Narrowing{Allow: []string{addr}}, Idle: 50 * time.Millisecond})
		if err != nil || string(resp.Data) != "x" {
			t.Fatalf("exchange narrowed to its own target: %v %q", err, resp)
		}
		_, err = e.Exchange(ctx, airlock.Principal{Tenant: "gamma"}, airlock.ExchangeRequest{Lane: "tcp", Target: addr, Data: []byte("x"),
			Narrow: &airlock.Narrowing{Allow: []string{"[bad"}}})
		wantErr(t, err, airlock.CodeInvalid, "")
	})

	t.Run("global allow-list", func(t *testing.T) {
		ctx := testCtx(t)
		e := newEngine(t, engine.Config{
			DefaultTenant: "delta",
			Egress:        engine.EgressConfig{Allow: []string{"127.0.0.1"}},
			Tenants:       map[string]engine.TenantConfig{"delta": {Profile: "network", Exceptions: []string{"127.0.0.1", "127.0.0.3"}}},
		})
		if _, err := e.HTTP(ctx, airlock.Principal{Tenant: "delta"}, airlock.HTTPRequest{URL: urls[1]}); err != nil {
			t.Errorf("a target on the global allow-list: %v", err)
		}
		_, err := e.HTTP(ctx, airlock.Principal{Tenant: "delta"}, airlock.HTTPRequest{URL: urls[3]})
		wantErr(t, err, airlock.CodeDenied, "not_allowed")
	})
}

// ---------------------------------------------------------------------------
// 3. The cadence end to end

// TestDenialTrace follows one denial from the caller's typed error to the
// persistent audit record, the deny ring, the metrics and the log; and
// checks that every call makes exactly one decision.
func TestDenialTrace(t *testing.T) {
	target := &counting{h: okHandler("never")}
	other := serveOn(t, "127.0.0.2", target)
	origin := serveOn(t, "127.0.0.1", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/redirect" {
			http.Redirect(w, r, other.URL+"/landed", http.StatusFound)
			return
		}
		io.WriteString(w, "ok")
	}))
	var logs syncBuffer
	e := newEngine(t, engine.Config{
		Tenants: map[string]engine.TenantConfig{"local": {Profile: "posix", Exceptions: []string{"127.0.0.1"}}},
	}, jsonLogger(&logs))
	p := airlock.Principal{Tenant: "local", Instance: "trace"}

	tests := []struct {
		name   string
		url    string
		reason airlock.Reason
	}{
		{"private address", "http://10.0.0.1/", "private"},
		{"redirect to loopback", origin.URL + "/redirect", "loopback"},
	}
	ids := map[string]string{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testCtx(t)
			_, err := e.HTTP(ctx, p, airlock.HTTPRequest{URL: tt.url})
			ae := wantErr(t, err, airlock.CodeDenied, string(tt.reason))
			ids[string(tt.reason)] = ae.DecisionID
			if pub := airlock.Public(err, ""); pub.DecisionID != ae.DecisionID || pub.Code != airlock.CodeDenied {
				t.Errorf("Public(err) = %+v, want the same code and decision id", pub)
			}
			flush(t, e)
			var found []airlock.AuditRecord
			for _, r := range auditAll(t, e, airlock.AuditQuery{Principal: "local/trace"}) {
				if r.ID == ae.DecisionID {
					found = append(found, r)
				}
			}
			if len(found) != 1 {
				t.Fatalf("%d persisted records with decision id %s, want exactly 1", len(found), ae.DecisionID)
			}
			r := found[0]
			if r.Outcome != "deny" || r.Code != "denied" || airlock.Reason(r.Reason) != tt.reason || r.Broker != "http" || r.Tenant != "local" || r.Instance != "trace" {
				t.Errorf("persisted record = %+v", r)
			}
			if r.Target != tt.url {
				t.Errorf("record target %q, want %q", r.Target, tt.url)
			}
			// The filtered query finds it too.
			byReason, err := e.AuditQuery(ctx, airlock.AuditQuery{Outcome: "deny", Reason: string(tt.reason), Broker: "http"})
			if err != nil || len(byReason) != 1 || byReason[0].ID != ae.DecisionID {
				t.Errorf("AuditQuery(deny, %s) = %v, %v; want just the record", tt.reason, byReason, err)
			}
			ring := e.RecentDenials("", 0)
			if len(ring) == 0 || ring[0].ID != ae.DecisionID || airlock.Reason(ring[0].Reason) != tt.reason {
				t.Errorf("RecentDenials()[0] = %+v, want the denial", ring)
			}
			if pr := e.RecentDenials("local/trace", 1); len(pr) != 1 || pr[0].ID != ae.DecisionID {
				t.Errorf("RecentDenials(local/trace, 1) = %+v", pr)
			}
		})
	}
	if target.n.Load() != 0 {
		t.Error("the redirect target on 127.0.0.2 was reached")
	}

	// The structured log has one record per decision, with its id.
	for reason, id := range ids {
		var n int
		for line := range strings.SplitSeq(logs.String(), "\n") {
			if !strings.Contains(line, id) {
				continue
			}
			var m map[string]any
			if err := json.Unmarshal([]byte(line), &m); err != nil {
				t.Fatalf("log line is not JSON: %q", line)
			}
			if m["msg"] == "broker decision" {
				n++
				if m["outcome"] != "deny" || m["reason"] != reason || m["level"] != "WARN" {
					t.Errorf("log record = %s", line)
				}
			}
		}
		if n != 1 {
			t.Errorf("%d broker decision log records for %s, want 1", n, id)
		}
	}

	mfs, _ := scrape(t, e)
	for _, reason := range []string{"private", "loopback"} {
		v, ok := metricValue(mfs, "airlock_broker_calls_total", map[string]string{"broker": "http", "outcome": "deny", "reason": reason})
		if !ok || v != 1 {
			t.Errorf("airlock_broker_calls_total{broker=http,outcome=deny,reason=%s} = %v (present %v), want 1", reason, v, ok)
		}
	}
	if v, ok := metricValue(mfs, "airlock_build_info", nil); !ok || v != 1 {
		t.Errorf("airlock_build_info = %v (present %v), want 1", v, ok)
	}
	for _, name := range []string{"airlock_broker_call_duration_seconds", "airlock_audit_written_total", "airlock_audit_dropped_total", "airlock_broker_calls_in_flight"} {
		if _, ok := mfs[name]; !ok {
			t.Errorf("metric %s missing", name)
		}
	}
}

// TestOneDecisionPerCall: N calls of every kind and outcome make N decision
// records, in the counters, the metrics and the persistent log.
func TestOneDecisionPerCall(t *testing.T) {
	srv := serveOn(t, "127.0.0.1", okHandler("ok"))
	e := newEngine(t, engine.Config{
		DefaultTenant: "t",
		Tenants: map[string]engine.TenantConfig{
			"t":    {Profile: "posix", Exceptions: []string{"127.0.0.1"}, Secrets: map[string]engine.SecretRef{"k": {Env: "K"}}, Routes: []string{"r"}},
			"comp": {Profile: "compute"},
		},
		Routes: map[string]engine.RouteConfig{"r": {BaseURL: srv.URL, Header: "X-Key", ValueEnv: "K"}},
	}, envMap(map[string]string{"K": "secret"}))
	t1, comp := airlock.Principal{Tenant: "t"}, airlock.Principal{Tenant: "comp"}
	calls := []struct {
		name    string
		broker  string
		outcome string
		reason  airlock.Reason
		call    func(ctx context.Context) (string, error)
	}{
		{"http allowed", "http", "allow", "ok", func(ctx context.Context) (string, error) {
			r, err := e.HTTP(ctx, t1, airlock.HTTPRequest{URL: srv.URL})
			if err != nil {
				return "", err
			}
			return r.DecisionID, nil
		}},
		{"http denied", "http", "deny", "private", func(ctx context.Context) (string, error) {
			_, err := e.HTTP(ctx, t1, airlock.HTTPRequest{URL: "http://10.0.0.1/"})
			return "", err
		}},
		{"http refused scheme", "http", "error", "scheme", func(ctx context.Context) (string, error) {
			_, err := e.HTTP(ctx, t1, airlock.HTTPRequest{URL: "ftp://x/"})
			return "", err
		}},
		{"http capability", "http", "deny", "capability", func(ctx context.Context) (string, error) {
			_, err := e.HTTP(ctx, comp, airlock.HTTPRequest{URL: srv.URL})
			return "", err
		}},
		{"sign", "sign", "allow", "ok", func(ctx context.Context) (string, error) {
			_, id, err := e.Sign(ctx, t1, "k", []byte("x"))
			return id, err
		}},
		{"sign unknown secret", "sign", "error", "secret", func(ctx context.Context) (string, error) {
			_, id, err := e.Sign(ctx, t1, "nope", []byte("x"))
			return id, err
		}},
		{"route", "route", "allow", "ok", func(ctx context.Context) (string, error) {
			r, err := e.Route(ctx, t1, airlock.RouteRequest{Name: "r", Path: "/"})
			if err != nil {
				return "", err
			}
			return r.DecisionID, nil
		}},
		{"exchange denied", "tcp", "deny", "private", func(ctx context.Context) (string, error) {
			_, err := e.Exchange(ctx, t1, airlock.ExchangeRequest{Lane: "tcp", Target: "10.0.0.1:25"})
			return "", err
		}},
		{"exchange bad lane", "exchange", "error", "lane", func(ctx context.Context) (string, error) {
			_, err := e.Exchange(ctx, t1, airlock.ExchangeRequest{Lane: "sctp", Target: "10.0.0.1:25"})
			return "", err
		}},
		{"unknown tenant", "sign", "deny", "unknown_tenant", func(ctx context.Context) (string, error) {
			_, id, err := e.Sign(ctx, airlock.Principal{Tenant: "ghost"}, "k", nil)
			return id, err
		}},
	}
	const rounds = 7
	ctx := testCtx(t)
	ids := map[string]bool{}
	for round := range rounds {
		for _, c := range calls {
			id, err := c.call(ctx)
			if (err == nil) != (c.outcome == "allow") {
				t.Fatalf("round %d %s: err = %v", round, c.name, err)
			}
			if c.outcome != "allow" && airlock.ReasonOf(err) != c.reason {
				t.Fatalf("%s: reason %q, want %q (%v)", c.name, airlock.ReasonOf(err), c.reason, err)
			}
			id = decisionOf(t, id, err)
			if ids[id] {
				t.Fatalf("decision id %s reused", id)
			}
			ids[id] = true
		}
	}
	want := int64(rounds * len(calls))
	counters := e.Counters()
	if got := sumStats(counters, ""); got != want {
		t.Errorf("Counters() total %d, want %d: %+v", got, want, counters)
	}
	flush(t, e)
	stats, err := e.AuditStats(ctx, time.Time{}, "")
	if err != nil {
		t.Fatal(err)
	}
	if got := sumStats(stats, ""); got != want {
		t.Errorf("AuditStats total %d, want %d: %+v", got, want, stats)
	}
	mfs, _ := scrape(t, e)
	for _, c := range calls {
		if got := statCount(counters, c.broker, c.outcome, string(c.reason)); got != rounds {
			t.Errorf("%s: counter %s/%s/%s = %d, want %d", c.name, c.broker, c.outcome, c.reason, got, rounds)
		}
		if got := statCount(stats, c.broker, c.outcome, string(c.reason)); got != rounds {
			t.Errorf("%s: persisted %s/%s/%s = %d, want %d", c.name, c.broker, c.outcome, c.reason, got, rounds)
		}
		if v, _ := metricValue(mfs, "airlock_broker_calls_total", map[string]string{"broker": c.broker, "outcome": c.outcome, "reason": string(c.reason)}); v != rounds {
			t.Errorf("%s: airlock_broker_calls_total = %v, want %d", c.name, v, rounds)
		}
	}
	recs := auditAll(t, e, airlock.AuditQuery{})
	if int64(len(recs)) != want {
		t.Fatalf("%d persisted records, want %d", len(recs), want)
	}
	for _, r := range recs {
		if !ids[r.ID] {
			t.Errorf("persisted record %s matches no call", r.ID)
		}
	}
}

// ---------------------------------------------------------------------------
// 4. Revocation

func TestRevocationMidFlight(t *testing.T) {
	tests := []struct {
		subject   string
		victim    airlock.Principal
		bystander airlock.Principal
	}{
		{"acme", airlock.Principal{Tenant: "acme", Instance: "i1"}, airlock.Principal{Tenant: "other", Instance: "i1"}},
		{"acme/i1", airlock.Principal{Tenant: "acme", Instance: "i1"}, airlock.Principal{Tenant: "acme", Instance: "i2"}},
	}
	for _, tt := range tests {
		t.Run(tt.subject, func(t *testing.T) {
			ctx := testCtx(t)
			slow := newSlowServer(t)
			tc := engine.TenantConfig{Profile: "network", Exceptions: []string{"127.0.0.1"}}
			e := newEngine(t, engine.Config{DefaultTenant: "acme", Tenants: map[string]engine.TenantConfig{"acme": tc, "other": tc}})

			done := make(chan error, 1)
			go func() {
				_, err := e.HTTP(ctx, tt.victim, airlock.HTTPRequest{URL: slow.URL + "/slow"})
				done <- err
			}()
			select {
			case <-slow.started:
			case <-time.After(10 * time.Second):
				t.Fatal("the slow call never reached the server")
			}
			if err := e.Revoke(ctx, tt.subject, "compromised"); err != nil {
				t.Fatalf("Revoke: %v", err)
			}
			var midflight *airlock.Error
			select {
			case err := <-done:
				midflight = wantErr(t, err, airlock.CodeRevoked, "revoked")
			case <-time.After(5 * time.Second):
				t.Fatal("the call in flight was not cancelled by the revocation")
			}
			if got := e.Revocations(); !slices.Contains(got, tt.subject) {
				t.Errorf("Revocations() = %v, want %s listed", got, tt.subject)
			}

			hits := slow.hits.Load()
			_, err := e.HTTP(ctx, tt.victim, airlock.HTTPRequest{URL: slow.URL + "/fast"})
			wantErr(t, err, airlock.CodeRevoked, "revoked")
			if slow.hits.Load() != hits {
				t.Error("a revoked principal's next call reached the server")
			}
			if _, err := e.HTTP(ctx, tt.bystander, airlock.HTTPRequest{URL: slow.URL + "/fast"}); err != nil {
				t.Errorf("bystander %s: %v", tt.bystander, err)
			}

			if err := e.Unrevoke(ctx, tt.subject); err != nil {
				t.Fatalf("Unrevoke: %v", err)
			}
			if resp, err := e.HTTP(ctx, tt.victim, airlock.HTTPRequest{URL: slow.URL + "/fast"}); err != nil || string(resp.Body) != "fast" {
				t.Fatalf("after Unrevoke: %v", err)
			}
			wantCode(t, e.Unrevoke(ctx, tt.subject), airlock.CodeNotFound, "")

			flush(t, e)
			admin := auditAll(t, e, airlock.AuditQuery{Broker: "admin"})
			var actions []string
			for _, r := range slices.Backward(admin) {
				if r.Target == tt.subject {
					actions = append(actions, r.Reason+"/"+r.Outcome)
				}
			}
			if want := []string{"revoke/allow", "unrevoke/allow", "unrevoke/error"}; !slices.Equal(actions, want) {
				t.Errorf("admin audit records for %s = %v, want %v", tt.subject, actions, want)
			}
			recs := auditAll(t, e, airlock.AuditQuery{Outcome: "deny"})
			var mid *airlock.AuditRecord
			for i := range recs {
				if recs[i].ID == midflight.DecisionID {
					mid = &recs[i]
				}
			}
			if mid == nil || mid.Code != "revoked" || mid.Reason != "revoked" {
				t.Errorf("audit record of the cancelled call = %+v, want a revoked denial", mid)
			}
		})
	}
}

func TestRevokeSubjects(t *testing.T) {
	ctx := testCtx(t)
	e := newEngine(t, engine.Config{})
	for _, subject := range []string{"", "a/b/c", "a b", "/x", "x/", "a\nb"} {
		wantCode(t, e.Revoke(ctx, subject, "r"), airlock.CodeInvalid, "principal")
		wantCode(t, e.Unrevoke(ctx, subject), airlock.CodeInvalid, "principal")
	}
	if got := e.Revocations(); len(got) != 0 {
		t.Errorf("Revocations() = %v after invalid subjects", got)
	}
	// A tenant that is not configured can still be revoked: the set is
	// shared with processes that may know it.
	if err := e.Revoke(ctx, "elsewhere", "r"); err != nil {
		t.Errorf("Revoke(elsewhere): %v", err)
	}
}

// TestRevocationCrossProcess: two engines sharing a data directory, as
// serve and mcp would; a revocation made by one reaches the other, and its
// calls in flight, within a second.
func TestRevocationCrossProcess(t *testing.T) {
	ctx := testCtx(t)
	dir := t.TempDir()
	slow := newSlowServer(t)
	cfg := engine.Config{
		DataDir:       dir,
		DefaultTenant: "acme",
		Tenants:       map[string]engine.TenantConfig{"acme": {Profile: "network", Exceptions: []string{"127.0.0.1"}}},
	}
	e1, e2 := newEngine(t, cfg), newEngine(t, cfg)
	p := airlock.Principal{Tenant: "acme", Instance: "worker"}

	done := make(chan error, 1)
	go func() {
		_, err := e2.HTTP(ctx, p, airlock.HTTPRequest{URL: slow.URL + "/slow"})
		done <- err
	}()
	<-slow.started

	if err := e1.Revoke(ctx, "acme", "from the other process"); err != nil {
		t.Fatal(err)
	}
	revoked := time.Now()
	deadline := revoked.Add(time.Second)
	for !slices.Contains(e2.Revocations(), "acme") {
		if time.Now().After(deadline) {
			t.Fatalf("the second engine did not see the revocation within 1 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("revocation seen by the second engine after %s", time.Since(revoked).Round(time.Millisecond))
	select {
	case err := <-done:
		wantErr(t, err, airlock.CodeRevoked, "revoked")
	case <-time.After(time.Until(deadline) + 500*time.Millisecond):
		t.Fatal("the second engine's call in flight was not cancelled")
	}
	_, err := e2.HTTP(ctx, p, airlock.HTTPRequest{URL: slow.URL + "/fast"})
	wantErr(t, err, airlock.CodeRevoked, "revoked")

	if err := e1.Unrevoke(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(time.Second)
	for len(e2.Revocations()) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the second engine did not see the unrevocation within 1 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := e2.HTTP(ctx, p, airlock.HTTPRequest{URL: slow.URL + "/fast"}); err != nil {
		t.Errorf("after unrevoke: %v", err)
	}
	// Both processes write to the one audit log.
	flush(t, e1)
	flush(t, e2)
	admin := auditAll(t, e2, airlock.AuditQuery{Broker: "admin"})
	if len(admin) != 2 {
		t.Errorf("admin records seen through the second engine: %d, want 2 (revoke, unrevoke)", len(admin))
	}
}

// ---------------------------------------------------------------------------
// 5. Rate limits

func TestTenantRateLimit(t *testing.T) {
	ctx := testCtx(t)
	tc := engine.TenantConfig{Profile: "minimal", Rate: 5, Burst: 5, Secrets: map[string]engine.SecretRef{"k": {Env: "K"}}}
	e := newEngine(t, engine.Config{DefaultTenant: "a", Tenants: map[string]engine.TenantConfig{"a": tc, "b": tc}}, envMap(map[string]string{"K": "key"}))
	for i := range 5 {
		if _, _, err := e.Sign(ctx, airlock.Principal{Tenant: "a", Instance: fmt.Sprint(i)}, "k", nil); err != nil {
			t.Fatalf("call %d: %v", i+1, err)
		}
	}
	_, _, err := e.Sign(ctx, airlock.Principal{Tenant: "a"}, "k", nil)
	wantErr(t, err, airlock.CodeRateLimited, "tenant_rate")
	if ra := airlock.RetryAfter(err); ra <= 0 || ra > time.Second {
		t.Errorf("RetryAfter = %s, want in (0, 1s]", ra)
	}
	if code := airlock.ExitCode(err); code != 3 {
		t.Errorf("ExitCode = %d, want 3", code)
	}
	for i := range 5 {
		if _, _, err := e.Sign(ctx, airlock.Principal{Tenant: "b"}, "k", nil); err != nil {
			t.Fatalf("tenant b call %d: %v (another tenant's limit must not apply)", i+1, err)
		}
	}
	flush(t, e)
	recs, err := e.AuditQuery(ctx, airlock.AuditQuery{Reason: "tenant_rate"})
	if err != nil || len(recs) != 1 || recs[0].Outcome != "deny" {
		t.Errorf("rate-limited calls in the audit log = %+v, %v; want one denial", recs, err)
	}
}

func TestConnectAttemptLimit(t *testing.T) {
	ctx := testCtx(t)
	addr := tcpEcho(t)
	e := newEngine(t, engine.Config{
		DefaultTenant: "t",
		Tenants:       map[string]engine.TenantConfig{"t": {Profile: "minimal", Exceptions: []string{"127.0.0.1"}}},
		Limits:        engine.LimitsConfig{ConnectAttempts: 3, ConnectWindow: 10 * time.Second},
	})
	p := airlock.Principal{Tenant: "t", Instance: "guest-1"}
	// Denied attempts count.
	for i := range 3 {
		_, err := e.Exchange(ctx, p, airlock.ExchangeRequest{Lane: "tcp", Target: "10.0.0.1:80", Data: []byte("x")})
		wantErr(t, err, airlock.CodeDenied, "private")
		_ = i
	}
	_, err := e.Exchange(ctx, p, airlock.ExchangeRequest{Lane: "tcp", Target: addr, Data: []byte("x")})
	ae := wantErr(t, err, airlock.CodeRateLimited, "connect_rate")
	if ra := airlock.RetryAfter(err); ra <= 0 {
		t.Errorf("RetryAfter = %s, want > 0", ra)
	}
	// Per instance: another instance of the tenant still connects.
	resp, err := e.Exchange(ctx, airlock.Principal{Tenant: "t", Instance: "guest-2"}, airlock.ExchangeRequest{Lane: "tcp", Target: addr, Data: []byte("y"), Idle: 50 * time.Millisecond})
	if err != nil || string(resp.Data) != "y" {
		t.Fatalf("another instance: %v", err)
	}
	flush(t, e)
	recs, err := e.AuditQuery(ctx, airlock.AuditQuery{Reason: "connect_rate"})
	if err != nil || len(recs) != 1 || recs[0].ID != ae.DecisionID || recs[0].Outcome != "deny" || recs[0].Broker != "tcp" {
		t.Errorf("connect_rate records = %+v, %v; want the refused call", recs, err)
	}
}

// TestLimitsHoldUnderLoad: with many goroutines calling at once, a tenant
// never gets more than its burst plus its rate, and no call that starts
// after Revoke returns is allowed.
func TestLimitsHoldUnderLoad(t *testing.T) {
	ctx := testCtx(t)
	secrets := map[string]engine.SecretRef{"k": {Env: "K"}}
	e := newEngine(t, engine.Config{
		DataDir:       t.TempDir(),
		DefaultTenant: "limited",
		Tenants: map[string]engine.TenantConfig{
			"limited": {Profile: "minimal", Rate: 200, Burst: 50, Secrets: secrets},
			"revoked": {Profile: "minimal", Rate: 1e9, Burst: 1e9, Secrets: secrets},
		},
	}, envMap(map[string]string{"K": "key"}))

	t.Run("rate", func(t *testing.T) {
		var allowed, limited atomic.Int64
		start := time.Now()
		stop := start.Add(300 * time.Millisecond)
		var wg sync.WaitGroup
		for w := range 16 {
			wg.Go(func() {
				for time.Now().Before(stop) {
					_, _, err := e.Sign(ctx, airlock.Principal{Tenant: "limited", Instance: strconv.Itoa(w)}, "k", nil)
					switch airlock.CodeOf(err) {
					case "":
						allowed.Add(1)
					case airlock.CodeRateLimited:
						limited.Add(1)
					default:
						t.Errorf("Sign: %v", err)
						return
					}
				}
			})
		}
		wg.Wait()
		elapsed := time.Since(start)
		ceiling := 50 + int64(200*elapsed.Seconds()) + 1
		t.Logf("%d allowed, %d rate limited in %s (ceiling %d)", allowed.Load(), limited.Load(), elapsed.Round(time.Millisecond), ceiling)
		if allowed.Load() > ceiling {
			t.Errorf("%d calls allowed in %s, want at most burst 50 + 200/s = %d", allowed.Load(), elapsed, ceiling)
		}
		if allowed.Load() < 50 || limited.Load() == 0 {
			t.Errorf("allowed %d, limited %d: the load did not reach the limit", allowed.Load(), limited.Load())
		}
	})

	t.Run("revocation", func(t *testing.T) {
		var revokedAt atomic.Int64 // UnixNano when Revoke returned; 0 before
		var before, after, late atomic.Int64
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for w := range 16 {
			wg.Go(func() {
				p := airlock.Principal{Tenant: "revoked", Instance: strconv.Itoa(w)}
				for {
					select {
					case <-stop:
						return
					default:
					}
					startedAfter := revokedAt.Load() != 0
					_, _, err := e.Sign(ctx, p, "k", nil)
					switch {
					case err == nil && startedAfter:
						late.Add(1)
					case err == nil:
						before.Add(1)
					case airlock.CodeOf(err) == airlock.CodeRevoked:
						after.Add(1)
					default:
						t.Errorf("Sign: %v", err)
						return
					}
				}
			})
		}
		time.Sleep(50 * time.Millisecond)
		err := e.Revoke(ctx, "revoked", "load test")
		revokedAt.Store(time.Now().UnixNano())
		if err == nil {
			time.Sleep(50 * time.Millisecond)
		}
		close(stop)
		wg.Wait()
		if err != nil {
			t.Fatalf("Revoke under load: %v", err)
		}
		t.Logf("%d calls allowed before the revocation, %d refused after", before.Load(), after.Load())
		if late.Load() > 0 {
			t.Errorf("%d calls that started after Revoke returned were allowed", late.Load())
		}
		if before.Load() == 0 || after.Load() == 0 {
			t.Errorf("before %d, after %d: the load did not straddle the revocation", before.Load(), after.Load())
		}
	})
}

// ---------------------------------------------------------------------------
// 6. Secrets

// TestSecretCanary gives a tenant a signing secret and a route credential
// with canary values, exercises every path that touches them, succeeding
// and failing, and greps every output channel for the canaries.
func TestSecretCanary(t *testing.T) {
	const signCanary = "CANARY-9f2c41d7-sign-0b5e"
	const routeCanary = "CANARY-9f2c41d7-route-77aa"
	var logs syncBuffer

	var received sync.Map // path → credential header the server saw
	echo := serveOn(t, "127.0.0.1", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		received.Store(r.URL.Path, auth)
		switch r.URL.Path {
		case "/api/redirect":
			http.Redirect(w, r, "/api/echo", http.StatusFound)
			return
		case "/api/raw":
			// Echo just the token, without the "Bearer " prefix.
			io.WriteString(w, "token="+strings.TrimPrefix(auth, "Bearer "))
			return
		}
		w.Header().Set("X-Echo-Authorization", auth)
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"path": r.URL.Path, "method": r.Method, "headers": r.Header})
	}))
	var elsewhereHits sync.Map
	elsewhere := serveOn(t, "127.0.0.1", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhereHits.Store(r.URL.Path, r.Header.Get("X-Api-Key"))
		io.WriteString(w, "elsewhere")
	}))
	crossOrigin := serveOn(t, "127.0.0.1", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL+"/stolen", http.StatusFound)
	}))

	env := map[string]string{"ACME_SIGNING": signCanary, "ECHO_TOKEN": routeCanary}
	e := newEngine(t, engine.Config{
		DefaultTenant: "acme",
		Tenants: map[string]engine.TenantConfig{
			"acme":     {Profile: "network", Exceptions: []string{"127.0.0.1"}, Secrets: map[string]engine.SecretRef{"signing": {Env: "ACME_SIGNING"}}, Routes: []string{engine.AllRoutes}},
			"intruder": {Profile: "network", Routes: []string{"outside"}},
		},
		Routes: map[string]engine.RouteConfig{
			"echo":    {BaseURL: echo.URL, Header: "Authorization", ValueEnv: "ECHO_TOKEN", Prefix: "Bearer ", Methods: []string{"GET", "post"}, PathPrefix: "/api"},
			"outside": {BaseURL: "http://10.0.0.1/", Header: "Authorization", ValueEnv: "ECHO_TOKEN"},
			// A custom credential header: egress itself drops only
			// Authorization and Cookie on a cross-origin redirect.
			"hop": {BaseURL: crossOrigin.URL, Header: "X-Api-Key", ValueEnv: "ECHO_TOKEN"},
		},
	}, envMap(env), jsonLogger(&logs))
	ctx := testCtx(t)
	acme := airlock.Principal{Tenant: "acme", Instance: "agent"}
	var outputs []string // every string a caller or operator can see
	record := func(v any) {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		outputs = append(outputs, string(b))
	}
	recordErr := func(err error) {
		if err != nil {
			outputs = append(outputs, err.Error())
			record(airlock.Public(err, ""))
		}
	}

	t.Run("sign", func(t *testing.T) {
		data := []byte("payload to sign")
		sum, id, err := e.Sign(ctx, acme, "signing", data)
		if err != nil {
			t.Fatal(err)
		}
		wantULID(t, id)
		m := hmac.New(sha256.New, []byte(signCanary))
		m.Write(data)
		if !hmac.Equal(sum, m.Sum(nil)) {
			t.Errorf("Sign = %x, want HMAC-SHA256 %x", sum, m.Sum(nil))
		}
		record(sum)
		for _, bad := range []struct {
			p    airlock.Principal
			name string
			code airlock.Code
		}{
			{acme, "missing", airlock.CodeNotFound},
			{airlock.Principal{Tenant: "intruder"}, "signing", airlock.CodeNotFound},
		} {
			_, _, err := e.Sign(ctx, bad.p, bad.name, data)
			wantErr(t, err, bad.code, "")
			recordErr(err)
		}
	})

	t.Run("route echo is redacted", func(t *testing.T) {
		for _, method := range []string{"GET", "POST"} {
			resp, err := e.Route(ctx, acme, airlock.RouteRequest{Name: "echo", Method: method, Path: "/api/echo", Body: []byte("{}")})
			if err != nil {
				t.Fatalf("%s: %v", method, err)
			}
			record(resp)
			if got, _ := received.Load("/api/echo"); got != "Bearer "+routeCanary {
				t.Errorf("server received Authorization %q, want the route credential", got)
			}
			if !bytes.Contains(resp.Body, []byte("[REDACTED]")) {
				t.Errorf("echoed body not redacted: %s", resp.Body)
			}
			if got := resp.Header["X-Echo-Authorization"]; len(got) != 1 || !strings.Contains(got[0], "[REDACTED]") {
				t.Errorf("echoed header = %q, want redacted", got)
			}
		}
	})

	t.Run("route echo of the bare token is redacted", func(t *testing.T) {
		resp, err := e.Route(ctx, acme, airlock.RouteRequest{Name: "echo", Path: "/api/raw"})
		if err != nil {
			t.Fatal(err)
		}
		record(resp)
		if string(resp.Body) != "token=[REDACTED]" {
			t.Errorf("body = %q, want token=[REDACTED]", resp.Body)
		}
	})

	t.Run("caller cannot set the credential header", func(t *testing.T) {
		for _, h := range []string{"Authorization", "authorization", "AUTHORIZATION"} {
			resp, err := e.Route(ctx, acme, airlock.RouteRequest{Name: "echo", Path: "/api/echo",
				Header: map[string][]string{h: {"Bearer caller-chosen"}, "X-Extra": {"kept"}}})
			if err != nil {
				t.Fatal(err)
			}
			record(resp)
			if got, _ := received.Load("/api/echo"); got != "Bearer "+routeCanary {
				t.Errorf("%s: server received %q, want the route's credential only", h, got)
			}
			if bytes.Contains(resp.Body, []byte("caller-chosen")) {
				t.Errorf("%s: the caller's value reached the server", h)
			}
			if !bytes.Contains(resp.Body, []byte("kept")) {
				t.Errorf("other caller headers were dropped")
			}
		}
	})

	t.Run("same-origin redirect", func(t *testing.T) {
		resp, err := e.Route(ctx, acme, airlock.RouteRequest{Name: "echo", Path: "/api/redirect"})
		if err != nil {
			t.Fatal(err)
		}
		record(resp)
		if !bytes.Contains(resp.Body, []byte(`"path":"/api/echo"`)) {
			t.Errorf("redirect within the route's origin not followed: %s", resp.Body)
		}
	})

	t.Run("credential never follows a redirect to another origin", func(t *testing.T) {
		_, err := e.Route(ctx, acme, airlock.RouteRequest{Name: "hop", Path: "/"})
		wantErr(t, err, airlock.CodeDenied, "")
		recordErr(err)
		if got, ok := elsewhereHits.Load("/stolen"); ok {
			t.Errorf("the redirect target received the request (X-Api-Key %q)", got)
		}
	})

	t.Run("refusals", func(t *testing.T) {
		tests := []struct {
			name   string
			p      airlock.Principal
			req    airlock.RouteRequest
			code   airlock.Code
			reason airlock.Reason
		}{
			{"dot-dot", acme, airlock.RouteRequest{Name: "echo", Path: "/api/../x"}, airlock.CodeInvalid, "route_path"},
			{"trailing dot-dot", acme, airlock.RouteRequest{Name: "echo", Path: "/api/.."}, airlock.CodeInvalid, "route_path"},
			{"dot", acme, airlock.RouteRequest{Name: "echo", Path: "/api/./x"}, airlock.CodeInvalid, "route_path"},
			{"encoded dot-dot", acme, airlock.RouteRequest{Name: "echo", Path: "/api/%2e%2e/x"}, airlock.CodeInvalid, "route_path"},
			{"encoded dot-dot upper", acme, airlock.RouteRequest{Name: "echo", Path: "/api/%2E%2E/x"}, airlock.CodeInvalid, "route_path"},
			{"half-encoded dot-dot", acme, airlock.RouteRequest{Name: "echo", Path: "/api/.%2e/x"}, airlock.CodeInvalid, "route_path"},
			{"encoded slash", acme, airlock.RouteRequest{Name: "echo", Path: "/api/a%2fb"}, airlock.CodeInvalid, "route_path"},
			{"scheme-relative", acme, airlock.RouteRequest{Name: "echo", Path: "//evil.com/x"}, airlock.CodeInvalid, "route_path"},
			{"no leading slash", acme, airlock.RouteRequest{Name: "echo", Path: "api/x"}, airlock.CodeInvalid, "route_path"},
			{"absolute URL", acme, airlock.RouteRequest{Name: "echo", Path: "http://evil.com/x"}, airlock.CodeInvalid, "route_path"},
			{"outside the prefix", acme, airlock.RouteRequest{Name: "echo", Path: "/admin"}, airlock.CodeInvalid, "route_path"},
			{"prefix is a path segment", acme, airlock.RouteRequest{Name: "echo", Path: "/apix/secret"}, airlock.CodeInvalid, "route_path"},
			{"backslash", acme, airlock.RouteRequest{Name: "echo", Path: "/api/..\\x"}, airlock.CodeDenied, "parse_ambiguous"},
			{"method not allowed", acme, airlock.RouteRequest{Name: "echo", Method: "DELETE", Path: "/api/x"}, airlock.CodeDenied, "route_method"},
			{"forbidden header", acme, airlock.RouteRequest{Name: "echo", Path: "/api/x", Header: map[string][]string{"Host": {"evil.com"}}}, airlock.CodeDenied, "header_floor"},
			{"unknown route", acme, airlock.RouteRequest{Name: "nope", Path: "/"}, airlock.CodeNotFound, "route"},
			{"route not granted to the tenant", airlock.Principal{Tenant: "intruder"}, airlock.RouteRequest{Name: "echo", Path: "/api/x"}, airlock.CodeNotFound, "route"},
			{"route host outside policy", acme, airlock.RouteRequest{Name: "outside", Path: "/"}, airlock.CodeDenied, "private"},
			{"route host on the floor for this tenant", airlock.Principal{Tenant: "intruder"}, airlock.RouteRequest{Name: "outside", Path: "/"}, airlock.CodeDenied, "private"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				received.Clear()
				_, err := e.Route(ctx, tt.p, tt.req)
				wantErr(t, err, tt.code, string(tt.reason))
				recordErr(err)
				received.Range(func(k, v any) bool {
					t.Errorf("a refused route call reached the server at %v", k)
					return true
				})
			})
		}
	})

	t.Run("no channel carries a canary", func(t *testing.T) {
		flush(t, e)
		recs := auditAll(t, e, airlock.AuditQuery{})
		if len(recs) == 0 {
			t.Fatal("no audit records")
		}
		record(recs)
		record(e.RecentDenials("", 0))
		record(e.RecentDenials("acme/agent", 0))
		record(e.Counters())
		stats, err := e.AuditStats(ctx, time.Time{}, "")
		if err != nil {
			t.Fatal(err)
		}
		record(stats)
		_, metrics := scrape(t, e)
		channels := map[string]string{
			"log":             logs.String(),
			"metrics":         metrics,
			"results, errors": strings.Join(outputs, "\n"),
		}
		if !strings.Contains(logs.String(), "broker decision") {
			t.Fatal("the log is empty: the test would prove nothing")
		}
		for name, text := range channels {
			for _, canary := range []string{signCanary, routeCanary, "9f2c41d7"} {
				if i := strings.Index(text, canary); i >= 0 {
					t.Errorf("%s contains the canary %q: ...%s...", name, canary, text[max(0, i-200):min(len(text), i+100)])
				}
			}
		}
	})
}

// TestTokens: API tokens are stored as hashes, authenticate to their
// tenant, and their creation is audited without the token.
func TestTokens(t *testing.T) {
	ctx := testCtx(t)
	var logs syncBuffer
	const configToken = "alk_configured-token"
	e := newEngine(t, engine.Config{
		DefaultTenant: "acme",
		Tenants: map[string]engine.TenantConfig{
			"acme":  {Profile: "network"},
			"other": {Tokens: []string{store.HashToken(configToken)}},
		},
	}, jsonLogger(&logs))
	tok, err := e.CreateToken(ctx, "acme", "ci")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(tok, "alk_") || len(tok) < 40 {
		t.Errorf("token %q looks weak", tok)
	}
	tests := []struct {
		token  string
		tenant string
	}{
		{tok, "acme"},
		{configToken, "other"},
		{"alk_unknown", ""},
		{"", ""},
		{store.HashToken(tok), ""}, // the stored hash is not a token
	}
	for _, tt := range tests {
		p, err := e.Authenticate(ctx, tt.token)
		if tt.tenant == "" {
			wantCode(t, err, airlock.CodeDenied, "token")
			continue
		}
		if err != nil || p.Tenant != tt.tenant {
			t.Errorf("Authenticate(%.12s…) = %v, %v; want tenant %s", tt.token, p, err, tt.tenant)
		}
	}
	_, err = e.CreateToken(ctx, "ghost", "x")
	wantCode(t, err, airlock.CodeNotFound, "tenant")
	flush(t, e)
	recs := auditAll(t, e, airlock.AuditQuery{Broker: "admin", Reason: "token_create"})
	if len(recs) != 1 || recs[0].Target != "acme" {
		t.Errorf("token_create audit records = %+v", recs)
	}
	b, _ := json.Marshal(auditAll(t, e, airlock.AuditQuery{}))
	for name, text := range map[string]string{"audit": string(b), "log": logs.String()} {
		if strings.Contains(text, tok) || strings.Contains(text, configToken) {
			t.Errorf("the %s contains a token", name)
		}
	}
}
