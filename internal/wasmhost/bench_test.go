package wasmhost_test

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/engine"
	"github.com/airlockhq/airlock/internal/wasmhost"
)

// benchEngine has one posix tenant with a signing key and a rate limit
// that a benchmark loop does not reach.
func benchEngine(b *testing.B) *engine.Engine {
	return newEngine(b, engine.Config{
		Tenants: map[string]engine.TenantConfig{"posix": {Profile: "posix", Rate: 1e9, Burst: 1e9,
			Secrets: map[string]engine.SecretRef{"k": {Env: "K"}}}},
		Audit: engine.AuditConfig{QueueSize: 1 << 20},
	}, engine.WithGetenv(func(k string) string {
		if k == "K" {
			return "bench-key"
		}
		return ""
	}))
}

// BenchmarkHostCall measures one host call from a guest: last_error (the
// ABI alone) and secret_sign (the ABI plus a full gate decision and audit
// record). One instance makes all b.N calls.
func BenchmarkHostCall(b *testing.B) {
	en := benchEngine(b)
	h := newHost(b, en)
	g, err := h.Load(context.Background(), airlock.Principal{Tenant: "posix"}, "probe", testGuest(b, "probe"))
	if err != nil {
		b.Fatal(err)
	}
	defer g.Close(context.Background())
	for _, loop := range []string{"loop-noop", "loop-sign"} {
		b.Run(loop, func(b *testing.B) {
			start := time.Now()
			res, err := g.Run(context.Background(), wasmhost.RunOptions{Args: []string{loop, strconv.Itoa(b.N)}})
			if err != nil || res.ExitCode != 0 || res.Calls < b.N {
				b.Fatalf("run: %v %+v", err, res)
			}
			b.ReportMetric(float64(time.Since(start).Microseconds())/float64(b.N), "µs/call")
		})
	}
}

// BenchmarkInstantiate measures starting a guest: a fresh Host loading the
// module from the warm on-disk compilation cache and running it, and a new
// instance of an already loaded module.
func BenchmarkInstantiate(b *testing.B) {
	en := benchEngine(b)
	wasm := testGuest(b, "probe")
	p := airlock.Principal{Tenant: "posix"}
	warm := newHost(b, en) // fills the disk cache
	g, err := warm.Load(context.Background(), p, "probe", wasm)
	if err != nil {
		b.Fatal(err)
	}
	defer g.Close(context.Background())
	args := wasmhost.RunOptions{Args: []string{"loop-noop", "1"}}

	b.Run("load-from-disk-cache+run", func(b *testing.B) {
		for b.Loop() {
			h, err := wasmhost.New(context.Background(), wasmhost.Config{Broker: en, CacheDir: cacheDir})
			if err != nil {
				b.Fatal(err)
			}
			g, err := h.Load(context.Background(), p, "probe", wasm)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := g.Run(context.Background(), args); err != nil {
				b.Fatal(err)
			}
			h.Close(context.Background())
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/start")
	})
	b.Run("new-instance+run", func(b *testing.B) {
		for b.Loop() {
			if _, err := g.Run(context.Background(), args); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/start")
	})
}

// BenchmarkServeFlip measures requests per second through the server flip
// with a minimal handler, a fresh instance per request, from concurrent
// loopback clients.
func BenchmarkServeFlip(b *testing.B) {
	en := newEngine(b, engine.Config{
		Tenants: map[string]engine.TenantConfig{"served": {Profile: "compute", Rate: 1e9, Burst: 1e9}},
		Audit:   engine.AuditConfig{QueueSize: 1 << 20},
	})
	srv, _ := flipServer(b, en, "served", testGuest(b, "flip"), wasmhost.ServeConfig{ClientRate: 1e9, ClientBurst: 1 << 30})
	client := srv.Client()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			resp, err := client.Get(srv.URL + "/plain")
			if err != nil {
				b.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b.Errorf("status %d", resp.StatusCode)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
}
