package wasmhost_test

import (
	"context"
	"encoding/json"
	"fmt"
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

func titled(title string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, "<html><head><title>%s</title></head><body><h1>%s</h1><p>Some text about %s.</p></body></html>", title, title, title)
	})
}

func TestUngrantedImportRefusedBeforeRunning(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer srv.Close()
	en := newEngine(t, tenants("compute", "minimal"))
	h := newHost(t, en)
	for _, profile := range []string{"compute", "minimal"} {
		t.Run(profile, func(t *testing.T) {
			o := run(t, h, profile, summariseWasm(t), srv.URL)
			wantCode(t, o.err, airlock.CodeDenied, "capability")
			want := "airlock.browse_fetch is not granted by profile " + profile
			if o.err.Error() != want {
				t.Fatalf("error %q, want %q", o.err, want)
			}
			if o.res != nil || o.stdout != "" {
				t.Fatalf("the guest ran: %+v %q", o.res, o.stdout)
			}
		})
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("server got %d requests from refused guests", n)
	}
	// Each refusal at link time is one guest decision of its principal.
	for _, profile := range []string{"compute", "minimal"} {
		wantAudit(t, en, profile+"/g1", "capability", "deny")
	}
}

// wantAudit checks that principal has exactly one guest decision with
// reason, and that its outcome is outcome.
func wantAudit(t testing.TB, en *engine.Engine, principal, reason, outcome string) {
	t.Helper()
	ctx := context.Background()
	if err := en.FlushAudit(ctx); err != nil {
		t.Fatal(err)
	}
	recs, err := en.AuditQuery(ctx, airlock.AuditQuery{Principal: principal, Broker: "guest", Reason: reason})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].Outcome != outcome || recs[0].ID == "" {
		t.Fatalf("guest decisions of %s with reason %s: %+v, want one %s", principal, reason, recs, outcome)
	}
}

func TestImportsPerProfile(t *testing.T) {
	en := newEngine(t, tenants("compute", "minimal", "network", "posix"))
	for _, tc := range []struct {
		profile string
		want    string
	}{
		{"compute", "last_error,result_read"},
		{"minimal", "last_error,result_read,secret_sign,tcp,tls,udp"},
		{"network", "browse_fetch,http_request,last_error,result_read,route,secret_sign,tcp,tls,udp"},
		{"posix", "browse_fetch,http_get_many,http_request,last_error,result_read,route,secret_sign,tcp,tls,udp"},
	} {
		p, err := en.GuestProfile(tc.profile)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(wasmhost.Imports(p), ","); got != tc.want {
			t.Errorf("%s links %s, want %s", tc.profile, got, tc.want)
		}
	}
}

func TestNetworkGuestFetchesLoopbackPage(t *testing.T) {
	t.Parallel() // builds or compiles a guest: overlaps the others
	srv := httptest.NewServer(titled("Hello from loopback"))
	defer srv.Close()
	en := newEngine(t, tenants("network"))
	h := newHost(t, en)
	o := run(t, h, "network", summariseWasm(t), srv.URL+"/page")
	if o.err != nil {
		t.Fatalf("run: %v", o.err)
	}
	if o.res.ExitCode != 0 || !strings.HasPrefix(o.stdout, "# Hello from loopback\n") || !strings.Contains(o.stdout, "Some text about Hello from loopback.") {
		t.Fatalf("exit %d, stdout %q, stderr %q", o.res.ExitCode, o.stdout, o.stderr)
	}
	if o.res.Calls != 1 {
		t.Fatalf("%d host calls, want 1", o.res.Calls)
	}
}

func TestGuestExitCode(t *testing.T) {
	en := newEngine(t, tenants("network"))
	h := newHost(t, en)
	// The floor denies 10.0.0.1 before any packet: the guest prints the
	// error and exits 3 (its own convention for a refusal).
	o := run(t, h, "network", summariseWasm(t), "http://10.0.0.1/")
	if o.err != nil {
		t.Fatalf("run: %v", o.err)
	}
	if o.res.ExitCode != 3 || !strings.Contains(o.stderr, "(denied/private)") {
		t.Fatalf("exit %d, stderr %q; want 3 and the denial", o.res.ExitCode, o.stderr)
	}
}

func TestSSRFFromGuestDeniedAndAudited(t *testing.T) {
	t.Parallel() // builds or compiles a guest: overlaps the others
	en := newEngine(t, engine.Config{Tenants: map[string]engine.TenantConfig{"posix": {Profile: "posix"}}})
	h := newHost(t, en)
	for _, tc := range []struct {
		name   string
		args   []string
		reason airlock.Reason
		target string // what the audit record must name
	}{
		{"fetch metadata", []string{"fetch", "http://169.254.169.254/latest/meta-data/"}, "metadata", "169.254.169.254"},
		{"fetch loopback", []string{"fetch", "http://127.0.0.1:1/"}, "loopback", "127.0.0.1"},
		{"http private", []string{"http", "GET", "http://10.0.0.1/"}, "private", "10.0.0.1"},
		{"http v6 loopback", []string{"http", "GET", "http://[::1]/"}, "loopback", "::1"},
		{"http v4-mapped", []string{"http", "POST", "http://[::ffff:127.0.0.1]/", "x"}, "", "::ffff:127.0.0.1"},
		{"http ambiguous", []string{"http", "GET", "http://0x7f.1/"}, "", "0x7f.1"},
		{"http userinfo", []string{"http", "GET", "http://user:pass@127.0.0.1/"}, "", "127.0.0.1"},
		{"many cgnat", []string{"many", "http://100.64.0.1/"}, "", "1 urls"},
		{"tcp loopback", []string{"tcp", "127.0.0.1", "6379", "PING\r\n"}, "loopback", "127.0.0.1:6379"},
		{"udp private", []string{"udp", "192.168.1.1", "53", "q"}, "private", "192.168.1.1:53"},
		{"tls metadata", []string{"tls", "169.254.169.254", "443", "GET / HTTP/1.0\r\n\r\n"}, "metadata", "169.254.169.254:443"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lines := probe(t, h, "posix", tc.args...)
			if len(lines) != 1 || lines[0].Error == nil {
				t.Fatalf("got %+v, want one error", lines)
			}
			e := lines[0].Error
			if e.Code != airlock.CodeDenied && e.Code != airlock.CodeInvalid {
				t.Fatalf("error %+v: want denied (or invalid for an ambiguous URL)", e)
			}
			if tc.reason != "" && e.Reason != tc.reason {
				t.Fatalf("reason %q, want %q (%s)", e.Reason, tc.reason, e.Message)
			}
			if e.DecisionID == "" {
				t.Fatalf("error without a decision id: %+v", e)
			}
			found := false
			for _, r := range en.RecentDenials("", 128) {
				if r.ID == e.DecisionID {
					found = true
					if r.Tenant != "posix" || r.Instance != "g1" || !strings.Contains(r.Target, tc.target) {
						t.Fatalf("audit record %+v: want tenant posix, instance g1, target containing %q", r, tc.target)
					}
				}
			}
			// A batch is one decision (its per-URL denials are in its
			// result), so it is not in the deny ring.
			batch := tc.args[0] == "many"
			if !found && e.Code == airlock.CodeDenied && !batch {
				t.Fatalf("decision %s is not in the deny ring", e.DecisionID)
			}
			if !found {
				// invalid is an error outcome, not in the deny ring, and a
				// batch is allowed as a whole: the persistent audit log has
				// both.
				if err := en.FlushAudit(context.Background()); err != nil {
					t.Fatal(err)
				}
				recs, err := en.AuditQuery(context.Background(), airlock.AuditQuery{Principal: "posix/g1"})
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range recs {
					found = found || r.ID == e.DecisionID
				}
				if !found {
					t.Fatalf("decision %s is not in the audit log", e.DecisionID)
				}
			}
		})
	}
	// A denial per batch URL is reported in the batch's line.
	lines := probe(t, h, "posix", "many", "http://100.64.0.1/", "http://[fe80::1]/")
	if len(lines) != 2 || lines[0].Error == nil || lines[0].Error.Reason != "cgnat" || lines[1].Error == nil || lines[1].Error.Code != airlock.CodeDenied {
		t.Fatalf("batch lines %+v: want cgnat and link-local denials", lines)
	}
}

func TestRunawayGuestStoppedAtDeadline(t *testing.T) {
	cfg := engine.Config{
		Profiles: map[string]engine.ProfileConfig{"tight": {Deadline: 300 * time.Millisecond, Capabilities: allCaps}},
		Tenants:  map[string]engine.TenantConfig{"tight": {Profile: "tight"}, "network": {Profile: "network", Exceptions: []string{"127.0.0.1"}}},
	}
	en := newEngine(t, cfg)
	h := newHost(t, en)
	// Build and compile the guest first: under -race and load that takes
	// longer than the bound below, which is about the run.
	ctx := context.Background()
	g, err := h.Load(ctx, airlock.Principal{Tenant: "tight", Instance: "g1"}, "guest.wasm", testGuest(t, "probe"))
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close(ctx)
	start := time.Now()
	_, err = g.Run(ctx, wasmhost.RunOptions{Args: []string{"spin"}, Stdout: io.Discard, Stderr: io.Discard})
	elapsed := time.Since(start)
	wantCode(t, err, airlock.CodeTimeout, string(airlock.ReasonCPUDeadline))
	// Not a speed assertion: a guest that was not preempted would spin
	// forever; this bounds the test instead of hanging it.
	if elapsed > 30*time.Second {
		t.Fatalf("the runaway ran %s past a 300ms deadline", elapsed)
	}
	t.Logf("runaway stopped after %s (deadline 300ms, under the machine's load)", elapsed)
	wantAudit(t, en, "tight/g1", string(airlock.ReasonCPUDeadline), "error")
	// The host is healthy: the next guest runs.
	srv := httptest.NewServer(titled("still here"))
	defer srv.Close()
	o := run(t, h, "network", summariseWasm(t), srv.URL)
	if o.err != nil || !strings.HasPrefix(o.stdout, "# still here\n") {
		t.Fatalf("after the runaway: %v %q", o.err, o.stdout)
	}
}

func TestCallerCancellation(t *testing.T) {
	en := newEngine(t, tenants("posix"))
	h := newHost(t, en)
	g, err := h.Load(context.Background(), airlock.Principal{Tenant: "posix"}, "probe", testGuest(t, "probe"))
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	_, err = g.Run(ctx, wasmhost.RunOptions{Args: []string{"spin"}})
	wantCode(t, err, airlock.CodeTimeout, string(airlock.ReasonCanceled))
}

func TestMemoryCap(t *testing.T) {
	cfg := engine.Config{
		Profiles: map[string]engine.ProfileConfig{"small": {MemoryMiB: 24, Capabilities: allCaps}},
		Tenants:  map[string]engine.TenantConfig{"small": {Profile: "small"}},
	}
	en := newEngine(t, cfg)
	h := newHost(t, en)
	o := run(t, h, "small", testGuest(t, "probe"), "mem", "4")
	if o.err != nil || o.stdout != "{\"ok\":4}\n" {
		t.Fatalf("4 MiB under a 24 MiB cap: %v %q %q", o.err, o.stdout, o.stderr)
	}
	o = run(t, h, "small", testGuest(t, "probe"), "mem", "64")
	wantCode(t, o.err, airlock.CodeTooLarge, string(airlock.ReasonMemoryLimit))
	if !strings.Contains(o.err.Error(), "profile small allows 25165824") {
		t.Fatalf("error %q does not name the cap", o.err)
	}
	wantAudit(t, en, "small/g1", string(airlock.ReasonMemoryLimit), "error")
	// A profile whose cap alone is over the host's memory budget could
	// never run: refused when loaded.
	o = run(t, newHostBudget(t, en, wasmhost.Budget{Memory: 16 << 20}), "small", testGuest(t, "probe"), "mem", "4")
	wantCode(t, o.err, airlock.CodeInvalid, string(airlock.ReasonGuestMemory))
}

func TestOutputCapped(t *testing.T) {
	en := newEngine(t, tenants("posix"))
	h := newHost(t, en)
	g, err := h.Load(context.Background(), airlock.Principal{Tenant: "posix"}, "probe", testGuest(t, "probe"))
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close(context.Background())
	var out strings.Builder
	res, err := g.Run(context.Background(), wasmhost.RunOptions{Args: []string{"loop-noop", "3"}, Stdout: &out, MaxStdout: 5})
	if err != nil {
		t.Fatal(err)
	}
	if out.String() != `{"ok"` || !res.StdoutTruncated {
		t.Fatalf("stdout %q truncated=%v; want 5 bytes and the flag", out.String(), res.StdoutTruncated)
	}
}

func TestNoEnvironmentNoFiles(t *testing.T) {
	// The probe guest cannot open files: there is no preopen. A fetch of a
	// file: URL is refused by the engine's scheme check, not the guest's
	// file system.
	en := newEngine(t, tenants("posix"))
	h := newHost(t, en)
	lines := probe(t, h, "posix", "fetch", "file:///etc/passwd")
	if len(lines) != 1 || lines[0].Error == nil || lines[0].Error.Code != airlock.CodeInvalid && lines[0].Error.Code != airlock.CodeDenied {
		t.Fatalf("file URL: %+v", lines)
	}
}

func TestSmallBufferPostReachesServerOnce(t *testing.T) {
	var posts atomic.Int64
	big := strings.Repeat("0123456789", 5000) // 50,000 bytes, far past a 16-byte buffer
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			posts.Add(1)
		}
		body, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s:%s", body, big)
	}))
	defer srv.Close()
	en := newEngine(t, tenants("posix"))
	h := newHost(t, en)
	lines := probe(t, h, "posix", "http", "POST", srv.URL+"/charge", "pay-once", "16")
	if len(lines) != 1 || lines[0].Error != nil {
		t.Fatalf("lines %+v", lines)
	}
	var ok struct {
		Status int    `json:"status"`
		Body   string `json:"body"`
	}
	if err := json.Unmarshal(lines[0].OK, &ok); err != nil {
		t.Fatal(err)
	}
	if ok.Status != 200 || ok.Body != "pay-once:"+big {
		t.Fatalf("status %d, body of %d bytes; want 200 and the whole body", ok.Status, len(ok.Body))
	}
	if n := posts.Load(); n != 1 {
		t.Fatalf("server got %d POSTs, want exactly 1", n)
	}
}

func TestGetManyLimits(t *testing.T) {
	t.Parallel() // builds or compiles a guest: overlaps the others
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		titled("page "+r.URL.Path).ServeHTTP(w, r)
	}))
	defer srv.Close()
	en := newEngine(t, tenants("posix", "network"))
	h := newHost(t, en)

	t.Run("order and per-URL errors", func(t *testing.T) {
		lines := probe(t, h, "posix", "many", srv.URL+"/a", "http://10.1.2.3/", srv.URL+"/c")
		if len(lines) != 3 {
			t.Fatalf("%d lines, want 3", len(lines))
		}
		var a, c struct{ Title string }
		json.Unmarshal(lines[0].OK, &a)
		json.Unmarshal(lines[2].OK, &c)
		if a.Title != "page /a" || c.Title != "page /c" || lines[1].Error == nil || lines[1].Error.Reason != "private" {
			t.Fatalf("lines %+v %+v %+v", a, lines[1].Error, c)
		}
	})
	t.Run("64 is the batch cap", func(t *testing.T) {
		args := []string{"many"}
		for i := range 65 {
			args = append(args, fmt.Sprintf("%s/%d", srv.URL, i))
		}
		lines := probe(t, h, "posix", args...)
		if len(lines) != 1 || lines[0].Error == nil || lines[0].Error.Code != airlock.CodeTooLarge || lines[0].Error.Reason != "batch" {
			t.Fatalf("65 URLs: %+v", lines)
		}
		lines = probe(t, h, "posix", args[:65]...)
		if len(lines) != 64 {
			t.Fatalf("64 URLs: %d lines", len(lines))
		}
		for i, l := range lines {
			if l.Error != nil {
				t.Fatalf("URL %d: %+v", i, l.Error)
			}
		}
	})
	t.Run("not linked without parallel", func(t *testing.T) {
		o := run(t, h, "network", testGuest(t, "probe"), "many", srv.URL)
		wantCode(t, o.err, airlock.CodeDenied, "capability")
		if !strings.Contains(o.err.Error(), "airlock.http_get_many is not granted by profile network") {
			t.Fatalf("error %q", o.err)
		}
	})
}
