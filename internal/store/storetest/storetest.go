// Package storetest is the conformance suite of package store: every
// implementation of store.AuditLog, store.Revocations, store.Tokens,
// store.Cache and store.Jobs runs it from its own tests, so that the embedded SQLite store
// and the shared Redis store behave the same way to the gate.
//
// Each Run function takes an open function with this contract:
//
//   - open(t) returns a handle on a store that is empty for every distinct
//     t (the suite calls it from subtests);
//   - a second open(t) with the same t returns another handle on the same
//     store, as a second process sharing the data directory (or a second
//     replica sharing Redis) would have: the suite uses two handles to check
//     that changes are visible across processes;
//   - open releases what it opened with t.Cleanup, and fails t itself when
//     the store cannot be opened.
//
// Usage, from an implementation's tests:
//
//	func TestConformance(t *testing.T) {
//		storetest.RunAuditLog(t, func(t *testing.T) store.AuditLog { return openShared(t) })
//		storetest.RunRevocations(t, func(t *testing.T) store.Revocations { return openShared(t) })
//		...
//	}
package storetest

import (
	"context"
	"errors"
	"testing"
	"time"
)

const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// ULID returns a deterministic ULID: the millisecond of t followed by seq as
// the 80 "random" bits. IDs made this way sort by (t's millisecond, seq),
// like the gate's monotonic decision ids.
func ULID(t time.Time, seq uint64) string {
	ms := uint64(t.UnixMilli())
	var b [16]byte
	for i := range 6 {
		b[i] = byte(ms >> (40 - 8*i))
	}
	for i := range 8 {
		b[8+i] = byte(seq >> (56 - 8*i))
	}
	// 128 bits, most significant first, as 26 base32 digits: the first
	// carries the top 3 bits (padded with 2 zero bits in front).
	var out [26]byte
	var acc uint32
	bits := 2 // two leading zero bits make 130 = 26×5
	i := 0
	for _, by := range b {
		acc = acc<<8 | uint32(by)
		bits += 8
		for bits >= 5 {
			bits -= 5
			out[i] = crockford[(acc>>bits)&31]
			i++
		}
	}
	return string(out[:])
}

// wantErr fails t unless errors.Is(err, target).
func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: got error %v, want %v", what, err, target)
	}
}

// must fails t on err.
func must(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// ctx is a context that ends with the test: the suite's calls carry a
// cancellable context, as the gate's do.
func ctx(t *testing.T) context.Context { return t.Context() }

// base is the fixed epoch of the suite's audit records and cache entries.
var base = time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)
