package crawl

import (
	"context"
	"hash/maphash"
	"sync"
	"time"
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

// Shared is the state of one crawl worked by several runs at once, in one
// process or in many (a crawl job spread over a fleet of replicas): its
// frontier, its seen set, and what makes the runs end and count pages
// together. A shared frontier leases what Pop returns until Done (a run
// that dies loses its leases after a timeout, and the items go back to the
// frontier), so a URL is fetched once in normal operation and at least once
// when a run dies.
//
// With a Shared state, Run polls the frontier while it is empty until Idle
// (the other runs may still push links), and fetches a page only with a
// page slot (Reserve), so that the page limit holds for all the runs
// together.
type Shared interface {
	Frontier
	Seen
	// Seeded tells the other runs that the run that queued the seed (or
	// the list) is done queueing it; until then the crawl is not Idle.
	Seeded(ctx context.Context) error
	// Idle reports that the crawl was seeded and that no item waits and
	// none is leased by any run: the crawl is over.
	Idle(ctx context.Context) (bool, error)
	// Reserve takes one of the crawl's max page slots for it, a page popped
	// by this run and about to be fetched. ok is false when every slot is
	// taken by pages fetched or being fetched; reached then says that max
	// pages were fetched successfully (the limit is reached); if not, the
	// fetches in flight may yet give their slots back.
	Reserve(ctx context.Context, it Item, max int) (ok, reached bool, err error)
	// Settle ends the reservation of it: fetched, the page counts toward the
	// limit (reached: the limit is now reached); otherwise the slot is
	// free again.
	Settle(ctx context.Context, it Item, fetched bool, max int) (reached bool, err error)
}

// Politeness is a Shared state that makes per-origin politeness hold for
// all the runs of a crawl together: request slots per origin, the
// Crawl-delay between any two requests to it, and one robots.txt fetch
// per origin whose verdict every run reads.
type Politeness interface {
	// AcquireHost takes one of limit request slots of origin, no sooner
	// than delay after the last request any run started there. An empty
	// token means not now: try again after wait.
	AcquireHost(ctx context.Context, origin string, limit int, delay time.Duration) (token string, wait time.Duration, err error)
	// ReleaseHost gives the slot back once the response is in.
	ReleaseHost(ctx context.Context, origin, token string) error
	// LoadRobots returns what StoreRobots stored for origin and has not
	// expired, or nil.
	LoadRobots(ctx context.Context, origin string) ([]byte, error)
	// StoreRobots keeps a robots.txt verdict (encoded by Run) for ttl.
	StoreRobots(ctx context.Context, origin string, data []byte, ttl time.Duration) error
}

// SeenQueue is a Shared state that adds keys to the seen set and queues
// the items of the new ones in one atomic step: a run that dies between
// marking a link seen and queueing it would otherwise lose it.
type SeenQueue interface {
	// AddAndPush adds keys and reports, for each, whether it was new; the
	// item of a new key is queued unless its URL is empty. A key repeated
	// in keys is new at most once.
	AddAndPush(ctx context.Context, keys []string, items []Item) ([]bool, error)
}

// PageSlots is a Shared state that is also Politeness and SeenQueue and
// does their steps for one page in two round trips to a shared store
// instead of five: BeginPage takes the page slot and a request slot of
// the page's origin; EndPage queues the page's new links, gives both
// slots back and ends the item's lease, atomically (and may lease the
// next items for the following Pop).
type PageSlots interface {
	// BeginPage takes it's page slot, as Reserve, then one of limit
	// request slots of origin no sooner than delay after the last
	// request there, as AcquireHost. ok: both are taken, the host slot
	// is token. Otherwise reached says that the page limit is reached;
	// if not, retry after wait (0: no page slot is free now). A page
	// slot taken before the origin said not yet stays taken.
	BeginPage(ctx context.Context, it Item, max int, origin string, limit int, delay time.Duration) (token string, ok, reached bool, wait time.Duration, err error)
	// EndPage adds keys and queues the items of the new ones (as
	// AddAndPush; added says which were new), gives back the host slot
	// token of origin ("" for none) and settles it's page slot (as
	// Settle; reached: the limit is now reached).
	EndPage(ctx context.Context, it Item, fetched bool, max int, origin, token string, keys []string, items []Item) (added []bool, reached bool, err error)
}

// BatchPopper is a Frontier that pops several items in one call (one
// round trip to a shared store). Run takes at most a few at once: what a
// run holds, the other runs of a shared crawl cannot fetch.
type BatchPopper interface {
	// PopN removes and returns up to n of the oldest items, fewer when
	// fewer wait (none: the frontier is empty right now).
	PopN(ctx context.Context, n int) ([]Item, error)
}

type sharedKey struct{}

type sharedState struct {
	s    Shared
	join bool
}

// WithShared returns a context that makes Run, when its Config names no
// Shared state, work s: join says that another run queues the seed (this
// one only works the frontier). It lets a caller hand the state to a
// provider that calls Run for it.
func WithShared(ctx context.Context, s Shared, join bool) context.Context {
	return context.WithValue(ctx, sharedKey{}, sharedState{s: s, join: join})
}

// Seen is the set of URLs a crawl has already met, so that each is queued
// (or reported skipped) once. With the Frontier's waiting items it is the
// only part of a crawl that grows with the number of URLs. Implementations
// must be safe for concurrent use.
type Seen interface {
	// Add adds key and reports whether it was new.
	Add(ctx context.Context, key string) (added bool, err error)
}

// The in-memory frontier keeps its items in blocks. A block holds up to
// blockItems items, or blockBytes bytes of URL text, and the URLs in it are
// front-coded: each is stored as the length of the prefix it shares with
// the URL before it in the block, plus the rest. A crawl's URLs mostly
// share their origin and path prefix, so an item costs its 16-byte entry
// and a few bytes of text (20 to 30 bytes in all), less than half of an
// Item and its string.
// Consumed blocks are released as the queue moves, so memory follows the
// items waiting.
const (
	blockItems = 256
	blockBytes = 8 << 10
)

type block struct {
	entries []entry // cap blockItems
	text    []byte  // the entries' suffixes, in order
	next    *block
}

type entry struct {
	end    uint32 // end of the suffix in text; it starts at the previous entry's end
	shared uint32 // bytes of the previous URL in the block that prefix this one
	meta   int64  // Depth<<8 | Kind
}

func newBlock() *block { return &block{entries: make([]entry, 0, blockItems)} }

// MemoryFrontier is the in-memory Frontier. The zero value is not usable:
// use NewMemoryFrontier. It is safe for concurrent use.
type MemoryFrontier struct {
	mu         sync.Mutex
	head, tail *block
	hi         int    // next entry to pop in head
	popped     string // the URL popped last from head, which the next one is coded against
	pushed     string // the URL pushed last to tail
	n, max     int
}

// NewMemoryFrontier returns an empty in-memory frontier that holds at most
// capacity items (0: no bound). Depths must lie within ±2⁵⁵.
func NewMemoryFrontier(capacity int) *MemoryFrontier {
	b := newBlock()
	return &MemoryFrontier{head: b, tail: b, max: capacity}
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
		t := f.tail
		shared := 0
		if len(t.entries) > 0 {
			shared = commonPrefix(f.pushed, it.URL)
		}
		suffix := it.URL[shared:]
		if len(t.entries) == blockItems || len(t.entries) > 0 && len(t.text)+len(suffix) > blockBytes {
			if c := cap(t.text); c-len(t.text) > c/8 { // drop append's slack from the sealed block
				t.text = append(make([]byte, 0, len(t.text)), t.text...)
			}
			t = newBlock()
			f.tail.next, f.tail = t, t
			shared, suffix = 0, it.URL
		}
		t.text = append(t.text, suffix...)
		t.entries = append(t.entries, entry{end: uint32(len(t.text)), shared: uint32(shared), meta: int64(it.Depth)<<8 | int64(it.Kind)})
		f.pushed = it.URL
	}
	f.n += n
	return n, nil
}

func commonPrefix(a, b string) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// Pop implements Frontier. It never fails.
func (f *MemoryFrontier) Pop(context.Context) (Item, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n == 0 {
		return Item{}, false, nil
	}
	if f.hi == len(f.head.entries) {
		f.head, f.hi, f.popped = f.head.next, 0, ""
	}
	b := f.head
	e := b.entries[f.hi]
	start := uint32(0)
	if f.hi > 0 {
		start = b.entries[f.hi-1].end
	}
	u := f.popped[:e.shared] + string(b.text[start:e.end])
	f.popped = u
	f.hi++
	f.n--
	if f.n == 0 { // reuse the block
		b.entries, b.text, b.next = b.entries[:0], b.text[:0], nil
		f.tail, f.hi, f.popped, f.pushed = b, 0, "", ""
	}
	return Item{URL: u, Depth: int(e.meta >> 8), Kind: Kind(e.meta & 0xff)}, true, nil
}

// Done implements Frontier; an in-memory frontier has no leases.
func (f *MemoryFrontier) Done(context.Context, Item) error { return nil }

// Len implements Frontier.
func (f *MemoryFrontier) Len(context.Context) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n, nil
}

// MemorySeen is the in-memory Seen. It keeps a 64-bit hash of each key
// (hash/maphash, with a seed of its own) in open-addressed tables filled to
// between 3/8 and 3/4: 11 to 21 bytes a URL, whatever its length. The
// tables are split in shards by the hash's top bits, each with its own
// lock, so a table that grows copies a small part of the set and
// concurrent Adds rarely wait for one another.
//
// Two distinct keys with the same hash make the second look seen: that URL
// is neither queued nor listed as skipped. Among n distinct keys the
// chance of any collision is about n²/2⁶⁵: 3·10⁻¹⁰ for 100,000 URLs,
// 3·10⁻⁸ for a million, 3·10⁻⁶ for ten million.
//
// The zero value is not usable: use NewMemorySeen. It is safe for
// concurrent use.
type MemorySeen struct {
	seed   maphash.Seed
	shards [seenShards]seenShard
}

const (
	seenShards     = 64 // a power of two
	seenShardBits  = 6  // log2(seenShards)
	seenShardSlots = 16 // initial slots per shard, a power of two
)

type seenShard struct {
	mu    sync.Mutex
	slots []uint64 // 0: empty
	n     int
}

// NewMemorySeen returns an empty in-memory set.
func NewMemorySeen() *MemorySeen {
	return &MemorySeen{seed: maphash.MakeSeed()}
}

// Add implements Seen. It never fails.
func (s *MemorySeen) Add(_ context.Context, key string) (bool, error) {
	h := maphash.String(s.seed, key)
	if h == 0 { // 0 marks an empty slot
		h = 1
	}
	sh := &s.shards[h>>(64-seenShardBits)]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.slots == nil {
		sh.slots = make([]uint64, seenShardSlots)
	}
	if !sh.insert(h) {
		return false, nil
	}
	if sh.n++; 4*sh.n > 3*len(sh.slots) {
		old := sh.slots
		sh.slots = make([]uint64, 2*len(old))
		for _, v := range old {
			if v != 0 {
				sh.insert(v)
			}
		}
	}
	return true, nil
}

// insert adds h to the table, which has a free slot, unless it is there.
func (sh *seenShard) insert(h uint64) bool {
	mask := uint64(len(sh.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		switch sh.slots[i] {
		case h:
			return false
		case 0:
			sh.slots[i] = h
			return true
		}
	}
}

// Len returns the number of keys added.
func (s *MemorySeen) Len() int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		n += sh.n
		sh.mu.Unlock()
	}
	return n
}

// Interface guards.
var (
	_ Frontier = (*MemoryFrontier)(nil)
	_ Seen     = (*MemorySeen)(nil)
)
