package engine_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/engine"
)

// TestExecSession serves an exec session's proxy: an allowed request and a
// tunnel are decided and audited under the session's principal, a
// revocation cuts the open tunnel and refuses the next request, and the
// session's own record comes with End.
func TestExecSession(t *testing.T) {
	ctx := testCtx(t)
	e := newEngine(t, engine.Config{DataDir: t.TempDir(), DefaultTenant: "acme",
		Tenants: map[string]engine.TenantConfig{"acme": {Profile: "network", Exceptions: []string{"127.0.0.1"}}}})
	p := airlock.Principal{Tenant: "acme", Instance: "exec-1"}
	sess, err := e.BeginExec(ctx, p, "curl "+strings.Repeat("x", 600))
	if err != nil {
		t.Fatal(err)
	}
	proxy := httptest.NewServer(sess)
	defer proxy.Close()
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "site") }))
	defer site.Close()
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()

	pu, _ := url.Parse(proxy.URL)
	client := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(pu)}}
	resp, err := client.Get(site.URL + "/a")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "site" || resp.Header.Get("X-Airlock-Decision") == "" {
		t.Fatalf("allowed request: %d %q %v", resp.StatusCode, body, resp.Header)
	}

	// A tunnel, then a revocation while it is open.
	c, err := net.Dial("tcp", pu.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", echo.Addr(), echo.Addr())
	br := bufio.NewReader(c)
	line, err := br.ReadString('\n')
	if err != nil || !strings.Contains(line, " 200 ") {
		t.Fatalf("CONNECT: %q %v", line, err)
	}
	for {
		l, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if l == "\r\n" {
			break
		}
	}
	io.WriteString(c, "ping")
	buf := make([]byte, 4)
	if _, err := io.ReadFull(br, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("tunnel echo: %q %v", buf, err)
	}
	if err := e.Revoke(ctx, p.String(), "test"); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second)) // a hang guard
	if n, err := br.Read(buf); err == nil || isTimeout(err) {
		t.Errorf("the tunnel stayed open after the revocation: read %d, %v", n, err)
	}
	select {
	case <-sess.Context().Done():
	case <-time.After(10 * time.Second):
		t.Error("the session's context was not cancelled by the revocation")
	}

	resp, err = client.Get(site.URL + "/b")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || resp.Header.Get("X-Airlock-Reason") != "revoked" {
		t.Errorf("a request after the revocation: %d %q", resp.StatusCode, resp.Header.Get("X-Airlock-Reason"))
	}
	if err := sess.End(nil, "exit 0"); err != nil {
		t.Fatal(err)
	}
	if err := e.FlushAudit(ctx); err != nil {
		t.Fatal(err)
	}
	recs, err := e.AuditQuery(ctx, airlock.AuditQuery{Principal: p.String(), Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range recs {
		got[r.Broker+" "+r.Target] = r.Outcome + " " + r.Reason
	}
	for k, want := range map[string]string{
		"proxy " + site.URL + "/a":                "allow ok",
		"proxy connect://" + echo.Addr().String(): "deny revoked",
		"proxy " + site.URL + "/b":                "deny revoked",
	} {
		if got[k] != want {
			t.Errorf("audit %s: %q, want %q (all: %v)", k, got[k], want, got)
		}
	}
	var session *airlock.AuditRecord
	for i := range recs {
		if recs[i].Broker == engine.BrokerExec {
			session = &recs[i]
		}
	}
	if session == nil || len(session.Target) > engine.MaxExecTarget+len("…") || !strings.HasPrefix(session.Target, "curl xxx") {
		t.Errorf("the session's record: %+v", session)
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// BenchmarkExecTunnel compares, in one run, a CONNECT tunnel through an
// exec session's proxy with a direct loopback connection: throughput of
// 8 MiB per connection, and a new connection carrying one byte (the
// latency the proxy adds per connection).
func BenchmarkExecTunnel(b *testing.B) {
	e, err := engine.New(context.Background(), engine.Config{InMemory: true, DefaultTenant: "acme",
		Tenants: map[string]engine.TenantConfig{"acme": {Profile: "network", Exceptions: []string{"127.0.0.1"},
			Rate: 1e6, Burst: 1e6}}})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close(context.Background())
	sess, err := e.BeginExec(context.Background(), airlock.Principal{Tenant: "acme", Instance: "bench"}, "bench")
	if err != nil {
		b.Fatal(err)
	}
	defer sess.End(nil, "")
	proxy := httptest.NewServer(sess)
	defer proxy.Close()
	// The sink writes as many bytes as the 8-byte big-endian count asks.
	sink, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer sink.Close()
	chunk := make([]byte, 64<<10)
	go func() {
		for {
			c, err := sink.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				var hdr [8]byte
				if _, err := io.ReadFull(c, hdr[:]); err != nil {
					return
				}
				n := int64(binary.BigEndian.Uint64(hdr[:]))
				for n > 0 {
					w, err := c.Write(chunk[:min(n, int64(len(chunk)))])
					if err != nil {
						return
					}
					n -= int64(w)
				}
			}()
		}
	}()
	proxyAddr := strings.TrimPrefix(proxy.URL, "http://")
	dial := func(b *testing.B, viaProxy bool) (net.Conn, io.Reader) {
		if !viaProxy {
			c, err := net.Dial("tcp", sink.Addr().String())
			if err != nil {
				b.Fatal(err)
			}
			return c, c
		}
		c, err := net.Dial("tcp", proxyAddr)
		if err != nil {
			b.Fatal(err)
		}
		fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", sink.Addr(), sink.Addr())
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
		if err != nil || resp.StatusCode != 200 {
			b.Fatalf("CONNECT: %v %v", resp, err)
		}
		if br.Buffered() == 0 {
			return c, c // read as the direct path does
		}
		return c, br
	}
	fetch := func(b *testing.B, viaProxy bool, n int64) {
		c, r := dial(b, viaProxy)
		defer c.Close()
		var hdr [8]byte
		binary.BigEndian.PutUint64(hdr[:], uint64(n))
		c.Write(hdr[:])
		if got, err := io.Copy(io.Discard, io.LimitReader(r, n)); err != nil || got != n {
			b.Fatalf("read %d of %d: %v", got, n, err)
		}
	}
	for _, via := range []struct {
		name  string
		proxy bool
	}{{"direct", false}, {"exec_proxy", true}} {
		b.Run("throughput/"+via.name, func(b *testing.B) {
			const n = 8 << 20
			b.SetBytes(n)
			for b.Loop() {
				fetch(b, via.proxy, n)
			}
		})
		b.Run("connection/"+via.name, func(b *testing.B) {
			for b.Loop() {
				fetch(b, via.proxy, 1)
			}
		})
	}
}
