package fleet

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/crawl"
	"github.com/airlockhq/airlock/internal/crawl/crawltest"
	"github.com/airlockhq/airlock/internal/fleet/fleettest"
)

func newCrawl(t *testing.T, f *Fleet, id string, lease time.Duration) *Crawl {
	c := f.Crawl(id, lease)
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

func TestCrawlFrontierConformance(t *testing.T) {
	t.Parallel()
	next := fresh(t)
	crawltest.TestFrontier(t, func(t *testing.T) crawl.Frontier { return newCrawl(t, next(), "job", 0) })
}

func TestCrawlSeenConformance(t *testing.T) {
	t.Parallel()
	next := fresh(t)
	crawltest.TestSeen(t, func(t *testing.T) crawl.Seen { return newCrawl(t, next(), "job", 0) })
	// AddAndPush agrees, a key repeated in one call included, and queues
	// the items of the new keys only.
	c := newCrawl(t, next(), "batch", 0)
	if _, err := c.Add(t.Context(), "http://a.test/1"); err != nil {
		t.Fatal(err)
	}
	keys := []string{"http://a.test/1", "http://a.test/2", "http://a.test/2", "http://a.test/3"}
	its := []crawl.Item{{URL: keys[0]}, {URL: keys[1]}, {URL: keys[2]}, {}}
	got, err := c.AddAndPush(t.Context(), keys, its)
	if err != nil || fmt.Sprint(got) != "[false true false true]" {
		t.Fatalf("AddAndPush = %v, %v", got, err)
	}
	if n, err := c.Len(t.Context()); err != nil || n != 1 {
		t.Fatalf("Len() = %d, %v; want the one new item", n, err)
	}
}

func items(n int) []crawl.Item {
	out := make([]crawl.Item, n)
	for i := range out {
		out[i] = crawl.Item{URL: fmt.Sprintf("http://a.test/%d", i), Depth: i % 3}
	}
	return out
}

func pop(t *testing.T, c *Crawl) crawl.Item {
	t.Helper()
	it, ok, err := c.Pop(t.Context())
	if err != nil || !ok {
		t.Fatalf("Pop() = %v, %v, %v", it, ok, err)
	}
	return it
}

// testLease is the lease of the tests that wait for leases to lapse, or
// to be renewed: long enough that a loaded machine's stalls (which delay
// renewals and the tests' own steps) do not pass for a lapse.
const testLease = 2 * time.Second

// popLapsed pops n items from c as the leases that hold them lapse: not
// before the lease after popped, when another Crawl popped them (a 10 ms
// margin for the two clocks' steps), and within a hang guard.
// With batch, it pops with PopN, else with Pop.
func popLapsed(t *testing.T, c *Crawl, n int, popped time.Time, batch bool) []crawl.Item {
	t.Helper()
	var got []crawl.Item
	for len(got) < n {
		var its []crawl.Item
		var err error
		if batch {
			its, err = c.PopN(t.Context(), n-len(got))
		} else if it, ok, perr := c.Pop(t.Context()); ok {
			its = []crawl.Item{it}
		} else {
			err = perr
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(its) > 0 {
			if early := time.Since(popped); early < testLease-10*time.Millisecond {
				t.Fatalf("Pop() = %v %v after another Crawl leased them for %v", its, early, testLease)
			}
		}
		got = append(got, its...)
		if len(got) < n && time.Since(popped) > 10*testLease {
			t.Fatalf("%d of %d items back %v after their leases began (%v each)", len(got), n, time.Since(popped), testLease)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return got
}

func sorted(its []crawl.Item) []crawl.Item {
	out := append([]crawl.Item(nil), its...)
	sort.Slice(out, func(i, j int) bool { return out[i].URL < out[j].URL })
	return out
}

// A replica that dies keeps its URLs only until their leases lapse; a
// replica that closes gives them back at once. Idle waits for both.
func TestCrawlLeases(t *testing.T) {
	t.Parallel()
	f := open(t)
	ctx := t.Context()
	a := f.Crawl("job", testLease)
	b := newCrawl(t, f, "job", testLease)
	c := f.Crawl("job", testLease)
	if idle, err := b.Idle(ctx); err != nil || idle {
		t.Fatalf("Idle() before Seeded = %v, %v", idle, err)
	}
	in := items(4)
	if _, err := a.Push(ctx, in); err != nil {
		t.Fatal(err)
	}
	if err := a.Seeded(ctx); err != nil {
		t.Fatal(err)
	}
	popped := time.Now()
	dead := []crawl.Item{pop(t, a), pop(t, a)}
	a.Abandon()
	closed := pop(t, c)
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// The closed replica's item is back at the head; the dead one's are
	// still leased.
	if got := pop(t, b); got != closed {
		t.Fatalf("after Close, Pop() = %v, want %v", got, closed)
	}
	if got := pop(t, b); got != in[3] {
		t.Fatalf("Pop() = %v, want %v", got, in[3])
	}
	if _, ok, _ := b.Pop(ctx); ok {
		t.Fatal("Pop() returned an item still leased by a live replica")
	}
	if idle, _ := b.Idle(ctx); idle {
		t.Fatal("Idle() with leases held")
	}
	got := popLapsed(t, b, 2, popped, false)
	if got[0].URL > got[1].URL { // leases renewed together lapse together, in any order
		got[0], got[1] = got[1], got[0]
	}
	if fmt.Sprint(got) != fmt.Sprint(dead) {
		t.Fatalf("after the leases lapsed, Pop() = %v, want %v", got, dead)
	}
	for _, it := range append(got, closed, in[3]) {
		if err := b.Done(ctx, it); err != nil {
			t.Fatal(err)
		}
	}
	if idle, err := b.Idle(ctx); err != nil || !idle {
		t.Fatalf("Idle() = %v, %v; want true", idle, err)
	}
}

// A live replica's leases are renewed past their duration.
func TestCrawlLeaseRenewed(t *testing.T) {
	t.Parallel()
	f := open(t)
	a := newCrawl(t, f, "job", testLease)
	b := newCrawl(t, f, "job", testLease)
	if _, err := a.Push(t.Context(), items(1)); err != nil {
		t.Fatal(err)
	}
	pop(t, a)
	time.Sleep(testLease * 3 / 2)
	if it, ok, err := b.Pop(t.Context()); err != nil || ok {
		t.Fatalf("Pop() of a renewed lease = %v, %v, %v", it, ok, err)
	}
}

// Page slots bound the pages fetched successfully across replicas.
func TestCrawlPageSlots(t *testing.T) {
	t.Parallel()
	f := open(t)
	ctx := t.Context()
	a := newCrawl(t, f, "job", 0)
	b := newCrawl(t, f, "job", 0)
	if _, err := a.Push(ctx, items(4)); err != nil {
		t.Fatal(err)
	}
	i0, i1, i2 := pop(t, a), pop(t, b), pop(t, b)
	reserve := func(c *Crawl, it crawl.Item) string {
		ok, reached, err := c.Reserve(ctx, it, 2)
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(ok, reached)
	}
	if got := reserve(a, i0) + reserve(b, i1) + reserve(b, i2); got != "true falsetrue falsefalse false" {
		t.Fatalf("reservations = %s", got)
	}
	if reached, err := a.Settle(ctx, i0, false, 2); err != nil || reached {
		t.Fatalf("Settle(failed) = %v, %v", reached, err)
	}
	if got := reserve(b, i2); got != "true false" {
		t.Fatalf("a freed slot: %s", got)
	}
	for _, it := range []crawl.Item{i1, i2} {
		if _, err := b.Settle(ctx, it, true, 2); err != nil {
			t.Fatal(err)
		}
	}
	i3 := pop(t, a)
	if got := reserve(a, i3); got != "false true" {
		t.Fatalf("past the limit: %s", got)
	}
	st, err := a.Stats(ctx)
	// Settling ends the leases of the three settled URLs.
	if err != nil || st.Done != 3 || st.OK != 2 || st.Failed != 1 || st.Leased != 1 {
		t.Fatalf("Stats() = %+v, %v", st, err)
	}
}

func linksPage(_ context.Context, resp *airlock.HTTPResponse, _ string) (crawl.Extracted, error) {
	var links []string
	for _, part := range strings.Split(string(resp.Body), `href="`)[1:] {
		links = append(links, part[:strings.IndexByte(part, '"')])
	}
	return crawl.Extracted{Page: &airlock.Page{URL: resp.URL}, Links: links}, nil
}

// runShared runs req as runs crawl.Runs (replicas) sharing one Crawl of
// f, the first seeding it, and returns how often each URL was emitted and
// how many pages each run emitted.
func runShared(t *testing.T, f *Fleet, runs int, req airlock.CrawlRequest, client *http.Client) (map[string]int, []int) {
	return runSharedVia(t, f, runs, req, client, func(c *Crawl) crawl.Shared { return c })
}

// runSharedVia is runShared with each run's Crawl seen through wrap.
func runSharedVia(t *testing.T, f *Fleet, runs int, req airlock.CrawlRequest, client *http.Client, wrap func(*Crawl) crawl.Shared) (map[string]int, []int) {
	var mu sync.Mutex
	emitted := map[string]int{}
	perRun := make([]int, runs)
	var wg sync.WaitGroup
	for i := range runs {
		c := wrap(newCrawl(t, f, "job", 0))
		wg.Go(func() {
			cfg := crawl.Config{Doer: crawltest.ClientDoer{Client: client}, Page: linksPage, Shared: c, Join: i > 0}
			if _, err := crawl.Run(t.Context(), cfg, req, func(p *airlock.Page) error {
				mu.Lock()
				emitted[p.URL]++
				perRun[i]++
				mu.Unlock()
				return nil
			}, nil); err != nil {
				t.Errorf("run %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	return emitted, perRun
}

func sum(ns []int) int {
	total := 0
	for _, n := range ns {
		total += n
	}
	return total
}

// Three runs (three replicas) work one crawl of 2,000 pages: every page
// is fetched and emitted exactly once, and each run does a share.
func TestSharedCrawlExactlyOnce(t *testing.T) {
	t.Parallel()
	const pages = 2000
	site := crawltest.NewTreeSite(t, pages, "", 0)
	client := site.Client()
	client.Transport.(*http.Transport).MaxIdleConnsPerHost = 32
	req := airlock.CrawlRequest{Seed: site.URL + "/p0", MaxPages: 5000, Depth: crawl.Unlimited, Concurrency: 4, PerHostConcurrency: 4, IgnoreRobots: true}
	emitted, perRun := runShared(t, open(t), 3, req, client)
	if len(emitted) != pages || sum(perRun) != pages {
		t.Fatalf("%d pages emitted, %d distinct; want %d once each", sum(perRun), len(emitted), pages)
	}
	if fetched, _, extra := site.PageHits(); fetched != pages || extra != 0 {
		t.Fatalf("%d pages fetched, %d fetched again; want %d once each", fetched, extra, pages)
	}
	t.Logf("pages per run: %v", perRun)
	for i, n := range perRun {
		if n == 0 {
			t.Errorf("run %d fetched nothing", i)
		}
	}
}

// The page limit holds across the runs.
func TestSharedCrawlPageLimit(t *testing.T) {
	t.Parallel()
	site := crawltest.NewTreeSite(t, 500, "", 0)
	req := airlock.CrawlRequest{Seed: site.URL + "/p0", MaxPages: 37, Depth: crawl.Unlimited, Concurrency: 4, PerHostConcurrency: 4, IgnoreRobots: true}
	if _, perRun := runShared(t, open(t), 3, req, site.Client()); sum(perRun) != 37 {
		t.Fatalf("%d pages emitted by three runs, want the limit of 37", sum(perRun))
	}
}

// Per-origin politeness holds for three runs together: at most the
// per-host concurrency in flight, one robots.txt fetch, and the
// Crawl-delay between any two host slots granted (on Redis's clock: a
// request goes out only with a slot).
func TestSharedCrawlPoliteness(t *testing.T) {
	t.Parallel()
	t.Run("concurrency and robots", func(t *testing.T) {
		site := crawltest.NewTreeSite(t, 200, "User-agent: *\nDisallow: /private\n", 3*time.Millisecond)
		req := airlock.CrawlRequest{Seed: site.URL + "/p0", MaxPages: 1000, Depth: crawl.Unlimited, Concurrency: 4, PerHostConcurrency: 2}
		if _, perRun := runShared(t, open(t), 3, req, site.Client()); sum(perRun) != 200 {
			t.Fatalf("%d pages, want 200", sum(perRun))
		}
		if n, robots := site.MaxInflight(), site.Hits("/robots.txt"); n > 2 || robots != 1 {
			t.Fatalf("%d requests at once, robots.txt fetched %d times; want at most 2 and once", n, robots)
		}
		t.Logf("three runs × 4 workers, per-host 2: at most %d requests at once", site.MaxInflight())
	})
	t.Run("crawl-delay", func(t *testing.T) {
		// The delay is kept on Redis's clock, between the moments two
		// runs take a request slot of the origin. Each slot taken is
		// bracketed by the local clock (the same machine's) before the
		// call and after its answer: of two slots taken at least the
		// delay apart, the later answer comes at least that long after
		// the earlier call, however late a loaded machine sends or
		// delivers the requests themselves (which arrival times at the
		// site would not show).
		const delay = 100 * time.Millisecond
		site := crawltest.NewTreeSite(t, 12, "User-agent: *\nCrawl-delay: 0.1\n", 0)
		req := airlock.CrawlRequest{Seed: site.URL + "/p0", MaxPages: 100, Depth: crawl.Unlimited, Concurrency: 4}
		slots := &slotClock{}
		if _, perRun := runSharedVia(t, open(t), 3, req, site.Client(), slots.wrap); sum(perRun) != 12 {
			t.Fatalf("%d pages, want 12", sum(perRun))
		}
		taken := slots.taken()
		if requests := site.Requests(); len(taken) < requests {
			t.Fatalf("%d host slots taken under the Crawl-delay for %d page requests; want one for each", len(taken), requests)
		}
		// Redis's clock has millisecond steps: a slot may be taken up to
		// 1 ms less than the delay after the previous one.
		const least = delay - time.Millisecond
		for i, a := range taken {
			for _, b := range taken[i+1:] {
				if b.answer.Sub(a.call) < least && a.answer.Sub(b.call) < least {
					t.Fatalf("two request slots of the origin taken within %v (calls at +%v and +%v, answers at +%v and +%v); want the Crawl-delay of %v between them",
						max(b.answer.Sub(a.call), a.answer.Sub(b.call)), a.call.Sub(taken[0].call), b.call.Sub(taken[0].call),
						a.answer.Sub(taken[0].call), b.answer.Sub(taken[0].call), delay)
				}
			}
		}
	})
}

// slotClock records when each host slot of a shared crawl was asked for
// and when the answer that granted it came back.
type slotClock struct {
	mu    sync.Mutex
	spans []slotSpan
}

type slotSpan struct{ call, answer time.Time }

func (s *slotClock) wrap(c *Crawl) crawl.Shared { return clockedCrawl{c, s} }

func (s *slotClock) add(call time.Time) {
	answer := time.Now()
	s.mu.Lock()
	s.spans = append(s.spans, slotSpan{call, answer})
	s.mu.Unlock()
}

func (s *slotClock) taken() []slotSpan {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]slotSpan(nil), s.spans...)
}

// clockedCrawl is a Crawl whose host slots taken under a Crawl-delay
// (AcquireHost's, and BeginPage's) are timed by a slotClock; it is every
// interface the Crawl is. The robots.txt request, made before the delay
// is known, takes its slot without one.
type clockedCrawl struct {
	*Crawl
	clock *slotClock
}

func (c clockedCrawl) AcquireHost(ctx context.Context, origin string, limit int, delay time.Duration) (string, time.Duration, error) {
	call := time.Now()
	token, wait, err := c.Crawl.AcquireHost(ctx, origin, limit, delay)
	if err == nil && token != "" && delay > 0 {
		c.clock.add(call)
	}
	return token, wait, err
}

func (c clockedCrawl) BeginPage(ctx context.Context, it crawl.Item, max int, origin string, limit int, delay time.Duration) (string, bool, bool, time.Duration, error) {
	call := time.Now()
	token, ok, reached, wait, err := c.Crawl.BeginPage(ctx, it, max, origin, limit, delay)
	if err == nil && ok && delay > 0 {
		c.clock.add(call)
	}
	return token, ok, reached, wait, err
}

// usedMemory is the server's used_memory (INFO memory).
func usedMemory(b *testing.B, f *Fleet) int64 {
	info, err := f.rdb.Info(context.Background(), "memory").Result()
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	b.Fatal("no used_memory in INFO")
	return 0
}

// BenchmarkCrawlStateMemory measures what a shared crawl keeps in Redis
// per URL: 10,000 URLs of 60 to 70 bytes met (the seen set) and waiting
// (the frontier), then crawled (popped, settled, done: the seen set and
// counters remain until the job ends). The job's pages are apart: each
// costs its JSON.
//
//	go test -run XXX -bench CrawlStateMemory -benchtime 3x ./internal/fleet/
func BenchmarkCrawlStateMemory(b *testing.B) {
	const urls = 10_000
	srv := fleettest.Start(b)
	f, err := Open(context.Background(), srv.URL(0), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	ctx := context.Background()
	items := make([]crawl.Item, urls)
	keys := make([]string, urls)
	for i := range items {
		items[i] = crawl.Item{URL: fmt.Sprintf("https://docs.example.test/guide/section-%d/page-%d.html", i%97, i), Depth: 3}
		keys[i] = items[i].URL
	}
	var waiting, crawled float64
	n := 0
	for b.Loop() {
		n++
		c := f.Crawl("mem"+strconv.Itoa(n), 0)
		before := usedMemory(b, f)
		for i := 0; i < urls; i += 500 {
			if _, err := c.AddAndPush(ctx, keys[i:i+500], items[i:i+500]); err != nil {
				b.Fatal(err)
			}
		}
		queued := usedMemory(b, f)
		for range urls {
			it, ok, err := c.Pop(ctx)
			if err != nil || !ok {
				b.Fatal(ok, err)
			}
			if _, _, err := c.Reserve(ctx, it, urls); err != nil {
				b.Fatal(err)
			}
			if _, err := c.Settle(ctx, it, true, urls); err != nil {
				b.Fatal(err)
			}
			if err := c.Done(ctx, it); err != nil {
				b.Fatal(err)
			}
		}
		done := usedMemory(b, f)
		waiting += float64(queued-before) / urls
		crawled += float64(done-before) / urls
		if err := c.Close(ctx); err != nil {
			b.Fatal(err)
		}
		if err := c.Delete(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(waiting/float64(n), "B/URL-waiting")
	b.ReportMetric(crawled/float64(n), "B/URL-crawled")
}

// A host slot held by a live replica outlasts its lease: a slow request
// keeps the origin's concurrency bound.
func TestCrawlHostSlotRenewed(t *testing.T) {
	t.Parallel()
	f := open(t)
	ctx := t.Context()
	a := newCrawl(t, f, "job", testLease)
	b := newCrawl(t, f, "job", testLease)
	token, _, err := a.AcquireHost(ctx, "http://slow.test", 1, 0)
	if err != nil || token == "" {
		t.Fatalf("AcquireHost = %q, %v", token, err)
	}
	time.Sleep(testLease * 3 / 2)
	if tok, wait, err := b.AcquireHost(ctx, "http://slow.test", 1, 0); err != nil || tok != "" || wait <= 0 {
		t.Fatalf("a second slot of a one-slot origin = %q, %v, %v", tok, wait, err)
	}
	if err := a.ReleaseHost(ctx, "http://slow.test", token); err != nil {
		t.Fatal(err)
	}
	if tok, _, err := b.AcquireHost(ctx, "http://slow.test", 1, 0); err != nil || tok == "" {
		t.Fatalf("after release = %q, %v", tok, err)
	}
}

// PopN takes several items in order, each leased as Pop leases one: a dead
// replica's batch comes back when its leases lapse.
func TestCrawlPopN(t *testing.T) {
	t.Parallel()
	f := open(t)
	ctx := t.Context()
	a := f.Crawl("job", testLease)
	b := newCrawl(t, f, "job", testLease)
	in := items(5)
	if _, err := a.Push(ctx, in); err != nil {
		t.Fatal(err)
	}
	popped := time.Now()
	first, err := a.PopN(ctx, 3)
	if err != nil || fmt.Sprint(first) != fmt.Sprint(in[:3]) {
		t.Fatalf("PopN(3) = %v, %v; want %v", first, err, in[:3])
	}
	rest, err := b.PopN(ctx, 10)
	if err != nil || fmt.Sprint(rest) != fmt.Sprint(in[3:]) {
		t.Fatalf("PopN(10) = %v, %v; want %v", rest, err, in[3:])
	}
	if none, err := b.PopN(ctx, 10); err != nil || len(none) != 0 {
		t.Fatalf("PopN on an empty frontier = %v, %v", none, err)
	}
	a.Abandon()
	back := popLapsed(t, b, 3, popped, true)
	if fmt.Sprint(sorted(back)) != fmt.Sprint(sorted(first)) {
		t.Fatalf("after a's leases lapsed, PopN = %v; want its items %v", back, first)
	}
	for _, it := range append(back, rest...) {
		if err := b.Done(ctx, it); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Seeded(ctx); err != nil {
		t.Fatal(err)
	}
	if idle, err := b.Idle(ctx); err != nil || !idle {
		t.Fatalf("Idle() = %v, %v; want true", idle, err)
	}
}

// roundTrips counts the client's round trips to Redis by command (a
// pipeline is one round trip, named by its commands; a script by its
// first line's command, EVALSHA).
type roundTrips struct {
	mu sync.Mutex
	n  map[string]int
}

func (rt *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }
func (rt *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		rt.add(cmd.Name())
		return next(ctx, cmd)
	}
}
func (rt *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		names := make([]string, len(cmds))
		for i, c := range cmds {
			names[i] = c.Name()
		}
		rt.add(strings.Join(names, "+"))
		return next(ctx, cmds)
	}
}

func (rt *roundTrips) add(name string) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	rt.n[name]++
}

func (rt *roundTrips) total() int {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	n := 0
	for _, v := range rt.n {
		n += v
	}
	return n
}

// A shared crawl costs at most two round trips to Redis per page, with
// robots.txt and per-host politeness on, for one run and for three: the
// page slot and the host slot are taken in one, the page is settled, its
// links queued and the next item leased in the other. Each run has a
// fixed cost besides (connecting, loading the scripts, joining and
// leaving, robots.txt, the first pops and the last idle checks):
// perRunAllowance. (Before BeginPage and EndPage: 4.7 a page.)
func TestSharedCrawlRoundTrips(t *testing.T) {
	t.Parallel()
	const pages, perRunAllowance = 400, 40
	for _, runs := range []int{1, 3} {
		t.Run(fmt.Sprintf("runs=%d", runs), func(t *testing.T) {
			site := crawltest.NewTreeSite(t, pages, "User-agent: *\nDisallow: /private\n", 0)
			f := open(t)
			rt := &roundTrips{n: map[string]int{}}
			f.rdb.AddHook(rt)
			// Every run's workers together stay within the per-host limit:
			// a run that finds the origin's slots taken asks again, which
			// is a round trip more (timing, not the crawl's cost).
			req := airlock.CrawlRequest{Seed: site.URL + "/p0", MaxPages: 1000, Depth: crawl.Unlimited, Concurrency: 2, PerHostConcurrency: 2 * runs}
			if _, perRun := runShared(t, f, runs, req, site.Client()); sum(perRun) != pages {
				t.Fatalf("%d pages, want %d", sum(perRun), pages)
			}
			got := rt.total()
			t.Logf("%d round trips for %d pages (%.2f a page): %v", got, pages, float64(got)/pages, rt.n)
			if want := 2*pages + perRunAllowance*runs; got > want {
				t.Errorf("%d round trips for %d pages by %d runs, want at most 2 a page and %d a run (%d)", got, pages, runs, perRunAllowance, want)
			}
		})
	}
}
