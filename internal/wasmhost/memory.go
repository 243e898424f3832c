package wasmhost

import "github.com/tetratelabs/wazero/experimental"

// pageSize is the WebAssembly page size.
const pageSize = 1 << 16

// cappedAllocator backs one instance's linear memory and enforces the
// profile's cap: a memory.grow past it fails (the guest sees -1, and a Go
// guest dies with "out of memory"), and the attempt is recorded so that the
// run ends with reason memory_limit rather than a bare exit code. Host
// memory for a guest never exceeds the cap.
type cappedAllocator struct {
	limit     uint64
	buf       []byte
	started   bool // the initial allocation happened
	exceeded  bool
	requested uint64
}

func (a *cappedAllocator) Allocate(capacity, _ uint64) experimental.LinearMemory {
	a.buf = make([]byte, 0, min(capacity, a.limit))
	return a
}

// Reallocate implements experimental.LinearMemory.
func (a *cappedAllocator) Reallocate(size uint64) []byte {
	if size > a.limit {
		if !a.exceeded || size > a.requested {
			a.requested = size
		}
		a.exceeded = true
		if !a.started { // the initial size: wazero needs it; Run stops before _start
			a.started = true
			return make([]byte, size)
		}
		return nil
	}
	a.started = true
	if size <= uint64(cap(a.buf)) {
		a.buf = a.buf[:size]
		return a.buf
	}
	nc := min(max(size, 2*uint64(cap(a.buf))), a.limit)
	nb := make([]byte, size, nc)
	copy(nb, a.buf)
	a.buf = nb
	return nb
}

// Free implements experimental.LinearMemory.
func (a *cappedAllocator) Free() { a.buf = nil }

var (
	_ experimental.MemoryAllocator = (*cappedAllocator)(nil)
	_ experimental.LinearMemory    = (*cappedAllocator)(nil)
)
