package egress

import (
	"bufio"
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"time"

	"golang.org/x/net/proxy"
)

// UpstreamProxy is an operator-configured proxy that guarded connections may
// be tunnelled through: HTTP CONNECT or SOCKS5. The floor still applies: the
// target is resolved and checked here, and the proxy is asked for the pinned
// IP (TLS keeps SNI on the name). The proxy's own address is trusted, since
// an operator chose it. Safe for concurrent use: each dial is independent.
type UpstreamProxy struct {
	Name string
	kind string // "http" or "socks5"
	addr string // host:port of the proxy
	user *url.Userinfo
}

// ParseUpstreamProxy parses http://[user:pass@]host:port or
// socks5://[user:pass@]host:port (socks5h is refused: it would let the
// proxy resolve names, and we resolve).
func ParseUpstreamProxy(name, raw string) (*UpstreamProxy, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, invalid("proxy", name, ReasonProxy, "bad proxy URL")
	}
	p := &UpstreamProxy{Name: name, user: u.User}
	switch u.Scheme {
	case "http":
		p.kind = "http"
	case "socks5":
		p.kind = "socks5"
	default:
		return nil, invalid("proxy", name, ReasonProxy, "proxy scheme must be http or socks5")
	}
	if u.Port() == "" || u.Hostname() == "" {
		return nil, invalid("proxy", name, ReasonProxy, "proxy URL needs host:port")
	}
	p.addr = u.Host
	return p, nil
}

// String returns the proxy URL without credentials.
func (p *UpstreamProxy) String() string { return p.kind + "://" + p.addr }

type proxyForward struct {
	timeout time.Duration
}

func (f proxyForward) Dial(network, addr string) (net.Conn, error) {
	return f.DialContext(context.Background(), network, addr)
}

func (f proxyForward) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	nd := net.Dialer{Timeout: f.timeout}
	return nd.DialContext(ctx, network, addr)
}

func (p *UpstreamProxy) dial(ctx context.Context, d *Dialer, target netip.AddrPort) (net.Conn, error) {
	to := d.ConnectTimeout
	if to <= 0 {
		to = DefaultConnectTimeout
	}
	if _, ok := ctx.Deadline(); !ok {
		// http.Transport dials with a context detached from the request:
		// bound the proxy handshake (SOCKS5 has no other bound).
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, to)
		defer cancel()
	}
	fwd := proxyForward{timeout: to}
	wrap := func(err error) error {
		code := CodeUpstream
		if ctx.Err() != nil || isTimeout(err) {
			code = CodeTimeout
		}
		return &Error{Code: code, Reason: ReasonProxy, Op: "proxy", Addr: target, Detail: "through an upstream proxy", Internal: "via " + p.String(), Err: err}
	}
	if p.kind == "socks5" {
		var auth *proxy.Auth
		if p.user != nil {
			pw, _ := p.user.Password()
			auth = &proxy.Auth{User: p.user.Username(), Password: pw}
		}
		sd, err := proxy.SOCKS5("tcp", p.addr, auth, fwd)
		if err != nil {
			return nil, wrap(err)
		}
		conn, err := sd.(proxy.ContextDialer).DialContext(ctx, "tcp", target.String())
		if err != nil {
			return nil, wrap(err)
		}
		return conn, nil
	}
	conn, err := fwd.DialContext(ctx, "tcp", p.addr)
	if err != nil {
		return nil, wrap(err)
	}
	dl, _ := ctx.Deadline() // set above when the caller had none
	conn.SetDeadline(dl)
	req := fmt.Sprintf("CONNECT %s HTTP/1.1\r\nHost: %s\r\n", target, target)
	if p.user != nil {
		pw, _ := p.user.Password()
		req += "Proxy-Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte(p.user.Username()+":"+pw)) + "\r\n"
	}
	req += "\r\n"
	if _, err := conn.Write([]byte(req)); err != nil {
		conn.Close()
		return nil, wrap(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		conn.Close()
		return nil, wrap(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		conn.Close()
		return nil, wrap(fmt.Errorf("CONNECT answered %s", resp.Status))
	}
	conn.SetDeadline(time.Time{})
	if br.Buffered() > 0 {
		return &bufferedConn{Conn: conn, r: br}, nil
	}
	return conn, nil
}

// bufferedConn is a net.Conn whose first bytes were already read into r.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(b []byte) (int, error) { return c.r.Read(b) }
