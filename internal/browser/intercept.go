package browser

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/egress"
)

// DefaultAskTimeout is how long a request waits for Approve or Deny under
// default_action ask before it is denied.
const DefaultAskTimeout = 30 * time.Second

// intercept installs layer 1 on the browser target itself: Fetch.enable
// at the browser level pauses the requests of every target the browser
// has or will have (pages, iframes in or out of process, popups, dedicated
// and shared workers, service workers), so no target can start without
// it. Proxy authentication challenges (Fetch.authRequired) are answered
// from the session's credentials. Events are handled until b is killed.
// When interception cannot be installed, the launch fails and the browser
// is stopped: no target ever runs unintercepted.
func (s *Session) intercept(ctx context.Context, b *instance) error {
	evCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	b.eventsCtx, b.stopEvents = evCtx, stop
	paused := cdp.Events(evCtx, b.browser, fetch.RequestPaused)
	auth := cdp.Events(evCtx, b.browser, fetch.AuthRequired)
	s.watchConsole(evCtx, b, b.target)

	// cdp.Events subscribes when it is called, so nothing is lost between
	// here and the goroutines' first reads.
	var tries sync.Map // fetch.RequestID → proxy challenges answered
	b.events.Add(2)
	go func() {
		defer b.events.Done()
		for ev, err := range paused {
			if err != nil {
				return
			}
			b.events.Add(1)
			go func() {
				defer b.events.Done()
				s.onPaused(evCtx, b, ev)
			}()
		}
	}()
	go func() {
		defer b.events.Done()
		for ev, err := range auth {
			if err != nil {
				return
			}
			b.events.Add(1)
			go func() {
				defer b.events.Done()
				s.onAuth(evCtx, b, ev, &tries)
			}()
		}
	}()

	_, err := cdp.Call(ctx, b.browser, fetch.Enable, fetch.EnableParams{
		Patterns:           []*fetch.RequestPattern{{URLPattern: "*", RequestStage: fetch.RequestStageRequest}},
		HandleAuthRequests: new(true),
	})
	return err
}

// onPaused decides one paused request: continue it, fail it with
// BlockedByClient and report the denial, or, under ask, hold it until an
// answer.
func (s *Session) onPaused(ctx context.Context, b *instance, ev fetch.EventRequestPaused) {
	if ev.Request == nil {
		return
	}
	raw := ev.Request.URL + ev.Request.URLFragment
	err := s.decideRequest(ctx, raw, ev)
	tab := s.tabOfFrame(ev.FrameID)
	s.netlog.add(NetworkEntry{Time: time.Now().UTC(), Method: ev.Request.Method, URL: raw,
		ResourceType: string(ev.ResourceType), Tab: tab, Allowed: err == nil, Reason: reasonIf(err)})
	if err == nil {
		// A scrape's caller headers go to its page's origin alone: each
		// redirect hop is paused and decided here again.
		cdp.Call(ctx, b.browser, fetch.ContinueRequest, fetch.ContinueRequestParams{RequestID: ev.RequestID,
			Headers: s.extra.Load().headersFor(raw, ev.Request.Headers)})
		return
	}
	cdp.Call(ctx, b.browser, fetch.FailRequest, fetch.FailRequestParams{
		RequestID: ev.RequestID, ErrorReason: network.ErrorReasonBlockedByClient,
	})
	s.emit(Event{Type: EventPolicyDenied, URL: raw, Reason: reasonOf(err), ResourceType: string(ev.ResourceType),
		InitiatingOp: s.currentOp(), Tab: tab, Message: airlock.PublicMessageOf(err)})
}

// refusedBefore reports a navigation the policy refused before the browser
// was asked (the pre-check) as an EventPolicyDenied, like a refusal at
// layer 1 or 2, and returns err.
func (s *Session) refusedBefore(raw string, err error) error {
	if airlock.CodeOf(err) == airlock.CodeDenied {
		s.emit(Event{Type: EventPolicyDenied, URL: raw, Reason: reasonOf(err), ResourceType: "Document",
			InitiatingOp: s.currentOp(), Message: airlock.PublicMessageOf(err)})
	}
	return err
}

func reasonIf(err error) string {
	if err == nil {
		return ""
	}
	return reasonOf(err)
}

// decideRequest is layer 1 for one request: the scheme, the egress check
// (Decide), the redirect cap, then the origin policy, asking when it says
// so. nil lets the request go on to the proxy (layer 2).
func (s *Session) decideRequest(ctx context.Context, raw string, ev fetch.EventRequestPaused) error {
	t, err := s.check(raw)
	if err != nil {
		return err
	}
	if s.redirectHop(ev.NetworkID) > MaxRedirects {
		return airlock.Errorf(airlock.CodeDenied, airlock.ReasonRedirectLimit, "browser: %s refused: more than %d redirects", raw, MaxRedirects)
	}
	v, reason := s.policy.decide(t.Scheme, t.Host, int(t.Port))
	switch v {
	case verdictAllow:
		return nil
	case verdictAsk:
		return s.ask(ctx, raw, t, string(ev.ResourceType), s.tabOfFrame(ev.FrameID))
	}
	return s.policy.refusal(raw, reason)
}

// check applies the scheme rule and Decide to a URL and parses it.
func (s *Session) check(raw string) (egress.Target, error) {
	scheme, _, _ := strings.Cut(raw, ":")
	if !allowedSchemes[strings.ToLower(scheme)] {
		return egress.Target{}, airlock.Errorf(airlock.CodeDenied, airlock.ReasonScheme, "browser: %.200s refused: only http and https load", raw)
	}
	if s.opts.Decide != nil {
		if err := s.opts.Decide(raw); err != nil {
			return egress.Target{}, denyErr(raw, err)
		}
	}
	t, err := egress.ParseURL(raw)
	if err != nil {
		return egress.Target{}, denyErr(raw, err)
	}
	return t, nil
}

// maxChains bounds the redirect-hop table; past it the table starts over.
const maxChains = 4096

// redirectHop counts the requests of one chain (Chromium keeps the network
// id across redirects) and returns this one's hop number (0: the first).
func (s *Session) redirectHop(id network.RequestID) int {
	if id == "" {
		return 0
	}
	s.hopMu.Lock()
	defer s.hopMu.Unlock()
	if s.hops == nil || len(s.hops) >= maxChains {
		s.hops = make(map[network.RequestID]int)
	}
	n := s.hops[id]
	s.hops[id] = n + 1
	return n
}

// approval is one pending question under ask: every request to the same
// origin waits on it.
type approval struct {
	id     string
	origin string
	done   chan struct{}
	ok     bool
}

// ask pauses a request until Approve or Deny names its approval, or the
// ask timeout passes (denied, reason ask_timeout). An approval admits the
// origin for the rest of the session, at both layers.
func (s *Session) ask(ctx context.Context, raw string, t egress.Target, resourceType, tab string) error {
	org := t.Scheme + "://" + hostPort(t.Host, int(t.Port))
	s.askMu.Lock()
	a, waiting := s.pending[org]
	if !waiting {
		a = &approval{id: newApprovalID(), origin: org, done: make(chan struct{})}
		if s.pending == nil {
			s.pending = map[string]*approval{}
		}
		s.pending[org] = a
	}
	s.askMu.Unlock()
	timeout := s.opts.AskTimeout
	if timeout <= 0 {
		timeout = DefaultAskTimeout
	}
	if !waiting {
		op := s.currentOp()
		s.emit(Event{Type: EventApprovalRequired, URL: raw, ApprovalID: a.id, ResourceType: resourceType,
			InitiatingOp: op, Tab: tab, Message: WaitingMessage(a.id, org)})
		s.dispatch(ctx, a, ApprovalRequest{ID: a.id, Origin: org, URL: raw, ResourceType: resourceType,
			InitiatingOp: op, Deadline: time.Now().Add(timeout)})
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-a.done:
	case <-timer.C:
		s.resolve1(a.id, false)
		<-a.done
		if !a.ok {
			return originDenied(raw, airlock.ReasonAskTimeout)
		}
	case <-ctx.Done():
		return airlock.Errorf(airlock.CodeUnavailable, airlock.ReasonSessionClosed, "browser: %s: the session closed while asking", raw)
	}
	if !a.ok {
		return originDenied(raw, airlock.ReasonNotApproved)
	}
	s.policy.approve(t.Scheme, t.Host, int(t.Port))
	return nil
}

func newApprovalID() string {
	var b [8]byte
	rand.Read(b[:])
	return "ap_" + hex.EncodeToString(b[:])
}

// Approve lets the requests waiting on approval id go on, and admits their
// origin for the rest of the session. Errors: not_found (approval) when no
// request waits on id (already answered, timed out, or unknown).
func (s *Session) Approve(id string) error { return s.answer(id, true) }

// Deny refuses the requests waiting on approval id. Errors as Approve.
func (s *Session) Deny(id string) error { return s.answer(id, false) }

func (s *Session) answer(id string, ok bool) error {
	if !s.resolve1(id, ok) {
		return airlock.Errorf(airlock.CodeNotFound, airlock.ReasonApproval, "browser: no request waits on approval %q", id)
	}
	return nil
}

// resolve1 answers the pending approval id once; false when there is none.
func (s *Session) resolve1(id string, ok bool) bool {
	s.askMu.Lock()
	defer s.askMu.Unlock()
	for org, a := range s.pending {
		if a.id == id {
			if ok {
				// Admit before waking the waiters, so that layer 2 agrees.
				t, err := egress.ParseURL(org)
				if err == nil {
					s.policy.approve(t.Scheme, t.Host, int(t.Port))
				}
			}
			a.ok = ok
			delete(s.pending, org)
			close(a.done)
			return true
		}
	}
	return false
}

// Pending lists the approval ids that requests wait on, with their origins.
func (s *Session) Pending() map[string]string {
	s.askMu.Lock()
	defer s.askMu.Unlock()
	out := make(map[string]string, len(s.pending))
	for org, a := range s.pending {
		out[a.id] = org
	}
	return out
}

// denyErr makes a refusal a denied *airlock.Error, keeping its reason.
func denyErr(raw string, err error) error {
	var ae *airlock.Error
	if errors.As(err, &ae) && ae.Code == airlock.CodeDenied {
		return err
	}
	return airlock.Errorf(airlock.CodeDenied, airlock.Reason(reasonOf(err)), "browser: %.200s refused: %w", raw, err)
}

// onAuth answers the proxy's challenge with the session's credentials,
// once per request: a second challenge means they were refused, and the
// request is cancelled rather than retried forever. Challenges from
// servers are cancelled: sites' HTTP authentication is not supported.
func (s *Session) onAuth(ctx context.Context, b *instance, ev fetch.EventAuthRequired, tries *sync.Map) {
	resp := &fetch.AuthChallengeResponse{Response: fetch.AuthChallengeResponseResponseCancelAuth}
	if ev.AuthChallenge != nil && ev.AuthChallenge.Source == fetch.AuthChallengeSourceProxy {
		if _, again := tries.LoadOrStore(ev.RequestID, true); !again {
			resp = &fetch.AuthChallengeResponse{
				Response: fetch.AuthChallengeResponseResponseProvideCredentials,
				Username: s.opts.ProxyUser,
				Password: s.opts.ProxyPass,
			}
		}
	}
	cdp.Call(ctx, b.browser, fetch.ContinueWithAuth, fetch.ContinueWithAuthParams{RequestID: ev.RequestID, AuthChallengeResponse: resp})
}

// socketLog remembers the WebSockets the pages opened lately, by host:port
// and scheme: Chromium opens ws and wss alike through a CONNECT tunnel,
// which layer 1 never sees and layer 2 cannot tell from https.
type socketLog struct {
	mu   sync.Mutex
	recs []socketRec
}

type socketRec struct {
	hostport, scheme string
	at               time.Time
}

// Bounds of the socket log.
const (
	maxSockets = 256
	socketTTL  = 10 * time.Second
)

func (l *socketLog) add(hostport, scheme string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.recs) >= maxSockets {
		l.recs = l.recs[1:]
	}
	l.recs = append(l.recs, socketRec{hostport: hostport, scheme: scheme, at: time.Now()})
}

// take removes and returns the scheme of the oldest recent WebSocket to
// hostport, or "".
func (l *socketLog) take(hostport string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	for i, r := range l.recs {
		if r.hostport == hostport && now.Sub(r.at) < socketTTL {
			l.recs = append(l.recs[:i], l.recs[i+1:]...)
			return r.scheme
		}
	}
	return ""
}

// watchSockets records the WebSockets t's pages create (chromedp enables
// the Network domain on page targets) until ctx ends.
func (s *Session) watchSockets(ctx context.Context, b *instance, t *chromedp.Target) {
	created := cdp.Events(ctx, t, network.WebSocketCreated)
	b.events.Add(1)
	go func() {
		defer b.events.Done()
		for ev, err := range created {
			if err != nil {
				return
			}
			if hp, scheme := socketHostPort(ev.URL); hp != "" {
				s.sockets.add(hp, scheme)
			}
		}
	}()
}

// socketHostPort is a ws or wss URL's host:port (the scheme's default port
// when it has none) and scheme.
func socketHostPort(raw string) (string, string) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "ws" && u.Scheme != "wss") || u.Hostname() == "" {
		return "", ""
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"ws": "80", "wss": "443"}[u.Scheme]
	}
	return net.JoinHostPort(strings.ToLower(u.Hostname()), port), u.Scheme
}

// TunnelScheme names the scheme of a CONNECT tunnel to hostport that layer
// 2 refused: ws or wss when a page of the session opened a WebSocket
// there lately (each WebSocket answers one tunnel), https otherwise. The
// page's event may trail the proxy's request: TunnelScheme waits up to
// wait for it.
func (s *Session) TunnelScheme(hostport string, wait time.Duration) string {
	if h, p, err := net.SplitHostPort(hostport); err == nil {
		hostport = net.JoinHostPort(strings.ToLower(strings.Trim(h, "[]")), p)
	}
	deadline := time.Now().Add(wait)
	for {
		if scheme := s.sockets.take(hostport); scheme != "" {
			return scheme
		}
		if !time.Now().Before(deadline) {
			return "https"
		}
		time.Sleep(20 * time.Millisecond)
	}
}
