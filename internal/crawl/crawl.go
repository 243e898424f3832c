package crawl

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"regexp"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/airlockhq/airlock"
)

// Defaults of a crawl (ARCHITECTURE.md "Defaults").
const (
	DefaultConcurrency        = 8
	DefaultPerHostConcurrency = 2
	DefaultMaxPages           = 25
	DefaultDepth              = 2
	DefaultTimeout            = 25 * time.Second
	DefaultTLSProfile         = "go"
	// Unlimited as CrawlRequest.Depth lifts the depth limit.
	Unlimited = -1
	// MaxSkipped entries are kept in CrawlSummary.Skipped.
	MaxSkipped = 10000
	// ProgressInterval is the least time between two progress events.
	ProgressInterval = 250 * time.Millisecond
	// RequestsPerPage bounds the page requests of a run, failures and
	// rate-limit retries included: RequestsPerPage × the page limit.
	// robots.txt and sitemap requests are not counted (one robots.txt per
	// origin; at most MaxSitemaps sitemaps).
	RequestsPerPage = 4
)

const (
	maxRateLimitRetries = 3
	maxRetryWait        = 5 * time.Second
	acceptPage          = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
	acceptRobots        = "text/plain,*/*;q=0.1"
	acceptSitemap       = "application/xml,text/xml,text/plain,*/*;q=0.1"
)

// maxSkipped is MaxSkipped; tests lower it.
var maxSkipped = MaxSkipped

// UserAgent returns the User-Agent a crawl identifies itself with:
// "airlock/VERSION (+https://github.com/airlockhq/airlock)".
func UserAgent(version string) string {
	return "airlock/" + version + " (+https://github.com/airlockhq/airlock)"
}

// Extracted is what a PageFunc makes of one response.
type Extracted struct {
	// Page is emitted unless NoIndex is set; nil emits nothing. Run fills
	// URL, RequestedURL, Status, ContentType, FetchedAt, ElapsedMS and
	// DecisionID where they are left zero.
	Page *airlock.Page
	// Links are the page's links to follow, absolute or relative to the
	// response URL; every link, not only the ones kept in Page.Links.
	Links []string
	// NoIndex and NoFollow are the page's robots directives
	// (<meta name="robots">); the X-Robots-Tag header is read by Run too.
	NoIndex, NoFollow bool
}

// PageFunc turns a 2xx response into a page: the caller's extractor. mode
// is airlock.ExtractFull or airlock.ExtractNone. It is called from several
// goroutines at once. An error skips the page; an error whose reason (see
// airlock.ReasonOf) is "bot_wall" or "type" is reported with that reason.
type PageFunc func(ctx context.Context, resp *airlock.HTTPResponse, mode string) (Extracted, error)

// Config is what a crawl needs besides its request. Doer and Page are
// required; every other zero field has a documented default.
type Config struct {
	// Doer fetches every URL, robots.txt and sitemaps included; it is the
	// only way a crawl reaches the network. Its errors are classified by
	// airlock.CodeOf: revoked stops the crawl, the others skip the URL.
	Doer airlock.Doer
	// Page extracts each fetched page.
	Page PageFunc
	// UserAgent is sent with every request; "": UserAgent("dev").
	UserAgent string
	// TLSProfile is used when the request names none; "": "go".
	TLSProfile string
	// Frontier and Seen hold the crawl's state; nil: in memory, for this
	// run only.
	Frontier Frontier
	Seen     Seen
	// Shared, when set, holds the state of a crawl that several runs work
	// at once, in place of Frontier and Seen (see also WithShared). Join
	// says that another run queues the seed or the list: this one works
	// the frontier only.
	Shared Shared
	Join   bool
	// Robots caches robots.txt verdicts across runs; nil: a cache for
	// this run only.
	Robots *RobotsCache
	// Logger receives debug records (robots.txt verdicts, sitemap
	// failures); nil: none.
	Logger *slog.Logger
}

// options is a CrawlRequest with its defaults applied.
type options struct {
	seed        string // "" for a list
	depth       int    // Unlimited or ≥ 0
	maxPages    int
	concurrency int
	perHost     int
	timeout     time.Duration
	delay       time.Duration // the least between two requests to an origin
	extract     string
	ua, tls     string
	subdomains  bool
	ignore      bool // robots.txt
	sitemap     bool
	external    bool             // follow links to any host
	include     []*regexp.Regexp // include_paths; none: every path
	exclude     []*regexp.Regexp // exclude_paths
	raw         bool             // keep each page's body (Page.RawHTML)
}

// Bounds of CrawlRequest.IncludePaths and ExcludePaths.
const (
	MaxPathPatterns  = 100  // patterns in each list
	MaxPathPatternLn = 1000 // bytes in one pattern
)

// pathAllowed reports whether include_paths and exclude_paths let a
// discovered URL with this path be followed.
func (o *options) pathAllowed(path string) bool {
	if path == "" {
		path = "/"
	}
	for _, re := range o.exclude {
		if re.MatchString(path) {
			return false
		}
	}
	if len(o.include) == 0 {
		return true
	}
	for _, re := range o.include {
		if re.MatchString(path) {
			return true
		}
	}
	return false
}

// compilePaths compiles a list of path patterns (RE2: linear time in the
// path, whatever the pattern).
func compilePaths(field string, pats []string) ([]*regexp.Regexp, error) {
	if len(pats) > MaxPathPatterns {
		return nil, invalid("%s: %d patterns, at most %d", field, len(pats), MaxPathPatterns)
	}
	var out []*regexp.Regexp
	for _, p := range pats {
		if len(p) > MaxPathPatternLn {
			return nil, invalid("%s: a pattern of %d bytes, at most %d", field, len(p), MaxPathPatternLn)
		}
		re, err := regexp.Compile(p)
		if err != nil {
			return nil, invalid("%s %q: %v", field, p, err)
		}
		out = append(out, re)
	}
	return out, nil
}

func invalid(format string, args ...any) error {
	return airlock.Errorf(airlock.CodeInvalid, airlock.ReasonCrawlRequest, "crawl: "+format, args...)
}

// ValidateRequest refuses (code invalid, reason crawl_request) a request
// that Run would refuse at its start: no seed and no URLs, or both,
// negative numbers, a seed that does not normalise, an unknown extract
// mode. Callers that queue crawls check with it before queueing.
func ValidateRequest(req airlock.CrawlRequest) error {
	switch {
	case req.Seed == "" && len(req.URLs) == 0:
		return invalid("a seed or a list of URLs is required")
	case req.Seed != "" && len(req.URLs) > 0:
		return invalid("a seed and a list of URLs are exclusive")
	case req.Depth < Unlimited, req.MaxPages < 0, req.Concurrency < 0, req.PerHostConcurrency < 0, req.Timeout < 0, req.Delay < 0:
		return invalid("negative depth, page limit, concurrency, timeout or delay")
	}
	if req.Seed != "" {
		if _, err := Normalize(req.Seed); err != nil {
			return invalid("seed %q: %w", req.Seed, err)
		}
	}
	switch req.Extract {
	case "", airlock.ExtractFull, airlock.ExtractNone:
	default:
		return invalid("extract %q: want %q or %q", req.Extract, airlock.ExtractFull, airlock.ExtractNone)
	}
	if err := checkFormats(req.Formats); err != nil {
		return err
	}
	if _, err := compilePaths("include_paths", req.IncludePaths); err != nil {
		return err
	}
	if _, err := compilePaths("exclude_paths", req.ExcludePaths); err != nil {
		return err
	}
	return nil
}

func newOptions(cfg Config, req airlock.CrawlRequest) (options, error) {
	o := options{
		depth: req.Depth, maxPages: req.MaxPages, concurrency: req.Concurrency,
		perHost: req.PerHostConcurrency, timeout: req.Timeout, delay: req.Delay, extract: req.Extract,
		ua: cfg.UserAgent, tls: req.TLSProfile, subdomains: req.Subdomains,
		ignore: req.IgnoreRobots, sitemap: req.Sitemap, external: req.External,
	}
	if cfg.Doer == nil || cfg.Page == nil {
		return o, invalid("a Doer and a page function are required")
	}
	if err := ValidateRequest(req); err != nil {
		return o, err
	}
	if req.Seed != "" {
		o.seed, _ = Normalize(req.Seed) // ValidateRequest checked it
	}
	o.include, _ = compilePaths("include_paths", req.IncludePaths) // ValidateRequest checked them
	o.exclude, _ = compilePaths("exclude_paths", req.ExcludePaths)
	if o.extract == "" {
		o.extract = airlock.ExtractFull
	}
	if o.depth == 0 {
		o.depth = DefaultDepth
	}
	if req.NoLinks {
		o.depth = 0 // the seed and sitemap URLs are at depth 0, links deeper
	}
	o.raw = keepsRaw(req.Formats)
	if o.maxPages == 0 {
		o.maxPages = DefaultMaxPages
		if o.seed == "" {
			o.maxPages = len(req.URLs)
		}
	}
	if o.concurrency == 0 {
		o.concurrency = DefaultConcurrency
	}
	if o.perHost == 0 {
		o.perHost = DefaultPerHostConcurrency
	}
	if o.timeout == 0 {
		o.timeout = DefaultTimeout
	}
	if o.ua == "" {
		o.ua = UserAgent("dev")
	}
	if o.tls == "" {
		o.tls = cmp.Or(cfg.TLSProfile, DefaultTLSProfile)
	}
	return o, nil
}

// Run crawls what req asks for, through cfg.Doer, and sends each page to
// emit as it arrives. With req.Seed it walks the seed's host breadth first
// (req.Subdomains: and the hosts under it, "www." dropped), to req.Depth
// links from the seed (Unlimited: no limit); with req.URLs it fetches those
// URLs and follows no links. Either way it stops after req.MaxPages pages
// fetched successfully (0: 25 for a seed, every URL of a list); failed
// fetches do not count, and cannot grow the frontier.
//
// Politeness: robots.txt is obeyed (RFC 9309, product token "airlock")
// unless req.IgnoreRobots, which the caller audits and permits; at most
// req.PerHostConcurrency requests run at once per origin (scheme, host and
// port), and one at a time, spaced by the longer of its Crawl-delay and
// req.Delay, where either is set. Pages marked noindex are not emitted and
// count toward the page limit; the links of pages marked nofollow are not
// followed. A run makes at most RequestsPerPage × req.MaxPages page
// requests, failures included: past that it stops (Stopped
// StoppedRequests, no error) and skips what is left with reason limit.
//
// Dead, refused and out-of-scope URLs never end the crawl: they are listed
// in the summary's Skipped (at most MaxSkipped entries) with a Reason*
// reason. The summary's Queued is the number of URLs queued over the whole
// crawl, Fetched the responses received, Failed the fetches that gave no
// page (errors, statuses outside 2xx, page function errors).
//
// emit and progress are called from one goroutine at a time; progress
// (nil: none) at most every ProgressInterval and once at the end. A crawl
// stops early, with the summary's Stopped set (Stopped* values) and a
// non-nil error, when ctx ends, when the Doer answers revoked (the
// principal lost its grant: the error is that answer), when emit fails or
// when the Frontier or Seen fails. Run returns a nil summary only for an
// invalid request or Config (an *airlock.Error with code invalid).
func Run(ctx context.Context, cfg Config, req airlock.CrawlRequest, emit func(*airlock.Page) error, progress func(airlock.CrawlProgress)) (*airlock.CrawlSummary, error) {
	opt, err := newOptions(cfg, req)
	if err != nil {
		return nil, err
	}
	if emit == nil {
		emit = func(*airlock.Page) error { return nil }
	}
	r := &run{
		cfg: cfg, req: req, opt: opt, emit: emit, progress: progress,
		log: cfg.Logger, frontier: cfg.Frontier, seen: cfg.Seen, robots: cfg.Robots,
		hosts:       make(map[string]*host),
		results:     make(chan result, opt.concurrency),
		work:        make(chan func()),
		workersDone: make(chan struct{}),
		maxParked:   max(64, 4*opt.concurrency),
		start:       time.Now(),
	}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	if cfg.Shared == nil {
		if st, ok := ctx.Value(sharedKey{}).(sharedState); ok {
			cfg.Shared, cfg.Join = st.s, st.join
			r.cfg = cfg
		}
	}
	if cfg.Shared != nil {
		r.shared, r.frontier, r.seen = cfg.Shared, cfg.Shared, cfg.Shared
		r.polite, _ = cfg.Shared.(Politeness)
		if _, sq := cfg.Shared.(SeenQueue); sq && r.polite != nil {
			r.slots, _ = cfg.Shared.(PageSlots)
		}
	}
	if r.frontier == nil {
		r.frontier = NewMemoryFrontier(0)
	}
	if r.seen == nil {
		r.seen = NewMemorySeen()
	}
	if r.robots == nil {
		r.robots = NewRobotsCache(0)
	}
	r.parent = ctx
	r.ctx, r.cancel = context.WithCancel(ctx)
	defer r.cancel()
	r.lastProgress = r.start
	return r.run()
}

// run is one crawl. The first block of fields is set once; the scheduler
// goroutine (the one in Run) owns the second; workers share the third.
type run struct {
	cfg      Config
	req      airlock.CrawlRequest
	opt      options
	emit     func(*airlock.Page) error
	progress func(airlock.CrawlProgress)
	log      *slog.Logger
	frontier Frontier
	seen     Seen
	shared   Shared     // nil: this run is the whole crawl
	polite   Politeness // the shared state's, if it has it
	slots    PageSlots  // the shared state's, if it has it (and polite, and SeenQueue)
	robots   *RobotsCache
	scope    *scope // nil for a list
	seedURL  *url.URL
	parent   context.Context
	ctx      context.Context // canceled when the crawl stops
	cancel   context.CancelFunc
	results  chan result
	start    time.Time

	// Fetches run on workers that outlive one page: a page's parse grows
	// its goroutine's stack, which a new goroutine per page paid for again
	// each time. An idle worker takes the next job from work; workersDone
	// tells them the run is over.
	work        chan func()
	workersDone chan struct{}
	workers     sync.WaitGroup

	hosts          map[string]*host // by origin
	waiting        []*host          // hosts with parked items
	parked         int
	maxParked      int
	inflight       int // requests of any kind
	inflightPages  int
	okPages        int // pages fetched successfully, emitted or not
	pages          int // pages emitted
	done           int // page fetches finished
	failed         int
	fetched        int
	bytes          int64
	sitemapFiles   int
	sitemapsSeeded bool
	stopped        string
	stopErr        error
	lastProgress   time.Time
	slotWait       time.Duration // dispatch found no slot: retry after this (0: sharedPoll)

	limit       atomic.Bool  // the page limit is reached: queue nothing more
	pageReqs    atomic.Int64 // page requests sent, retries included
	queued      atomic.Int64
	sitemapURLs atomic.Int64
	mu          sync.Mutex
	skipped     []airlock.Skipped
	overflow    int
}

// host is the scheduler's view of one origin.
type host struct {
	origin   string
	rules    *robots // nil: not known yet
	fetching bool    // its robots.txt is being fetched
	active   int
	next     time.Time // no request starts before
	queue    []Item
	qhead    int
	waiting  bool // in run.waiting
}

// limit is the number of requests the host may have in flight.
func (h *host) limit(o options) int {
	if h.rules == nil || h.delay(o) > 0 {
		return 1
	}
	return o.perHost
}

// delay is the least time between two requests to the host: the longer of
// its Crawl-delay and the request's delay.
func (h *host) delay(o options) time.Duration {
	if h.rules == nil {
		return o.delay
	}
	return max(h.rules.delay, o.delay)
}

// requestCap is the most page requests the run makes.
func (r *run) requestCap() int64 { return RequestsPerPage * int64(r.opt.maxPages) }

func (h *host) needsRobots(now time.Time) bool {
	return h.rules == nil || !h.rules.expires.IsZero() && !now.Before(h.rules.expires)
}

// result is what a worker reports to the scheduler.
type result struct {
	h        *host
	item     Item
	robots   bool    // a robots.txt fetch
	rules    *robots // its verdict
	start    time.Time
	page     *airlock.Page // to emit
	ok       bool          // a page fetched and extracted
	fetched  bool          // a response came back
	failed   bool
	bytes    int64
	fatal    error      // revoked: stop the crawl
	storeErr error      // the Frontier or Seen failed
	host     string     // the host slot BeginPage took (PageSlots)
	links    *linkBatch // links for EndPage to queue (PageSlots)
}

// linkBatch is what enqueue gives queueNew: the keys of a page's links,
// the skip reason of each ("" to queue it) and the items to queue.
type linkBatch struct {
	keys  []string
	skips []airlock.Reason
	items []Item
}

func (r *run) run() (*airlock.CrawlSummary, error) {
	err := r.seedFrontier()
	if err == nil && r.shared != nil && !r.cfg.Join {
		err = r.shared.Seeded(r.ctx)
	}
	if err != nil {
		r.stop(StoppedStore, err)
	}
	r.loop()
	r.stopWorkers()
	return r.finish()
}

// goWork runs job on an idle worker, or on a new one when none is idle.
func (r *run) goWork(job func()) {
	select {
	case r.work <- job:
		return
	default:
	}
	r.workers.Add(1)
	go func() {
		defer r.workers.Done()
		for {
			job()
			select {
			case job = <-r.work:
			case <-r.workersDone:
				return
			}
		}
	}()
}

// stopWorkers ends the idle workers (every job is done when the loop
// returns) and waits for them.
func (r *run) stopWorkers() {
	close(r.workersDone)
	r.workers.Wait()
}

// seedFrontier queues the seed (and /sitemap.xml) or the listed URLs.
func (r *run) seedFrontier() error {
	if r.opt.seed != "" {
		u, _ := url.Parse(r.opt.seed)
		r.seedURL = u
		r.scope = newScope(hostOf(u), r.opt.subdomains)
		r.scope.external = r.opt.external
		if r.cfg.Join {
			return nil
		}
		keys, items := []string{r.opt.seed}, []Item{{URL: r.opt.seed}}
		if r.opt.sitemap {
			sm := originOf(u) + "/sitemap.xml"
			keys, items = append(keys, "sitemap "+sm), append(items, Item{URL: sm, Kind: KindSitemap})
		}
		_, err := r.queueNew(keys, items)
		return err
	}
	if r.cfg.Join {
		return nil
	}
	var raws, keys []string
	var items []Item
	for _, raw := range r.req.URLs {
		key, err := Normalize(raw)
		if err != nil {
			r.skip(raw, airlock.ReasonInvalid, err.Error())
			continue
		}
		raws, keys, items = append(raws, raw), append(keys, key), append(items, Item{URL: key})
	}
	added, err := r.queueNew(keys, items)
	if err != nil {
		return err
	}
	for i, ok := range added {
		if !ok {
			r.skip(raws[i], airlock.ReasonDuplicate, "")
		}
	}
	return nil
}

func (r *run) loop() {
	var tick <-chan time.Time
	if r.progress != nil {
		t := time.NewTicker(ProgressInterval)
		defer t.Stop()
		tick = t.C
	}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	parentDone := r.parent.Done()
	for {
		var empty bool
		var wake time.Time
		if r.stopErr == nil && r.parent.Err() != nil {
			r.stopParent()
		}
		if r.stopErr == nil && !r.limit.Load() {
			empty, wake = r.fill(time.Now())
		}
		if empty && r.shared != nil {
			// Other runs may push links: look again soon.
			if next := time.Now().Add(sharedPoll); wake.IsZero() || next.Before(wake) {
				wake = next
			}
		}
		if r.inflight == 0 {
			if r.stopErr != nil || r.limit.Load() || empty && r.parked == 0 && r.idle() {
				return
			}
			if wake.IsZero() { // cannot happen: parked work with nothing to wait for
				wake = time.Now().Add(10 * time.Millisecond)
			}
		}
		var timerC <-chan time.Time
		if !wake.IsZero() && r.inflight < r.opt.concurrency {
			timer.Reset(time.Until(wake))
			timerC = timer.C
		}
		select {
		case res := <-r.results:
			r.handle(res)
		case <-timerC:
		case <-tick:
			if now := time.Now(); now.Sub(r.lastProgress) >= ProgressInterval {
				r.report(now)
			}
		case <-parentDone:
			parentDone = nil
			r.stopParent()
		}
		timer.Stop()
	}
}

// fill starts requests while there is room. empty reports that the
// frontier had nothing left; wake is when a parked item's host will take a
// request (zero: none is waiting for time).
func (r *run) fill(now time.Time) (empty bool, wake time.Time) {
	for r.inflight < r.opt.concurrency && r.stopErr == nil &&
		(r.shared != nil || r.okPages+r.inflightPages < r.opt.maxPages) {
		h, w := r.readyHost(now)
		if h != nil {
			if h.needsRobots(now) {
				r.startRobots(h, now)
				continue
			}
			it := h.queue[h.qhead]
			if !r.dispatch(h, it, now) {
				// Every page slot of the crawl is taken by other runs'
				// fetches (one may fail and give its slot back), or
				// every request slot of the origin.
				wait := cmp.Or(r.slotWait, sharedPoll)
				r.slotWait = 0
				return false, now.Add(wait)
			}
			h.queue[h.qhead] = Item{}
			h.qhead++
			r.parked--
			continue
		}
		wake = w
		if r.parked >= r.maxParked {
			return false, wake
		}
		items, err := r.pop(r.maxParked - r.parked)
		if err != nil {
			r.stopStore(err)
			return false, time.Time{}
		}
		if len(items) == 0 {
			return true, wake
		}
		for _, it := range items {
			r.park(it, now)
		}
	}
	return false, wake
}

// readyHost returns a host with parked work that can start a request now,
// or else the earliest time one can.
func (r *run) readyHost(now time.Time) (*host, time.Time) {
	var wake time.Time
	for i := 0; i < len(r.waiting); {
		h := r.waiting[i]
		if h.qhead == len(h.queue) {
			h.queue, h.qhead, h.waiting = h.queue[:0], 0, false
			r.waiting[i] = r.waiting[len(r.waiting)-1]
			r.waiting = r.waiting[:len(r.waiting)-1]
			continue
		}
		i++
		if h.fetching || h.active >= h.limit(r.opt) {
			continue
		}
		if h.needsRobots(now) || !now.Before(h.next) {
			return h, time.Time{}
		}
		if wake.IsZero() || h.next.Before(wake) {
			wake = h.next
		}
	}
	return nil, wake
}

// park puts an item popped from the frontier in its host's queue.
func (r *run) park(it Item, now time.Time) {
	u, err := url.Parse(it.URL)
	if err != nil || u.Host == "" {
		r.skip(it.URL, airlock.ReasonInvalid, "not an absolute URL")
		r.doneItem(it)
		return
	}
	origin := originOf(u)
	h := r.hosts[origin]
	if h == nil {
		h = &host{origin: origin}
		if r.opt.ignore {
			h.rules = &robots{verdict: robotsAllowAll}
		} else {
			h.rules = r.robots.get(origin, now)
		}
		r.hosts[origin] = h
		r.seedSitemaps(h)
	}
	if len(h.queue) == cap(h.queue) && h.qhead >= len(h.queue)/2 {
		// A busy host's queue may never drain to empty: move what waits to
		// the front rather than grow the slice with every item parked.
		n := copy(h.queue, h.queue[h.qhead:])
		clear(h.queue[n:])
		h.queue, h.qhead = h.queue[:n], 0
	}
	h.queue = append(h.queue, it)
	r.parked++
	if !h.waiting {
		h.waiting = true
		r.waiting = append(r.waiting, h)
	}
}

// dispatch starts a worker for it, unless robots.txt refuses it. It
// returns false, leaving it to the caller, when a shared crawl has no page
// slot free or the run's request cap is reached (which stops the run).
func (r *run) dispatch(h *host, it Item, now time.Time) bool {
	u, err := url.Parse(it.URL)
	if err != nil {
		r.skip(it.URL, airlock.ReasonInvalid, err.Error())
		r.doneItem(it)
		return true
	}
	if !h.rules.allowed(u) {
		if it.Kind == KindPage {
			detail := "disallowed by robots.txt"
			if h.rules.detail != "" {
				detail = h.rules.detail
			}
			r.skip(it.URL, airlock.ReasonRobots, detail)
		}
		r.doneItem(it)
		return true
	}
	var hostToken string // taken by BeginPage, given back by EndPage
	if it.Kind == KindSitemap {
		if r.sitemapFiles >= MaxSitemaps {
			r.doneItem(it)
			return true
		}
		r.sitemapFiles++
	} else {
		if r.pageReqs.Load() >= r.requestCap() {
			// Failures do not count toward the page limit: without this a
			// site of dead links would take a request each.
			if r.stopped == "" {
				r.stopped = StoppedRequests
			}
			r.limit.Store(true)
			return false
		}
		r.pageReqs.Add(1)
		if r.slots != nil {
			token, ok, reached, wait, err := r.slots.BeginPage(r.ctx, it, r.opt.maxPages, h.origin, h.limit(r.opt), h.delay(r.opt))
			switch {
			case err != nil:
				r.stopStore(err)
				return false
			case reached:
				r.limit.Store(true)
				return false
			case !ok:
				r.pageReqs.Add(-1) // not sent
				r.slotWait = wait
				return false
			}
			hostToken = token
		} else if r.shared != nil {
			ok, reached, err := r.shared.Reserve(r.ctx, it, r.opt.maxPages)
			switch {
			case err != nil:
				r.stopStore(err)
				return false
			case reached:
				r.limit.Store(true)
				return false
			case !ok:
				return false
			}
		}
		r.inflightPages++
	}
	h.active++
	h.next = now.Add(h.delay(r.opt))
	r.inflight++
	pol := hostPolicy{origin: h.origin, limit: h.limit(r.opt), delay: h.delay(r.opt), token: hostToken}
	r.goWork(func() {
		res := r.guard(it, func() result {
			if it.Kind == KindSitemap {
				return r.fetchSitemap(it, pol)
			}
			return r.fetchPage(it, pol)
		})
		res.h, res.item, res.host = h, it, hostToken
		r.results <- res
	})
	return true
}

// maxPopBatch bounds the items a run takes at once from a BatchPopper.
const maxPopBatch = 8

// pop takes the oldest items of the frontier, up to room: several in one
// call from a BatchPopper, else one. None: the frontier is empty now.
func (r *run) pop(room int) ([]Item, error) {
	if bp, ok := r.frontier.(BatchPopper); ok {
		return bp.PopN(r.ctx, min(room, maxPopBatch))
	}
	it, ok, err := r.frontier.Pop(r.ctx)
	if err != nil || !ok {
		return nil, err
	}
	return []Item{it}, nil
}

// sharedPoll is how often a run of a shared crawl looks again at an empty
// frontier, or for a page slot.
const sharedPoll = 50 * time.Millisecond

// idle reports that the crawl is over for every run: always for a crawl
// of one run; for a shared crawl, when its state says so (a failure to
// read it stops the run).
func (r *run) idle() bool {
	if r.shared == nil {
		return true
	}
	idle, err := r.shared.Idle(r.ctx)
	if err != nil {
		r.stopStore(err)
		return true
	}
	return idle
}

func (r *run) startRobots(h *host, now time.Time) {
	h.fetching = true
	h.active++
	r.inflight++
	go func() {
		rules, err := r.loadRobots(h.origin)
		res := result{h: h, robots: true, rules: rules, start: now}
		if errors.As(err, new(errHostSlot)) {
			res.storeErr = err
		} else {
			res.fatal = err
		}
		r.results <- res
	}()
}

// handle takes a worker's result, in the scheduler goroutine.
func (r *run) handle(res result) {
	now := time.Now()
	h := res.h
	h.active--
	r.inflight--
	switch {
	case res.robots:
		h.fetching = false
		if res.rules != nil {
			h.rules = res.rules
			if t := res.start.Add(h.delay(r.opt)); t.After(h.next) {
				h.next = t
			}
			r.seedSitemaps(h)
		}
	case res.item.Kind == KindPage:
		r.inflightPages--
		r.done++
		r.bytes += res.bytes
		if res.fetched {
			r.fetched++
		}
		if res.failed {
			r.failed++
		}
		if res.ok {
			r.okPages++
		}
		if res.page != nil && r.stopErr == nil {
			if err := r.emit(res.page); err != nil {
				r.stop(StoppedEmit, fmt.Errorf("emit: %w", err))
			} else {
				r.pages++
			}
		}
		if r.shared != nil {
			var reached bool
			var err error
			if r.slots != nil {
				reached, err = r.endPage(res)
			} else {
				reached, err = r.shared.Settle(context.WithoutCancel(r.parent), res.item, res.ok, r.opt.maxPages)
			}
			if err != nil && res.storeErr == nil {
				res.storeErr = err
			}
			if reached {
				r.limit.Store(true)
			}
		} else if r.okPages >= r.opt.maxPages {
			r.limit.Store(true)
		}
	}
	switch {
	case res.fatal != nil:
		r.stop(StoppedRevoked, res.fatal)
	case res.storeErr != nil:
		r.stopStore(res.storeErr)
	}
	if !res.robots {
		r.doneItem(res.item)
	}
	if now.Sub(r.lastProgress) >= ProgressInterval {
		r.report(now)
	}
}

// endPage ends a page of a PageSlots crawl: its links queued, its slots
// given back, in one step; then the links that were new and not to be
// queued are listed as skipped.
func (r *run) endPage(res result) (reached bool, err error) {
	lb := res.links
	if lb == nil {
		lb = &linkBatch{}
	}
	added, reached, err := r.slots.EndPage(context.WithoutCancel(r.parent), res.item, res.ok, r.opt.maxPages, res.h.origin, res.host, lb.keys, lb.items)
	if err != nil {
		return false, err
	}
	r.linksAdded(lb, added)
	return reached, nil
}

// seedSitemaps queues the Sitemap lines of the seed origin's robots.txt,
// once.
func (r *run) seedSitemaps(h *host) {
	if !r.opt.sitemap || r.sitemapsSeeded || r.seedURL == nil || h.rules == nil || h.origin != originOf(r.seedURL) {
		return
	}
	r.sitemapsSeeded = true
	if err := r.queueSitemaps(r.seedURL, h.rules.sitemaps, 0); err != nil {
		r.stopStore(err)
	}
}

// queueSitemaps queues sitemap locations: in scope, new, at nesting level
// depth.
func (r *run) queueSitemaps(base *url.URL, locs []string, depth int) error {
	var keys []string
	var items []Item
	for _, loc := range locs {
		u, err := base.Parse(preEscape(loc))
		if err != nil {
			continue
		}
		key, err := normalizeURL(u)
		if err != nil || !r.scope.contains(hostOf(u)) {
			continue
		}
		keys, items = append(keys, "sitemap "+key), append(items, Item{URL: key, Depth: depth, Kind: KindSitemap})
	}
	_, err := r.queueNew(keys, items)
	return err
}

// queueNew adds keys to the seen set and queues the items of the keys
// that were new (an item without a URL is not queued: its key is only
// marked seen). A shared state that can (SeenQueue) does both in one
// atomic step, so that a run dying in between loses no URL.
func (r *run) queueNew(keys []string, items []Item) ([]bool, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	if sq, ok := r.seen.(SeenQueue); ok && r.shared != nil {
		added, err := sq.AddAndPush(r.ctx, keys, items)
		if err != nil {
			return nil, err
		}
		for i, ok := range added {
			if ok && items[i].URL != "" {
				r.queued.Add(1)
			}
		}
		return added, nil
	}
	added, err := r.addSeen(keys)
	if err != nil {
		return nil, err
	}
	var push []Item
	for i, ok := range added {
		if ok && items[i].URL != "" {
			push = append(push, items[i])
		}
	}
	return added, r.push(push)
}

func (r *run) stop(why string, err error) {
	if r.stopErr != nil {
		return
	}
	r.stopped, r.stopErr = why, err
	r.cancel()
}

// stopParent stops the crawl because its context ended.
func (r *run) stopParent() {
	err := context.Cause(r.parent) // a revocation may cancel with its own error
	switch {
	case airlock.CodeOf(err) == airlock.CodeRevoked:
		r.stop(StoppedRevoked, err)
	case errors.Is(r.parent.Err(), context.DeadlineExceeded):
		r.stop(StoppedTimeout, err)
	default:
		r.stop(StoppedCanceled, err)
	}
}

func (r *run) stopStore(err error) {
	if r.ctx.Err() != nil { // failing because the crawl is stopping
		return
	}
	r.stop(StoppedStore, err)
}

// doneItem tells the frontier an item is dealt with. A shared frontier must
// hear it even when the crawl is stopping.
func (r *run) doneItem(it Item) {
	if err := r.frontier.Done(context.WithoutCancel(r.parent), it); err != nil {
		r.log.Debug("crawl: frontier done", "url", it.URL, "error", err)
	}
}

func (r *run) report(now time.Time) {
	r.lastProgress = now
	if r.progress == nil {
		return
	}
	q, _ := r.frontier.Len(r.ctx)
	r.progress(airlock.CrawlProgress{Done: r.done, Queued: q + r.parked, Failed: r.failed, PagesPerS: r.rate(now)})
}

func (r *run) rate(now time.Time) float64 {
	s := now.Sub(r.start).Seconds()
	if s <= 0 {
		return 0
	}
	return float64(r.pages) / s
}

// finish lists what the page limit left unfetched and builds the summary.
func (r *run) finish() (*airlock.CrawlSummary, error) {
	if r.stopErr == nil && r.limit.Load() {
		for _, h := range r.waiting {
			for _, it := range h.queue[h.qhead:] {
				r.skipLimit(it)
			}
			h.queue, h.qhead = nil, 0
		}
		r.parked = 0
		for {
			it, ok, err := r.frontier.Pop(r.ctx)
			if err != nil || !ok {
				break
			}
			r.skipLimit(it)
		}
	}
	now := time.Now()
	r.report(now)
	r.mu.Lock()
	skipped := r.skipped
	if r.overflow > 0 {
		skipped = append(skipped, airlock.Skipped{Reason: airlock.ReasonTruncated, Detail: fmt.Sprintf("%d more skipped URLs not listed", r.overflow)})
	}
	r.mu.Unlock()
	if skipped == nil {
		skipped = []airlock.Skipped{}
	}
	sum := &airlock.CrawlSummary{
		Pages: r.pages, Skipped: skipped, Queued: int(r.queued.Load()), Fetched: r.fetched,
		Failed: r.failed, Bytes: r.bytes, ElapsedMS: now.Sub(r.start).Milliseconds(),
		PagesPerS: r.rate(now), Stopped: r.stopped,
	}
	if r.stopErr != nil {
		return sum, fmt.Errorf("crawl stopped (%s): %w", r.stopped, r.stopErr)
	}
	return sum, nil
}

func (r *run) skipLimit(it Item) {
	if it.Kind == KindPage {
		r.skip(it.URL, airlock.ReasonLimit, "")
	}
	r.doneItem(it)
}

// skip lists a URL in the summary; safe for concurrent use.
func (r *run) skip(u string, reason airlock.Reason, detail string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.skipped) >= maxSkipped {
		r.overflow++
		return
	}
	r.skipped = append(r.skipped, airlock.Skipped{URL: u, Reason: reason, Detail: detail})
}

// push queues items; what a bounded frontier refuses is skipped as limit.
func (r *run) push(items []Item) error {
	if len(items) == 0 {
		return nil
	}
	n, err := r.frontier.Push(r.ctx, items)
	r.queued.Add(int64(n))
	if err != nil {
		return err
	}
	for _, it := range items[n:] {
		if it.Kind == KindPage {
			r.skip(it.URL, airlock.ReasonLimit, "frontier full")
		}
	}
	return nil
}

// hostPolicy is what a request owes its origin: at most limit requests at
// once, delay apart.
type hostPolicy struct {
	origin string
	limit  int
	delay  time.Duration
	token  string // a host slot taken already (BeginPage): fetch takes none
}

// errHostSlot marks a failure of the shared state while taking a host
// slot: the crawl stops (StoppedStore), the URL is not to blame.
type errHostSlot struct{ err error }

func (e errHostSlot) Error() string { return "crawl: host slot: " + e.err.Error() }
func (e errHostSlot) Unwrap() error { return e.err }

// fetch is do within the origin's politeness for every run of a shared
// crawl: it waits for a request slot of the origin, and gives it back once
// the response is in.
func (r *run) fetch(ctx context.Context, pol hostPolicy, target, accept string) (*airlock.HTTPResponse, error) {
	if r.polite == nil || pol.token != "" {
		return r.do(ctx, target, accept)
	}
	for {
		token, wait, err := r.polite.AcquireHost(ctx, pol.origin, pol.limit, pol.delay)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, errHostSlot{err}
		}
		if token != "" {
			defer func() {
				if err := r.polite.ReleaseHost(context.WithoutCancel(ctx), pol.origin, token); err != nil {
					r.log.Debug("crawl: host slot not released", "origin", pol.origin, "error", err)
				}
			}()
			return r.do(ctx, target, accept)
		}
		t := time.NewTimer(max(wait, time.Millisecond))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
	}
}

// do sends a GET through the Doer, waiting out the Doer's rate limit a
// few times.
func (r *run) do(ctx context.Context, target, accept string) (*airlock.HTTPResponse, error) {
	for attempt := 0; ; attempt++ {
		req := &airlock.HTTPRequest{
			Method: "GET", URL: target,
			Header:     map[string][]string{"User-Agent": {r.opt.ua}, "Accept": {accept}},
			Proxy:      r.req.Proxy,
			TLSProfile: r.opt.tls,
			Narrow:     r.req.Narrow,
			Cache:      r.req.Cache,
		}
		resp, err := r.cfg.Doer.Do(ctx, req)
		if err == nil {
			if resp == nil {
				return nil, errors.New("crawl: the Doer returned no response")
			}
			return resp, nil
		}
		if airlock.CodeOf(err) != airlock.CodeRateLimited || attempt == maxRateLimitRetries {
			return nil, err
		}
		// A retry of a page is a request of its own (dispatch counted the
		// first); none past the run's cap.
		if accept == acceptPage && r.pageReqs.Add(1) > r.requestCap() {
			return nil, err
		}
		wait := min(max(airlock.RetryAfter(err), 100*time.Millisecond), maxRetryWait)
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, err
		}
	}
}

// loadRobots returns the robots.txt verdict of an origin; fatal is set
// when the Doer answered revoked.
func (r *run) loadRobots(origin string) (rules *robots, fatal error) {
	ctx, cancel := context.WithTimeout(r.ctx, r.opt.timeout)
	defer cancel()
	if rules := r.sharedRobots(ctx, origin); rules != nil {
		return rules, nil
	}
	resp, err := r.fetch(ctx, hostPolicy{origin: origin, limit: 1}, origin+"/robots.txt", acceptRobots)
	now := time.Now()
	if err != nil {
		if r.ctx.Err() != nil {
			return nil, nil // the crawl is stopping
		}
		code := airlock.CodeOf(err)
		var slot errHostSlot
		switch {
		case errors.As(err, &slot):
			return nil, err
		case code == airlock.CodeRevoked:
			return nil, err
		case code == airlock.CodeDenied:
			// The origin is refused to this caller: its pages will be
			// refused too, with the policy's reason. Not cached: the verdict
			// is the caller's, not the origin's.
			rules = &robots{verdict: robotsAllowAll, expires: now.Add(DefaultRobotsTTL)}
		case airlock.ReasonOf(err) == airlock.ReasonRedirectLimit:
			// RFC 9309 §2.3.1.2: past five redirects, robots.txt is unavailable.
			rules = &robots{verdict: robotsAllowAll, expires: now.Add(DefaultRobotsTTL), cache: true}
		default:
			// Denied: the origin is refused to this caller, its pages will
			// be too (not cached: the verdict is the caller's). Past five
			// redirects: unavailable. Otherwise unreachable.
			rules = robotsFromError(err, now)
		}
	} else {
		rules = robotsFromStatus(resp.Status, resp.Body, now)
	}
	r.robots.put(origin, rules, now)
	r.shareRobots(ctx, origin, rules, now)
	r.log.Debug("crawl: robots.txt", "origin", origin, "verdict", rules.verdict, "delay", rules.delay, "detail", rules.detail)
	return rules, nil
}

// fetchPage fetches, extracts and follows one page, in a worker.
func (r *run) fetchPage(it Item, pol hostPolicy) (res result) {
	ctx, cancel := context.WithTimeout(r.ctx, r.opt.timeout)
	defer cancel()
	start := time.Now()
	resp, err := r.fetch(ctx, pol, it.URL, acceptPage)
	if err != nil {
		if errors.As(err, new(errHostSlot)) {
			return result{storeErr: err}
		}
		return r.failure(it.URL, err)
	}
	res.fetched, res.bytes = true, int64(len(resp.Body))
	if resp.Status < 200 || resp.Status > 299 {
		r.skip(it.URL, airlock.ReasonHTTPStatus, strconv.Itoa(resp.Status))
		res.failed = true
		return res
	}
	base, ok, err := r.landing(it, resp)
	if err != nil {
		res.storeErr = err
		return res
	}
	if !ok {
		return res
	}
	ex, err := r.cfg.Page(ctx, resp, r.opt.extract)
	if err != nil {
		f := r.failure(it.URL, err)
		f.fetched, f.bytes = true, res.bytes
		return f
	}
	res.ok = true
	noindex, nofollow := xRobotsTag(resp.Header)
	if r.scope != nil && !nofollow && !ex.NoFollow {
		lb := r.links(base, ex.Links, it.Depth+1)
		if r.slots != nil {
			res.links = lb // queued by EndPage
		} else if err := r.queueLinks(lb); err != nil {
			res.storeErr = err
		}
	}
	if p := ex.Page; p != nil && !noindex && !ex.NoIndex {
		fillPage(p, it, resp, start)
		if r.opt.raw {
			p.RawHTML = rawText(resp.Body)
		}
		res.page = p
	}
	return res
}

// landing checks where a fetch ended after redirects: base is the URL
// links resolve against; ok is false when the page is not to be used
// (redirected off the crawl's hosts, or to a URL the crawl already has).
func (r *run) landing(it Item, resp *airlock.HTTPResponse) (base *url.URL, ok bool, err error) {
	final := it.URL
	if resp.URL != "" && resp.URL != it.URL {
		if u, err := url.Parse(resp.URL); err == nil {
			if key, err := normalizeURL(u); err == nil {
				final = key
			}
		}
	}
	base, err = url.Parse(final)
	if err != nil {
		return nil, false, nil
	}
	if final == it.URL || r.scope == nil { // a listed URL gets its page wherever it lands
		return base, true, nil
	}
	if it.URL == r.opt.seed {
		r.scope.add(hostOf(base)) // a seed that redirects moves the crawl
	}
	if !r.scope.contains(hostOf(base)) {
		r.skip(it.URL, airlock.ReasonOffHost, "redirected to "+final)
		return nil, false, nil
	}
	added, err := r.seen.Add(r.ctx, final)
	if err != nil {
		return nil, false, err
	}
	return base, added, nil
}

// guard runs a worker's fetch of it, and makes a panic in it (from a
// hostile page in a page function, say) that URL's failure: skipped with
// reason panic, without the panic's value, which goes with its stack to
// the log (Config.Logger, else the default logger). The crawl goes on.
func (r *run) guard(it Item, fetch func() result) (res result) {
	defer func() {
		v := recover()
		if v == nil {
			return
		}
		lg := r.cfg.Logger
		if lg == nil {
			lg = slog.Default()
		}
		lg.Error("crawl: panic reading a page", slog.String("url", it.URL), slog.Any("panic", v),
			slog.String("stack", string(debug.Stack())))
		r.skip(it.URL, airlock.ReasonPanic, "internal error")
		res = result{failed: true}
	}()
	return fetch()
}

// failure classifies a failed fetch or extraction.
func (r *run) failure(u string, err error) result {
	if r.ctx.Err() != nil { // the crawl is stopping: not the URL's fault
		return result{}
	}
	reason, detail, fatal := skipReason(err)
	if fatal {
		return result{fatal: err}
	}
	r.skip(u, reason, detail)
	return result{failed: true}
}

// enqueue queues the new, in-scope links of a page at depth, and lists
// the others that are new. Links that are not http(s) are dropped.
func (r *run) enqueue(base *url.URL, links []string, depth int) error {
	return r.queueLinks(r.links(base, links, depth))
}

// links resolves the links of a page at depth: their keys, and the item
// to queue or the reason to skip each.
func (r *run) links(base *url.URL, links []string, depth int) *linkBatch {
	var keys []string
	var skips []airlock.Reason
	var items []Item
	for _, l := range links {
		u, err := base.Parse(preEscape(l))
		if err != nil || u.Scheme != "http" && u.Scheme != "https" {
			continue
		}
		key, err := normalizeURL(u)
		if err != nil {
			continue
		}
		var skip airlock.Reason
		switch {
		case !r.scope.contains(hostOf(u)):
			skip = airlock.ReasonOffHost
		case !r.opt.pathAllowed(u.EscapedPath()):
			skip = airlock.ReasonPath
		case r.opt.depth != Unlimited && depth > r.opt.depth:
			skip = airlock.ReasonDepth
		case r.limit.Load():
			skip = airlock.ReasonLimit
		}
		it := Item{URL: key, Depth: depth}
		if skip != "" {
			it = Item{} // marked seen, listed as skipped, not queued
		}
		keys, skips, items = append(keys, key), append(skips, skip), append(items, it)
	}
	return &linkBatch{keys: keys, skips: skips, items: items}
}

// queueLinks queues the new links of lb and lists the new ones it skips.
func (r *run) queueLinks(lb *linkBatch) error {
	added, err := r.queueNew(lb.keys, lb.items)
	if err != nil {
		return err
	}
	for i, ok := range added {
		if ok && lb.skips[i] != "" {
			r.skip(lb.keys[i], lb.skips[i], "")
		}
	}
	return nil
}

// linksAdded counts the queued links of lb that EndPage found new and
// lists the new ones it skips.
func (r *run) linksAdded(lb *linkBatch, added []bool) {
	for i, ok := range added {
		if !ok || i >= len(lb.keys) {
			continue
		}
		if lb.skips[i] != "" {
			r.skip(lb.keys[i], lb.skips[i], "")
		} else if lb.items[i].URL != "" {
			r.queued.Add(1)
		}
	}
}

// addSeen adds keys to the seen set and reports which were new.
func (r *run) addSeen(keys []string) ([]bool, error) {
	added := make([]bool, len(keys))
	for i, k := range keys {
		var err error
		if added[i], err = r.seen.Add(r.ctx, k); err != nil {
			return nil, err
		}
	}
	return added, nil
}

// fetchSitemap reads one sitemap and queues its URLs, in a worker.
// Sitemap failures are logged, not listed: a sitemap is not a page.
func (r *run) fetchSitemap(it Item, pol hostPolicy) (res result) {
	ctx, cancel := context.WithTimeout(r.ctx, r.opt.timeout)
	defer cancel()
	resp, err := r.fetch(ctx, pol, it.URL, acceptSitemap)
	if errors.As(err, new(errHostSlot)) {
		return result{storeErr: err}
	}
	if err != nil {
		if r.ctx.Err() == nil {
			if _, _, fatal := skipReason(err); fatal {
				res.fatal = err
			}
			r.log.Debug("crawl: sitemap", "url", it.URL, "error", err)
		}
		return res
	}
	if resp.Status < 200 || resp.Status > 299 {
		r.log.Debug("crawl: sitemap", "url", it.URL, "status", resp.Status)
		return res
	}
	left := MaxSitemapURLs - int(r.sitemapURLs.Load())
	if left <= 0 {
		return res
	}
	locs, index, err := parseSitemap(resp.Body, left)
	if err != nil {
		r.log.Debug("crawl: sitemap", "url", it.URL, "error", err)
	}
	base, _ := url.Parse(it.URL)
	if resp.URL != "" {
		if u, err := url.Parse(resp.URL); err == nil {
			base = u
		}
	}
	if index {
		if it.Depth > 0 { // one level of index only
			return res
		}
		res.storeErr = r.queueSitemaps(base, locs, it.Depth+1)
		return res
	}
	r.sitemapURLs.Add(int64(len(locs)))
	res.storeErr = r.enqueue(base, locs, 0)
	return res
}

// fillPage sets the fields of a page that its extractor left empty.
func fillPage(p *airlock.Page, it Item, resp *airlock.HTTPResponse, start time.Time) {
	if p.URL == "" {
		p.URL = cmp.Or(resp.URL, it.URL)
	}
	if p.RequestedURL == "" {
		p.RequestedURL = it.URL
	}
	if p.Status == 0 {
		p.Status = resp.Status
	}
	if p.ContentType == "" {
		if v := headerValues(resp.Header, "Content-Type"); len(v) > 0 {
			p.ContentType = v[0]
		}
	}
	if p.FetchedAt.IsZero() {
		p.FetchedAt = start
	}
	if p.ElapsedMS == 0 {
		p.ElapsedMS = time.Since(start).Milliseconds()
	}
	if p.DecisionID == "" {
		p.DecisionID = resp.DecisionID
	}
}
