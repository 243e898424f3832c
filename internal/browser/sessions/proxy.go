package sessions

import (
	"crypto/subtle"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/egress"
	"github.com/airlockhq/airlock/internal/browser"
)

// tenantProxy is one egress.Proxy on a loopback port, on the tenant's
// Dialer (its policy, pins, connect limiter and auditor).
type tenantProxy struct {
	dialer *egress.Dialer
	p      *egress.Proxy
	srv    *http.Server
	ln     net.Listener
}

// proxy returns the tenant's proxy, starting it on first use; m.mu is
// held.
func (m *Manager) proxy(tenant string) (*tenantProxy, error) {
	if tp := m.proxies[tenant]; tp != nil {
		return tp, nil
	}
	d := m.deps.Dialer(tenant)
	if d == nil {
		return nil, airlock.Errorf(airlock.CodeDenied, airlock.ReasonUnknownTenant, "browser: unknown tenant %q", tenant)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, airlock.Errorf(airlock.CodeUnavailable, airlock.ReasonBrowserProxy, "browser: start the egress proxy: %v", err)
	}
	tp := &tenantProxy{dialer: d, ln: ln}
	tp.p = &egress.Proxy{Dialer: d, Logger: m.deps.Logger, HeaderTimeout: m.cfg.ProxyHeaderTimeout,
		Authorize: func(_ *http.Request, user, pass string) (egress.ProxyClient, bool) {
			return m.authorize(tenant, user, pass)
		}}
	tp.srv = &http.Server{Handler: m.reportRefusals(tp.p), ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(m.deps.Logger.Handler(), slog.LevelDebug)}
	go tp.srv.Serve(ln)
	m.deps.OnConnectionsFull(tenant, tp.p.CloseIdleConnections)
	m.deps.OnConnectionsFull("", tp.p.CloseIdleConnections)
	m.proxies[tenant] = tp
	return tp, nil
}

// reportRefusals wraps the proxy so that each request it refuses (layer
// 2: what layer 1 let through or cannot see, such as WebSockets, another
// name for a denied address, Chromium's own background traffic) is an
// audited decision and reaches the session's event subscribers, like a
// layer-1 refusal.
func (m *Manager) reportRefusals(h http.Handler) http.Handler {
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
				// A download on this tunnel reports the refusal, typed.
				sess.RefusedTunnel(r.Host, sw.Header().Get(egress.HeaderAirlockReason))
				scheme = sess.TunnelScheme(r.Host, tunnelLabelWait)
			}
			target = scheme + "://" + r.Host
		}
		m.onEvent(bs, browser.Event{Type: browser.EventPolicyDenied, Time: time.Now(), URL: AuditTarget(target),
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
func (m *Manager) authorize(tenant, user, pass string) (egress.ProxyClient, bool) {
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
	if m.deps.Revoked(bs.principal) {
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
