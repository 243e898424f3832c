package sessions

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/egress"
	"github.com/airlockhq/airlock/internal/browser"
	"github.com/airlockhq/airlock/internal/gate"
)

// Session is one open session as the manager keeps it.
type Session struct {
	id        string
	principal airlock.Principal
	profile   string
	ephemeral bool
	pooled    bool   // a render session of the chromium provider, not the caller's
	dir       string // holds profile/ (Chromium's user-data-dir) and files/ (the confined root)
	pass      string // the proxy password of this session
	narrow    *egress.Checker
	created   time.Time
	lastUsed  atomic.Int64  // unix nanoseconds
	release   func()        // gives back the session's browser_sessions budget
	approver  namedApprover // the session's own; nil Approver: none

	s *browser.Session

	subMu sync.Mutex
	subs  map[chan browser.Event]struct{}
}

// ID is the session's id.
func (bs *Session) ID() string { return bs.id }

// Browser is the session's browser (tests kill it to exercise a crash).
func (bs *Session) Browser() *browser.Session { return bs.s }

func (bs *Session) info() Info {
	i := Info{ID: bs.id, Tenant: bs.principal.Tenant, Profile: bs.profile, Created: bs.created,
		LastUsed: time.Unix(0, bs.lastUsed.Load()), Ephemeral: bs.ephemeral, FilesDir: filepath.Join(bs.dir, "files")}
	if bs.s != nil {
		i.Crashed = bs.s.Crashed()
	}
	return i
}

// onEvent records a session's event: refused requests go to the audit
// trail (the ops are audited by their own calls), and every event goes to
// the session's subscribers.
func (m *Manager) onEvent(bs *Session, ev browser.Event) {
	if ev.Type == browser.EventPolicyDenied {
		detail := fmt.Sprintf("session %s: %s request refused in the browser", bs.id, ev.ResourceType)
		if ev.InitiatingOp != "" {
			detail += " during " + ev.InitiatingOp
		}
		if ev.Message != "" {
			detail += ": " + ev.Message
		}
		m.deps.Audit(gate.Record{Time: ev.Time, Tenant: bs.principal.Tenant,
			Instance: bs.principal.Instance, Broker: "browser_request", Outcome: gate.OutcomeDeny,
			Code: string(airlock.CodeDenied), Reason: ev.Reason, Target: ev.URL, Detail: detail})
	}
	bs.publish(ev)
}

// publish hands ev to the session's subscribers.
func (bs *Session) publish(ev browser.Event) {
	bs.subMu.Lock()
	for ch := range bs.subs {
		select {
		case ch <- ev:
		default: // a slow subscriber loses events rather than stalling the browser
		}
	}
	bs.subMu.Unlock()
}

// Get returns the principal's tenant's session id; another tenant's
// session does not exist for it. Errors: not_found (no_session),
// unavailable (session_elsewhere, from Owners).
func (m *Manager) Get(p airlock.Principal, id string) (*Session, error) {
	m.mu.Lock()
	bs := m.sessions[id]
	m.mu.Unlock()
	if bs == nil || bs.s == nil || bs.pooled || bs.principal.Tenant != p.Tenant {
		if bs == nil {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			return nil, m.elsewhere(ctx, id)
		}
		return nil, errNoSession(id)
	}
	return bs, nil
}

func errNoSession(id string) error {
	return airlock.Errorf(airlock.CodeNotFound, airlock.ReasonNoSession, "browser: no session %q", id)
}

func (m *Manager) elsewhere(ctx context.Context, id string) error {
	if m.deps.Owners != nil {
		return m.deps.Owners.Elsewhere(ctx, id)
	}
	return errNoSession(id)
}

// List lists the open sessions of the principal's tenant, oldest first.
func (m *Manager) List(p airlock.Principal) []Info {
	m.mu.Lock()
	var out []Info
	for _, bs := range m.sessions {
		if bs.principal.Tenant == p.Tenant && bs.s != nil && !bs.pooled {
			out = append(out, bs.info())
		}
	}
	m.mu.Unlock()
	slices.SortFunc(out, func(a, b Info) int { return a.Created.Compare(b.Created) })
	return out
}

// Run runs fn on the session's browser within the op timeout (when ctx has
// no deadline), restarting a crashed browser first (the crash is reported
// as an event).
func (m *Manager) Run(ctx context.Context, bs *Session, fn func(context.Context, *browser.Session) error) error {
	bs.lastUsed.Store(time.Now().UnixNano())
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, m.cfg.OpTimeout)
		defer cancel()
	}
	if bs.s.Crashed() {
		m.deps.Logger.Warn("browser crashed; restarting", slog.String("browser_session", bs.id))
		m.onEvent(bs, browser.Event{Type: browser.EventCrashed, Time: time.Now(),
			Summary: "the browser process died; restarted with the session's profile"})
		if err := bs.s.Restart(ctx); err != nil {
			return err
		}
	}
	err := fn(ctx, bs.s)
	bs.lastUsed.Store(time.Now().UnixNano())
	return err
}

// CloseSession closes a session gracefully (its profile's cookies and
// localStorage are flushed). With wipe, or for an ephemeral session, the
// profile and the session's files are deleted.
func (m *Manager) CloseSession(ctx context.Context, bs *Session, wipe bool) error {
	return m.closeSession(ctx, bs, wipe || bs.ephemeral)
}

func (m *Manager) closeSession(ctx context.Context, bs *Session, wipe bool) error {
	m.forget(bs)
	if !bs.pooled && m.deps.Owners != nil {
		m.deps.Owners.Release(ctx, bs.id)
	}
	err := bs.s.Close(ctx)
	bs.subMu.Lock()
	for ch := range bs.subs {
		close(ch)
		delete(bs.subs, ch)
	}
	bs.subMu.Unlock()
	if wipe {
		if rerr := os.RemoveAll(bs.dir); rerr != nil {
			err = errors.Join(err, airlock.Errorf(airlock.CodeInternal, airlock.ReasonBrowserWipe, "browser: wipe %s: %v", bs.id, rerr))
		}
	}
	return err
}

// Subscribe subscribes to a session's events until cancel is called or
// the session closes (the channel is then closed). A subscriber that does
// not keep up loses events rather than stalling the browser.
func (m *Manager) Subscribe(bs *Session) (<-chan browser.Event, func()) {
	ch := make(chan browser.Event, 256)
	bs.subMu.Lock()
	bs.subs[ch] = struct{}{}
	bs.subMu.Unlock()
	var once sync.Once
	cancel := func() {
		once.Do(func() {
			bs.subMu.Lock()
			if _, ok := bs.subs[ch]; ok {
				delete(bs.subs, ch)
				close(ch)
			}
			bs.subMu.Unlock()
		})
	}
	return ch, cancel
}
