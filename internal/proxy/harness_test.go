package proxy_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/engine"
)

// testTimeout is a hang guard, never an assertion.
const testTimeout = 30 * time.Second

// harness is an engine with tenant "acme" (token tok, profile network), a
// plain HTTP site and a TLS site, both on 127.0.0.1 and reached as
// site.test (the only floor exceptions are their two ports), and a proxy
// serving credentials on a loopback port.
type harness struct {
	en        *engine.Engine
	srv       *engine.ProxyServer
	proxyAddr string
	tok       string
	httpPort  int
	tlsPort   int
	ca        *x509.CertPool
	caFile    string
	hosts     chan string // Host headers the HTTP site saw
}

type harnessOpt func(*engine.Config, *engine.ProxyOptions)

func newHarness(t testing.TB, opts ...harnessOpt) *harness {
	t.Helper()
	h := &harness{tok: engine.NewToken(), hosts: make(chan string, 64)}
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case h.hosts <- r.Host:
		default:
		}
		fmt.Fprintf(w, "hello from %s", r.URL.Path)
	}))
	t.Cleanup(site.Close)
	h.httpPort = site.Listener.Addr().(*net.TCPAddr).Port

	caCert, caKey, caPEM := newCA(t)
	h.ca = x509.NewCertPool()
	h.ca.AddCert(caCert)
	h.caFile = filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(h.caFile, caPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	tlsSite := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) // the answer comes after the whole upload
		fmt.Fprintf(w, "secure hello from %s", r.URL.Path)
	}))
	tlsSite.TLS = &tls.Config{Certificates: []tls.Certificate{leaf(t, caCert, caKey, "site.test", "other.test")}}
	tlsSite.Config.ErrorLog = log.New(io.Discard, "", 0) // refused handshakes are the point
	tlsSite.StartTLS()
	t.Cleanup(tlsSite.Close)
	h.tlsPort = tlsSite.Listener.Addr().(*net.TCPAddr).Port

	cfg := engine.Config{
		InMemory:      true,
		DefaultTenant: "acme",
		Tenants: map[string]engine.TenantConfig{
			"acme": {Tokens: []string{engine.HashToken(h.tok)}, Profile: "network"},
			"calc": {Tokens: []string{}, Profile: "compute"},
		},
		Egress: engine.EgressConfig{
			Resolve: map[string][]string{
				"site.test":     {"127.0.0.1"},
				"other.test":    {"127.0.0.1"},
				"internal.test": {"127.0.0.9"},
			},
			Exceptions: []string{"127.0.0.1:" + strconv.Itoa(h.httpPort), "127.0.0.1:" + strconv.Itoa(h.tlsPort)},
		},
	}
	po := engine.ProxyOptions{}
	for _, o := range opts {
		o(&cfg, &po)
	}
	en, err := engine.New(context.Background(), cfg)
	if err != nil {
		t.Fatalf("engine.New: %v", err)
	}
	h.en = en
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := en.Close(ctx); err != nil {
			t.Errorf("engine Close: %v", err)
		}
	})
	srv, err := en.NewProxy(po)
	if err != nil {
		t.Fatalf("NewProxy: %v", err)
	}
	h.srv = srv
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h.proxyAddr = ln.Addr().String()
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		srv.Close()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(testTimeout):
			t.Error("Serve did not return after Close")
		}
	})
	return h
}

// proxyURL is the proxy's URL with the tenant token as the password.
func (h *harness) proxyURL() *url.URL {
	return &url.URL{Scheme: "http", User: url.UserPassword("agent", h.tok), Host: h.proxyAddr}
}

// client is a net/http client through the proxy that trusts the test CA.
func (h *harness) client(proxy *url.URL) *http.Client {
	return &http.Client{
		Timeout: testTimeout,
		Transport: &http.Transport{
			Proxy:             http.ProxyURL(proxy),
			TLSClientConfig:   &tls.Config{RootCAs: h.ca},
			DisableKeepAlives: false,
		},
	}
}

func (h *harness) siteURL(path string) string {
	return "http://site.test:" + strconv.Itoa(h.httpPort) + path
}

func (h *harness) tlsURL(path string) string {
	return "https://site.test:" + strconv.Itoa(h.tlsPort) + path
}

// audit returns the proxy's audit records so far.
func (h *harness) audit(t *testing.T) []airlock.AuditRecord {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := h.en.FlushAudit(ctx); err != nil {
		t.Fatal(err)
	}
	recs, err := h.en.AuditQuery(ctx, airlock.AuditQuery{Broker: "proxy", Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// waitRecord waits for an audit record that match accepts (a tunnel's
// record is written when the tunnel ends).
func (h *harness) waitRecord(t *testing.T, match func(airlock.AuditRecord) bool) airlock.AuditRecord {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for {
		recs := h.audit(t)
		for _, r := range recs {
			if match(r) {
				return r
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no matching audit record among %+v", recs)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func body(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func newCA(t testing.TB) (*x509.Certificate, *ecdsa.PrivateKey, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "airlock proxy test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func leaf(t testing.TB, ca *x509.Certificate, caKey *ecdsa.PrivateKey, names ...string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: names[0]}, DNSNames: names,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}
