package egress

import (
	"bufio"
	"context"
	"crypto/sha1"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/websocket"
)

// Traffic in these tests goes to loopback only. Denied targets outside
// loopback (169.254.169.254, 10.0.0.1, ...) are refused before any socket
// is opened; the denied loopback target 127.0.0.2 has a listener that counts
// accepts to prove it.

var proxyLoopback = netip.MustParseAddr("127.0.0.1")

type proxyCred struct {
	pass   string
	client ProxyClient
}

type proxyHarness struct {
	t      *testing.T
	proxy  *Proxy
	srv    *httptest.Server
	dialer *Dialer

	mu        sync.Mutex
	decisions []Decision
}

type proxyOpts struct {
	hosts    map[string][]netip.Addr
	creds    map[string]proxyCred // nil: alice/secret with key "alice"
	noAuth   bool                 // leave Authorize nil
	resolver Resolver             // overrides the static resolver
	tune     func(*Proxy)
	dialer   func(*Dialer)
}

func proxyTestPolicy() *Checker {
	return Policy{Lanes: Lanes(), Exceptions: []string{"127.0.0.1"}}.MustCompile()
}

func newProxyHarness(t *testing.T, o proxyOpts) *proxyHarness {
	t.Helper()
	checkProxyGoroutines(t)
	h := &proxyHarness{t: t}
	var res Resolver = &StaticResolver{Hosts: o.hosts}
	if o.resolver != nil {
		res = o.resolver
	}
	h.dialer = &Dialer{
		Policy:   proxyTestPolicy(),
		Resolver: res,
		Auditor: AuditorFunc(func(d Decision) {
			h.mu.Lock()
			h.decisions = append(h.decisions, d)
			h.mu.Unlock()
		}),
	}
	if o.dialer != nil {
		o.dialer(h.dialer)
	}
	creds := o.creds
	if creds == nil {
		creds = map[string]proxyCred{"alice": {pass: "secret", client: ProxyClient{Key: "alice"}}}
	}
	h.proxy = &Proxy{Dialer: h.dialer}
	if !o.noAuth {
		h.proxy.Authorize = func(_ *http.Request, user, pass string) (ProxyClient, bool) {
			c, ok := creds[user]
			if !ok || subtle.ConstantTimeCompare([]byte(c.pass), []byte(pass)) != 1 {
				return ProxyClient{}, false
			}
			return c.client, true
		}
	}
	if o.tune != nil {
		o.tune(h.proxy)
	}
	h.srv = httptest.NewServer(h.proxy)
	t.Cleanup(func() {
		h.srv.Close()
		h.proxy.Close()
	})
	return h
}

// decided returns the decisions recorded since the last call.
func (h *proxyHarness) decided() []Decision {
	h.mu.Lock()
	defer h.mu.Unlock()
	d := h.decisions
	h.decisions = nil
	return d
}

// one asserts that exactly one decision was recorded since the last call
// and returns it.
func (h *proxyHarness) one(t *testing.T) Decision {
	t.Helper()
	d := h.decided()
	if len(d) != 1 {
		t.Fatalf("got %d decisions, want exactly 1: %+v", len(d), d)
	}
	return d[0]
}

func (h *proxyHarness) proxyURL(user, pass string) *url.URL {
	u, _ := url.Parse(h.srv.URL)
	if user != "" {
		u.User = url.UserPassword(user, pass)
	}
	return u
}

// client is a plain http.Client (allowed inside egress's own tests) that
// uses the proxy and never follows redirects itself.
func (h *proxyHarness) client(user, pass string, roots *x509.CertPool) *http.Client {
	tr := &http.Transport{Proxy: http.ProxyURL(h.proxyURL(user, pass))}
	if roots != nil {
		tr.TLSClientConfig = &tls.Config{RootCAs: roots}
	}
	h.t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{
		Transport:     tr,
		Timeout:       10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

func proxyBasic(user, pass string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
}

// raw sends a hand-written request head to the proxy and reads the answer.
// The connection stays open for tunnels; it is closed at cleanup.
func (h *proxyHarness) raw(t *testing.T, head string) (*http.Response, net.Conn, *bufio.Reader) {
	t.Helper()
	conn, err := net.Dial("tcp", h.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, head); err != nil {
		t.Fatal(err)
	}
	method, _, _ := strings.Cut(head, " ")
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, &http.Request{Method: method})
	if err != nil {
		t.Fatalf("read proxy response: %v", err)
	}
	return resp, conn, br
}

func proxyConnectHead(target, auth string) string {
	s := "CONNECT " + target + " HTTP/1.1\r\nHost: " + target + "\r\n"
	if auth != "" {
		s += "Proxy-Authorization: " + auth + "\r\n"
	}
	return s + "\r\n"
}

func proxyGetHead(rawURL, auth string, extra ...string) string {
	u, _ := url.Parse(rawURL)
	host := rawURL
	if u != nil {
		host = u.Host
	}
	s := "GET " + rawURL + " HTTP/1.1\r\nHost: " + host + "\r\n"
	if auth != "" {
		s += "Proxy-Authorization: " + auth + "\r\n"
	}
	for _, e := range extra {
		s += e + "\r\n"
	}
	return s + "\r\n"
}

// wantProxyRefusal checks status, the X-Airlock headers and the body.
func wantProxyRefusal(t *testing.T, resp *http.Response, status int, code Code, reason Reason) {
	t.Helper()
	got := func(r *http.Response) string { return r.Header.Get(HeaderAirlockReason) }
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != status {
		t.Errorf("status: got %d, want %d (body %q)", resp.StatusCode, status, body)
	}
	if got := resp.Header.Get(HeaderAirlockCode); got != string(code) {
		t.Errorf("%s: got %q, want %q", HeaderAirlockCode, got, code)
	}
	// A name whose answer falls in a class is refused internal_address
	// publicly; the decision (checked by the callers) keeps the class.
	folded := got(resp) == string(ReasonInternalAddress) && (deniedPhrase[reason] != "" && reason != ReasonNotAllowed && reason != ReasonNoPolicy || reason == ReasonDNSMixed)
	if got := resp.Header.Get(HeaderAirlockReason); got != string(reason) && !folded {
		t.Errorf("%s: got %q, want %q", HeaderAirlockReason, got, reason)
	}
	if len(body) == 0 || len(body) > 1024 {
		t.Errorf("body: got %d bytes, want a short text", len(body))
	}
}

// proxyCountingListener listens on a denied loopback address and counts
// accepted connections.
func proxyCountingListener(t *testing.T, addr string) (netip.AddrPort, *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen %s: %v", addr, err)
	}
	var n atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return netip.MustParseAddrPort(ln.Addr().String()), &n
}

// checkProxyGoroutines fails the test when proxy goroutines outlive it.
func checkProxyGoroutines(t *testing.T) {
	t.Cleanup(func() {
		var stacks string
		for i := 0; i < 100; i++ {
			buf := make([]byte, 1<<20)
			stacks = string(buf[:runtime.Stack(buf, true)])
			if !strings.Contains(stacks, "egress.(*Proxy)") && !strings.Contains(stacks, "egress.pipe(") {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Errorf("proxy goroutines still running after the test:\n%s", stacks)
	})
}

func proxyCertPool(srv *httptest.Server) *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(srv.Certificate())
	return p
}

func proxyPortOf(t *testing.T, srv *httptest.Server) uint16 {
	t.Helper()
	return netip.MustParseAddrPort(srv.Listener.Addr().String()).Port()
}

func TestProxyConnectAllowed(t *testing.T) {
	origin := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello %s %s", r.Host, r.URL.Path)
	}))
	defer origin.Close()
	port := proxyPortOf(t, origin)
	// httptest's certificate is for example.com and 127.0.0.1.
	h := newProxyHarness(t, proxyOpts{hosts: map[string][]netip.Addr{"example.com": {proxyLoopback}}})
	c := h.client("alice", "secret", proxyCertPool(origin))

	for _, tc := range []struct {
		name, url, host string
	}{
		{"name", fmt.Sprintf("https://example.com:%d/a", port), "example.com"},
		{"literal", fmt.Sprintf("https://127.0.0.1:%d/b", port), "127.0.0.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := c.Get(tc.url)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || !strings.HasPrefix(string(body), "hello "+tc.host) {
				t.Fatalf("got %d %q, want 200 hello %s", resp.StatusCode, body, tc.host)
			}
			d := h.one(t)
			if !d.Allow || d.Lane != LaneHTTP || d.Host != tc.host || d.Port != port || d.Key != "alice" || !d.Exception {
				t.Errorf("decision: got %+v, want allow on lane http for alice with the exception", d)
			}
			if len(d.Addrs) != 1 || d.Addrs[0] != proxyLoopback {
				t.Errorf("decision addrs: got %v, want [127.0.0.1]", d.Addrs)
			}
		})
	}
}

func TestProxyConnectDenied(t *testing.T) {
	deniedAP, accepts := proxyCountingListener(t, "127.0.0.2:0")
	h := newProxyHarness(t, proxyOpts{hosts: map[string][]netip.Addr{
		"internal.test": {netip.MustParseAddr("10.1.2.3")},
		"mixed.test":    {proxyLoopback, netip.MustParseAddr("127.0.0.2")},
		"sneaky.test":   {deniedAP.Addr()},
	}})
	auth := proxyBasic("alice", "secret")
	for _, tc := range []struct {
		target string
		status int
		code   Code
		reason Reason
	}{
		{deniedAP.String(), 403, CodeDenied, ReasonLoopback},
		{"sneaky.test:" + strconv.Itoa(int(deniedAP.Port())), 403, CodeDenied, ReasonLoopback},
		{"169.254.169.254:80", 403, CodeDenied, ReasonMetadata},
		{"metadata.google.internal:80", 403, CodeDenied, ReasonMetadata},
		{"10.0.0.1:443", 403, CodeDenied, ReasonPrivate},
		{"internal.test:443", 403, CodeDenied, ReasonPrivate},
		{"mixed.test:443", 403, CodeDenied, ReasonDNSMixed},
		{"[::1]:443", 403, CodeDenied, ReasonLoopback},
		{"0x7f.1:443", 403, CodeDenied, ReasonNumericHost},
		{"2130706433:443", 403, CodeDenied, ReasonNumericHost},
		{"example.com", 400, CodeInvalid, ReasonBadPort},
		{"unknown.test:443", 502, CodeNotFound, ReasonDNSNotFound},
	} {
		t.Run(tc.target, func(t *testing.T) {
			resp, _, _ := h.raw(t, proxyConnectHead(tc.target, auth))
			wantProxyRefusal(t, resp, tc.status, tc.code, tc.reason)
			d := h.one(t)
			if d.Allow || d.Reason != tc.reason || d.Key != "alice" || d.Lane != LaneHTTP {
				t.Errorf("decision: got %+v, want deny %s for alice", d, tc.reason)
			}
		})
	}
	if n := accepts.Load(); n != 0 {
		t.Errorf("denied listener accepted %d connections, want 0", n)
	}

	t.Run("http.Client", func(t *testing.T) {
		c := h.client("alice", "secret", nil)
		_, err := c.Get("https://" + deniedAP.String() + "/")
		if err == nil || !strings.Contains(err.Error(), "Forbidden") {
			t.Errorf("got %v, want a Forbidden CONNECT error", err)
		}
		if d := h.one(t); d.Allow || d.Reason != ReasonLoopback {
			t.Errorf("decision: got %+v, want deny loopback", d)
		}
		if n := accepts.Load(); n != 0 {
			t.Errorf("denied listener accepted %d connections, want 0", n)
		}
	})
}

func TestProxyForwardAllowed(t *testing.T) {
	type seen struct {
		host, uri, body string
		header          http.Header
	}
	got := make(chan seen, 1)
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- seen{r.Host, r.RequestURI, string(b), r.Header.Clone()}
		w.Header().Set("Proxy-Authenticate", `Basic realm="evil"`)
		w.Header().Set("X-Origin", "yes")
		// A target posing as the proxy: these must not reach the client,
		// which would take the answer for Airlock's refusal.
		w.Header().Set("X-Airlock-Code", "denied")
		w.Header().Set("X-Airlock-Reason", "metadata")
		w.Header().Set("X-Airlock-Decision", "01FAKE")
		w.Header().Set("Trailer", "X-Sum")
		io.WriteString(w, "body of "+r.URL.Path)
		w.Header().Set("X-Sum", "42")
	}))
	defer origin.Close()
	port := strconv.Itoa(int(proxyPortOf(t, origin)))
	h := newProxyHarness(t, proxyOpts{hosts: map[string][]netip.Addr{"origin.test": {proxyLoopback}}})
	c := h.client("alice", "secret", nil)

	t.Run("GET", func(t *testing.T) {
		resp, err := c.Get("http://origin.test:" + port + "/path?q=1")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(body) != "body of /path" {
			t.Fatalf("got %d %q, want 200 %q", resp.StatusCode, body, "body of /path")
		}
		if resp.Header.Get("X-Origin") != "yes" || resp.Header.Get("Proxy-Authenticate") != "" {
			t.Errorf("response header: got %v, want X-Origin and no Proxy-Authenticate", resp.Header)
		}
		for _, k := range []string{"X-Airlock-Code", "X-Airlock-Reason", "X-Airlock-Decision"} {
			if v := resp.Header.Get(k); v != "" {
				t.Errorf("the target's own %s: %q reached the client as if the proxy said it", k, v)
			}
		}
		if resp.Trailer.Get("X-Sum") != "42" {
			t.Errorf("trailer: got %v, want X-Sum: 42", resp.Trailer)
		}
		s := <-got
		if s.host != "origin.test:"+port || s.uri != "/path?q=1" {
			t.Errorf("origin saw Host %q URI %q, want origin.test:%s /path?q=1", s.host, s.uri, port)
		}
		if s.header.Get("Proxy-Authorization") != "" {
			t.Errorf("origin saw Proxy-Authorization")
		}
		d := h.one(t)
		if !d.Allow || d.Host != "origin.test" || d.Key != "alice" {
			t.Errorf("decision: got %+v", d)
		}
	})

	t.Run("POST", func(t *testing.T) {
		resp, err := c.Post("http://origin.test:"+port+"/post", "text/plain", strings.NewReader("payload"))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if s := <-got; s.body != "payload" {
			t.Errorf("origin got body %q, want payload", s.body)
		}
		h.one(t)
	})

	t.Run("hop-by-hop", func(t *testing.T) {
		resp, _, _ := h.raw(t, proxyGetHead("http://origin.test:"+port+"/h", proxyBasic("alice", "secret"),
			"Connection: keep-alive, X-Hop",
			"X-Hop: 1",
			"Proxy-Connection: keep-alive",
			"Keep-Alive: timeout=5",
			"Te: trailers",
			"Upgrade: h2c",
			"X-Forwarded-For: 203.0.113.9",
			"Forwarded: for=203.0.113.9",
			"X-Keep: yes"))
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
		s := <-got
		for _, k := range []string{"X-Hop", "Proxy-Connection", "Keep-Alive", "Te", "Upgrade", "Proxy-Authorization", "X-Forwarded-For", "Forwarded"} {
			if v := s.header.Get(k); v != "" {
				t.Errorf("origin saw %s: %q", k, v)
			}
		}
		if s.header.Get("X-Keep") != "yes" {
			t.Errorf("origin did not see X-Keep")
		}
		if ua, ok := s.header["User-Agent"]; ok {
			t.Errorf("origin saw a User-Agent the client did not send: %q", ua)
		}
		h.one(t)
	})
}

func TestProxyForwardDenied(t *testing.T) {
	deniedAP, accepts := proxyCountingListener(t, "127.0.0.2:0")
	h := newProxyHarness(t, proxyOpts{hosts: map[string][]netip.Addr{
		"internal.test": {netip.MustParseAddr("192.168.1.1")},
		"origin.test":   {proxyLoopback},
	}})
	auth := proxyBasic("alice", "secret")
	for _, tc := range []struct {
		name   string
		head   string
		status int
		code   Code
		reason Reason
	}{
		{"loopback", proxyGetHead("http://"+deniedAP.String()+"/", auth), 403, CodeDenied, ReasonLoopback},
		{"metadata", proxyGetHead("http://169.254.169.254/latest/meta-data/", auth), 403, CodeDenied, ReasonMetadata},
		{"private", proxyGetHead("http://10.0.0.1/", auth), 403, CodeDenied, ReasonPrivate},
		{"private name", proxyGetHead("http://internal.test/", auth), 403, CodeDenied, ReasonPrivate},
		{"numeric", proxyGetHead("http://0x7f.1/", auth), 403, CodeDenied, ReasonNumericHost},
		{"userinfo", proxyGetHead("http://user@origin.test/", auth), 403, CodeDenied, ReasonUserinfo},
		{"scheme", "GET ftp://origin.test/ HTTP/1.1\r\nHost: origin.test\r\nProxy-Authorization: " + auth + "\r\n\r\n", 403, CodeDenied, ReasonScheme},
		{"https absolute form", proxyGetHead("https://origin.test/", auth), 400, CodeInvalid, ReasonScheme},
		{"metadata header", proxyGetHead("http://origin.test:1/", auth, "Metadata-Flavor: Google"), 403, CodeDenied, ReasonHeaderFloor},
		{"aws token header", proxyGetHead("http://origin.test:1/", auth, "X-aws-ec2-metadata-token: x"), 403, CodeDenied, ReasonHeaderFloor},
		{"dns", proxyGetHead("http://unknown.test/", auth), 502, CodeNotFound, ReasonDNSNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, _, _ := h.raw(t, tc.head)
			wantProxyRefusal(t, resp, tc.status, tc.code, tc.reason)
			if d := h.one(t); d.Allow || d.Reason != tc.reason || d.Key != "alice" {
				t.Errorf("decision: got %+v, want deny %s for alice", d, tc.reason)
			}
		})
	}
	t.Run("http.Client", func(t *testing.T) {
		resp, err := h.client("alice", "secret", nil).Get("http://" + deniedAP.String() + "/x")
		if err != nil {
			t.Fatal(err)
		}
		wantProxyRefusal(t, resp, 403, CodeDenied, ReasonLoopback)
		h.one(t)
	})
	if n := accepts.Load(); n != 0 {
		t.Errorf("denied listener accepted %d connections, want 0", n)
	}
}

func TestProxyAuth(t *testing.T) {
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer origin.Close()
	target := origin.Listener.Addr().String()

	want407 := func(t *testing.T, resp *http.Response) {
		t.Helper()
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusProxyAuthRequired {
			t.Errorf("status: got %d, want 407", resp.StatusCode)
		}
		if got := resp.Header.Get("Proxy-Authenticate"); got != `Basic realm="airlock"` {
			t.Errorf("Proxy-Authenticate: got %q", got)
		}
	}
	heads := map[string]func(auth string) string{
		"CONNECT": func(a string) string { return proxyConnectHead(target, a) },
		"GET":     func(a string) string { return proxyGetHead("http://"+target+"/", a) },
	}

	t.Run("credentials", func(t *testing.T) {
		h := newProxyHarness(t, proxyOpts{})
		for _, auth := range []string{
			"",
			proxyBasic("alice", "wrong"),
			proxyBasic("mallory", "secret"),
			proxyBasic("alice", ""),
			"Basic !!!",
			"Basic " + base64.StdEncoding.EncodeToString([]byte("alice")),
			"Bearer secret",
		} {
			for method, head := range heads {
				t.Run(method+" "+auth, func(t *testing.T) {
					resp, _, _ := h.raw(t, head(auth))
					want407(t, resp)
				})
			}
		}
		t.Run("two headers", func(t *testing.T) {
			resp, _, _ := h.raw(t, proxyGetHead("http://"+target+"/", proxyBasic("alice", "secret"), "Proxy-Authorization: "+proxyBasic("alice", "secret")))
			want407(t, resp)
		})
		t.Run("http.Client", func(t *testing.T) {
			resp, err := h.client("", "", nil).Get("http://" + target + "/")
			if err != nil {
				t.Fatal(err)
			}
			want407(t, resp)
			if _, err := h.client("alice", "nope", nil).Get("https://" + target + "/"); err == nil || !strings.Contains(err.Error(), "Proxy Authentication Required") {
				t.Errorf("CONNECT with bad credentials: got %v, want a 407 error", err)
			}
		})
		if d := h.decided(); len(d) != 0 {
			t.Errorf("unauthenticated requests recorded %d decisions, want 0: %+v", len(d), d)
		}
		// The right credentials do work on the same proxy.
		resp, _, _ := h.raw(t, heads["GET"](proxyBasic("alice", "secret")))
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("good credentials: got %d, want 200", resp.StatusCode)
		}
		h.one(t)
	})

	t.Run("nil Authorize", func(t *testing.T) {
		h := newProxyHarness(t, proxyOpts{noAuth: true})
		for method, head := range heads {
			resp, _, _ := h.raw(t, head(proxyBasic("alice", "secret")))
			want407(t, resp)
			_ = method
		}
		if d := h.decided(); len(d) != 0 {
			t.Errorf("got %d decisions, want 0", len(d))
		}
	})

	t.Run("zero Proxy", func(t *testing.T) {
		srv := httptest.NewServer(&Proxy{})
		defer srv.Close()
		conn, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		io.WriteString(conn, proxyConnectHead(target, proxyBasic("alice", "secret")))
		resp, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: http.MethodConnect})
		if err != nil {
			t.Fatal(err)
		}
		want407(t, resp)
	})
}

func TestProxyNarrowing(t *testing.T) {
	mk := func(name string) *httptest.Server {
		return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, name) }))
	}
	x, y := mk("x"), mk("y")
	defer x.Close()
	defer y.Close()
	onlyX := Policy{Lanes: Lanes(), Allow: []string{"x.test"}, Exceptions: []string{"127.0.0.1"}}.MustCompile()
	h := newProxyHarness(t, proxyOpts{
		hosts: map[string][]netip.Addr{"x.test": {proxyLoopback}, "y.test": {proxyLoopback}},
		creds: map[string]proxyCred{
			"alice": {pass: "a", client: ProxyClient{Key: "tenant/alice", Narrow: onlyX}},
			"bob":   {pass: "b", client: ProxyClient{Key: "tenant/bob"}},
		},
	})
	xURL := fmt.Sprintf("http://x.test:%d/", proxyPortOf(t, x))
	yURL := fmt.Sprintf("http://y.test:%d/", proxyPortOf(t, y))
	for _, tc := range []struct {
		user, pass, url string
		allow           bool
	}{
		{"alice", "a", xURL, true},
		{"alice", "a", yURL, false},
		{"bob", "b", xURL, true},
		{"bob", "b", yURL, true},
	} {
		t.Run(tc.user+" "+tc.url, func(t *testing.T) {
			resp, err := h.client(tc.user, tc.pass, nil).Get(tc.url)
			if err != nil {
				t.Fatal(err)
			}
			if tc.allow {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					t.Errorf("status: got %d, want 200", resp.StatusCode)
				}
			} else {
				wantProxyRefusal(t, resp, 403, CodeDenied, ReasonNotAllowed)
			}
			d := h.one(t)
			if d.Allow != tc.allow || d.Key != "tenant/"+tc.user {
				t.Errorf("decision: got %+v, want allow=%v for tenant/%s", d, tc.allow, tc.user)
			}
		})
	}
	t.Run("CONNECT", func(t *testing.T) {
		target := fmt.Sprintf("y.test:%d", proxyPortOf(t, y))
		resp, _, _ := h.raw(t, proxyConnectHead(target, proxyBasic("alice", "a")))
		wantProxyRefusal(t, resp, 403, CodeDenied, ReasonNotAllowed)
		h.one(t)
		resp, _, _ = h.raw(t, proxyConnectHead(target, proxyBasic("bob", "b")))
		if resp.StatusCode != 200 {
			t.Errorf("bob CONNECT: got %d, want 200", resp.StatusCode)
		}
		h.one(t)
	})
}

func TestProxyRedirectNotFollowed(t *testing.T) {
	deniedAP, accepts := proxyCountingListener(t, "127.0.0.2:0")
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://"+deniedAP.String()+"/internal", http.StatusFound)
	}))
	defer origin.Close()
	h := newProxyHarness(t, proxyOpts{})
	start := "http://" + origin.Listener.Addr().String() + "/start"

	resp, err := h.client("alice", "secret", nil).Get(start)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "http://"+deniedAP.String()+"/internal" {
		t.Fatalf("got %d Location %q, want the 302 relayed", resp.StatusCode, resp.Header.Get("Location"))
	}
	if d := h.one(t); !d.Allow {
		t.Errorf("decision: got %+v, want allow", d)
	}

	// A client that follows redirects sends a new request, decided again.
	tr := &http.Transport{Proxy: http.ProxyURL(h.proxyURL("alice", "secret"))}
	defer tr.CloseIdleConnections()
	resp, err = (&http.Client{Transport: tr}).Get(start)
	if err != nil {
		t.Fatal(err)
	}
	wantProxyRefusal(t, resp, 403, CodeDenied, ReasonLoopback)
	d := h.decided()
	if len(d) != 2 || !d[0].Allow || d[1].Allow || d[1].Reason != ReasonLoopback {
		t.Errorf("decisions: got %+v, want allow then deny loopback", d)
	}
	if n := accepts.Load(); n != 0 {
		t.Errorf("denied listener accepted %d connections, want 0", n)
	}
}

// WebSocket framing, just enough for the test client (RFC 6455 §5.2).
func wsWriteFrame(w io.Writer, opcode byte, payload []byte) error {
	head := []byte{0x80 | opcode}
	switch n := len(payload); {
	case n < 126:
		head = append(head, 0x80|byte(n))
	case n < 1<<16:
		head = append(head, 0x80|126, byte(n>>8), byte(n))
	default:
		head = binary.BigEndian.AppendUint64(append(head, 0x80|127), uint64(n))
	}
	mask := []byte{0x11, 0x22, 0x33, 0x44}
	head = append(head, mask...)
	masked := make([]byte, len(payload))
	for i, b := range payload {
		masked[i] = b ^ mask[i%4]
	}
	_, err := w.Write(append(head, masked...))
	return err
}

func wsReadFrame(r io.Reader) (byte, []byte, error) {
	var h [2]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, nil, err
	}
	if h[1]&0x80 != 0 {
		return 0, nil, errors.New("server frame is masked")
	}
	n := uint64(h[1] & 0x7f)
	switch n {
	case 126:
		var b [2]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return 0, nil, err
		}
		n = uint64(binary.BigEndian.Uint16(b[:]))
	case 127:
		var b [8]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return 0, nil, err
		}
		n = binary.BigEndian.Uint64(b[:])
	}
	p := make([]byte, n)
	_, err := io.ReadFull(r, p)
	return h[0] & 0x0f, p, err
}

func TestProxyWebSocket(t *testing.T) {
	origin := httptest.NewServer(websocket.Handler(func(ws *websocket.Conn) {
		websocket.Message.Send(ws, "hello from the origin")
		for {
			var m string
			if err := websocket.Message.Receive(ws, &m); err != nil {
				return
			}
			websocket.Message.Send(ws, m)
		}
	}))
	defer origin.Close()
	deniedAP, accepts := proxyCountingListener(t, "127.0.0.2:0")
	h := newProxyHarness(t, proxyOpts{hosts: map[string][]netip.Addr{"ws.test": {proxyLoopback}}})
	key := base64.StdEncoding.EncodeToString([]byte("0123456789abcdef"))
	handshake := func(rawURL string) string {
		return proxyGetHead(rawURL, proxyBasic("alice", "secret"),
			"Connection: Upgrade",
			"Upgrade: websocket",
			"Origin: http://ws.test",
			"Sec-WebSocket-Version: 13",
			"Sec-WebSocket-Key: "+key)
	}

	t.Run("allowed", func(t *testing.T) {
		resp, conn, br := h.raw(t, handshake(fmt.Sprintf("http://ws.test:%d/echo", proxyPortOf(t, origin))))
		if resp.StatusCode != http.StatusSwitchingProtocols {
			t.Fatalf("status: got %d, want 101", resp.StatusCode)
		}
		sum := sha1.Sum([]byte(key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
		if got, want := resp.Header.Get("Sec-WebSocket-Accept"), base64.StdEncoding.EncodeToString(sum[:]); got != want {
			t.Errorf("Sec-WebSocket-Accept: got %q, want %q", got, want)
		}
		if d := h.one(t); !d.Allow || d.Host != "ws.test" {
			t.Errorf("decision: got %+v", d)
		}
		op, msg, err := wsReadFrame(br)
		if err != nil || op != 1 || string(msg) != "hello from the origin" {
			t.Fatalf("origin's first message: got %d %q %v", op, msg, err)
		}
		for _, m := range []string{"ping", strings.Repeat("x", 70000)} {
			if err := wsWriteFrame(conn, 1, []byte(m)); err != nil {
				t.Fatal(err)
			}
			op, msg, err := wsReadFrame(br)
			if err != nil || op != 1 || string(msg) != m {
				t.Fatalf("echo: got %d %d bytes %v, want %d bytes", op, len(msg), err, len(m))
			}
		}
		wsWriteFrame(conn, 8, []byte{0x03, 0xe8}) // close
	})

	t.Run("denied", func(t *testing.T) {
		resp, _, _ := h.raw(t, handshake("http://"+deniedAP.String()+"/echo"))
		wantProxyRefusal(t, resp, 403, CodeDenied, ReasonLoopback)
		if d := h.one(t); d.Allow {
			t.Errorf("decision: got %+v, want deny", d)
		}
		if n := accepts.Load(); n != 0 {
			t.Errorf("denied listener accepted %d connections, want 0", n)
		}
	})

	t.Run("not upgraded", func(t *testing.T) {
		plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "no websockets here", http.StatusNotFound)
		}))
		defer plain.Close()
		resp, _, _ := h.raw(t, handshake("http://"+plain.Listener.Addr().String()+"/"))
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 404 || !strings.Contains(string(body), "no websockets here") {
			t.Errorf("got %d %q, want the origin's 404 relayed", resp.StatusCode, body)
		}
		h.one(t)
	})
}

// proxyTCPServer serves one function per connection on 127.0.0.1.
func proxyTCPServer(t *testing.T, serve func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				serve(c)
			}()
		}
	}()
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	return ln.Addr().String()
}

// proxyDrainThenReply reads until EOF, then answers with the byte count.
func proxyDrainThenReply(c net.Conn) {
	c.SetDeadline(time.Now().Add(10 * time.Second))
	n, _ := io.Copy(io.Discard, c)
	fmt.Fprintf(c, "got %d bytes", n)
}

func TestProxyTunnelHalfClose(t *testing.T) {
	target := proxyTCPServer(t, proxyDrainThenReply)
	h := newProxyHarness(t, proxyOpts{})
	resp, conn, br := h.raw(t, proxyConnectHead(target, proxyBasic("alice", "secret")))
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT: got %d", resp.StatusCode)
	}
	h.one(t)
	payload := strings.Repeat("abc", 50000)
	if _, err := io.WriteString(conn, payload); err != nil {
		t.Fatal(err)
	}
	conn.(*net.TCPConn).CloseWrite()
	reply, err := io.ReadAll(br)
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("got %d bytes", len(payload)); string(reply) != want {
		t.Errorf("got %q, want %q", reply, want)
	}
}

func TestProxyTunnelIdle(t *testing.T) {
	target := proxyTCPServer(t, proxyDrainThenReply)
	h := newProxyHarness(t, proxyOpts{tune: func(p *Proxy) { p.IdleTimeout = 100 * time.Millisecond }})
	resp, _, br := h.raw(t, proxyConnectHead(target, proxyBasic("alice", "secret")))
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT: got %d", resp.StatusCode)
	}
	h.one(t)
	// Nothing is sent: the proxy ends the idle tunnel, well before the
	// 10 s deadline of the test's connection.
	b, err := io.ReadAll(br)
	if err != nil {
		t.Fatalf("got %v, want the tunnel closed by the proxy", err)
	}
	if len(b) != 0 {
		t.Errorf("got %q from an idle tunnel", b)
	}
}

func TestProxyMaxTunnels(t *testing.T) {
	target := proxyTCPServer(t, proxyDrainThenReply)
	h := newProxyHarness(t, proxyOpts{tune: func(p *Proxy) { p.MaxTunnels = 1 }})
	auth := proxyBasic("alice", "secret")
	resp, first, _ := h.raw(t, proxyConnectHead(target, auth))
	if resp.StatusCode != 200 {
		t.Fatalf("first CONNECT: got %d", resp.StatusCode)
	}
	h.one(t)

	resp, _, _ = h.raw(t, proxyConnectHead(target, auth))
	wantProxyRefusal(t, resp, 503, CodeUnavailable, ReasonRateLimited)
	if d := h.one(t); d.Allow || d.Reason != ReasonRateLimited {
		t.Errorf("decision: got %+v, want deny rate_limited", d)
	}

	first.Close()
	for i := 0; ; i++ {
		resp, _, _ = h.raw(t, proxyConnectHead(target, auth))
		h.one(t)
		if resp.StatusCode == 200 {
			break
		}
		if i == 100 {
			t.Fatalf("the slot was not released: got %d", resp.StatusCode)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestProxyOriginForm(t *testing.T) {
	h := newProxyHarness(t, proxyOpts{})
	for _, head := range []string{
		"GET /path HTTP/1.1\r\nHost: example.com\r\nProxy-Authorization: " + proxyBasic("alice", "secret") + "\r\n\r\n",
		"POST /submit HTTP/1.1\r\nHost: example.com\r\nContent-Length: 0\r\n\r\n",
	} {
		resp, _, _ := h.raw(t, head)
		wantProxyRefusal(t, resp, 400, CodeInvalid, ReasonMalformed)
	}
	if d := h.decided(); len(d) != 0 {
		t.Errorf("got %d decisions for non-proxy requests, want 0", len(d))
	}
}

func TestProxyHeaderCap(t *testing.T) {
	h := newProxyHarness(t, proxyOpts{tune: func(p *Proxy) { p.MaxHeaderBytes = 1024 }})
	big := "X-Big: " + strings.Repeat("b", 2048)
	for _, head := range []string{
		proxyGetHead("http://127.0.0.1:9/", proxyBasic("alice", "secret"), big),
		strings.Replace(proxyConnectHead("127.0.0.1:9", proxyBasic("alice", "secret")), "\r\n\r\n", "\r\n"+big+"\r\n\r\n", 1),
	} {
		resp, _, _ := h.raw(t, head)
		wantProxyRefusal(t, resp, http.StatusRequestHeaderFieldsTooLarge, CodeTooLarge, ReasonHeaderTooLarge)
		if d := h.one(t); d.Allow || d.Reason != ReasonHeaderTooLarge {
			t.Errorf("decision: got %+v", d)
		}
	}

	// The upstream's response header is capped too.
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Huge", strings.Repeat("h", 4096))
	}))
	defer origin.Close()
	resp, _, _ := h.raw(t, proxyGetHead("http://"+origin.Listener.Addr().String()+"/", proxyBasic("alice", "secret")))
	wantProxyRefusal(t, resp, 502, CodeTooLarge, ReasonHeaderTooLarge)
	h.one(t)
}

// proxyStallResolver answers nothing until its context ends.
type proxyStallResolver struct{}

func (proxyStallResolver) LookupNetIP(ctx context.Context, _, _ string) ([]netip.Addr, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func TestProxyTimeouts(t *testing.T) {
	t.Run("dns", func(t *testing.T) {
		h := newProxyHarness(t, proxyOpts{resolver: proxyStallResolver{}, dialer: func(d *Dialer) { d.DNSTimeout = 50 * time.Millisecond }})
		for _, head := range []string{
			proxyConnectHead("slow.test:443", proxyBasic("alice", "secret")),
			proxyGetHead("http://slow.test/", proxyBasic("alice", "secret")),
		} {
			resp, _, _ := h.raw(t, head)
			wantProxyRefusal(t, resp, 504, CodeTimeout, ReasonDNSTimeout)
			if d := h.one(t); d.Allow || d.Reason != ReasonDNSTimeout {
				t.Errorf("decision: got %+v", d)
			}
		}
	})
	t.Run("headers", func(t *testing.T) {
		release := make(chan struct{})
		target := proxyTCPServer(t, func(c net.Conn) {
			<-release // accept, read nothing, answer nothing
		})
		defer close(release)
		h := newProxyHarness(t, proxyOpts{tune: func(p *Proxy) { p.HeaderTimeout = 100 * time.Millisecond }})
		resp, _, _ := h.raw(t, proxyGetHead("http://"+target+"/", proxyBasic("alice", "secret")))
		wantProxyRefusal(t, resp, 504, CodeTimeout, ReasonTimeout)
		h.one(t)
	})
}

func TestProxyUpstreamRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	h := newProxyHarness(t, proxyOpts{})
	for _, head := range []string{
		proxyConnectHead(closed, proxyBasic("alice", "secret")),
		proxyGetHead("http://"+closed+"/", proxyBasic("alice", "secret")),
	} {
		resp, _, _ := h.raw(t, head)
		wantProxyRefusal(t, resp, 502, CodeUpstream, ReasonConnect)
		if d := h.one(t); !d.Allow {
			t.Errorf("decision: got %+v, want allow (the connect failed after it)", d)
		}
	}
}

func TestProxyClose(t *testing.T) {
	target := proxyTCPServer(t, proxyDrainThenReply)
	h := newProxyHarness(t, proxyOpts{})
	resp, _, br := h.raw(t, proxyConnectHead(target, proxyBasic("alice", "secret")))
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT: got %d", resp.StatusCode)
	}
	h.one(t)
	h.proxy.Close()
	if _, err := io.ReadAll(br); err != nil {
		t.Errorf("tunnel after Close: got %v, want EOF", err)
	}
	resp, _, _ = h.raw(t, proxyConnectHead(target, proxyBasic("alice", "secret")))
	wantProxyRefusal(t, resp, 503, CodeUnavailable, ReasonCanceled)
}

// TestProxyClientDone: closing a client's Done ends its open tunnel (a
// revoked principal's connections are cut).
func TestProxyClientDone(t *testing.T) {
	target := proxyTCPServer(t, proxyDrainThenReply)
	done := make(chan struct{})
	h := newProxyHarness(t, proxyOpts{creds: map[string]proxyCred{"alice": {pass: "secret", client: ProxyClient{Key: "alice", Done: done}}}})
	resp, conn, br := h.raw(t, proxyConnectHead(target, proxyBasic("alice", "secret")))
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT: got %d", resp.StatusCode)
	}
	h.one(t)
	if _, err := io.WriteString(conn, "still open"); err != nil {
		t.Fatal(err)
	}
	close(done)
	// The proxy closes the tunnel (an EOF, or a reset for bytes it had
	// not read), well before the test connection's deadline; the target
	// never got an EOF to reply to.
	b, err := io.ReadAll(br)
	if isTimeout(err) {
		t.Fatalf("got %v, want the tunnel closed by the proxy", err)
	}
	if len(b) != 0 {
		t.Errorf("got %q from a cut tunnel", b)
	}
}
