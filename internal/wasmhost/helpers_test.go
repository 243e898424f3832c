package wasmhost_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/engine"
	"github.com/airlockhq/airlock/internal/leakcheck"
	"github.com/airlockhq/airlock/internal/wasmhost"
	"github.com/airlockhq/airlock/internal/wasmhost/wasmtest"
)

// shared across the package's tests: built guests and the compilation
// cache, so that each guest is built and compiled once.
var (
	buildDir string
	cacheDir string
	builds   sync.Map // guest path → *build
)

type build struct {
	wasm []byte
	err  error
}

func TestMain(m *testing.M) {
	code := func() int {
		var err error
		if buildDir, err = os.MkdirTemp("", "wasmhost-guests-"); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(buildDir)
		cacheDir = filepath.Join(buildDir, "cache") // wasmtest.Build's
		// Build every guest and compile them into the shared cache now,
		// in the background, while the first tests run (see prepareAll).
		go prepareAll()
		// Never remove buildDir under a compilation still writing to it.
		defer func() { <-prepared }()
		return leakcheck.Main(m, "wasmhost", leakcheck.Options{IdleHTTP: true,
			// Waited for below when no test wanted a guest.
			Benign: []string{"wasmhost_test.prepareAll", "wasmtest.Build"}})
	}()
	os.Exit(code)
}

// allGuests are the guest packages the tests use (relative to the module
// root); TestMain starts building and compiling them all at once.
var allGuests = []string{
	"internal/wasmhost/testdata/guests/probe",
	"internal/wasmhost/testdata/guests/flip",
	"examples/guests/summarise",
	"examples/guests/handler",
	"examples/guests/apiclient",
}

// guestWasm returns the guest package at pkg (one of allGuests) built for
// wasip1 once per test binary and compiled into the shared cache.
func guestWasm(t testing.TB, pkg string) []byte {
	t.Helper()
	<-prepared
	v, ok := builds.Load(pkg)
	if !ok {
		t.Fatalf("guest %s is not in allGuests", pkg)
	}
	b := v.(*build)
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.wasm
}

// prepared is closed when prepareAll has built every guest and compiled
// them into cacheDir.
var prepared = make(chan struct{})

// prepareAll builds allGuests and compiles them into cacheDir
// (wasmtest.Build), so that each host of the tests finds them compiled.
// A guest the precompiler could not compile is compiled by the host that
// loads it.
func prepareAll() {
	defer close(prepared)
	g := wasmtest.Build(buildDir, allGuests)
	for _, pkg := range allGuests {
		b := &build{err: g.Errs[pkg]}
		if b.err == nil {
			b.wasm, b.err = os.ReadFile(g.Wasm[pkg])
		}
		builds.Store(pkg, b)
	}
	if g.CacheErr != nil {
		fmt.Fprintf(os.Stderr, "wasmhost tests: %v\n", g.CacheErr)
	}
}

func testGuest(t testing.TB, name string) []byte {
	return guestWasm(t, "internal/wasmhost/testdata/guests/"+name)
}

// summariseWasm is the page summariser example: it imports browse_fetch
// only, so it links under network and posix.
func summariseWasm(t testing.TB) []byte { return guestWasm(t, "examples/guests/summarise") }

// allCaps lets a custom profile link the probe guest.
var allCaps = []string{"tcp", "udp", "tls", "secrets", "http", "browse", "routes", "parallel"}

func newEngine(t testing.TB, cfg engine.Config, opts ...engine.Option) *engine.Engine {
	t.Helper()
	cfg.InMemory = true
	if _, ok := cfg.Tenants[airlock.LocalTenant]; !ok && cfg.DefaultTenant == "" {
		for name := range cfg.Tenants {
			cfg.DefaultTenant = name
			break
		}
	}
	e, err := engine.New(context.Background(), cfg, opts...)
	if err != nil {
		t.Fatalf("engine.New: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := e.Close(ctx); err != nil {
			t.Errorf("engine Close: %v", err)
		}
	})
	return e
}

func newHost(t testing.TB, b wasmhost.Broker) *wasmhost.Host {
	t.Helper()
	return newHostBudget(t, b, wasmhost.Budget{})
}

func newHostBudget(t testing.TB, b wasmhost.Broker, budget wasmhost.Budget) *wasmhost.Host {
	t.Helper()
	h, err := wasmhost.New(context.Background(), wasmhost.Config{Broker: b, CacheDir: cacheDir, Budget: budget})
	if err != nil {
		t.Fatalf("wasmhost.New: %v", err)
	}
	t.Cleanup(func() { h.Close(context.Background()) })
	return h
}

// tenants builds a config with one tenant per profile name given, each
// with the floor lifted for 127.0.0.1 (the test servers) only.
func tenants(profiles ...string) engine.Config {
	cfg := engine.Config{Tenants: map[string]engine.TenantConfig{}}
	for _, p := range profiles {
		cfg.Tenants[p] = engine.TenantConfig{Profile: p, Exceptions: []string{"127.0.0.1"}}
	}
	return cfg
}

type runOut struct {
	res    *wasmhost.Result
	stdout string
	stderr string
	err    error
}

// run loads wasm for tenant and runs it once.
func run(t testing.TB, h *wasmhost.Host, tenant string, wasm []byte, args ...string) runOut {
	t.Helper()
	ctx := context.Background()
	g, err := h.Load(ctx, airlock.Principal{Tenant: tenant, Instance: "g1"}, "guest.wasm", wasm)
	if err != nil {
		return runOut{err: err}
	}
	defer g.Close(ctx)
	var stdout, stderr bytes.Buffer
	res, err := g.Run(ctx, wasmhost.RunOptions{Args: args, Stdout: &stdout, Stderr: &stderr})
	return runOut{res: res, stdout: stdout.String(), stderr: stderr.String(), err: err}
}

// probeLine is one line of the probe guest's output.
type probeLine struct {
	OK    json.RawMessage `json:"ok"`
	Error *airlock.Error  `json:"error"`
}

// probe runs the probe guest (posix tenant "posix") and decodes its lines.
func probe(t testing.TB, h *wasmhost.Host, tenant string, args ...string) []probeLine {
	t.Helper()
	o := run(t, h, tenant, testGuest(t, "probe"), args...)
	if o.err != nil {
		t.Fatalf("probe %v: %v", args, o.err)
	}
	if o.res.ExitCode != 0 {
		t.Fatalf("probe %v exited %d: %s", args, o.res.ExitCode, o.stderr)
	}
	var lines []probeLine
	dec := json.NewDecoder(strings.NewReader(o.stdout))
	for dec.More() {
		var l probeLine
		if err := dec.Decode(&l); err != nil {
			t.Fatalf("probe %v output %q: %v", args, o.stdout, err)
		}
		lines = append(lines, l)
	}
	return lines
}

func wantCode(t testing.TB, err error, code airlock.Code, reason string) {
	t.Helper()
	if got := airlock.CodeOf(err); got != code {
		t.Fatalf("error %v: code %q, want %q", err, got, code)
	}
	if reason != "" && airlock.ReasonOf(err) != airlock.Reason(reason) {
		t.Fatalf("error %v: reason %q, want %q", err, airlock.ReasonOf(err), reason)
	}
}
