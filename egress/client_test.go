package egress

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockhq/airlock/egress/egresstest"
)

// Test fixtures for the guarded client. Every server listens on loopback;
// "public" origins are 127.0.0.1, made reachable by a floor exception.

// exceptLocal is the exception that makes 127.0.0.1 a public origin.
var exceptLocal = []string{"127.0.0.1"}

// auditLog records every Decision.
type auditLog struct {
	mu sync.Mutex
	ds []Decision
}

func (a *auditLog) Audit(d Decision) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.ds = append(a.ds, d)
}

func (a *auditLog) all() []Decision {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.ds)
}

func (a *auditLog) reset() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.ds = nil
}

// mustAddrs parses address literals.
func mustAddrs(ss ...string) []netip.Addr {
	out := make([]netip.Addr, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParseAddr(s)
	}
	return out
}

// staticDialer returns a Dialer for the http lane with the given floor
// exceptions, answering names from hosts and never sending DNS.
func staticDialer(t testing.TB, hosts map[string][]netip.Addr, exceptions ...string) (*Dialer, *auditLog) {
	t.Helper()
	chk, err := Policy{Lanes: Lanes(), Exceptions: exceptions}.Compile()
	if err != nil {
		t.Fatal(err)
	}
	audit := &auditLog{}
	return &Dialer{Policy: chk, Resolver: &StaticResolver{Hosts: hosts}, Auditor: audit}, audit
}

// newTestClient returns a client whose pooled connections are closed when
// the test ends.
func newTestClient(t testing.TB, d *Dialer, roots *x509.CertPool) *Client {
	c := &Client{Dialer: d, RootCAs: roots, Timeout: 10 * time.Second}
	t.Cleanup(c.CloseIdleConnections)
	return c
}

// serverCounts counts what a test server saw.
type serverCounts struct {
	conns atomic.Int64 // connections accepted
	reqs  atomic.Int64 // requests handled
}

// Server modes for startServer.
const (
	modeHTTP  = "http"  // plain HTTP/1.1
	modeHTTPS = "https" // TLS, HTTP/1.1 only
	modeH2    = "h2"    // TLS offering h2
)

// startServer starts an httptest server on 127.0.0.1 in mode and counts
// its connections and requests. The pool holds its certificate, which is
// valid for example.com, 127.0.0.1 and ::1.
func startServer(t testing.TB, mode string, h http.Handler) (*httptest.Server, *serverCounts, *x509.CertPool) {
	t.Helper()
	n := &serverCounts{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.reqs.Add(1)
		h.ServeHTTP(w, r)
	}))
	srv.Config.ErrorLog = log.New(testLogWriter{t}, "server: ", 0)
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			n.conns.Add(1)
		}
	}
	var pool *x509.CertPool
	switch mode {
	case modeHTTP:
		srv.Start()
	case modeHTTPS, modeH2:
		srv.EnableHTTP2 = mode == modeH2
		srv.StartTLS()
		pool = x509.NewCertPool()
		pool.AddCert(srv.Certificate())
	default:
		t.Fatalf("unknown server mode %q", mode)
	}
	t.Cleanup(srv.Close)
	return srv, n, pool
}

// testLogWriter sends a server's error log (TLS handshakes the client
// aborted on purpose, for one) to the test log.
type testLogWriter struct{ t testing.TB }

func (w testLogWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

func serverPort(t testing.TB, srv *httptest.Server) int {
	t.Helper()
	return srv.Listener.Addr().(*net.TCPAddr).Port
}

// startSink starts a connection-counting sink at addr and checks that it
// counts, with one connection of the test's own, so that a count of 1 at
// the end proves nothing else reached it.
func startSink(t *testing.T, addr string) *egresstest.Sink {
	t.Helper()
	s, err := egresstest.StartSink(addr)
	if err != nil {
		t.Fatalf("%v (the redirect harness needs loopback %s)", err, addr)
	}
	t.Cleanup(func() { s.Close() })
	c, err := net.DialTimeout("tcp", s.Addr(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	for deadline := time.Now().Add(5 * time.Second); s.Accepted() != 1; {
		if time.Now().After(deadline) {
			t.Fatalf("sink %s accepted %d connections, want 1", s.Addr(), s.Accepted())
		}
		time.Sleep(5 * time.Millisecond)
	}
	return s
}

// wantError fails unless err is an *Error with code and reason, and
// returns it.
func wantError(t testing.TB, err error, code Code, reason Reason) *Error {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error = %v (%T), want *Error %s (%s)", err, err, code, reason)
	}
	if e.Code != code || !reasonMatches(e, reason) {
		t.Errorf("error = %s (%s), want %s (%s); %v", e.Code, e.Reason, code, reason, e)
	}
	return e
}

// reasonMatches reports whether e has reason want, or is the folded
// internal_address refusal of a name whose answer's class is want.
func reasonMatches(e *Error, want Reason) bool {
	if e.Reason == want {
		return true
	}
	return e.Reason == ReasonInternalAddress && e.Class == want && e.Name != ""
}

// fetchAll does the request and reads the whole body.
func fetchAll(t testing.TB, c *Client, r *Request) (*Response, string) {
	t.Helper()
	resp, err := c.Do(context.Background(), r)
	if err != nil {
		t.Fatalf("Do(%s): %v", r.URL, err)
	}
	b, err := ReadAll(resp)
	if err != nil {
		t.Fatalf("read %s: %v", r.URL, err)
	}
	return resp, string(b)
}

// echoHandler answers with what the request looked like from the server.
func echoHandler(w http.ResponseWriter, r *http.Request) {
	sni := ""
	if r.TLS != nil {
		sni = r.TLS.ServerName
	}
	body, _ := io.ReadAll(r.Body)
	fmt.Fprintf(w, "proto=%s\nmethod=%s\nhost=%s\nsni=%s\nua=%s\npath=%s\nbody=%s\nctype=%s\nauth=%s\ncookie=%s\ncustom=%s\n",
		r.Proto, r.Method, r.Host, sni, r.UserAgent(), r.URL.RequestURI(), body,
		r.Header.Get("Content-Type"), r.Header.Get("Authorization"), r.Header.Get("Cookie"), r.Header.Get("X-Custom"))
}

// echoField returns the value of key in an echoHandler answer.
func echoField(body, key string) string {
	for line := range strings.SplitSeq(body, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && k == key {
			return v
		}
	}
	return "<missing " + key + ">"
}

var addrLocal = netip.MustParseAddr("127.0.0.1")

func TestClientFetch(t *testing.T) {
	tests := []struct {
		mode      string
		profile   TLSProfile
		wantProto string
	}{
		{modeHTTP, ProfileGo, "HTTP/1.1"},
		{modeHTTP, ProfileChrome, "HTTP/1.1"},
		{modeHTTPS, ProfileGo, "HTTP/1.1"},
		{modeHTTPS, ProfileChrome, "HTTP/1.1"},
		{modeH2, ProfileGo, "HTTP/2.0"},
		{modeH2, ProfileChrome, "HTTP/2.0"},
	}
	for _, tt := range tests {
		t.Run(tt.mode+"/"+string(tt.profile), func(t *testing.T) {
			srv, _, pool := startServer(t, tt.mode, http.HandlerFunc(echoHandler))
			port := serverPort(t, srv)
			d, audit := staticDialer(t, map[string][]netip.Addr{"example.com": {addrLocal}}, exceptLocal...)
			c := newTestClient(t, d, pool)
			c.Profile = tt.profile
			scheme := "https"
			if tt.mode == modeHTTP {
				scheme = "http"
			}
			raw := fmt.Sprintf("%s://EXAMPLE.com:%d/a/b?q=1#frag", scheme, port)
			resp, body := fetchAll(t, c, &Request{URL: raw})

			if resp.StatusCode != http.StatusOK {
				t.Errorf("status = %d, want 200", resp.StatusCode)
			}
			if resp.Proto != tt.wantProto || echoField(body, "proto") != tt.wantProto {
				t.Errorf("proto = %s (server saw %s), want %s", resp.Proto, echoField(body, "proto"), tt.wantProto)
			}
			wantHost := "example.com:" + strconv.Itoa(port)
			if got := echoField(body, "host"); got != wantHost {
				t.Errorf("Host header = %q, want %q", got, wantHost)
			}
			if got := echoField(body, "path"); got != "/a/b?q=1" {
				t.Errorf("path = %q, want /a/b?q=1", got)
			}
			wantSNI := ""
			if scheme == "https" {
				wantSNI = "example.com"
			}
			if got := echoField(body, "sni"); got != wantSNI {
				t.Errorf("SNI = %q, want %q", got, wantSNI)
			}
			wantUA := goUserAgent
			if tt.profile == ProfileChrome {
				wantUA = chromeUserAgent
			}
			if got := echoField(body, "ua"); got != wantUA {
				t.Errorf("User-Agent = %q, want %q", got, wantUA)
			}
			if want := netip.AddrPortFrom(addrLocal, uint16(port)); resp.Addr != want {
				t.Errorf("Addr = %v, want %v", resp.Addr, want)
			}
			if resp.URL.Host != "example.com" || len(resp.Redirects) != 0 {
				t.Errorf("URL = %v, Redirects = %v", resp.URL, resp.Redirects)
			}
			ds := audit.all()
			if len(ds) != 1 || !ds[0].Allow || !ds[0].Exception || !slices.Equal(ds[0].Addrs, []netip.Addr{addrLocal}) {
				t.Errorf("decisions = %+v, want one allow by exception with Addrs [127.0.0.1]", ds)
			}
		})
	}
}

func TestClientTLSName(t *testing.T) {
	for _, mode := range []string{modeHTTPS, modeH2} {
		for _, profile := range []TLSProfile{ProfileGo, ProfileChrome} {
			t.Run(mode+"/"+string(profile), func(t *testing.T) {
				srv, n, pool := startServer(t, mode, http.HandlerFunc(echoHandler))
				port := serverPort(t, srv)
				d, _ := staticDialer(t, map[string][]netip.Addr{
					"example.com": {addrLocal},
					"wrong.test":  {addrLocal},
				}, exceptLocal...)
				c := newTestClient(t, d, pool)
				c.Profile = profile

				// The certificate is for example.com, dialled at 127.0.0.1.
				_, body := fetchAll(t, c, &Request{URL: fmt.Sprintf("https://example.com:%d/", port)})
				if got := echoField(body, "sni"); got != "example.com" {
					t.Errorf("SNI = %q, want example.com", got)
				}
				// The same address under a name the certificate does not
				// carry fails the handshake.
				_, err := c.Get(context.Background(), fmt.Sprintf("https://wrong.test:%d/", port))
				e := wantError(t, err, CodeUpstream, ReasonTLS)
				var he x509.HostnameError
				if !errors.As(err, &he) {
					t.Errorf("error %v does not wrap an x509.HostnameError", e)
				}
				if n.reqs.Load() != 1 {
					t.Errorf("server handled %d requests, want 1", n.reqs.Load())
				}
			})
		}
	}
}

// TestClientRedirectHarness redirects from an allowed origin to every
// denied class, with every redirect status and absolute, scheme-relative
// and relative Locations. Each must stop at hop 1 before any socket opens:
// the loopback targets have counting sinks behind them, and no allow
// decision may be recorded for the hop.
func TestClientRedirectHarness(t *testing.T) {
	srv, counts, _ := startServer(t, modeHTTP, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/ok" {
			io.WriteString(w, "ok")
			return
		}
		code, _ := strconv.Atoi(r.URL.Query().Get("code"))
		egresstest.Redirect(code, r.URL.Query().Get("loc")).ServeHTTP(w, r)
	}))
	port := serverPort(t, srv)
	// Where the denied loopback targets lead: 127.0.0.2 and ::1 are not
	// excepted; sink1 sits on the excepted 127.0.0.1, which only a
	// liberal parser (0x7f.1, 2130706433, ::ffff:127.0.0.1, 0.0.0.0)
	// would reach.
	sink1 := startSink(t, "127.0.0.1:0")
	sink2 := startSink(t, "127.0.0.2:0")
	sink6 := startSink(t, "[::1]:0")
	sinks := []*egresstest.Sink{sink1, sink2, sink6}
	ports := strings.NewReplacer(
		"{p1}", strconv.Itoa(sink1.Port()),
		"{p2}", strconv.Itoa(sink2.Port()),
		"{p6}", strconv.Itoa(sink6.Port()),
	)

	d, audit := staticDialer(t, map[string][]netip.Addr{
		"internal.test": mustAddrs("10.1.2.3"),
		"evil.test":     mustAddrs("127.0.0.2"),
		"localhost":     mustAddrs("127.0.0.1", "::1"),
	}, exceptLocal...)
	c := newTestClient(t, d, nil)
	c.Timeout = 5 * time.Second // a wrongly allowed hop hangs on a sink: fail fast

	targets := []struct {
		name   string
		loc    string
		reason Reason
	}{
		{"loopback not excepted", "http://127.0.0.2:{p2}/", ReasonLoopback},
		{"loopback https", "https://127.0.0.2:{p2}/", ReasonLoopback},
		{"ipv6 loopback", "http://[::1]:{p6}/", ReasonLoopback},
		{"private 10/8", "http://10.0.0.1/", ReasonPrivate},
		{"private 172.16/12", "http://172.16.0.1/", ReasonPrivate},
		{"private 192.168/16", "http://192.168.1.1:8080/", ReasonPrivate},
		{"cgnat", "http://100.64.0.1/", ReasonCGNAT},
		{"link-local", "http://169.254.1.1/", ReasonLinkLocal},
		{"metadata", "http://169.254.169.254/latest/meta-data/", ReasonMetadata},
		{"metadata ipv6", "http://[fd00:ec2::254]/", ReasonMetadata},
		{"metadata name", "http://metadata.google.internal/computeMetadata/v1/", ReasonMetadata},
		{"unspecified", "http://0.0.0.0:{p1}/", ReasonUnspecified},
		{"ipv6 unspecified", "http://[::]:{p1}/", ReasonUnspecified},
		{"v4-mapped excepted address", "http://[::ffff:127.0.0.1]:{p1}/", ReasonIPv4Embedded},
		{"nat64 excepted address", "http://[64:ff9b::7f00:1]:{p1}/", ReasonIPv4Embedded},
		{"hex dotted", "http://0x7f.1:{p1}/", ReasonNumericHost},
		{"decimal integer", "http://2130706433:{p1}/", ReasonNumericHost},
		{"octal", "http://0177.0.0.1:{p1}/", ReasonNumericHost},
		{"short form", "http://127.1:{p1}/", ReasonNumericHost},
		{"fullwidth digits", "http://１２７.0.0.2:{p2}/", ReasonNumericHost},
		{"name to private", "http://internal.test/", ReasonPrivate},
		{"name to loopback", "http://evil.test:{p2}/", ReasonLoopback},
		{"localhost loopback pair", "http://localhost:{p1}/", ReasonDNSMixed},
		{"userinfo excepted address", "http://user@127.0.0.1:{p1}/", ReasonUserinfo},
		{"userinfo name", "http://user:pass@evil.test:{p2}/", ReasonUserinfo},
		{"userinfo lookalike", "http://127.0.0.1:{p1}@127.0.0.2:{p2}/", ReasonUserinfo},
		{"zone id", "http://[fe80::1%25lo]:{p1}/", ReasonParseAmbiguous},
		{"percent-encoded host", "http://%31%32%37.0.0.2:{p2}/", ReasonParseAmbiguous},
		{"scheme without slashes", "http:127.0.0.2:{p2}/", ReasonParseAmbiguous},
		{"tab in host", "http://127.0.0.2\t:{p2}/", ReasonParseAmbiguous},
		{"gopher", "gopher://127.0.0.2:{p2}/_", ReasonScheme},
		{"file", "file:///etc/passwd", ReasonScheme},
		{"scheme-relative loopback", "//127.0.0.2:{p2}/", ReasonLoopback},
		{"scheme-relative ipv6", "//[::1]:{p6}/x", ReasonLoopback},
		{"scheme-relative private", "//10.0.0.1/x", ReasonPrivate},
		{"scheme-relative metadata", "//169.254.169.254/", ReasonMetadata},
		{"scheme-relative name", "//evil.test:{p2}", ReasonLoopback},
		{"scheme-relative userinfo", "//user@127.0.0.1:{p1}/", ReasonUserinfo},
		{"scheme-relative numeric", "//2130706433:{p1}/", ReasonNumericHost},
		{"relative backslash", "/\\127.0.0.2:{p2}/", ReasonParseAmbiguous},
		{"relative backslashes", "\\\\127.0.0.2:{p2}\\", ReasonParseAmbiguous},
	}
	codes := []int{301, 302, 303, 307, 308}
	for _, tt := range targets {
		for _, code := range codes {
			t.Run(fmt.Sprintf("%s/%d", tt.name, code), func(t *testing.T) {
				audit.reset()
				loc := ports.Replace(tt.loc)
				raw := fmt.Sprintf("http://127.0.0.1:%d/r?code=%d&loc=%s", port, code, url.QueryEscape(loc))
				_, err := c.Do(context.Background(), &Request{Method: http.MethodPost, URL: raw, Body: []byte("x")})
				e := wantError(t, err, CodeDenied, tt.reason)
				if !IsDenied(err) {
					t.Errorf("IsDenied(%v) = false", err)
				}
				if e.Hop != 1 {
					t.Errorf("Hop = %d, want 1", e.Hop)
				}
				if e.Op == "dial" {
					t.Errorf("refused at dial time, want before: %v", e)
				}
				for _, d := range audit.all() {
					if d.Hop >= 1 && d.Allow {
						t.Errorf("hop %d allowed: %+v", d.Hop, d)
					}
				}
			})
		}
	}
	// And a relative Location on the allowed origin is followed.
	t.Run("relative allowed", func(t *testing.T) {
		raw := fmt.Sprintf("http://127.0.0.1:%d/r?code=302&loc=%s", port, url.QueryEscape("ok?x=1"))
		resp, body := fetchAll(t, c, &Request{URL: raw})
		if body != "ok" || resp.URL.URL.Path != "/ok" || len(resp.Redirects) != 1 {
			t.Errorf("body %q, URL %v, redirects %v", body, resp.URL, resp.Redirects)
		}
	})
	for _, s := range sinks {
		if got := s.Accepted(); got != 1 {
			t.Errorf("sink %s accepted %d connections, want only the test's own", s.Addr(), got)
		}
	}
	if got := counts.conns.Load(); got != 1 {
		t.Errorf("origin accepted %d connections, want 1 (kept alive across the harness)", got)
	}
}

func TestClientRedirectMethod(t *testing.T) {
	srv, _, _ := startServer(t, modeHTTP, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if code, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/start/")); err == nil {
			w.Header().Set("Location", "/echo")
			w.WriteHeader(code)
			io.WriteString(w, "redirect body")
			return
		}
		echoHandler(w, r)
	}))
	port := serverPort(t, srv)
	d, _ := staticDialer(t, nil, exceptLocal...)
	c := newTestClient(t, d, nil)
	tests := []struct {
		method     string
		code       int
		wantMethod string
		wantBody   string
		wantCType  string
	}{
		{"POST", 301, "GET", "", ""},
		{"POST", 302, "GET", "", ""},
		{"POST", 303, "GET", "", ""},
		{"POST", 307, "POST", "payload", "text/plain"},
		{"POST", 308, "POST", "payload", "text/plain"},
		{"PUT", 307, "PUT", "payload", "text/plain"},
		{"PUT", 303, "GET", "", ""},
		{"HEAD", 303, "HEAD", "", ""},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s %d", tt.method, tt.code), func(t *testing.T) {
			var body []byte
			if tt.method != "HEAD" {
				body = []byte("payload")
			}
			start := fmt.Sprintf("http://127.0.0.1:%d/start/%d", port, tt.code)
			resp, got := fetchAll(t, c, &Request{
				Method: tt.method,
				URL:    start,
				Header: http.Header{"Content-Type": {"text/plain"}},
				Body:   body,
			})
			if tt.method == "HEAD" {
				if got != "" || resp.StatusCode != 200 {
					t.Errorf("HEAD answered %d with body %q", resp.StatusCode, got)
				}
				return
			}
			if m := echoField(got, "method"); m != tt.wantMethod {
				t.Errorf("method after %d = %s, want %s", tt.code, m, tt.wantMethod)
			}
			if b := echoField(got, "body"); b != tt.wantBody {
				t.Errorf("body after %d = %q, want %q", tt.code, b, tt.wantBody)
			}
			if ct := echoField(got, "ctype"); ct != tt.wantCType {
				t.Errorf("Content-Type after %d = %q, want %q", tt.code, ct, tt.wantCType)
			}
			if !slices.Equal(resp.Redirects, []string{start}) || resp.URL.URL.Path != "/echo" {
				t.Errorf("Redirects = %v, URL = %v", resp.Redirects, resp.URL)
			}
		})
	}
}

// dualOrigin serves one handler over plain HTTP and over TLS on the same
// port, telling them apart by the first byte, so that a redirect can change
// the scheme alone.
func dualOrigin(t *testing.T, h http.Handler) (port int, roots *x509.CertPool) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	plainL := newChanListener(ln.Addr())
	tlsL := newChanListener(ln.Addr())
	plain := httptest.NewUnstartedServer(h)
	plain.Listener.Close()
	plain.Listener = plainL
	plain.Start()
	secure := httptest.NewUnstartedServer(h)
	secure.Listener.Close()
	secure.Listener = tlsL
	secure.StartTLS()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			br := bufio.NewReader(c)
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			first, err := br.Peek(1)
			c.SetReadDeadline(time.Time{})
			if err != nil {
				c.Close()
				continue
			}
			to := plainL
			if first[0] == 0x16 { // a TLS handshake record
				to = tlsL
			}
			if !to.put(&peekedConn{Conn: c, r: br}) {
				c.Close()
			}
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
		plain.Close()
		secure.Close()
	})
	roots = x509.NewCertPool()
	roots.AddCert(secure.Certificate())
	return ln.Addr().(*net.TCPAddr).Port, roots
}

type peekedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *peekedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// chanListener is a net.Listener fed by put.
type chanListener struct {
	addr   net.Addr
	ch     chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func newChanListener(addr net.Addr) *chanListener {
	return &chanListener{addr: addr, ch: make(chan net.Conn), closed: make(chan struct{})}
}

func (l *chanListener) put(c net.Conn) bool {
	select {
	case l.ch <- c:
		return true
	case <-l.closed:
		return false
	}
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *chanListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *chanListener) Addr() net.Addr { return l.addr }

func TestClientRedirectCredentials(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if loc := r.URL.Query().Get("to"); loc != "" {
			egresstest.Redirect(http.StatusFound, loc).ServeHTTP(w, r)
			return
		}
		echoHandler(w, r)
	})
	portA, roots := dualOrigin(t, h)
	srvB, _, _ := startServer(t, modeHTTP, h)
	portB := serverPort(t, srvB)
	d, _ := staticDialer(t, map[string][]netip.Addr{"example.com": {addrLocal}}, exceptLocal...)
	c := newTestClient(t, d, roots)

	a := fmt.Sprintf("http://127.0.0.1:%d", portA)
	tests := []struct {
		name string
		from string
		to   string
		keep bool
	}{
		{"same origin", a, a + "/echo", true},
		{"same origin relative", a, "/echo", true},
		{"same origin absolute", a, fmt.Sprintf("http://127.0.0.1:%d/echo?x", portA), true},
		{"https same origin", fmt.Sprintf("https://example.com:%d", portA), "/echo", true},
		{"other port", a, fmt.Sprintf("http://127.0.0.1:%d/echo", portB), false},
		{"other host same address and port", a, fmt.Sprintf("http://example.com:%d/echo", portA), false},
		{"https to http only", fmt.Sprintf("https://example.com:%d", portA), fmt.Sprintf("http://example.com:%d/echo", portA), false},
		{"http to https only", fmt.Sprintf("http://example.com:%d", portA), fmt.Sprintf("https://example.com:%d/echo", portA), false},
		{"scheme-relative other host", a, fmt.Sprintf("//example.com:%d/echo", portA), false},
	}
	headerSets := map[string]http.Header{
		"canonical keys": {
			"Authorization": {"Bearer secret"},
			"Cookie":        {"session=secret"},
			"X-Custom":      {"kept"},
		},
		// A caller's map may hold keys in any case; they must be dropped
		// all the same.
		"lowercase keys": {
			"authorization": {"Bearer secret"},
			"cookie":        {"session=secret"},
			"x-custom":      {"kept"},
		},
	}
	for _, tt := range tests {
		for hname, header := range headerSets {
			t.Run(tt.name+"/"+hname, func(t *testing.T) {
				_, body := fetchAll(t, c, &Request{
					URL:    tt.from + "/start?to=" + url.QueryEscape(tt.to),
					Header: header,
				})
				auth, cookie := echoField(body, "auth"), echoField(body, "cookie")
				if tt.keep && (auth != "Bearer secret" || cookie != "session=secret") {
					t.Errorf("same-origin redirect dropped credentials: Authorization %q, Cookie %q", auth, cookie)
				}
				if !tt.keep && (auth != "" || cookie != "") {
					t.Errorf("cross-origin redirect kept credentials: Authorization %q, Cookie %q", auth, cookie)
				}
				if got := echoField(body, "custom"); got != "kept" {
					t.Errorf("X-Custom = %q, want kept", got)
				}
			})
		}
	}
	// Proxy-Authorization never gets as far as a redirect: callers may not
	// set it.
	_, err := c.Do(context.Background(), &Request{URL: a + "/", Header: http.Header{"Proxy-Authorization": {"Basic eDp5"}}})
	wantError(t, err, CodeDenied, ReasonHeaderFloor)
}

// chainTo redirects /N to /N+1 until N reaches stop, then answers 200.
func chainTo(stop int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/"))
		if n >= stop {
			fmt.Fprintf(w, "arrived at %d", n)
			return
		}
		w.Header().Set("Location", "/"+strconv.Itoa(n+1))
		w.WriteHeader(http.StatusFound)
	})
}

func TestClientRedirectLimit(t *testing.T) {
	ints := func(n int) *int { return &n }
	tests := []struct {
		name      string
		h         http.Handler
		client    int  // Client.MaxRedirects
		request   *int // Request.MaxRedirects
		wantReqs  int64
		wantErr   bool
		wantHop   int
		wantFinal int // status of the answer when no error
	}{
		{"infinite chain default", egresstest.RedirectChain(http.StatusFound), 0, nil, 6, true, 6, 0},
		{"infinite chain 308", egresstest.RedirectChain(http.StatusPermanentRedirect), 0, nil, 6, true, 6, 0},
		{"loop default", egresstest.RedirectLoop(http.StatusMovedPermanently), 0, nil, 6, true, 6, 0},
		{"exactly five", chainTo(5), 0, nil, 6, false, 0, 200},
		{"client limit 2", egresstest.RedirectChain(http.StatusFound), 2, nil, 3, true, 3, 0},
		{"client limit 10", egresstest.RedirectChain(http.StatusTemporaryRedirect), 10, nil, 11, true, 11, 0},
		{"request limit 1 over client 10", egresstest.RedirectChain(http.StatusFound), 10, ints(1), 2, true, 2, 0},
		{"request limit 0", egresstest.RedirectChain(http.StatusFound), 0, ints(0), 1, true, 1, 0},
		{"request limit 8 loop", egresstest.RedirectLoop(http.StatusSeeOther), 0, ints(8), 9, true, 9, 0},
		{"not followed", egresstest.RedirectChain(http.StatusFound), -1, nil, 1, false, 0, 302},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, counts, _ := startServer(t, modeHTTP, tt.h)
			d, _ := staticDialer(t, nil, exceptLocal...)
			c := newTestClient(t, d, nil)
			c.MaxRedirects = tt.client
			resp, err := c.Do(context.Background(), &Request{URL: srv.URL + "/", MaxRedirects: tt.request})
			if tt.wantErr {
				e := wantError(t, err, CodeUpstream, ReasonRedirectLimit)
				if !errors.Is(err, ErrRedirectLimit) {
					t.Errorf("errors.Is(%v, ErrRedirectLimit) = false", err)
				}
				if e.Hop != tt.wantHop {
					t.Errorf("Hop = %d, want %d", e.Hop, tt.wantHop)
				}
			} else {
				if err != nil {
					t.Fatal(err)
				}
				ReadAll(resp)
				if resp.StatusCode != tt.wantFinal {
					t.Errorf("status = %d, want %d", resp.StatusCode, tt.wantFinal)
				}
			}
			if got := counts.reqs.Load(); got != tt.wantReqs {
				t.Errorf("server handled %d requests, want %d", got, tt.wantReqs)
			}
		})
	}
}

func TestClientHostileBodies(t *testing.T) {
	t.Parallel()
	random := make([]byte, 256<<10)
	for i := range random {
		random[i] = byte(i*7919 ^ i>>5*31)
	}
	tests := []struct {
		name       string
		h          http.Handler
		maxWire    int64
		maxDecoded int64
		reason     Reason
	}{
		{"gzip bomb default caps", egresstest.Bomb(DefaultMaxDecodedBytes+1<<20, "gzip"), 0, 0, ReasonDecodedTooLarge},
		{"br bomb", egresstest.Bomb(8<<20, "br"), 0, 1 << 20, ReasonDecodedTooLarge},
		{"zstd bomb", egresstest.Bomb(8<<20, "zstd"), 0, 1 << 20, ReasonDecodedTooLarge},
		{"deflate bomb", egresstest.Bomb(8<<20, "deflate"), 0, 1 << 20, ReasonDecodedTooLarge},
		{"nested gzip bomb default caps", egresstest.Bomb(DefaultMaxDecodedBytes+1<<20, "gzip", "gzip"), 0, 0, ReasonDecodedTooLarge},
		{"nested gzip br bomb", egresstest.Bomb(8<<20, "gzip", "br"), 0, 1 << 20, ReasonDecodedTooLarge},
		{"nested zstd gzip bomb", egresstest.Bomb(8<<20, "zstd", "gzip"), 0, 1 << 20, ReasonDecodedTooLarge},
		{"plain body past the wire cap", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Write(random)
		}), 64 << 10, 0, ReasonBodyTooLarge},
		{"chunked body past the wire cap", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			for range 4 {
				w.Write(random[:64<<10])
				http.NewResponseController(w).Flush()
			}
		}), 100 << 10, 0, ReasonBodyTooLarge},
		{"coded body past the wire cap", egresstest.Bomb(64<<20, "gzip"), 16 << 10, 0, ReasonBodyTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, _, _ := startServer(t, modeHTTP, tt.h)
			d, _ := staticDialer(t, nil, exceptLocal...)
			c := newTestClient(t, d, nil)
			c.MaxBodyBytes, c.MaxDecodedBytes = tt.maxWire, tt.maxDecoded
			resp, err := c.Get(context.Background(), srv.URL+"/")
			if err != nil {
				t.Fatalf("Get: %v (the caps apply while reading)", err)
			}
			n, err := io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			wantError(t, err, CodeTooLarge, tt.reason)
			if !errors.Is(err, ErrTooLarge) {
				t.Errorf("errors.Is(%v, ErrTooLarge) = false", err)
			}
			// A coded body may decode to more than the wire cap before
			// the wire read fails; an uncoded one may not.
			limit := orDefault64(tt.maxDecoded, DefaultMaxDecodedBytes)
			if resp.Encoding == "" {
				limit = min(limit, orDefault64(tt.maxWire, DefaultMaxBodyBytes))
			}
			if n > limit {
				t.Errorf("read %d bytes before the error, past the cap %d", n, limit)
			}
		})
	}
	t.Run("three codings", func(t *testing.T) {
		srv, _, _ := startServer(t, modeHTTP, egresstest.Bomb(1<<10, "gzip", "gzip", "gzip"))
		d, _ := staticDialer(t, nil, exceptLocal...)
		c := newTestClient(t, d, nil)
		_, err := c.Get(context.Background(), srv.URL+"/")
		wantError(t, err, CodeUpstream, ReasonEncoding)
	})
}

func TestClientHostileTiming(t *testing.T) {
	tests := []struct {
		name          string
		h             http.Handler
		timeout       time.Duration
		headerTimeout time.Duration
		duringRead    bool // the error comes from reading the body, not from Do
	}{
		{"slowloris body", egresstest.Trickle(20*time.Millisecond, 10000), 300 * time.Millisecond, 0, true},
		{"slowloris headers", egresstest.TrickleHeader(20*time.Millisecond, 10*time.Second), 300 * time.Millisecond, 0, false},
		{"stalled headers, total timeout", egresstest.Stall(10 * time.Second), 300 * time.Millisecond, 0, false},
		{"stalled headers, header timeout", egresstest.Stall(10 * time.Second), 10 * time.Second, 300 * time.Millisecond, false},
		{"trickled headers, header timeout", egresstest.TrickleHeader(20*time.Millisecond, 10*time.Second), 10 * time.Second, 300 * time.Millisecond, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, _, _ := startServer(t, modeHTTP, tt.h)
			d, _ := staticDialer(t, nil, exceptLocal...)
			c := newTestClient(t, d, nil)
			c.Timeout, c.HeaderTimeout = tt.timeout, tt.headerTimeout
			resp, err := c.Get(context.Background(), srv.URL+"/")
			if tt.duringRead {
				if err != nil {
					t.Fatalf("Get: %v, want headers then a timeout while reading", err)
				}
				_, err = ReadAll(resp)
			}
			wantError(t, err, CodeTimeout, ReasonTimeout)
		})
	}
	t.Run("caller cancels", func(t *testing.T) {
		srv, _, _ := startServer(t, modeHTTP, egresstest.Stall(10*time.Second))
		d, _ := staticDialer(t, nil, exceptLocal...)
		c := newTestClient(t, d, nil)
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(100*time.Millisecond, cancel)
		_, err := c.Get(ctx, srv.URL+"/")
		wantError(t, err, CodeTimeout, ReasonCanceled)
	})
}

func TestClientHostileHeaders(t *testing.T) {
	// fields answers with n header fields of 1 KiB each.
	fields := func(n int) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			for i := range n {
				w.Header().Set("X-Many-"+strconv.Itoa(i), strings.Repeat("b", 1<<10))
			}
		})
	}
	manyHeaders := fields(64)
	tests := []struct {
		name     string
		mode     string
		h        http.Handler
		maxBytes int64
	}{
		{"h1 one huge field, default cap", modeHTTP, egresstest.HugeHeader(DefaultMaxHeaderBytes + 1<<10), 0},
		{"h1 one huge field, small cap", modeHTTP, egresstest.HugeHeader(16 << 10), 8 << 10},
		{"h1 many fields", modeHTTP, manyHeaders, 16 << 10},
		{"h1 over TLS", modeHTTPS, egresstest.HugeHeader(16 << 10), 8 << 10},
		{"h2 one huge field, default cap", modeH2, egresstest.HugeHeader(DefaultMaxHeaderBytes + 1<<10), 0},
		{"h2 many fields in one frame", modeH2, fields(12), 8 << 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, _, pool := startServer(t, tt.mode, tt.h)
			d, _ := staticDialer(t, map[string][]netip.Addr{"example.com": {addrLocal}}, exceptLocal...)
			c := newTestClient(t, d, pool)
			c.MaxHeaderBytes = tt.maxBytes
			scheme := "https"
			if tt.mode == modeHTTP {
				scheme = "http"
			}
			_, err := c.Get(context.Background(), fmt.Sprintf("%s://example.com:%d/", scheme, serverPort(t, srv)))
			wantError(t, err, CodeTooLarge, ReasonHeaderTooLarge)
		})
	}
	// x/net/http2 ends the connection with a bare PROTOCOL_ERROR when an
	// oversized header block goes on in CONTINUATION frames; that error is
	// also what any other framing violation gives, so it stays an upstream
	// protocol failure. It is still refused.
	t.Run("h2 many fields over several frames", func(t *testing.T) {
		srv, _, pool := startServer(t, modeH2, manyHeaders)
		d, _ := staticDialer(t, map[string][]netip.Addr{"example.com": {addrLocal}}, exceptLocal...)
		c := newTestClient(t, d, pool)
		c.MaxHeaderBytes = 16 << 10
		_, err := c.Get(context.Background(), fmt.Sprintf("https://example.com:%d/", serverPort(t, srv)))
		wantError(t, err, CodeUpstream, ReasonProtocol)
	})
}

func TestClientResetMidBody(t *testing.T) {
	srv, _, _ := startServer(t, modeHTTP, egresstest.ResetMidBody(100000, 1000))
	d, _ := staticDialer(t, nil, exceptLocal...)
	c := newTestClient(t, d, nil)
	resp, err := c.Get(context.Background(), srv.URL+"/")
	if err != nil {
		t.Fatalf("Get: %v, want headers then an error while reading", err)
	}
	_, err = ReadAll(resp)
	e := wantError(t, err, CodeUpstream, ReasonProtocol)
	if e.Op != "read" {
		t.Errorf("Op = %q, want read", e.Op)
	}
}

func TestClientHeaderFloor(t *testing.T) {
	srv, counts, _ := startServer(t, modeHTTP, http.HandlerFunc(echoHandler))
	d, audit := staticDialer(t, nil, exceptLocal...)
	c := newTestClient(t, d, nil)
	tests := []struct {
		key, value string
		code       Code
	}{
		{"Host", "169.254.169.254", CodeDenied},
		{"host", "internal", CodeDenied},
		{"Connection", "Upgrade", CodeDenied},
		{"Keep-Alive", "timeout=5", CodeDenied},
		{"Upgrade", "websocket", CodeDenied},
		{"Transfer-Encoding", "chunked", CodeDenied},
		{"Te", "trailers", CodeDenied},
		{"Metadata-Flavor", "Google", CodeDenied},
		{"Metadata", "true", CodeDenied},
		{"X-Google-Metadata-Request", "True", CodeDenied},
		{"X-aws-ec2-metadata-token", "AQAE", CodeDenied},
		{"x-aws-ec2-metadata-token-ttl-seconds", "21600", CodeDenied},
		{"X-Forwarded-For", "127.0.0.1", CodeDenied},
		{"X-Forwarded-Host", "internal", CodeDenied},
		{"Forwarded", "for=127.0.0.1", CodeDenied},
		{"X-Real-IP", "127.0.0.1", CodeDenied},
		{"Proxy-Authorization", "Basic eDp5", CodeDenied},
		{"Bad Name", "x", CodeInvalid},
		{"X-Injected", "a\r\nHost: evil", CodeInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			_, err := c.Do(context.Background(), &Request{URL: srv.URL + "/", Header: http.Header{tt.key: {tt.value}}})
			wantError(t, err, tt.code, ReasonHeaderFloor)
		})
	}
	if n := counts.conns.Load(); n != 0 {
		t.Errorf("server accepted %d connections, want 0: the floor is checked before dialling", n)
	}
	if ds := audit.all(); len(ds) != 0 {
		t.Errorf("%d decisions recorded, want 0: the floor is checked before the policy", len(ds))
	}
	// Ordinary headers pass and override the profile's.
	_, body := fetchAll(t, c, &Request{URL: srv.URL + "/", Header: http.Header{"User-Agent": {"mine"}, "X-Custom": {"1"}}})
	if echoField(body, "ua") != "mine" || echoField(body, "custom") != "1" {
		t.Errorf("caller headers not sent: %q", body)
	}
}

// multiOrigin serves on one port at several loopback addresses and records
// which local address each request arrived at.
type multiOrigin struct {
	port  int
	conns atomic.Int64
	mu    sync.Mutex
	local []string
}

func (o *multiOrigin) served() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.local)
}

// startMultiOrigin serves h (nil: answer with the local address) on one
// port at each of ips.
func startMultiOrigin(t *testing.T, h http.Handler, ips ...string) *multiOrigin {
	t.Helper()
	o := &multiOrigin{}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			la := r.Context().Value(http.LocalAddrContextKey).(net.Addr).String()
			o.mu.Lock()
			o.local = append(o.local, la)
			o.mu.Unlock()
			if h != nil {
				h.ServeHTTP(w, r)
				return
			}
			io.WriteString(w, la)
		}),
		ConnState: func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				o.conns.Add(1)
			}
		},
	}
	var lns []net.Listener
	for attempt := 0; len(lns) < len(ips); attempt++ {
		if attempt == 20 {
			t.Fatalf("no port free on all of %v", ips)
		}
		for _, ln := range lns {
			ln.Close()
		}
		lns = lns[:0]
		first, err := net.Listen("tcp", net.JoinHostPort(ips[0], "0"))
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, first)
		o.port = first.Addr().(*net.TCPAddr).Port
		for _, ip := range ips[1:] {
			ln, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(o.port)))
			if err != nil {
				break
			}
			lns = append(lns, ln)
		}
	}
	var wg sync.WaitGroup
	for _, ln := range lns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			srv.Serve(ln)
		}()
	}
	t.Cleanup(func() {
		srv.Close()
		wg.Wait()
	})
	return o
}

func startStubDNS(t *testing.T) *egresstest.DNSServer {
	t.Helper()
	s, err := egresstest.StartDNS()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// dnsDialer returns a Dialer that resolves through the stub DNS server.
func dnsDialer(t *testing.T, s *egresstest.DNSServer, exceptions ...string) (*Dialer, *auditLog) {
	t.Helper()
	r, err := NewDNSResolver(s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	d, audit := staticDialer(t, nil, exceptions...)
	d.Resolver = r
	return d, audit
}

// queryTypes counts the stub server's questions for name by type.
func queryTypes(s *egresstest.DNSServer, name string) map[string]int {
	n := map[string]int{}
	for _, q := range s.Queries() {
		if q.Name == name+"." {
			n[q.Type]++
		}
	}
	return n
}

func TestClientDNS(t *testing.T) {
	type step struct {
		wantReason Reason // "" for success
		wantLocal  string // the address the request must arrive at
	}
	tests := []struct {
		name   string
		setup  func(s *egresstest.DNSServer, name string)
		pins   bool
		steps  []step
		except []string
	}{
		{
			name: "rebinding to private",
			setup: func(s *egresstest.DNSServer, name string) {
				s.SetSequence(name, 0, mustAddrs("127.0.0.1"), mustAddrs("10.0.0.1"))
			},
			steps: []step{{"", "127.0.0.1"}, {ReasonPrivate, ""}, {ReasonPrivate, ""}},
		},
		{
			name: "rebinding to metadata",
			setup: func(s *egresstest.DNSServer, name string) {
				s.SetSequence(name, 0, mustAddrs("127.0.0.1"), mustAddrs("169.254.169.254"))
			},
			steps: []step{{"", "127.0.0.1"}, {ReasonMetadata, ""}},
		},
		{
			name: "new answer without pins",
			setup: func(s *egresstest.DNSServer, name string) {
				s.SetSequence(name, 0, mustAddrs("127.0.0.1"), mustAddrs("127.0.0.3"))
			},
			except: []string{"127.0.0.1", "127.0.0.3"},
			steps:  []step{{"", "127.0.0.1"}, {"", "127.0.0.3"}},
		},
		{
			name: "new answer with pins",
			setup: func(s *egresstest.DNSServer, name string) {
				s.SetSequence(name, 0, mustAddrs("127.0.0.1"), mustAddrs("127.0.0.3"))
			},
			except: []string{"127.0.0.1", "127.0.0.3"},
			pins:   true,
			steps:  []step{{"", "127.0.0.1"}, {ReasonDNSRebinding, ""}, {ReasonDNSRebinding, ""}},
		},
		{
			name:  "ttl 0 asks every time",
			setup: func(s *egresstest.DNSServer, name string) { s.SetA(name, 0, addrLocal) },
			steps: []step{{"", "127.0.0.1"}, {"", "127.0.0.1"}, {"", "127.0.0.1"}},
		},
		{
			name: "mixed answers",
			setup: func(s *egresstest.DNSServer, name string) {
				s.SetA(name, 0, addrLocal, netip.MustParseAddr("10.0.0.1"))
			},
			steps: []step{{ReasonDNSMixed, ""}},
		},
		{
			name: "mixed families",
			setup: func(s *egresstest.DNSServer, name string) {
				s.SetAddrs(name, 0, addrLocal, netip.MustParseAddr("fd00::1"))
			},
			steps: []step{{ReasonDNSMixed, ""}},
		},
		{
			name: "cname to localhost",
			setup: func(s *egresstest.DNSServer, name string) {
				s.SetCNAME(name, "localhost.", 0)
				s.SetAddrs("localhost.", 0, addrLocal, netip.IPv6Loopback())
			},
			steps: []step{{ReasonDNSMixed, ""}},
		},
		{
			name: "cname to localhost, loopback not excepted",
			setup: func(s *egresstest.DNSServer, name string) {
				s.SetCNAME(name, "localhost.", 0)
				s.SetAddrs("localhost.", 0, addrLocal, netip.IPv6Loopback())
			},
			except: []string{"127.0.0.3"},
			steps:  []step{{ReasonLoopback, ""}},
		},
		{
			name: "aaaa only mapped",
			setup: func(s *egresstest.DNSServer, name string) {
				s.SetAAAA(name, 0, netip.MustParseAddr("::ffff:127.0.0.1"))
			},
			steps: []step{{ReasonIPv4Embedded, ""}},
		},
		{
			name:  "aaaa only nat64",
			setup: func(s *egresstest.DNSServer, name string) { s.SetAAAA(name, 0, netip.MustParseAddr("64:ff9b::7f00:1")) },
			steps: []step{{ReasonIPv4Embedded, ""}},
		},
		{
			name: "a plus mapped aaaa",
			setup: func(s *egresstest.DNSServer, name string) {
				s.SetAddrs(name, 0, addrLocal, netip.MustParseAddr("::ffff:127.0.0.1"))
			},
			steps: []step{{ReasonDNSMixed, ""}},
		},
	}
	dnsSrv := startStubDNS(t)
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			origin := startMultiOrigin(t, nil, "127.0.0.1", "127.0.0.3")
			name := fmt.Sprintf("host%d.test", i)
			tt.setup(dnsSrv, name)
			except := tt.except
			if except == nil {
				except = exceptLocal
			}
			d, audit := dnsDialer(t, dnsSrv, except...)
			if tt.pins {
				d.Pins = &MemoryPins{}
			}
			c := newTestClient(t, d, nil)
			raw := fmt.Sprintf("http://%s:%d/", name, origin.port)
			var want []string
			for n, st := range tt.steps {
				audit.reset()
				resp, err := c.Get(context.Background(), raw)
				ds := audit.all()
				if len(ds) != 1 {
					t.Fatalf("request %d: %d decisions, want 1", n, len(ds))
				}
				if st.wantReason == "" {
					if err != nil {
						t.Fatalf("request %d: %v", n, err)
					}
					body, err := ReadAll(resp)
					if err != nil {
						t.Fatal(err)
					}
					wantAP := net.JoinHostPort(st.wantLocal, strconv.Itoa(origin.port))
					if string(body) != wantAP || resp.Addr.String() != wantAP {
						t.Errorf("request %d arrived at %s (Addr %v), want %s", n, body, resp.Addr, wantAP)
					}
					if !slices.Equal(ds[0].Addrs, mustAddrs(st.wantLocal)) {
						t.Errorf("request %d: decision Addrs %v, want [%s]", n, ds[0].Addrs, st.wantLocal)
					}
					want = append(want, wantAP)
				} else {
					e := wantError(t, err, CodeDenied, st.wantReason)
					if ds[0].Allow || ds[0].Reason != st.wantReason {
						t.Errorf("request %d: decision %+v, want a %s denial", n, ds[0], st.wantReason)
					}
					if st.wantReason == ReasonDNSRebinding {
						msg := e.Error()
						if !strings.Contains(msg, "127.0.0.1") || !strings.Contains(msg, "127.0.0.3") {
							t.Errorf("rebinding error %q does not name both addresses", msg)
						}
						if e.Addr.Addr() != netip.MustParseAddr("127.0.0.3") {
							t.Errorf("rebinding error Addr = %v, want the new answer 127.0.0.3", e.Addr)
						}
					}
				}
				// One question per family per request, however it ended.
				if got, wantN := queryTypes(dnsSrv, name), n+1; got["A"] != wantN || got["AAAA"] != wantN || len(got) != 2 {
					t.Errorf("after request %d: questions %v, want %d A and %d AAAA", n, got, wantN, wantN)
				}
			}
			if got := origin.served(); !slices.Equal(got, want) {
				t.Errorf("requests arrived at %v, want %v", got, want)
			}
			// One pooled connection per address dialled, none to a denied one.
			slices.Sort(want)
			if got, wantN := origin.conns.Load(), int64(len(slices.Compact(want))); got != wantN {
				t.Errorf("origin accepted %d connections, want %d", got, wantN)
			}
		})
	}
}

func TestClientDNSCached(t *testing.T) {
	dnsSrv := startStubDNS(t)
	origin := startMultiOrigin(t, nil, "127.0.0.1")
	dnsSrv.SetA("cached.test", 60, addrLocal)
	d, _ := dnsDialer(t, dnsSrv, exceptLocal...)
	c := newTestClient(t, d, nil)
	for range 3 {
		fetchAll(t, c, &Request{URL: fmt.Sprintf("http://cached.test:%d/", origin.port)})
	}
	if got := queryTypes(dnsSrv, "cached.test"); got["A"] != 1 || got["AAAA"] != 1 {
		t.Errorf("questions %v, want one A and one AAAA for three requests within the TTL", got)
	}
}

func TestClientPooling(t *testing.T) {
	for _, mode := range []string{modeHTTP, modeHTTPS, modeH2} {
		t.Run(mode, func(t *testing.T) {
			srv, counts, pool := startServer(t, mode, http.HandlerFunc(echoHandler))
			d, _ := staticDialer(t, map[string][]netip.Addr{"example.com": {addrLocal}}, exceptLocal...)
			c := newTestClient(t, d, pool)
			scheme := "https"
			if mode == modeHTTP {
				scheme = "http"
			}
			raw := fmt.Sprintf("%s://example.com:%d/", scheme, serverPort(t, srv))
			for range 20 {
				fetchAll(t, c, &Request{URL: raw})
			}
			if got := counts.conns.Load(); got != 1 {
				t.Errorf("20 fetches used %d connections, want 1", got)
			}

			// A narrower policy on the next request denies it, although a
			// pooled connection to the same pinned address is open.
			for _, narrow := range []Policy{
				{Lanes: Lanes(), Allow: []string{"other.test"}},
				{Lanes: Lanes(), Deny: []string{"127.0.0.1"}, Exceptions: exceptLocal},
				{Lanes: []Lane{LaneTCP}},
			} {
				_, err := c.Do(context.Background(), &Request{URL: raw, Call: Call{Narrow: narrow.MustCompile()}})
				if !IsDenied(err) {
					t.Errorf("narrowed by %+v: error %v, want a denial", narrow, err)
				}
			}
			if got := counts.reqs.Load(); got != 20 {
				t.Errorf("server handled %d requests, want 20", got)
			}
			// And the pool still serves the wider policy.
			fetchAll(t, c, &Request{URL: raw})
			if got := counts.conns.Load(); got != 1 {
				t.Errorf("%d connections after the denials, want 1", got)
			}
		})
	}
}

func TestClientPolicyRefusals(t *testing.T) {
	srv, counts, _ := startServer(t, modeHTTP, http.HandlerFunc(echoHandler))
	port := serverPort(t, srv)
	d, _ := staticDialer(t, nil, exceptLocal...)
	c := newTestClient(t, d, nil)
	tests := []struct {
		name   string
		c      *Client
		url    string
		code   Code
		reason Reason
	}{
		{"no dialer", &Client{}, srv.URL, CodeDenied, ReasonNoPolicy},
		{"zero policy", &Client{Dialer: &Dialer{}}, srv.URL, CodeDenied, ReasonNoPolicy},
		{"loopback not excepted", c, fmt.Sprintf("http://127.0.0.2:%d/", port), CodeDenied, ReasonLoopback},
		{"scheme", c, "ftp://127.0.0.1/", CodeInvalid, ReasonScheme},
		{"not a URL", c, "not a url", CodeInvalid, ReasonMalformed},
		{"ambiguous bytes", c, "http://127.0.0.1\t/", CodeDenied, ReasonParseAmbiguous},
		{"userinfo", c, "http://a@127.0.0.1/", CodeDenied, ReasonUserinfo},
		{"numeric", c, fmt.Sprintf("http://2130706433:%d/", port), CodeDenied, ReasonNumericHost},
		{"port 0", c, "http://127.0.0.1:0/", CodeInvalid, ReasonBadPort},
		{"empty", c, "", CodeInvalid, ReasonMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.c.Get(context.Background(), tt.url)
			wantError(t, err, tt.code, tt.reason)
		})
	}
	t.Run("bad profile", func(t *testing.T) {
		_, err := c.Do(context.Background(), &Request{URL: srv.URL, Profile: "netscape"})
		wantError(t, err, CodeInvalid, ReasonMalformed)
	})
	t.Run("bad method", func(t *testing.T) {
		_, err := c.Do(context.Background(), &Request{URL: srv.URL, Method: "GET /x HTTP/1.1\r\n"})
		wantError(t, err, CodeInvalid, ReasonMalformed)
	})
	if n := counts.conns.Load(); n != 0 {
		t.Errorf("server accepted %d connections, want 0", n)
	}
}

func TestClientUpstreamError(t *testing.T) {
	// A server that closes without answering is an upstream failure, not
	// a timeout.
	srv, _, _ := startServer(t, modeHTTP, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			c.Close()
		}
	}))
	d, _ := staticDialer(t, nil, exceptLocal...)
	c := newTestClient(t, d, nil)
	_, err := c.Get(context.Background(), srv.URL+"/")
	wantError(t, err, CodeUpstream, ReasonProtocol)

	// Nothing listening: a connect failure.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, err = c.Get(context.Background(), "http://"+addr+"/")
	wantError(t, err, CodeUpstream, ReasonConnect)
}

// stallAfterFirst accepts connections on 127.0.0.1: the first is served
// over TLS (HTTP/1.1 only, Connection: close), every later one is held
// without a handshake. closed receives when the client gives up on a held
// connection.
func stallAfterFirst(t *testing.T) (port int, roots *x509.CertPool, closed <-chan struct{}) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	first := newChanListener(ln.Addr())
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		io.WriteString(w, "first")
	}))
	srv.Listener.Close()
	srv.Listener = first
	srv.StartTLS()
	gone := make(chan struct{}, 16)
	var wg sync.WaitGroup
	var held []net.Conn
	var mu sync.Mutex
	wg.Add(1)
	go func() {
		defer wg.Done()
		for n := 0; ; n++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if n == 0 {
				if !first.put(c) {
					c.Close()
				}
				continue
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				io.Copy(io.Discard, c) // until the client closes (or the test does)
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
		srv.Close()
	})
	roots = x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	return ln.Addr().(*net.TCPAddr).Port, roots, gone
}

// TestClientTLSHandshakeStall: once an origin has negotiated HTTP/1.1, new
// connections are dialled by http.Transport with a context detached from
// the request. A handshake that the server stalls must still end, not hold
// a goroutine and a socket for ever.
func TestClientTLSHandshakeStall(t *testing.T) {
	for _, profile := range []TLSProfile{ProfileGo, ProfileChrome} {
		t.Run(string(profile), func(t *testing.T) {
			t.Parallel() // each waits out its own detached dial
			port, roots, gone := stallAfterFirst(t)
			d, _ := staticDialer(t, map[string][]netip.Addr{"example.com": {addrLocal}}, exceptLocal...)
			c := newTestClient(t, d, roots)
			c.Profile = profile
			c.Timeout = 2 * time.Second // also the bound on the detached dial
			raw := fmt.Sprintf("https://example.com:%d/", port)
			if _, body := fetchAll(t, c, &Request{URL: raw}); body != "first" {
				t.Fatalf("first body %q", body)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			_, err := c.Get(ctx, raw)
			wantError(t, err, CodeTimeout, ReasonTimeout)
			select {
			case <-gone:
			case <-time.After(10 * time.Second):
				t.Fatal("the stalled handshake was never abandoned")
			}
		})
	}
}

func TestClientDecodes(t *testing.T) {
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	io.WriteString(zw, "hello, decoded")
	zw.Close()
	srv, _, _ := startServer(t, modeHTTP, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Accept-Encoding") == "" {
			http.Error(w, "no Accept-Encoding", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Encoding", "gzip")
		w.Header().Set("Content-Length", strconv.Itoa(gz.Len()))
		w.Write(gz.Bytes())
	}))
	d, _ := staticDialer(t, nil, exceptLocal...)
	c := newTestClient(t, d, nil)
	resp, body := fetchAll(t, c, &Request{URL: srv.URL + "/"})
	if body != "hello, decoded" || resp.Encoding != "gzip" {
		t.Errorf("body %q, Encoding %q", body, resp.Encoding)
	}
	if resp.Header.Get("Content-Encoding") != "" || resp.Header.Get("Content-Length") != "" {
		t.Errorf("decoded response still carries Content-Encoding %q, Content-Length %q",
			resp.Header.Get("Content-Encoding"), resp.Header.Get("Content-Length"))
	}
}

// TestClientDNSOncePerRequest: a request resolves each name once, however
// many redirect hops lead back to it; every hop is still decided.
func TestClientDNSOncePerRequest(t *testing.T) {
	dnsSrv := startStubDNS(t)
	var port int
	origin := startMultiOrigin(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		loc := map[string]string{
			"/a": "/b",
			"/b": fmt.Sprintf("http://other.test:%d/c", port),
			"/c": fmt.Sprintf("http://once.test:%d/d", port),
		}[r.URL.Path]
		if loc != "" {
			w.Header().Set("Location", loc)
			w.WriteHeader(http.StatusFound)
		}
	}), "127.0.0.1", "127.0.0.3")
	port = origin.port
	// Each question gets the next answer: a request that asked again
	// would go somewhere else on a later hop.
	dnsSrv.SetSequence("once.test", 0, mustAddrs("127.0.0.1"), mustAddrs("127.0.0.3"))
	dnsSrv.SetA("other.test", 0, mustAddrs("127.0.0.3")...)
	d, audit := dnsDialer(t, dnsSrv, "127.0.0.1", "127.0.0.3")
	c := newTestClient(t, d, nil)

	resp, _ := fetchAll(t, c, &Request{URL: fmt.Sprintf("http://once.test:%d/a", port)})
	if len(resp.Redirects) != 3 || resp.URL.URL.Path != "/d" {
		t.Fatalf("redirects %v, final %v", resp.Redirects, resp.URL)
	}
	p := strconv.Itoa(port)
	want := []string{"127.0.0.1:" + p, "127.0.0.1:" + p, "127.0.0.3:" + p, "127.0.0.1:" + p}
	if got := origin.served(); !slices.Equal(got, want) {
		t.Errorf("hops arrived at %v, want %v: once.test must keep its first answer", got, want)
	}
	for _, name := range []string{"once.test", "other.test"} {
		if got := queryTypes(dnsSrv, name); got["A"] != 1 || got["AAAA"] != 1 {
			t.Errorf("%s: questions %v, want one A and one AAAA for the whole request", name, got)
		}
	}
	if ds := audit.all(); len(ds) != 4 {
		t.Errorf("%d decisions, want one per hop (4)", len(ds))
	}
	// The next request resolves afresh.
	resp, _ = fetchAll(t, c, &Request{URL: fmt.Sprintf("http://once.test:%d/d", port)})
	if resp.Addr.Addr() != netip.MustParseAddr("127.0.0.3") {
		t.Errorf("second request went to %v, want the second answer 127.0.0.3", resp.Addr)
	}
}

// TestClientCheckRedirect: the hook sees each redirect target before it is
// followed, and its error refuses the hop without a request to it.
func TestClientCheckRedirect(t *testing.T) {
	srv, counts, _ := startServer(t, modeHTTP, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/start" {
			http.Redirect(w, r, "/next?k=v", http.StatusFound)
			return
		}
		io.WriteString(w, "next")
	}))
	d, _ := staticDialer(t, nil, exceptLocal...)
	c := newTestClient(t, d, nil)
	var seen []string
	refuse := errors.New("no")
	_, err := c.Do(context.Background(), &Request{URL: srv.URL + "/start", CheckRedirect: func(u *url.URL) error {
		seen = append(seen, u.String())
		return refuse
	}})
	e := wantError(t, err, CodeDenied, ReasonRedirect)
	if e.Hop != 1 || e.Op != "redirect" || !errors.Is(err, refuse) {
		t.Errorf("error %+v, want hop 1, op redirect, wrapping the hook's error", e)
	}
	if want := srv.URL + "/next?k=v"; len(seen) != 1 || seen[0] != want {
		t.Errorf("hook saw %q, want [%s]", seen, want)
	}
	if n := counts.reqs.Load(); n != 1 {
		t.Errorf("server saw %d requests, want 1 (the refused hop is never requested)", n)
	}
	mine := &Error{Code: CodeDenied, Reason: "mine"}
	_, err = c.Do(context.Background(), &Request{URL: srv.URL + "/start", CheckRedirect: func(*url.URL) error { return mine }})
	if e := wantError(t, err, CodeDenied, "mine"); e != mine || e.Hop != 1 {
		t.Errorf("error %+v, want the hook's own *Error at hop 1", e)
	}
}
