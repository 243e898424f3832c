package crawl

import (
	"context"
	"hash/maphash"
	"sync"
)

// Kind says what an Item is fetched for.
type Kind uint8

// Item kinds.
const (
	KindPage    Kind = iota // a page: fetched, extracted, emitted, its links followed
	KindSitemap             // a sitemap (or sitemap index) whose URLs seed the crawl
)

// Item is one URL waiting in a Frontier.
type Item struct {
	URL   string // normalised (see Normalize)
	Depth int    // links from the seed: 0 for the seed, a listed URL or a sitemap entry; for a sitemap, its nesting level
	Kind  Kind
}

// Frontier is the queue of URLs a crawl has yet to fetch, in the order they
// should be fetched (first in, first out, which makes a seed crawl breadth
// first). A crawl has one frontier; implementations must be safe for
// concurrent use, since workers push the links they find while the
// scheduler pops.
//
// A shared implementation (several processes working one crawl) leases
// what Pop returns until Done; the in-memory one has nothing to lease.
type Frontier interface {
	// Push appends items and returns how many it accepted: a bounded
	// frontier may accept a prefix. The crawl reports the rest as skipped
	// with reason "limit".
	Push(ctx context.Context, items []Item) (accepted int, err error)
	// Pop removes and returns the oldest item; ok is false when the
	// frontier is empty right now (more may be pushed later).
	Pop(ctx context.Context) (it Item, ok bool, err error)
	// Done reports that an item returned by Pop has been dealt with.
	Done(ctx context.Context, it Item) error
	// Len returns the number of items waiting.
	Len(ctx context.Context) (int, error)
}

// Seen is the set of URLs a crawl has already met, so that each is queued
// (or reported skipped) once. It is the only part of a crawl that grows
// with the number of URLs. Implementations must be safe for concurrent use.
type Seen interface {
	// Add adds key and reports whether it was new.
	Add(ctx context.Context, key string) (added bool, err error)
}

// chunkSize items per block of the in-memory queue: consumed blocks are
// released as the queue moves, so memory follows the items waiting.
const chunkSize = 256

type chunk struct {
	items [chunkSize]Item
	next  *chunk
}

// MemoryFrontier is the in-memory Frontier. The zero value is not usable:
// use NewMemoryFrontier. It is safe for concurrent use.
type MemoryFrontier struct {
	mu         sync.Mutex
	head, tail *chunk
	hi, ti     int // next index to pop in head, to push in tail
	n, max     int
}

// NewMemoryFrontier returns an empty in-memory frontier that holds at most
// capacity items (0: no bound).
func NewMemoryFrontier(capacity int) *MemoryFrontier {
	c := new(chunk)
	return &MemoryFrontier{head: c, tail: c, max: capacity}
}

// Push implements Frontier. It never fails.
func (f *MemoryFrontier) Push(_ context.Context, items []Item) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := len(items)
	if f.max > 0 {
		n = max(0, min(n, f.max-f.n))
	}
	for _, it := range items[:n] {
		if f.ti == chunkSize {
			c := new(chunk)
			f.tail.next, f.tail, f.ti = c, c, 0
		}
		f.tail.items[f.ti] = it
		f.ti++
	}
	f.n += n
	return n, nil
}

// Pop implements Frontier. It never fails.
func (f *MemoryFrontier) Pop(context.Context) (Item, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n == 0 {
		return Item{}, false, nil
	}
	if f.hi == chunkSize {
		f.head, f.hi = f.head.next, 0
	}
	it := f.head.items[f.hi]
	f.head.items[f.hi] = Item{} // release the URL
	f.hi++
	f.n--
	if f.n == 0 { // reuse the block
		f.head.next, f.tail, f.hi, f.ti = nil, f.head, 0, 0
	}
	return it, true, nil
}

// Done implements Frontier; an in-memory frontier has no leases.
func (f *MemoryFrontier) Done(context.Context, Item) error { return nil }

// Len implements Frontier.
func (f *MemoryFrontier) Len(context.Context) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n, nil
}

// MemorySeen is the in-memory Seen. It keeps a 128-bit hash of each key
// (35 to 45 bytes a URL, whatever its length); the chance that two of n
// distinct URLs collide is about n²/2¹²⁹, 10⁻²⁸ for a million. The zero
// value is not usable: use NewMemorySeen. It is safe for concurrent use.
type MemorySeen struct {
	mu     sync.Mutex
	s1, s2 maphash.Seed
	m      map[[2]uint64]struct{}
}

// NewMemorySeen returns an empty in-memory set.
func NewMemorySeen() *MemorySeen {
	return &MemorySeen{s1: maphash.MakeSeed(), s2: maphash.MakeSeed(), m: make(map[[2]uint64]struct{})}
}

// Add implements Seen. It never fails.
func (s *MemorySeen) Add(_ context.Context, key string) (bool, error) {
	h := [2]uint64{maphash.String(s.s1, key), maphash.String(s.s2, key)}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.m[h]; ok {
		return false, nil
	}
	s.m[h] = struct{}{}
	return true, nil
}

// Len returns the number of keys added.
func (s *MemorySeen) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}

// Interface guards.
var (
	_ Frontier = (*MemoryFrontier)(nil)
	_ Seen     = (*MemorySeen)(nil)
)
