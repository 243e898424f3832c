package cli

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

var bannerProxy = regexp.MustCompile(`HTTP and SOCKS5 on (\S+)`)

// proxySites starts a plain HTTP site and a TLS site (a certificate for
// site.test from a fresh CA, written to a file) on 127.0.0.1.
func proxySites(t *testing.T) (httpPort, tlsPort int, caFile string) {
	t.Helper()
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from %s", r.URL.Path)
	}))
	t.Cleanup(site.Close)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "proxy test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	leafKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leafTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "site.test"}, DNSNames: []string{"site.test", "other.test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, ca, &leafKey.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "secure hello from %s", r.URL.Path)
	}))
	ts.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{leafDER}, PrivateKey: leafKey}}}
	ts.Config.ErrorLog = log.New(io.Discard, "", 0)
	ts.StartTLS()
	t.Cleanup(ts.Close)
	caFile = filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return site.Listener.Addr().(*net.TCPAddr).Port, ts.Listener.Addr().(*net.TCPAddr).Port, caFile
}

// startProxyCmd runs `airlock proxy args...` until stop, and reads its
// address from the banner.
func startProxyCmd(t *testing.T, args ...string) (addr string, stop func() int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out, errb := &syncBuffer{}, &syncBuffer{}
	code := make(chan int, 1)
	e := &env{stdin: strings.NewReader(""), stdout: out, stderr: errb}
	go func() { code <- run(ctx, e, append([]string{"proxy"}, args...), commands) }()
	stopped := false
	stop = func() int {
		if stopped {
			return 0
		}
		stopped = true
		cancel()
		select {
		case c := <-code:
			return c
		case <-time.After(30 * time.Second):
			t.Error("proxy did not stop")
			return -1
		}
	}
	t.Cleanup(func() { stop() })
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if m := bannerProxy.FindStringSubmatch(out.String()); m != nil {
			return m[1], stop
		}
		select {
		case c := <-code:
			t.Fatalf("proxy exited %d before listening: %s", c, errb.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("no banner from proxy; stdout %q stderr %q", out.String(), errb.String())
	return "", nil
}

func needCurl(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("curl")
	if err != nil {
		t.Fatal("curl is needed: install it (apt-get install curl)")
	}
	return p
}

// curlThrough runs curl with args and returns its exit code, stdout (the
// body) and the headers it dumped.
func curlThrough(t *testing.T, curl string, args ...string) (int, string, string) {
	t.Helper()
	hdr := filepath.Join(t.TempDir(), "headers")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, curl, append([]string{"-sS", "--noproxy", "", "-D", hdr, "--max-time", "20"}, args...)...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	out, _ := cmd.Output()
	h, _ := os.ReadFile(hdr)
	code := 0
	if cmd.ProcessState != nil {
		code = cmd.ProcessState.ExitCode()
	}
	return code, string(out), string(h)
}

// TestProxyCommandCurl: curl through `airlock proxy` (development mode):
// HTTP, HTTPS through CONNECT with the test CA, SOCKS5 with names resolved
// by Airlock, and refusals that curl shows with Airlock's reason; every
// attempt is in the audit log.
func TestProxyCommandCurl(t *testing.T) {
	curl := needCurl(t)
	httpPort, tlsPort, caFile := proxySites(t)
	data := t.TempDir()
	hp, tp := strconv.Itoa(httpPort), strconv.Itoa(tlsPort)
	addr, stop := startProxyCmd(t, "--data-dir", data, "--listen", "127.0.0.1:0",
		"--resolve", "site.test=127.0.0.1", "--resolve", "internal.test=127.0.0.9",
		"--except", "127.0.0.1:"+hp, "--except", "127.0.0.1:"+tp)

	code, body, _ := curlThrough(t, curl, "-x", "http://"+addr, "http://site.test:"+hp+"/plain")
	if code != 0 || body != "hello from /plain" {
		t.Fatalf("http: exit %d body %q", code, body)
	}
	code, body, _ = curlThrough(t, curl, "-x", "http://"+addr, "--cacert", caFile, "https://site.test:"+tp+"/secure")
	if code != 0 || body != "secure hello from /secure" {
		t.Fatalf("https via CONNECT: exit %d body %q", code, body)
	}
	code, body, _ = curlThrough(t, curl, "-x", "socks5h://"+addr, "--cacert", caFile, "https://site.test:"+tp+"/socks")
	if code != 0 || body != "secure hello from /socks" {
		t.Fatalf("https via socks5h: exit %d body %q", code, body)
	}

	// Refused: a name into the floor (plain and CONNECT), another port.
	code, body, hdr := curlThrough(t, curl, "-x", "http://"+addr, "http://internal.test:"+hp+"/")
	if !strings.Contains(hdr, "403") || !strings.Contains(hdr, "X-Airlock-Reason: internal_address") || !strings.Contains(hdr, "X-Airlock-Decision: ") {
		t.Fatalf("refused http: exit %d headers %q body %q", code, hdr, body)
	}
	if strings.Contains(body, "127.0.0.9") {
		t.Fatalf("refusal names the internal address: %q", body)
	}
	code, _, hdr = curlThrough(t, curl, "-x", "http://"+addr, "--cacert", caFile, "https://internal.test:"+tp+"/")
	if code == 0 || !strings.Contains(hdr, "X-Airlock-Reason: internal_address") {
		t.Fatalf("refused CONNECT: exit %d headers %q", code, hdr)
	}
	code, _, hdr = curlThrough(t, curl, "-x", "http://"+addr, "--cacert", caFile, "https://site.test:"+strconv.Itoa(otherPort(httpPort, tlsPort))+"/")
	if code == 0 || !strings.Contains(hdr, "403") {
		t.Fatalf("CONNECT to another port: exit %d headers %q", code, hdr)
	}
	code, _, _ = curlThrough(t, curl, "-x", "socks5h://"+addr, "--cacert", caFile, "https://internal.test:"+tp+"/")
	if code == 0 {
		t.Fatal("socks5h to a name into the floor succeeded")
	}
	code, _, _ = curlThrough(t, curl, "-x", "socks4://"+addr, "http://127.0.0.1:"+hp+"/")
	if code == 0 {
		t.Fatal("SOCKS4 was served")
	}

	if c := stop(); c != 0 {
		t.Fatalf("proxy exited %d", c)
	}
	r := invoke(t, context.Background(), "", []string{"audit", "query", "--data-dir", data, "--broker", "proxy", "--format", "json", "--limit", "100"})
	if r.code != 0 {
		t.Fatalf("audit: exit %d %s", r.code, r.stderr)
	}
	for _, want := range []string{
		`"target":"http://site.test:` + hp + `/plain"`,
		`"target":"connect://site.test:` + tp + `"`,
		`"target":"socks5://site.test:` + tp + `"`,
		`"target":"http://internal.test:` + hp + `/"`,
		`"target":"connect://internal.test:` + tp + `"`,
		`"target":"socks5://internal.test:` + tp + `"`,
		`"reason":"socks"`,
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("audit log lacks %s:\n%s", want, r.stdout)
		}
	}
}

func otherPort(a, b int) int {
	for p := a + 1; ; p++ {
		if p != b && p < 65536 {
			return p
		}
	}
}

// TestProxyCommandNeedsLoopbackInDevelopment: with no tenant configured
// the proxy does not listen beyond loopback.
func TestProxyCommandNeedsLoopbackInDevelopment(t *testing.T) {
	r := invoke(t, context.Background(), "", []string{"proxy", "--data-dir", t.TempDir(), "--listen", "0.0.0.0:0"})
	if r.code != 2 || !strings.Contains(r.stderr, "loopback") {
		t.Fatalf("exit %d stderr %q", r.code, r.stderr)
	}
}

var logProxy = regexp.MustCompile(`msg="forward proxy" addr=(\S+)`)

// TestServeStartsProxy: with proxy.listen configured, serve runs the
// proxy beside the API on the same engine: its calls are in the audit
// log the API reads.
func TestServeStartsProxy(t *testing.T) {
	curl := needCurl(t)
	httpPort, _, _ := proxySites(t)
	hp := strconv.Itoa(httpPort)
	cfg := filepath.Join(t.TempDir(), "airlock.yaml")
	if err := os.WriteFile(cfg, []byte("proxy:\n  listen: 127.0.0.1:0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServe(t, "--config", cfg, "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0",
		"--resolve", "site.test=127.0.0.1", "--except", "127.0.0.1:"+hp)
	var addr string
	for deadline := time.Now().Add(20 * time.Second); addr == "" && time.Now().Before(deadline); {
		if m := logProxy.FindStringSubmatch(s.stderr.String()); m != nil {
			addr = m[1]
		} else {
			time.Sleep(20 * time.Millisecond)
		}
	}
	if addr == "" {
		t.Fatalf("serve logged no proxy address: %s", s.stderr.String())
	}
	code, body, _ := curlThrough(t, curl, "-x", "http://"+addr, "http://site.test:"+hp+"/via-serve")
	if code != 0 || body != "hello from /via-serve" {
		t.Fatalf("curl through serve's proxy: exit %d body %q", code, body)
	}
	// The call's record is written when the proxy has relayed the whole
	// answer, which may be just after curl has read it.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		status, _, out := s.do(t, "GET", "/api/audit?broker=proxy", s.token, "")
		if status == 200 && strings.Contains(out, "/via-serve") {
			break
		}
		if time.Now().After(deadline) { // hang guard
			t.Fatalf("audit through the API: %d %s", status, out)
		}
	}
}

// TestProxyRevocationFromAnotherProcess: `airlock admin revoke` run
// against the data directory of a running `airlock proxy` cuts the
// revoked tenant's open tunnel (the proxy's revocation poll picks it up),
// and the tenant's next connection is refused.
func TestProxyRevocationFromAnotherProcess(t *testing.T) {
	_, tlsPort, caFile := proxySites(t)
	tp := strconv.Itoa(tlsPort)
	data := t.TempDir()
	cfg := filepath.Join(t.TempDir(), "airlock.yaml")
	tok := "alk_proxy_revocation_test_token"
	yaml := "tenants:\n  acme:\n    profile: network\n    tokens: [" + hashToken(tok) + "]\ndefault_tenant: acme\n"
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	addr, _ := startProxyCmd(t, "--config", cfg, "--data-dir", data, "--listen", "127.0.0.1:0",
		"--resolve", "site.test=127.0.0.1", "--except", "127.0.0.1:"+tp)
	conn, err := net.DialTimeout("tcp", addr, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	hp := "site.test:" + tp
	fmt.Fprintf(conn, "CONNECT %s HTTP/1.1\r\nHost: %s\r\nProxy-Authorization: Basic %s\r\n\r\n", hp, hp, basic("ci", tok))
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, &http.Request{Method: "CONNECT"})
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %v %v", resp, err)
	}
	// A live TLS session in the tunnel (nothing times out on its own: the
	// proxy's idle timeout is minutes).
	pem, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	tc := tls.Client(&readerConn{Conn: conn, r: br}, &tls.Config{ServerName: "site.test", RootCAs: pool})
	if err := tc.Handshake(); err != nil {
		t.Fatal(err)
	}
	if r := invoke(t, context.Background(), "", []string{"admin", "revoke", "--config", cfg, "--data-dir", data, "acme", "--reason", "test"}); r.code != 0 {
		t.Fatalf("revoke: exit %d %s", r.code, r.stderr)
	}
	// The proxy closes the tunnel: the read ends, long before the hang
	// guard of the connection's deadline.
	_, err = tc.Read(make([]byte, 1))
	var ne net.Error
	if err == nil || errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the revoked tenant's tunnel stayed open: %v", err)
	}
}

// readerConn reads through r (bytes a bufio.Reader may hold ahead).
type readerConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *readerConn) Read(b []byte) (int, error) { return c.r.Read(b) }

func basic(user, pass string) string {
	return base64.StdEncoding.EncodeToString([]byte(user + ":" + pass))
}

func hashToken(tok string) string {
	h := sha256.Sum256([]byte(tok))
	return "sha256:" + hex.EncodeToString(h[:])
}
