// Package proxy is the forward-proxy surface of Airlock (`airlock proxy`,
// and the proxy that `airlock exec` puts behind its sandbox): an HTTP
// forward proxy (absolute-form requests and CONNECT tunnels) and a SOCKS5
// proxy (CONNECT, names resolved here: socks5h) on one listener, the first
// byte telling them apart.
//
// Every connection (and every request of a kept-alive plain-HTTP
// connection) is one broker call of the gate, broker "proxy": the caller's
// principal (from proxy credentials, a fixed principal with ServeAs, or the
// development principal on loopback), revocation, the tenant's rate, the
// capability http, then the tenant's policy with the floor through the
// tenant's egress.Dialer (one resolution, pinned), and one audited decision
// whose id the refusal carries (X-Airlock-Decision). A tunnel's first bytes
// are read before a byte reaches the target: a TLS ClientHello must name
// the tunnel's host (this stops fronting through a differing SNI, not a
// matching SNI with another HTTP Host inside TLS, nor an ECH inner name:
// TLS is not intercepted), and anything but TLS passes only to the
// operator's plain ports. A call revoked mid-flight closes its
// tunnels.
package proxy

import (
	"bufio"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/egress"
	"github.com/airlockhq/airlock/internal/gate"
)

// Defaults of Options.
const (
	DefaultMaxTunnelBytes    int64 = 1 << 30 // both directions together
	DefaultMaxTunnelDuration       = time.Hour
	DefaultIdleTimeout             = egress.DefaultProxyIdleTimeout
	DefaultFirstBytesTimeout       = 10 * time.Second
	// Broker is the broker name of the proxy's calls in the audit log.
	Broker = "proxy"
)

// Headers of the proxy's own answers, beside egress's X-Airlock-Code and
// X-Airlock-Reason.
const HeaderDecision = "X-Airlock-Decision"

// Client is a per-client proxy credential: Basic (or SOCKS5) user User with
// the password whose SHA-256 is PasswordHash ("sha256:<hex>") is
// Principal.
type Client struct {
	User         string
	PasswordHash string
	Principal    airlock.Principal
}

// Options configures a Server. The zero Options serve with the defaults and
// no plain ports, and require credentials from every client.
type Options struct {
	// PlainPorts are the ports a tunnel may carry something other than
	// TLS to (an operator list: ssh on 22, ...). Empty: TLS only.
	PlainPorts []uint16
	// MaxTunnelBytes caps one tunnel's bytes, both directions together;
	// 0: DefaultMaxTunnelBytes.
	MaxTunnelBytes int64
	// MaxTunnelDuration caps one tunnel's life; 0: DefaultMaxTunnelDuration.
	MaxTunnelDuration time.Duration
	// IdleTimeout ends a tunnel with no byte either way; 0: DefaultIdleTimeout.
	IdleTimeout time.Duration
	// FirstBytesTimeout is how long a tunnel waits for the client's first
	// bytes (the ClientHello); 0: DefaultFirstBytesTimeout.
	FirstBytesTimeout time.Duration
	// Development lets a client on loopback without credentials be Local
	// (as `airlock serve` does with no tenant configured). Only a
	// connection whose both ends are loopback qualifies.
	Development bool
	Local       airlock.Principal
	// Clients are per-client credentials, checked before tenant tokens.
	Clients []Client
	Logger  *slog.Logger
}

func (o Options) maxBytes() int64 {
	if o.MaxTunnelBytes > 0 {
		return o.MaxTunnelBytes
	}
	return DefaultMaxTunnelBytes
}

func (o Options) maxDuration() time.Duration {
	if o.MaxTunnelDuration > 0 {
		return o.MaxTunnelDuration
	}
	return DefaultMaxTunnelDuration
}

func (o Options) idle() time.Duration {
	if o.IdleTimeout > 0 {
		return o.IdleTimeout
	}
	return DefaultIdleTimeout
}

func (o Options) firstBytes() time.Duration {
	if o.FirstBytesTimeout > 0 {
		return o.FirstBytesTimeout
	}
	return DefaultFirstBytesTimeout
}

// Deps are what the Server gets from its owner (the engine): the gate's
// Begin (with the owner's own shutdown checks), token authentication and
// the metrics registry.
type Deps struct {
	// Begin starts a broker call (gate.Gate.Begin's contract).
	Begin func(ctx context.Context, p airlock.Principal, c airlock.Capability, broker, target string) (*gate.Call, error)
	// Authenticate maps a tenant token to its principal.
	Authenticate func(ctx context.Context, token string) (airlock.Principal, error)
	// Registry, if set, gets the proxy's metrics.
	Registry prometheus.Registerer
}

// Server is the proxy. Create it with New; serve listeners with Serve or
// ServeAs (each may be called several times, concurrently); Close ends
// everything. A Server is safe for concurrent use.
type Server struct {
	opts    Options
	deps    Deps
	logger  *slog.Logger
	metrics *metrics
	plain   map[uint16]bool

	life   context.Context
	cancel context.CancelFunc

	mu       sync.Mutex
	closed   bool
	forwards map[*egress.Dialer]*egress.Proxy
	servers  map[*http.Server]struct{}
	lns      map[net.Listener]struct{}
	conns    map[net.Conn]struct{}
	wg       sync.WaitGroup
}

// New builds a Server. Errors: invalid (config) for a Client without a
// valid principal or hash, or when Deps lacks Begin.
func New(opts Options, deps Deps) (*Server, error) {
	if deps.Begin == nil {
		return nil, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonConfig, "proxy: no gate")
	}
	for _, c := range opts.Clients {
		if c.User == "" || !c.Principal.Valid() || !strings.HasPrefix(c.PasswordHash, "sha256:") {
			return nil, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonConfig, "proxy: client %q: want a user, a principal and a sha256: password hash", c.User)
		}
	}
	if opts.Development && !opts.Local.Valid() {
		return nil, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonConfig, "proxy: development mode without a local principal")
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{opts: opts, deps: deps, logger: logger, plain: map[uint16]bool{},
		forwards: map[*egress.Dialer]*egress.Proxy{}, servers: map[*http.Server]struct{}{},
		lns: map[net.Listener]struct{}{}, conns: map[net.Conn]struct{}{}}
	for _, p := range opts.PlainPorts {
		s.plain[p] = true
	}
	s.life, s.cancel = context.WithCancel(context.Background())
	m, err := newMetrics(deps.Registry)
	if err != nil {
		return nil, err
	}
	s.metrics = m
	return s, nil
}

// Serve serves l: each connection is an HTTP proxy client, or a SOCKS5
// client when its first byte is 5. Callers identify themselves with proxy
// credentials (Basic, or SOCKS5 username/password): a tenant token as the
// password, or a Clients credential; without them only the development
// principal on loopback is served. Serve returns when l fails or the
// Server is closed (nil then).
func (s *Server) Serve(l net.Listener) error { return s.serve(l, nil) }

// ServeAs serves l like Serve, except that every connection is principal p
// without credentials (credentials a client sends are ignored): for a
// listener only p's workload can reach, such as the TCP listener made
// inside `airlock exec`'s network namespace (127.0.0.1:3128) and handed
// over by SCM_RIGHTS. It returns when l fails or the Server is
// closed (nil then).
func (s *Server) ServeAs(l net.Listener, p airlock.Principal) error {
	if !p.Valid() {
		return airlock.Errorf(airlock.CodeInvalid, airlock.ReasonPrincipal, "proxy: bad principal %q", p.String())
	}
	return s.serve(l, &p)
}

// Close stops every listener, ends every connection and tunnel, and
// returns once every handler has returned (so every call's audit record
// is written). It is idempotent.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.cancel()
	for l := range s.lns {
		l.Close()
	}
	for srv := range s.servers {
		srv.Close()
	}
	for c := range s.conns {
		c.Close()
	}
	fwds := make([]*egress.Proxy, 0, len(s.forwards))
	for _, f := range s.forwards {
		fwds = append(fwds, f)
	}
	s.mu.Unlock()
	for _, f := range fwds {
		f.Close()
	}
	s.wg.Wait()
	return nil
}

// enter counts a goroutine serving a connection or a request in s.wg, so
// that Close waits for it (and for the audit record it writes); false
// after Close.
func (s *Server) enter() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.wg.Add(1)
	return true
}

// track registers c so that Close ends it; false after Close.
func (s *Server) track(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.conns[c] = struct{}{}
	return true
}

func (s *Server) untrack(c net.Conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// serve accepts on l; fixed, when set, is every connection's principal.
func (s *Server) serve(l net.Listener, fixed *airlock.Principal) error {
	hl := &chanListener{addr: l.Addr(), ch: make(chan net.Conn), done: make(chan struct{})}
	srv := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(s.logger.Handler(), slog.LevelDebug),
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if pc, ok := c.(*peekedConn); ok {
				return context.WithValue(ctx, connKey{}, pc)
			}
			return ctx
		},
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.lns[l] = struct{}{}
	s.servers[srv] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		srv.Serve(hl)
	}()
	defer func() {
		hl.close()
		s.mu.Lock()
		delete(s.lns, l)
		s.mu.Unlock()
	}()
	for {
		c, err := l.Accept()
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed || errors.Is(err, net.ErrClosed) {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(5 * time.Millisecond)
				continue
			}
			return err
		}
		if !s.enter() {
			c.Close()
			return nil
		}
		go func() {
			defer s.wg.Done()
			s.dispatch(c, fixed, hl)
		}()
	}
}

// dispatch reads a connection's first byte and hands it to SOCKS or HTTP.
func (s *Server) dispatch(c net.Conn, fixed *airlock.Principal, hl *chanListener) {
	c.SetReadDeadline(time.Now().Add(s.opts.firstBytes()))
	br := bufio.NewReaderSize(c, 4096)
	first, err := br.Peek(1)
	c.SetReadDeadline(time.Time{})
	if err != nil {
		c.Close()
		return
	}
	pc := &peekedConn{Conn: c, r: br, fixed: fixed}
	switch first[0] {
	case 5:
		if !s.track(pc) {
			pc.Close()
			return
		}
		defer s.untrack(pc)
		s.metrics.conns.WithLabelValues("socks5").Inc()
		s.serveSOCKS5(pc)
	case 4:
		s.metrics.conns.WithLabelValues("socks4").Inc()
		s.refuseSOCKS4(pc)
	default:
		s.metrics.conns.WithLabelValues("http").Inc()
		select {
		case hl.ch <- pc:
		case <-hl.done:
			pc.Close()
		}
	}
}

// identify returns the principal of a client: the listener's fixed one,
// a Clients credential, a tenant token as the password (the user name, if
// any, its instance), or (development mode, loopback both ends, no
// credentials) Local. Otherwise the error is denied, proxy_credentials.
func (s *Server) identify(ctx context.Context, pc *peekedConn, user, pass string, hasCreds bool) (airlock.Principal, error) {
	if pc != nil && pc.fixed != nil {
		return *pc.fixed, nil
	}
	if !hasCreds {
		if s.opts.Development && pc != nil && loopbackConn(pc.Conn) {
			return s.opts.Local, nil
		}
		return airlock.Principal{}, airlock.Errorf(airlock.CodeDenied, airlock.ReasonProxyCredentials, "proxy credentials required")
	}
	h := sha256.Sum256([]byte(pass))
	hash := []byte("sha256:" + hex.EncodeToString(h[:]))
	found := -1
	for i, c := range s.opts.Clients {
		u := subtle.ConstantTimeCompare([]byte(user), []byte(c.User))
		p := subtle.ConstantTimeCompare(hash, []byte(c.PasswordHash))
		if u&p == 1 {
			found = i
		}
	}
	if found >= 0 {
		return s.opts.Clients[found].Principal, nil
	}
	if s.deps.Authenticate != nil && pass != "" {
		if p, err := s.deps.Authenticate(ctx, pass); err == nil {
			// The user name names the instance, as X-Airlock-Instance
			// does for the API: the audit log and revocations can tell
			// the tenant's clients apart.
			if user != "" {
				p.Instance = user
				if !p.Valid() {
					return airlock.Principal{}, airlock.Errorf(airlock.CodeDenied, airlock.ReasonProxyCredentials, "the proxy user name is not an instance name (letters, digits, '-', '_', '.', ':')")
				}
			}
			return p, nil
		}
	}
	return airlock.Principal{}, airlock.Errorf(airlock.CodeDenied, airlock.ReasonProxyCredentials, "unknown proxy credentials")
}

// loopbackConn reports whether both ends of c are loopback addresses.
func loopbackConn(c net.Conn) bool {
	isLoop := func(a net.Addr) bool {
		ta, ok := a.(*net.TCPAddr)
		return ok && ta.IP.IsLoopback()
	}
	return isLoop(c.LocalAddr()) && isLoop(c.RemoteAddr())
}

// forward returns the egress forward proxy on a tenant's dialer, for
// absolute-form requests and WebSocket upgrades.
func (s *Server) forward(d *egress.Dialer) *egress.Proxy {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f, ok := s.forwards[d]; ok {
		return f
	}
	f := &egress.Proxy{Dialer: d, Logger: s.logger, IdleTimeout: s.opts.IdleTimeout,
		Authorize: func(r *http.Request, _, _ string) (egress.ProxyClient, bool) {
			pcl, ok := r.Context().Value(clientKey{}).(egress.ProxyClient)
			return pcl, ok
		}}
	s.forwards[d] = f
	return f
}

type connKey struct{}
type clientKey struct{}

// peekedConn is an accepted connection whose first bytes were read ahead.
type peekedConn struct {
	net.Conn
	r     *bufio.Reader
	fixed *airlock.Principal
}

func (c *peekedConn) Read(b []byte) (int, error) { return c.r.Read(b) }

// CloseWrite half-closes the connection when it can (a tunnel passes an
// EOF on as a half-close).
func (c *peekedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Conn.Close()
}

// chanListener hands the HTTP server the connections dispatch picked.
type chanListener struct {
	addr net.Addr
	ch   chan net.Conn
	once sync.Once
	done chan struct{}
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *chanListener) close()         { l.once.Do(func() { close(l.done) }) }
func (l *chanListener) Close() error   { l.close(); return nil }
func (l *chanListener) Addr() net.Addr { return l.addr }

var _ http.Handler = (*Server)(nil)
