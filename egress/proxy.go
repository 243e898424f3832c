package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http/httpguts"
)

// DefaultProxyIdleTimeout closes a tunnel or an upgraded connection after
// this long with no byte in either direction.
const DefaultProxyIdleTimeout = 5 * time.Minute

// ProxyRealm is the realm of the proxy's Basic challenge.
const ProxyRealm = "airlock"

// Response headers the proxy sets on every answer it makes itself.
const (
	HeaderAirlockCode   = "X-Airlock-Code"   // the vocabulary code: denied, timeout, upstream, ...
	HeaderAirlockReason = "X-Airlock-Reason" // the fine-grained reason: metadata, loopback, dns_not_found, ...
)

// ProxyClient is what one set of proxy credentials stands for: the caller
// key used for the limiter hook and every audit record of that client's
// requests, the narrowing applied to the Dialer's policy for them, and
// optionally an operator-configured upstream proxy (a Dialer.Proxies name)
// their connections go through. The zero ProxyClient uses the Dialer's
// policy as is, with an empty key.
type ProxyClient struct {
	Key      string
	Narrow   *Checker
	Upstream string
	// Admit, if set, is the client's own extra refusal of a target (see
	// Call.Admit: asked about the name, then about the pinned answers): a
	// browser session's origin lists, which layer 2 enforces too, so that
	// WebSockets and workers cannot step around them, and other names for
	// a denied address cannot either.
	Admit func(t Target, addrs []netip.Addr) error
	// Done, if set, ends the client's tunnels and upgraded connections
	// when it is closed (the client's principal was revoked). A request's
	// own context does not: a client that half-closes its side of a
	// tunnel still reads the answer.
	Done <-chan struct{}
	// MaxTunnelBytes and MaxTunnelDuration cap each of the client's
	// tunnels and upgraded connections (TunnelLimits); 0: no cap.
	MaxTunnelBytes    int64
	MaxTunnelDuration time.Duration
	// TunnelEnded, if set, is told how each of the client's tunnels and
	// upgraded connections ended (its bytes, the cap that cut it), before
	// the handler returns.
	TunnelEnded func(TunnelResult)
}

// Proxy is a forward HTTP proxy (an http.Handler) built on the guarded
// Dialer, for callers that make their own connections, such as Chromium.
// It serves:
//
//   - CONNECT host:port: the target is decided on lane http (the browser
//     tunnels web traffic, https and wss, through it; a policy that opens
//     only the raw tcp lane opens no tunnel), dialled at the pinned address,
//     answered "200 Connection Established" and copied both ways by
//     Tunnel: half-close, the idle timeout, and the client's
//     MaxTunnelBytes and MaxTunnelDuration. TLS is not intercepted.
//   - absolute-form http requests ("GET http://host/path HTTP/1.1"): decided,
//     forwarded to the pinned address with hop-by-hop headers removed
//     (RFC 9110 §7.6.1, including Proxy-Authorization and Proxy-Connection),
//     and the response streamed back. Redirects are relayed, never followed:
//     the client follows them and each new request is decided again.
//     Requests carrying cloud-metadata headers (Metadata-Flavor, ...) are
//     refused; forwarding headers (X-Forwarded-For, Forwarded, ...) are
//     dropped. https in absolute form is refused (use CONNECT).
//   - a WebSocket upgrade in absolute form (Connection: Upgrade, Upgrade:
//     websocket): decided, the handshake written to the pinned address, the
//     101 relayed (with the X-Airlock- headers the handler's caller set on
//     the ResponseWriter, never the target's) and the connection copied
//     like a tunnel, under the same caps.
//
// Anything else (an origin-form request, CONNECT over HTTP/2) is answered
// 400 or 505 without looking at credentials.
//
// Every request must carry Basic credentials in Proxy-Authorization that
// Authorize accepts; otherwise it is answered 407 with
// `Proxy-Authenticate: Basic realm="airlock"` and nothing is decided. A nil
// Authorize rejects every request, so the zero Proxy answers only 407s; a
// nil Dialer denies every authenticated request (403 no_policy).
// Authorize should compare secrets in constant time.
//
// Every authenticated proxy request yields exactly one Decision: the
// Dialer's when its target is resolved, otherwise one the proxy records
// through the Dialer's Auditor and Logger (a parse refusal, the header
// floor, the header size cap, the tunnel cap). Failures are answered with
// the X-Airlock-Code and X-Airlock-Reason headers and a one-line text body:
// 403 for a denial, 400 for a malformed target, 502 for DNS and upstream
// failures, 504 for timeouts, 429 when the Dialer's limiter refuses, 431
// for an oversized request header, 503 at the tunnel cap or after Close.
//
// Set the exported fields before first use; a Proxy is safe for concurrent
// use after that. Tunnels and upgraded connections are hijacked, so an
// http.Server's Shutdown does not end them: call Close.
type Proxy struct {
	Dialer    *Dialer
	Authorize func(r *http.Request, user, pass string) (ProxyClient, bool)
	Logger    *slog.Logger // tunnel summaries and upstream failures at debug level; nil: none

	IdleTimeout    time.Duration // tunnels, upgraded and upstream connections; 0: DefaultProxyIdleTimeout
	HeaderTimeout  time.Duration // until the upstream's response headers; 0: DefaultFetchTimeout
	MaxHeaderBytes int64         // request header and upstream response header; 0: DefaultMaxHeaderBytes
	MaxTunnels     int           // concurrent tunnels and upgraded connections; 0: no cap

	mu         sync.Mutex
	closed     bool
	life       context.Context
	cancel     context.CancelFunc
	slots      map[*tunnelSlot]struct{}
	transports map[string]*http.Transport // by upstream proxy name
}

// hopHeaders are removed in both directions, with any header a Connection
// header names (RFC 9110 §7.6.1).
var hopHeaders = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

// forwardingHeaders are dropped from requests: the proxy does not pass on
// what a client claims about where a request came from.
var forwardingHeaders = []string{"X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "Forwarded", "X-Real-Ip"}

func (p *Proxy) idleTimeout() time.Duration {
	if p.IdleTimeout > 0 {
		return p.IdleTimeout
	}
	return DefaultProxyIdleTimeout
}

func (p *Proxy) headerTimeout() time.Duration {
	if p.HeaderTimeout > 0 {
		return p.HeaderTimeout
	}
	return DefaultFetchTimeout
}

func (p *Proxy) maxHeaderBytes() int64 { return orDefault64(p.MaxHeaderBytes, DefaultMaxHeaderBytes) }

// ServeHTTP implements http.Handler.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	isConnect := r.Method == http.MethodConnect
	switch {
	case isConnect && r.ProtoMajor != 1:
		p.fail(w, http.StatusHTTPVersionNotSupported, invalid("proxy", r.Host, ReasonProtocol, "CONNECT is served over HTTP/1.1 only"))
		return
	case !isConnect && (r.URL.Scheme == "" || r.URL.Host == ""):
		p.fail(w, http.StatusBadRequest, invalid("proxy", r.RequestURI, ReasonMalformed, "not a proxy request (want CONNECT or an absolute URL)"))
		return
	}
	client, ok := p.authorize(r)
	if !ok {
		w.Header().Set("Proxy-Authenticate", `Basic realm="`+ProxyRealm+`"`)
		http.Error(w, "proxy authentication required", http.StatusProxyAuthRequired)
		return
	}
	if p.Dialer == nil {
		p.fail(w, http.StatusForbidden, denied("proxy", r.RequestURI, ReasonNoPolicy, "proxy has no dialer"))
		return
	}
	ctx, stop, err := p.requestContext(r.Context())
	if err != nil {
		p.fail(w, 0, err)
		return
	}
	defer stop()
	call := &Call{Key: client.Key, Narrow: client.Narrow, Proxy: client.Upstream, Admit: client.Admit}

	if n := requestHeaderBytes(r); n > p.maxHeaderBytes() {
		e := &Error{Code: CodeTooLarge, Reason: ReasonHeaderTooLarge, Op: "proxy", Target: r.RequestURI,
			Detail: "request header of " + strconv.FormatInt(n, 10) + " bytes"}
		p.refuse(ctx, call, Target{}, e)
		p.fail(w, http.StatusRequestHeaderFieldsTooLarge, e)
		return
	}
	if isConnect {
		p.connect(ctx, w, r, call, client)
		return
	}
	t, err := ParseURL(r.RequestURI)
	if err == nil && t.Scheme != "http" {
		err = invalid("parse", r.RequestURI, ReasonScheme, "https in absolute form; use CONNECT")
	}
	if err != nil {
		p.refuse(ctx, call, Target{}, err)
		p.fail(w, 0, err)
		return
	}
	if k := floorHeader(r.Header); k != "" {
		e := denied("proxy", t.String(), ReasonHeaderFloor, "request carries "+k)
		p.refuse(ctx, call, t, e)
		p.fail(w, 0, e)
		return
	}
	if isWebSocketUpgrade(r.Header) {
		p.upgrade(ctx, w, r, call, t, client)
		return
	}
	p.forward(ctx, w, r, call, t)
}

// authorize checks Basic proxy credentials; exactly one Proxy-Authorization
// header is accepted.
func (p *Proxy) authorize(r *http.Request) (ProxyClient, bool) {
	if p.Authorize == nil {
		return ProxyClient{}, false
	}
	vs := r.Header.Values("Proxy-Authorization")
	if len(vs) != 1 {
		return ProxyClient{}, false
	}
	scheme, cred, ok := strings.Cut(strings.TrimSpace(vs[0]), " ")
	if !ok || !strings.EqualFold(scheme, "Basic") {
		return ProxyClient{}, false
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(cred))
	if err != nil {
		return ProxyClient{}, false
	}
	user, pass, ok := strings.Cut(string(raw), ":")
	if !ok {
		return ProxyClient{}, false
	}
	return p.Authorize(r, user, pass)
}

// requestContext derives the request's context, also cancelled by Close.
func (p *Proxy) requestContext(parent context.Context) (context.Context, func(), error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, nil, &Error{Code: CodeUnavailable, Reason: ReasonCanceled, Op: "proxy", Detail: "proxy closed"}
	}
	if p.life == nil {
		p.life, p.cancel = context.WithCancel(context.Background())
	}
	life := p.life
	p.mu.Unlock()
	ctx, cancel := context.WithCancel(parent)
	unhook := context.AfterFunc(life, cancel)
	return ctx, func() { unhook(); cancel() }, nil
}

// Close ends every tunnel and upgraded connection, cancels requests in
// flight and closes idle upstream connections. Requests after Close are
// answered 503. Close is idempotent and always returns nil.
func (p *Proxy) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	if p.cancel != nil {
		p.cancel()
	}
	for s := range p.slots {
		for _, c := range s.conns {
			c.Close()
		}
	}
	for _, tr := range p.transports {
		tr.CloseIdleConnections()
	}
	return nil
}

// CloseIdleConnections closes the idle upstream connections of forwarded
// requests (a connection budget that is full asks for it); tunnels and
// requests in flight are not touched.
func (p *Proxy) CloseIdleConnections() {
	p.mu.Lock()
	trs := make([]*http.Transport, 0, len(p.transports))
	for _, tr := range p.transports {
		trs = append(trs, tr)
	}
	p.mu.Unlock()
	for _, tr := range trs {
		tr.CloseIdleConnections()
	}
}

// refuse records the Decision of a request refused before Resolve.
func (p *Proxy) refuse(ctx context.Context, call *Call, t Target, err error) {
	dec := Decision{Lane: LaneHTTP, Host: t.Host, Port: t.Port, Key: call.Key, Reason: ReasonOf(err), Detail: err.Error()}
	if t.IsIP() {
		dec.Addrs = []netip.Addr{t.Addr}
	}
	p.Dialer.record(ctx, dec)
}

// fail answers err with its status (or the given one), the X-Airlock
// headers and a one-line body.
func (p *Proxy) fail(w http.ResponseWriter, status int, err error) {
	var e *Error
	if !errors.As(err, &e) {
		e = &Error{Code: CodeInternal, Reason: ReasonProtocol, Op: "proxy", Err: err}
	}
	if status == 0 {
		status = proxyStatus(e)
	}
	h := w.Header()
	h.Set(HeaderAirlockCode, string(e.Code))
	h.Set(HeaderAirlockReason, string(e.Reason))
	// The page's content is readable by the workload driving the browser:
	// only the public text goes there (the decision log has the rest).
	http.Error(w, e.PublicMessage(), status)
}

func proxyStatus(e *Error) int {
	switch e.Code {
	case CodeDenied:
		return http.StatusForbidden
	case CodeInvalid:
		return http.StatusBadRequest
	case CodeTimeout:
		return http.StatusGatewayTimeout
	case CodeRateLimited:
		return http.StatusTooManyRequests
	case CodeUnavailable:
		return http.StatusServiceUnavailable
	case CodeNotFound, CodeUpstream, CodeTooLarge:
		return http.StatusBadGateway
	}
	return http.StatusInternalServerError
}

func (p *Proxy) debug(ctx context.Context, msg string, attrs ...slog.Attr) {
	if p.Logger != nil {
		p.Logger.LogAttrs(ctx, slog.LevelDebug, msg, attrs...)
	}
}

// requestHeaderBytes estimates the request head as it came on the wire.
func requestHeaderBytes(r *http.Request) int64 {
	n := int64(len(r.Method) + len(r.RequestURI) + len(r.Proto) + 4)
	for k, vs := range r.Header {
		for _, v := range vs {
			n += int64(len(k) + len(v) + 4)
		}
	}
	return n
}

// floorHeader returns the first cloud-metadata header in h, or "".
func floorHeader(h http.Header) string {
	for k := range h {
		ck := http.CanonicalHeaderKey(k)
		switch {
		case ck == "Metadata-Flavor", ck == "Metadata", ck == "X-Google-Metadata-Request",
			strings.HasPrefix(ck, "X-Aws-Ec2-Metadata-Token"):
			return ck
		}
	}
	return ""
}

func isWebSocketUpgrade(h http.Header) bool {
	return httpguts.HeaderValuesContainsToken(h["Connection"], "upgrade") &&
		httpguts.HeaderValuesContainsToken(h["Upgrade"], "websocket")
}

// removeHopHeaders deletes hop-by-hop headers, with those Connection names.
func removeHopHeaders(h http.Header) {
	for _, v := range h["Connection"] {
		for _, name := range strings.Split(v, ",") {
			if name = http.CanonicalHeaderKey(strings.TrimSpace(name)); name != "" {
				h.Del(name)
			}
		}
	}
	for _, k := range hopHeaders {
		h.Del(k)
	}
}

// outboundHeader is the header sent upstream for a client request.
func outboundHeader(in http.Header) http.Header {
	h := in.Clone()
	if h == nil {
		h = http.Header{}
	}
	removeHopHeaders(h)
	for _, k := range forwardingHeaders {
		h.Del(k)
	}
	if _, ok := h["User-Agent"]; !ok {
		h["User-Agent"] = []string{""} // no Go default User-Agent
	}
	return h
}

// proxyDialKey carries the decision a forwarded request may dial.
type proxyDialKey struct{}

// transport returns the shared transport for an upstream proxy name. Its
// requests are addressed to the pinned IP:port, so its pool is keyed by the
// pinned address, and its dial function dials only the address the
// request's decision allowed (the same pinning as the Client's
// hostTransport).
func (p *Proxy) transport(upstream string) *http.Transport {
	p.mu.Lock()
	defer p.mu.Unlock()
	if tr, ok := p.transports[upstream]; ok {
		return tr
	}
	if p.transports == nil {
		p.transports = map[string]*http.Transport{}
	}
	idle := p.idleTimeout()
	tr := &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
			di, _ := ctx.Value(proxyDialKey{}).(*dialInfo)
			if di == nil || di.addr.String() != addr {
				return nil, denied("dial", addr, ReasonNoPolicy, "dial without a decision")
			}
			r := di.res
			r.Addrs = []netip.Addr{di.addr.Addr()}
			conn, err := p.Dialer.DialResolved(ctx, "tcp", r, di.call)
			if err != nil {
				return nil, err
			}
			return &idleConn{Conn: conn, idle: idle}, nil
		},
		DialTLSContext: func(_ context.Context, _, addr string) (net.Conn, error) {
			return nil, denied("dial", addr, ReasonScheme, "the proxy forwards plain http only")
		},
		DisableCompression:     true,
		MaxResponseHeaderBytes: p.maxHeaderBytes(),
		ResponseHeaderTimeout:  p.headerTimeout(),
		IdleConnTimeout:        DefaultIdleTimeout,
		MaxIdleConnsPerHost:    16,
		ForceAttemptHTTP2:      false,
		TLSNextProto:           map[string]func(string, *tls.Conn) http.RoundTripper{},
	}
	p.transports[upstream] = tr
	return tr
}

// forward sends an absolute-form request to the pinned address and streams
// the response back.
func (p *Proxy) forward(ctx context.Context, w http.ResponseWriter, r *http.Request, call *Call, t Target) {
	res, err := p.Dialer.Resolve(ctx, LaneHTTP, t, call)
	if err != nil {
		p.fail(w, 0, err)
		return
	}
	header := outboundHeader(r.Header)
	tr := p.transport(call.Proxy)
	var resp *http.Response
	for _, a := range res.Addrs {
		ap := netip.AddrPortFrom(a, t.Port)
		u := *t.URL
		u.Host = ap.String()
		out := (&http.Request{
			Method:        r.Method,
			URL:           &u,
			Proto:         "HTTP/1.1",
			ProtoMajor:    1,
			ProtoMinor:    1,
			Header:        header,
			Host:          hostHeader(t),
			ContentLength: r.ContentLength,
			Body:          http.NoBody,
		}).WithContext(context.WithValue(ctx, proxyDialKey{}, &dialInfo{res: res, call: call, addr: ap}))
		if r.ContentLength != 0 {
			// The transport closes the body it is given; keep the client's
			// open so another pinned address can be tried after a connect
			// failure (nothing was read from it then).
			out.Body = io.NopCloser(r.Body)
		}
		resp, err = tr.RoundTrip(out)
		if err == nil {
			break
		}
		var e *Error
		if !errors.As(err, &e) || e.Reason != ReasonConnect || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		err = p.upstreamErr(ctx, err, t)
		p.debug(ctx, "egress proxy upstream failure", slog.String("key", call.Key), slog.String("target", t.String()), slog.String("error", err.Error()))
		p.fail(w, 0, err)
		return
	}
	defer resp.Body.Close()
	p.relay(ctx, w, resp, call, t)
}

// relay writes an upstream response to the client, streaming the body.
func (p *Proxy) relay(ctx context.Context, w http.ResponseWriter, resp *http.Response, call *Call, t Target) {
	h := w.Header()
	removeHopHeaders(resp.Header)
	for k, vs := range resp.Header {
		if isAirlockHeader(k) {
			continue // the target posing as the proxy (a refusal, a decision id)
		}
		h[k] = append([]string(nil), vs...)
	}
	for k := range resp.Trailer {
		if !isAirlockHeader(k) {
			h.Add("Trailer", k)
		}
	}
	w.WriteHeader(resp.StatusCode)
	rc := http.NewResponseController(w)
	buf := make([]byte, 32<<10)
	for {
		n, rerr := resp.Body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return // the client went away
			}
			rc.Flush()
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			p.debug(ctx, "egress proxy upstream body failure", slog.String("key", call.Key), slog.String("target", t.String()), slog.String("error", rerr.Error()))
			// Abort so the client sees a truncated response, not a complete one.
			panic(http.ErrAbortHandler)
		}
	}
	for k, vs := range resp.Trailer {
		if !isAirlockHeader(k) {
			h[http.TrailerPrefix+k] = vs
		}
	}
}

// isAirlockHeader reports whether k is one of the headers Airlock's
// proxies answer with (X-Airlock-Code, -Reason, -Decision): a target's
// own are dropped, so that a client, the browser or the audit record never
// takes a target's answer for Airlock's refusal.
func isAirlockHeader(k string) bool {
	return len(k) >= len("X-Airlock-") && strings.EqualFold(k[:len("X-Airlock-")], "X-Airlock-")
}

func (p *Proxy) upstreamErr(ctx context.Context, err error, t Target) error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	code, reason := CodeUpstream, ReasonProtocol
	msg := err.Error()
	switch {
	case ctx.Err() != nil || isTimeout(err):
		code, reason = CodeTimeout, ReasonTimeout
	case strings.Contains(msg, "header") && (strings.Contains(msg, "exceeded") || strings.Contains(msg, "too long") || strings.Contains(msg, "too large")):
		code, reason = CodeTooLarge, ReasonHeaderTooLarge
	}
	return &Error{Code: code, Reason: reason, Op: "proxy", Target: t.String(), Err: err}
}

// connect serves CONNECT host:port.
func (p *Proxy) connect(ctx context.Context, w http.ResponseWriter, r *http.Request, call *Call, client ProxyClient) {
	t, err := ParseHostPort(r.RequestURI)
	if err != nil {
		p.refuse(ctx, call, Target{}, err)
		p.fail(w, 0, err)
		return
	}
	slot, err := p.acquire()
	if err != nil {
		p.refuse(ctx, call, t, err)
		p.fail(w, 0, err)
		return
	}
	defer slot.release()
	res, err := p.Dialer.Resolve(ctx, LaneHTTP, t, call)
	if err != nil {
		p.fail(w, 0, err)
		return
	}
	up, err := p.Dialer.DialResolved(ctx, "tcp", res, call)
	if err != nil {
		p.debug(ctx, "egress proxy upstream failure", slog.String("key", call.Key), slog.String("target", t.String()), slog.String("error", err.Error()))
		p.fail(w, 0, p.upstreamErr(ctx, err, t))
		return
	}
	if !slot.hold(up) {
		p.fail(w, 0, &Error{Code: CodeUnavailable, Reason: ReasonCanceled, Op: "proxy", Target: t.String(), Detail: "proxy closed"})
		return
	}
	nc, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		p.fail(w, http.StatusInternalServerError, &Error{Code: CodeInternal, Reason: ReasonProtocol, Op: "proxy", Target: t.String(), Err: err})
		return
	}
	if !slot.hold(nc) {
		return
	}
	nc.SetDeadline(time.Now().Add(p.idleTimeout()))
	if _, err := io.WriteString(nc, "HTTP/1.1 200 Connection Established\r\n\r\n"); err != nil {
		return
	}
	nc.SetDeadline(time.Time{})
	p.splice(ctx, call, t, nc, up, buffered(brw.Reader), nil, client)
}

// upgrade passes a WebSocket upgrade through: the handshake is written to
// the pinned address and, on 101, both connections are spliced.
func (p *Proxy) upgrade(ctx context.Context, w http.ResponseWriter, r *http.Request, call *Call, t Target, client ProxyClient) {
	slot, err := p.acquire()
	if err != nil {
		p.refuse(ctx, call, t, err)
		p.fail(w, 0, err)
		return
	}
	defer slot.release()
	res, err := p.Dialer.Resolve(ctx, LaneHTTP, t, call)
	if err != nil {
		p.fail(w, 0, err)
		return
	}
	up, err := p.Dialer.DialResolved(ctx, "tcp", res, call)
	if err != nil {
		p.fail(w, 0, p.upstreamErr(ctx, err, t))
		return
	}
	if !slot.hold(up) {
		p.fail(w, 0, &Error{Code: CodeUnavailable, Reason: ReasonCanceled, Op: "proxy", Target: t.String(), Detail: "proxy closed"})
		return
	}
	header := outboundHeader(r.Header)
	header.Set("Connection", "Upgrade")
	header.Set("Upgrade", "websocket")
	out := &http.Request{Method: http.MethodGet, URL: t.URL, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: header, Host: hostHeader(t)}

	up.SetDeadline(time.Now().Add(p.headerTimeout()))
	bw := bufio.NewWriter(up)
	err = out.Write(bw)
	if err == nil {
		err = bw.Flush()
	}
	if err != nil {
		p.fail(w, 0, p.upstreamErr(ctx, err, t))
		return
	}
	lr := &io.LimitedReader{R: up, N: p.maxHeaderBytes()}
	br := bufio.NewReader(lr)
	resp, err := http.ReadResponse(br, out)
	if err != nil {
		if lr.N <= 0 {
			err = &Error{Code: CodeTooLarge, Reason: ReasonHeaderTooLarge, Op: "proxy", Target: t.String(), Err: err}
		}
		p.fail(w, 0, p.upstreamErr(ctx, err, t))
		return
	}
	lr.N = math.MaxInt64
	up.SetDeadline(time.Time{})
	if resp.StatusCode != http.StatusSwitchingProtocols {
		defer resp.Body.Close()
		p.relay(ctx, w, resp, call, t)
		return
	}
	if !isWebSocketUpgrade(resp.Header) {
		p.fail(w, 0, &Error{Code: CodeUpstream, Reason: ReasonProtocol, Op: "proxy", Target: t.String(), Detail: "101 without a websocket upgrade"})
		return
	}
	nc, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		p.fail(w, http.StatusInternalServerError, &Error{Code: CodeInternal, Reason: ReasonProtocol, Op: "proxy", Target: t.String(), Err: err})
		return
	}
	if !slot.hold(nc) {
		return
	}
	h := resp.Header.Clone()
	removeHopHeaders(h)
	for k := range h {
		if isAirlockHeader(k) {
			delete(h, k) // the target posing as the proxy
		}
	}
	// What the handler's wrapper put on its answer (a decision id) is
	// Airlock's own.
	for k, vs := range w.Header() {
		if isAirlockHeader(k) {
			h[k] = append([]string(nil), vs...)
		}
	}
	h.Set("Connection", "Upgrade")
	h.Set("Upgrade", "websocket")
	nc.SetDeadline(time.Now().Add(p.idleTimeout()))
	hw := bufio.NewWriter(nc)
	hw.WriteString("HTTP/1.1 101 Switching Protocols\r\n")
	h.Write(hw)
	hw.WriteString("\r\n")
	if err := hw.Flush(); err != nil {
		return
	}
	nc.SetDeadline(time.Time{})
	p.splice(ctx, call, t, nc, up, buffered(brw.Reader), buffered(br), client)
}

// buffered returns (a copy of) what r has read ahead.
func buffered(r *bufio.Reader) []byte {
	n := r.Buffered()
	if n == 0 {
		return nil
	}
	b, _ := r.Peek(n)
	return append([]byte(nil), b...)
}

// tunnelSlot is one tunnel or upgraded connection, counted against
// MaxTunnels; Close closes the connections it holds.
type tunnelSlot struct {
	p     *Proxy
	conns []net.Conn
}

func (p *Proxy) acquire() (*tunnelSlot, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, &Error{Code: CodeUnavailable, Reason: ReasonCanceled, Op: "proxy", Detail: "proxy closed"}
	}
	if p.MaxTunnels > 0 && len(p.slots) >= p.MaxTunnels {
		return nil, &Error{Code: CodeUnavailable, Reason: ReasonRateLimited, Op: "proxy",
			Detail: "at the cap of " + strconv.Itoa(p.MaxTunnels) + " concurrent tunnels"}
	}
	if p.slots == nil {
		p.slots = map[*tunnelSlot]struct{}{}
	}
	s := &tunnelSlot{p: p}
	p.slots[s] = struct{}{}
	return s, nil
}

// hold registers c for Close; after Close it closes c and reports false.
func (s *tunnelSlot) hold(c net.Conn) bool {
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	if s.p.closed {
		c.Close()
		return false
	}
	s.conns = append(s.conns, c)
	return true
}

// release closes the slot's connections and frees it.
func (s *tunnelSlot) release() {
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	for _, c := range s.conns {
		c.Close()
	}
	delete(s.p.slots, s)
}

// splice runs the tunnel between client and up under the client's caps
// (Tunnel), ending it early when the client's Done is closed, and tells
// the client's TunnelEnded how it ended. toUp and toDown are bytes already
// read ahead from the client and the upstream. It closes both connections.
func (p *Proxy) splice(ctx context.Context, call *Call, t Target, client, up net.Conn, toUp, toDown []byte, pc ProxyClient) {
	start := time.Now()
	if pc.Done != nil {
		finished := make(chan struct{})
		defer close(finished)
		go func() {
			select {
			case <-pc.Done:
				client.Close()
				up.Close()
			case <-finished:
			}
		}()
	}
	res := Tunnel(client, up, toUp, toDown, TunnelLimits{Idle: p.idleTimeout(), MaxBytes: pc.MaxTunnelBytes, MaxDuration: pc.MaxTunnelDuration})
	why := "eof"
	if res.End != nil {
		why = res.End.Error()
	}
	p.debug(ctx, "egress proxy tunnel closed",
		slog.String("key", call.Key), slog.String("target", t.String()),
		slog.Int64("bytes_up", res.Up), slog.Int64("bytes_down", res.Down),
		slog.Duration("duration", time.Since(start)), slog.String("end", why))
	if pc.TunnelEnded != nil {
		pc.TunnelEnded(res)
	}
}

// idleConn is an upstream connection of a forwarded request: a read or
// write that makes no progress for idle fails.
type idleConn struct {
	net.Conn
	idle time.Duration
}

func (c *idleConn) Read(b []byte) (int, error) {
	c.Conn.SetReadDeadline(time.Now().Add(c.idle))
	return c.Conn.Read(b)
}

func (c *idleConn) Write(b []byte) (int, error) {
	c.Conn.SetWriteDeadline(time.Now().Add(c.idle))
	return c.Conn.Write(b)
}

var _ http.Handler = (*Proxy)(nil)
