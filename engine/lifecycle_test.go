package engine_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/engine"
	"github.com/airlockhq/airlock/internal/fleet/fleettest"
)

// openFDs counts this process's open file descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatalf("count descriptors: %v (needs /proc)", err)
	}
	return len(ents)
}

// unsetSecretConfig connects to Redis, then fails on a tenant secret
// whose environment variable is not set.
func unsetSecretConfig(redisURL string) engine.Config {
	return engine.Config{
		InMemory: true,
		State:    engine.StateConfig{RedisURL: redisURL},
		Tenants: map[string]engine.TenantConfig{
			"local": {Profile: "posix", Secrets: map[string]engine.SecretRef{"hook": {Env: "AIRLOCK_TEST_UNSET_SECRET"}}},
		},
	}
}

// A New that fails after opening resources (the Redis connection) closes
// them all: five failed starts leave the descriptor count where it was.
func TestNewFailureLeaksNoDescriptors(t *testing.T) {
	srv := fleettest.Start(t)
	cfg := unsetSecretConfig(srv.URL(0))
	noEnv := engine.WithGetenv(func(string) string { return "" })
	// One failure first, so that whatever the process sets up once (the
	// resolver, the redis logger) is not counted.
	if _, err := engine.New(context.Background(), cfg, noEnv); err == nil {
		t.Fatal("New with an unset secret succeeded")
	}
	before := openFDs(t)
	const starts = 5
	for range starts {
		en, err := engine.New(context.Background(), cfg, noEnv)
		if err == nil {
			en.Close(context.Background())
			t.Fatal("New with an unset secret succeeded")
		}
		if airlock.CodeOf(err) != airlock.CodeInvalid {
			t.Fatalf("New = %v, want invalid (config)", err)
		}
	}
	if after := openFDs(t); after > before {
		t.Errorf("%d failed starts left %d more open descriptors (%d → %d)", starts, after-before, before, after)
	}
}

// New then Close, five times against Redis, leaves the descriptor count
// where it was: Close unwinds everything New opened.
func TestCloseLeaksNoDescriptors(t *testing.T) {
	srv := fleettest.Start(t)
	cfg := engine.Config{InMemory: true, State: engine.StateConfig{RedisURL: srv.URL(0)}}
	cycle := func() {
		en, err := engine.New(context.Background(), cfg)
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := en.Close(ctx); err != nil {
			t.Fatalf("Close: %v", err)
		}
	}
	cycle()
	before := openFDs(t)
	for range 5 {
		cycle()
	}
	if after := openFDs(t); after > before {
		t.Errorf("5 New/Close cycles left %d more open descriptors (%d → %d)", after-before, before, after)
	}
}

// Validate and New compile a configuration the same way: what New refuses
// without opening anything, Validate refuses too, with the same error.
func TestValidateAgreesWithNew(t *testing.T) {
	for _, tt := range []struct {
		name string
		cfg  engine.Config
	}{
		{"unset tenant secret", engine.Config{Tenants: map[string]engine.TenantConfig{
			"local": {Secrets: map[string]engine.SecretRef{"hook": {Env: "AIRLOCK_TEST_UNSET_SECRET"}}}}}},
		{"missing secret file", engine.Config{Tenants: map[string]engine.TenantConfig{
			"local": {Secrets: map[string]engine.SecretRef{"hook": {File: "testdata/no-such-secret"}}}}}},
		{"unset route credential", engine.Config{Routes: map[string]engine.RouteConfig{
			"llm": {BaseURL: "https://api.example.com/v1", Header: "Authorization", ValueEnv: "AIRLOCK_TEST_UNSET_SECRET"}}}},
		{"bad upstream proxy", engine.Config{Egress: engine.EgressConfig{Proxies: map[string]string{"corp": "ftp://127.0.0.1:3128"}}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.InMemory = true
			en, nerr := engine.New(context.Background(), tt.cfg)
			if nerr == nil {
				en.Close(context.Background())
				t.Fatal("New succeeded")
			}
			verr := engine.Validate(tt.cfg)
			if verr == nil || verr.Error() != nerr.Error() || airlock.CodeOf(verr) != airlock.CodeOf(nerr) {
				t.Errorf("Validate = %v, want New's error %v", verr, nerr)
			}
		})
	}
}
