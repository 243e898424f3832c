package egress

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// testProxy is an upstream proxy on loopback, HTTP CONNECT or SOCKS5, that
// records the target each client asks for. It tunnels only to loopback
// address literals, so a test can never reach further through it.
type testProxy struct {
	kind       string // "http" or "socks5"
	user, pass string // required credentials, when user is not ""
	ln         net.Listener
	conns      atomic.Int64

	mu      sync.Mutex
	targets []string
	auths   []string
	open    map[net.Conn]bool
	wg      sync.WaitGroup
}

func startTestProxy(t *testing.T, kind, user, pass string) *testProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &testProxy{kind: kind, user: user, pass: pass, ln: ln, open: map[net.Conn]bool{}}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.conns.Add(1)
			if !p.track(c) {
				c.Close()
				return
			}
			p.wg.Add(1)
			go func() {
				defer p.wg.Done()
				defer p.untrack(c)
				p.handle(c)
			}()
		}
	}()
	t.Cleanup(p.close)
	return p
}

// url returns the proxy URL for ParseUpstreamProxy, with credentials.
func (p *testProxy) url() string {
	cred := ""
	if p.user != "" {
		cred = p.user + ":" + p.pass + "@"
	}
	return p.kind + "://" + cred + p.ln.Addr().String()
}

func (p *testProxy) asked() ([]string, []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.targets), slices.Clone(p.auths)
}

func (p *testProxy) record(target, auth string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.targets = append(p.targets, target)
	p.auths = append(p.auths, auth)
}

func (p *testProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.open == nil {
		return false
	}
	p.open[c] = true
	return true
}

func (p *testProxy) untrack(c net.Conn) {
	c.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.open, c)
}

func (p *testProxy) close() {
	p.ln.Close()
	p.mu.Lock()
	for c := range p.open {
		c.Close()
	}
	p.open = nil
	p.mu.Unlock()
	p.wg.Wait()
}

// dialOnward connects to target, which must be a loopback IP:port.
func dialOnward(target string) (net.Conn, error) {
	ap, err := netip.ParseAddrPort(target)
	if err != nil || !ap.Addr().Unmap().IsLoopback() {
		return nil, fmt.Errorf("test proxy: refusing %q: not a loopback address literal", target)
	}
	return net.DialTimeout("tcp", target, 5*time.Second)
}

func (p *testProxy) handle(c net.Conn) {
	c.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	var up net.Conn
	var err error
	if p.kind == "socks5" {
		up, err = p.socksHandshake(c, br)
	} else {
		up, err = p.connectHandshake(c, br)
	}
	if err != nil || up == nil {
		return
	}
	defer up.Close()
	c.SetDeadline(time.Time{})
	done := make(chan struct{}, 2)
	go func() {
		io.Copy(up, br)
		done <- struct{}{}
	}()
	go func() {
		io.Copy(c, up)
		done <- struct{}{}
	}()
	<-done
	c.Close()
	up.Close()
	<-done
}

func (p *testProxy) connectHandshake(c net.Conn, br *bufio.Reader) (net.Conn, error) {
	req, err := http.ReadRequest(br)
	if err != nil {
		return nil, err
	}
	if req.Method != http.MethodConnect {
		io.WriteString(c, "HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
		return nil, nil
	}
	auth := req.Header.Get("Proxy-Authorization")
	p.record(req.RequestURI, auth)
	if p.user != "" && auth != "Basic "+base64.StdEncoding.EncodeToString([]byte(p.user+":"+p.pass)) {
		io.WriteString(c, "HTTP/1.1 407 Proxy Authentication Required\r\nContent-Length: 0\r\n\r\n")
		return nil, nil
	}
	up, err := dialOnward(req.RequestURI)
	if err != nil {
		io.WriteString(c, "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
		return nil, err
	}
	io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n")
	return up, nil
}

// socksHandshake serves RFC 1928 CONNECT with no authentication or
// RFC 1929 username/password.
func (p *testProxy) socksHandshake(c net.Conn, br *bufio.Reader) (net.Conn, error) {
	hdr := make([]byte, 2)
	if _, err := io.ReadFull(br, hdr); err != nil || hdr[0] != 5 {
		return nil, fmt.Errorf("socks greeting: %v", err)
	}
	methods := make([]byte, hdr[1])
	if _, err := io.ReadFull(br, methods); err != nil {
		return nil, err
	}
	want := byte(0) // no authentication
	if p.user != "" {
		want = 2 // username/password
	}
	if !slices.Contains(methods, want) {
		c.Write([]byte{5, 0xff})
		return nil, nil
	}
	c.Write([]byte{5, want})
	auth := ""
	if want == 2 {
		read := func() string {
			n, _ := br.ReadByte()
			b := make([]byte, n)
			io.ReadFull(br, b)
			return string(b)
		}
		if v, _ := br.ReadByte(); v != 1 {
			return nil, fmt.Errorf("socks auth version %d", v)
		}
		user := read()
		pass := read()
		auth = user + ":" + pass
		if user != p.user || pass != p.pass {
			c.Write([]byte{1, 1})
			p.record("", auth)
			return nil, nil
		}
		c.Write([]byte{1, 0})
	}
	req := make([]byte, 4)
	if _, err := io.ReadFull(br, req); err != nil {
		return nil, err
	}
	var host string
	switch req[3] {
	case 1, 4: // IPv4, IPv6
		b := make([]byte, 4)
		if req[3] == 4 {
			b = make([]byte, 16)
		}
		io.ReadFull(br, b)
		a, _ := netip.AddrFromSlice(b)
		host = a.String()
	case 3: // a name: the proxy would resolve it
		n, _ := br.ReadByte()
		b := make([]byte, n)
		io.ReadFull(br, b)
		host = string(b)
	}
	pb := make([]byte, 2)
	if _, err := io.ReadFull(br, pb); err != nil {
		return nil, err
	}
	target := net.JoinHostPort(host, strconv.Itoa(int(binary.BigEndian.Uint16(pb))))
	p.record(target, auth)
	reply := []byte{5, 0, 0, 1, 0, 0, 0, 0, 0, 0}
	if req[1] != 1 {
		reply[1] = 7 // command not supported
		c.Write(reply)
		return nil, nil
	}
	up, err := dialOnward(target)
	if err != nil {
		reply[1] = 2 // not allowed by ruleset
		c.Write(reply)
		return nil, err
	}
	c.Write(reply)
	return up, nil
}

func proxyDialer(t *testing.T, proxies ...*testProxy) (*Dialer, map[string]*testProxy) {
	t.Helper()
	d, _ := staticDialer(t, map[string][]netip.Addr{
		"example.com": {addrLocal},
		"evil.test":   mustAddrs("127.0.0.2"),
	}, exceptLocal...)
	d.Proxies = map[string]*UpstreamProxy{}
	byName := map[string]*testProxy{}
	for i, p := range proxies {
		name := fmt.Sprintf("%s%d", p.kind, i)
		up, err := ParseUpstreamProxy(name, p.url())
		if err != nil {
			t.Fatal(err)
		}
		d.Proxies[name] = up
		byName[name] = p
	}
	return d, byName
}

// TestUpstreamProxiesConcurrent runs two TLS fetches through two proxies
// at once: the origin holds each request until both are in flight. Each
// proxy must be asked for the pinned IP:port, never the name, while TLS
// still verifies the name.
func TestUpstreamProxiesConcurrent(t *testing.T) {
	var arrived atomic.Int32
	both := make(chan struct{})
	srv, counts, pool := startServer(t, modeH2, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if arrived.Add(1) == 2 {
			close(both)
		}
		select {
		case <-both:
			fmt.Fprintf(w, "together sni=%s", r.TLS.ServerName)
		case <-time.After(10 * time.Second):
			http.Error(w, "the other request never came", http.StatusGatewayTimeout)
		}
	}))
	port := serverPort(t, srv)
	connect := startTestProxy(t, "http", "user", "pa:ss")
	socks := startTestProxy(t, "socks5", "suser", "spass")
	d, proxies := proxyDialer(t, connect, socks)
	c := newTestClient(t, d, pool)

	raw := fmt.Sprintf("https://example.com:%d/", port)
	type result struct {
		proxy string
		body  string
		err   error
	}
	results := make(chan result, len(proxies))
	for name := range proxies {
		go func() {
			resp, err := c.Do(context.Background(), &Request{URL: raw, Call: Call{Proxy: name}})
			if err != nil {
				results <- result{name, "", err}
				return
			}
			b, err := ReadAll(resp)
			results <- result{name, string(b), err}
		}()
	}
	for range proxies {
		r := <-results
		if r.err != nil {
			t.Errorf("via %s: %v", r.proxy, r.err)
			continue
		}
		if r.body != "together sni=example.com" {
			t.Errorf("via %s: body %q, want both requests in flight at once and SNI example.com", r.proxy, r.body)
		}
	}
	want := netip.AddrPortFrom(addrLocal, uint16(port)).String()
	wantAuth := map[string]string{"http": "Basic " + base64.StdEncoding.EncodeToString([]byte("user:pa:ss")), "socks5": "suser:spass"}
	for name, p := range proxies {
		targets, auths := p.asked()
		if !slices.Equal(targets, []string{want}) {
			t.Errorf("%s was asked for %v, want [%s]: the pinned address, not the name", name, targets, want)
		}
		if len(auths) != 1 || auths[0] != wantAuth[p.kind] {
			t.Errorf("%s saw credentials %q, want %q", name, auths, wantAuth[p.kind])
		}
	}
	if got := counts.conns.Load(); got != 2 {
		t.Errorf("origin accepted %d connections, want 2 (one through each proxy)", got)
	}
}

func TestUpstreamProxyFetch(t *testing.T) {
	srvHTTP, _, _ := startServer(t, modeHTTP, http.HandlerFunc(echoHandler))
	srvH2, _, pool := startServer(t, modeH2, http.HandlerFunc(echoHandler))
	connect := startTestProxy(t, "http", "", "")
	socks := startTestProxy(t, "socks5", "", "")
	d, proxies := proxyDialer(t, connect, socks)
	c := newTestClient(t, d, pool)
	for name, p := range proxies {
		for _, srv := range []struct {
			scheme string
			port   int
		}{
			{"http", serverPort(t, srvHTTP)},
			{"https", serverPort(t, srvH2)},
		} {
			t.Run(name+"/"+srv.scheme, func(t *testing.T) {
				host := fmt.Sprintf("example.com:%d", srv.port)
				target := fmt.Sprintf("127.0.0.1:%d", srv.port)
				before, _ := p.asked()
				for range 3 {
					_, body := fetchAll(t, c, &Request{URL: srv.scheme + "://" + host + "/", Call: Call{Proxy: name}})
					if got := echoField(body, "host"); got != host {
						t.Errorf("Host = %q, want %q", got, host)
					}
				}
				after, _ := p.asked()
				// Three fetches, one tunnel: proxied connections are pooled too.
				if got := after[len(before):]; !slices.Equal(got, []string{target}) {
					t.Errorf("asked for %v, want [%s] once", got, target)
				}
			})
		}
	}
}

func TestUpstreamProxyRefusals(t *testing.T) {
	srv, counts, _ := startServer(t, modeHTTP, http.HandlerFunc(echoHandler))
	port := serverPort(t, srv)
	connect := startTestProxy(t, "http", "user", "pass")
	socks := startTestProxy(t, "socks5", "", "")
	d, _ := proxyDialer(t, connect, socks)
	audit := d.Auditor.(*auditLog)
	// A proxy that wants other credentials, and one that is not there.
	wrong, err := ParseUpstreamProxy("wrong", "http://user:nope@"+connect.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	d.Proxies["wrong"] = wrong
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone, err := ParseUpstreamProxy("gone", "socks5://"+ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	d.Proxies["gone"] = gone
	c := newTestClient(t, d, nil)

	ok := fmt.Sprintf("http://127.0.0.1:%d/", port)
	tests := []struct {
		name     string
		url      string
		proxy    string
		code     Code
		reason   Reason
		contacts int64 // connections the CONNECT proxy may see
	}{
		{"unconfigured proxy", ok, "nope", CodeDenied, ReasonProxy, 0},
		{"private target via connect", "http://10.0.0.1/", "http0", CodeDenied, ReasonPrivate, 0},
		{"metadata via socks", "http://169.254.169.254/", "socks51", CodeDenied, ReasonMetadata, 0},
		{"name to loopback via connect", fmt.Sprintf("http://evil.test:%d/", port), "http0", CodeDenied, ReasonLoopback, 0},
		{"loopback literal via socks", fmt.Sprintf("https://127.0.0.2:%d/", port), "socks51", CodeDenied, ReasonLoopback, 0},
		{"wrong credentials", ok, "wrong", CodeUpstream, ReasonProxy, 1},
		{"proxy down", ok, "gone", CodeUpstream, ReasonProxy, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := connect.conns.Load() + socks.conns.Load()
			audit.reset()
			_, err := c.Do(context.Background(), &Request{URL: tt.url, Call: Call{Proxy: tt.proxy}})
			wantError(t, err, tt.code, tt.reason)
			if tt.proxy == "nope" && len(audit.all()) != 0 {
				t.Errorf("an unconfigured proxy got as far as a decision: %+v", audit.all())
			}
			if got := connect.conns.Load() + socks.conns.Load() - before; got != tt.contacts {
				t.Errorf("proxies were contacted %d times, want %d", got, tt.contacts)
			}
		})
	}
	if got := counts.conns.Load(); got != 0 {
		t.Errorf("origin accepted %d connections, want 0", got)
	}
	t.Run("udp", func(t *testing.T) {
		tg, err := ParseHostPort("127.0.0.1:53")
		if err != nil {
			t.Fatal(err)
		}
		_, err = d.Dial(context.Background(), "udp", LaneUDP, tg, &Call{Proxy: "socks51"})
		wantError(t, err, CodeInvalid, ReasonProxy)
	})
}

func TestParseUpstreamProxy(t *testing.T) {
	tests := []struct {
		raw     string
		want    string // String(), "" when refused
		wantErr bool
	}{
		{"http://127.0.0.1:3128", "http://127.0.0.1:3128", false},
		{"http://user:secret@proxy.internal:3128", "http://proxy.internal:3128", false},
		{"socks5://[::1]:1080", "socks5://[::1]:1080", false},
		{"socks5h://127.0.0.1:1080", "", true}, // would let the proxy resolve
		{"https://127.0.0.1:443", "", true},
		{"http://127.0.0.1", "", true}, // no port
		{"socks5://:1080", "", true},   // no host
		{"::", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.raw, func(t *testing.T) {
			p, err := ParseUpstreamProxy("p", tt.raw)
			if tt.wantErr {
				wantError(t, err, CodeInvalid, ReasonProxy)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := p.String(); got != tt.want {
				t.Errorf("String() = %q, want %q (never the credentials)", got, tt.want)
			}
		})
	}
}

// TestUpstreamProxyStall: a SOCKS5 proxy that accepts and never answers.
// http.Transport dials with a context detached from the request, so the
// proxy handshake needs its own bound.
func TestUpstreamProxyStall(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := make(chan struct{}, 4)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var held []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				io.Copy(io.Discard, c)
				gone <- struct{}{}
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range held {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	for _, kind := range []string{"socks5", "http"} {
		t.Run(kind, func(t *testing.T) {
			d, _ := staticDialer(t, nil, exceptLocal...)
			d.ConnectTimeout = 300 * time.Millisecond
			p, err := ParseUpstreamProxy("stall", kind+"://"+ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			d.Proxies = map[string]*UpstreamProxy{"stall": p}
			c := newTestClient(t, d, nil)
			c.Timeout = 200 * time.Millisecond
			_, err = c.Do(context.Background(), &Request{URL: "http://127.0.0.1:9/", Call: Call{Proxy: "stall"}})
			wantError(t, err, CodeTimeout, ReasonTimeout)
			select {
			case <-gone:
			case <-time.After(10 * time.Second):
				t.Fatal("the stalled proxy handshake was never abandoned")
			}
		})
	}
}
