package proxy_test

import (
	"bufio"
	"encoding/base64"
	"encoding/binary"
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"

	"github.com/airlockhq/airlock/engine"
)

// sink is a loopback TCP server that reads everything it is sent and, at
// EOF, answers the byte count (8 bytes); a connection that sends "p"
// first is echoed one byte instead (the latency benchmark).
func sink(b *testing.B) int {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				var one [1]byte
				if _, err := io.ReadFull(c, one[:]); err != nil {
					return
				}
				if one[0] == 'p' {
					c.Write(one[:])
					return
				}
				n, _ := io.Copy(io.Discard, c)
				c.Write(binary.BigEndian.AppendUint64(nil, uint64(n+1)))
			}()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

// benchProxy is a harness whose proxy lets raw bytes through to port (a
// plain port: the benchmark measures the tunnel, not TLS).
func benchProxy(b *testing.B, port int) (string, string) {
	h := newHarness(b, func(c *engine.Config, _ *engine.ProxyOptions) {
		c.Egress.Exceptions = append(c.Egress.Exceptions, "127.0.0.1:"+strconv.Itoa(port))
		tc := c.Tenants["acme"]
		tc.Rate, tc.Burst = 1e6, 1e6 // the benchmark measures the proxy, not the tenant's rate
		c.Tenants["acme"] = tc
	})
	srv, err := h.en.NewProxy(engine.ProxyOptions{PlainPorts: []uint16{uint16(port)}, MaxTunnelBytes: 1 << 50})
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go srv.Serve(ln)
	b.Cleanup(func() { srv.Close() })
	return ln.Addr().String(), h.tok
}

// dialTunnel opens a CONNECT tunnel to site.test:port.
func dialTunnel(b *testing.B, proxyAddr, tok string, port int) net.Conn {
	c, err := net.Dial("tcp", proxyAddr)
	if err != nil {
		b.Fatal(err)
	}
	hp := "site.test:" + strconv.Itoa(port)
	io.WriteString(c, "CONNECT "+hp+" HTTP/1.1\r\nHost: "+hp+"\r\nProxy-Authorization: Basic "+
		base64.StdEncoding.EncodeToString([]byte("a:"+tok))+"\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: "CONNECT"})
	if err != nil || resp.StatusCode != 200 {
		b.Fatalf("CONNECT: %v %v", resp, err)
	}
	return c
}

// BenchmarkThroughput sends 1 MiB per op over one connection, direct to a
// loopback sink and through a CONNECT tunnel, in the same run.
func BenchmarkThroughput(b *testing.B) {
	port := sink(b)
	proxyAddr, tok := benchProxy(b, port)
	chunk := make([]byte, 1<<20)
	run := func(b *testing.B, c net.Conn) {
		b.SetBytes(int64(len(chunk)))
		c.Write([]byte{'x'})
		b.ResetTimer()
		for range b.N {
			if _, err := c.Write(chunk); err != nil {
				b.Fatal(err)
			}
		}
		c.(interface{ CloseWrite() error }).CloseWrite()
		var n [8]byte
		if _, err := io.ReadFull(c, n[:]); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if got := binary.BigEndian.Uint64(n[:]); got != uint64(b.N*len(chunk)+1) {
			b.Fatalf("sink got %d bytes, want %d", got, b.N*len(chunk)+1)
		}
		c.Close()
	}
	b.Run("direct", func(b *testing.B) {
		c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			b.Fatal(err)
		}
		run(b, c)
	})
	b.Run("connect", func(b *testing.B) { run(b, dialTunnel(b, proxyAddr, tok, port)) })
}

// BenchmarkNewConnection opens a connection and makes one round trip,
// direct and through a new CONNECT tunnel (a gate call, a decision, a
// dial and an audit record each).
func BenchmarkNewConnection(b *testing.B) {
	port := sink(b)
	proxyAddr, tok := benchProxy(b, port)
	ping := func(b *testing.B, c net.Conn) {
		var one [1]byte
		if _, err := c.Write([]byte{'p'}); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(c, one[:]); err != nil {
			b.Fatal(err)
		}
		c.Close()
	}
	b.Run("direct", func(b *testing.B) {
		for range b.N {
			c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port))
			if err != nil {
				b.Fatal(err)
			}
			ping(b, c)
		}
	})
	b.Run("connect", func(b *testing.B) {
		for range b.N {
			ping(b, dialTunnel(b, proxyAddr, tok, port))
		}
	})
}
