package fleet

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/airlockhq/airlock/internal/crawl"
)

// DefaultCrawlLease is how long a replica holds a URL it popped from a
// shared frontier without renewing (it renews every third of it while it
// lives): when a replica dies, the URLs it was fetching go back to the
// frontier this long after its last renewal.
const DefaultCrawlLease = 15 * time.Second

// seenHashBytes of SHA-256 stand for a URL in a crawl's seen set: 12 bytes
// a URL whatever its length; two distinct URLs among n collide with a
// chance of about n²/2⁹⁷.
const seenHashBytes = 12

// Crawl is the state of one crawl job shared by the replicas that work it
// (crawl.Shared): a FIFO list of waiting URLs, a sorted set of the URLs
// leased by a replica (score: when the lease ends, by Redis's clock), the
// seen set (a 12-byte hash per URL), the page slots (a sorted set of leases
// like the frontier's) and counters. Pop, Reserve and Settle are Lua
// scripts, atomic on the server.
//
// A Crawl renews the leases of the URLs it popped in the background until
// Done or Close. Close returns the URLs still leased to the frontier; a
// replica that dies without Close loses its leases when they lapse, and
// its URLs are fetched again by the others: at least once, never lost.
type Crawl struct {
	f     *Fleet
	id    string
	lease time.Duration

	mu     sync.Mutex
	leased map[string]string // encoded item → lease token
	hosts  map[string]string // host slot token → origin
	// next holds items EndPage leased for this Crawl, which PopN hands
	// out before it asks Redis: the page that ends brings the next one
	// in the same round trip.
	next    []crawl.Item
	run     string // the run that Joined through this Crawl
	started bool   // renewLoop runs
	closed  bool
	stop    chan struct{}
	done    chan struct{}
}

// Crawl returns the shared state of crawl job id; lease <= 0 is
// DefaultCrawlLease. A Crawl that popped an item or joined the crawl must
// be closed (Close) when its run ends.
func (f *Fleet) Crawl(id string, lease time.Duration) *Crawl {
	if lease <= 0 {
		lease = DefaultCrawlLease
	}
	return &Crawl{f: f, id: id, lease: lease, leased: map[string]string{}, hosts: map[string]string{},
		stop: make(chan struct{}), done: make(chan struct{})}
}

// renewing starts the renewal of leases and heartbeat, once; it reports
// false on a closed Crawl.
func (c *Crawl) renewing() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	if !c.started {
		c.started = true
		go c.renewLoop()
	}
	return true
}

// ActiveCrawls lists the shared crawls that replicas may join: those
// announced by SetMeta and not yet deleted.
func (f *Fleet) ActiveCrawls(ctx context.Context) ([]string, error) {
	ids, err := f.rdb.SMembers(ctx, f.key("crawls", "active")).Result()
	if err != nil {
		return nil, unavailable("crawl state", err)
	}
	return ids, nil
}

func (c *Crawl) key(part string) string { return c.f.key("crawl", c.id, part) }

// crawlKeys are the keys of crawl id's state.
func (f *Fleet) crawlKeys(id string) []string {
	parts := []string{"queue", "leases", "seen", "slots", "stats", "seeded", "meta", "runs", "results", "stop", "robots", "hosts"}
	keys := make([]string, len(parts))
	for i, p := range parts {
		keys[i] = f.key("crawl", id, p)
	}
	return keys
}

func encodeItem(it crawl.Item) string {
	return strconv.Itoa(it.Depth) + " " + strconv.Itoa(int(it.Kind)) + " " + it.URL
}

func decodeItem(s string) (crawl.Item, error) {
	parts := strings.SplitN(s, " ", 3)
	if len(parts) != 3 {
		return crawl.Item{}, fmt.Errorf("bad frontier item %q", s)
	}
	d, err1 := strconv.Atoi(parts[0])
	k, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil || k < 0 || k > 255 {
		return crawl.Item{}, fmt.Errorf("bad frontier item %q", s)
	}
	return crawl.Item{URL: parts[2], Depth: d, Kind: crawl.Kind(k)}, nil
}

func newToken() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Push implements crawl.Frontier: it appends every item.
func (c *Crawl) Push(ctx context.Context, items []crawl.Item) (int, error) {
	if len(items) == 0 {
		return 0, nil
	}
	vals := make([]any, len(items))
	for i, it := range items {
		vals[i] = encodeItem(it)
	}
	if err := c.f.rdb.RPush(ctx, c.key("queue"), vals...).Err(); err != nil {
		return 0, unavailable("crawl frontier", err)
	}
	return len(items), nil
}

// redisNow is the script prelude that reads the server's clock in
// milliseconds: leases are compared on one clock, whatever the replicas'.
const redisNow = `local t = redis.call('TIME') local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) `

// popNScript leases up to ARGV[3] items: the oldest lapsed leases first,
// then the head of the queue. KEYS: queue, leases. ARGV: a token prefix
// (the item's index completes it), lease ms, n. Members of leases are
// "token item". Returns the items.
var popNScript = redis.NewScript(redisNow + `
local out = {}
local deadline = now + tonumber(ARGV[2])
local n = tonumber(ARGV[3])
local lapsed = redis.call('ZRANGE', KEYS[2], '-inf', now, 'BYSCORE', 'LIMIT', 0, n)
for _, m in ipairs(lapsed) do
	redis.call('ZREM', KEYS[2], m)
	out[#out + 1] = string.sub(m, string.find(m, ' ', 1, true) + 1)
end
while #out < n do
	local it = redis.call('LPOP', KEYS[1])
	if not it then break end
	out[#out + 1] = it
end
for i, it in ipairs(out) do
	redis.call('ZADD', KEYS[2], deadline, ARGV[1] .. i .. ' ' .. it)
end
return out`)

// PopN implements crawl.BatchPopper: each item is leased to this Crawl
// until Done, as with Pop.
func (c *Crawl) PopN(ctx context.Context, n int) ([]crawl.Item, error) {
	if n <= 0 {
		return nil, nil
	}
	c.mu.Lock()
	if len(c.next) > 0 {
		k := min(n, len(c.next))
		items := append([]crawl.Item(nil), c.next[:k]...)
		c.next = append(c.next[:0], c.next[k:]...)
		c.mu.Unlock()
		return items, nil
	}
	c.mu.Unlock()
	prefix := newToken() + "-"
	raws, err := popNScript.Run(ctx, c.f.rdb, []string{c.key("queue"), c.key("leases")}, prefix, c.lease.Milliseconds(), n).StringSlice()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, unavailable("crawl frontier", err)
	}
	items := make([]crawl.Item, 0, len(raws))
	c.renewing()
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, raw := range raws {
		it, err := decodeItem(raw)
		if err != nil {
			return nil, unavailable("crawl frontier", err)
		}
		c.leased[raw] = prefix + strconv.Itoa(i+1)
		items = append(items, it)
	}
	return items, nil
}

// Pop implements crawl.Frontier: the item is leased to this Crawl until
// Done.
func (c *Crawl) Pop(ctx context.Context) (crawl.Item, bool, error) {
	items, err := c.PopN(ctx, 1)
	if err != nil || len(items) == 0 {
		return crawl.Item{}, false, err
	}
	return items[0], true, nil
}

// Done implements crawl.Frontier: it ends the item's lease (and its page
// slot's, if Settle did not).
func (c *Crawl) Done(ctx context.Context, it crawl.Item) error {
	raw := encodeItem(it)
	c.mu.Lock()
	token, ok := c.leased[raw]
	delete(c.leased, raw)
	c.mu.Unlock()
	if !ok {
		return nil
	}
	member := token + " " + raw
	_, err := c.f.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.ZRem(ctx, c.key("leases"), member)
		p.ZRem(ctx, c.key("slots"), token)
		return nil
	})
	if err != nil {
		return unavailable("crawl frontier", err)
	}
	return nil
}

// Len implements crawl.Frontier: the URLs waiting, leased ones not
// included.
func (c *Crawl) Len(ctx context.Context) (int, error) {
	n, err := c.f.rdb.LLen(ctx, c.key("queue")).Result()
	if err != nil {
		return 0, unavailable("crawl frontier", err)
	}
	return int(n), nil
}

func seenMember(key string) string {
	h := sha256.Sum256([]byte(key))
	return string(h[:seenHashBytes])
}

// Add implements crawl.Seen.
func (c *Crawl) Add(ctx context.Context, key string) (bool, error) {
	n, err := c.f.rdb.SAdd(ctx, c.key("seen"), seenMember(key)).Result()
	if err != nil {
		return false, unavailable("crawl seen set", err)
	}
	return n == 1, nil
}

// addPushScript adds hashes to the seen set and queues the items of the
// new ones. KEYS: seen, queue. ARGV: pairs of hash and item ("" for
// none). Returns 1 or 0 per hash.
var addPushScript = redis.NewScript(`
local out = {}
for i = 1, #ARGV, 2 do
	local added = redis.call('SADD', KEYS[1], ARGV[i])
	out[#out + 1] = added
	if added == 1 and ARGV[i + 1] ~= '' then redis.call('RPUSH', KEYS[2], ARGV[i + 1]) end
end
return out`)

// AddAndPush implements crawl.SeenQueue: one round trip, atomic on the
// server.
func (c *Crawl) AddAndPush(ctx context.Context, keys []string, items []crawl.Item) ([]bool, error) {
	if len(keys) != len(items) {
		return nil, fmt.Errorf("crawl: %d keys for %d items", len(keys), len(items))
	}
	args := make([]any, 0, 2*len(keys))
	for i, k := range keys {
		it := ""
		if items[i].URL != "" {
			it = encodeItem(items[i])
		}
		args = append(args, seenMember(k), it)
	}
	vals, err := addPushScript.Run(ctx, c.f.rdb, []string{c.key("seen"), c.key("queue")}, args...).Int64Slice()
	if err != nil {
		return nil, unavailable("crawl frontier", err)
	}
	out := make([]bool, len(vals))
	for i, v := range vals {
		out[i] = v == 1
	}
	return out, nil
}

// Seeded implements crawl.Shared.
func (c *Crawl) Seeded(ctx context.Context) error {
	if err := c.f.rdb.Set(ctx, c.key("seeded"), "1", 0).Err(); err != nil {
		return unavailable("crawl state", err)
	}
	return nil
}

// Idle implements crawl.Shared.
func (c *Crawl) Idle(ctx context.Context) (bool, error) {
	st, err := c.Stats(ctx)
	return st.Seeded && st.Waiting == 0 && st.Leased == 0, err
}

// reserveScript takes a page slot. KEYS: slots, stats. ARGV: max, token,
// lease ms. Returns 1 (taken), 0 (none free now), 2 (limit reached).
var reserveScript = redis.NewScript(redisNow + `
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local max = tonumber(ARGV[1])
local ok = tonumber(redis.call('HGET', KEYS[2], 'ok') or '0')
if ok >= max then return 2 end
if redis.call('ZSCORE', KEYS[1], ARGV[2]) then return 1 end
if ok + redis.call('ZCARD', KEYS[1]) >= max then return 0 end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[2])
return 1`)

// settleScript ends a page slot and the lease of its URL (the crawl is
// done with it: Done follows). KEYS: slots, stats, leases. ARGV: fetched
// (1 or 0), token, max, lease member. Returns 1 when the limit is reached.
var settleScript = redis.NewScript(`
redis.call('ZREM', KEYS[1], ARGV[2])
redis.call('ZREM', KEYS[3], ARGV[4])
redis.call('HINCRBY', KEYS[2], 'done', 1)
if ARGV[1] == '1' then
	local ok = redis.call('HINCRBY', KEYS[2], 'ok', 1)
	if ok >= tonumber(ARGV[3]) then return 1 end
else
	redis.call('HINCRBY', KEYS[2], 'failed', 1)
end
return 0`)

func (c *Crawl) token(it crawl.Item) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.leased[encodeItem(it)]
	return t, ok
}

// Reserve implements crawl.Shared; the slot is leased with the item.
func (c *Crawl) Reserve(ctx context.Context, it crawl.Item, max int) (ok, reached bool, err error) {
	token, held := c.token(it)
	if !held {
		return false, false, unavailable("crawl page slots", fmt.Errorf("%s is not leased here", it.URL))
	}
	n, err := reserveScript.Run(ctx, c.f.rdb, []string{c.key("slots"), c.key("stats")}, max, token, c.lease.Milliseconds()).Int()
	if err != nil {
		return false, false, unavailable("crawl page slots", err)
	}
	return n == 1, n == 2, nil
}

// Settle implements crawl.Shared. It also ends the item's lease, in the
// same round trip: Done then has nothing left to do.
func (c *Crawl) Settle(ctx context.Context, it crawl.Item, fetched bool, max int) (bool, error) {
	raw := encodeItem(it)
	c.mu.Lock()
	token := c.leased[raw]
	c.mu.Unlock()
	f := "0"
	if fetched {
		f = "1"
	}
	n, err := settleScript.Run(ctx, c.f.rdb, []string{c.key("slots"), c.key("stats"), c.key("leases")}, f, token, max, token+" "+raw).Int()
	if err != nil {
		return false, unavailable("crawl page slots", err)
	}
	c.mu.Lock()
	if c.leased[raw] == token {
		delete(c.leased, raw)
	}
	c.mu.Unlock()
	return n == 1, nil
}

// beginScript is reserveScript then hostScript, in one round trip: the
// page slot of a leased item, then a request slot of its origin. KEYS:
// slots, stats, the origin's slots, its next-request time, the crawl's
// origins. ARGV: max, the item's token, lease ms, limit, delay ms, host
// token, origin. Returns 0 (both taken), -2 (the limit is reached), -3 (no
// page slot free now), -1 (every request slot of the origin busy) or the
// milliseconds until its Crawl-delay has passed. The page slot stays
// taken when the origin says not yet: the retry finds it.
var beginScript = redis.NewScript(redisNow + `
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local max = tonumber(ARGV[1])
local ok = tonumber(redis.call('HGET', KEYS[2], 'ok') or '0')
if ok >= max then return -2 end
if not redis.call('ZSCORE', KEYS[1], ARGV[2]) then
	if ok + redis.call('ZCARD', KEYS[1]) >= max then return -3 end
	redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[2])
end
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
if redis.call('ZCARD', KEYS[3]) >= tonumber(ARGV[4]) then return -1 end
local nxt = tonumber(redis.call('GET', KEYS[4]) or '0')
if nxt > now then return nxt - now end
redis.call('ZADD', KEYS[3], now + tonumber(ARGV[3]), ARGV[6])
local delay = tonumber(ARGV[5])
if delay > 0 then redis.call('SET', KEYS[4], now + delay, 'PX', delay + 1000) end
redis.call('SADD', KEYS[5], ARGV[7])
return 0`)

// BeginPage implements crawl.PageSlots: Reserve and AcquireHost in one
// round trip.
func (c *Crawl) BeginPage(ctx context.Context, it crawl.Item, max int, origin string, limit int, delay time.Duration) (string, bool, bool, time.Duration, error) {
	token, held := c.token(it)
	if !held {
		return "", false, false, 0, unavailable("crawl page slots", fmt.Errorf("%s is not leased here", it.URL))
	}
	host := newToken()
	n, err := beginScript.Run(ctx, c.f.rdb, []string{c.key("slots"), c.key("stats"), c.hostKey(origin), c.nextKey(origin), c.key("hosts")},
		max, token, c.lease.Milliseconds(), limit, delay.Milliseconds(), host, origin).Int64()
	switch {
	case err != nil:
		return "", false, false, 0, unavailable("crawl page slots", err)
	case n == 0:
		if c.renewing() {
			c.mu.Lock()
			c.hosts[host] = origin
			c.mu.Unlock()
		}
		return host, true, false, 0, nil
	case n == -2:
		return "", false, true, 0, nil
	case n == -3:
		return "", false, false, 0, nil
	case n == -1:
		return "", false, false, hostBusyWait, nil
	}
	return "", false, false, time.Duration(n) * time.Millisecond, nil
}

// endScript is addPushScript, the release of a host slot, settleScript
// and, unless the limit is reached, popNScript for ARGV[8] items, in one
// round trip. KEYS: seen, queue, slots, stats, leases, the origin's
// slots. ARGV: fetched (1 or 0), the item's token, max, its lease member,
// the host token ("" for none), a token prefix for the items leased, lease
// ms, how many to lease, then pairs of hash and item ("" for none).
// Returns {reached (1 or 0), {1 or 0 per hash}, {items leased}}.
var endScript = redis.NewScript(redisNow + `
local added = {}
for i = 9, #ARGV, 2 do
	local a = redis.call('SADD', KEYS[1], ARGV[i])
	added[#added + 1] = a
	if a == 1 and ARGV[i + 1] ~= '' then redis.call('RPUSH', KEYS[2], ARGV[i + 1]) end
end
if ARGV[5] ~= '' then redis.call('ZREM', KEYS[6], ARGV[5]) end
redis.call('ZREM', KEYS[3], ARGV[2])
redis.call('ZREM', KEYS[5], ARGV[4])
redis.call('HINCRBY', KEYS[4], 'done', 1)
local reached = 0
if ARGV[1] == '1' then
	if redis.call('HINCRBY', KEYS[4], 'ok', 1) >= tonumber(ARGV[3]) then reached = 1 end
else
	redis.call('HINCRBY', KEYS[4], 'failed', 1)
end
local out = {}
local n = tonumber(ARGV[8])
if reached == 0 and n > 0 then
	local deadline = now + tonumber(ARGV[7])
	local lapsed = redis.call('ZRANGE', KEYS[5], '-inf', now, 'BYSCORE', 'LIMIT', 0, n)
	for _, m in ipairs(lapsed) do
		redis.call('ZREM', KEYS[5], m)
		out[#out + 1] = string.sub(m, string.find(m, ' ', 1, true) + 1)
	end
	while #out < n do
		local it = redis.call('LPOP', KEYS[2])
		if not it then break end
		out[#out + 1] = it
	end
	for i, it in ipairs(out) do
		redis.call('ZADD', KEYS[5], deadline, ARGV[6] .. i .. ' ' .. it)
	end
end
return {reached, added, out}`)

// EndPage implements crawl.PageSlots: AddAndPush, ReleaseHost and Settle
// in one round trip, which also leases the next item of the frontier for
// this Crawl's next PopN when none is waiting here.
func (c *Crawl) EndPage(ctx context.Context, it crawl.Item, fetched bool, max int, origin, hostToken string, keys []string, items []crawl.Item) ([]bool, bool, error) {
	if len(keys) != len(items) {
		return nil, false, fmt.Errorf("crawl: %d keys for %d items", len(keys), len(items))
	}
	raw := encodeItem(it)
	c.mu.Lock()
	token := c.leased[raw]
	delete(c.hosts, hostToken)
	prefetch := 0
	if len(c.next) == 0 && !c.closed {
		prefetch = 1
	}
	c.mu.Unlock()
	f := "0"
	if fetched {
		f = "1"
	}
	prefix := newToken() + "-"
	args := make([]any, 0, 8+2*len(keys))
	args = append(args, f, token, max, token+" "+raw, hostToken, prefix, c.lease.Milliseconds(), prefetch)
	for i, k := range keys {
		enc := ""
		if items[i].URL != "" {
			enc = encodeItem(items[i])
		}
		args = append(args, seenMember(k), enc)
	}
	v, err := endScript.Run(ctx, c.f.rdb, []string{c.key("seen"), c.key("queue"), c.key("slots"), c.key("stats"), c.key("leases"), c.hostKey(origin)}, args...).Slice()
	if err != nil {
		return nil, false, unavailable("crawl frontier", err)
	}
	reached, added, popped, err := parseEnd(v)
	if err != nil {
		return nil, false, unavailable("crawl frontier", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.leased[raw] == token {
		delete(c.leased, raw)
	}
	for i, p := range popped {
		next, err := decodeItem(p)
		if err != nil {
			return nil, false, unavailable("crawl frontier", err)
		}
		c.leased[p] = prefix + strconv.Itoa(i+1)
		c.next = append(c.next, next)
	}
	return added, reached, nil
}

// parseEnd reads endScript's reply.
func parseEnd(v []any) (reached bool, added []bool, popped []string, err error) {
	if len(v) != 3 {
		return false, nil, nil, fmt.Errorf("end page: reply of %d parts", len(v))
	}
	r, _ := v[0].(int64)
	as, _ := v[1].([]any)
	ps, _ := v[2].([]any)
	added = make([]bool, len(as))
	for i, a := range as {
		n, _ := a.(int64)
		added[i] = n == 1
	}
	for _, p := range ps {
		s, ok := p.(string)
		if !ok {
			return false, nil, nil, fmt.Errorf("end page: item %v", p)
		}
		popped = append(popped, s)
	}
	return r == 1, added, popped, nil
}

// renewScript extends the leases (and page slots) this Crawl holds, unless
// they lapsed and another replica took the URL. KEYS: leases, slots.
// ARGV: lease ms, then pairs of token and item.
var renewScript = redis.NewScript(redisNow + `
local deadline = now + tonumber(ARGV[1])
for i = 2, #ARGV, 2 do
	redis.call('ZADD', KEYS[1], 'XX', deadline, ARGV[i] .. ' ' .. ARGV[i + 1])
	redis.call('ZADD', KEYS[2], 'XX', deadline, ARGV[i])
end
return 0`)

func (c *Crawl) held() []any {
	c.mu.Lock()
	defer c.mu.Unlock()
	args := make([]any, 0, 2*len(c.leased))
	for raw, token := range c.leased {
		args = append(args, token, raw)
	}
	return args
}

func (c *Crawl) renewLoop() {
	defer close(c.done)
	t := time.NewTicker(c.lease / 3)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
		}
		if err := c.renew(); err != nil {
			c.f.logger.Warn("crawl leases not renewed", "crawl", c.id, "error", err.Error())
		}
	}
}

func (c *Crawl) renew() error {
	ctx, cancel := context.WithTimeout(context.Background(), IOTimeout)
	defer cancel()
	c.mu.Lock()
	run := c.run
	c.mu.Unlock()
	if run != "" {
		if err := c.heartbeat(ctx, run); err != nil {
			return err
		}
	}
	if err := c.renewHosts(ctx); err != nil {
		return err
	}
	held := c.held()
	if len(held) == 0 {
		return nil
	}
	return renewScript.Run(ctx, c.f.rdb, []string{c.key("leases"), c.key("slots")}, append([]any{c.lease.Milliseconds()}, held...)...).Err()
}

// renewHosts extends the host slots of the requests in flight here (a
// request may outlast a lease), unless they lapsed meanwhile.
func (c *Crawl) renewHosts(ctx context.Context) error {
	c.mu.Lock()
	slots := make(map[string]string, len(c.hosts))
	for token, origin := range c.hosts {
		slots[token] = origin
	}
	c.mu.Unlock()
	if len(slots) == 0 {
		return nil
	}
	keys := make([]string, 0, len(slots))
	args := []any{c.lease.Milliseconds()}
	for token, origin := range slots {
		keys = append(keys, c.hostKey(origin))
		args = append(args, token)
	}
	return renewHostsScript.Run(ctx, c.f.rdb, keys, args...).Err()
}

// renewHostsScript extends host slots on the server's clock. KEYS: the
// origins' slot sets. ARGV: lease ms, then the token in each.
var renewHostsScript = redis.NewScript(redisNow + `
local deadline = now + tonumber(ARGV[1])
for i, key in ipairs(KEYS) do
	redis.call('ZADD', key, 'XX', deadline, ARGV[i + 1])
end
return 0`)

// heartbeat says run works the crawl for two thirds of a lease: a run
// that dies lapses before the URLs it leased do, so that the run that
// fetches them last is the one that finds itself alone (Leave).
func (c *Crawl) heartbeat(ctx context.Context, run string) error {
	if err := heartbeatScript.Run(ctx, c.f.rdb, []string{c.key("runs")}, (2 * c.lease / 3).Milliseconds(), run).Err(); err != nil {
		return unavailable("crawl runs", err)
	}
	return nil
}

// heartbeatScript and leaveScript keep the runs on the server's clock,
// as the leases are. KEYS: runs (and results). ARGV: ms, run (and its
// result). leaveScript returns the runs still alive.
var (
	heartbeatScript = redis.NewScript(redisNow + `
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[1]), ARGV[2])
return 0`)
	leaveScript = redis.NewScript(redisNow + `
redis.call('RPUSH', KEYS[2], ARGV[2])
redis.call('ZREM', KEYS[1], ARGV[1])
return redis.call('ZCOUNT', KEYS[1], '(' .. now, '+inf')`)
)

// returnScript gives leased items back to the head of the queue, those
// whose lease is still this replica's. KEYS: queue, leases, slots. ARGV:
// pairs of token and item.
var returnScript = redis.NewScript(`
for i = 1, #ARGV, 2 do
	if redis.call('ZREM', KEYS[2], ARGV[i] .. ' ' .. ARGV[i + 1]) == 1 then
		redis.call('LPUSH', KEYS[1], ARGV[i + 1])
	end
	redis.call('ZREM', KEYS[3], ARGV[i])
end
return 0`)

// Close stops renewing and returns the URLs still leased here to the
// frontier, for the other replicas.
func (c *Crawl) Close(ctx context.Context) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	started := c.started
	c.mu.Unlock()
	close(c.stop)
	if started {
		<-c.done
	}
	held := c.held()
	c.mu.Lock()
	clear(c.leased)
	c.next = nil
	c.mu.Unlock()
	if len(held) == 0 {
		return nil
	}
	if err := returnScript.Run(ctx, c.f.rdb, []string{c.key("queue"), c.key("leases"), c.key("slots")}, held...).Err(); err != nil {
		return unavailable("crawl frontier", err)
	}
	return nil
}

// Abandon stops renewing without returning anything, as a replica that
// dies does (tests).
func (c *Crawl) Abandon() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closed {
		c.closed = true
		close(c.stop)
	}
}

// CrawlStats are a shared crawl's counters, for progress.
type CrawlStats struct {
	Seeded           bool // the starter has queued the seed (Seeded)
	Done, OK, Failed int  // page fetches finished, successful, failed
	Waiting, Leased  int  // URLs in the frontier and being fetched
}

// Stats reads the crawl's counters.
func (c *Crawl) Stats(ctx context.Context) (CrawlStats, error) {
	var stats *redis.MapStringStringCmd
	var seeded, waiting, leased *redis.IntCmd
	_, err := c.f.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		stats = p.HGetAll(ctx, c.key("stats"))
		seeded = p.Exists(ctx, c.key("seeded"))
		waiting = p.LLen(ctx, c.key("queue"))
		leased = p.ZCard(ctx, c.key("leases"))
		return nil
	})
	if err != nil {
		return CrawlStats{}, unavailable("crawl state", err)
	}
	m := stats.Val()
	atoi := func(s string) int { n, _ := strconv.Atoi(s); return n }
	return CrawlStats{Seeded: seeded.Val() == 1, Done: atoi(m["done"]), OK: atoi(m["ok"]), Failed: atoi(m["failed"]),
		Waiting: int(waiting.Val()), Leased: int(leased.Val())}, nil
}

// SetMeta stores what the replicas that join the crawl need to know
// (the job's principal); GetMeta reads it back.
// SetMeta also announces the crawl to the replicas (ActiveCrawls).
func (c *Crawl) SetMeta(ctx context.Context, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = c.f.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, c.key("meta"), b, 0)
		p.SAdd(ctx, c.f.key("crawls", "active"), c.id)
		return nil
	})
	if err != nil {
		return unavailable("crawl state", err)
	}
	return nil
}

// GetMeta reads what SetMeta stored into v.
func (c *Crawl) GetMeta(ctx context.Context, v any) error {
	b, err := c.f.rdb.Get(ctx, c.key("meta")).Bytes()
	if err != nil {
		return unavailable("crawl state", err)
	}
	return json.Unmarshal(b, v)
}

// Join records run as working the crawl, with a heartbeat the Crawl
// renews until Close or Leave.
func (c *Crawl) Join(ctx context.Context, run string) error {
	if err := c.heartbeat(ctx, run); err != nil {
		return err
	}
	c.mu.Lock()
	c.run = run
	c.mu.Unlock()
	c.renewing()
	return nil
}

// Leave records a run's result and removes it from the runs; last says
// that no other run is working the crawl (whose heartbeat has not
// lapsed): the caller then concludes the crawl, with Results.
func (c *Crawl) Leave(ctx context.Context, run string, result []byte) (last bool, err error) {
	c.mu.Lock()
	c.run = ""
	c.mu.Unlock()
	live, err := leaveScript.Run(ctx, c.f.rdb, []string{c.key("runs"), c.key("results")}, run, result).Int()
	if err != nil {
		return false, unavailable("crawl runs", err)
	}
	return live == 0, nil
}

// Results are the results the runs recorded when they left.
func (c *Crawl) Results(ctx context.Context) ([][]byte, error) {
	vals, err := c.f.rdb.LRange(ctx, c.key("results"), 0, -1).Result()
	if err != nil {
		return nil, unavailable("crawl runs", err)
	}
	out := make([][]byte, len(vals))
	for i, v := range vals {
		out[i] = []byte(v)
	}
	return out, nil
}

// Stop asks every replica to stop the crawl with reason; Stopped reads it
// ("" while the crawl runs).
func (c *Crawl) Stop(ctx context.Context, reason string) error {
	if err := c.f.rdb.Set(ctx, c.key("stop"), reason, 0).Err(); err != nil {
		return unavailable("crawl state", err)
	}
	return nil
}

// Stopped reads the reason Stop gave, or "".
func (c *Crawl) Stopped(ctx context.Context) (string, error) {
	v, err := c.f.rdb.Get(ctx, c.key("stop")).Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	if err != nil {
		return "", unavailable("crawl state", err)
	}
	return v, nil
}

// Delete removes the crawl's state: its frontier, seen set and counters
// (the job's pages are the job store's).
func (c *Crawl) Delete(ctx context.Context) error {
	origins, err := c.f.rdb.SMembers(ctx, c.key("hosts")).Result()
	if err != nil {
		return unavailable("crawl state", err)
	}
	_, err = c.f.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		for _, o := range origins {
			p.Del(ctx, c.hostKey(o), c.nextKey(o))
		}
		p.Del(ctx, c.f.crawlKeys(c.id)...)
		p.SRem(ctx, c.f.key("crawls", "active"), c.id)
		return nil
	})
	if err != nil {
		return unavailable("crawl state", err)
	}
	return nil
}

func (c *Crawl) hostKey(origin string) string { return c.f.key("crawl", c.id, "host", origin) }
func (c *Crawl) nextKey(origin string) string { return c.f.key("crawl", c.id, "next", origin) }

// hostScript takes a request slot of an origin. KEYS: the origin's slots,
// its next-request time, the crawl's origins. ARGV: limit, delay ms,
// token, lease ms, origin. Returns 0 (taken), -1 (every slot busy) or the
// milliseconds until the Crawl-delay has passed.
var hostScript = redis.NewScript(redisNow + `
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[1]) then return -1 end
local nxt = tonumber(redis.call('GET', KEYS[2]) or '0')
if nxt > now then return nxt - now end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[4]), ARGV[3])
local delay = tonumber(ARGV[2])
if delay > 0 then redis.call('SET', KEYS[2], now + delay, 'PX', delay + 1000) end
redis.call('SADD', KEYS[3], ARGV[5])
return 0`)

// hostBusyWait is how long a run waits before asking again for a slot of
// an origin whose slots are all taken.
const hostBusyWait = 20 * time.Millisecond

// AcquireHost implements crawl.Politeness: slots are leased like URLs (a
// replica that dies frees its slots when the lease lapses).
func (c *Crawl) AcquireHost(ctx context.Context, origin string, limit int, delay time.Duration) (string, time.Duration, error) {
	token := newToken()
	n, err := hostScript.Run(ctx, c.f.rdb, []string{c.hostKey(origin), c.nextKey(origin), c.key("hosts")},
		max(limit, 1), delay.Milliseconds(), token, c.lease.Milliseconds(), origin).Int64()
	switch {
	case err != nil:
		return "", 0, unavailable("crawl host slots", err)
	case n == 0:
		if c.renewing() {
			c.mu.Lock()
			c.hosts[token] = origin
			c.mu.Unlock()
		}
		return token, 0, nil
	case n < 0:
		return "", hostBusyWait, nil
	}
	return "", time.Duration(n) * time.Millisecond, nil
}

// ReleaseHost implements crawl.Politeness.
func (c *Crawl) ReleaseHost(ctx context.Context, origin, token string) error {
	c.mu.Lock()
	delete(c.hosts, token)
	c.mu.Unlock()
	if err := c.f.rdb.ZRem(ctx, c.hostKey(origin), token).Err(); err != nil {
		return unavailable("crawl host slots", err)
	}
	return nil
}

// LoadRobots implements crawl.Politeness.
func (c *Crawl) LoadRobots(ctx context.Context, origin string) ([]byte, error) {
	b, err := c.f.rdb.HGet(ctx, c.key("robots"), origin).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, unavailable("crawl robots", err)
	}
	return b, nil
}

// StoreRobots implements crawl.Politeness; the verdict carries its own
// expiry, which the crawl checks.
func (c *Crawl) StoreRobots(ctx context.Context, origin string, data []byte, _ time.Duration) error {
	if err := c.f.rdb.HSet(ctx, c.key("robots"), origin, data).Err(); err != nil {
		return unavailable("crawl robots", err)
	}
	return nil
}

var _ crawl.Shared = (*Crawl)(nil)
var _ crawl.Politeness = (*Crawl)(nil)
var _ crawl.SeenQueue = (*Crawl)(nil)
var _ crawl.BatchPopper = (*Crawl)(nil)
var _ crawl.PageSlots = (*Crawl)(nil)
