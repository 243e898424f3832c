package browser

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/egress"
	"github.com/airlockhq/airlock/internal/child"
)

// DefaultExecPath is Debian's Chromium binary. The /usr/bin/chromium wrapper
// adds extensions and API-key variables, so the binary is launched directly.
const DefaultExecPath = "/usr/lib/chromium/chromium"

// DefaultCloseTimeout bounds a graceful Close when the caller's context has
// no deadline.
const DefaultCloseTimeout = 10 * time.Second

// Options configure a Session. ProxyAddr and ProfileDir are required.
type Options struct {
	// ExecPath is the Chromium binary; "" means DefaultExecPath.
	ExecPath string

	// ProxyAddr is the host:port of the forward proxy (egress.Proxy) all
	// traffic goes to. ProxyUser and ProxyPass are the session's Basic
	// credentials, given only when the proxy asks (Fetch.authRequired).
	ProxyAddr string
	ProxyUser string
	ProxyPass string

	// ProfileDir is the Chromium user-data-dir. It is created when absent
	// and never removed by this package, so cookies and localStorage
	// persist across Close and Open with the same directory.
	ProfileDir string

	// Decide is called for every request the page target makes (layer 1),
	// with the full URL; a non-nil error refuses it. A nil Decide lets every
	// http and https request through to the proxy, which still decides
	// (layer 2). Decide may be called from several goroutines at once.
	Decide func(url string) error

	// FilesDir is the root that upload reads from and download writes to
	// (paths are confined to it); "" refuses both.
	FilesDir string

	// MaxDownloadBytes caps the body one download saves; 0 means
	// MaxDownloadBytes.
	MaxDownloadBytes int64

	// Policy is the session's origin policy (see Policy); the zero Policy
	// denies every origin (default_action deny with no allowed origins).
	Policy Policy

	// AskTimeout bounds a request waiting for Approve or Deny under
	// default_action ask; 0 means DefaultAskTimeout.
	AskTimeout time.Duration

	// NoApprover, when set, says that no one can answer an ask (no
	// approver channel is attached): ask then denies at once, at every
	// layer, with reason no_approver, and the refusal ends with this text,
	// which names the flag or key that allows an origin.
	NoApprover string

	// Approvers, if set, returns the channels through which a person
	// answers asks now (see Approver); it is called at each new ask and
	// must be quick. When it returns any, an ask waits for them even with
	// NoApprover set; the API's Approve and Deny answer as well.
	Approvers func() []Approver

	// OnEvent, if set, receives the session's events (see Event): completed
	// ops, refused requests, approvals asked for, crashes. It is called
	// from the session's goroutines and must not block for long.
	OnEvent func(Event)

	// Logger receives Chromium's protocol errors at debug level; nil: none.
	Logger *slog.Logger

	// Runtime, if set, records the browser's user-data-dir while it runs,
	// so that the next process can sweep what this one leaves behind if it
	// dies (see Runtime.Sweep). nil records nothing.
	Runtime *Runtime

	// ActionTimeout bounds the actionability checks of an action by ref
	// (an interact step has its own timeout_ms); 0 means
	// DefaultActionTimeout.
	ActionTimeout time.Duration

	// ReplySnapshotTimeout bounds the fresh snapshot of an action's reply
	// (a renderer a page's script keeps busy costs the snapshot, not the
	// action); 0 means DefaultReplySnapshotTimeout.
	ReplySnapshotTimeout time.Duration

	// FlushTimeout bounds Close's wait for the pages' IndexedDB writes;
	// 0 means DefaultFlushTimeout.
	FlushTimeout time.Duration
}

// Session is one Chromium process with one page target. Its methods are
// safe for concurrent use; operations on the page run one at a time.
//
// When the browser process dies without Close, every operation returns an
// *airlock.Error with code unavailable and reason browser_crashed until
// Restart launches it again with the same Options (and profile).
type Session struct {
	opts Options

	proxyHost string // ProxyAddr's host, for --host-resolver-rules

	// live and gone mirror b and closed for Crashed, which must not wait
	// for mu.
	live atomic.Pointer[instance]
	gone atomic.Bool

	mu      sync.Mutex // serialises operations and guards the fields below
	closed  bool
	b       *instance
	refs    *refTable    // refs of the current document
	lastRef int          // the last ref number minted; never reused
	last    *lastOutline // the last snapshot's whole outline, for paging
	// gotoLoader is the document a navigate that did not wait for the
	// load asked for, until waitDocument has seen it commit.
	gotoLoader cdp.LoaderID

	console *consoleRing // the page's console messages; has its own lock
	netlog  *netRing     // the requests layer 1 saw; has its own lock

	nsWarn sync.Once // logs once that Chromium runs without a PID namespace

	tabSeq int // the last tab number; guarded by mu
	tabMu  sync.RWMutex
	tabOf  map[string]string // target id → tab id

	policy *compiledPolicy
	curOp  atomic.Pointer[string] // the op running now, for events

	hopMu sync.Mutex
	hops  map[network.RequestID]int // requests per redirect chain

	askMu   sync.Mutex
	pending map[string]*approval // by origin

	sockets socketLog // WebSockets the pages opened, for layer 2's labels
	tunnels tunnelLog // tunnels layer 2 refused lately, for download's errors

	extra atomic.Pointer[originHeaders] // a scrape's caller headers (scrape.go)
}

// instance is one launched browser.
type instance struct {
	profileDir    string
	namespaced    atomic.Bool // Chromium is PID 1 of its own PID namespace
	unrecord      func()      // removes the Runtime record
	allocCancel   context.CancelFunc
	browserCtx    context.Context
	browserCancel context.CancelFunc
	browser       *chromedp.Browser
	target        *chromedp.Target // the current tab's target
	tabs          []*tab
	cur           *tab
	eventsCtx     context.Context // lives until kill
	stopEvents    context.CancelFunc
	events        sync.WaitGroup
	closing       chan struct{}
}

// Open checks the options, launches Chromium and prepares its page target:
// Fetch interception (with proxy authentication) is installed before the
// first request leaves. ctx bounds the launch only; the browser lives until
// Close.
//
// Errors: invalid (missing_option) for bad Options, unavailable
// (browser_missing) when the binary is absent, unavailable
// (browser_launch) when Chromium does not start.
func Open(ctx context.Context, opts Options) (*Session, error) {
	if opts.ExecPath == "" {
		opts.ExecPath = DefaultExecPath
	}
	if opts.ProfileDir == "" {
		return nil, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonMissingOption, "browser: ProfileDir is required")
	}
	host, _, err := net.SplitHostPort(opts.ProxyAddr)
	if err != nil || host == "" {
		return nil, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonMissingOption, "browser: ProxyAddr %q is not host:port", opts.ProxyAddr)
	}
	if err := checkExec(opts.ExecPath); err != nil {
		return nil, err
	}
	pol, err := opts.Policy.compile()
	if err != nil {
		return nil, err
	}
	pol.noApprover = opts.NoApprover
	if opts.Approvers != nil {
		pol.hasApprover = func() bool { return len(opts.Approvers()) > 0 }
	}
	s := &Session{opts: opts, proxyHost: host, refs: newRefTable(), console: &consoleRing{}, netlog: &netRing{}, policy: pol}
	b, err := s.launch(ctx)
	if err != nil {
		return nil, err
	}
	s.b = b
	s.live.Store(b)
	return s, nil
}

func checkExec(path string) error {
	fi, err := os.Stat(path)
	if err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
		return airlock.Errorf(airlock.CodeUnavailable, airlock.ReasonBrowserMissing,
			"browser: no Chromium executable at %s: install it with `apt-get install chromium`", path)
	}
	return nil
}

// flags returns the allocator options: chromedp's defaults, then ours.
func (s *Session) flags(b *instance) []chromedp.ExecAllocatorOption {
	o := s.opts
	opts := append([]chromedp.ExecAllocatorOption(nil), chromedp.DefaultExecAllocatorOptions[:]...)
	return append(opts,
		chromedp.ModifyCmdFunc(func(cmd *exec.Cmd) { s.tieToParent(b, cmd) }),
		chromedp.ExecPath(o.ExecPath),
		chromedp.UserDataDir(o.ProfileDir),
		chromedp.Flag("headless", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("proxy-server", "http://"+o.ProxyAddr),
		chromedp.Flag("proxy-bypass-list", "<-loopback>"),
		chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND , EXCLUDE "+s.proxyHost),
		chromedp.Flag("webrtc-ip-handling-policy", "disable_non_proxied_udp"),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-domain-reliability", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("no-pings", true),
		chromedp.Flag("no-first-run", true),
		// chromedp's list plus the back/forward cache: a page restored
		// from it fires no load lifecycle, and back and forward wait for one.
		// Background services that only make requests the proxy refuses.
		chromedp.Flag("disable-features", "Translate,BlinkGenPropertyTrees,BackForwardCache,"+
			"AutofillServerCommunication,OptimizationHints,MediaRouter,DialMediaRouteProvider"),
		chromedp.Flag("disable-client-side-phishing-detection", true),
	)
}

// tieToParent makes Chromium's whole process tree die with this process:
// Chromium runs as PID 1 of a PID namespace of its own (when the kernel
// lets this process make one), so that when it dies the kernel kills its
// zygotes, renderers and services too, however wedged; and it gets
// SIGKILL when the thread that started it exits (chromedp starts it from a
// goroutine locked to its thread for the browser's life).
func (s *Session) tieToParent(b *instance, cmd *exec.Cmd) {
	if err := child.InPIDNamespace(cmd); err != nil {
		s.nsWarn.Do(func() {
			if l := s.opts.Logger; l != nil {
				l.Warn("browser: Chromium runs without a PID namespace; its helpers are killed by --user-data-dir instead", "error", err)
			}
		})
		return
	}
	b.namespaced.Store(true)
}

func (s *Session) launch(ctx context.Context) (*instance, error) {
	if err := os.MkdirAll(s.opts.ProfileDir, 0o700); err != nil {
		return nil, airlock.Errorf(airlock.CodeUnavailable, airlock.ReasonBrowserLaunch, "browser: profile directory: %w", err)
	}
	unrecord, err := s.opts.Runtime.add(s.opts.ProfileDir)
	if err != nil {
		return nil, airlock.Errorf(airlock.CodeUnavailable, airlock.ReasonBrowserLaunch, "browser: %w", err)
	}
	b := &instance{profileDir: s.opts.ProfileDir, unrecord: unrecord, closing: make(chan struct{})}
	life := context.WithoutCancel(ctx)
	allocCtx, allocCancel := chromedp.NewExecAllocator(life, s.flags(b)...)
	var copts []chromedp.ContextOption
	if l := s.opts.Logger; l != nil {
		logf := func(f string, a ...any) { l.Debug(fmt.Sprintf(f, a...)) }
		copts = append(copts, chromedp.WithLogf(logf), chromedp.WithErrorf(logf))
	}
	browserCtx, browserCancel := chromedp.NewContext(allocCtx, copts...)
	b.allocCancel, b.browserCtx, b.browserCancel = allocCancel, browserCtx, browserCancel

	// The first Run allocates the browser and lives as long as browserCtx,
	// so ctx cannot be its context: watch ctx while it runs instead.
	started := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			browserCancel()
		case <-started:
		}
	}()
	err = chromedp.Do(browserCtx, chromedp.Func(func(context.Context, *chromedp.Target) error { return nil }))
	close(started)
	if err == nil && ctx.Err() != nil {
		err = ctx.Err()
	}
	if err != nil {
		b.kill()
		if ctx.Err() != nil {
			return nil, airlock.Errorf(airlock.CodeTimeout, airlock.ReasonBrowserLaunch, "browser: launch: %w", ctx.Err())
		}
		return nil, airlock.Errorf(airlock.CodeUnavailable, airlock.ReasonBrowserLaunch, "browser: launch %s: %w", s.opts.ExecPath, err)
	}
	c := chromedp.FromContext(browserCtx)
	b.browser = c.Browser
	s.addTab(b, c.Target, nil)
	if err := s.intercept(ctx, b); err != nil {
		b.kill()
		return nil, airlock.Errorf(airlock.CodeUnavailable, airlock.ReasonBrowserLaunch, "browser: install request interception: %w", err)
	}
	// Pages never download: Chromium would write what a page starts (an
	// attachment link) under $HOME/Downloads, outside the files directory.
	// The download op saves response bodies itself (see Download). The
	// events say which downloads a page started (PageInfo.Downloads).
	if _, err := cdp.Call(ctx, b.browser, cdpbrowser.SetDownloadBehavior, cdpbrowser.SetDownloadBehaviorParams{
		Behavior: cdpbrowser.SetDownloadBehaviorBehaviorDeny, EventsEnabled: new(true)}); err != nil {
		b.kill()
		return nil, airlock.Errorf(airlock.CodeUnavailable, airlock.ReasonBrowserLaunch, "browser: deny downloads: %w", err)
	}
	if err := openBlank(ctx, b.target); err != nil {
		b.kill()
		return nil, airlock.Errorf(airlock.CodeUnavailable, airlock.ReasonBrowserLaunch, "browser: open %s: %w", aboutBlank, err)
	}
	return b, nil
}

// kill stops the browser at once (no graceful close) and waits for it.
// Without a PID namespace, the helpers Chromium leaves behind are killed
// by their --user-data-dir; then the Runtime record goes.
func (b *instance) kill() {
	if b.stopEvents != nil {
		b.stopEvents()
	}
	b.browserCancel()
	b.allocCancel()
	b.events.Wait()
	if !b.namespaced.Load() {
		killLeftovers(b.profileDir)
	}
	if b.unrecord != nil {
		b.unrecord()
		b.unrecord = nil
	}
}

// lost reports whether the connection to the browser has dropped.
func (b *instance) lost() bool {
	if b.browser == nil {
		return true
	}
	select {
	case <-b.browser.LostConnection:
		return true
	default:
		return false
	}
}

// Close shuts the browser down gracefully: it first waits (at most
// Options.FlushTimeout) for the IndexedDB writes the pages have begun, then
// Browser.close, so the profile's localStorage and cookies are flushed, waiting up to ctx's deadline or
// DefaultCloseTimeout, then stops whatever is left. The profile directory
// stays. Close is idempotent.
func (s *Session) Close(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	s.gone.Store(true)
	b := s.b
	s.b = nil
	s.live.Store(nil)
	if b == nil {
		return nil
	}
	flush := s.opts.FlushTimeout
	if flush <= 0 {
		flush = DefaultFlushTimeout
	}
	return b.close(ctx, flush)
}

func (b *instance) close(ctx context.Context, flush time.Duration) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultCloseTimeout)
		defer cancel()
	}
	if !b.lost() {
		b.flushStorage(ctx, flush)
	}
	close(b.closing)
	var err error
	if !b.lost() {
		cctx, cancel := context.WithCancel(b.browserCtx)
		stop := context.AfterFunc(ctx, cancel)
		err = chromedp.Cancel(cctx)
		stop()
		cancel()
	}
	b.kill()
	if err != nil && !errors.Is(err, context.Canceled) {
		return airlock.Errorf(airlock.CodeInternal, airlock.ReasonBrowserClose, "browser: close: %w", err)
	}
	return nil
}

// Restart stops what is left of the browser and launches it again with the
// same Options and profile, on about:blank. Refs from before are dead. A
// browser that is running (restarted by another caller meanwhile) is left
// as it is.
func (s *Session) Restart(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errClosed()
	}
	if s.b != nil && !s.b.lost() {
		// Another caller restarted it while this one waited (Crashed
		// does not wait for a restart in progress).
		return nil
	}
	if s.b != nil {
		s.b.kill()
		s.b = nil
		s.live.Store(nil)
	}
	s.refs = newRefTable()
	b, err := s.launch(ctx)
	if err != nil {
		return err
	}
	s.b = b
	s.live.Store(b)
	return nil
}

// Crashed reports whether the browser process died without Close. It
// never waits for a running op (one may be paused on an ask whose answer
// must not wait for a listing of the sessions).
func (s *Session) Crashed() bool {
	if s.gone.Load() {
		return false
	}
	b := s.live.Load()
	return b == nil || b.lost()
}

func errClosed() error {
	return airlock.Errorf(airlock.CodeInvalid, airlock.ReasonSessionClosed, "browser: the session is closed")
}

func errCrashed(cause error) error {
	if cause == nil {
		return airlock.Errorf(airlock.CodeUnavailable, airlock.ReasonBrowserCrashed, "browser: the browser process died; restart the session")
	}
	return airlock.Errorf(airlock.CodeUnavailable, airlock.ReasonBrowserCrashed, "browser: the browser process died; restart the session: %w", cause)
}

// begin locks the session for one operation and returns its browser.
// The caller must call s.mu.Unlock.
func (s *Session) begin() (*instance, error) {
	s.mu.Lock()
	switch {
	case s.closed:
		s.mu.Unlock()
		return nil, errClosed()
	case s.b == nil || s.b.lost():
		s.mu.Unlock()
		return nil, errCrashed(nil)
	}
	return s.b, nil
}

// cdpErr turns an error of a protocol call into the vocabulary.
func cdpErr(ctx context.Context, b *instance, op string, err error) error {
	var ae *airlock.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ae):
		return err
	case b.lost():
		return errCrashed(err)
	case ctx.Err() != nil:
		return airlock.Errorf(airlock.CodeTimeout, airlock.ReasonBrowserTimeout, "browser: %s: %w", op, err)
	}
	return airlock.Errorf(airlock.CodeInternal, airlock.ReasonCDP, "browser: %s: %w", op, err)
}

// allowedSchemes are the only schemes that load; javascript:, data:, file:,
// blob:, chrome:, view-source:, ftp: and the rest are refused.
var allowedSchemes = map[string]bool{"http": true, "https": true}

// checkURL refuses a navigation target before any browser call: a
// malformed URL, a refused scheme, Decide's refusal, or the origin policy's
// deny (an ask verdict goes on: the request itself will wait for the
// answer).
func (s *Session) checkURL(raw string) error {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || u.Scheme == "" {
		return airlock.Errorf(airlock.CodeInvalid, airlock.ReasonBadURL, "browser: %q is not an absolute URL", raw)
	}
	if !allowedSchemes[strings.ToLower(u.Scheme)] {
		return s.refusedBefore(raw, airlock.Errorf(airlock.CodeDenied, airlock.ReasonScheme, "browser: scheme %q is refused: only http and https load", u.Scheme))
	}
	if u.Host == "" {
		return airlock.Errorf(airlock.CodeInvalid, airlock.ReasonBadURL, "browser: %q has no host", raw)
	}
	t, err := s.check(raw)
	if err != nil {
		return s.refusedBefore(raw, err)
	}
	if v, reason := s.policy.decide(t.Scheme, t.Host, int(t.Port)); v == verdictDeny {
		return s.refusedBefore(raw, s.policy.refusal(raw, reason))
	}
	return nil
}

func reasonOf(err error) string {
	if r := airlock.ReasonOf(err); r != "" {
		return string(r)
	}
	return "policy"
}

// currentOp is the op kind running now ("" between ops).
func (s *Session) currentOp() string {
	if p := s.curOp.Load(); p != nil {
		return *p
	}
	return ""
}

// Navigate loads url in the page. Only http and https are accepted; any
// other scheme is refused (denied, reason scheme) before any browser call,
// and Decide is asked first. With waitLoaded, Navigate returns after the
// load event. Refs from earlier snapshots die.
//
// Errors: invalid (bad_url), denied (scheme or Decide's reason; also
// blocked when interception refused the document), the egress proxy's
// code and reason when it answered the document itself (waitLoaded only),
// unavailable (proxy_auth) when it refused the credentials, upstream
// (navigate_failed) with Chromium's net error, timeout, unavailable
// (browser_crashed).
func (s *Session) Navigate(ctx context.Context, rawURL string, waitLoaded bool) error {
	if err := s.checkURL(rawURL); err != nil {
		return err
	}
	b, err := s.begin()
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	s.refs = newRefTable()
	b.cur.doc = true
	if waitLoaded {
		var resp *network.Response
		resp, err = chromedp.NavigateResponse(rawURL)(ctx, b.target)
		if err == nil {
			if perr := proxyRefusal(rawURL, resp); perr != nil {
				return perr
			}
		}
	} else {
		var res page.NavigateResult
		res, err = cdp.Call(ctx, b.target, page.Navigate, page.NavigateParams{URL: rawURL})
		if err == nil && res.ErrorText != "" {
			err = &chromedp.LoadError{ErrorText: res.ErrorText}
		}
		if err == nil {
			s.gotoLoader = res.LoaderID
		}
	}
	var le *chromedp.LoadError
	if errors.As(err, &le) {
		if strings.Contains(le.ErrorText, "ERR_BLOCKED_BY_CLIENT") {
			return airlock.Errorf(airlock.CodeDenied, airlock.ReasonBlocked, "browser: navigate %s: blocked by policy", rawURL)
		}
		return airlock.Errorf(airlock.CodeUpstream, airlock.ReasonNavigateFailed, "browser: navigate %s: %s", rawURL, le.ErrorText)
	}
	return cdpErr(ctx, b, "navigate", err)
}

// proxyRefusal reports the egress proxy's own answer to the document
// request (it marks them with X-Airlock-Code), which Chromium would
// otherwise render as if it were the page.
func proxyRefusal(raw string, resp *network.Response) error {
	if resp == nil {
		return nil
	}
	if resp.Status == http.StatusProxyAuthRequired {
		return airlock.Errorf(airlock.CodeUnavailable, airlock.ReasonProxyAuth, "browser: navigate %s: the egress proxy refused the session's credentials", raw)
	}
	var code, reason string
	for k, v := range resp.Headers {
		switch sv, _ := v.(string); {
		case strings.EqualFold(k, egress.HeaderAirlockCode):
			code = sv
		case strings.EqualFold(k, egress.HeaderAirlockReason):
			reason = sv
		}
	}
	if code == "" {
		return nil
	}
	c := airlock.Code(code)
	if !c.Valid() {
		c = airlock.CodeInternal
	}
	return airlock.Errorf(c, airlock.Reason(reason), "browser: navigate %s: refused by the egress proxy (%s %s)", raw, code, reason)
}

// State is the page's URL and title.
type State struct {
	URL   string `json:"url"`
	Title string `json:"title"`
}

// GetState returns the current URL and title from the navigation history,
// without touching the DOM, once a navigation in flight has committed
// (waiting at most 5 s): it is never the page before a click's navigation.
func (s *Session) GetState(ctx context.Context) (State, error) { return s.pageState(ctx) }

// KillForTest kills the browser process without Close, as a crash would.
// Tests of callers use it; the session notices through Crashed.
func (s *Session) KillForTest() error {
	s.mu.Lock()
	b := s.b
	s.mu.Unlock()
	if b == nil || b.browser == nil || b.browser.Process() == nil {
		return errClosed()
	}
	return b.browser.Process().Kill()
}
