package egress

import (
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

// tcpPair is a connected loopback TCP pair.
func tcpPair(t *testing.T) (net.Conn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ch := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		ch <- c
	}()
	a, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b := <-ch
	if b == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

// startTunnel runs Tunnel between a client end and a target end and
// returns the outer ends (what the client and the target hold).
func startTunnel(t *testing.T, toUp []byte, lim TunnelLimits) (client, target net.Conn, done chan TunnelResult) {
	client, pc := tcpPair(t)
	pu, target := tcpPair(t)
	done = make(chan TunnelResult, 1)
	go func() { done <- Tunnel(pc, pu, toUp, nil, lim) }()
	client.SetDeadline(time.Now().Add(30 * time.Second))
	target.SetDeadline(time.Now().Add(30 * time.Second))
	return client, target, done
}

// TestTunnelSlowReader: a client reading slower than a buffer per idle
// period, but never idle, gets every byte in order.
func TestTunnelSlowReader(t *testing.T) {
	const total = 8 << 20
	client, target, done := startTunnel(t, nil, TunnelLimits{Idle: 300 * time.Millisecond})
	client.(*net.TCPConn).SetReadBuffer(32 << 10)
	go func() {
		buf := make([]byte, total)
		for i := range buf {
			buf[i] = byte(i / 4096)
		}
		target.Write(buf)
		target.Close()
	}()
	got, bad := 0, -1
	buf := make([]byte, 16<<10)
	for {
		n, err := client.Read(buf)
		for i := range n {
			if bad < 0 && buf[i] != byte((got+i)/4096) {
				bad = got + i
			}
		}
		got += n
		if err != nil {
			break
		}
		time.Sleep(5 * time.Millisecond) // ~3 MB/s
	}
	if got != total || bad >= 0 {
		client.Close()
		t.Fatalf("got %d of %d bytes, first wrong at %d; %+v", got, total, bad, <-done)
	}
	client.Close()
	if r := <-done; r.Down != total || r.Capped != nil {
		t.Fatalf("result %+v", r)
	}
}

// TestTunnelByteCap: both directions count; nothing past the cap is
// written, and the cap is what ended the tunnel.
func TestTunnelByteCap(t *testing.T) {
	client, target, done := startTunnel(t, []byte("0123456789"), TunnelLimits{MaxBytes: 1000})
	go target.Write(make([]byte, 4000))
	go io.Copy(io.Discard, target)
	n, _ := io.Copy(io.Discard, client)
	r := <-done
	if r.Capped == nil || r.Capped.Reason != ReasonTunnelBytes || r.Up+r.Down > 1000 || n != r.Down {
		t.Fatalf("client read %d; result %+v", n, r)
	}
}

// TestTunnelIdleAndDuration: a silent tunnel ends at the idle timeout
// (no cap); a busy one at its duration cap.
func TestTunnelIdleAndDuration(t *testing.T) {
	client, _, done := startTunnel(t, nil, TunnelLimits{Idle: 100 * time.Millisecond})
	io.Copy(io.Discard, client)
	if r := <-done; r.Capped != nil || !errors.Is(r.End, errIdle) {
		t.Fatalf("idle tunnel: %+v", r)
	}
	client, target, done := startTunnel(t, nil, TunnelLimits{Idle: time.Minute, MaxDuration: 200 * time.Millisecond})
	go func() {
		for {
			if _, err := target.Write([]byte("tick")); err != nil {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	io.Copy(io.Discard, client)
	if r := <-done; r.Capped == nil || r.Capped.Reason != ReasonTunnelTime {
		t.Fatalf("busy tunnel past its duration: %+v", r)
	}
}
