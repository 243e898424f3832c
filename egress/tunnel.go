package egress

import (
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// TunnelLimits bound one tunnel (a CONNECT tunnel, an upgraded connection).
type TunnelLimits struct {
	// Idle ends the tunnel after this long with no byte in either
	// direction; 0: DefaultProxyIdleTimeout.
	Idle time.Duration
	// MaxBytes caps the bytes of both directions together; nothing past
	// it is written. 0: no cap.
	MaxBytes int64
	// MaxDuration caps the tunnel's life; 0: no cap.
	MaxDuration time.Duration
}

// TunnelResult is how a tunnel ended.
type TunnelResult struct {
	Up   int64 // bytes written to the target (from the client)
	Down int64 // bytes written to the client (from the target)
	// Capped is the cap that ended the tunnel: too_large tunnel_bytes or
	// timeout tunnel_time; nil when no cap did.
	Capped *Error
	// End is the first error of either direction (Capped, idle, a
	// connection's failure); nil when both directions reached EOF.
	End error
}

// Tunnel copies between client and up, both ways, until both directions
// end (an EOF is passed on as a half-close), an error, a cap in lim, or
// lim.Idle with no byte in either direction. toUp and toDown are bytes
// already read ahead from the client and from up; they are written first
// and count against the caps. Every read and every write is under the
// idle deadline, moved by every byte either way, so a slow but busy
// tunnel is never cut, and a failed write ends the tunnel: no byte read is
// ever dropped while the tunnel goes on. Tunnel closes both connections.
func Tunnel(client, up net.Conn, toUp, toDown []byte, lim TunnelLimits) TunnelResult {
	t := &tunnel{client: client, up: up, idle: lim.Idle, max: lim.MaxBytes}
	if t.idle <= 0 {
		t.idle = DefaultProxyIdleTimeout
	}
	t.last.Store(time.Now().UnixNano())
	if lim.MaxDuration > 0 {
		timer := time.AfterFunc(lim.MaxDuration, func() {
			t.cap(&Error{Code: CodeTimeout, Reason: ReasonTunnelTime, Op: "proxy", Detail: "tunnel passed " + lim.MaxDuration.String()})
		})
		defer timer.Stop()
	}
	var res TunnelResult
	var first sync.Once
	var wg sync.WaitGroup
	run := func(dst, src net.Conn, pending []byte, n *int64) {
		defer wg.Done()
		if err := t.pipe(dst, src, pending, n); err != nil {
			// The first error is why: the other direction's comes from
			// the close.
			first.Do(func() { res.End = err })
			t.closeBoth()
		}
	}
	wg.Add(2)
	go run(up, client, toUp, &res.Up)
	go run(client, up, toDown, &res.Down)
	wg.Wait()
	t.closeBoth()
	if res.Capped = t.capped.Load(); res.Capped != nil {
		res.End = res.Capped
	}
	return res
}

type tunnel struct {
	client, up net.Conn
	idle       time.Duration
	max        int64
	total      atomic.Int64 // bytes written or about to be, both ways
	last       atomic.Int64 // unix nanoseconds of the last byte either way
	writing    atomic.Int32 // writes in progress
	capped     atomic.Pointer[Error]
}

func (t *tunnel) closeBoth() {
	t.client.Close()
	t.up.Close()
}

// cap ends the tunnel for a cap (the first one reached is kept).
func (t *tunnel) cap(e *Error) {
	t.capped.CompareAndSwap(nil, e)
	t.closeBoth()
}

func (t *tunnel) touch() { t.last.Store(time.Now().UnixNano()) }

// pipe copies src to dst (pending first), counting what it writes in n.
func (t *tunnel) pipe(dst, src net.Conn, pending []byte, n *int64) error {
	if err := t.write(dst, pending, n); err != nil {
		return err
	}
	// Copied through this process: splice(2) measured slower on loopback.
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	buf := *bp
	for {
		b := buf
		if t.max > 0 {
			// At the cap one more byte is over it (an EOF is not): read
			// one to tell.
			if rem := max(t.max-t.total.Load(), 1); rem < int64(len(b)) {
				b = b[:rem]
			}
		}
		k, rerr := t.read(src, b)
		if k > 0 {
			if err := t.write(dst, b[:k], n); err != nil {
				return err
			}
		}
		switch {
		case rerr == nil:
		case rerr == io.EOF:
			closeWrite(dst)
			return nil
		default:
			return rerr
		}
	}
}

// read reads into b under the idle deadline; a deadline passed while the
// other direction moved is no idleness, nor one passed while the other
// direction is in a write (the kernel takes a slow reader's bytes in
// bursts: that write's own deadline tells whether they still move).
func (t *tunnel) read(src net.Conn, b []byte) (int, error) {
	for {
		l := t.last.Load()
		dl := time.Unix(0, l).Add(t.idle)
		if t.writing.Load() > 0 {
			if now := time.Now().Add(t.idle); now.After(dl) {
				dl = now
			}
		}
		src.SetReadDeadline(dl)
		k, err := src.Read(b)
		if k > 0 {
			t.touch()
			if err != nil && err != io.EOF {
				err = nil // the bytes first; the error comes again
			}
			return k, err
		}
		if err != nil && isTimeout(err) {
			if t.last.Load() != l || t.writing.Load() > 0 {
				continue
			}
			return 0, errIdle
		}
		return 0, err
	}
}

// write writes all of b (what fits under the byte cap) under the idle
// deadline; a write that makes progress, or outlasts a deadline while the
// other direction moved, goes on. Any other failure ends the tunnel.
func (t *tunnel) write(dst net.Conn, b []byte, n *int64) error {
	if len(b) == 0 {
		return nil
	}
	over := false
	if t.max > 0 {
		if after := t.total.Add(int64(len(b))); after > t.max {
			b = b[:max(int64(len(b))-(after-t.max), 0)]
			over = true
		}
	}
	t.writing.Add(1)
	defer t.writing.Add(-1)
	for len(b) > 0 {
		l := t.last.Load()
		dst.SetWriteDeadline(time.Unix(0, l).Add(t.idle))
		w, err := dst.Write(b)
		*n += int64(w)
		b = b[w:]
		if w > 0 {
			t.touch()
		}
		if err != nil {
			if isTimeout(err) && len(b) > 0 && t.last.Load() != l {
				continue // progress either way: not idle
			}
			if isTimeout(err) {
				return errIdle
			}
			return err
		}
	}
	if over {
		t.cap(&Error{Code: CodeTooLarge, Reason: ReasonTunnelBytes, Op: "proxy", Detail: "tunnel passed " + strconv.FormatInt(t.max, 10) + " bytes"})
		return t.capped.Load()
	}
	return nil
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	} else {
		c.Close()
	}
}

// copyBufs are the tunnels' copy buffers: a new connection must not cost
// a large allocation (and its clearing and collection).
var copyBufs = sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}

var errIdle = &Error{Code: CodeTimeout, Reason: ReasonIdle, Op: "proxy", Detail: "tunnel idle"}
