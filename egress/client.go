//lint:file-ignore SA1019 x/net/http2's Transport and ClientConn are deprecated in favour of net/http, whose h2 cannot take a pre-dialled utls connection.

package egress

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/http2"
)

// Defaults of the HTTP client.
const (
	DefaultFetchTimeout   = 20 * time.Second
	DefaultMaxRedirects   = 5
	DefaultMaxHeaderBytes = 256 << 10
	DefaultIdleTimeout    = 90 * time.Second
	maxPoolKeys           = 1024
	redirectDrainBytes    = 64 << 10
)

// Client is the guarded HTTP client. Every hop of every request is parsed
// strictly, decided by the Dialer's policy, resolved once and dialled at the
// pinned address, with TLS SNI and certificate checks bound to the name.
// Redirects are followed by hand and each hop is decided again. Bodies are
// decoded by the client and capped on the wire and after decoding.
// Connections are pooled by (pinned address, SNI, TLS profile, upstream
// proxy), so a pooled connection is only reused for an address the current
// request's policy has just allowed.
//
// Set the exported fields before first use; a Client is safe for concurrent
// use after that. The zero values of the limits mean the defaults.
type Client struct {
	Dialer          *Dialer
	Timeout         time.Duration // whole request, redirects and body included; 0: DefaultFetchTimeout
	HeaderTimeout   time.Duration // until response headers; 0: Timeout
	MaxRedirects    int           // 0: DefaultMaxRedirects; negative: do not follow
	MaxBodyBytes    int64         // on the wire; 0: DefaultMaxBodyBytes
	MaxDecodedBytes int64         // after content decoding; 0: DefaultMaxDecodedBytes
	MaxHeaderBytes  int64         // response header bytes; 0: DefaultMaxHeaderBytes
	Profile         TLSProfile    // "": DefaultTLSProfile
	RootCAs         *x509.CertPool

	mu   sync.Mutex
	pool map[poolKey]*hostTransport
}

// Request is one guarded HTTP request.
type Request struct {
	Method  string      // "": GET
	URL     string      //
	Header  http.Header // caller headers; the header floor refuses some
	Body    []byte      //
	Profile TLSProfile  // "": the client's
	Call    Call        // caller key, narrowing, upstream proxy
	// MaxRedirects overrides the client's when non-nil (0 = follow none).
	MaxRedirects *int
	// Timeout overrides the client's Timeout when positive.
	Timeout time.Duration
	// CheckRedirect, when set, is asked about every redirect target after
	// it parsed and before it is decided or followed; an error refuses the
	// hop and ends the request. An *Error is returned as it is (its Op and
	// Hop set); an error with ErrorCode() and ErrorReason() methods is
	// wrapped with that code and reason; any other error is wrapped as
	// denied, reason redirect.
	CheckRedirect func(next *url.URL) error
}

// Response is the answer to the last hop. Body is decoded and capped: a Read
// past a cap returns an *Error with Code too_large. Close the body.
type Response struct {
	StatusCode int
	Status     string
	Proto      string
	Header     http.Header // Content-Encoding and Content-Length removed when the body was decoded
	Body       io.ReadCloser
	URL        Target         // the final URL
	Addr       netip.AddrPort // the address the last hop went to
	Redirects  []string       // URLs redirected through, in order (not including the final one)
	Encoding   string         // the Content-Encoding that was decoded
}

// forbiddenHeaders are headers a caller may never set: hop-by-hop headers,
// Host (the client derives it from the checked URL), metadata-service
// headers and forwarding headers.
var forbiddenHeaders = map[string]bool{
	"Host": true, "Connection": true, "Keep-Alive": true, "Proxy-Connection": true,
	"Proxy-Authorization": true, "Proxy-Authenticate": true, "Te": true, "Trailer": true,
	"Transfer-Encoding": true, "Upgrade": true, "Content-Length": true,
	"Metadata-Flavor": true, "Metadata": true, "X-Google-Metadata-Request": true,
	"X-Forwarded-For": true, "X-Forwarded-Host": true, "X-Forwarded-Proto": true,
	"Forwarded": true, "X-Real-Ip": true,
}

// CheckHeaders applies the header floor to caller-supplied headers.
func CheckHeaders(h http.Header) error {
	for k, vs := range h {
		ck := http.CanonicalHeaderKey(k)
		if !httpguts.ValidHeaderFieldName(k) {
			return invalid("header", k, ReasonHeaderFloor, "invalid header name")
		}
		if forbiddenHeaders[ck] || strings.HasPrefix(ck, "X-Aws-Ec2-Metadata-Token") {
			return denied("header", k, ReasonHeaderFloor, "callers may not set "+ck)
		}
		for _, v := range vs {
			if !httpguts.ValidHeaderFieldValue(v) {
				return invalid("header", k, ReasonHeaderFloor, "invalid header value")
			}
		}
	}
	return nil
}

func (c *Client) timeout() time.Duration {
	if c.Timeout > 0 {
		return c.Timeout
	}
	return DefaultFetchTimeout
}

func orDefault64(v, d int64) int64 {
	if v > 0 {
		return v
	}
	return d
}

// Get is Do with a GET of rawURL and no extra headers.
func (c *Client) Get(ctx context.Context, rawURL string) (*Response, error) {
	return c.Do(ctx, &Request{URL: rawURL})
}

// Do sends the request, following redirects by hand. Errors are *Error: a
// denial (the hop it happened at in Hop, no socket opened to the target),
// parse refusals of the URL (read by ParseRequestURL: a scheme other than
// http or https is invalid) or of a Location (read by ParseURL: denied), timeouts, caps, upstream
// failures.
func (c *Client) Do(ctx context.Context, r *Request) (*Response, error) {
	if c.Dialer == nil {
		return nil, denied("fetch", r.URL, ReasonNoPolicy, "client has no dialer")
	}
	method := r.Method
	if method == "" {
		method = http.MethodGet
	}
	if !httpguts.ValidHeaderFieldName(method) {
		return nil, invalid("fetch", r.URL, ReasonMalformed, "invalid method")
	}
	if err := CheckHeaders(r.Header); err != nil {
		return nil, err
	}
	if p := r.Call.Proxy; p != "" && c.Dialer.Proxies[p] == nil {
		// Refused before any DNS, decision or pool entry for it.
		return nil, denied("fetch", r.URL, ReasonProxy, "upstream proxy "+strconv.Quote(p)+" is not configured")
	}
	t, err := ParseRequestURL(r.URL)
	if err != nil {
		return nil, err
	}
	profile := r.Profile
	if profile == "" {
		profile = c.Profile
	}
	if profile == "" {
		profile = DefaultTLSProfile
	}
	if _, err := ParseTLSProfile(string(profile)); err != nil {
		return nil, err
	}
	maxRedirects := c.MaxRedirects
	if maxRedirects == 0 {
		maxRedirects = DefaultMaxRedirects
	}
	if r.MaxRedirects != nil {
		maxRedirects = *r.MaxRedirects
	}

	timeout := c.timeout()
	if r.Timeout > 0 {
		timeout = r.Timeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	header := canonicalHeader(r.Header)
	body := r.Body
	call := r.Call
	var redirects []string
	d := c.Dialer // after the first redirect, a copy that reuses this request's answers
	var hops *hopResolver
	for hop := 0; ; hop++ {
		call.Hop = hop
		res, err := d.Resolve(ctx, LaneHTTP, t, &call)
		if err != nil {
			cancel()
			return nil, err
		}
		resp, addr, err := c.roundTrip(ctx, res, profile, &call, method, header, body)
		if err != nil {
			err = c.wrapErr(ctx, err, t, hop) // before cancel: it looks at ctx
			cancel()
			return nil, err
		}
		if loc := resp.Header.Get("Location"); isRedirect(resp.StatusCode) && loc != "" && maxRedirects >= 0 {
			io.CopyN(io.Discard, resp.Body, redirectDrainBytes)
			resp.Body.Close()
			if hop >= maxRedirects {
				cancel()
				return nil, &Error{Code: CodeUpstream, Reason: ReasonRedirectLimit, Op: "redirect", Target: t.String(), Hop: hop + 1,
					Detail: "more than " + strconv.Itoa(maxRedirects) + " redirects", Err: ErrRedirectLimit}
			}
			next, err := resolveLocation(t, loc)
			if err != nil {
				cancel()
				var e *Error
				if errors.As(err, &e) {
					e.Hop, e.Op = hop+1, "redirect"
				}
				return nil, err
			}
			if r.CheckRedirect != nil {
				u := *next.URL // the hook cannot change where the request goes
				if err := r.CheckRedirect(&u); err != nil {
					cancel()
					var e *Error
					var cl interface {
						ErrorCode() string
						ErrorReason() string
					}
					switch {
					case errors.As(err, &e):
					case errors.As(err, &cl):
						e = &Error{Code: Code(cl.ErrorCode()), Reason: Reason(cl.ErrorReason()), Err: err}
					default:
						e = &Error{Code: CodeDenied, Reason: ReasonRedirect, Err: err}
					}
					e.Op, e.Hop = "redirect", hop+1
					return nil, e
				}
			}
			redirects = append(redirects, t.String())
			switch resp.StatusCode {
			case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther:
				if method != http.MethodHead {
					method = http.MethodGet
				}
				body = nil
				header.Del("Content-Type")
			}
			if next.Origin() != t.Origin() {
				header.Del("Authorization")
				header.Del("Cookie")
				header.Del("Proxy-Authorization")
			}
			if hops == nil {
				if nr, err := c.Dialer.resolver(); err == nil {
					hops = &hopResolver{seen: map[string][]netip.Addr{}, next: nr}
					cd := *c.Dialer
					cd.Resolver = hops
					d = &cd
				}
			}
			if hops != nil && !t.IsIP() {
				hops.seen[t.Host] = res.Addrs
			}
			t = next
			continue
		}
		wire := resp.Body
		enc := resp.Header.Get("Content-Encoding")
		decoded, err := decodeBody(wire, enc, orDefault64(c.MaxBodyBytes, DefaultMaxBodyBytes), orDefault64(c.MaxDecodedBytes, DefaultMaxDecodedBytes))
		if err != nil {
			wire.Close()
			cancel()
			return nil, err
		}
		if enc != "" {
			resp.Header.Del("Content-Encoding")
			resp.Header.Del("Content-Length")
		}
		return &Response{
			StatusCode: resp.StatusCode,
			Status:     resp.Status,
			Proto:      resp.Proto,
			Header:     resp.Header,
			Body:       &cancelBody{ReadCloser: decoded, cancel: cancel, ctx: ctx, target: t},
			URL:        t,
			Addr:       addr,
			Redirects:  redirects,
			Encoding:   enc,
		}, nil
	}
}

// hopResolver answers the names a request has already resolved with the
// answers it got: a request resolves each name once, however many redirect
// hops lead back to it (each hop is still decided on those answers).
type hopResolver struct {
	seen map[string][]netip.Addr // by canonical host
	next Resolver
}

func (h *hopResolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	if a, ok := h.seen[strings.TrimSuffix(host, ".")]; ok && network == "ip" {
		return a, nil
	}
	return h.next.LookupNetIP(ctx, network, host)
}

// canonicalHeader copies h with canonical keys, merging keys that differ
// only in case, so that dropping a header on redirect (Del) drops every
// spelling the caller used.
func canonicalHeader(h http.Header) http.Header {
	if len(h) == 0 {
		return nil // Del and range work on nil
	}
	out := make(http.Header, len(h))
	for k, vs := range h {
		ck := http.CanonicalHeaderKey(k)
		out[ck] = append(out[ck], vs...)
	}
	return out
}

func isRedirect(code int) bool {
	switch code {
	case 301, 302, 303, 307, 308:
		return true
	}
	return false
}

// resolveLocation parses a Location against the current URL with the same
// strictness as ParseURL: ambiguous bytes in the raw header are refused
// before any resolution could normalise them away.
func resolveLocation(base Target, loc string) (Target, error) {
	if r, bad := badByte(loc); bad {
		return Target{}, denied("redirect", loc, ReasonParseAmbiguous, "Location contains "+r)
	}
	// Absolute and scheme-relative Locations keep the raw authority as the
	// server wrote it, so ParseURL sees exactly what another client would,
	// and refuses it with its own reason before net/url can call it merely
	// malformed (a percent-encoded host is ambiguous: browsers decode it).
	if strings.HasPrefix(loc, "//") {
		return ParseURL(base.Scheme + ":" + loc)
	}
	if i := strings.IndexByte(loc, ':'); i > 0 && validScheme(strings.ToLower(loc[:i])) {
		return ParseURL(loc)
	}
	ref, err := url.Parse(loc)
	if err != nil {
		return Target{}, &Error{Code: CodeUpstream, Reason: ReasonRedirect, Op: "redirect", Target: loc, Err: err}
	}
	abs := base.URL.ResolveReference(ref)
	abs.Fragment, abs.RawFragment = "", ""
	return ParseURL(abs.String())
}

type cancelBody struct {
	io.ReadCloser
	cancel context.CancelFunc
	ctx    context.Context
	target Target // formatted only for an error
	once   sync.Once
}

func (b *cancelBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF {
		var e *Error
		if !errors.As(err, &e) {
			code, reason := ctxCode(b.ctx, err)
			err = &Error{Code: code, Reason: reason, Op: "read", Target: b.target.String(), Err: err}
		}
	}
	return n, err
}

func (b *cancelBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.cancel)
	return err
}

// ReadAll reads and closes a response body, returning the cap errors as is.
func ReadAll(resp *Response) ([]byte, error) {
	defer resp.Body.Close()
	var buf bytes.Buffer
	buf.Grow(readAllSize(resp.Header))
	_, err := buf.ReadFrom(resp.Body)
	return buf.Bytes(), err
}

// Sizes of ReadAll's first buffer: room for a typical page when the length
// is unknown (a crawl reads thousands, and growing from nothing copies each
// several times), the stated length when it is known, up to a bound: the
// header is the server's word, the body caps are what hold.
const (
	readAllDefault = 8 << 10
	readAllMax     = 1 << 20
)

func readAllSize(h http.Header) int {
	n, err := strconv.ParseInt(h.Get("Content-Length"), 10, 64)
	if err != nil || n < 0 {
		return readAllDefault
	}
	// MinRead more: ReadFrom wants that much room to see the end.
	return int(min(n, readAllMax)) + bytes.MinRead
}

func (c *Client) wrapErr(ctx context.Context, err error, t Target, hop int) error {
	var e *Error
	if errors.As(err, &e) {
		if e.Hop == 0 {
			e.Hop = hop
		}
		if e.Target == "" {
			e.Target = t.String()
		}
		return e
	}
	code, reason := ctxCode(ctx, err)
	if code == CodeUpstream && headerTooLarge(err) {
		code, reason = CodeTooLarge, ReasonHeaderTooLarge
	}
	return &Error{Code: code, Reason: reason, Op: "fetch", Target: t.String(), Hop: hop, Err: err}
}

// ctxCode classifies a transport error: a timeout when ctx's deadline (or
// an I/O deadline) passed, canceled when the caller canceled ctx (code
// timeout, as the root package classifies context.Canceled: the caller
// stopped waiting), else an upstream protocol failure.
func ctxCode(ctx context.Context, err error) (Code, Reason) {
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded) || isTimeout(err):
		return CodeTimeout, ReasonTimeout
	case ctx.Err() != nil:
		return CodeTimeout, ReasonCanceled
	}
	return CodeUpstream, ReasonProtocol
}

// headerTooLarge reports whether err is the transport refusing response
// headers past MaxHeaderBytes. Neither transport exports an error value for
// it, so the stable texts are matched: net/http's HTTP/1 "server response
// headers exceeded N bytes", x/net/http2's header list limit, and the
// COMPRESSION_ERROR its framer raises for a single header string longer than
// the limit (corrupt HPACK raises it too; both end the connection).
func headerTooLarge(err error) bool {
	var ce http2.ConnectionError
	if errors.As(err, &ce) && http2.ErrCode(ce) == http2.ErrCodeCompression {
		return true
	}
	s := err.Error()
	return strings.Contains(s, "server response headers exceeded") ||
		strings.Contains(s, "response header list larger than advertised limit")
}

type poolKey struct {
	addr    netip.AddrPort
	scheme  string
	sni     string
	profile TLSProfile
	proxy   string
}

type ctxKey struct{}

type dialInfo struct {
	res  Resolution
	call *Call
	addr netip.AddrPort
}

// roundTrip sends one hop to one of res's pinned addresses.
func (c *Client) roundTrip(ctx context.Context, res Resolution, profile TLSProfile, call *Call, method string, header http.Header, body []byte) (*http.Response, netip.AddrPort, error) {
	t := res.Target
	var lastErr error
	for _, a := range res.Addrs {
		ap := netip.AddrPortFrom(a, t.Port)
		key := poolKey{addr: ap, scheme: t.Scheme, profile: profile, proxy: call.Proxy}
		if t.Scheme == "https" {
			key.sni = t.Host
		} else {
			key.profile = ""
		}
		ht := c.transport(key)
		dctx := context.WithValue(ctx, ctxKey{}, &dialInfo{res: res, call: call, addr: ap})
		var rbody io.Reader
		if body != nil {
			rbody = bytes.NewReader(body) // NewRequest sets GetBody for it: h2 may replay
		}
		// An empty URL here, the checked one copied in below: no second parse.
		req, err := http.NewRequestWithContext(dctx, method, "", rbody)
		if err != nil {
			return nil, ap, invalid("fetch", t.String(), ReasonMalformed, err.Error())
		}
		*req.URL = *t.URL
		ph := profileHeaderSet(profile)
		req.Header = make(http.Header, len(ph)+len(header))
		for k, vs := range ph {
			req.Header[k] = vs
		}
		for k, vs := range header {
			req.Header[k] = vs
		}
		req.Host = hostHeader(t)
		resp, err := c.withHeaderTimeout(ctx, ht, req)
		if err == nil {
			return resp, ap, nil
		}
		lastErr = err
		var e *Error
		if errors.As(err, &e) && e.Reason != ReasonConnect || ctx.Err() != nil {
			return nil, ap, err
		}
	}
	return nil, netip.AddrPort{}, lastErr
}

func (c *Client) withHeaderTimeout(ctx context.Context, rt http.RoundTripper, req *http.Request) (*http.Response, error) {
	ht := c.HeaderTimeout
	if ht <= 0 || ht >= c.timeout() {
		return rt.RoundTrip(req)
	}
	done := make(chan struct{})
	timer := time.AfterFunc(ht, func() { close(done) })
	type result struct {
		r   *http.Response
		err error
	}
	ch := make(chan result, 1)
	go func() {
		r, err := rt.RoundTrip(req)
		ch <- result{r, err}
	}()
	select {
	case res := <-ch:
		timer.Stop()
		return res.r, res.err
	case <-done:
		go func() {
			if res := <-ch; res.r != nil {
				res.r.Body.Close()
			}
		}()
		return nil, &Error{Code: CodeTimeout, Reason: ReasonTimeout, Op: "fetch", Detail: "no response headers within " + ht.String()}
	}
}

// profileHeaderSets holds each profile's default request headers with
// canonical keys, built once. The value slices are shared by every request
// and must not be modified.
var profileHeaderSets = func() map[TLSProfile]http.Header {
	m := map[TLSProfile]http.Header{}
	for _, p := range TLSProfiles() {
		h := http.Header{}
		for _, kv := range profileHeaders(p) {
			h.Set(kv[0], kv[1])
		}
		m[p] = h
	}
	return m
}()

func profileHeaderSet(p TLSProfile) http.Header {
	if h, ok := profileHeaderSets[p]; ok {
		return h
	}
	h := http.Header{}
	for _, kv := range profileHeaders(p) {
		h.Set(kv[0], kv[1])
	}
	return h
}

func hostHeader(t Target) string {
	h := t.Host
	if t.Addr.Is6() {
		h = "[" + h + "]"
	}
	if t.Port != defaultPort(t.Scheme) {
		h = joinHostPort(t.Host, t.Port)
	}
	return h
}

func (c *Client) transport(k poolKey) *hostTransport {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pool == nil {
		c.pool = map[poolKey]*hostTransport{}
	}
	if ht, ok := c.pool[k]; ok {
		ht.lastUsed = time.Now()
		return ht
	}
	if len(c.pool) >= maxPoolKeys {
		c.evictLocked()
	}
	ht := newHostTransport(c, k)
	c.pool[k] = ht
	return ht
}

func (c *Client) evictLocked() {
	var oldest poolKey
	var when time.Time
	for k, ht := range c.pool {
		if when.IsZero() || ht.lastUsed.Before(when) {
			oldest, when = k, ht.lastUsed
		}
	}
	if ht, ok := c.pool[oldest]; ok {
		ht.closeIdle()
		delete(c.pool, oldest)
	}
}

// CloseIdleConnections closes every idle pooled connection.
func (c *Client) CloseIdleConnections() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, ht := range c.pool {
		ht.closeIdle()
		delete(c.pool, k)
	}
}

// ReleaseIdle closes the idle pooled connections of every destination
// with no request in flight and none in the last second, and keeps the
// pool (a connection budget that is full asks for it; see Dialer.Conns).
// A busy destination keeps its idle connections: its next request would
// only dial again.
func (c *Client) ReleaseIdle() {
	c.mu.Lock()
	hts := make([]*hostTransport, 0, len(c.pool))
	now := time.Now()
	for _, ht := range c.pool {
		if ht.inflight.Load() == 0 && now.Sub(ht.lastUsed) >= releaseIdleAfter {
			hts = append(hts, ht)
		}
	}
	c.mu.Unlock()
	for _, ht := range hts {
		ht.closeIdle()
	}
}

// releaseIdleAfter: ReleaseIdle spares destinations used more recently (a
// variable for tests).
var releaseIdleAfter = time.Second

var errRetryH2 = errors.New("egress: connection negotiated h2")

// hostTransport carries requests to one pinned address with one SNI, TLS
// profile and upstream proxy. HTTP/1.1 goes through an http.Transport whose
// dial functions connect only to that address; h2 (negotiated by ALPN after
// the handshake, whichever profile made it) through an x/net/http2
// ClientConn, since utls connections cannot be handed to http.Transport's
// own h2.
type hostTransport struct {
	c        *Client
	key      poolKey
	h1       *http.Transport
	h2t      *http2.Transport
	lastUsed time.Time
	inflight atomic.Int64 // requests in RoundTrip

	mu     sync.Mutex
	h2     *http2.ClientConn
	extra  []*http2.ClientConn // h2 connections dialled in a race or replaced: no new requests, closed by closeIdle
	h1only bool
	spare  chan net.Conn // an h1-negotiated conn dialled by RoundTrip, for h1's DialTLSContext
}

func newHostTransport(c *Client, k poolKey) *hostTransport {
	ht := &hostTransport{c: c, key: k, lastUsed: time.Now(), spare: make(chan net.Conn, 1)}
	ht.h1 = &http.Transport{
		Proxy:                  nil,
		DialContext:            ht.dialPlain,
		DialTLSContext:         ht.dialTLSForH1,
		DisableCompression:     true,
		MaxResponseHeaderBytes: orDefault64(c.MaxHeaderBytes, DefaultMaxHeaderBytes),
		IdleConnTimeout:        DefaultIdleTimeout,
		MaxIdleConnsPerHost:    16,
		ForceAttemptHTTP2:      false,
		TLSNextProto:           map[string]func(string, *tls.Conn) http.RoundTripper{},
	}
	ht.h2t = &http2.Transport{
		DisableCompression: true,
		MaxHeaderListSize:  uint32(orDefault64(c.MaxHeaderBytes, DefaultMaxHeaderBytes)),
		IdleConnTimeout:    DefaultIdleTimeout,
		ReadIdleTimeout:    30 * time.Second,
	}
	return ht
}

func (ht *hostTransport) info(ctx context.Context) (*dialInfo, error) {
	di, _ := ctx.Value(ctxKey{}).(*dialInfo)
	if di == nil || di.addr != ht.key.addr {
		return nil, denied("dial", ht.key.addr.String(), ReasonNoPolicy, "dial without a decision")
	}
	return di, nil
}

func (ht *hostTransport) dialTCP(ctx context.Context) (net.Conn, error) {
	di, err := ht.info(ctx)
	if err != nil {
		return nil, err
	}
	r := di.res
	r.Addrs = []netip.Addr{ht.key.addr.Addr()}
	return ht.c.Dialer.DialResolved(ctx, "tcp", r, di.call)
}

func (ht *hostTransport) dialPlain(ctx context.Context, _, _ string) (net.Conn, error) {
	return ht.dialTCP(ctx)
}

func (ht *hostTransport) dialTLS(ctx context.Context) (net.Conn, string, error) {
	conn, err := ht.dialTCP(ctx)
	if err != nil {
		return nil, "", err
	}
	return tlsHandshake(ctx, conn, ht.key.sni, ht.key.profile, []string{"h2", "http/1.1"}, ht.c.RootCAs)
}

func (ht *hostTransport) dialTLSForH1(ctx context.Context, _, _ string) (net.Conn, error) {
	select {
	case conn := <-ht.spare:
		return conn, nil
	default:
	}
	// http.Transport dials with a context detached from the request: no
	// deadline, no cancel. Bound the handshake as the request's would be,
	// or a server that stalls it holds the dial for ever.
	ctx, cancel := context.WithTimeout(ctx, ht.c.timeout())
	defer cancel()
	conn, alpn, err := ht.dialTLS(ctx)
	if err != nil {
		return nil, err
	}
	if alpn == "h2" {
		ht.adoptH2(conn)
		return nil, errRetryH2
	}
	return conn, nil
}

func (ht *hostTransport) adoptH2(conn net.Conn) (*http2.ClientConn, error) {
	cc, err := ht.h2t.NewClientConn(conn)
	if err != nil {
		conn.Close()
		return nil, err
	}
	ht.mu.Lock()
	switch {
	case ht.h2 == nil:
		ht.h2 = cc
	case !ht.h2.CanTakeNewRequest():
		ht.extra = append(ht.extra, ht.h2)
		ht.h2 = cc
	default:
		// Requests racing on a new destination each dialled: this one
		// serves its request, then waits for closeIdle (or its idle
		// timeout) holding a descriptor.
		ht.extra = append(ht.extra, cc)
	}
	ht.h1only = false
	ht.mu.Unlock()
	return cc, nil
}

func (ht *hostTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ht.inflight.Add(1)
	defer ht.inflight.Add(-1)
	if ht.key.scheme != "https" {
		return ht.h1.RoundTrip(req)
	}
	for attempt := 0; attempt < 3; attempt++ {
		ht.mu.Lock()
		cc, h1only := ht.h2, ht.h1only
		ht.mu.Unlock()
		if cc != nil && cc.ReserveNewRequest() {
			return cc.RoundTrip(req)
		}
		if h1only {
			resp, err := ht.h1.RoundTrip(req)
			if errors.Is(err, errRetryH2) {
				continue
			}
			return resp, err
		}
		conn, alpn, err := ht.dialTLS(req.Context())
		if err != nil {
			return nil, err
		}
		if alpn == "h2" {
			cc, err := ht.adoptH2(conn)
			if err != nil {
				return nil, err
			}
			return cc.RoundTrip(req)
		}
		ht.mu.Lock()
		ht.h1only = true
		ht.mu.Unlock()
		select {
		case ht.spare <- conn:
		default:
			conn.Close()
		}
	}
	return nil, &Error{Code: CodeUpstream, Reason: ReasonProtocol, Op: "fetch", Target: ht.key.sni, Detail: "could not settle on a protocol"}
}

func (ht *hostTransport) closeIdle() {
	ht.h1.CloseIdleConnections()
	ht.mu.Lock()
	if cc := ht.h2; cc != nil {
		go cc.Shutdown(context.Background())
		ht.h2 = nil
	}
	for _, cc := range ht.extra {
		go cc.Shutdown(context.Background()) // graceful: its requests in flight finish first
	}
	ht.extra = nil
	ht.mu.Unlock()
	select {
	case c := <-ht.spare:
		c.Close()
	default:
	}
}
