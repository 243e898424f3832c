package engine

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/egress"
	"github.com/airlockhq/airlock/internal/gate"
)

// Brokers of airlock exec's audit records.
const (
	// BrokerExec is the broker of an exec session's own record: one per
	// command, its target the command line (cut to MaxExecTarget bytes).
	BrokerExec = "exec"
	// BrokerProxy is the broker of each proxy request (a CONNECT tunnel,
	// an absolute-form request) a session's command makes.
	BrokerProxy = "proxy"
)

// MaxExecTarget caps the command line an exec session's record keeps.
const MaxExecTarget = 512

// ExecSession is one command run by `airlock exec`: a principal session
// (one audited decision, broker exec, ended by End) whose forward proxy
// (ServeHTTP) is the command's only way out. Each proxy request is a
// broker call of its own (broker proxy, capability http): the principal is
// not revoked, within its tenant's rate, and the target passes the
// tenant's policy and the floor, decided and audited, with the decision id
// in the X-Airlock-Decision header. A revocation cuts the open tunnels.
//
// The proxy asks for no credentials: whoever can reach its listener is the
// session's command (the sandbox's loopback), and the principal is the
// session's. Safe for concurrent use.
type ExecSession struct {
	e     *Engine
	call  *gate.Call
	proxy *egress.Proxy
	auth  string // Proxy-Authorization set on every request
	conns atomic.Int64
}

// BeginExec starts an exec session for principal p (capability http) whose
// record's target is the command line. A refusal (unknown tenant,
// revoked, rate limited, capability) is recorded and returned as an
// *airlock.Error.
func (e *Engine) BeginExec(ctx context.Context, p airlock.Principal, cmdline string) (*ExecSession, error) {
	if len(cmdline) > MaxExecTarget {
		cmdline = strings.ToValidUTF8(cmdline[:MaxExecTarget], "") + "…"
	}
	call, err := e.begin(ctx, p, airlock.CapabilityHTTP, BrokerExec, cmdline)
	if err != nil {
		return nil, err
	}
	secret := make([]byte, 18)
	rand.Read(secret)
	pass := base64.RawURLEncoding.EncodeToString(secret)
	s := &ExecSession{e: e, call: call,
		auth: "Basic " + base64.StdEncoding.EncodeToString([]byte(BrokerExec+":"+pass))}
	key := call.Key()
	s.proxy = &egress.Proxy{Dialer: call.Tenant.Dialer, Logger: e.logger, HeaderTimeout: e.cfg.Egress.FetchTimeout,
		Authorize: func(_ *http.Request, user, pw string) (egress.ProxyClient, bool) {
			if user != BrokerExec || pw != pass {
				return egress.ProxyClient{}, false
			}
			return egress.ProxyClient{Key: key}, true
		}}
	e.budgets.OnFull(gate.BudgetConnections, p.Tenant, s.proxy.CloseIdleConnections)
	return s, nil
}

// ID returns the session's decision id.
func (s *ExecSession) ID() string { return s.call.ID }

// Context is cancelled when the principal is revoked or the engine shuts
// down: the command should then be stopped.
func (s *ExecSession) Context() context.Context { return s.call.Ctx }

// Connections returns how many proxy requests the session has served.
func (s *ExecSession) Connections() int64 { return s.conns.Load() }

// End closes the proxy (open tunnels end) and records the session's
// decision with err (nil: the command ran; its exit code goes in note).
func (s *ExecSession) End(err error, note string) error {
	s.proxy.Close()
	s.call.Note = note
	return s.call.End(err, 0, 0)
}

// ServeHTTP serves one proxy request of the command as a broker call.
func (s *ExecSession) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.conns.Add(1)
	target := r.RequestURI
	if r.Method == http.MethodConnect {
		target = "connect://" + r.Host
	}
	if len(target) > MaxExecTarget {
		target = target[:MaxExecTarget]
	}
	call, err := s.e.begin(r.Context(), s.call.Principal, airlock.CapabilityHTTP, BrokerProxy, target)
	if err != nil {
		writeProxyRefusal(w, err)
		return
	}
	call.Note = "exec session " + s.call.ID
	r = r.Clone(call.Ctx)
	r.Header.Del("Proxy-Authorization")
	r.Header.Set("Proxy-Authorization", s.auth)
	w.Header().Set("X-Airlock-Decision", call.ID)
	sw := &execWriter{ResponseWriter: w, ctx: call.Ctx}
	s.proxy.ServeHTTP(sw, r)
	var rerr error
	if sw.status >= 400 {
		h := sw.Header()
		rerr = &proxyRefusal{code: h.Get(egress.HeaderAirlockCode), reason: h.Get(egress.HeaderAirlockReason), status: sw.status}
	}
	// A tunnel the gate cut (a revocation, a shutdown) is recorded so.
	var coded interface{ ErrorCode() string }
	if cause := context.Cause(call.Ctx); rerr == nil && errors.As(cause, &coded) {
		rerr = cause
	}
	call.End(rerr, sw.bytesIn(), sw.bytesOut())
}

// writeProxyRefusal answers a request the gate refused before the proxy
// saw it, in the proxy's own shape.
func writeProxyRefusal(w http.ResponseWriter, err error) {
	status := http.StatusForbidden
	switch airlock.CodeOf(err) {
	case airlock.CodeRateLimited:
		status = http.StatusTooManyRequests
	case airlock.CodeUnavailable:
		status = http.StatusServiceUnavailable
	case airlock.CodeInvalid:
		status = http.StatusBadRequest
	}
	pub := airlock.Public(err, "")
	h := w.Header()
	h.Set(egress.HeaderAirlockCode, string(pub.Code))
	h.Set(egress.HeaderAirlockReason, string(pub.Reason))
	h.Set("X-Airlock-Decision", pub.DecisionID)
	http.Error(w, pub.Message, status)
}

// proxyRefusal is a proxy request's failure as the proxy answered it.
type proxyRefusal struct {
	code, reason string
	status       int
}

func (e *proxyRefusal) Error() string {
	return "the proxy answered " + http.StatusText(e.status) + " (" + e.code + ", " + e.reason + ")"
}
func (e *proxyRefusal) ErrorCode() string {
	if e.code == "" {
		return string(airlock.CodeUpstream)
	}
	return e.code
}
func (e *proxyRefusal) ErrorReason() string { return e.reason }

// execWriter records the status the proxy answered, and the bytes of a
// hijacked connection (a tunnel), which it closes when the call's context
// ends (a revocation, a shutdown).
type execWriter struct {
	http.ResponseWriter
	ctx    context.Context
	status int
	conn   *countConn
}

func (w *execWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *execWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *execWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the server's writer.
func (w *execWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Hijack hands the proxy the connection, counted and tied to the call.
func (w *execWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	nc, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	c := &countConn{Conn: nc}
	w.conn = c
	stop := context.AfterFunc(w.ctx, func() { nc.SetDeadline(time.Now()); nc.Close() })
	c.stop = stop
	// brw keeps what the server read ahead (a ClientHello sent right
	// after the CONNECT): the proxy passes it on itself.
	return c, brw, nil
}

func (w *execWriter) bytesIn() int64 {
	if w.conn == nil {
		return 0
	}
	return w.conn.written.Load() // what the proxy wrote to the command came in from upstream
}

func (w *execWriter) bytesOut() int64 {
	if w.conn == nil {
		return 0
	}
	return w.conn.read.Load()
}

// countConn counts a hijacked connection's bytes.
type countConn struct {
	net.Conn
	read, written atomic.Int64
	stop          func() bool
}

func (c *countConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.read.Add(int64(n))
	return n, err
}

func (c *countConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.written.Add(int64(n))
	return n, err
}

// CloseWrite half-closes, as the proxy does at a tunnel's end of file.
func (c *countConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Conn.Close()
}

func (c *countConn) Close() error {
	if c.stop != nil {
		c.stop()
	}
	return c.Conn.Close()
}
