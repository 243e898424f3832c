package proxy_test

import (
	"bufio"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/engine"
)

// TestSlowReaderTunnel: a tunnel whose bytes keep flowing, slower than its
// copy buffer fills, loses none and ends only when the target does. The
// client reads about 3 MB/s: never idle for the proxy's 1 s idle timeout,
// but a 12 MiB answer takes longer than it.
func TestSlowReaderTunnel(t *testing.T) {
	const total = 12 << 20
	up, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	upPort := up.Addr().(*net.TCPAddr).Port
	go func() {
		c, err := up.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		buf := make([]byte, total)
		for i := range buf {
			buf[i] = byte(i / 4096)
		}
		c.Write(buf)
	}()
	h := newHarness(t, func(c *engine.Config, po *engine.ProxyOptions) {
		c.Egress.Exceptions = append(c.Egress.Exceptions, "127.0.0.1:"+strconv.Itoa(upPort))
		po.PlainPorts = []uint16{uint16(upPort)}
		po.IdleTimeout = time.Second
	})
	c, err := net.Dial("tcp", h.proxyAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.(*net.TCPConn).SetReadBuffer(64 << 10)
	auth := "Basic " + base64.StdEncoding.EncodeToString([]byte("agent:"+h.tok))
	fmt.Fprintf(c, "CONNECT site.test:%d HTTP/1.1\r\nHost: site.test:%d\r\nProxy-Authorization: %s\r\n\r\n", upPort, upPort, auth)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: "CONNECT"})
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %v %v", resp, err)
	}
	c.SetDeadline(time.Now().Add(4 * testTimeout))
	got, bad := 0, -1
	buf := make([]byte, 32<<10)
	for {
		n, err := br.Read(buf)
		for i := range n {
			if bad < 0 && buf[i] != byte((got+i)/4096) {
				bad = got + i
			}
		}
		got += n
		if err != nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got != total || bad >= 0 {
		t.Fatalf("the tunnel lost or corrupted bytes: got %d of %d, first wrong byte at %d", got, total, bad)
	}
}

// TestWebSocketCapped: a WebSocket upgrade through the proxy is a tunnel
// like CONNECT: the 101 carries the decision id, the tunnel caps hold
// and its audit record counts its bytes.
func TestWebSocketCapped(t *testing.T) {
	ws, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	wsPort := ws.Addr().(*net.TCPAddr).Port
	go func() {
		for {
			c, err := ws.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				http.ReadRequest(br)
				io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: x\r\nX-Airlock-Decision: forged\r\n\r\n")
				c.Write(make([]byte, 1<<20))
			}()
		}
	}()
	h := newHarness(t, func(c *engine.Config, po *engine.ProxyOptions) {
		c.Egress.Exceptions = append(c.Egress.Exceptions, "127.0.0.1:"+strconv.Itoa(wsPort))
		po.MaxTunnelBytes = 1024
	})
	c, err := net.Dial("tcp", h.proxyAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(testTimeout))
	auth := "Basic " + base64.StdEncoding.EncodeToString([]byte("agent:"+h.tok))
	fmt.Fprintf(c, "GET http://site.test:%d/ws HTTP/1.1\r\nHost: site.test:%d\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nProxy-Authorization: %s\r\n\r\n", wsPort, wsPort, auth)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 101 {
		t.Fatalf("upgrade: %d", resp.StatusCode)
	}
	id := resp.Header.Get("X-Airlock-Decision")
	if id == "" || id == "forged" || len(resp.Header.Values("X-Airlock-Decision")) != 1 {
		t.Errorf("the 101 carries X-Airlock-Decision %q, want the call's id", resp.Header.Values("X-Airlock-Decision"))
	}
	n, _ := io.Copy(io.Discard, br)
	if n > 1024 {
		t.Errorf("the upgraded connection passed %d bytes over MaxTunnelBytes 1024", n)
	}
	want := "http://site.test:" + strconv.Itoa(wsPort) + "/ws"
	r := h.waitRecord(t, func(r airlock.AuditRecord) bool { return r.Target == want })
	if r.Reason != string(airlock.ReasonTunnelBytes) || r.BytesIn == 0 || r.BytesIn > 1024 {
		t.Errorf("the upgrade's record: reason %q, %d bytes in; want tunnel_bytes and at most 1024 bytes", r.Reason, r.BytesIn)
	}
}

// TestCloseWaitsForTunnelRecords: when Close returns, every tunnel it cut
// has its audit record.
func TestCloseWaitsForTunnelRecords(t *testing.T) {
	h := newHarness(t)
	const n = 16
	hp := "site.test:" + strconv.Itoa(h.tlsPort)
	for i := range n {
		c := tunnel(t, h, hp)
		if i%2 == 0 {
			continue // waiting for its first bytes
		}
		tc := tls.Client(c, &tls.Config{ServerName: "site.test", RootCAs: h.ca})
		if err := tc.Handshake(); err != nil { // spliced
			t.Fatal(err)
		}
	}
	h.srv.Close()
	got := 0
	for _, r := range h.audit(t) {
		if r.Target == "connect://"+hp {
			got++
		}
	}
	if got != n {
		t.Fatalf("%d of %d tunnel records written when Close returned", got, n)
	}
}
