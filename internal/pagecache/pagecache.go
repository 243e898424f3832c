// Package pagecache holds pages already fetched and rendered, for a short
// while, so that a caller reading a long page in parts (MCP web_fetch with
// start_index) costs one upstream fetch, not one per part.
//
// It is a plain LRU bounded in bytes in total and per tenant, with a TTL.
// It decides nothing: the engine runs the policy and audits every call
// before it looks an entry up.
package pagecache

import (
	"container/list"
	"sync"
	"time"
)

// Defaults of the cache (browse.page_cache_* and limits.page_cache_bytes).
const (
	DefaultMaxBytes       = 64 << 20
	DefaultTenantMaxBytes = 16 << 20
	DefaultTTL            = 5 * time.Minute
)

// Entry is one rendered page.
type Entry struct {
	Title       string
	URL         string // the final URL, after redirects
	ContentType string
	Content     string
}

func (e Entry) size() int64 {
	return int64(len(e.Title) + len(e.URL) + len(e.ContentType) + len(e.Content))
}

// Config configures a Cache. The zero Config uses the defaults.
type Config struct {
	MaxBytes int64            // every entry together; 0: DefaultMaxBytes
	TTL      time.Duration    // how long an entry lives; 0: DefaultTTL
	Now      func() time.Time // nil: time.Now
}

// Cache is an LRU of rendered pages. It is safe for concurrent use; the
// zero Cache is not usable (use New).
type Cache struct {
	max int64
	ttl time.Duration
	now func() time.Time

	mu       sync.Mutex
	lru      *list.List // front: most recently used; values *item
	items    map[key]*list.Element
	total    int64
	byTenant map[string]int64
}

type key struct{ tenant, k string }

type item struct {
	key     key
	entry   Entry
	size    int64
	expires time.Time
}

// New returns an empty cache.
func New(cfg Config) *Cache {
	c := &Cache{max: cfg.MaxBytes, ttl: cfg.TTL, now: cfg.Now,
		lru: list.New(), items: map[key]*list.Element{}, byTenant: map[string]int64{}}
	if c.max <= 0 {
		c.max = DefaultMaxBytes
	}
	if c.ttl <= 0 {
		c.ttl = DefaultTTL
	}
	if c.now == nil {
		c.now = time.Now
	}
	return c
}

// Get returns the live entry of tenant under k and marks it used.
func (c *Cache) Get(tenant, k string) (Entry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[key{tenant, k}]
	if !ok {
		return Entry{}, false
	}
	it := el.Value.(*item)
	if !c.now().Before(it.expires) {
		c.remove(el)
		return Entry{}, false
	}
	c.lru.MoveToFront(el)
	return it.entry, true
}

// Put stores e for tenant under k, evicting the least recently used
// entries of the tenant until the tenant holds at most tenantMax bytes, then
// anyone's until the cache holds at most its MaxBytes. An entry bigger than
// either bound is not stored. tenantMax <= 0 stores nothing.
func (c *Cache) Put(tenant, k string, e Entry, tenantMax int64) {
	size := e.size() + int64(len(k))
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[key{tenant, k}]; ok {
		c.remove(el)
	}
	if size > tenantMax || size > c.max {
		return
	}
	for el := c.lru.Back(); el != nil && c.byTenant[tenant]+size > tenantMax; {
		prev := el.Prev()
		if el.Value.(*item).key.tenant == tenant {
			c.remove(el)
		}
		el = prev
	}
	for c.total+size > c.max {
		c.remove(c.lru.Back())
	}
	it := &item{key: key{tenant, k}, entry: e, size: size, expires: c.now().Add(c.ttl)}
	c.items[it.key] = c.lru.PushFront(it)
	c.total += size
	c.byTenant[tenant] += size
}

// Bytes returns the bytes held in total and by tenant.
func (c *Cache) Bytes(tenant string) (total, ofTenant int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total, c.byTenant[tenant]
}

func (c *Cache) remove(el *list.Element) {
	it := c.lru.Remove(el).(*item)
	delete(c.items, it.key)
	c.total -= it.size
	if c.byTenant[it.key.tenant] -= it.size; c.byTenant[it.key.tenant] == 0 {
		delete(c.byTenant, it.key.tenant)
	}
}
