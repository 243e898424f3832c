package egress

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"math/big"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// xchPolicy opens every lane and makes 127.0.0.1 reachable as if it were a
// public address, so that loopback test servers stand in for the Internet.
var xchPolicy = Policy{Lanes: Lanes(), Exceptions: []string{"127.0.0.1"}}

// xchAudit records decisions.
type xchAudit struct {
	mu sync.Mutex
	ds []Decision
}

func (a *xchAudit) Audit(d Decision) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.ds = append(a.ds, d)
}

func (a *xchAudit) decisions() []Decision {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]Decision(nil), a.ds...)
}

// xchCountingResolver answers from a static table and counts lookups.
type xchCountingResolver struct {
	static  StaticResolver
	lookups atomic.Int32
}

func (r *xchCountingResolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	r.lookups.Add(1)
	return r.static.LookupNetIP(ctx, network, host)
}

func xchResolver(hosts map[string]string) *xchCountingResolver {
	r := &xchCountingResolver{static: StaticResolver{Hosts: map[string][]netip.Addr{}}}
	for name, addrs := range hosts {
		for a := range strings.SplitSeq(addrs, ",") {
			r.static.Hosts[name] = append(r.static.Hosts[name], netip.MustParseAddr(a))
		}
	}
	return r
}

// xchDialer returns a Dialer for p whose resolver never sends DNS (nil r:
// an empty static table) and whose decisions land in the returned audit.
func xchDialer(t testing.TB, p Policy, r Resolver) (*Dialer, *xchAudit) {
	t.Helper()
	chk, err := p.Compile()
	if err != nil {
		t.Fatal(err)
	}
	if r == nil {
		r = &StaticResolver{}
	}
	a := &xchAudit{}
	return &Dialer{Policy: chk, Resolver: r, Auditor: a}, a
}

// checkOneDecision asserts that exactly one decision was recorded, for lane,
// with the given verdict.
func checkOneDecision(t *testing.T, a *xchAudit, lane Lane, allow bool, reason Reason) {
	t.Helper()
	ds := a.decisions()
	if len(ds) != 1 {
		t.Fatalf("got %d decisions %+v, want 1", len(ds), ds)
	}
	d := ds[0]
	if d.Lane != lane || d.Allow != allow || d.Reason != reason {
		t.Errorf("decision = lane %q allow %v reason %q, want lane %q allow %v reason %q", d.Lane, d.Allow, d.Reason, lane, allow, reason)
	}
}

// checkErr asserts err is an *Error with the given code, reason and op.
// An empty code asserts err is nil.
func checkErr(t *testing.T, err error, code Code, reason Reason, op string) *Error {
	t.Helper()
	if code == "" {
		if err != nil {
			t.Fatalf("error = %v, want none", err)
		}
		return nil
	}
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error = %v (%T), want an *Error %s/%s", err, err, code, reason)
	}
	if e.Code != code || !reasonMatches(e, reason) || e.Op != op {
		t.Errorf("error = %v: code %q reason %q op %q, want %q %q %q", err, e.Code, e.Reason, e.Op, code, reason, op)
	}
	return e
}

// xchServe accepts connections on ln until the test ends and runs handle
// on each; done is closed when the test ends, so that handlers which hold
// a connection open can return.
func xchServe(t testing.TB, ln net.Listener, handle func(c net.Conn, done <-chan struct{})) string {
	t.Helper()
	done := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	conns := map[net.Conn]bool{}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns[c] = true
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() {
					mu.Lock()
					delete(conns, c)
					mu.Unlock()
					c.Close()
				}()
				handle(c, done)
			}()
		}
	}()
	t.Cleanup(func() {
		close(done)
		ln.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

func xchListen(t testing.TB) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

func xchTCPServer(t testing.TB, handle func(c net.Conn, done <-chan struct{})) string {
	t.Helper()
	return xchServe(t, xchListen(t), handle)
}

// Server behaviours. Those that read "a line" read the request up to '\n'.

func readLine(c net.Conn) (string, error) {
	return bufio.NewReader(c).ReadString('\n')
}

// echoUntilEOF answers only once the client has half-closed.
func echoUntilEOF(c net.Conn, _ <-chan struct{}) {
	b, err := io.ReadAll(c)
	if err != nil {
		return
	}
	c.Write(b)
}

func answerAndClose(c net.Conn, _ <-chan struct{}) {
	line, err := readLine(c)
	if err != nil {
		return
	}
	c.Write([]byte("re: " + line))
}

func answerAndStayOpen(c net.Conn, done <-chan struct{}) {
	line, err := readLine(c)
	if err != nil {
		return
	}
	c.Write([]byte("re: " + line))
	<-done
}

func silent(c net.Conn, done <-chan struct{}) {
	readLine(c)
	<-done
}

func banner(c net.Conn, _ <-chan struct{}) {
	c.Write([]byte("220 ready\r\n"))
}

func sendBytes(n int) func(net.Conn, <-chan struct{}) {
	return func(c net.Conn, _ <-chan struct{}) {
		if _, err := readLine(c); err != nil {
			return
		}
		c.Write(bytes.Repeat([]byte{'x'}, n))
	}
}

// trickle sends a byte every 10 ms until the client goes away.
func trickle(c net.Conn, done <-chan struct{}) {
	if _, err := readLine(c); err != nil {
		return
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, err := c.Write([]byte{'.'}); err != nil {
			return
		}
		select {
		case <-done:
			return
		case <-tick.C:
		}
	}
}

// resetMidReply sends part of a reply, then aborts the connection (RST).
func resetMidReply(c net.Conn, _ <-chan struct{}) {
	if _, err := readLine(c); err != nil {
		return
	}
	c.Write(bytes.Repeat([]byte{'x'}, 100))
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
}

func TestExchangeTCP(t *testing.T) {
	tests := []struct {
		name       string
		handle     func(net.Conn, <-chan struct{})
		req        string
		opts       ExchangeOptions
		ctx        func(t *testing.T) context.Context // nil: t.Context()
		want       string
		wantLen    int // when want is "": the reply length
		wantCode   Code
		wantReason Reason
	}{
		{name: "echo until EOF after half-close", handle: echoUntilEOF, req: "hello\nworld\n",
			opts: ExchangeOptions{HalfClose: true}, want: "hello\nworld\n"},
		{name: "echo until EOF without half-close never answers", handle: echoUntilEOF, req: "hello\n",
			opts: ExchangeOptions{Timeout: 200 * time.Millisecond}, wantCode: CodeTimeout, wantReason: ReasonTimeout},
		{name: "answer and close", handle: answerAndClose, req: "ping\n", want: "re: ping\n"},
		{name: "answer and close after half-close", handle: answerAndClose, req: "ping\n",
			opts: ExchangeOptions{HalfClose: true}, want: "re: ping\n"},
		{name: "answer and stay open: idle cutoff", handle: answerAndStayOpen, req: "ping\n",
			opts: ExchangeOptions{IdleAfterFirstByte: 50 * time.Millisecond}, want: "re: ping\n"},
		{name: "answer and stay open: default idle cutoff", handle: answerAndStayOpen, req: "ping\n", want: "re: ping\n"},
		{name: "empty request reads the banner", handle: banner, want: "220 ready\r\n"},
		{name: "reply at the default cap", handle: sendBytes(DefaultTCPReplyCap), req: "big\n", wantLen: DefaultTCPReplyCap},
		{name: "reply past the default cap", handle: sendBytes(DefaultTCPReplyCap + 1), req: "big\n",
			wantCode: CodeTooLarge, wantReason: ReasonBodyTooLarge},
		{name: "reply at a small cap", handle: sendBytes(1024), req: "big\n", opts: ExchangeOptions{MaxReply: 1024}, wantLen: 1024},
		{name: "reply past a small cap", handle: sendBytes(1025), req: "big\n", opts: ExchangeOptions{MaxReply: 1024},
			wantCode: CodeTooLarge, wantReason: ReasonBodyTooLarge},
		{name: "past the cap while the peer stays open", handle: trickle, req: "go\n",
			opts: ExchangeOptions{MaxReply: 3, IdleAfterFirstByte: time.Minute}, wantCode: CodeTooLarge, wantReason: ReasonBodyTooLarge},
		{name: "silent server", handle: silent, req: "ping\n",
			opts: ExchangeOptions{Timeout: 200 * time.Millisecond}, wantCode: CodeTimeout, wantReason: ReasonTimeout},
		{name: "trickling server never goes idle", handle: trickle, req: "go\n",
			opts: ExchangeOptions{Timeout: 300 * time.Millisecond, IdleAfterFirstByte: time.Minute}, wantCode: CodeTimeout, wantReason: ReasonTimeout},
		{name: "reset mid-reply", handle: resetMidReply, req: "ping\n", wantCode: CodeUpstream, wantReason: ReasonConnect},
		{name: "context deadline before Timeout", handle: silent, req: "ping\n",
			ctx: func(t *testing.T) context.Context {
				ctx, cancel := context.WithTimeout(t.Context(), 150*time.Millisecond)
				t.Cleanup(cancel)
				return ctx
			},
			wantCode: CodeTimeout, wantReason: ReasonTimeout},
		{name: "context canceled mid-read", handle: silent, req: "ping\n",
			ctx: func(t *testing.T) context.Context {
				ctx, cancel := context.WithCancel(t.Context())
				time.AfterFunc(100*time.Millisecond, cancel)
				t.Cleanup(cancel)
				return ctx
			},
			wantCode: CodeTimeout, wantReason: ReasonCanceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			addr := xchTCPServer(t, tt.handle)
			d, audit := xchDialer(t, xchPolicy, nil)
			ctx := t.Context()
			if tt.ctx != nil {
				ctx = tt.ctx(t)
			}
			o := tt.opts
			o.Call.Key = "tenant/instance"
			got, err := d.ExchangeTCP(ctx, addr, []byte(tt.req), &o)
			if e := checkErr(t, err, tt.wantCode, tt.wantReason, "exchange"); e != nil {
				if e.Target != addr || e.Addr.String() != addr {
					t.Errorf("error target %q addr %v, want %q", e.Target, e.Addr, addr)
				}
				if got != nil {
					t.Errorf("reply = %d bytes alongside an error, want nil", len(got))
				}
			} else if tt.want != "" && string(got) != tt.want {
				t.Errorf("reply = %q, want %q", got, tt.want)
			} else if tt.want == "" && len(got) != tt.wantLen {
				t.Errorf("reply = %d bytes, want %d", len(got), tt.wantLen)
			}
			checkOneDecision(t, audit, LaneTCP, true, ReasonException)
			if ds := audit.decisions(); len(ds) == 1 && (ds[0].Key != "tenant/instance" || !ds[0].Exception) {
				t.Errorf("decision key %q exception %v, want the call key and the exception", ds[0].Key, ds[0].Exception)
			}
		})
	}
}

func TestExchangeTCPNoListener(t *testing.T) {
	ln := xchListen(t)
	addr := ln.Addr().String()
	ln.Close()
	d, audit := xchDialer(t, xchPolicy, nil)
	_, err := d.ExchangeTCP(t.Context(), addr, []byte("ping\n"), nil)
	checkErr(t, err, CodeUpstream, ReasonConnect, "dial")
	checkOneDecision(t, audit, LaneTCP, true, ReasonException)
}

func TestExchangeInvalidTarget(t *testing.T) {
	d, audit := xchDialer(t, xchPolicy, nil)
	for _, target := range []string{"127.0.0.1", "127.1:80", "http://127.0.0.1:80/", "127.0.0.1:0", "[::1%lo]:80"} {
		for name, exchange := range map[string]func(context.Context, string, []byte, *ExchangeOptions) ([]byte, error){
			"tcp": d.ExchangeTCP, "tls": d.ExchangeTLS, "udp": d.ExchangeUDP,
		} {
			_, err := exchange(t.Context(), target, nil, nil)
			var e *Error
			if !errors.As(err, &e) || e.Op != "parse" || (e.Code != CodeInvalid && e.Code != CodeDenied) {
				t.Errorf("%s %q: error = %v, want a parse refusal", name, target, err)
			}
		}
	}
	if ds := audit.decisions(); len(ds) != 0 {
		t.Errorf("unparseable targets recorded %d decisions, want 0", len(ds))
	}
}

// TestExchangeDenied checks that denied targets are refused by the policy
// before any socket opens: the error is the checker's (Op "check"), one deny
// decision is recorded, names that need no DNS are not looked up, and live
// loopback servers behind denied targets see no connection and no datagram.
func TestExchangeDenied(t *testing.T) {
	t.Parallel()
	tcpLn := xchListen(t).(*net.TCPListener)
	defer tcpLn.Close()
	udpPC, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer udpPC.Close()
	ports := map[Lane]string{
		LaneTCP: strconv.Itoa(tcpLn.Addr().(*net.TCPAddr).Port),
		LaneTLS: strconv.Itoa(tcpLn.Addr().(*net.TCPAddr).Port),
		LaneUDP: strconv.Itoa(udpPC.LocalAddr().(*net.UDPAddr).Port),
	}
	ipOnlyAllow := Policy{Lanes: Lanes(), Allow: []string{"127.0.0.1"}, Exceptions: []string{"127.0.0.1"}}
	tests := []struct {
		name        string
		policy      Policy
		target      string // PORT is replaced by the live server's port
		hosts       map[string]string
		wantReason  Reason
		wantLookups int32
	}{
		{name: "private", policy: xchPolicy, target: "10.0.0.1:80", wantReason: ReasonPrivate},
		{name: "metadata address", policy: xchPolicy, target: "169.254.169.254:80", wantReason: ReasonMetadata},
		{name: "metadata address even when excepted", policy: Policy{Lanes: Lanes(), Exceptions: []string{"169.254.0.0/16"}},
			target: "169.254.169.254:80", wantReason: ReasonMetadata},
		{name: "metadata name", policy: xchPolicy, target: "metadata.google.internal:80", wantReason: ReasonMetadata},
		{name: "IPv6 loopback not excepted", policy: xchPolicy, target: "[::1]:80", wantReason: ReasonLoopback},
		{name: "loopback without the exception", policy: Policy{Lanes: Lanes()}, target: "127.0.0.1:PORT", wantReason: ReasonLoopback},
		{name: "lane not opened", policy: Policy{Lanes: []Lane{LaneHTTP}, Exceptions: []string{"127.0.0.1"}},
			target: "127.0.0.1:PORT", wantReason: ReasonLane},
		{name: "zero policy", policy: Policy{}, target: "127.0.0.1:PORT", wantReason: ReasonNoPolicy},
		{name: "address not on the allow list", policy: Policy{Lanes: Lanes(), Allow: []string{"127.0.0.2"}, Exceptions: []string{"127.0.0.0/8"}},
			target: "127.0.0.1:PORT", wantReason: ReasonNotAllowed},
		{name: "name under an allow list of IP literals only: no DNS", policy: ipOnlyAllow,
			target: "svc.test:PORT", hosts: map[string]string{"svc.test": "127.0.0.1"}, wantReason: ReasonNotAllowed},
		{name: "name resolving to a private address", policy: xchPolicy,
			target: "svc.test:PORT", hosts: map[string]string{"svc.test": "10.1.2.3"}, wantReason: ReasonPrivate, wantLookups: 1},
		{name: "name with mixed answers", policy: xchPolicy,
			target: "svc.test:PORT", hosts: map[string]string{"svc.test": "127.0.0.1,192.168.1.1"}, wantReason: ReasonDNSMixed, wantLookups: 1},
	}
	type exchangeFunc func(*Dialer, context.Context, string, []byte, *ExchangeOptions) ([]byte, error)
	exchanges := []struct {
		lane Lane
		fn   exchangeFunc
	}{
		{LaneTCP, (*Dialer).ExchangeTCP},
		{LaneTLS, (*Dialer).ExchangeTLS},
		{LaneUDP, (*Dialer).ExchangeUDP},
	}
	for _, tt := range tests {
		for _, x := range exchanges {
			t.Run(tt.name+"/"+string(x.lane), func(t *testing.T) {
				r := xchResolver(tt.hosts)
				d, audit := xchDialer(t, tt.policy, r)
				target := strings.ReplaceAll(tt.target, "PORT", ports[x.lane])
				// A short Timeout, so that a target let through by mistake
				// fails fast rather than waiting for the default.
				got, err := x.fn(d, t.Context(), target, []byte("ping\n"), &ExchangeOptions{Timeout: time.Second})
				if got != nil {
					t.Errorf("reply = %q, want nil", got)
				}
				checkErr(t, err, CodeDenied, tt.wantReason, "check")
				if !IsDenied(err) {
					t.Errorf("IsDenied(%v) = false", err)
				}
				checkOneDecision(t, audit, x.lane, false, tt.wantReason)
				if n := r.lookups.Load(); n != tt.wantLookups {
					t.Errorf("resolver asked %d times, want %d", n, tt.wantLookups)
				}
				// Anything that had reached the live servers would be
				// queued by now; the deadline only bounds the wait.
				tcpLn.SetDeadline(time.Now().Add(20 * time.Millisecond))
				if c, err := tcpLn.Accept(); err == nil {
					c.Close()
					t.Errorf("the TCP server behind %s accepted a connection", target)
				}
				udpPC.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
				if _, _, err := udpPC.ReadFrom(make([]byte, 64)); err == nil {
					t.Errorf("the UDP server behind %s received a datagram", target)
				}
			})
		}
	}

	// Control: the same live servers are reachable once the policy opens
	// them, so the absence checks above can see a connection.
	t.Run("control", func(t *testing.T) {
		d, _ := xchDialer(t, xchPolicy, nil)
		short := &ExchangeOptions{Timeout: 50 * time.Millisecond}
		d.ExchangeTCP(t.Context(), "127.0.0.1:"+ports[LaneTCP], []byte("ping\n"), short)
		tcpLn.SetDeadline(time.Now().Add(time.Second))
		c, err := tcpLn.Accept()
		if err != nil {
			t.Fatalf("allowed exchange left no connection: %v", err)
		}
		c.Close()
		d.ExchangeUDP(t.Context(), "127.0.0.1:"+ports[LaneUDP], []byte("ping\n"), short)
		udpPC.SetReadDeadline(time.Now().Add(time.Second))
		if _, _, err := udpPC.ReadFrom(make([]byte, 64)); err != nil {
			t.Fatalf("allowed exchange sent no datagram: %v", err)
		}
	})
}

// xchCerts is a certificate chain of n certificates (leaf to root
// inclusive, n >= 1) for the given DNS names and 127.0.0.1; n == 1 is a
// self-signed leaf. It returns the server certificate and a pool holding
// the root.
func xchCerts(t testing.TB, n int, names ...string) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	now := time.Now()
	newKey := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	issue := func(tmpl, parent *x509.Certificate, pub, signer any) *x509.Certificate {
		der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, signer)
		if err != nil {
			t.Fatal(err)
		}
		c, err := x509.ParseCertificate(der)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	leafTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "leaf"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     names,
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	leafKey := newKey()
	pool := x509.NewCertPool()
	if n == 1 {
		leaf := issue(leafTmpl, leafTmpl, &leafKey.PublicKey, leafKey)
		pool.AddCert(leaf)
		return tls.Certificate{Certificate: [][]byte{leaf.Raw}, PrivateKey: leafKey, Leaf: leaf}, pool
	}
	// Root, then n-2 intermediates, each signing the next.
	var chain []*x509.Certificate // root first
	parentKey := newKey()
	for i := 0; i < n-1; i++ {
		tmpl := &x509.Certificate{
			SerialNumber:          big.NewInt(int64(i + 2)),
			Subject:               pkix.Name{CommonName: "ca " + strconv.Itoa(i)},
			NotBefore:             now.Add(-time.Hour),
			NotAfter:              now.Add(time.Hour),
			KeyUsage:              x509.KeyUsageCertSign,
			BasicConstraintsValid: true,
			IsCA:                  true,
		}
		if i == 0 {
			chain = append(chain, issue(tmpl, tmpl, &parentKey.PublicKey, parentKey))
			continue
		}
		k := newKey()
		chain = append(chain, issue(tmpl, chain[i-1], &k.PublicKey, parentKey))
		parentKey = k
	}
	leaf := issue(leafTmpl, chain[len(chain)-1], &leafKey.PublicKey, parentKey)
	pool.AddCert(chain[0])
	cert := tls.Certificate{Certificate: [][]byte{leaf.Raw}, PrivateKey: leafKey, Leaf: leaf}
	for i := len(chain) - 1; i >= 1; i-- {
		cert.Certificate = append(cert.Certificate, chain[i].Raw)
	}
	return cert, pool
}

// xchTLSServer serves handle over TLS with cert and records the SNI of
// every ClientHello.
func xchTLSServer(t testing.TB, cert tls.Certificate, handle func(net.Conn, <-chan struct{})) (addr string, snis func() []string) {
	t.Helper()
	var mu sync.Mutex
	var seen []string
	cfg := &tls.Config{
		Certificates: []tls.Certificate{cert},
		GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
			mu.Lock()
			seen = append(seen, h.ServerName)
			mu.Unlock()
			return nil, nil
		},
	}
	addr = xchServe(t, tls.NewListener(xchListen(t), cfg), handle)
	return addr, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), seen...)
	}
}

func TestExchangeTLS(t *testing.T) {
	cert, pool := xchCerts(t, 1, "tls.test")
	chain10, pool10 := xchCerts(t, 10, "tls.test")
	chain11, pool11 := xchCerts(t, 11, "tls.test")
	silentTCP := xchTCPServer(t, silent)
	tests := []struct {
		name       string
		cert       tls.Certificate
		handle     func(net.Conn, <-chan struct{})
		host       string // the target's host; the port is the server's
		addr       string // instead of a TLS server: this address
		req        string
		opts       ExchangeOptions
		want       string
		wantSNI    string
		wantCode   Code
		wantReason Reason
		wantOp     string
		wantErr    any // an error type the *Error must wrap (pointer to it)
	}{
		{name: "by name", cert: cert, handle: answerAndClose, host: "tls.test", req: "ping\n",
			opts: ExchangeOptions{RootCAs: pool}, want: "re: ping\n", wantSNI: "tls.test"},
		{name: "half-close sends close_notify", cert: cert, handle: echoUntilEOF, host: "tls.test", req: "hello\n",
			opts: ExchangeOptions{RootCAs: pool, HalfClose: true}, want: "hello\n", wantSNI: "tls.test"},
		{name: "idle cutoff", cert: cert, handle: answerAndStayOpen, host: "tls.test", req: "ping\n",
			opts: ExchangeOptions{RootCAs: pool, IdleAfterFirstByte: 50 * time.Millisecond}, want: "re: ping\n", wantSNI: "tls.test"},
		{name: "IP literal: no SNI, IP SAN checked", cert: cert, handle: answerAndClose, host: "127.0.0.1", req: "ping\n",
			opts: ExchangeOptions{RootCAs: pool}, want: "re: ping\n", wantSNI: ""},
		{name: "chain of 10", cert: chain10, handle: answerAndClose, host: "tls.test", req: "ping\n",
			opts: ExchangeOptions{RootCAs: pool10}, want: "re: ping\n", wantSNI: "tls.test"},
		{name: "chain of 11", cert: chain11, handle: answerAndClose, host: "tls.test", req: "ping\n",
			opts: ExchangeOptions{RootCAs: pool11}, wantSNI: "tls.test", wantCode: CodeUpstream, wantReason: ReasonTLS, wantOp: "tls"},
		{name: "wrong name", cert: cert, handle: answerAndClose, host: "other.test", req: "ping\n",
			opts: ExchangeOptions{RootCAs: pool}, wantSNI: "other.test",
			wantCode: CodeUpstream, wantReason: ReasonTLS, wantOp: "tls", wantErr: new(x509.HostnameError)},
		{name: "system roots do not hold the test CA", cert: cert, handle: answerAndClose, host: "tls.test", req: "ping\n",
			wantSNI: "tls.test", wantCode: CodeUpstream, wantReason: ReasonTLS, wantOp: "tls", wantErr: new(x509.UnknownAuthorityError)},
		{name: "reply past the cap", cert: cert, handle: sendBytes(2048), host: "tls.test", req: "big\n",
			opts: ExchangeOptions{RootCAs: pool, MaxReply: 2047}, wantSNI: "tls.test", wantCode: CodeTooLarge, wantReason: ReasonBodyTooLarge, wantOp: "exchange"},
		{name: "silent after the handshake", cert: cert, handle: silent, host: "tls.test", req: "ping\n",
			opts: ExchangeOptions{RootCAs: pool, Timeout: 200 * time.Millisecond}, wantSNI: "tls.test", wantCode: CodeTimeout, wantReason: ReasonTimeout, wantOp: "exchange"},
		{name: "no handshake within Timeout", addr: silentTCP, host: "tls.test", req: "ping\n",
			opts: ExchangeOptions{RootCAs: pool, Timeout: 200 * time.Millisecond}, wantCode: CodeTimeout, wantReason: ReasonTimeout, wantOp: "tls"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			addr, snis := tt.addr, func() []string { return nil }
			if addr == "" {
				addr, snis = xchTLSServer(t, tt.cert, tt.handle)
			}
			_, port, _ := net.SplitHostPort(addr)
			r := xchResolver(map[string]string{"tls.test": "127.0.0.1", "other.test": "127.0.0.1"})
			d, audit := xchDialer(t, xchPolicy, r)
			o := tt.opts
			got, err := d.ExchangeTLS(t.Context(), net.JoinHostPort(tt.host, port), []byte(tt.req), &o)
			if e := checkErr(t, err, tt.wantCode, tt.wantReason, tt.wantOp); e != nil {
				if tt.wantErr != nil && !errors.As(err, tt.wantErr) {
					t.Errorf("error %v does not wrap a %T", err, tt.wantErr)
				}
			} else if string(got) != tt.want {
				t.Errorf("reply = %q, want %q", got, tt.want)
			}
			checkOneDecision(t, audit, LaneTLS, true, ReasonException)
			if tt.addr == "" {
				if s := snis(); len(s) != 1 || s[0] != tt.wantSNI {
					t.Errorf("server saw SNI %q, want one ClientHello with %q", s, tt.wantSNI)
				}
			}
		})
	}
}

// xchUDPServer answers every datagram with reply(request), from the
// socket returned by from (nil: the receiving socket) or not at all when
// reply returns nil.
func xchUDPServer(t testing.TB, reply func([]byte) []byte, from net.PacketConn) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if from == nil {
		from = pc
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		buf := make([]byte, 1<<16)
		for {
			n, src, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if out := reply(buf[:n]); out != nil {
				from.WriteTo(out, src)
			}
		}
	}()
	t.Cleanup(func() {
		pc.Close()
		wg.Wait()
	})
	return pc.LocalAddr().String()
}

func TestExchangeUDP(t *testing.T) {
	echo := func(b []byte) []byte { return append([]byte("re: "), b...) }
	other, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	closedPC, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := closedPC.LocalAddr().String()
	closedPC.Close()

	tests := []struct {
		name       string
		reply      func([]byte) []byte
		from       net.PacketConn
		addr       string // instead of a server: this address
		req        string
		opts       ExchangeOptions
		ctx        func(t *testing.T) context.Context
		want       string
		wantCode   Code
		wantReason Reason
		wantOp     string
		noDecision bool // refused before the policy is asked
	}{
		{name: "echo", reply: echo, req: "ping", want: "re: ping"},
		{name: "empty datagrams", reply: func([]byte) []byte { return []byte{} }, req: "", want: ""},
		{name: "reply at a small cap", reply: echo, req: "123456", opts: ExchangeOptions{MaxReply: 10}, want: "re: 123456"},
		{name: "reply past a small cap", reply: echo, req: "1234567", opts: ExchangeOptions{MaxReply: 10},
			wantCode: CodeTooLarge, wantReason: ReasonBodyTooLarge, wantOp: "exchange"},
		{name: "largest reply", reply: func([]byte) []byte { return make([]byte, 65507) }, req: "big", opts: ExchangeOptions{MaxReply: 1 << 30},
			want: string(make([]byte, 65507))},
		{name: "request larger than any datagram", reply: echo, req: strings.Repeat("x", 65536),
			wantCode: CodeInvalid, wantReason: ReasonMalformed, wantOp: "exchange", noDecision: true},
		{name: "request larger than an IPv4 datagram", reply: echo, req: strings.Repeat("x", 65508),
			wantCode: CodeInvalid, wantReason: ReasonMalformed, wantOp: "exchange"},
		// The connected socket never delivers the reply from another port:
		// the exchange times out rather than accept it.
		{name: "reply from another port", reply: echo, from: other, req: "ping", opts: ExchangeOptions{Timeout: 200 * time.Millisecond},
			wantCode: CodeTimeout, wantReason: ReasonTimeout, wantOp: "exchange"},
		{name: "silent server", reply: func([]byte) []byte { return nil }, req: "ping", opts: ExchangeOptions{Timeout: 200 * time.Millisecond},
			wantCode: CodeTimeout, wantReason: ReasonTimeout, wantOp: "exchange"},
		{name: "context canceled", reply: func([]byte) []byte { return nil }, req: "ping",
			ctx: func(t *testing.T) context.Context {
				ctx, cancel := context.WithCancel(t.Context())
				time.AfterFunc(100*time.Millisecond, cancel)
				t.Cleanup(cancel)
				return ctx
			},
			wantCode: CodeTimeout, wantReason: ReasonCanceled, wantOp: "exchange"},
		{name: "port unreachable", addr: closedAddr, req: "ping", opts: ExchangeOptions{Timeout: 2 * time.Second},
			wantCode: CodeUpstream, wantReason: ReasonConnect, wantOp: "exchange"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			addr := tt.addr
			if addr == "" {
				addr = xchUDPServer(t, tt.reply, tt.from)
			}
			d, audit := xchDialer(t, xchPolicy, nil)
			ctx := t.Context()
			if tt.ctx != nil {
				ctx = tt.ctx(t)
			}
			o := tt.opts
			got, err := d.ExchangeUDP(ctx, addr, []byte(tt.req), &o)
			if checkErr(t, err, tt.wantCode, tt.wantReason, tt.wantOp) == nil && string(got) != tt.want {
				t.Errorf("reply = %q, want %q", got, tt.want)
			}
			if tt.noDecision {
				if ds := audit.decisions(); len(ds) != 0 {
					t.Errorf("invalid request recorded %d decisions, want 0", len(ds))
				}
				return
			}
			checkOneDecision(t, audit, LaneUDP, true, ReasonException)
		})
	}
}

func TestExchangeUDPRefusesProxy(t *testing.T) {
	d, audit := xchDialer(t, xchPolicy, nil)
	o := &ExchangeOptions{Call: Call{Proxy: "corp"}}
	_, err := d.ExchangeUDP(t.Context(), "127.0.0.1:53", []byte("x"), o)
	checkErr(t, err, CodeInvalid, ReasonProxy, "exchange")
	if ds := audit.decisions(); len(ds) != 0 {
		t.Errorf("recorded %d decisions, want 0", len(ds))
	}
}

// TestExchangeUDPReplySource drives the source check directly, on an
// unconnected socket that, unlike the connected socket of ExchangeUDP,
// receives datagrams from anyone.
func TestExchangeUDPReplySource(t *testing.T) {
	listen := func() *net.UDPConn {
		c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	tests := []struct {
		name       string
		send       [][2]string // sender ("peer" or "spoofer"), payload, in order
		max        int64
		want       string
		wantCode   Code
		wantReason Reason
	}{
		{name: "peer", send: [][2]string{{"peer", "real"}}, max: 100, want: "real"},
		{name: "spoofed then peer", send: [][2]string{{"spoofer", "fake"}, {"spoofer", "fake"}, {"peer", "real"}}, max: 100, want: "real"},
		{name: "only spoofed", send: [][2]string{{"spoofer", "fake"}}, max: 100, wantCode: CodeUpstream, wantReason: ReasonReplySource},
		{name: "nothing", max: 100, wantCode: CodeTimeout, wantReason: ReasonTimeout},
		{name: "spoofed oversize is discarded, not an error", send: [][2]string{{"spoofer", "far too long"}, {"peer", "ok"}}, max: 4, want: "ok"},
		{name: "peer oversize", send: [][2]string{{"peer", "far too long"}}, max: 4, wantCode: CodeTooLarge, wantReason: ReasonBodyTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			recv, peer, spoofer := listen(), listen(), listen()
			for _, s := range tt.send {
				from := peer
				if s[0] == "spoofer" {
					from = spoofer
				}
				if _, err := from.WriteTo([]byte(s[1]), recv.LocalAddr()); err != nil {
					t.Fatal(err)
				}
			}
			ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
			defer cancel()
			dl, _ := ctx.Deadline()
			recv.SetReadDeadline(dl)
			x := exchange{ctx: ctx, target: "peer", peer: peer.LocalAddr().(*net.UDPAddr).AddrPort()}
			got, err := x.readDatagram(recv, tt.max)
			if checkErr(t, err, tt.wantCode, tt.wantReason, "exchange") == nil && string(got) != tt.want {
				t.Errorf("reply = %q, want %q", got, tt.want)
			}
		})
	}
}

func BenchmarkExchangeTCP(b *testing.B) {
	addr := xchTCPServer(b, func(c net.Conn, _ <-chan struct{}) {
		line, err := readLine(c)
		if err != nil {
			return
		}
		c.Write([]byte(line))
	})
	d, _ := xchDialer(b, xchPolicy, nil)
	req := []byte(strings.Repeat("x", 63) + "\n")
	b.ReportAllocs()
	for b.Loop() {
		got, err := d.ExchangeTCP(b.Context(), addr, req, nil)
		if err != nil || len(got) != len(req) {
			b.Fatalf("reply %d bytes, error %v", len(got), err)
		}
	}
}

func BenchmarkExchangeUDP(b *testing.B) {
	addr := xchUDPServer(b, func(p []byte) []byte { return p }, nil)
	d, _ := xchDialer(b, xchPolicy, nil)
	req := []byte(strings.Repeat("x", 64))
	b.ReportAllocs()
	for b.Loop() {
		got, err := d.ExchangeUDP(b.Context(), addr, req, nil)
		if err != nil || len(got) != len(req) {
			b.Fatalf("reply %d bytes, error %v", len(got), err)
		}
	}
}
