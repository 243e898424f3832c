package sessions

import (
	"context"
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/egress"
	"github.com/airlockhq/airlock/internal/gate"
	"github.com/airlockhq/airlock/internal/leakcheck"
)

// TestMain fails the package when a test leaves a goroutine behind (the
// reaper, a proxy).
func TestMain(m *testing.M) { os.Exit(leakcheck.Main(m, "sessions", leakcheck.Options{})) }

// deps are Deps whose calls the test counts; no tenant is known.
type deps struct {
	acquired, released atomic.Int64
	audited            atomic.Int64
}

func (d *deps) Deps() Deps {
	return Deps{
		Dialer:  func(string) *egress.Dialer { return nil },
		Narrow:  func(*airlock.Narrowing) (*egress.Checker, error) { return nil, nil },
		Revoked: func(airlock.Principal) bool { return false },
		Audit:   func(gate.Record) { d.audited.Add(1) },
		AcquireSession: func(context.Context, string, bool) (func(), error) {
			d.acquired.Add(1)
			var once sync.Once // release may be called more than once (Deps)
			return func() { once.Do(func() { d.released.Add(1) }) }, nil
		},
		OnConnectionsFull: func(string, func()) {},
	}
}

func newManager(t *testing.T, ctx context.Context, d Deps) *Manager {
	t.Helper()
	m := New(ctx, Config{MaxSessions: 4, IdleTimeout: time.Minute, OpTimeout: time.Minute, AskTimeout: time.Second,
		Dir: t.TempDir(), RuntimeDir: t.TempDir()}, d)
	t.Cleanup(func() { m.Close(context.Background()) })
	return m
}

// TestOpenRefusesBeforeTheBrowser: a bad profile name is refused before
// the budget is touched, and a tenant the dialer does not know is refused
// before Chromium starts, giving back its budget slot and leaving no
// session behind.
func TestOpenRefusesBeforeTheBrowser(t *testing.T) {
	var d deps
	m := newManager(t, t.Context(), d.Deps())
	p := airlock.Principal{Tenant: "ghost"}
	_, err := m.Open(t.Context(), p, OpenRequest{Profile: ".hidden"})
	if airlock.CodeOf(err) != airlock.CodeInvalid || airlock.ReasonOf(err) != "bad_profile" {
		t.Fatalf("open with profile .hidden: %v, want invalid (bad_profile)", err)
	}
	if n := d.acquired.Load(); n != 0 {
		t.Fatalf("a refused profile name took %d budget slots", n)
	}
	_, err = m.Open(t.Context(), p, OpenRequest{Profile: "work"})
	if airlock.CodeOf(err) != airlock.CodeDenied || airlock.ReasonOf(err) != "unknown_tenant" {
		t.Fatalf("open for an unknown tenant: %v, want denied (unknown_tenant)", err)
	}
	if a, r := d.acquired.Load(), d.released.Load(); a != 1 || r != 1 {
		t.Fatalf("budget slots: %d taken, %d given back; want 1 and 1", a, r)
	}
	if got := m.List(p); len(got) != 0 {
		t.Fatalf("sessions after a refused open: %+v", got)
	}
	// The profile is free again: the same refusal, not profile_in_use.
	if _, err := m.Open(t.Context(), p, OpenRequest{Profile: "work"}); airlock.ReasonOf(err) != "unknown_tenant" {
		t.Fatalf("second open: %v, want unknown_tenant again", err)
	}
}

type owners struct{ released []string }

var errElsewhere = airlock.Errorf(airlock.CodeUnavailable, "session_elsewhere", "on replica r2")

func (*owners) Claim(context.Context, string)           {}
func (o *owners) Release(_ context.Context, id string)  { o.released = append(o.released, id) }
func (*owners) Elsewhere(context.Context, string) error { return errElsewhere }

// TestUnknownSessionAsksOwners: a session this process does not have is
// the fleet's answer (Owners.Elsewhere) when there is a fleet, no_session
// otherwise; an approval for it is not audited.
func TestUnknownSessionAsksOwners(t *testing.T) {
	var d deps
	alone := newManager(t, t.Context(), d.Deps())
	p := airlock.Principal{Tenant: "acme"}
	if _, err := alone.Get(p, "bs_nope"); airlock.CodeOf(err) != airlock.CodeNotFound || airlock.ReasonOf(err) != "no_session" {
		t.Fatalf("get without a fleet: %v, want not_found (no_session)", err)
	}
	fd := d.Deps()
	fd.Owners = &owners{}
	fleet := newManager(t, t.Context(), fd)
	if _, err := fleet.Get(p, "bs_nope"); !errors.Is(err, errElsewhere) {
		t.Fatalf("get with a fleet: %v, want the owners' answer", err)
	}
	if err := fleet.Approve(t.Context(), "admin", "bs_nope", "ap_1", true); !errors.Is(err, errElsewhere) {
		t.Fatalf("approve with a fleet: %v, want the owners' answer", err)
	}
	if n := d.audited.Load(); n != 0 {
		t.Fatalf("%d decisions audited for a session that is not here", n)
	}
}

// TestReaperRunsOnTheGivenContext: the reaper stops when the context given
// to New ends, and Close (after it, and again) returns; leakcheck proves
// no goroutine is left.
func TestReaperRunsOnTheGivenContext(t *testing.T) {
	var d deps
	ctx, cancel := context.WithCancel(t.Context())
	m := newManager(t, ctx, d.Deps())
	cancel()
	select {
	case <-m.done:
	case <-time.After(10 * time.Second): // a hang guard, not a timing assertion
		t.Fatal("the reaper did not stop when its context ended")
	}
	m.Close(context.Background())
	m.Close(context.Background())
	if _, err := m.Open(t.Context(), airlock.Principal{Tenant: "acme"}, OpenRequest{}); airlock.ReasonOf(err) != "shutting_down" {
		t.Fatalf("open after Close: %v, want shutting_down", err)
	}
}
