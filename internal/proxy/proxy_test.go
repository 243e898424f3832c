package proxy_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/egress/egresstest"
	"github.com/airlockhq/airlock/engine"
)

func TestHTTPAndConnectThroughProxy(t *testing.T) {
	h := newHarness(t)
	c := h.client(h.proxyURL())

	resp, err := c.Get(h.siteURL("/plain"))
	if err != nil {
		t.Fatal(err)
	}
	if got := body(t, resp); resp.StatusCode != 200 || got != "hello from /plain" {
		t.Fatalf("plain: got %d %q", resp.StatusCode, got)
	}
	if resp.Header.Get("X-Airlock-Decision") == "" {
		t.Errorf("plain: no X-Airlock-Decision on a forwarded answer")
	}

	resp, err = c.Get(h.tlsURL("/secure"))
	if err != nil {
		t.Fatal(err)
	}
	if got := body(t, resp); resp.StatusCode != 200 || got != "secure hello from /secure" {
		t.Fatalf("tls: got %d %q", resp.StatusCode, got)
	}

	// A tunnel's record comes when it ends: closing the client's pooled
	// connections ends it.
	c.CloseIdleConnections()
	for _, w := range []string{"connect://site.test:" + strconv.Itoa(h.tlsPort), h.siteURL("/plain")} {
		h.waitRecord(t, func(r airlock.AuditRecord) bool { return r.Outcome == "allow" && r.Tenant == "acme" && r.Target == w })
	}
}

// refusal asks the proxy for target (absolute URL or CONNECT host:port)
// and returns the answer.
func refusal(t *testing.T, h *harness, method, target, auth string) *http.Response {
	t.Helper()
	conn, err := net.DialTimeout("tcp", h.proxyAddr, testTimeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(testTimeout))
	host := target
	if _, u, ok := strings.Cut(target, "://"); ok {
		host, _, _ = strings.Cut(u, "/")
	}
	req := method + " " + target + " HTTP/1.1\r\nHost: " + host + "\r\n"
	if auth != "" {
		req += "Proxy-Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte(auth)) + "\r\n"
	}
	req += "\r\n"
	if _, err := io.WriteString(conn, req); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: method})
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func TestRefusals(t *testing.T) {
	h := newHarness(t)
	auth := "agent:" + h.tok
	other := strconv.Itoa(h.httpPort + 1)
	if h.httpPort+1 == h.tlsPort {
		other = strconv.Itoa(h.httpPort + 2)
	}
	tests := []struct {
		name, method, target, auth string
		status                     int
		reason                     airlock.Reason
	}{
		{"no credentials", "GET", h.siteURL("/"), "", 407, airlock.ReasonProxyCredentials},
		{"unknown token", "GET", h.siteURL("/"), "agent:alk_nope", 407, airlock.ReasonProxyCredentials},
		{"another port", "GET", "http://site.test:" + other + "/", auth, 403, airlock.ReasonInternalAddress},
		{"another port CONNECT", "CONNECT", "site.test:" + other, auth, 403, airlock.ReasonInternalAddress},
		{"name into the floor", "GET", "http://internal.test:" + strconv.Itoa(h.httpPort) + "/", auth, 403, airlock.ReasonInternalAddress},
		{"name into the floor CONNECT", "CONNECT", "internal.test:443", auth, 403, airlock.ReasonInternalAddress},
		{"loopback literal", "CONNECT", "127.0.0.9:443", auth, 403, airlock.ReasonLoopback},
		{"IPv6 loopback literal", "CONNECT", "[::1]:" + strconv.Itoa(h.tlsPort), auth, 403, airlock.ReasonLoopback},
		{"v4-mapped IPv6 literal", "GET", "http://[::ffff:127.0.0.1]:" + strconv.Itoa(h.httpPort) + "/", auth, 403, airlock.ReasonIPv4Embedded},
		{"metadata literal", "GET", "http://169.254.169.254/latest/meta-data/", auth, 403, airlock.ReasonMetadata},
		{"ambiguous host", "CONNECT", "0x7f.1:443", auth, 403, airlock.ReasonNumericHost},
		{"https in absolute form", "GET", "https://site.test:" + strconv.Itoa(h.tlsPort) + "/", auth, 400, airlock.ReasonScheme},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp := refusal(t, h, tc.method, tc.target, tc.auth)
			b := body(t, resp)
			if resp.StatusCode != tc.status {
				t.Fatalf("status: got %d, want %d (%s, %v)", resp.StatusCode, tc.status, b, resp.Header)
			}
			if got := resp.Header.Get("X-Airlock-Reason"); got != string(tc.reason) {
				t.Errorf("reason: got %q, want %q", got, tc.reason)
			}
			if tc.status != 407 && resp.Header.Get("X-Airlock-Decision") == "" {
				t.Errorf("no X-Airlock-Decision")
			}
			if strings.Count(strings.TrimRight(b, "\n"), "\n") != 0 {
				t.Errorf("body is not one line: %q", b)
			}
			// Only an address the caller gave may be named.
			for _, a := range []string{"127.0.0.9", "127.0.0.1"} {
				if strings.Contains(b, a) && !strings.Contains(tc.target, a) {
					t.Errorf("body names an internal address: %q", b)
				}
			}
		})
	}
	// Every refusal but the unauthenticated ones is an audited decision
	// with the id the answer carried.
	recs := h.audit(t)
	denied := 0
	for _, r := range recs {
		if r.Outcome == "deny" || r.Outcome == "error" {
			denied++
		}
	}
	if want := len(tests) - 2; denied != want {
		t.Errorf("audit: %d refusals recorded, want %d: %+v", denied, want, recs)
	}
	// The metrics count connections and refusals by reason.
	rec := httptest.NewRecorder()
	h.en.Metrics().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	for _, want := range []string{
		`airlock_proxy_connections_total{protocol="http"} ` + strconv.Itoa(len(tests)),
		`airlock_proxy_refusals_total{reason="internal_address"} 4`,
		`airlock_proxy_refusals_total{reason="proxy_credentials"} 2`,
	} {
		if !strings.Contains(rec.Body.String(), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

func TestCapabilityRefused(t *testing.T) {
	h := newHarness(t, func(c *engine.Config, _ *engine.ProxyOptions) {
		tc := c.Tenants["calc"]
		tc.Tokens = []string{engine.HashToken("alk_calc_token")}
		c.Tenants["calc"] = tc
	})
	resp := refusal(t, h, "GET", h.siteURL("/"), "x:alk_calc_token")
	body(t, resp)
	if resp.StatusCode != 403 || resp.Header.Get("X-Airlock-Reason") != string(airlock.ReasonCapability) {
		t.Fatalf("got %d %q, want 403 capability", resp.StatusCode, resp.Header.Get("X-Airlock-Reason"))
	}
}

// tunnel opens a CONNECT tunnel to hostport and returns the connection
// after the 200.
func tunnel(t *testing.T, h *harness, hostport string) net.Conn {
	t.Helper()
	conn, err := net.DialTimeout("tcp", h.proxyAddr, testTimeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(testTimeout))
	io.WriteString(conn, "CONNECT "+hostport+" HTTP/1.1\r\nHost: "+hostport+"\r\nProxy-Authorization: Basic "+
		base64.StdEncoding.EncodeToString([]byte("a:"+h.tok))+"\r\n\r\n")
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, &http.Request{Method: "CONNECT"})
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT %s: %d %s", hostport, resp.StatusCode, resp.Header.Get("X-Airlock-Reason"))
	}
	if br.Buffered() > 0 {
		t.Fatal("bytes after the 200")
	}
	return conn
}

func TestSNIChecks(t *testing.T) {
	h := newHarness(t)
	target := "site.test:" + strconv.Itoa(h.tlsPort)
	tests := []struct {
		name       string
		serverName string
		ok         bool
		reason     airlock.Reason
	}{
		{"matching SNI", "site.test", true, ""},
		{"fronting: another name the certificate also holds", "other.test", false, airlock.ReasonSNIMismatch},
		{"no SNI to a name", "", false, airlock.ReasonSNIMissing},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			conn := tunnel(t, h, target)
			tc2 := tls.Client(conn, &tls.Config{ServerName: tc.serverName, RootCAs: h.ca, InsecureSkipVerify: tc.serverName == ""})
			err := tc2.Handshake()
			if tc.ok != (err == nil) {
				t.Fatalf("handshake: err %v, want ok=%v", err, tc.ok)
			}
			if !tc.ok && !strings.Contains(err.Error(), "access denied") {
				t.Errorf("handshake error %q: want the proxy's access_denied alert", err)
			}
		})
	}
	recs := h.audit(t)
	for _, want := range []airlock.Reason{airlock.ReasonSNIMismatch, airlock.ReasonSNIMissing} {
		found := false
		for _, r := range recs {
			found = found || r.Reason == string(want)
		}
		if !found {
			t.Errorf("audit: no record with reason %s", want)
		}
	}
}

func TestNonTLSTunnel(t *testing.T) {
	h := newHarness(t)
	// The plain site's port is not a plain port: a tunnel carrying plain
	// HTTP to it is refused before a byte reaches it.
	conn := tunnel(t, h, "site.test:"+strconv.Itoa(h.httpPort))
	io.WriteString(conn, "GET / HTTP/1.1\r\nHost: site.test\r\n\r\n")
	b, _ := io.ReadAll(conn)
	if len(b) != 0 {
		t.Fatalf("non-TLS tunnel got an answer: %q", b)
	}
	select {
	case host := <-h.hosts:
		t.Fatalf("the site saw a request (Host %q)", host)
	default:
	}
}

func TestNonTLSTunnelPlainPort(t *testing.T) {
	// The site's port is known only once it runs: a second proxy on the
	// harness's engine lists it.
	h := newHarness(t)
	srv, err := h.en.NewProxy(engine.ProxyOptions{PlainPorts: []uint16{uint16(h.httpPort)}})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	h.proxyAddr = ln.Addr().String()
	conn := tunnel(t, h, "site.test:"+strconv.Itoa(h.httpPort))
	io.WriteString(conn, "GET /raw HTTP/1.0\r\nHost: site.test\r\n\r\n")
	// A client that half-closes its side still reads the answer.
	conn.(*net.TCPConn).CloseWrite()
	b, _ := io.ReadAll(conn)
	if !strings.Contains(string(b), "hello from /raw") {
		t.Fatalf("plain port tunnel: got %q", b)
	}
}

func TestRevocationCutsTunnel(t *testing.T) {
	h := newHarness(t)
	conn := tunnel(t, h, "site.test:"+strconv.Itoa(h.tlsPort))
	tc := tls.Client(conn, &tls.Config{ServerName: "site.test", RootCAs: h.ca})
	if err := tc.Handshake(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := h.en.Revoke(ctx, "acme", "test"); err != nil {
		t.Fatal(err)
	}
	// The tunnel is closed: a read ends (EOF or reset) long before the
	// hang guard.
	tc.SetReadDeadline(time.Now().Add(testTimeout))
	buf := make([]byte, 1)
	_, err := tc.Read(buf)
	if err == nil {
		t.Fatal("read on a revoked tunnel returned data")
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("the revoked tunnel stayed open")
	}
	// A new request of the revoked tenant is refused.
	resp := refusal(t, h, "GET", h.siteURL("/"), "a:"+h.tok)
	body(t, resp)
	if resp.StatusCode != 403 || resp.Header.Get("X-Airlock-Reason") != string(airlock.ReasonRevoked) {
		t.Fatalf("after revocation: %d %q", resp.StatusCode, resp.Header.Get("X-Airlock-Reason"))
	}
}

func TestSOCKS5(t *testing.T) {
	h := newHarness(t)
	u := h.proxyURL()
	u.Scheme = "socks5"
	c := h.client(u)
	resp, err := c.Get(h.tlsURL("/socks"))
	if err != nil {
		t.Fatal(err)
	}
	if got := body(t, resp); got != "secure hello from /socks" {
		t.Fatalf("got %q", got)
	}
	// A name into the floor: refused, the program sees the SOCKS reply.
	_, err = c.Get("https://internal.test:" + strconv.Itoa(h.tlsPort) + "/")
	if err == nil || !strings.Contains(err.Error(), "not allowed") {
		t.Fatalf("internal.test through SOCKS5: err %v, want a ruleset refusal", err)
	}
	// Wrong password: the SOCKS5 authentication fails.
	bad := *u
	bad.User = nil
	_, err = h.client(&bad).Get(h.tlsURL("/"))
	if err == nil {
		t.Fatal("SOCKS5 without credentials was served")
	}
	h.waitRecord(t, func(r airlock.AuditRecord) bool {
		return r.Reason == string(airlock.ReasonInternalAddress) && strings.HasPrefix(r.Target, "socks5://internal.test:")
	})
}

func TestSOCKS4Refused(t *testing.T) {
	h := newHarness(t)
	conn, err := net.DialTimeout("tcp", h.proxyAddr, testTimeout)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(testTimeout))
	port := uint16(h.httpPort)
	conn.Write([]byte{4, 1, byte(port >> 8), byte(port), 127, 0, 0, 1, 'u', 0})
	reply := make([]byte, 8)
	if _, err := io.ReadFull(conn, reply); err != nil {
		t.Fatal(err)
	}
	if reply[1] != 0x5b {
		t.Fatalf("SOCKS4 reply %#x, want 0x5b (rejected)", reply[1])
	}
	select {
	case host := <-h.hosts:
		t.Fatalf("the site saw a request (Host %q)", host)
	default:
	}
}

// TestServeAs: every connection of a ServeAs listener (a Unix socket) is
// the given principal, without credentials, over HTTP and SOCKS5.
func TestServeAs(t *testing.T) {
	h := newHarness(t)
	sock := t.TempDir() + "/proxy.sock"
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	go h.srv.ServeAs(ln, airlock.Principal{Tenant: "acme", Instance: "exec-1"})
	dial := func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}
	for _, scheme := range []string{"http", "socks5"} {
		t.Run(scheme, func(t *testing.T) {
			tr := &http.Transport{
				Proxy:           http.ProxyURL(&url.URL{Scheme: scheme, Host: "proxy.sock:1"}),
				DialContext:     dial,
				TLSClientConfig: &tls.Config{RootCAs: h.ca},
			}
			defer tr.CloseIdleConnections()
			c := &http.Client{Transport: tr, Timeout: testTimeout}
			for _, u := range []string{h.siteURL("/as"), h.tlsURL("/as")} {
				if scheme == "socks5" && strings.HasPrefix(u, "http:") {
					continue // a plain-HTTP tunnel: not TLS, not a plain port
				}
				resp, err := c.Get(u)
				if err != nil {
					t.Fatal(err)
				}
				if b := body(t, resp); resp.StatusCode != 200 || !strings.Contains(b, "hello from /as") {
					t.Fatalf("%s: %d %q", u, resp.StatusCode, b)
				}
			}
			resp, err := c.Get("http://internal.test:" + strconv.Itoa(h.httpPort) + "/")
			if scheme == "http" {
				if err != nil {
					t.Fatal(err)
				}
				body(t, resp)
				if resp.StatusCode != 403 || resp.Header.Get("X-Airlock-Reason") != string(airlock.ReasonInternalAddress) {
					t.Fatalf("refusal: %d %q", resp.StatusCode, resp.Header.Get("X-Airlock-Reason"))
				}
			}
		})
	}
	h.waitRecord(t, func(r airlock.AuditRecord) bool {
		return r.Tenant == "acme" && r.Instance == "exec-1" && r.Outcome == "allow"
	})
	h.waitRecord(t, func(r airlock.AuditRecord) bool {
		return r.Instance == "exec-1" && r.Reason == string(airlock.ReasonInternalAddress)
	})
}

// TestKeepAliveRechecked: each request of a kept-alive plain-HTTP
// connection is decided again: a client that switches hosts on one
// connection is refused for the refused host.
func TestKeepAliveRechecked(t *testing.T) {
	h := newHarness(t)
	conn, err := net.DialTimeout("tcp", h.proxyAddr, testTimeout)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(testTimeout))
	br := bufio.NewReader(conn)
	auth := "Proxy-Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte("a:"+h.tok)) + "\r\n"
	for i, tc := range []struct {
		url    string
		status int
	}{
		{h.siteURL("/one"), 200},
		{"http://internal.test:" + strconv.Itoa(h.httpPort) + "/two", 403},
		{h.siteURL("/three"), 200},
	} {
		io.WriteString(conn, "GET "+tc.url+" HTTP/1.1\r\nHost: x\r\n"+auth+"\r\n")
		resp, err := http.ReadResponse(br, &http.Request{Method: "GET"})
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		body(t, resp)
		if resp.StatusCode != tc.status {
			t.Fatalf("request %d (%s): status %d, want %d", i, tc.url, resp.StatusCode, tc.status)
		}
	}
}

// TestHostHeaderIgnored: an HTTP/1.0 absolute-form request whose Host
// header names another host is decided and sent on the URL's host alone;
// the Host header never reaches the target.
func TestHostHeaderIgnored(t *testing.T) {
	h := newHarness(t)
	auth := "Proxy-Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte("a:"+h.tok)) + "\r\n"
	send := func(target, host string) *http.Response {
		conn, err := net.DialTimeout("tcp", h.proxyAddr, testTimeout)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		conn.SetDeadline(time.Now().Add(testTimeout))
		io.WriteString(conn, "GET "+target+" HTTP/1.0\r\nHost: "+host+"\r\n"+auth+"\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: "GET"})
		if err != nil {
			t.Fatal(err)
		}
		body(t, resp)
		return resp
	}
	// Refused URL, allowed Host: refused.
	if resp := send("http://internal.test:"+strconv.Itoa(h.httpPort)+"/", "site.test:"+strconv.Itoa(h.httpPort)); resp.StatusCode != 403 {
		t.Fatalf("refused URL with an allowed Host header: %d", resp.StatusCode)
	}
	// Allowed URL, another Host: the site sees the URL's host.
	if resp := send(h.siteURL("/h"), "internal.test"); resp.StatusCode != 200 {
		t.Fatalf("allowed URL: %d", resp.StatusCode)
	}
	select {
	case got := <-h.hosts:
		if want := "site.test:" + strconv.Itoa(h.httpPort); got != want {
			t.Fatalf("the site saw Host %q, want %q", got, want)
		}
	case <-time.After(testTimeout):
		t.Fatal("the site saw no request")
	}
}

func TestTunnelByteCap(t *testing.T) {
	h := newHarness(t)
	srv, err := h.en.NewProxy(engine.ProxyOptions{MaxTunnelBytes: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	h.proxyAddr = ln.Addr().String()
	c := h.client(h.proxyURL())
	// A body larger than the cap: the tunnel is cut.
	big := strings.Repeat("x", 256<<10)
	_, err = c.Post(h.tlsURL("/big"), "text/plain", strings.NewReader(big))
	if err == nil {
		t.Fatal("a 256 KiB upload passed a 64 KiB tunnel cap")
	}
	h.waitRecord(t, func(r airlock.AuditRecord) bool { return r.Reason == string(airlock.ReasonTunnelBytes) })
}

// TestDNSRebinding: a name whose answers move from the site's address to
// another loopback address is decided on each connection's one
// resolution: the first is carried, the second refused, and the refusal
// does not name the address.
func TestDNSRebinding(t *testing.T) {
	dns, err := egresstest.StartDNS()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dns.Close() })
	dns.SetSequence("rebind.test", 0, []netip.Addr{netip.MustParseAddr("127.0.0.1")}, []netip.Addr{netip.MustParseAddr("127.0.0.9")})
	h := newHarness(t, func(c *engine.Config, _ *engine.ProxyOptions) { c.Egress.DNSServer = dns.Addr() })
	u := "http://rebind.test:" + strconv.Itoa(h.httpPort) + "/"
	resp := refusal(t, h, "GET", u, "a:"+h.tok)
	if b := body(t, resp); resp.StatusCode != 200 {
		t.Fatalf("first answer: %d %q", resp.StatusCode, b)
	}
	resp = refusal(t, h, "GET", u, "a:"+h.tok)
	b := body(t, resp)
	if resp.StatusCode != 403 || resp.Header.Get("X-Airlock-Reason") != string(airlock.ReasonInternalAddress) {
		t.Fatalf("rebound answer: %d %q %q", resp.StatusCode, resp.Header.Get("X-Airlock-Reason"), b)
	}
	if strings.Contains(b, "127.0.0.9") {
		t.Fatalf("the refusal names the address: %q", b)
	}
}

// TestRateLimited: past the tenant's rate the proxy answers 429 with
// Retry-After, an audited decision.
func TestRateLimited(t *testing.T) {
	h := newHarness(t, func(c *engine.Config, _ *engine.ProxyOptions) {
		tc := c.Tenants["acme"]
		tc.Rate, tc.Burst = 0.001, 1
		c.Tenants["acme"] = tc
	})
	body(t, refusal(t, h, "GET", h.siteURL("/"), "a:"+h.tok))
	resp := refusal(t, h, "GET", h.siteURL("/"), "a:"+h.tok)
	body(t, resp)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" || resp.Header.Get("X-Airlock-Decision") == "" {
		t.Fatalf("over the rate: %d %v", resp.StatusCode, resp.Header)
	}
}

// TestProfileTunnelCap: a tenant's profile caps its tunnels below the
// proxy's own cap.
func TestProfileTunnelCap(t *testing.T) {
	h := newHarness(t, func(c *engine.Config, _ *engine.ProxyOptions) {
		c.Profiles = map[string]engine.ProfileConfig{"small": {Capabilities: []string{"http"}, TunnelBytes: 64 << 10}}
		tc := c.Tenants["acme"]
		tc.Profile = "small"
		c.Tenants["acme"] = tc
	})
	c := h.client(h.proxyURL())
	resp, err := c.Get(h.tlsURL("/small"))
	if err != nil {
		t.Fatal(err)
	}
	body(t, resp)
	_, err = c.Post(h.tlsURL("/big"), "text/plain", strings.NewReader(strings.Repeat("x", 256<<10)))
	if err == nil {
		t.Fatal("a 256 KiB upload passed the profile's 64 KiB tunnel cap")
	}
	h.waitRecord(t, func(r airlock.AuditRecord) bool { return r.Reason == string(airlock.ReasonTunnelBytes) })
}

// TestInstanceFromUserName: the proxy user name names the instance; an
// instance's revocation cuts its tunnels and leaves the tenant's other
// instances alone.
func TestInstanceFromUserName(t *testing.T) {
	h := newHarness(t)
	open := func(user string) *tls.Conn {
		conn, err := net.DialTimeout("tcp", h.proxyAddr, testTimeout)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		conn.SetDeadline(time.Now().Add(testTimeout))
		hp := "site.test:" + strconv.Itoa(h.tlsPort)
		io.WriteString(conn, "CONNECT "+hp+" HTTP/1.1\r\nHost: "+hp+"\r\nProxy-Authorization: Basic "+
			base64.StdEncoding.EncodeToString([]byte(user+":"+h.tok))+"\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: "CONNECT"})
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("CONNECT as %s: %v %v", user, resp, err)
		}
		tc := tls.Client(conn, &tls.Config{ServerName: "site.test", RootCAs: h.ca})
		if err := tc.Handshake(); err != nil {
			t.Fatal(err)
		}
		return tc
	}
	a, b := open("agent-a"), open("agent-b")
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := h.en.Revoke(ctx, "acme/agent-a", "test"); err != nil {
		t.Fatal(err)
	}
	a.SetReadDeadline(time.Now().Add(testTimeout))
	var ne net.Error
	if _, err := a.Read(make([]byte, 1)); err == nil || errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("agent-a's tunnel after its revocation: %v", err)
	}
	// agent-b's tunnel still carries a request.
	io.WriteString(b, "GET /b HTTP/1.1\r\nHost: site.test\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(b), &http.Request{Method: "GET"})
	if err != nil {
		t.Fatal(err)
	}
	if got := body(t, resp); got != "secure hello from /b" {
		t.Fatalf("agent-b: %q", got)
	}
	h.waitRecord(t, func(r airlock.AuditRecord) bool {
		return r.Instance == "agent-a" && r.Code == string(airlock.CodeRevoked)
	})
	resp = refusal(t, h, "GET", h.siteURL("/"), "bad/name:"+h.tok)
	body(t, resp)
	if resp.StatusCode != 407 {
		t.Fatalf("a user name that is not an instance name: %d", resp.StatusCode)
	}
}
