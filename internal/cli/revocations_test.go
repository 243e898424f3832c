package cli

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/airlockhq/airlock/internal/fleet/fleettest"
)

// fleetReplica is one `airlock serve` of a fleet, in this process.
type fleetReplica struct {
	*served
	name, dir string
}

// fetch makes a broker call (a fetch of site) as local/instance and
// returns the HTTP status and the error's code and reason ("" when it
// succeeded).
func (r *fleetReplica) fetch(t *testing.T, site, instance string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequest("POST", r.base+"/api/browse", strings.NewReader(`{"verb":"fetch","url":"`+site+`/"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+r.token)
	req.Header.Set("X-Airlock-Instance", instance)
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("%s: fetch: %v", r.name, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == 200 {
		return 200, "", ""
	}
	var body struct {
		Error struct{ Code, Reason, Message string }
	}
	if err := json.Unmarshal(b, &body); err != nil {
		t.Fatalf("%s: fetch: %d %s", r.name, resp.StatusCode, b)
	}
	return resp.StatusCode, body.Error.Code, body.Error.Reason
}

// Two replicas share one Redis. Redis loses its data (FLUSHALL: a restart
// without persistence) under the running fleet: a revoked principal stays
// refused on both, every other call is refused too (revocations_stale),
// /readyz answers 503 naming the cause, until `airlock admin revocations
// restore` writes the set back from a replica's data directory.
func TestFleetRedisLossFailsClosedUntilRestore(t *testing.T) {
	t.Parallel()
	srv := fleettest.Start(t)
	cfg := filepath.Join(t.TempDir(), "airlock.yaml")
	if err := os.WriteFile(cfg, []byte("state:\n  redis_url: "+srv.URL(0)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, "<html><title>ok</title><body><p>ok</p></body></html>")
	}))
	defer site.Close()
	var reps []*fleetReplica
	for _, name := range []string{"A", "B"} {
		dir := t.TempDir()
		s := startServe(t, "--config", cfg, "--data-dir", dir, "--listen", "127.0.0.1:0", "--except", "127.0.0.1")
		reps = append(reps, &fleetReplica{served: s, name: name, dir: dir})
	}
	ready := func(r *fleetReplica) (int, string) {
		code, _, out := r.do(t, "GET", "/readyz", "", "")
		return code, out
	}
	// A brand-new, empty Redis is a new fleet, not a lost one.
	for _, r := range reps {
		if code, out := ready(r); code != 200 {
			t.Fatalf("%s on a fresh Redis: readyz %d %s", r.name, code, out)
		}
		for _, inst := range []string{"p", "q"} {
			if code, c, reason := r.fetch(t, site.URL, inst); code != 200 {
				t.Fatalf("%s: local/%s before any revocation: %d %s %s", r.name, inst, code, c, reason)
			}
		}
	}
	if code, _, out := reps[0].do(t, "POST", "/api/admin/revoke", reps[0].admin, `{"subject":"local/p","reason":"leaked"}`); code/100 != 2 {
		t.Fatalf("revoke: %d %s", code, out)
	}
	waitFor(t, "local/p revoked on B", func() bool {
		_, c, _ := reps[1].fetch(t, site.URL, "p")
		return c == "revoked"
	})

	// Redis restarts without its data.
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	if err := rdb.FlushAll(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	flushed := time.Now()
	for _, r := range reps {
		// local/p is never allowed again, and soon every call is refused.
		waitFor(t, r.name+" refusing every call as revocations_stale", func() bool {
			if code, c, reason := r.fetch(t, site.URL, "p"); code == 200 || c != "revoked" && reason != "revocations_stale" {
				t.Fatalf("%s: local/p after Redis lost its data: %d %s %s, want refused", r.name, code, c, reason)
			}
			code, c, reason := r.fetch(t, site.URL, "q")
			return code == 503 && c == "unavailable" && reason == "revocations_stale"
		})
		t.Logf("%s refuses every call %v after the flush", r.name, time.Since(flushed).Round(time.Millisecond))
		if code, c, reason := r.fetch(t, site.URL, "p"); code != 503 || c != "unavailable" || reason != "revocations_stale" {
			t.Errorf("%s: local/p: %d %s %s, want 503 unavailable revocations_stale", r.name, code, c, reason)
		}
		code, out := ready(r)
		if code != 503 || !strings.Contains(out, "revocations_stale") || !strings.Contains(out, "lost") {
			t.Errorf("%s: readyz with the set lost: %d %s", r.name, code, out)
		}
		if _, _, m := r.do(t, "GET", "/metrics", "", ""); !strings.Contains(m, "airlock_revocations_lost 1") {
			t.Errorf("%s: metrics do not show the lost set", r.name)
		}
		if !strings.Contains(r.stderr.String(), "revocation set is lost") {
			t.Errorf("%s: no log line about the lost set:\n%s", r.name, r.stderr.String())
		}
	}
	// Still refused a while later: nothing un-latches it but a restore.
	time.Sleep(600 * time.Millisecond)
	for _, r := range reps {
		if code, _, reason := r.fetch(t, site.URL, "q"); code != 503 || reason != "revocations_stale" {
			t.Fatalf("%s: local/q before the restore: %d %s", r.name, code, reason)
		}
	}

	// The operator restores the set from replica B's data directory.
	res := invoke(t, t.Context(), "", []string{"admin", "revocations", "restore", "--config", cfg, "--data-dir", reps[1].dir})
	if res.code != 0 || !strings.Contains(res.stdout, "local/p") {
		t.Fatalf("restore: exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	restored := time.Now()
	for _, r := range reps {
		waitFor(t, r.name+" taking calls again", func() bool {
			code, _, _ := r.fetch(t, site.URL, "q")
			return code == 200
		})
		t.Logf("%s takes calls %v after the restore", r.name, time.Since(restored).Round(time.Millisecond))
		if code, c, _ := r.fetch(t, site.URL, "p"); code != 403 || c != "revoked" {
			t.Errorf("%s: local/p after the restore: %d %s, want 403 revoked", r.name, code, c)
		}
		if code, out := ready(r); code != 200 {
			t.Errorf("%s: readyz after the restore: %d %s", r.name, code, out)
		}
	}
}

// waitFor polls cond until it holds, failing the test after a generous
// bound (a hang guard, not a timing assertion).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 15 s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// export prints what restore --from reads; restore refuses to replace a
// set that is not lost unless --force; the list format is accepted too.
func TestRevocationsExportRestoreFile(t *testing.T) {
	t.Parallel()
	srv := fleettest.Start(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "airlock.yaml")
	if err := os.WriteFile(cfg, []byte("state:\n  redis_url: "+srv.URL(0)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	cli := func(stdin string, args ...string) result {
		return invoke(t, ctx, stdin, append(args, "--config", cfg, "--data-dir", filepath.Join(dir, "data")))
	}
	for _, s := range []string{"local/x", "other"} {
		if r := cli("", "admin", "revoke", s, "--reason", "why "+s); r.code != 0 {
			t.Fatalf("revoke %s: %d %s", s, r.code, r.stderr)
		}
	}
	exp := cli("", "admin", "revocations", "export")
	if exp.code != 0 || !strings.Contains(exp.stdout, `"subject": "local/x"`) || !strings.Contains(exp.stdout, `"reason": "why other"`) {
		t.Fatalf("export: %d %s %s", exp.code, exp.stdout, exp.stderr)
	}
	file := filepath.Join(dir, "revocations.json")
	if err := os.WriteFile(file, []byte(exp.stdout), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := cli("", "admin", "revocations", "restore", "--from", file); r.code == 0 || !strings.Contains(r.stderr, "--force") {
		t.Fatalf("restore over a set that is not lost: %d %s", r.code, r.stderr)
	}
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	// The data directory remembers the epoch: the set is lost, no --force.
	if r := cli("", "admin", "revocations", "restore", "--from", file, "--format", "json"); r.code != 0 || !strings.Contains(r.stdout, `"restored":["local/x","other"]`) {
		t.Fatalf("restore --from: %d %s %s", r.code, r.stdout, r.stderr)
	}
	if r := cli("", "admin", "revocations", "list"); r.code != 0 || r.stdout != "local/x\nother\n" {
		t.Fatalf("list after the restore: %d %q %s", r.code, r.stdout, r.stderr)
	}
	if r := cli("", "admin", "revocations", "export"); r.stdout != exp.stdout {
		t.Errorf("export after the restore:\n%s\nwant\n%s", r.stdout, exp.stdout)
	}
	// The {"revoked": [...]} of `revocations --format json`, on stdin.
	if r := cli(`{"revoked":["local/y"]}`, "admin", "revocations", "restore", "--from", "-", "--force"); r.code != 0 {
		t.Fatalf("restore from stdin: %d %s", r.code, r.stderr)
	}
	if r := cli("", "admin", "revocations", "--format", "json"); r.code != 0 || strings.TrimSpace(r.stdout) != `{"revoked":["local/y"]}` {
		t.Fatalf("list after the second restore: %d %s %s", r.code, r.stdout, r.stderr)
	}
	for _, bad := range []string{`{}`, `[`, `{"revocations":[{"subject":"a/"}]}`, `{"nope":1}`} {
		if r := cli(bad, "admin", "revocations", "restore", "--from", "-", "--force"); r.code == 0 {
			t.Errorf("restore from %s: exit 0", bad)
		}
	}
}
