package proxy

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/egress"
	"github.com/airlockhq/airlock/internal/gate"
)

// connect serves CONNECT host:port: decide and dial under the call, answer
// 200, read the client's first bytes, check them against the target, then
// splice under the tunnel caps.
func (s *Server) connect(w http.ResponseWriter, r *http.Request, call *gate.Call) {
	if r.ProtoMajor != 1 {
		s.fail(w, call.End(airlock.Errorf(airlock.CodeInvalid, airlock.ReasonMalformed, "CONNECT is served over HTTP/1.1 only"), 0, 0))
		return
	}
	t, up, err := s.dial(call, r.RequestURI)
	if err != nil {
		s.fail(w, call.End(err, 0, 0))
		return
	}
	nc, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		up.Close()
		s.fail(w, call.End(airlock.Errorf(airlock.CodeInternal, airlock.ReasonProtocol, "hijack: %v", err), 0, 0))
		return
	}
	if !s.track(nc) {
		nc.Close()
		up.Close()
		call.End(airlock.Errorf(airlock.CodeUnavailable, airlock.ReasonShuttingDown, "proxy closed"), 0, 0)
		return
	}
	defer s.untrack(nc)
	nc.SetWriteDeadline(time.Now().Add(s.opts.idle()))
	if _, err := io.WriteString(nc, "HTTP/1.1 200 Connection Established\r\n"+HeaderDecision+": "+call.ID+"\r\n\r\n"); err != nil {
		nc.Close()
		up.Close()
		call.End(err, 0, 0)
		return
	}
	nc.SetWriteDeadline(time.Time{})
	client := &bufConn{Conn: nc, r: brw.Reader}
	s.tunnel(call, t, client, up)
}

// dial decides hostport under the call (the tenant's policy, one pinned
// resolution) and connects to it.
func (s *Server) dial(call *gate.Call, hostport string) (egress.Target, net.Conn, error) {
	t, err := egress.ParseHostPort(hostport)
	if err != nil {
		return t, nil, err
	}
	d := call.Tenant.Dialer
	if d == nil {
		return t, nil, airlock.Errorf(airlock.CodeDenied, airlock.ReasonNoPolicy, "the tenant has no dialer")
	}
	ec := &egress.Call{Key: call.Key()}
	res, err := d.Resolve(call.Ctx, egress.LaneHTTP, t, ec)
	if err != nil {
		return t, nil, err
	}
	up, err := d.DialResolved(call.Ctx, "tcp", res, ec)
	if err != nil {
		return t, nil, err
	}
	return t, up, nil
}

// tunnel checks the client's first bytes and splices client and up until
// both directions end, a cap, the idle timeout, the call's end (a
// revocation) or Close. It ends the call.
func (s *Server) tunnel(call *gate.Call, t egress.Target, client, up net.Conn) {
	// Revocation (the call's context cancelled) or Close end the tunnel.
	stop := context.AfterFunc(call.Ctx, func() {
		client.Close()
		up.Close()
	})
	defer stop()
	// A plain port is opened for any protocol, including those whose
	// server speaks first: nothing is read ahead there.
	var first []byte
	var err error
	if !s.plain[t.Port] {
		first, err = s.firstBytes(client)
		if err == nil {
			err = s.checkFirst(t, first)
		}
	}
	if err != nil {
		// The decision is recorded before the client learns of it (End
		// cancels the call's context: the alert must not race it).
		stop()
		s.metrics.refused(airlock.ReasonOf(err))
		call.End(err, 0, 0)
		up.Close()
		if isTLSHandshake(first) {
			// A TLS alert (access_denied) is what a TLS client can show.
			client.SetWriteDeadline(time.Now().Add(time.Second))
			client.Write([]byte{0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 49})
		}
		client.Close()
		return
	}
	// Copy between the sockets themselves once what the readers hold
	// ahead is taken out.
	rawClient, ahead := unwrapConn(client)
	first = append(first, ahead...)
	res := egress.Tunnel(rawClient, up, first, nil, s.limits(call))
	client.Close()
	s.metrics.bytes.WithLabelValues("up").Add(float64(res.Up))
	s.metrics.bytes.WithLabelValues("down").Add(float64(res.Down))
	call.End(s.tunnelEnd(call, res), res.Down, res.Up)
}

// limits are the caps of a tunnel of call: the proxy's, or its tenant's
// profile's when lower.
func (s *Server) limits(call *gate.Call) egress.TunnelLimits {
	lim := egress.TunnelLimits{Idle: s.opts.idle(), MaxBytes: s.opts.maxBytes(), MaxDuration: s.opts.maxDuration()}
	if pb := call.Tenant.Profile.TunnelBytes; pb > 0 && pb < lim.MaxBytes {
		lim.MaxBytes = pb
	}
	if pd := call.Tenant.Profile.TunnelDuration; pd > 0 && pd < lim.MaxDuration {
		lim.MaxDuration = pd
	}
	return lim
}

// tunnelEnd is the error a tunnel's call ends with: the cap that cut it,
// or why the gate ended the call, or nil.
func (s *Server) tunnelEnd(call *gate.Call, res egress.TunnelResult) error {
	if res.Capped != nil {
		s.metrics.refused(airlock.ReasonOf(res.Capped))
		return res.Capped
	}
	return gateCause(call)
}

// gateCause is why the gate ended the call (a revocation, a shutdown), or
// nil: a context cancelled because the client went away is no error.
func gateCause(call *gate.Call) error {
	var cl interface{ ErrorCode() string }
	if cause := context.Cause(call.Ctx); errors.As(cause, &cl) {
		return cause
	}
	return nil
}

// firstBytes reads the client's first bytes: a whole TLS ClientHello when
// they start one (up to its record's length), else what arrived first.
func (s *Server) firstBytes(c net.Conn) ([]byte, error) {
	c.SetReadDeadline(time.Now().Add(s.opts.firstBytes()))
	defer c.SetReadDeadline(time.Time{})
	buf := make([]byte, 0, 1024)
	tmp := make([]byte, 4096)
	for {
		n, err := c.Read(tmp)
		buf = append(buf, tmp[:n]...)
		if len(buf) > 0 && (buf[0] != 0x16 || len(buf) >= 3 && !isTLSHandshake(buf)) {
			return buf, nil // not TLS: what came first decides
		}
		if need, ok := helloLength(buf); ok && len(buf) >= need {
			return buf, nil
		}
		if len(buf) > maxHello {
			return buf, nil
		}
		if err != nil {
			if len(buf) > 0 {
				return buf, nil
			}
			if isTimeout(err) {
				return nil, airlock.Errorf(airlock.CodeTimeout, airlock.ReasonTimeout, "no bytes from the client in %s", s.opts.firstBytes())
			}
			return nil, airlock.Errorf(airlock.CodeTimeout, airlock.ReasonCanceled, "the client closed the tunnel before sending anything")
		}
	}
}

// checkFirst refuses first bytes that do not fit target t: a ClientHello
// naming another host (fronting; an ECH outer name is the SNI of the
// outer hello, so the same check holds), none for a name, or something
// that is not TLS to a port off the operator's list.
func (s *Server) checkFirst(t egress.Target, first []byte) error {
	if !isTLSHandshake(first) {
		if s.plain[t.Port] {
			return nil
		}
		return airlock.Errorf(airlock.CodeDenied, airlock.ReasonTunnelNotTLS, "the tunnel to %s does not start with a TLS ClientHello, and port %d is not a plain port", t.HostPort(), t.Port)
	}
	hello, err := parseClientHello(first)
	if err != nil {
		return airlock.Errorf(airlock.CodeDenied, airlock.ReasonTunnelNotTLS, "the tunnel to %s starts with a malformed ClientHello: %v", t.HostPort(), err)
	}
	if hello.sni == "" {
		if t.IsIP() {
			return nil
		}
		return airlock.Errorf(airlock.CodeDenied, airlock.ReasonSNIMissing, "the ClientHello to %s names no server", t.HostPort())
	}
	sni, err := egress.ParseHostPort(hello.sni + ":443")
	if err != nil || !strings.EqualFold(sni.Host, t.Host) {
		what := "server name"
		if hello.ech {
			what = "ECH outer server name"
		}
		return airlock.Errorf(airlock.CodeDenied, airlock.ReasonSNIMismatch, "the ClientHello's %s %q differs from the tunnel's host %s", what, truncate(hello.sni, 64), t.Host)
	}
	return nil
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// unwrapConn returns the connection under the proxy's own read-ahead
// wrappers of c and the bytes they read ahead, which come before anything
// the connection still holds. Close c, not the connection.
func unwrapConn(c net.Conn) (net.Conn, []byte) {
	var ahead []byte
	for {
		switch w := c.(type) {
		case *bufConn:
			if br, ok := w.r.(*bufio.Reader); ok {
				ahead = append(ahead, drain(br)...)
			}
			c = w.Conn
		case *peekedConn:
			ahead = append(ahead, drain(w.r)...)
			c = w.Conn
		default:
			return c, ahead
		}
	}
}

func drain(br *bufio.Reader) []byte {
	n := br.Buffered()
	if n == 0 {
		return nil
	}
	b := make([]byte, n)
	io.ReadFull(br, b)
	return b
}

// bufConn is a hijacked connection with what the HTTP server read ahead.
type bufConn struct {
	net.Conn
	r interface{ Read([]byte) (int, error) }
}

func (c *bufConn) Read(b []byte) (int, error) { return c.r.Read(b) }

func (c *bufConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Conn.Close()
}
