package egress

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"syscall"
	"time"
)

// DefaultConnectTimeout bounds one TCP connect attempt.
const DefaultConnectTimeout = 10 * time.Second

// Decision is the record of one verdict: one per resolution, whatever the
// caller (HTTP hop, exchange, proxy request).
type Decision struct {
	Time      time.Time
	Allow     bool
	Reason    Reason
	Lane      Lane
	Host      string       // the canonical host asked for
	Port      uint16       //
	Addrs     []netip.Addr // the answers, when DNS was done or the literal
	Addr      netip.Addr   // the address that decided a denial
	Key       string       // the caller key (a principal), opaque to egress
	Exception bool         // a floor exception was used
	Rule      string       // the allow/deny pattern that decided, if any
	Hop       int          // redirect hop
	Detail    string
}

// Verdict returns "allow" or "deny".
func (d Decision) Verdict() string {
	if d.Allow {
		return "allow"
	}
	return "deny"
}

// Auditor receives every decision. Implementations must be safe for
// concurrent use and must not block for long.
type Auditor interface {
	Audit(Decision)
}

// AuditorFunc adapts a function to Auditor.
type AuditorFunc func(Decision)

// Audit implements Auditor.
func (f AuditorFunc) Audit(d Decision) { f(d) }

// Limiter is the connect-attempt hook: it is called once per attempt, before
// the decision, with the caller's key, so a gate can count attempts per
// principal including denied ones. A non-nil error refuses the attempt; a
// plain error becomes Code rate_limited.
type Limiter func(ctx context.Context, key string) error

// ConnSlots bounds the connections a Dialer holds open at once (a
// descriptor budget): DialResolved takes a slot before it connects, and the
// connection gives it back when it is closed, however long it stays in a
// pool. Acquire may wait; a non-nil error refuses the dial (an *Error is
// returned as is, a context error is a timeout, any other error is
// rate_limited). Implementations must be safe for concurrent use, and
// release may be called more than once.
type ConnSlots interface {
	Acquire(ctx context.Context) (release func(), err error)
}

// Call carries the per-request options of a dial, exchange or fetch.
type Call struct {
	Key    string   // caller key for the limiter hook and the audit record
	Narrow *Checker // request narrowing: can only narrow the dialer's policy
	Proxy  string   // name of an operator-configured upstream proxy, or ""
	Hop    int      // redirect hop, for audit records

	// Admit, if set, is the caller's own refusal of a target, such as a
	// browser session's origin lists. It is asked twice, each time only
	// after the policy has allowed what it is shown: first about the name
	// before anything is resolved (addrs nil; an IP literal's own address
	// for a literal), then, for a name, about the answers the connection
	// will be pinned to, before the target is allowed. No lookup is made
	// for it. A non-nil error denies; its *Error reason (ReasonNotAllowed
	// otherwise) is recorded in the decision. Admit may be called
	// concurrently.
	Admit func(t Target, addrs []netip.Addr) error
}

// Dialer is the guarded dialer: every connection it makes is to an address
// that passed the policy, resolved once and pinned. Configure the exported
// fields before first use and do not change them after. A Dialer is safe for
// concurrent use. The zero Dialer denies everything (its Policy is nil).
type Dialer struct {
	Policy         *Checker
	Resolver       Resolver      // nil: SystemResolver
	DNSTimeout     time.Duration // 0: DefaultDNSTimeout
	ConnectTimeout time.Duration // 0: DefaultConnectTimeout
	Pins           PinStore      // optional trust-on-first-use pin cache
	PinTTL         time.Duration // 0: DefaultPinTTL
	Limiter        Limiter
	Auditor        Auditor
	Logger         *slog.Logger              // nil: no log records
	Proxies        map[string]*UpstreamProxy // the only upstream proxies a Call may name
	// Conns, when set, bounds the connections open at once: every
	// connection DialResolved opens (HTTP, exchanges, the forward proxy,
	// through an upstream proxy or not) holds one of its slots until it
	// is closed.
	Conns ConnSlots
}

// Resolution is a decided, pinned target: dial only these addresses.
type Resolution struct {
	Target   Target
	Lane     Lane
	Addrs    []netip.Addr
	Excepted bool
	checker  *Checker
}

func (d *Dialer) policy(c *Call) *Checker {
	if c != nil && c.Narrow != nil {
		return d.Policy.Narrow(c.Narrow)
	}
	return d.Policy
}

func (d *Dialer) resolver() (Resolver, error) {
	if d.Resolver != nil {
		return d.Resolver, nil
	}
	r, err := SystemResolver()
	if err != nil {
		return nil, err
	}
	return r, nil
}

// Resolve decides t for lane: the name checks, one resolution (A and AAAA,
// with the DNS timeout), every answer checked, the pin store consulted. It
// records exactly one Decision. The error is an *Error: denied with the
// reason, or a DNS failure.
func (d *Dialer) Resolve(ctx context.Context, lane Lane, t Target, c *Call) (Resolution, error) {
	if c == nil {
		c = &Call{}
	}
	if d.Limiter != nil {
		if err := d.Limiter(ctx, c.Key); err != nil {
			var e *Error
			if !errors.As(err, &e) {
				e = &Error{Code: CodeRateLimited, Reason: ReasonRateLimited, Op: "dial", Target: t.String(), Err: err}
			}
			d.record(ctx, Decision{Lane: lane, Host: t.Host, Port: t.Port, Key: c.Key, Reason: e.Reason, Hop: c.Hop, Detail: "connect attempt limit"})
			return Resolution{}, e
		}
	}
	chk := d.policy(c)
	res := Resolution{Target: t, Lane: lane, checker: chk}
	dec := Decision{Lane: lane, Host: t.Host, Port: t.Port, Key: c.Key, Hop: c.Hop}

	v := chk.CheckName(lane, t)
	if !v.Allow {
		dec.Reason, dec.Rule, dec.Addr = v.Reason, v.Rule, v.Addr
		if t.IsIP() {
			dec.Addrs = []netip.Addr{t.Addr}
		}
		d.record(ctx, dec)
		return res, deniedErr(t, v, c.Hop)
	}
	var literal []netip.Addr
	if t.IsIP() {
		literal = []netip.Addr{t.Addr}
	}
	if err := d.admit(ctx, c, t, literal, dec); err != nil {
		return res, err
	}
	if t.IsIP() {
		res.Addrs, res.Excepted = []netip.Addr{t.Addr}, v.Excepted
		dec.Allow, dec.Reason, dec.Rule, dec.Addrs, dec.Exception = true, v.Reason, v.Rule, res.Addrs, v.Excepted
		d.record(ctx, dec)
		return res, nil
	}

	addrs, err := d.lookup(ctx, t.Host)
	if err != nil {
		dec.Reason = ReasonOf(err)
		dec.Detail = err.Error()
		d.record(ctx, dec)
		return res, err
	}
	dec.Addrs = addrs
	v = chk.CheckAddrs(lane, t.Host, addrs, t.Port)
	if !v.Allow {
		dec.Reason, dec.Rule, dec.Addr = v.Reason, v.Rule, v.Addr
		d.record(ctx, dec)
		return res, answerDenied(t, v, c.Hop)
	}
	if d.Pins != nil {
		ttl := d.PinTTL
		if ttl <= 0 {
			ttl = DefaultPinTTL
		}
		pinned, perr := d.Pins.Pin(ctx, t.Host, addrs, ttl)
		if perr != nil {
			dec.Reason, dec.Detail = ReasonDNSError, "pin store: "+perr.Error()
			d.record(ctx, dec)
			return res, &Error{Code: CodeUnavailable, Reason: ReasonDNSError, Op: "pin", Target: t.Host, Err: perr}
		}
		if a, ok := notIn(addrs, pinned); ok {
			dec.Reason, dec.Addr = ReasonDNSRebinding, a
			dec.Detail = fmt.Sprintf("%s answered %s, pinned to %v", t.Host, a, pinned)
			d.record(ctx, dec)
			return res, &Error{Code: CodeDenied, Reason: ReasonDNSRebinding, Op: "resolve", Target: t.Host,
				Addr: netip.AddrPortFrom(a, t.Port), Hop: c.Hop, Detail: "answers differ from the pinned answers", Internal: dec.Detail}
		}
	}
	if err := d.admit(ctx, c, t, addrs, dec); err != nil {
		return res, err
	}
	res.Addrs, res.Excepted = addrs, v.Excepted
	dec.Allow, dec.Reason, dec.Rule, dec.Exception = true, v.Reason, v.Rule, v.Excepted
	d.record(ctx, dec)
	return res, nil
}

// admit asks the Call's Admit about t (and addrs, when known) and records
// the refusal as the decision.
func (d *Dialer) admit(ctx context.Context, c *Call, t Target, addrs []netip.Addr, dec Decision) error {
	if c.Admit == nil {
		return nil
	}
	err := c.Admit(t, addrs)
	if err == nil {
		return nil
	}
	var e *Error
	if !errors.As(err, &e) {
		e = &Error{Code: CodeDenied, Reason: ReasonNotAllowed, Op: "check", Target: t.String(), Hop: c.Hop, Detail: err.Error()}
	}
	dec.Reason, dec.Detail = e.Reason, e.Detail
	if len(addrs) > 0 {
		dec.Addrs = addrs
	}
	d.record(ctx, dec)
	return e
}

func notIn(addrs, pinned []netip.Addr) (netip.Addr, bool) {
outer:
	for _, a := range addrs {
		for _, p := range pinned {
			if a == p {
				continue outer
			}
		}
		return a, true
	}
	return netip.Addr{}, false
}

func (d *Dialer) lookup(ctx context.Context, host string) ([]netip.Addr, error) {
	r, err := d.resolver()
	if err != nil {
		return nil, err
	}
	var addrs []netip.Addr
	if s, ok := r.(*StaticResolver); ok && s.Next == nil {
		// Answers from memory only: no I/O to bound, so no timer (this is
		// the cached-answer hot path).
		addrs, err = s.LookupNetIP(ctx, "ip", host)
	} else {
		to := d.DNSTimeout
		if to <= 0 {
			to = DefaultDNSTimeout
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, to)
		defer cancel()
		addrs, err = r.LookupNetIP(ctx, "ip", host+".")
	}
	if err != nil {
		var e *Error
		if errors.As(err, &e) {
			return nil, err
		}
		if ctx.Err() != nil {
			return nil, &Error{Code: CodeTimeout, Reason: ReasonDNSTimeout, Op: "resolve", Target: host, Err: err}
		}
		return nil, &Error{Code: CodeUpstream, Reason: ReasonDNSError, Op: "resolve", Target: host, Err: err}
	}
	if len(addrs) == 0 {
		return nil, &Error{Code: CodeNotFound, Reason: ReasonDNSNoAddress, Op: "resolve", Target: host}
	}
	return addrs, nil
}

// answerDenied is the error for a name whose answers the policy refused.
// An answer in an address class or on the deny list (and a mix of allowed
// and refused answers) is one public reason, internal_address, whatever the
// class, so that refusals cannot map internal DNS; Class and Addr keep the
// detail for the operator. A refusal that says nothing about the answers
// (not on the allow list) keeps its reason.
func answerDenied(t Target, v Verdict, hop int) *Error {
	if v.Reason == ReasonNotAllowed || v.Reason == ReasonNoPolicy || v.Reason == ReasonLane || v.Reason == ReasonDNSNoAddress {
		return deniedErr(t, v, hop)
	}
	// The class's own error, its detail kept for the operator only.
	e := deniedErr(t, v, hop)
	e.Reason, e.Class, e.Name = ReasonInternalAddress, v.Reason, t.Host
	e.Internal, e.Detail = e.Detail, ""
	return e
}

func deniedErr(t Target, v Verdict, hop int) *Error {
	e := &Error{Code: CodeDenied, Reason: v.Reason, Op: "check", Target: t.String(), Hop: hop}
	if v.Addr.IsValid() {
		e.Addr = netip.AddrPortFrom(v.Addr, t.Port)
	}
	switch {
	case v.Reason == ReasonDNSMixed:
		e.Detail = "an answer is " + string(v.MixedWith)
	case v.Rule != "":
		e.Detail = "matched " + v.Rule
	}
	return e
}

func (d *Dialer) record(ctx context.Context, dec Decision) {
	if d.Auditor == nil && d.Logger == nil {
		return
	}
	dec.Time = time.Now()
	if d.Auditor != nil {
		d.Auditor.Audit(dec)
	}
	if d.Logger != nil {
		level := slog.LevelInfo
		if !dec.Allow {
			level = slog.LevelWarn
		}
		d.Logger.LogAttrs(ctx, level, "egress decision",
			slog.String("verdict", dec.Verdict()),
			slog.String("reason", string(dec.Reason)),
			slog.String("lane", string(dec.Lane)),
			slog.String("host", dec.Host),
			slog.Int("port", int(dec.Port)),
			slog.Any("addrs", dec.Addrs),
			slog.String("key", dec.Key),
			slog.Bool("exception", dec.Exception),
			slog.String("rule", dec.Rule),
			slog.Int("hop", dec.Hop),
			slog.String("detail", dec.Detail),
		)
	}
}

// DialResolved connects to the first reachable pinned address of r. network
// is "tcp" or "udp". The exact IP:port is checked again in the socket's
// control hook before connect, as the last line of defence. When c names an
// upstream proxy, the connection is tunnelled through it to the pinned IP.
func (d *Dialer) DialResolved(ctx context.Context, network string, r Resolution, c *Call) (net.Conn, error) {
	if len(r.Addrs) == 0 {
		return nil, &Error{Code: CodeDenied, Reason: ReasonNoPolicy, Op: "dial", Target: r.Target.String(), Detail: "unresolved target"}
	}
	if d.Conns == nil {
		return d.dialResolved(ctx, network, r, c)
	}
	release, err := d.Conns.Acquire(ctx)
	if err != nil {
		var e *Error
		if !errors.As(err, &e) {
			code, reason := ctxCode(ctx, err)
			if code == CodeUpstream {
				code, reason = CodeRateLimited, ReasonRateLimited
			}
			e = &Error{Code: code, Reason: reason, Op: "dial", Target: r.Target.String(), Err: err}
		}
		if e.Target == "" {
			e.Target = r.Target.String()
		}
		return nil, e
	}
	conn, err := d.dialResolved(ctx, network, r, c)
	if err != nil {
		release()
		return nil, err
	}
	return slotted(conn, release), nil
}

func (d *Dialer) dialResolved(ctx context.Context, network string, r Resolution, c *Call) (net.Conn, error) {
	if c != nil && c.Proxy != "" {
		if network != "tcp" {
			return nil, invalid("dial", r.Target.String(), ReasonProxy, "upstream proxies carry TCP only")
		}
		p, ok := d.Proxies[c.Proxy]
		if !ok {
			return nil, denied("dial", r.Target.String(), ReasonProxy, "upstream proxy "+fmt.Sprintf("%q", c.Proxy)+" is not configured")
		}
		var lastErr error
		for _, a := range r.Addrs {
			conn, err := p.dial(ctx, d, netip.AddrPortFrom(a, r.Target.Port))
			if err == nil {
				return conn, nil
			}
			lastErr = err
			if ctx.Err() != nil {
				break
			}
		}
		return nil, lastErr
	}
	var lastErr error
	for _, a := range r.Addrs {
		conn, err := d.dialAddr(ctx, network, r, netip.AddrPortFrom(a, r.Target.Port))
		if err == nil {
			return conn, nil
		}
		lastErr = err
		var e *Error
		if errors.As(err, &e) && e.Code == CodeDenied || ctx.Err() != nil {
			break
		}
	}
	return nil, lastErr
}

func (d *Dialer) dialAddr(ctx context.Context, network string, r Resolution, ap netip.AddrPort) (net.Conn, error) {
	to := d.ConnectTimeout
	if to <= 0 {
		to = DefaultConnectTimeout
	}
	name := r.Target.Host
	if r.Target.IsIP() {
		name = ""
	}
	nd := net.Dialer{
		Timeout: to,
		ControlContext: func(_ context.Context, _, address string, _ syscall.RawConn) error {
			got, err := netip.ParseAddrPort(address)
			if err != nil {
				return denied("dial", address, ReasonParseAmbiguous, "unparseable socket address")
			}
			got = netip.AddrPortFrom(got.Addr().Unmap(), got.Port())
			if got != netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()) {
				return &Error{Code: CodeDenied, Reason: ReasonDNSRebinding, Op: "dial", Target: r.Target.String(), Addr: got,
					Detail: "socket address differs from the pinned address", Internal: "pinned " + ap.String()}
			}
			if v := r.checker.CheckAddr(r.Lane, name, ap.Addr(), ap.Port()); !v.Allow {
				if name != "" {
					e := answerDenied(r.Target, v, 0)
					e.Op = "dial"
					return e
				}
				return &Error{Code: CodeDenied, Reason: v.Reason, Op: "dial", Target: r.Target.String(), Addr: ap}
			}
			return nil
		},
	}
	conn, err := nd.DialContext(ctx, network, ap.String())
	if err != nil {
		var e *Error
		if errors.As(err, &e) {
			return nil, e
		}
		code := CodeUpstream
		if ctx.Err() != nil || isTimeout(err) {
			code = CodeTimeout
		}
		return nil, &Error{Code: code, Reason: ReasonConnect, Op: "dial", Target: r.Target.String(), Addr: ap, Err: err}
	}
	return conn, nil
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout() || errors.Is(err, context.DeadlineExceeded)
}

// Dial decides t and connects to it: Resolve then DialResolved. network is
// "tcp" or "udp".
func (d *Dialer) Dial(ctx context.Context, network string, lane Lane, t Target, c *Call) (net.Conn, error) {
	r, err := d.Resolve(ctx, lane, t, c)
	if err != nil {
		return nil, err
	}
	return d.DialResolved(ctx, network, r, c)
}

// DialContext has the stdlib dial shape for callers that need a dial
// function: address is host:port, network "tcp" (lane tcp) or "udp"
// (lane udp).
func (d *Dialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	t, err := ParseHostPort(address)
	if err != nil {
		return nil, err
	}
	lane := LaneTCP
	switch network {
	case "tcp", "tcp4", "tcp6":
		network = "tcp"
	case "udp", "udp4", "udp6":
		network, lane = "udp", LaneUDP
	default:
		return nil, invalid("dial", address, ReasonMalformed, "network "+network+" is not tcp or udp")
	}
	return d.Dial(ctx, network, lane, t, nil)
}

// slotConn gives its ConnSlots slot back when it is closed.
type slotConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *slotConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// slotConnCW is a slotConn over a connection that can half-close.
type slotConnCW struct{ *slotConn }

func (c slotConnCW) CloseWrite() error {
	return c.Conn.(interface{ CloseWrite() error }).CloseWrite()
}

func slotted(conn net.Conn, release func()) net.Conn {
	sc := &slotConn{Conn: conn, release: release}
	if _, ok := conn.(interface{ CloseWrite() error }); ok {
		return slotConnCW{sc}
	}
	return sc
}

// netConn unwraps a slotted connection.
func netConn(c net.Conn) net.Conn {
	switch s := c.(type) {
	case *slotConn:
		return s.Conn
	case slotConnCW:
		return s.Conn
	}
	return c
}
