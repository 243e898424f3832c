package proxy

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/egress"
	"github.com/airlockhq/airlock/internal/gate"
)

// ServeHTTP implements http.Handler: CONNECT tunnels here, absolute-form
// requests and WebSocket upgrades through the tenant's egress forward
// proxy. Each request is one broker call.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// Close waits for the handler: a hijacked tunnel is not the HTTP
	// server's any more, and its call ends (is audited) here.
	if !s.enter() {
		s.fail(w, airlock.Errorf(airlock.CodeUnavailable, airlock.ReasonShuttingDown, "proxy closed"))
		return
	}
	defer s.wg.Done()
	pc, _ := r.Context().Value(connKey{}).(*peekedConn)
	user, pass, hasCreds := proxyBasicAuth(r)
	p, err := s.identify(r.Context(), pc, user, pass, hasCreds)
	if err != nil {
		s.metrics.refused(airlock.ReasonOf(err))
		h := w.Header()
		h.Set("Proxy-Authenticate", `Basic realm="`+egress.ProxyRealm+`"`)
		h.Set(egress.HeaderAirlockCode, string(airlock.CodeOf(err)))
		h.Set(egress.HeaderAirlockReason, string(airlock.ReasonOf(err)))
		http.Error(w, airlock.PublicMessageOf(err), http.StatusProxyAuthRequired)
		return
	}
	target := r.RequestURI
	if r.Method == http.MethodConnect {
		target = "connect://" + r.RequestURI
	}
	// The call outlives the request's context, which ends when a client
	// half-closes a tunnel; the Server's life and a revocation end it.
	call, err := s.deps.Begin(s.life, p, airlock.CapabilityHTTP, Broker, target)
	if err != nil {
		s.fail(w, err)
		return
	}
	if r.Method == http.MethodConnect {
		s.connect(w, r, call)
		return
	}
	s.forwardRequest(w, r, call)
}

// forwardRequest passes an absolute-form request (or a WebSocket upgrade)
// to the tenant's egress forward proxy, under the call's context, and ends
// the call with what it answered.
func (s *Server) forwardRequest(w http.ResponseWriter, r *http.Request, call *gate.Call) {
	if r.URL.Scheme == "" || r.URL.Host == "" {
		s.fail(w, call.End(airlock.Errorf(airlock.CodeInvalid, airlock.ReasonMalformed, "not a proxy request (want CONNECT or an absolute URL)"), 0, 0))
		return
	}
	// An upgraded connection (a WebSocket) is a tunnel: the same caps,
	// and its bytes and the cap that cut it are the call's.
	lim := s.limits(call)
	var tun *egress.TunnelResult
	pcl := egress.ProxyClient{Key: call.Key(), Done: call.Ctx.Done(),
		MaxTunnelBytes: lim.MaxBytes, MaxTunnelDuration: lim.MaxDuration,
		TunnelEnded: func(r egress.TunnelResult) { tun = &r }}
	ctx := context.WithValue(call.Ctx, clientKey{}, pcl)
	if !isUpgrade(r.Header) {
		// A plain request stops when its client goes away.
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		stop := context.AfterFunc(r.Context(), cancel)
		defer stop()
	}
	// Set ahead: a 101, written by egress on the hijacked connection,
	// carries it too.
	w.Header().Set(HeaderDecision, call.ID)
	rw := &recorder{ResponseWriter: w, id: call.ID}
	body := &countReader{r: r.Body}
	r2 := r.WithContext(ctx)
	r2.Body = body
	// egress answers 407 without credentials: the caller is identified
	// already, so a placeholder satisfies it (Authorize ignores it).
	r2.Header = r.Header.Clone()
	r2.Header.Set("Proxy-Authorization", "Basic eDp4")
	func() {
		defer func() {
			if v := recover(); v != nil && v != http.ErrAbortHandler {
				panic(v)
			} else if v != nil {
				rw.aborted = true
				call.End(airlock.Errorf(airlock.CodeUpstream, airlock.ReasonProtocol, "upstream body ended early"), rw.n, body.n)
				panic(v)
			}
		}()
		s.forward(call.Tenant.Dialer).ServeHTTP(rw, r2)
	}()
	var err error
	if code := rw.Header().Get(egress.HeaderAirlockCode); code != "" && rw.status >= 400 {
		err = airlock.Errorf(airlock.Code(code), airlock.Reason(rw.Header().Get(egress.HeaderAirlockReason)), "refused by the proxy (%d)", rw.status)
		s.metrics.refused(airlock.Reason(rw.Header().Get(egress.HeaderAirlockReason)))
	}
	// A relayed answer is the call's outcome, even when a revocation
	// comes after it and before this line; one cut short aborted above,
	// and a tunnel's end is its own.
	down, up := rw.n, body.n
	if tun != nil {
		down += tun.Down
		up += tun.Up
		if err == nil {
			err = s.tunnelEnd(call, *tun)
		}
	}
	s.metrics.bytes.WithLabelValues("down").Add(float64(down))
	s.metrics.bytes.WithLabelValues("up").Add(float64(up))
	call.End(err, down, up)
}

// isUpgrade reports whether h asks for a protocol upgrade (a WebSocket),
// which egress splices like a tunnel.
func isUpgrade(h http.Header) bool {
	return httpguts.HeaderValuesContainsToken(h["Connection"], "upgrade")
}

// fail answers a refusal: its status, the X-Airlock headers with the
// decision id, and a one-line body with the public message.
func (s *Server) fail(w http.ResponseWriter, err error) {
	s.metrics.refused(airlock.ReasonOf(err))
	h := w.Header()
	h.Set(egress.HeaderAirlockCode, string(airlock.CodeOf(err)))
	h.Set(egress.HeaderAirlockReason, string(airlock.ReasonOf(err)))
	var ae *airlock.Error
	if errors.As(err, &ae) && ae.DecisionID != "" {
		h.Set(HeaderDecision, ae.DecisionID)
	}
	if d := airlock.RetryAfter(err); d > 0 {
		h.Set("Retry-After", retryAfter(d))
	}
	http.Error(w, oneLine(airlock.PublicMessageOf(err)), status(airlock.CodeOf(err)))
}

func retryAfter(d time.Duration) string {
	secs := int((d + time.Second - 1) / time.Second)
	if secs < 1 {
		secs = 1
	}
	return strconv.Itoa(secs)
}

func oneLine(s string) string {
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		s = s[:i]
	}
	return s
}

// status is the HTTP status of a proxy refusal with code c.
func status(c airlock.Code) int {
	switch c {
	case airlock.CodeDenied, airlock.CodeRevoked:
		return http.StatusForbidden
	case airlock.CodeInvalid:
		return http.StatusBadRequest
	case airlock.CodeTimeout:
		return http.StatusGatewayTimeout
	case airlock.CodeRateLimited:
		return http.StatusTooManyRequests
	case airlock.CodeUnavailable:
		return http.StatusServiceUnavailable
	case airlock.CodeNotFound, airlock.CodeUpstream, airlock.CodeTooLarge:
		return http.StatusBadGateway
	}
	return http.StatusInternalServerError
}

// proxyBasicAuth reads the Proxy-Authorization Basic credentials.
func proxyBasicAuth(r *http.Request) (user, pass string, ok bool) {
	vs := r.Header.Values("Proxy-Authorization")
	if len(vs) != 1 {
		return "", "", false
	}
	rr := &http.Request{Header: http.Header{"Authorization": vs}}
	return rr.BasicAuth()
}

// recorder notes the status and body bytes of a forwarded answer and puts
// the call's decision id on it.
type recorder struct {
	http.ResponseWriter
	id      string
	status  int
	n       int64
	aborted bool
}

func (w *recorder) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
		w.ResponseWriter.Header().Set(HeaderDecision, w.id)
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *recorder) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	n, err := w.ResponseWriter.Write(b)
	w.n += int64(n)
	return n, err
}

// Unwrap lets http.ResponseController reach Flush and Hijack.
func (w *recorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }

type countReader struct {
	r io.ReadCloser
	n int64
}

func (c *countReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n += int64(n)
	return n, err
}

func (c *countReader) Close() error { return c.r.Close() }
