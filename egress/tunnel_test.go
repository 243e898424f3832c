package egress

import (
	"errors"
	"fmt"
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
// period, but never idle, gets every byte in order. "Never idle" is the
// reader's doing: on a loaded machine it may be descheduled for longer
// than the idle timeout, and then the tunnel is right to end. So the reader
// measures its longest gap between reads; a cut tunnel is a failure when
// that gap was well under the idle timeout, and otherwise the attempt says
// nothing and is run again with a longer idle timeout (and a reader slowed
// in proportion).
func TestTunnelSlowReader(t *testing.T) {
	t.Parallel()
	// Built before any tunnel starts: filling 8 MiB byte by byte takes
	// the race detector longer than the idle timeout, and a tunnel whose
	// target sends nothing for that long is idle.
	data := make([]byte, 8<<20)
	for i := range data {
		data[i] = byte(i / 4096)
	}
	for _, idle := range []time.Duration{300 * time.Millisecond, time.Second, 3 * time.Second} {
		res, maxGap, err := slowReaderAttempt(t, data, idle)
		if err == nil {
			return
		}
		if maxGap < idle/2 {
			t.Fatalf("idle %s, the reader's longest gap %s: %v; %+v", idle, maxGap, err, res)
		}
		t.Logf("idle %s: the reader itself stalled for %s (%v): trying a longer idle timeout", idle, maxGap, err)
	}
	t.Fatal("the reader stalled past half the idle timeout at every attempt: the machine is too loaded to tell")
}

// slowReaderAttempt reads data (its byte i is i/4096) through a tunnel
// with the idle timeout, 16 KiB every idle/60 (about 3 MB/s at 300 ms),
// and returns the tunnel's result, the longest gap between two reads, and
// what went wrong.
func slowReaderAttempt(t *testing.T, data []byte, idle time.Duration) (TunnelResult, time.Duration, error) {
	total := len(data)
	client, target, done := startTunnel(t, nil, TunnelLimits{Idle: idle})
	client.SetDeadline(time.Now().Add(time.Minute + 30*idle))
	client.(*net.TCPConn).SetReadBuffer(32 << 10)
	go func() {
		target.Write(data)
		target.Close()
	}()
	got, bad := 0, -1
	var maxGap time.Duration
	last := time.Now()
	buf := make([]byte, 16<<10)
	for {
		n, err := client.Read(buf)
		now := time.Now()
		maxGap, last = max(maxGap, now.Sub(last)), now
		for i := range n {
			if bad < 0 && buf[i] != byte((got+i)/4096) {
				bad = got + i
			}
		}
		got += n
		if err != nil {
			break
		}
		time.Sleep(idle / 60)
	}
	client.Close()
	r := <-done
	if got != total || bad >= 0 {
		return r, maxGap, fmt.Errorf("got %d of %d bytes, first wrong at %d", got, total, bad)
	}
	if r.Down != int64(total) || r.Capped != nil {
		return r, maxGap, errors.New("the tunnel's result does not match")
	}
	return r, maxGap, nil
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
