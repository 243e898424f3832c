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
	var d direction
	if err := t.write(&d, dst, pending, n); err != nil {
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
		k, rerr := t.read(&d, src, b)
		if k > 0 {
			if err := t.write(&d, dst, b[:k], n); err != nil {
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

// direction is one pipe's deadlines: the read deadline of its source and
// the write deadline of its destination (each set by this pipe only),
// armed at the last byte's time plus the idle timeout and re-armed only
// when they pass. A deadline that passes early (bytes moved since it was
// armed) is re-armed, so setting them once per idle period is enough.
type direction struct {
	read, write bool // armed
}

// idle reports whether the tunnel has been idle for its timeout: no byte
// either way, and no write in progress (the kernel takes a slow reader's
// bytes in bursts: that write's own deadline tells whether they move).
func (t *tunnel) idleNow(writing int32) bool {
	return time.Since(time.Unix(0, t.last.Load())) >= t.idle && t.writing.Load() <= writing
}

// deadline is when the tunnel goes idle if nothing moves from now on.
func (t *tunnel) deadline() time.Time {
	dl := time.Unix(0, t.last.Load()).Add(t.idle)
	if t.writing.Load() > 0 {
		if later := time.Now().Add(t.idle); later.After(dl) {
			dl = later
		}
	}
	return dl
}

// read reads into b under the idle deadline.
func (t *tunnel) read(d *direction, src net.Conn, b []byte) (int, error) {
	for {
		if !d.read {
			src.SetReadDeadline(t.deadline())
			d.read = true
		}
		k, err := src.Read(b)
		if k > 0 {
			t.touch()
			if err != nil && err != io.EOF {
				err = nil // the bytes first; the error comes again
			}
			return k, err
		}
		if err != nil && isTimeout(err) {
			d.read = false
			if !t.idleNow(0) {
				continue
			}
			return 0, errIdle
		}
		return 0, err
	}
}

// write writes all of b (what fits under the byte cap) under the idle
// deadline; a write that makes progress, or outlasts a deadline while
// bytes moved, goes on. Any other failure ends the tunnel: no byte read
// is dropped while it goes on.
func (t *tunnel) write(d *direction, dst net.Conn, b []byte, n *int64) error {
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
		if !d.write {
			dst.SetWriteDeadline(t.deadline())
			d.write = true
		}
		w, err := dst.Write(b)
		*n += int64(w)
		b = b[w:]
		if w > 0 {
			t.touch()
		}
		if err != nil {
			if !isTimeout(err) {
				return err
			}
			d.write = false
			if w > 0 || !t.idleNow(1) {
				continue // bytes moved: not idle (done when all are written)
			}
			return errIdle
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
