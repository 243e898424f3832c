// Package sessions owns the browser sessions of a process: it opens them
// (internal/browser), forces each Chromium through a forward proxy on its
// tenant's egress dialer, records their refusals and approvals as
// decisions, closes the idle ones, and keeps the pool of render sessions
// the chromium provider draws from. It knows nothing of the engine: the
// caller hands it narrow dependencies (Deps) and begins its own gate call
// around each method.
package sessions

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/egress"
	"github.com/airlockhq/airlock/internal/browser"
	"github.com/airlockhq/airlock/internal/gate"
)

// DefaultRenderPool is how many pooled sessions per tenant render pages
// for the chromium provider.
const DefaultRenderPool = 2

// Config is the manager's configuration; the caller gives it its defaults.
type Config struct {
	ExecPath    string        // the Chromium binary; "" is browser.DefaultExecPath
	MaxSessions int           // a tenant's open sessions (render sessions excepted)
	IdleTimeout time.Duration // an unused session is closed after this
	OpTimeout   time.Duration // one op, when the caller's context has no deadline
	AskTimeout  time.Duration // an unanswered ask is a denial
	// Policy is the origin policy of a session whose request gives none.
	Policy browser.Policy
	// Dir holds profiles/ and ephemeral/; "" means a temporary directory,
	// made on first use and removed at Close.
	Dir string
	// RuntimeDir is where the browsers' user-data-dirs are recorded for
	// the next start's sweep of leftover Chromium processes.
	RuntimeDir string
	// ProxyHeaderTimeout is the proxy's egress.Proxy.HeaderTimeout.
	ProxyHeaderTimeout time.Duration
}

// Deps are what the manager needs from its owner, each as narrow as it
// can be. Every field but Owners is required.
type Deps struct {
	// Dialer returns the tenant's egress dialer (its policy, pins and
	// connect limiter), or nil for an unknown tenant.
	Dialer func(tenant string) *egress.Dialer
	// Narrow compiles a request's narrowing of the tenant's policy (nil:
	// none).
	Narrow func(*airlock.Narrowing) (*egress.Checker, error)
	// Revoked reports whether a principal is revoked: its sessions'
	// requests are refused at the proxy.
	Revoked func(airlock.Principal) bool
	// Audit records a decision the manager makes on its own (a refused
	// request, an approval); the owner gives it its id.
	Audit func(gate.Record)
	// AcquireSession takes one slot of the tenant's browser-sessions
	// budget, waiting for it when wait is set, else failing at once. Its
	// release may be called more than once (gate.Budgets' is).
	AcquireSession func(ctx context.Context, tenant string, wait bool) (release func(), err error)
	// OnConnectionsFull registers f to run when the tenant's ("" the
	// process's) connections budget is full.
	OnConnectionsFull func(tenant string, f func())
	// Owners records which replica runs each session; nil with one
	// replica.
	Owners Owners
	Logger *slog.Logger
}

// Owners records the replica that runs each session of a fleet.
type Owners interface {
	// Claim records this replica as the owner of session id.
	Claim(ctx context.Context, id string)
	// Release forgets a closed session's owner.
	Release(ctx context.Context, id string)
	// Elsewhere is the error for a session this replica does not have.
	Elsewhere(ctx context.Context, id string) error
}

// OpenRequest opens a session.
type OpenRequest struct {
	Profile      string             // "" is an ephemeral session
	Narrow       *airlock.Narrowing // narrows the tenant's policy
	Policy       *browser.Policy    // nil: Config.Policy
	Approver     browser.Approver   // the session's own approver, or nil
	ApproverName string
}

// Info describes an open session.
type Info struct {
	ID        string
	Tenant    string
	Profile   string
	Created   time.Time
	LastUsed  time.Time
	Crashed   bool
	Ephemeral bool
	FilesDir  string
}

var profileNameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_-][A-Za-z0-9._-]{0,63}$`) })

// Manager owns the sessions and, per tenant, the forward proxy their
// Chromium processes are forced through (layer 2). Its methods are safe
// for concurrent use. Build it with New; Close it.
type Manager struct {
	cfg  Config
	deps Deps

	mu       sync.Mutex
	closed   bool
	sessions map[string]*Session
	profiles map[string]string // tenant/profile → session id: one live session per profile
	proxies  map[string]*tenantProxy
	tmpRoot  string // Config.Dir "": the root, made on first use
	pool     renderPool
	runtime  *browser.Runtime

	approvers atomic.Bool // an approver channel is attached (EnableAPIApprovals)

	apMu     sync.Mutex
	apSeq    int
	channels map[int]namedApprover // AddApprover's, for every session

	cancel context.CancelFunc
	done   chan struct{}
}

// New starts a manager: it sweeps the Chromium processes a dead process
// left behind and starts the idle reaper on ctx, which Close stops.
func New(ctx context.Context, cfg Config, deps Deps) *Manager {
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	m := &Manager{cfg: cfg, deps: deps, sessions: map[string]*Session{},
		profiles: map[string]string{}, proxies: map[string]*tenantProxy{}, done: make(chan struct{})}
	m.pool.size = DefaultRenderPool
	m.runtime = browser.NewRuntime(cfg.RuntimeDir)
	if n, err := m.runtime.Sweep(); err != nil {
		deps.Logger.Warn("browser: sweep of leftover Chromium processes", "error", err)
	} else if n > 0 {
		deps.Logger.Warn("browser: killed the Chromium processes a dead airlock left behind", "processes", n)
	}
	ctx, m.cancel = context.WithCancel(ctx)
	go m.reaper(ctx)
	return m
}

// root is where profiles and session files live.
func (m *Manager) root() (string, error) {
	if m.cfg.Dir != "" {
		return m.cfg.Dir, nil
	}
	if m.tmpRoot == "" {
		d, err := os.MkdirTemp("", "airlock-browser-")
		if err != nil {
			return "", airlock.Errorf(airlock.CodeUnavailable, airlock.ReasonBrowserLaunch, "browser: temporary directory: %v", err)
		}
		m.tmpRoot = d
	}
	return m.tmpRoot, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func errShuttingDown() *airlock.Error {
	return airlock.Errorf(airlock.CodeUnavailable, airlock.ReasonShuttingDown, "engine is shutting down")
}

// Open opens a session for p: its Chromium sends every request through
// the tenant's proxy with credentials of this session alone, and every
// request is also decided in the browser (layer 1). With Owners, the
// session is claimed for this replica.
//
// Errors: invalid (a bad profile name or narrowing), rate_limited (the
// tenant's session limit), unavailable (browser_missing, browser_launch,
// profile_in_use, shutting_down), denied (unknown_tenant).
func (m *Manager) Open(ctx context.Context, p airlock.Principal, req OpenRequest) (Info, error) {
	bs, err := m.open(ctx, p, req, false)
	if err != nil {
		return Info{}, err
	}
	if m.deps.Owners != nil {
		m.deps.Owners.Claim(ctx, bs.id)
	}
	return bs.info(), nil
}

func (m *Manager) open(ctx context.Context, p airlock.Principal, req OpenRequest, pooled bool) (*Session, error) {
	if req.Profile != "" && !profileNameRE().MatchString(req.Profile) {
		return nil, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonBadProfile,
			"browser: profile name %q: want 1 to 64 of A-Z a-z 0-9 . _ -, not starting with a dot", req.Profile)
	}
	narrow, err := m.deps.Narrow(req.Narrow)
	if err != nil {
		return nil, err
	}
	pol := m.cfg.Policy
	if req.Policy != nil {
		pol = *req.Policy
	}
	if err := pol.Validate(); err != nil {
		return nil, err
	}
	bs := &Session{id: "bs_" + randomHex(12), principal: p, profile: req.Profile, ephemeral: req.Profile == "", pooled: pooled,
		pass: randomHex(24), narrow: narrow, created: time.Now(), subs: map[chan browser.Event]struct{}{}}
	bs.lastUsed.Store(bs.created.UnixNano())
	if req.Approver != nil {
		bs.approver = namedApprover{name: req.ApproverName, a: req.Approver}
	}
	// The sessions budget: a render session of the chromium provider
	// waits in line like a fetch; a caller's own session is refused at
	// once when there is no room.
	release, err := m.deps.AcquireSession(ctx, p.Tenant, pooled)
	if err != nil {
		return nil, err
	}
	bs.release = release
	opened := false
	defer func() {
		if !opened {
			release()
		}
	}()

	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, errShuttingDown()
	}
	n := 0
	for _, o := range m.sessions {
		if o.principal.Tenant == p.Tenant && !o.pooled {
			n++
		}
	}
	if n >= m.cfg.MaxSessions && !pooled {
		m.mu.Unlock()
		return nil, airlock.Errorf(airlock.CodeRateLimited, airlock.ReasonBrowserSessions,
			"browser: tenant %s has %d open sessions (browser.max_sessions); close one first", p.Tenant, n)
	}
	pkey := p.Tenant + "/" + req.Profile
	if req.Profile != "" {
		if id, busy := m.profiles[pkey]; busy {
			m.mu.Unlock()
			return nil, airlock.Errorf(airlock.CodeUnavailable, airlock.ReasonProfileInUse,
				"browser: profile %q is open in session %s", req.Profile, id)
		}
		m.profiles[pkey] = bs.id
	}
	root, err := m.root()
	var tp *tenantProxy
	if err == nil {
		tp, err = m.proxy(p.Tenant)
	}
	if err == nil {
		m.sessions[bs.id] = bs // the proxy must know the session before Chromium's first request
	}
	m.mu.Unlock()
	if err != nil {
		m.forget(bs)
		return nil, err
	}

	if bs.ephemeral {
		bs.dir = filepath.Join(root, "ephemeral", bs.id)
	} else {
		bs.dir = filepath.Join(root, "profiles", p.Tenant, req.Profile)
	}
	chk := tp.dialer.Policy
	s, err := browser.Open(ctx, browser.Options{
		ExecPath:   m.cfg.ExecPath,
		ProxyAddr:  tp.ln.Addr().String(),
		ProxyUser:  bs.id,
		ProxyPass:  bs.pass,
		ProfileDir: filepath.Join(bs.dir, "profile"),
		FilesDir:   filepath.Join(bs.dir, "files"),
		Policy:     pol,
		AskTimeout: m.cfg.AskTimeout,
		NoApprover: m.noApprover(),
		Approvers:  func() []browser.Approver { return m.sessionApprovers(bs) },
		Decide:     func(raw string) error { return decideURL(chk, narrow, raw) },
		OnEvent:    func(ev browser.Event) { m.onEvent(bs, ev) },
		Logger:     m.deps.Logger.With(slog.String("browser_session", bs.id)),
		Runtime:    m.runtime,
	})
	if err != nil {
		m.forget(bs)
		if bs.ephemeral {
			os.RemoveAll(bs.dir)
		}
		return nil, err
	}
	m.mu.Lock()
	bs.s = s
	closed := m.closed
	m.mu.Unlock()
	if closed {
		m.closeSession(context.WithoutCancel(ctx), bs, bs.ephemeral)
		return nil, errShuttingDown()
	}
	opened = true
	return bs, nil
}

// decideURL is layer 1's egress check of one request URL: the tenant's
// policy on the name (the floor for IP literals, allow and deny lists), and
// the session's narrowing. Names are resolved and pinned by the proxy.
func decideURL(chk, narrow *egress.Checker, raw string) error {
	t, err := egress.ParseURL(raw)
	if err != nil {
		return err
	}
	for _, c := range []*egress.Checker{chk, narrow} {
		if c == nil {
			continue
		}
		if v := c.CheckName(egress.LaneHTTP, t); !v.Allow {
			return airlock.Errorf(airlock.CodeDenied, airlock.Reason(v.Reason), "%s refused by policy: %s", t.Host, v.Reason)
		}
	}
	return nil
}

func (m *Manager) forget(bs *Session) {
	if bs.release != nil {
		bs.release()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.sessions, bs.id)
	if bs.profile != "" {
		if m.profiles[bs.principal.Tenant+"/"+bs.profile] == bs.id {
			delete(m.profiles, bs.principal.Tenant+"/"+bs.profile)
		}
	}
}

// reaper closes sessions idle longer than the idle timeout, until ctx
// ends.
func (m *Manager) reaper(ctx context.Context) {
	defer close(m.done)
	every := min(m.cfg.IdleTimeout/4, 30*time.Second)
	t := time.NewTicker(max(every, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			m.mu.Lock()
			var idle []*Session
			for _, bs := range m.sessions {
				if bs.s != nil && now.Sub(time.Unix(0, bs.lastUsed.Load())) > m.cfg.IdleTimeout {
					idle = append(idle, bs)
				}
			}
			m.mu.Unlock()
			for _, bs := range idle {
				if bs.pooled && !m.pool.remove(bs) {
					continue // rendering right now
				}
				m.deps.Logger.Info("closing idle browser session", slog.String("browser_session", bs.id))
				cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), browser.DefaultCloseTimeout)
				m.closeSession(cctx, bs, bs.ephemeral)
				cancel()
			}
		}
	}
}

// Close stops the reaper, shuts every session down gracefully, then the
// proxies, and removes the ephemeral sessions' directories.
func (m *Manager) Close(ctx context.Context) {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	m.closed = true
	var all []*Session
	for _, bs := range m.sessions {
		if bs.s != nil {
			all = append(all, bs)
		}
	}
	m.mu.Unlock()
	m.cancel()
	<-m.done
	var wg sync.WaitGroup
	for _, bs := range all {
		wg.Go(func() { m.closeSession(ctx, bs, bs.ephemeral) })
	}
	wg.Wait()
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, tp := range m.proxies {
		tp.srv.Close()
		tp.p.Close()
	}
	if m.tmpRoot != "" {
		os.RemoveAll(m.tmpRoot)
	} else if m.cfg.Dir != "" {
		os.RemoveAll(filepath.Join(m.cfg.Dir, "ephemeral"))
	}
}

// AuditTarget cuts a caller-supplied string for an audit target.
func AuditTarget(s string) string {
	const n = 200
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}
