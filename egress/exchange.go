package egress

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"syscall"
	"time"
)

// Defaults of the one-shot exchanges.
const (
	DefaultTCPReplyCap        = 1 << 20 // bytes; TCP and TLS replies
	DefaultTCPTimeout         = 10 * time.Second
	DefaultUDPReplyCap        = 65535 // bytes; also the largest UDP reply accepted
	DefaultUDPTimeout         = 5 * time.Second
	DefaultIdleAfterFirstByte = 500 * time.Millisecond
)

// maxUDPRequest is the largest request ExchangeUDP sends: one datagram.
const maxUDPRequest = 65535

// ExchangeOptions are the per-call options of ExchangeTCP, ExchangeTLS and
// ExchangeUDP. The zero value (and a nil *ExchangeOptions) means the
// defaults of the lane.
type ExchangeOptions struct {
	// Call carries the caller key, request narrowing and upstream proxy
	// (TCP and TLS only) to the dialer.
	Call Call

	// MaxReply caps the reply in bytes; a longer reply is an error, never
	// a truncation. 0 or less: DefaultTCPReplyCap for TCP and TLS,
	// DefaultUDPReplyCap for UDP (which is also the most UDP accepts).
	MaxReply int64

	// Timeout bounds the whole exchange: resolution, connect, handshake,
	// request and reply. The effective deadline is the earlier of it and
	// ctx's. 0 or less: DefaultTCPTimeout for TCP and TLS,
	// DefaultUDPTimeout for UDP.
	Timeout time.Duration

	// IdleAfterFirstByte ends a TCP or TLS reply when the peer has sent
	// nothing for this long after its last byte, the first byte having
	// arrived. 0 or less: DefaultIdleAfterFirstByte. Unused by UDP.
	IdleAfterFirstByte time.Duration

	// HalfClose shuts down the write side once the request is written (a
	// TCP FIN; a TLS close_notify), for servers that read until EOF before
	// they answer. It is off by default because many line protocols (SMTP,
	// Redis, HTTP keep-alive) and middleboxes treat a half-close as the end
	// of the conversation and hang up without answering. A connection that
	// cannot half-close (one tunnelled through an upstream proxy that had
	// already sent bytes) is left open. Unused by UDP.
	HalfClose bool

	// RootCAs verifies TLS peers; nil means the system roots.
	RootCAs *x509.CertPool
}

// ExchangeTCP sends req to target (host:port) over a guarded TCP connection
// and returns the reply: the bytes the peer sends until it closes the
// connection, or until it has been idle IdleAfterFirstByte after its first
// byte. An empty req sends nothing and reads what the peer says first (a
// banner).
//
// The target is decided for LaneTCP by d (one Decision recorded), resolved
// once and dialled at the pinned address; a denial is the dialer's *Error
// (Code CodeDenied) and no connection is attempted. Other failures are
// *Error values with Op "exchange" unless the dialer reports them ("parse",
// "resolve", "dial"):
//   - a reply longer than MaxReply: CodeTooLarge, ReasonBodyTooLarge;
//   - the deadline (Timeout or ctx's) passing before the reply is complete,
//     including a peer that trickles bytes and never goes idle: CodeTimeout,
//     ReasonTimeout;
//   - ctx canceled: CodeTimeout, ReasonCanceled;
//   - a reset or other connection failure: CodeUpstream, ReasonConnect.
//
// ExchangeTCP is safe for concurrent use. It never logs.
func (d *Dialer) ExchangeTCP(ctx context.Context, target string, req []byte, o *ExchangeOptions) ([]byte, error) {
	return d.exchangeStream(ctx, LaneTCP, target, req, o)
}

// ExchangeTLS is ExchangeTCP over TLS, decided for LaneTLS. The host does
// the handshake with Go's crypto/tls (TLS 1.2 or later): SNI is the target's
// host name (none for an IP literal, which is then matched against the
// certificate's IP SANs), the peer's chain is verified against RootCAs (the
// system roots by default) for that name, and a verified chain may hold at
// most 10 certificates. A handshake failure is an *Error with Op "tls" and
// Code CodeUpstream, ReasonTLS (CodeTimeout, reason timeout or canceled, when
// the deadline passed or ctx was canceled during the handshake). HalfClose sends
// a close_notify alert.
func (d *Dialer) ExchangeTLS(ctx context.Context, target string, req []byte, o *ExchangeOptions) ([]byte, error) {
	return d.exchangeStream(ctx, LaneTLS, target, req, o)
}

func exchangeOptions(o *ExchangeOptions) ExchangeOptions {
	if o == nil {
		return ExchangeOptions{}
	}
	return *o
}

func (d *Dialer) exchangeStream(ctx context.Context, lane Lane, target string, req []byte, o *ExchangeOptions) ([]byte, error) {
	opts := exchangeOptions(o)
	maxReply := opts.MaxReply
	if maxReply <= 0 {
		maxReply = DefaultTCPReplyCap
	}
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = DefaultTCPTimeout
	}
	idle := opts.IdleAfterFirstByte
	if idle <= 0 {
		idle = DefaultIdleAfterFirstByte
	}

	t, err := ParseHostPort(target)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	res, err := d.Resolve(ctx, lane, t, &opts.Call)
	if err != nil {
		return nil, err
	}
	conn, err := d.DialResolved(ctx, "tcp", res, &opts.Call)
	if err != nil {
		return nil, err
	}
	var peer netip.AddrPort // through an upstream proxy, the peer is not known here
	if opts.Call.Proxy == "" {
		peer = remoteAddrPort(conn)
	}
	if lane == LaneTLS {
		// tlsHandshake closes conn when it fails.
		if conn, _, err = tlsHandshake(ctx, conn, t.Host, ProfileGo, nil, opts.RootCAs); err != nil {
			return nil, err
		}
	}
	defer conn.Close()

	x := exchange{ctx: ctx, target: target, peer: peer}
	deadline, _ := ctx.Deadline()
	conn.SetDeadline(deadline)
	// A cancellation (not a deadline) must also interrupt a blocked Read or
	// Write: move the deadline into the past.
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	if len(req) > 0 {
		if _, err := conn.Write(req); err != nil {
			return nil, x.ioErr(err, "write the request")
		}
	}
	if opts.HalfClose {
		if cw, ok := conn.(interface{ CloseWrite() error }); ok {
			if err := cw.CloseWrite(); err != nil {
				return nil, x.ioErr(err, "half-close")
			}
		}
	}
	return x.readStream(conn, maxReply, idle, deadline)
}

// exchange holds what an exchange's errors report.
type exchange struct {
	ctx    context.Context // the exchange's context, deadline included
	target string
	peer   netip.AddrPort
}

func (x *exchange) fail(code Code, reason Reason, detail string, err error) *Error {
	return &Error{Code: code, Reason: reason, Op: "exchange", Target: x.target, Addr: x.peer, Detail: detail, Err: err}
}

// ctxErr classifies the end of the exchange's context.
func (x *exchange) ctxErr(detail string) *Error {
	if errors.Is(x.ctx.Err(), context.Canceled) {
		return x.fail(CodeTimeout, ReasonCanceled, detail, x.ctx.Err())
	}
	return x.fail(CodeTimeout, ReasonTimeout, detail, x.ctx.Err())
}

// ioErr classifies a read or write failure.
func (x *exchange) ioErr(err error, detail string) *Error {
	if x.ctx.Err() != nil {
		return x.ctxErr(detail)
	}
	if isTimeout(err) {
		return x.fail(CodeTimeout, ReasonTimeout, detail, err)
	}
	return x.fail(CodeUpstream, ReasonConnect, detail, err)
}

// readStream reads a TCP or TLS reply: until EOF, or until the peer has
// been idle for idle after its first byte. More than maxReply bytes is
// ErrTooLarge; reaching deadline before either end is a timeout.
func (x *exchange) readStream(conn net.Conn, maxReply int64, idle time.Duration, deadline time.Time) ([]byte, error) {
	buf := make([]byte, 0, min(maxReply+1, 4096))
	got := false
	for {
		dl, idleCut := deadline, false
		if got {
			if t := time.Now().Add(idle); t.Before(deadline) {
				dl, idleCut = t, true
			}
		}
		conn.SetReadDeadline(dl)
		// Checked after setting the deadline: a cancellation from now on
		// runs the AfterFunc, which overrides it.
		if x.ctx.Err() != nil {
			return nil, x.ctxErr("read the reply")
		}
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, int(min(int64(cap(buf)), maxReply+1-int64(len(buf)))))
		}
		n, err := conn.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > maxReply {
			return nil, x.fail(CodeTooLarge, ReasonBodyTooLarge, fmt.Sprintf("reply longer than %d bytes", maxReply), nil)
		}
		got = got || n > 0
		switch {
		case err == nil:
		case errors.Is(err, io.EOF):
			return buf, nil
		case idleCut && x.ctx.Err() == nil && isTimeout(err):
			return buf, nil // the peer went idle after answering
		case got && x.ctx.Err() == nil && isTimeout(err):
			return nil, x.fail(CodeTimeout, ReasonTimeout, "reply still arriving at the deadline", err)
		default:
			return nil, x.ioErr(err, "read the reply")
		}
	}
}

// ExchangeUDP sends req as one datagram to target (host:port) from a UDP
// socket connected to the pinned peer, and returns the first reply whose
// source address and port are the peer's. The target is decided for
// LaneUDP by d (one Decision recorded); a denial is the dialer's *Error and
// no socket is opened. Call.Proxy must be empty: upstream proxies carry TCP
// only.
//
// A connected socket only receives from its peer; the source is checked
// again anyway and other datagrams are discarded. Failures are *Error
// values with Op "exchange" unless the dialer reports them:
//   - req longer than 65,535 bytes, or than one datagram: CodeInvalid;
//   - a reply longer than MaxReply: CodeTooLarge, ReasonBodyTooLarge;
//   - no reply before the deadline (Timeout or ctx's): CodeTimeout,
//     ReasonTimeout, or CodeUpstream, ReasonReplySource when only datagrams
//     from other sources arrived;
//   - ctx canceled: CodeTimeout, ReasonCanceled;
//   - the peer's host or port unreachable (ICMP): CodeUpstream, ReasonConnect.
//
// ExchangeUDP is safe for concurrent use. It never logs.
func (d *Dialer) ExchangeUDP(ctx context.Context, target string, req []byte, o *ExchangeOptions) ([]byte, error) {
	opts := exchangeOptions(o)
	maxReply := opts.MaxReply
	if maxReply <= 0 || maxReply > DefaultUDPReplyCap {
		maxReply = DefaultUDPReplyCap
	}
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = DefaultUDPTimeout
	}

	t, err := ParseHostPort(target)
	if err != nil {
		return nil, err
	}
	if len(req) > maxUDPRequest {
		return nil, invalid("exchange", target, ReasonMalformed, fmt.Sprintf("request of %d bytes does not fit one datagram", len(req)))
	}
	if opts.Call.Proxy != "" {
		return nil, invalid("exchange", target, ReasonProxy, "upstream proxies carry TCP only")
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	res, err := d.Resolve(ctx, LaneUDP, t, &opts.Call)
	if err != nil {
		return nil, err
	}
	conn, err := d.DialResolved(ctx, "udp", res, &opts.Call)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	peer := remoteAddrPort(conn)
	x := exchange{ctx: ctx, target: target, peer: peer}
	uc, ok := netConn(conn).(*net.UDPConn)
	if !ok || !peer.IsValid() {
		return nil, x.fail(CodeInternal, ReasonConnect, fmt.Sprintf("dialer returned a %T for udp", conn), nil)
	}

	deadline, _ := ctx.Deadline()
	conn.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	if _, err := uc.Write(req); err != nil {
		if errors.Is(err, syscall.EMSGSIZE) {
			return nil, x.fail(CodeInvalid, ReasonMalformed, fmt.Sprintf("request of %d bytes does not fit one datagram", len(req)), err)
		}
		return nil, x.ioErr(err, "send the request")
	}
	return x.readDatagram(uc, maxReply)
}

// datagramReader is the part of *net.UDPConn readDatagram uses.
type datagramReader interface {
	ReadMsgUDPAddrPort(b, oob []byte) (n, oobn, flags int, addr netip.AddrPort, err error)
}

// readDatagram returns the first datagram from x.peer, discarding any from
// another source. A datagram longer than maxReply is ErrTooLarge; it is
// detected without platform flags by reading into maxReply+1 bytes.
func (x *exchange) readDatagram(c datagramReader, maxReply int64) ([]byte, error) {
	peer := unmapAddrPort(x.peer)
	buf := make([]byte, maxReply+1)
	discarded := 0
	for {
		n, _, _, from, err := c.ReadMsgUDPAddrPort(buf, nil)
		if err != nil {
			if discarded > 0 && !errors.Is(x.ctx.Err(), context.Canceled) && (x.ctx.Err() != nil || isTimeout(err)) {
				return nil, x.fail(CodeUpstream, ReasonReplySource,
					fmt.Sprintf("%d datagrams from other sources discarded, none from the peer", discarded), err)
			}
			return nil, x.ioErr(err, "read the reply")
		}
		if unmapAddrPort(from) != peer {
			discarded++
			continue
		}
		if int64(n) > maxReply {
			return nil, x.fail(CodeTooLarge, ReasonBodyTooLarge, fmt.Sprintf("reply longer than %d bytes", maxReply), nil)
		}
		out := make([]byte, n)
		copy(out, buf)
		return out, nil
	}
}

func unmapAddrPort(ap netip.AddrPort) netip.AddrPort {
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}

// remoteAddrPort returns conn's peer address, or the zero AddrPort when it
// is not an IP address.
func remoteAddrPort(conn net.Conn) netip.AddrPort {
	switch a := conn.RemoteAddr().(type) {
	case *net.TCPAddr:
		return unmapAddrPort(a.AddrPort())
	case *net.UDPAddr:
		return unmapAddrPort(a.AddrPort())
	}
	return netip.AddrPort{}
}
