package engine

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/egress"
	"github.com/airlockhq/airlock/internal/browser"
	"github.com/airlockhq/airlock/internal/gate"
)

// Defaults of the browser, each also a config value.
const (
	DefaultBrowserMaxSessions = 4                // open sessions per tenant
	DefaultBrowserIdleTimeout = 10 * time.Minute // an unused session is closed after this
	DefaultBrowserOpTimeout   = 60 * time.Second // one op, when the caller sets no deadline
	DefaultBrowserAskTimeout  = 30 * time.Second // an unanswered ask is a denial
)

// BrowserConfig configures the headless browser (capability browser).
type BrowserConfig struct {
	// ExecPath is the Chromium binary [/usr/lib/chromium/chromium].
	ExecPath string `koanf:"exec_path" json:"exec_path"`
	// MaxSessions bounds the open sessions of one tenant [4].
	MaxSessions int `koanf:"max_sessions" json:"max_sessions"`
	// IdleTimeout closes a session no op has used for this long [10m].
	IdleTimeout time.Duration `koanf:"idle_timeout" json:"idle_timeout"`
	// OpTimeout bounds one op when the caller gives no deadline [60s].
	OpTimeout time.Duration `koanf:"op_timeout" json:"op_timeout"`
	// AskTimeout is how long a request paused under default_action ask
	// waits for an answer before it is denied [30s].
	AskTimeout time.Duration `koanf:"ask_timeout" json:"ask_timeout"`
	// Policy is the origin policy of a session whose request gives none:
	// allowed_origins, denied_origins, default_action [deny, with no
	// allowed origins: nothing loads until the caller says what may].
	Policy BrowserPolicy `koanf:"policy" json:"policy"`
	// ApproverTokens are hashes ("sha256:<64 hex>") of tokens that may
	// answer asks on the API (POST .../approvals/{id}), besides the admin
	// tokens, for every tenant's sessions; they can do nothing else.
	// A tenant's token never answers asks [none].
	ApproverTokens []string `koanf:"approver_tokens" json:"approver_tokens"`
}

func (c BrowserConfig) withDefaults() BrowserConfig {
	if c.ExecPath == "" {
		c.ExecPath = browser.DefaultExecPath
	}
	if c.MaxSessions == 0 {
		c.MaxSessions = DefaultBrowserMaxSessions
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = DefaultBrowserIdleTimeout
	}
	if c.OpTimeout == 0 {
		c.OpTimeout = DefaultBrowserOpTimeout
	}
	if c.AskTimeout == 0 {
		c.AskTimeout = DefaultBrowserAskTimeout
	}
	return c
}

func (c BrowserConfig) validate() error {
	switch {
	case c.MaxSessions < 0:
		return configErr("browser.max_sessions %d: want 0 (default) or more", c.MaxSessions)
	case c.IdleTimeout < 0 || c.OpTimeout < 0 || c.AskTimeout < 0:
		return configErr("browser: timeouts must not be negative")
	}
	if err := c.Policy.Validate(); err != nil {
		return configErr("browser.policy.%s", strings.TrimPrefix(err.Error(), "browser policy: "))
	}
	return nil
}

// The browser's types, as the engine's API names them.
type (
	// BrowserOp is one of the 22 ops, a tagged union {"kind":"navigate",...}.
	BrowserOp = browser.Op
	// BrowserResult is what an op returns.
	BrowserResult = browser.Result
	// BrowserEvent is one event of a session: a completed op, a refused
	// request, an approval asked for, a crash.
	BrowserEvent = browser.Event
	// BrowserPolicy is a session's origin policy (allowed_origins,
	// denied_origins, default_action deny/allow/ask), on top of the
	// tenant's egress policy and the floor, enforced in the browser and at
	// the proxy.
	BrowserPolicy = browser.Policy
)

// BrowserOpenRequest opens a session.
type BrowserOpenRequest struct {
	// Profile names a persistent profile of the tenant (cookies and
	// localStorage survive Close and reopening it); "" opens an ephemeral
	// session whose profile is deleted when it closes. Names are 1 to 64
	// of [A-Za-z0-9._-], not starting with a dot.
	Profile string `json:"profile,omitempty"`
	// Narrow narrows the tenant's egress policy for this session only.
	Narrow *airlock.Narrowing `json:"narrow,omitempty"`
	// Policy is the session's origin policy; nil means browser.policy of
	// the configuration.
	Policy *BrowserPolicy `json:"policy,omitempty"`
}

// BrowserSessionInfo describes an open session.
type BrowserSessionInfo struct {
	ID        string    `json:"id"`
	Tenant    string    `json:"tenant"`
	Profile   string    `json:"profile,omitempty"` // "" for an ephemeral session
	Created   time.Time `json:"created"`
	LastUsed  time.Time `json:"last_used"`
	Crashed   bool      `json:"crashed,omitempty"`
	Ephemeral bool      `json:"ephemeral"`
	// FilesDir is the session's confined directory for uploads,
	// downloads and screenshots.
	FilesDir string `json:"files_dir,omitempty"`
}

var profileNameRE = regexp.MustCompile(`^[A-Za-z0-9_-][A-Za-z0-9._-]{0,63}$`)

// browserManager owns the engine's browser sessions and, per tenant, the
// forward proxy their Chromium processes are forced through (layer 2).
type browserManager struct {
	e   *Engine
	cfg BrowserConfig

	mu       sync.Mutex
	closed   bool
	sessions map[string]*browserSession
	profiles map[string]string // tenant/profile → session id: one live session per profile
	proxies  map[string]*tenantProxy
	tmpRoot  string     // in-memory engines: the root, made on first use
	pool     renderPool // the chromium provider's sessions (chromium.go)
	runtime  *browser.Runtime

	approvers atomic.Bool // an approver channel is attached (ServeBrowserApprovals)

	stop chan struct{}
	done chan struct{}
}

// tenantProxy is one egress.Proxy on a loopback port, on the tenant's
// Dialer (its policy, pins, connect limiter and auditor).
type tenantProxy struct {
	p   *egress.Proxy
	srv *http.Server
	ln  net.Listener
}

type browserSession struct {
	id        string
	principal airlock.Principal
	profile   string
	ephemeral bool
	pooled    bool   // a render session of the chromium provider, not the caller's
	dir       string // holds profile/ (Chromium's user-data-dir) and files/ (the confined root)
	pass      string // the proxy password of this session
	narrow    *egress.Checker
	created   time.Time
	lastUsed  atomic.Int64 // unix nanoseconds
	release   func()       // gives back the session's browser_sessions budget

	s *browser.Session

	subMu sync.Mutex
	subs  map[chan BrowserEvent]struct{}
}

func newBrowserManager(e *Engine, cfg BrowserConfig) *browserManager {
	m := &browserManager{e: e, cfg: cfg.withDefaults(), sessions: map[string]*browserSession{},
		profiles: map[string]string{}, proxies: map[string]*tenantProxy{},
		stop: make(chan struct{}), done: make(chan struct{})}
	m.runtime = browser.NewRuntime(m.runtimeDir())
	if n, err := m.runtime.Sweep(); err != nil {
		e.logger.Warn("browser: sweep of leftover Chromium processes", "error", err)
	} else if n > 0 {
		e.logger.Warn("browser: killed the Chromium processes a dead airlock left behind", "processes", n)
	}
	go m.reaper()
	return m
}

// runtimeDir is where the manager records its browsers' user-data-dirs for
// the next start's sweep: the data directory's browser/run, or for
// in-memory engines, whose roots are temporary, one directory per user.
func (m *browserManager) runtimeDir() string {
	if !m.e.cfg.InMemory {
		return filepath.Join(m.e.cfg.DataDir, "browser", "run")
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("airlock-browser-run-%d", os.Geteuid()))
}

// root is where profiles and session files live: the data directory's
// browser/, or for an in-memory engine a temporary directory removed at
// Close.
func (m *browserManager) root() (string, error) {
	if !m.e.cfg.InMemory {
		return filepath.Join(m.e.cfg.DataDir, "browser"), nil
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

// proxy returns the tenant's proxy, starting it on first use.
func (m *browserManager) proxy(tenant string) (*tenantProxy, error) {
	if tp := m.proxies[tenant]; tp != nil {
		return tp, nil
	}
	t := m.e.gate.Tenant(tenant)
	if t == nil || t.Dialer == nil {
		return nil, airlock.Errorf(airlock.CodeDenied, airlock.ReasonUnknownTenant, "browser: unknown tenant %q", tenant)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, airlock.Errorf(airlock.CodeUnavailable, airlock.ReasonBrowserProxy, "browser: start the egress proxy: %v", err)
	}
	tp := &tenantProxy{ln: ln}
	tp.p = &egress.Proxy{Dialer: t.Dialer, Logger: m.e.logger, HeaderTimeout: m.e.cfg.Egress.FetchTimeout,
		Authorize: func(_ *http.Request, user, pass string) (egress.ProxyClient, bool) {
			return m.authorize(tenant, user, pass)
		}}
	tp.srv = &http.Server{Handler: m.reportRefusals(tp.p), ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(m.e.logger.Handler(), slog.LevelDebug)}
	go tp.srv.Serve(ln)
	m.e.budgets.OnFull(gate.BudgetConnections, tenant, tp.p.CloseIdleConnections)
	m.e.budgets.OnFull(gate.BudgetConnections, "", tp.p.CloseIdleConnections)
	m.proxies[tenant] = tp
	return tp, nil
}

// reportRefusals wraps the proxy so that each request it refuses (layer
// 2: what layer 1 let through or cannot see, such as WebSockets, another
// name for a denied address, Chromium's own background traffic) is an
// audited decision and reaches the session's event subscribers, like a
// layer-1 refusal.
func (m *browserManager) reportRefusals(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w}
		h.ServeHTTP(sw, r)
		code := sw.Header().Get(egress.HeaderAirlockCode)
		if sw.status != http.StatusForbidden || code != string(airlock.CodeDenied) {
			return
		}
		user, _, ok := r.BasicAuth()
		if !ok {
			user, _, ok = proxyBasicAuth(r)
		}
		m.mu.Lock()
		bs := m.sessions[user]
		var sess *browser.Session
		if bs != nil {
			sess = bs.s
		}
		m.mu.Unlock()
		if !ok || bs == nil {
			return
		}
		target := r.URL.String()
		if r.Method == http.MethodConnect {
			// A tunnel carries https or a WebSocket (ws and wss alike):
			// the session knows which its pages opened.
			scheme := "https"
			if sess != nil {
				scheme = sess.TunnelScheme(r.Host, tunnelLabelWait)
			}
			target = scheme + "://" + r.Host
		}
		m.onEvent(bs, browser.Event{Type: browser.EventPolicyDenied, Time: time.Now(), URL: browserTarget(target),
			ResourceType: "proxy", Reason: sw.Header().Get(egress.HeaderAirlockReason),
			Message: "refused by the egress proxy (layer 2)"})
	})
}

// tunnelLabelWait bounds how long a refused tunnel's report waits for the
// page's WebSocket event that names its scheme (the browser's answer has
// gone already).
const tunnelLabelWait = 250 * time.Millisecond

// proxyBasicAuth reads the Proxy-Authorization Basic credentials.
func proxyBasicAuth(r *http.Request) (user, pass string, ok bool) {
	rr := &http.Request{Header: http.Header{"Authorization": r.Header.Values("Proxy-Authorization")}}
	return rr.BasicAuth()
}

// statusWriter records the status a handler answered with.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach Flush and Hijack.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// authorize maps proxy credentials to a live session of the tenant whose
// principal is not revoked. Unknown users are compared against a dummy
// secret so that timing does not tell live session ids.
func (m *browserManager) authorize(tenant, user, pass string) (egress.ProxyClient, bool) {
	m.mu.Lock()
	bs := m.sessions[user]
	m.mu.Unlock()
	want := "x"
	if bs != nil {
		want = bs.pass
	}
	ok := subtle.ConstantTimeCompare([]byte(pass), []byte(want)) == 1
	if !ok || bs == nil || bs.principal.Tenant != tenant {
		return egress.ProxyClient{}, false
	}
	if m.e.revs.Revoked(bs.principal) {
		return egress.ProxyClient{}, false
	}
	m.mu.Lock()
	s := bs.s
	m.mu.Unlock()
	admit := func(egress.Target, []netip.Addr) error {
		return &egress.Error{Code: egress.CodeDenied, Reason: egress.Reason(airlock.ReasonSessionStarting), Op: "check", Detail: "the browser session is not open yet"}
	}
	if s != nil {
		admit = s.Admit
	}
	return egress.ProxyClient{Key: bs.principal.String(), Narrow: bs.narrow, Admit: admit}, true
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// BrowserOpen opens a browser session for the principal (capability
// browser). Its Chromium sends every request through a forward proxy on
// the tenant's egress policy with credentials of this session alone, and
// every request is also decided in the browser (layer 1).
//
// Errors: denied (capability), invalid (a bad profile name or narrowing),
// rate_limited (the tenant's session limit), unavailable (browser_missing,
// browser_launch, or the profile is open in another session), revoked.
func (e *Engine) BrowserOpen(ctx context.Context, p airlock.Principal, req BrowserOpenRequest) (BrowserSessionInfo, error) {
	call, err := e.begin(ctx, p, airlock.CapabilityBrowser, "browser", "open "+req.Profile)
	if err != nil {
		return BrowserSessionInfo{}, err
	}
	if err := call.Tenant.Limits.Check(req, ""); err != nil {
		return BrowserSessionInfo{}, call.End(err, 0, 0)
	}
	bs, err := e.browser.open(call.Ctx, p, req, false)
	if err != nil {
		return BrowserSessionInfo{}, call.End(err, 0, 0)
	}
	e.claimBrowser(call.Ctx, bs.id)
	return bs.info(), call.End(nil, 0, 0)
}

// openPooled opens a render session for the chromium provider.
func (m *browserManager) openPooled(ctx context.Context, p airlock.Principal) (*browserSession, error) {
	return m.open(ctx, p, BrowserOpenRequest{Policy: &BrowserPolicy{DefaultAction: browser.ActionAllow}}, true)
}

func (m *browserManager) open(ctx context.Context, p airlock.Principal, req BrowserOpenRequest, pooled bool) (*browserSession, error) {
	if req.Profile != "" && !profileNameRE.MatchString(req.Profile) {
		return nil, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonBadProfile,
			"browser: profile name %q: want 1 to 64 of A-Z a-z 0-9 . _ -, not starting with a dot", req.Profile)
	}
	narrow, err := narrowChecker(req.Narrow)
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
	bs := &browserSession{id: "bs_" + randomHex(12), principal: p, profile: req.Profile, ephemeral: req.Profile == "", pooled: pooled,
		pass: randomHex(24), narrow: narrow, created: time.Now(), subs: map[chan BrowserEvent]struct{}{}}
	bs.lastUsed.Store(bs.created.UnixNano())
	// The sessions budget: a render session of the chromium provider
	// waits in line like a fetch; a caller's own session is refused at
	// once when there is no room.
	take := m.e.budgets.TryAcquire
	if pooled {
		take = m.e.budgets.Acquire
	}
	release, err := take(ctx, gate.BudgetBrowsers, p.Tenant, 1)
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
	chk := m.e.gate.Tenant(p.Tenant).Dialer.Policy
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
		Decide:     func(raw string) error { return decideURL(chk, narrow, raw) },
		OnEvent:    func(ev browser.Event) { m.onEvent(bs, ev) },
		Logger:     m.e.logger.With(slog.String("browser_session", bs.id)),
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

// noApprover is the session's Options.NoApprover: "" when someone can
// answer its asks.
func (m *browserManager) noApprover() string {
	if m.approvers.Load() {
		return ""
	}
	return noApproverHint
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

func (m *browserManager) forget(bs *browserSession) {
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

func (bs *browserSession) info() BrowserSessionInfo {
	i := BrowserSessionInfo{ID: bs.id, Tenant: bs.principal.Tenant, Profile: bs.profile, Created: bs.created,
		LastUsed: time.Unix(0, bs.lastUsed.Load()), Ephemeral: bs.ephemeral, FilesDir: filepath.Join(bs.dir, "files")}
	if bs.s != nil {
		i.Crashed = bs.s.Crashed()
	}
	return i
}

// onEvent records a session's event: refused requests go to the audit
// trail (the ops are audited by their own calls), and every event goes to
// the session's subscribers.
func (m *browserManager) onEvent(bs *browserSession, ev browser.Event) {
	if ev.Type == browser.EventPolicyDenied {
		detail := fmt.Sprintf("session %s: %s request refused in the browser", bs.id, ev.ResourceType)
		if ev.InitiatingOp != "" {
			detail += " during " + ev.InitiatingOp
		}
		if ev.Message != "" {
			detail += ": " + ev.Message
		}
		m.e.audit.Record(gate.Record{ID: m.e.gate.NewID(), Time: ev.Time, Tenant: bs.principal.Tenant,
			Instance: bs.principal.Instance, Broker: "browser_request", Outcome: gate.OutcomeDeny,
			Code: string(airlock.CodeDenied), Reason: ev.Reason, Target: ev.URL, Detail: detail})
	}
	bs.publish(ev)
}

// publish hands ev to the session's subscribers.
func (bs *browserSession) publish(ev browser.Event) {
	bs.subMu.Lock()
	for ch := range bs.subs {
		select {
		case ch <- ev:
		default: // a slow subscriber loses events rather than stalling the browser
		}
	}
	bs.subMu.Unlock()
}

// session returns the principal's tenant's session id; another tenant's
// session does not exist for it.
func (m *browserManager) session(p airlock.Principal, id string) (*browserSession, error) {
	m.mu.Lock()
	bs := m.sessions[id]
	m.mu.Unlock()
	if bs == nil || bs.s == nil || bs.pooled || bs.principal.Tenant != p.Tenant {
		if bs == nil {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			return nil, m.e.browserElsewhere(ctx, id)
		}
		return nil, airlock.Errorf(airlock.CodeNotFound, airlock.ReasonNoSession, "browser: no session %q", id)
	}
	return bs, nil
}

// BrowserSessions lists the open sessions of the principal's tenant,
// oldest first.
func (e *Engine) BrowserSessions(p airlock.Principal) []BrowserSessionInfo {
	m := e.browser
	m.mu.Lock()
	var out []BrowserSessionInfo
	for _, bs := range m.sessions {
		if bs.principal.Tenant == p.Tenant && bs.s != nil && !bs.pooled {
			out = append(out, bs.info())
		}
	}
	m.mu.Unlock()
	slices.SortFunc(out, func(a, b BrowserSessionInfo) int { return a.Created.Compare(b.Created) })
	return out
}

// BrowserDo runs one op in a session (capability browser). Each op is one
// audited decision. A session whose browser crashed is restarted first
// (the crash is reported as an event), with its profile.
func (e *Engine) BrowserDo(ctx context.Context, p airlock.Principal, id string, op BrowserOp) (BrowserResult, error) {
	if err := op.Validate(); err != nil {
		return BrowserResult{}, err
	}
	target := op.Kind
	if op.URL != "" {
		target += " " + browserTarget(op.URL)
	}
	var res BrowserResult
	check := func(l *gate.Limits) error { return l.Check(op, "") }
	err := e.browserCall(ctx, p, id, target, check, func(ctx context.Context, s *browser.Session) error {
		var err error
		res, err = s.Do(ctx, op)
		return err
	})
	return res, err
}

// The interact types, as the engine's API names them.
type (
	// BrowserAction is one interact step, tagged by "action".
	BrowserAction = browser.Action
	// BrowserInteractResult is what an interact sequence returns.
	BrowserInteractResult = browser.InteractResult
)

// ParseBrowserOp decodes one op strictly (browser.ParseOp). Errors:
// invalid (browser_op).
func ParseBrowserOp(data []byte) (BrowserOp, error) { return browser.ParseOp(data) }

// ParseBrowserAction decodes one interact step strictly. Errors: invalid
// (browser_action).
func ParseBrowserAction(data []byte) (BrowserAction, error) { return browser.ParseAction(data) }

// BrowserInteract runs an interact sequence in a session as one gated,
// audited call (capability browser), within a budget that scales with the
// number of steps (browser.InteractBudget) instead of the op timeout. The
// steps' failures are in the result; the error is the sequence's own
// (invalid actions, no session, a crash that could not be restarted).
func (e *Engine) BrowserInteract(ctx context.Context, p airlock.Principal, id string, actions []BrowserAction, stopOnError bool) (BrowserInteractResult, error) {
	res := BrowserInteractResult{Results: []browser.ActionResult{}}
	for i, a := range actions {
		if err := a.Validate(); err != nil {
			return res, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonBrowserAction, "actions[%d]: %v", i, err)
		}
	}
	check := func(l *gate.Limits) error {
		if err := l.CheckValue(gate.LimitBrowserActions, "actions", int64(len(actions))); err != nil {
			return err
		}
		for i, a := range actions {
			if err := l.Check(a, ""); err != nil {
				return airlock.Errorf(airlock.CodeInvalid, airlock.ReasonLimit, "actions[%d]: %w", i, err)
			}
		}
		return nil
	}
	// The budget of a sequence longer than the ceiling is not computed:
	// the check refuses it first.
	budget := time.Duration(0)
	if len(actions) <= browser.MaxActions {
		budget = browser.InteractBudget(actions)
	}
	cctx, cancel := context.WithTimeout(ctx, budget+10*time.Second)
	defer cancel()
	err := e.browserCall(cctx, p, id, fmt.Sprintf("interact %d actions", len(actions)), check, func(ctx context.Context, s *browser.Session) error {
		var err error
		res, err = s.Interact(ctx, actions, stopOnError)
		return err
	})
	return res, err
}

// BrowserApprove answers an approval asked under default_action ask:
// approve lets the waiting requests go on and admits their origin for the
// rest of the session; otherwise they are refused. approver names who
// answers (the admin, or an approver token): an approval comes from a
// channel the workload does not hold, so there is no principal here and
// no tenant's token may call this (the API refuses them). It never waits
// for the session's op: the op that raised the ask is usually still
// running. Each answer is one audited decision (broker browser_approval)
// in the session tenant's log.
//
// Errors: not_found (no_session; approval when nothing waits on that id),
// unavailable (session_elsewhere: the session runs on another replica).
func (e *Engine) BrowserApprove(ctx context.Context, approver, id, approvalID string, approve bool) error {
	m := e.browser
	m.mu.Lock()
	bs := m.sessions[id]
	var s *browser.Session
	if bs != nil && !bs.pooled {
		s = bs.s
	}
	m.mu.Unlock()
	if bs == nil {
		return e.browserElsewhere(ctx, id)
	}
	if s == nil {
		return airlock.Errorf(airlock.CodeNotFound, airlock.ReasonNoSession, "browser: no session %q", id)
	}
	verb, answer := "denied", s.Deny
	if approve {
		verb, answer = "approved", s.Approve
	}
	err := answer(approvalID)
	rec := gate.Record{ID: e.gate.NewID(), Time: time.Now(), Tenant: bs.principal.Tenant, Instance: bs.principal.Instance,
		Broker: "browser_approval", Outcome: gate.OutcomeAllow, Target: browserTarget(id + " " + approvalID),
		Detail: verb + " by " + approver}
	if err != nil {
		rec.Outcome, rec.Code, rec.Reason = gate.OutcomeError, string(airlock.CodeOf(err)), string(airlock.ReasonOf(err))
		rec.Detail = "answer by " + approver + ": " + airlock.PublicMessageOf(err)
	}
	e.audit.Record(rec)
	return err
}

// ServeBrowserApprovals tells the engine that an approver channel is
// attached: the API serves the approvals route, and an admin token or
// browser.approver_tokens is configured to call it. Without one (airlock
// mcp over stdio, airlock browser run), default_action ask denies at once,
// naming what allows the origin. It reports whether asks can be answered.
func (e *Engine) ServeBrowserApprovals() bool {
	ok := len(e.cfg.AdminTokens) > 0 || len(e.cfg.Browser.ApproverTokens) > 0
	if ok {
		e.browser.approvers.Store(true)
	}
	return ok
}

// noApproverHint ends the refusal of an ask no one can answer.
const noApproverHint = "allow the origin with --allow-origin ORIGIN, the session's policy.allowed_origins or browser.policy.allowed_origins, " +
	"or serve the API with an admin token or browser.approver_tokens to answer asks"

// browserCall runs fn on a session as one gated, audited call with the
// op timeout, after check (nil: none) passed the tenant's ceilings.
func (e *Engine) browserCall(ctx context.Context, p airlock.Principal, id, target string, check func(*gate.Limits) error, fn func(context.Context, *browser.Session) error) error {
	bs, err := e.browser.session(p, id)
	if err != nil {
		return err
	}
	call, err := e.begin(ctx, p, airlock.CapabilityBrowser, "browser", id+" "+target)
	if err != nil {
		return err
	}
	if check != nil {
		if err := check(call.Tenant.Limits); err != nil {
			return call.End(err, 0, 0)
		}
	}
	bs.lastUsed.Store(time.Now().UnixNano())
	cctx := call.Ctx
	if _, ok := cctx.Deadline(); !ok {
		var cancel context.CancelFunc
		cctx, cancel = context.WithTimeout(cctx, e.browser.cfg.OpTimeout)
		defer cancel()
	}
	if bs.s.Crashed() {
		e.logger.Warn("browser crashed; restarting", slog.String("browser_session", id))
		e.browser.onEvent(bs, browser.Event{Type: browser.EventCrashed, Time: time.Now(),
			Summary: "the browser process died; restarted with the session's profile"})
		if err := bs.s.Restart(cctx); err != nil {
			return call.End(err, 0, 0)
		}
	}
	err = fn(cctx, bs.s)
	bs.lastUsed.Store(time.Now().UnixNano())
	return call.End(err, 0, 0)
}

// BrowserClose closes a session gracefully (its profile's cookies and
// localStorage are flushed). With wipe, or for an ephemeral session, the
// profile and the session's files are deleted.
func (e *Engine) BrowserClose(ctx context.Context, p airlock.Principal, id string, wipe bool) error {
	bs, err := e.browser.session(p, id)
	if err != nil {
		return err
	}
	call, err := e.begin(ctx, p, airlock.CapabilityBrowser, "browser", id+" close")
	if err != nil {
		return err
	}
	return call.End(e.browser.closeSession(call.Ctx, bs, wipe || bs.ephemeral), 0, 0)
}

func (m *browserManager) closeSession(ctx context.Context, bs *browserSession, wipe bool) error {
	m.forget(bs)
	if !bs.pooled {
		m.e.releaseBrowser(ctx, bs.id)
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

// BrowserEvents subscribes to a session's events until cancel is called
// or the session closes (the channel is then closed). A subscriber that
// does not keep up loses events rather than stalling the browser.
func (e *Engine) BrowserEvents(p airlock.Principal, id string) (<-chan BrowserEvent, func(), error) {
	bs, err := e.browser.session(p, id)
	if err != nil {
		return nil, nil, err
	}
	ch := make(chan BrowserEvent, 256)
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
	return ch, cancel, nil
}

// reaper closes sessions idle longer than the idle timeout.
func (m *browserManager) reaper() {
	defer close(m.done)
	every := min(m.cfg.IdleTimeout/4, 30*time.Second)
	t := time.NewTicker(max(every, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case now := <-t.C:
			m.mu.Lock()
			var idle []*browserSession
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
				m.e.logger.Info("closing idle browser session", slog.String("browser_session", bs.id))
				ctx, cancel := context.WithTimeout(context.Background(), browser.DefaultCloseTimeout)
				m.closeSession(ctx, bs, bs.ephemeral)
				cancel()
			}
		}
	}
}

// close shuts every session down gracefully, then the proxies.
func (m *browserManager) close(ctx context.Context) {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	m.closed = true
	var all []*browserSession
	for _, bs := range m.sessions {
		if bs.s != nil {
			all = append(all, bs)
		}
	}
	m.mu.Unlock()
	close(m.stop)
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
	} else if !m.e.cfg.InMemory {
		os.RemoveAll(filepath.Join(m.e.cfg.DataDir, "browser", "ephemeral"))
	}
}

// browserTarget cuts a caller-supplied string for an audit target.
func browserTarget(s string) string {
	const n = 200
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}
