//go:build unix

//lint:file-ignore SA1019 the h2 test drives a pre-dialled connection through x/net/http2, as client.go does

package egress

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	utls "github.com/refraction-networking/utls"
	"golang.org/x/net/http2"

	"github.com/airlockhq/airlock/egress/egresstest"
)

// Golden JA4 values.
const (
	// ja4Chrome is current Chrome's JA4 (Chrome 152 and later: 17
	// extensions with trust_anchors, ML-DSA signature schemes). Published
	// for real Chrome 152 and 153.0.8010.48 stable in
	// github.com/bogdanfinn/tls-client issue #281, and observed here from
	// Debian's Chromium 156.0.8078.79 (TestChromiumJA4).
	ja4Chrome = "t13d1517h2_8daaf6152771_cb7bf5808d99"
	// ja4Chrome133 is the JA4 that DEPENDENCIES.md records for utls's
	// HelloChrome_133: what Chrome sent before trust_anchors (the FoxIO
	// database value for Chrome 133 to 151).
	ja4Chrome133 = "t13d1516h2_8daaf6152771_d8a2da3f94cd"
	// ja4GoTLS is Go 1.26's crypto/tls with ALPN h2, http/1.1. It changes
	// with the Go release, not with anything of ours: on a toolchain bump,
	// check the new value is crypto/tls's and update it.
	ja4GoTLS = "t13d1312h2_f57a46bbacb6_ab7e3b40a677"
)

// captureHello runs tlsHandshake against a ClientHelloServer and returns
// the ClientHello it sent.
func captureHello(t *testing.T, profile TLSProfile, serverName string, nextProtos []string) *egresstest.ClientHello {
	t.Helper()
	s, err := egresstest.StartClientHelloServer()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	c, _, err := tlsHandshake(ctx, conn, serverName, profile, nextProtos, nil)
	if err == nil {
		c.Close()
		t.Fatal("handshake succeeded against a server that only records hellos")
	}
	// The server answers with a handshake_failure alert: an upstream TLS
	// failure.
	if CodeOf(err) != CodeUpstream || ReasonOf(err) != ReasonTLS {
		t.Errorf("handshake error = %v, want code upstream, reason tls", err)
	}
	ch, err := s.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

// withoutExt removes extension ext from a JA4_r string's extension list.
func withoutExt(ja4r, ext string) string {
	parts := strings.Split(ja4r, "_")
	exts := slices.DeleteFunc(strings.Split(parts[2], ","), func(s string) bool { return s == ext })
	parts[2] = strings.Join(exts, ",")
	return strings.Join(parts[1:], "_")
}

func TestTLSProfileJA4(t *testing.T) {
	chromeH2 := captureHello(t, ProfileChrome, "ja4.test", nil)
	tests := []struct {
		name       string
		profile    TLSProfile
		serverName string
		nextProtos []string
		want       string
	}{
		{"chrome", ProfileChrome, "ja4.test", nil, ja4Chrome},
		{"chrome given h2", ProfileChrome, "ja4.test", []string{"h2", "http/1.1"}, ja4Chrome},
		{"chrome IP literal sends no SNI", ProfileChrome, "127.0.0.1", nil, "t13i1516h2_8daaf6152771_cb7bf5808d99"},
		{"chrome IPv6 literal", ProfileChrome, "::1", nil, "t13i1516h2_8daaf6152771_cb7bf5808d99"},
		{"go", ProfileGo, "ja4.test", []string{"h2", "http/1.1"}, ja4GoTLS},
		{"go without ALPN", ProfileGo, "ja4.test", nil, "t13d1311" + "00" + ja4GoTLS[10:]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ch := captureHello(t, tt.profile, tt.serverName, tt.nextProtos)
			if got := ch.JA4(); got != tt.want {
				t.Errorf("JA4 = %s, want %s\nJA4_r = %s", got, tt.want, ch.JA4R())
			}
		})
	}

	t.Run("chrome HTTP/1.1 only", func(t *testing.T) {
		// Chrome's HTTP/1.1-only connections offer http/1.1 alone and no
		// ALPS (application_settings, 44cd); nothing else changes.
		ch := captureHello(t, ProfileChrome, "ja4.test", []string{"http/1.1"})
		if !slices.Equal(ch.ALPN, []string{"http/1.1"}) {
			t.Errorf("ALPN = %q, want [http/1.1]", ch.ALPN)
		}
		if got, want := ch.JA4()[:23], "t13d1516h1_8daaf6152771"; got != want {
			t.Errorf("JA4 = %s, want prefix %s", ch.JA4(), want)
		}
		if got, want := withoutExt(ch.JA4R(), ""), withoutExt(chromeH2.JA4R(), "44cd"); got != want {
			t.Errorf("JA4_r lists = %s\nwant (h2 hello less 44cd) %s", got, want)
		}
	})

	t.Run("chrome details", func(t *testing.T) {
		ch := chromeH2
		if ch.ServerName != "ja4.test" {
			t.Errorf("SNI = %q, want ja4.test", ch.ServerName)
		}
		if !slices.Equal(ch.ALPN, []string{"h2", "http/1.1"}) {
			t.Errorf("ALPN = %q, want [h2 http/1.1]", ch.ALPN)
		}
		if b, _ := ch.Extension(extTrustAnchors); !bytes.Equal(b, chromeTrustAnchorIDs) {
			t.Errorf("trust_anchors = %x, want %x", b, chromeTrustAnchorIDs)
		}
		if len(ch.SignatureAlgorithms) == 0 || !egresstest.IsGREASE(ch.SignatureAlgorithms[0]) {
			t.Errorf("signature algorithms = %04x, want a GREASE value first", ch.SignatureAlgorithms)
		}
		groups := slices.DeleteFunc(slices.Clone(ch.KeyShareGroups), egresstest.IsGREASE)
		if want := []uint16{uint16(utls.X25519MLKEM768), uint16(utls.X25519)}; !slices.Equal(groups, want) {
			t.Errorf("key shares = %04x, want GREASE, %04x", ch.KeyShareGroups, want)
		}
		if n := len(ch.Extensions); !egresstest.IsGREASE(ch.Extensions[0]) || !egresstest.IsGREASE(ch.Extensions[n-1]) {
			t.Errorf("extensions = %04x, want GREASE first and last", ch.Extensions)
		}
	})
}

// TestTLSProfileUTLSChrome133JA4 pins the harness to the value
// DEPENDENCIES.md gives for utls's stock Chrome hello, which the chrome
// profile outgrew when Chrome added trust_anchors.
func TestTLSProfileUTLSChrome133JA4(t *testing.T) {
	s, err := egresstest.StartClientHelloServer()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	u := utls.UClient(conn, &utls.Config{ServerName: "ja4.test"}, utls.HelloChrome_133)
	if err := u.HandshakeContext(ctx); err == nil {
		t.Fatal("handshake succeeded")
	}
	u.Close()
	ch, err := s.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := ch.JA4(); got != ja4Chrome133 {
		t.Errorf("utls HelloChrome_133 JA4 = %s, want %s", got, ja4Chrome133)
	}
}

const chromiumPath = "/usr/lib/chromium/chromium"

// startChromium launches headless Chromium on url, with ja4.test mapped to
// 127.0.0.1. It is killed, with its whole process group, when ctx ends or
// the test finishes.
func startChromium(ctx context.Context, t *testing.T, url string, extra ...string) {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Fatalf("this test needs Debian's Chromium at %s: install it with `apt-get install chromium` (%v)", chromiumPath, err)
	}
	args := []string{
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--lang=en-US", "--user-data-dir=" + t.TempDir(),
		"--host-resolver-rules=MAP ja4.test 127.0.0.1",
	}
	args = append(append(args, extra...), url)
	cmd := exec.CommandContext(ctx, chromiumPath, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	stderr := &capBuffer{max: 8 << 10}
	cmd.Stdout, cmd.Stderr = io.Discard, stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	pgid := cmd.Process.Pid
	t.Cleanup(func() {
		syscall.Kill(-pgid, syscall.SIGKILL)
		cmd.Wait()
		// Let the renderer and zygote children die before TempDir removal.
		for i := 0; i < 50 && syscall.Kill(-pgid, 0) == nil; i++ {
			time.Sleep(20 * time.Millisecond)
		}
		if t.Failed() {
			t.Logf("chromium stderr (first %d bytes):\n%s", stderr.max, stderr.String())
		}
	})
}

// capBuffer keeps the first max bytes written to it.
type capBuffer struct {
	mu  sync.Mutex
	max int
	buf bytes.Buffer
}

func (b *capBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := b.max - b.buf.Len(); room > 0 {
		b.buf.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

func (b *capBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestChromiumJA4 checks the chrome profile against what the real Chromium
// on this machine sends.
func TestChromiumJA4(t *testing.T) {
	t.Parallel()
	s, err := egresstest.StartClientHelloServer()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	startChromium(ctx, t, fmt.Sprintf("https://ja4.test:%d/", s.Port()))
	real, err := s.Next(ctx)
	if err != nil {
		t.Fatalf("no ClientHello from Chromium within 30 s: %v", err)
	}
	if real.ServerName != "ja4.test" {
		t.Fatalf("Chromium's SNI = %q, want ja4.test", real.ServerName)
	}
	ours := captureHello(t, ProfileChrome, "ja4.test", nil)
	t.Logf("Chromium JA4 %s, chrome profile JA4 %s", real.JA4(), ours.JA4())
	if real.JA4() != ours.JA4() {
		t.Errorf("chrome profile JA4 = %s, real Chromium %s\nours JA4_r:     %s\nChromium JA4_r: %s",
			ours.JA4(), real.JA4(), ours.JA4R(), real.JA4R())
	}
	noGREASE := func(v []uint16) []uint16 { return slices.DeleteFunc(slices.Clone(v), egresstest.IsGREASE) }
	for _, f := range []struct {
		name        string
		ours, their []uint16
	}{
		{"supported groups", ours.SupportedGroups, real.SupportedGroups},
		{"key share groups", ours.KeyShareGroups, real.KeyShareGroups},
		{"supported versions", ours.SupportedVersions, real.SupportedVersions},
		{"cipher suites (wire order)", ours.CipherSuites, real.CipherSuites},
	} {
		if !slices.Equal(noGREASE(f.ours), noGREASE(f.their)) {
			t.Errorf("%s = %04x, Chromium sends %04x", f.name, f.ours, f.their)
		}
	}
	if !slices.Equal(ours.ALPN, real.ALPN) {
		t.Errorf("ALPN = %q, Chromium sends %q", ours.ALPN, real.ALPN)
	}
	// The trust anchor list follows Chromium's root store, which changes
	// without the JA4 changing: report, do not fail.
	if b, _ := real.Extension(extTrustAnchors); !bytes.Equal(b, chromeTrustAnchorIDs) {
		t.Logf("note: Chromium's trust_anchors body differs from chromeTrustAnchorIDs; consider refreshing it:\n%x", b)
	}
}

// TestChromiumProfileHeaders checks profileHeaders(ProfileChrome) against
// the headers the real Chromium sends for a typed navigation over HTTP/1.1.
func TestChromiumProfileHeaders(t *testing.T) {
	t.Parallel()
	hs := httptest.NewTLSServer(http.NotFoundHandler())
	cert := hs.TLS.Certificates[0]
	hs.Close()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"http/1.1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	heads := make(chan [][2]string, 4)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer ln.Close()
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				c.SetDeadline(time.Now().Add(20 * time.Second))
				br := bufio.NewReader(c)
				line, err := br.ReadString('\n')
				if err != nil || !strings.HasPrefix(line, "GET / ") {
					return
				}
				var head [][2]string
				for {
					l, err := br.ReadString('\n')
					l = strings.TrimRight(l, "\r\n")
					if err != nil || l == "" {
						break
					}
					k, v, _ := strings.Cut(l, ": ")
					head = append(head, [2]string{k, v})
				}
				select {
				case heads <- head:
				default:
				}
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
			}()
		}
	}()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	startChromium(ctx, t, fmt.Sprintf("https://ja4.test:%d/", ln.Addr().(*net.TCPAddr).Port), "--ignore-certificate-errors")
	var real [][2]string
	select {
	case real = <-heads:
	case <-ctx.Done():
		t.Fatal("no request from Chromium within 30 s")
	}
	// Host and Connection come first; the transport writes them.
	if len(real) < 2 || real[0][0] != "Host" || real[1][0] != "Connection" {
		t.Fatalf("Chromium's first headers = %q, want Host, Connection", real)
	}
	real = real[2:]
	ours := profileHeaders(ProfileChrome)

	names := func(h [][2]string) []string {
		var out []string
		for _, kv := range h {
			out = append(out, kv[0])
		}
		return out
	}
	if !slices.Equal(names(ours), names(real)) {
		t.Errorf("header order:\n ours     %q\n Chromium %q", names(ours), names(real))
	}
	get := func(h [][2]string, k string) string {
		for _, kv := range h {
			if kv[0] == k {
				return kv[1]
			}
		}
		return ""
	}
	for _, k := range []string{"sec-ch-ua-mobile", "Upgrade-Insecure-Requests", "Accept", "Sec-Fetch-Site",
		"Sec-Fetch-Mode", "Sec-Fetch-User", "Sec-Fetch-Dest", "Accept-Encoding", "Accept-Language"} {
		if got, want := get(ours, k), get(real, k); got != want {
			t.Errorf("%s = %q, Chromium sends %q", k, got, want)
		}
	}

	// Chromium's UA says HeadlessChrome and Linux; ours claims Chrome on
	// Windows. The version and the GREASE brand algorithm must agree.
	m := regexp.MustCompile(`Chrome/(\d+)\.0\.0\.0 `).FindStringSubmatch(get(real, "User-Agent"))
	if m == nil {
		t.Fatalf("Chromium's User-Agent %q has no reduced Chrome version", get(real, "User-Agent"))
	}
	major, _ := strconv.Atoi(m[1])
	if got, want := chromeBrands(major, false), get(real, "sec-ch-ua"); got != want {
		t.Errorf("chromeBrands(%d, Chromium) = %s, Chromium sends %s", major, got, want)
	}
	if major != chromeMajorVersion {
		t.Logf("note: installed Chromium is %d, the chrome profile claims %d; bump chromeMajorVersion once Chrome %d is stable and its ClientHello checked",
			major, chromeMajorVersion, major)
	}
}

func TestParseTLSProfile(t *testing.T) {
	tests := []struct {
		in      string
		want    TLSProfile
		wantErr bool
	}{
		{"", ProfileChrome, false},
		{"chrome", ProfileChrome, false},
		{" Chrome ", ProfileChrome, false},
		{"go", ProfileGo, false},
		{"GO", ProfileGo, false},
		{"firefox", "", true},
		{"chrome133", "", true},
	}
	for _, tt := range tests {
		got, err := ParseTLSProfile(tt.in)
		if tt.wantErr {
			var e *Error
			if !errors.As(err, &e) || e.Code != CodeInvalid {
				t.Errorf("ParseTLSProfile(%q) error = %v, want an *Error with code invalid", tt.in, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseTLSProfile(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
	for _, p := range TLSProfiles() {
		if got, err := ParseTLSProfile(string(p)); err != nil || got != p {
			t.Errorf("ParseTLSProfile(%q) = %q, %v", p, got, err)
		}
	}
	if TLSProfiles()[0] != DefaultTLSProfile {
		t.Errorf("TLSProfiles()[0] = %q, want the default %q", TLSProfiles()[0], DefaultTLSProfile)
	}
}

func TestProfileHeaders(t *testing.T) {
	goH := profileHeaders(ProfileGo)
	if len(goH) != 2 || goH[0][0] != "User-Agent" || !strings.HasPrefix(goH[0][1], "airlock/") ||
		goH[1] != [2]string{"Accept-Encoding", "gzip, deflate, br, zstd"} {
		t.Errorf("profileHeaders(go) = %q", goH)
	}

	// Golden values for chromeMajorVersion 156: update them with it.
	ch := profileHeaders(ProfileChrome)
	want := map[string]string{
		"sec-ch-ua":          `"Not:A-Brand";v="8", "Chromium";v="156", "Google Chrome";v="156"`,
		"sec-ch-ua-platform": `"Windows"`,
		"User-Agent":         "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/156.0.0.0 Safari/537.36",
		"Accept-Encoding":    "gzip, deflate, br, zstd",
	}
	for _, kv := range ch {
		if w, ok := want[kv[0]]; ok && kv[1] != w {
			t.Errorf("%s = %q, want %q", kv[0], kv[1], w)
		}
	}
	// Fresh slices: a caller may modify what it gets.
	ch[0][1] = "changed"
	if profileHeaders(ProfileChrome)[0][1] == "changed" {
		t.Error("profileHeaders returns shared state")
	}
}

func TestProfileChromeBrands(t *testing.T) {
	// Values Chrome sent, as seen in published request captures.
	tests := []struct {
		major  int
		chrome bool
		want   string
	}{
		{120, true, `"Not_A Brand";v="8", "Chromium";v="120", "Google Chrome";v="120"`},
		{131, true, `"Google Chrome";v="131", "Chromium";v="131", "Not_A Brand";v="24"`},
		{133, true, `"Not(A:Brand";v="99", "Google Chrome";v="133", "Chromium";v="133"`},
		{156, true, `"Not:A-Brand";v="8", "Chromium";v="156", "Google Chrome";v="156"`},
		{156, false, `"Not:A-Brand";v="8", "Chromium";v="156"`}, // Debian's Chromium 156
	}
	for _, tt := range tests {
		if got := chromeBrands(tt.major, tt.chrome); got != tt.want {
			t.Errorf("chromeBrands(%d, %v) = %s, want %s", tt.major, tt.chrome, got, tt.want)
		}
	}
}

// tlsTestServer starts a loopback HTTPS server; h2 enables HTTP/2.
func tlsTestServer(t *testing.T, h2 bool) (*httptest.Server, *x509.CertPool) {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.Proto)
	}))
	srv.EnableHTTP2 = h2
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // failed handshakes are the point
	srv.StartTLS()
	t.Cleanup(srv.Close)
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	return srv, pool
}

func dialTest(t *testing.T, addr string) net.Conn {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return conn
}

func TestTLSHandshakeALPN(t *testing.T) {
	h2srv, h2pool := tlsTestServer(t, true)
	h1srv, h1pool := tlsTestServer(t, false)
	tests := []struct {
		name       string
		srv        *httptest.Server
		pool       *x509.CertPool
		profile    TLSProfile
		serverName string
		nextProtos []string
		want       string
	}{
		{"chrome h2 server", h2srv, h2pool, ProfileChrome, "example.com", []string{"h2", "http/1.1"}, "h2"},
		{"chrome h1 server", h1srv, h1pool, ProfileChrome, "example.com", []string{"h2", "http/1.1"}, "http/1.1"},
		// httptest's HTTP/2 server offers only h2; Go then falls back to no
		// ALPN for an http/1.1 client, which means HTTP/1.1.
		{"chrome h1 only to h2 server", h2srv, h2pool, ProfileChrome, "example.com", []string{"http/1.1"}, ""},
		{"chrome IP literal", h2srv, h2pool, ProfileChrome, "127.0.0.1", nil, "h2"},
		{"go h2 server", h2srv, h2pool, ProfileGo, "example.com", []string{"h2", "http/1.1"}, "h2"},
		{"go h1 server", h1srv, h1pool, ProfileGo, "example.com", []string{"h2", "http/1.1"}, "http/1.1"},
		{"go no ALPN", h2srv, h2pool, ProfileGo, "example.com", nil, ""},
		{"go IP literal", h1srv, h1pool, ProfileGo, "127.0.0.1", []string{"http/1.1"}, "http/1.1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			conn, proto, err := tlsHandshake(ctx, dialTest(t, tt.srv.Listener.Addr().String()), tt.serverName, tt.profile, tt.nextProtos, tt.pool)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if proto != tt.want {
				t.Fatalf("negotiated %q, want %q", proto, tt.want)
			}
			// The connection carries a request with the negotiated protocol.
			req, _ := http.NewRequestWithContext(ctx, "GET", "https://"+tt.serverName+"/", nil)
			var resp *http.Response
			if proto == "h2" {
				cc, err := (&http2.Transport{}).NewClientConn(conn)
				if err != nil {
					t.Fatal(err)
				}
				defer cc.Close()
				resp, err = cc.RoundTrip(req)
				if err != nil {
					t.Fatal(err)
				}
			} else {
				if err := req.Write(conn); err != nil {
					t.Fatal(err)
				}
				resp, err = http.ReadResponse(bufio.NewReader(conn), req)
				if err != nil {
					t.Fatal(err)
				}
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			wantProto := "HTTP/1.1"
			if proto == "h2" {
				wantProto = "HTTP/2.0"
			}
			if resp.StatusCode != 200 || string(body) != wantProto {
				t.Errorf("response %d %q, want 200 %q", resp.StatusCode, body, wantProto)
			}
		})
	}
}

func TestTLSHandshakeTLS12Server(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.NotFoundHandler())
	srv.TLS = &tls.Config{MaxVersion: tls.VersionTLS12}
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	for _, p := range TLSProfiles() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		conn, proto, err := tlsHandshake(ctx, dialTest(t, srv.Listener.Addr().String()), "example.com", p, []string{"h2", "http/1.1"}, pool)
		cancel()
		if err != nil {
			t.Errorf("%s: handshake with a TLS 1.2 server: %v", p, err)
			continue
		}
		if v := connVersion(conn); v != tls.VersionTLS12 || proto != "h2" {
			t.Errorf("%s: version %#04x, ALPN %q; want TLS 1.2, h2", p, v, proto)
		}
		conn.Close()
	}
}

func connVersion(c net.Conn) uint16 {
	switch c := c.(type) {
	case *tls.Conn:
		return c.ConnectionState().Version
	case *utls.UConn:
		return c.ConnectionState().Version
	}
	return 0
}

func TestTLSHandshakeVerify(t *testing.T) {
	srv, pool := tlsTestServer(t, true)
	addr := srv.Listener.Addr().String()
	for _, p := range TLSProfiles() {
		t.Run(string(p), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()

			conn, _, err := tlsHandshake(ctx, dialTest(t, addr), "wrong.test", p, nil, pool)
			var e *Error
			if err == nil {
				conn.Close()
				t.Fatal("handshake with the wrong server name succeeded")
			}
			if !errors.As(err, &e) || e.Code != CodeUpstream || e.Reason != ReasonTLS || e.Op != "tls" || e.Target != "wrong.test" {
				t.Errorf("wrong name: error = %#v, want upstream/tls, Op tls, Target wrong.test", err)
			}
			var hostErr x509.HostnameError
			if !errors.As(err, &hostErr) {
				t.Errorf("wrong name: error %v does not wrap an x509.HostnameError", err)
			}

			// nil roots: the system pool, which does not hold the test CA.
			raw := dialTest(t, addr)
			if conn, _, err = tlsHandshake(ctx, raw, "example.com", p, nil, nil); err == nil {
				conn.Close()
				t.Fatal("handshake with system roots accepted the test certificate")
			}
			var unknown x509.UnknownAuthorityError
			if ReasonOf(err) != ReasonTLS || !errors.As(err, &unknown) {
				t.Errorf("system roots: error = %v, want reason tls wrapping x509.UnknownAuthorityError", err)
			}
			// The conn is closed on failure.
			if _, werr := raw.Write([]byte{0}); werr == nil {
				t.Error("conn still open after a failed handshake")
			}

			conn, _, err = tlsHandshake(ctx, dialTest(t, addr), "example.com", p, nil, pool)
			if err != nil {
				t.Fatalf("right name: %v", err)
			}
			conn.Close()
		})
	}
}

func TestTLSHandshakeErrors(t *testing.T) {
	// A server that accepts and never answers.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer ln.Close()
	var mu sync.Mutex
	var held []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				mu.Lock()
				for _, c := range held {
					c.Close()
				}
				mu.Unlock()
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	addr := ln.Addr().String()

	for _, p := range TLSProfiles() {
		t.Run(string(p)+" deadline", func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			_, _, err := tlsHandshake(ctx, dialTest(t, addr), "example.com", p, nil, nil)
			if CodeOf(err) != CodeTimeout || ReasonOf(err) != ReasonTimeout {
				t.Errorf("error = %v, want code timeout, reason timeout", err)
			}
		})
		t.Run(string(p)+" canceled", func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(100*time.Millisecond, cancel)
			_, _, err := tlsHandshake(ctx, dialTest(t, addr), "example.com", p, nil, nil)
			if CodeOf(err) != CodeTimeout || ReasonOf(err) != ReasonCanceled {
				t.Errorf("error = %v, want code timeout, reason canceled", err)
			}
		})
		t.Run(string(p)+" conn deadline", func(t *testing.T) {
			conn := dialTest(t, addr)
			conn.SetDeadline(time.Now().Add(100 * time.Millisecond))
			_, _, err := tlsHandshake(context.Background(), conn, "example.com", p, nil, nil)
			if CodeOf(err) != CodeTimeout {
				t.Errorf("error = %v, want code timeout", err)
			}
		})
	}

	ctx := context.Background()
	if _, _, err := tlsHandshake(ctx, dialTest(t, addr), "", ProfileChrome, nil, nil); CodeOf(err) != CodeInvalid {
		t.Errorf("empty server name: error = %v, want code invalid", err)
	}
	if _, _, err := tlsHandshake(ctx, dialTest(t, addr), "example.com", "netscape", nil, nil); CodeOf(err) != CodeInvalid {
		t.Errorf("unknown profile: error = %v, want code invalid", err)
	}
}

func TestTLSChainDepth(t *testing.T) {
	chain := func(n int) []*x509.Certificate { return make([]*x509.Certificate, n) }
	tests := []struct {
		name   string
		chains [][]*x509.Certificate
		ok     bool
	}{
		{"none verified", nil, true},
		{"ten", [][]*x509.Certificate{chain(10)}, true},
		{"eleven", [][]*x509.Certificate{chain(11)}, false},
		{"one short chain among long ones", [][]*x509.Certificate{chain(12), chain(3)}, true},
	}
	for _, tt := range tests {
		if err := checkChainDepth(tt.chains); (err == nil) != tt.ok {
			t.Errorf("%s: checkChainDepth = %v, want ok %v", tt.name, err, tt.ok)
		}
	}
}
