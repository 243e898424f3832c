package egresstest

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zlib"
	"github.com/klauspost/compress/zstd"
)

// Hostile HTTP handlers. Each misbehaves in one way that a guarded client
// must survive; mount them on an httptest server (which listens on
// loopback):
//
//	srv := httptest.NewServer(egresstest.Bomb(64<<20, "gzip"))
//	defer srv.Close()
//
// Handlers that hold a request open (Stall, Trickle, TrickleHeader) return
// when the client goes away or their time is up, so that the server's Close
// does not hang once the client has given up. Hijacking handlers
// (TrickleHeader, ResetMidBody) need HTTP/1.1.

// BombBody returns size zero bytes encoded with the content codings in the
// order they are applied, which is the order Content-Encoding lists them:
// BombBody(n, "gzip", "br") is br(gzip(zeros)). Codings: gzip, deflate
// (zlib), br, zstd. One layer of gzip shrinks zeros about a thousandfold;
// br and zstd, and a second layer, far more.
func BombBody(size int64, codings ...string) ([]byte, error) {
	var out bytes.Buffer
	var w io.Writer = &out
	var closers []io.Closer
	// The last coding applied is the outermost writer.
	for i := len(codings) - 1; i >= 0; i-- {
		enc, err := encoder(codings[i], w)
		if err != nil {
			return nil, err
		}
		closers = append(closers, enc)
		w = enc
	}
	zeros := make([]byte, 64<<10)
	for left := size; left > 0; {
		n := min(left, int64(len(zeros)))
		if _, err := w.Write(zeros[:n]); err != nil {
			return nil, err
		}
		left -= n
	}
	// Close innermost first so each layer flushes into the next.
	for i := len(closers) - 1; i >= 0; i-- {
		if err := closers[i].Close(); err != nil {
			return nil, err
		}
	}
	return out.Bytes(), nil
}

func encoder(coding string, w io.Writer) (io.WriteCloser, error) {
	switch coding {
	case "gzip":
		return gzip.NewWriterLevel(w, gzip.BestSpeed) // as small as the best for zeros, and ten times faster
	case "deflate":
		return zlib.NewWriterLevel(w, zlib.BestSpeed)
	case "br":
		return brotli.NewWriterLevel(w, brotli.DefaultCompression), nil
	case "zstd":
		// A small window, so that the bomb is refused for its size and
		// not for the memory its window would take.
		return zstd.NewWriter(w, zstd.WithEncoderLevel(zstd.SpeedBetterCompression), zstd.WithWindowSize(1<<20))
	}
	return nil, fmt.Errorf("egresstest: unknown content coding %q", coding)
}

// Bomb serves BombBody(size, codings...) with the matching Content-Encoding
// and Content-Length. The body is built once, here. It panics on an unknown
// coding.
func Bomb(size int64, codings ...string) http.Handler {
	body, err := BombBody(size, codings...)
	if err != nil {
		panic(err)
	}
	enc := strings.Join(codings, ", ")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Encoding", enc)
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.Write(body)
	})
}

// Trickle sends the response headers at once, declaring n body bytes, then
// one byte of body every interval (a slowloris body). It stops when the
// client goes away or the n bytes are sent.
func Trickle(interval time.Duration, n int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(n))
		w.WriteHeader(http.StatusOK)
		rc := http.NewResponseController(w)
		rc.Flush()
		t := time.NewTicker(interval)
		defer t.Stop()
		for range n {
			select {
			case <-r.Context().Done():
				return
			case <-t.C:
			}
			if _, err := w.Write([]byte{'.'}); err != nil {
				return
			}
			if rc.Flush() != nil {
				return
			}
		}
	})
}

// TrickleHeader writes a status line and then one byte of header every
// interval, never finishing the header block, for at most limit (a
// slowloris on the headers). It hijacks the connection: HTTP/1.1 only.
func TrickleHeader(interval, limit time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			http.Error(w, "hijack: "+err.Error(), http.StatusInternalServerError)
			return
		}
		defer conn.Close()
		drainRequest(buf.Reader)
		deadline := time.Now().Add(limit)
		if _, err := io.WriteString(conn, "HTTP/1.1 200 OK\r\nX-Slow: "); err != nil {
			return
		}
		for time.Now().Before(deadline) {
			time.Sleep(interval)
			if _, err := conn.Write([]byte{'a'}); err != nil {
				return // the client gave up
			}
		}
	})
}

// drainRequest reads whatever of the request is buffered, so that closing
// the connection does not turn into a reset for that reason.
func drainRequest(r *bufio.Reader) {
	if n := r.Buffered(); n > 0 {
		r.Discard(n)
	}
}

// Stall reads the request and never answers: it returns when the client
// goes away or after limit.
func Stall(limit time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t := time.NewTimer(limit)
		defer t.Stop()
		select {
		case <-r.Context().Done():
		case <-t.C:
		}
	})
}

// HugeHeader answers 200 with a response header block of at least n bytes:
// one X-Huge field line of n bytes.
func HugeHeader(n int) http.Handler {
	value := strings.Repeat("a", n)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Huge", value)
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, "ok")
	})
}

// ResetMidBody answers 200 declaring length body bytes, sends sent of them
// and then resets the connection (TCP RST, SO_LINGER 0). It hijacks the
// connection: HTTP/1.1 only.
func ResetMidBody(length, sent int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			http.Error(w, "hijack: "+err.Error(), http.StatusInternalServerError)
			return
		}
		drainRequest(buf.Reader)
		fmt.Fprintf(conn, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n", length)
		conn.Write(bytes.Repeat([]byte{'x'}, sent))
		if tc, ok := conn.(*net.TCPConn); ok {
			tc.SetLinger(0)
		}
		conn.Close()
	})
}

// Redirect answers every request with status code and a Location header
// that is loc byte for byte (http.Redirect would clean or absolutise it,
// and the point is to send what a hostile server sends).
func Redirect(code int, loc string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header()["Location"] = []string{loc}
		w.WriteHeader(code)
	})
}

// RedirectChain redirects /N to /N+1 with status code, without end; any
// other path redirects to /1.
func RedirectChain(code int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/"))
		if err != nil {
			n = 0
		}
		w.Header().Set("Location", "/"+strconv.Itoa(n+1))
		w.WriteHeader(code)
	})
}

// RedirectLoop redirects /a to /b and every other path to /a, so that a
// client following it goes round forever.
func RedirectLoop(code int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		loc := "/a"
		if r.URL.Path == "/a" {
			loc = "/b"
		}
		w.Header().Set("Location", loc)
		w.WriteHeader(code)
	})
}

// Sink is a TCP listener that accepts and counts connections, reads
// nothing and answers nothing. Put one where a refused target would be (an
// address on 127.0.0.0/8 that the policy does not except) and assert that
// Accepted stays 0.
type Sink struct {
	ln       net.Listener
	accepted atomic.Int64
	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    []net.Conn
}

// StartSink listens on addr (host:port, a loopback address; port 0 picks
// one). The caller must call Close.
func StartSink(addr string) (*Sink, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("egresstest: sink: %w", err)
	}
	s := &Sink{ln: ln}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.accepted.Add(1)
			s.mu.Lock()
			s.conns = append(s.conns, c)
			s.mu.Unlock()
		}
	}()
	return s, nil
}

// Addr returns the listening address, host:port.
func (s *Sink) Addr() string { return s.ln.Addr().String() }

// Port returns the listening port.
func (s *Sink) Port() int { return s.ln.Addr().(*net.TCPAddr).Port }

// Accepted returns how many connections were accepted so far.
func (s *Sink) Accepted() int { return int(s.accepted.Load()) }

// Close stops listening and closes the accepted connections.
func (s *Sink) Close() error {
	err := s.ln.Close()
	s.wg.Wait()
	s.mu.Lock()
	for _, c := range s.conns {
		c.Close()
	}
	s.conns = nil
	s.mu.Unlock()
	return err
}
