package wasmhost

import (
	"errors"
	"fmt"
)

// importEntry is one import of a module's import section.
type importEntry struct {
	module, name string
	kind         byte // 0 function, 1 table, 2 memory, 3 global, 4 tag
}

var errMalformed = errors.New("malformed module")

// readImports reads the import section of a WebAssembly binary without
// compiling it, so that a module asking for an ungranted import is refused
// before any of its code reaches the compiler. It reads only what it needs;
// everything else is left to the compiler, which validates the whole
// module.
func readImports(b []byte) ([]importEntry, error) {
	if len(b) < 8 || string(b[:4]) != "\x00asm" || b[4] != 1 || b[5] != 0 || b[6] != 0 || b[7] != 0 {
		return nil, fmt.Errorf("%w: not a WebAssembly 1.0 binary", errMalformed)
	}
	r := &reader{b: b[8:]}
	for !r.done() {
		id := r.byte()
		size := r.u32()
		payload := r.bytes(size)
		if r.err != nil {
			return nil, r.err
		}
		if id != 2 {
			continue
		}
		s := &reader{b: payload}
		n := s.u32()
		var out []importEntry
		for i := uint32(0); i < n && s.err == nil; i++ {
			e := importEntry{module: s.name(), name: s.name(), kind: s.byte()}
			switch e.kind {
			case 0:
				s.u32()
			case 1:
				s.byte()
				s.limits()
			case 2:
				s.limits()
			case 3:
				s.byte()
				s.byte()
			case 4:
				s.byte()
				s.u32()
			default:
				s.err = fmt.Errorf("%w: import kind %d", errMalformed, e.kind)
			}
			out = append(out, e)
		}
		if s.err != nil {
			return nil, s.err
		}
		return out, nil
	}
	return nil, nil
}

type reader struct {
	b   []byte
	err error
}

func (r *reader) done() bool { return r.err != nil || len(r.b) == 0 }

func (r *reader) fail() {
	if r.err == nil {
		r.err = fmt.Errorf("%w: truncated", errMalformed)
	}
	r.b = nil
}

func (r *reader) byte() byte {
	if len(r.b) == 0 {
		r.fail()
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

// uleb reads an unsigned LEB128 of at most bits bits.
func (r *reader) uleb(bits uint) uint64 {
	var v uint64
	for shift := uint(0); shift < bits+7; shift += 7 {
		c := r.byte()
		if r.err != nil {
			return 0
		}
		v |= uint64(c&0x7f) << shift
		if c&0x80 == 0 {
			return v
		}
	}
	r.err = fmt.Errorf("%w: LEB128 too long", errMalformed)
	return 0
}

func (r *reader) u32() uint32 { return uint32(r.uleb(32)) }

func (r *reader) bytes(n uint32) []byte {
	if uint64(n) > uint64(len(r.b)) {
		r.fail()
		return nil
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

func (r *reader) name() string { return string(r.bytes(r.u32())) }

func (r *reader) limits() {
	flags := r.byte()
	bits := uint(32)
	if flags&0x04 != 0 { // memory64
		bits = 64
	}
	r.uleb(bits)
	if flags&0x01 != 0 {
		r.uleb(bits)
	}
}
