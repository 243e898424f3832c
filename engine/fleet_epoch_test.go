package engine_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/engine"
	"github.com/airlockhq/airlock/internal/fleet/fleettest"
)

// A replica restarted after Redis lost its data still knows the set it
// saw (its data directory remembers the epoch), so it refuses every call,
// even with state.fallback_local; a replica that remembers nothing is told
// by Redis and refuses too; a restore from the data directory's copy ends
// it everywhere.
func TestFleetLostRedisRestartedReplicaRemembers(t *testing.T) {
	t.Parallel()
	srv := fleettest.Start(t)
	cfg := func(dir string) engine.Config {
		return engine.Config{DataDir: dir, DefaultTenant: "acme",
			State: engine.StateConfig{RedisURL: srv.URL(0), FallbackLocal: true},
			Tenants: map[string]engine.TenantConfig{"acme": {Profile: "posix",
				Secrets: map[string]engine.SecretRef{"k": {Env: "K"}}}}}
	}
	env := envMap(map[string]string{"K": "key"})
	ctx := testCtx(t)
	p := airlock.Principal{Tenant: "acme", Instance: "p"}
	q := airlock.Principal{Tenant: "acme", Instance: "q"}
	sign := func(e *engine.Engine, who airlock.Principal) error {
		_, _, err := e.Sign(ctx, who, "k", []byte("x"))
		return err
	}
	wantStale := func(what string, err error) {
		t.Helper()
		if airlock.CodeOf(err) != airlock.CodeUnavailable || airlock.ReasonOf(err) != airlock.ReasonRevocationsStale {
			t.Fatalf("%s: %v, want unavailable revocations_stale", what, err)
		}
	}

	dir := t.TempDir()
	e1 := newEngine(t, cfg(dir), env)
	if err := e1.Revoke(ctx, "acme/p", "leaked"); err != nil {
		t.Fatal(err)
	}
	if err := e1.Close(ctx); err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}

	e2 := newEngine(t, cfg(dir), env)
	wantStale("Ready of the restarted replica", e2.Ready(ctx))
	wantStale("acme/q on the restarted replica", sign(e2, q))
	wantStale("acme/p on the restarted replica", sign(e2, p))
	if got := e2.Revocations(); !slices.Equal(got, []string{"acme/p"}) {
		t.Errorf("the restarted replica's last known set: %v", got)
	}
	e3 := newEngine(t, cfg(t.TempDir()), env)
	wantStale("Ready of a new replica", e3.Ready(ctx))
	wantStale("acme/q on a new replica", sign(e3, q))
	if _, err := e3.LocalRevocationCopy(ctx); airlock.CodeOf(err) != airlock.CodeNotFound {
		t.Errorf("a new data directory's copy: %v, want not_found", err)
	}

	list, err := e2.LocalRevocationCopy(ctx)
	if err != nil || len(list) != 1 || list[0].Subject != "acme/p" || list[0].Reason != "leaked" {
		t.Fatalf("the data directory's copy: %+v %v", list, err)
	}
	if err := e2.RestoreRevocations(ctx, list, false); err != nil {
		t.Fatal(err)
	}
	for name, e := range map[string]*engine.Engine{"restarted": e2, "new": e3} {
		deadline := time.Now().Add(15 * time.Second)
		for e.Ready(ctx) != nil {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not ready after the restore: %v", name, e.Ready(ctx))
			}
			time.Sleep(20 * time.Millisecond)
		}
		if err := sign(e, p); airlock.CodeOf(err) != airlock.CodeRevoked {
			t.Errorf("%s: acme/p after the restore: %v, want revoked", name, err)
		}
		if err := sign(e, q); err != nil {
			t.Errorf("%s: acme/q after the restore: %v", name, err)
		}
	}
	if err := e3.RestoreRevocations(ctx, nil, false); airlock.CodeOf(err) != airlock.CodeInvalid || airlock.ReasonOf(err) != "not_lost" {
		t.Errorf("a restore over a set that is not lost: %v, want invalid not_lost", err)
	}
	if err := e3.RestoreRevocations(ctx, []engine.Revocation{{Subject: "acme/"}}, true); airlock.CodeOf(err) != airlock.CodeInvalid {
		t.Errorf("a bad subject: %v", err)
	}
	if got := e3.RevocationList(); len(got) != 1 || got[0].Subject != "acme/p" || got[0].Reason != "leaked" {
		t.Errorf("export after the restore: %+v", got)
	}
}

// Without shared state there is nothing to restore.
func TestRestoreRevocationsWithoutFleet(t *testing.T) {
	e := newEngine(t, engine.Config{})
	if err := e.RestoreRevocations(context.Background(), nil, true); airlock.CodeOf(err) != airlock.CodeInvalid {
		t.Errorf("restore without Redis: %v, want invalid", err)
	}
}
