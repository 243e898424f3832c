package gate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/egress"
)

// Budget names: the resources a process shares between its tenants.
const (
	BudgetConnections = "connections"      // upstream connections open (descriptors)
	BudgetBytes       = "bytes_in_flight"  // response body bytes being read
	BudgetCrawls      = "crawls"           // crawls, crawl jobs and fetch batches running
	BudgetBrowsers    = "browser_sessions" // browser sessions open
	BudgetExtract     = "extract_bytes"    // estimated memory of the extractions running
)

// DefaultBudgetRetryAfter is the Retry-After of a budget refusal: budgets
// free as calls end, so a short pause is the honest hint.
const DefaultBudgetRetryAfter = time.Second

// BudgetError is a refusal for want of a budget. Its code is rate_limited
// (Full) or too_large (the request alone is over the limit); its reason is
// airlock.ReasonBudget.
type BudgetError struct {
	Budget string // a Budget* name
	Scope  string // "process" or "tenant <name>"
	Limit  int64
	Want   int64 // what the refused request asked for
	Full   bool  // the budget was full for the whole wait (else Want > Limit)
	After  time.Duration
}

func (e *BudgetError) Error() string {
	if e.Full {
		return fmt.Sprintf("gate: the %s budget of the %s (%d) has no room; retry after %s", e.Budget, e.Scope, e.Limit, e.After.Round(time.Millisecond))
	}
	return fmt.Sprintf("gate: %d is larger than the whole %s budget of the %s (%d)", e.Want, e.Budget, e.Scope, e.Limit)
}

// ErrorCode implements the vocabulary's classification.
func (e *BudgetError) ErrorCode() string {
	if e.Full {
		return string(airlock.CodeRateLimited)
	}
	return string(airlock.CodeTooLarge)
}

// ErrorReason returns airlock.ReasonBudget.
func (e *BudgetError) ErrorReason() string { return string(airlock.ReasonBudget) }

// RetryAfter is the pause after which a retry may find room (0 for a
// request that can never fit).
func (e *BudgetError) RetryAfter() time.Duration {
	if !e.Full {
		return 0
	}
	return e.After
}

// BudgetLimit is one budget's limits: the process-wide total and each
// tenant's share. 0 means no limit at that scope.
type BudgetLimit struct {
	Process int64
	Tenants map[string]int64
}

// BudgetsConfig configures NewBudgets.
type BudgetsConfig struct {
	// Limits by budget name; a budget not listed is unlimited.
	Limits map[string]BudgetLimit
	// Wait is the longest Acquire queues for room before it refuses with
	// rate_limited; 0 refuses at once.
	Wait time.Duration
	// Queue bounds the callers waiting for one budget at one scope; a
	// caller past it is refused at once. 0: no waiting at all.
	Queue int
}

// Budgets holds the resource budgets of a process: for each budget a pool
// per tenant and one for the process. Acquire takes from the tenant's pool,
// then from the process's, so that one tenant can hold at most its share
// and the others keep theirs. Waiters are served first come, first served.
// A nil *Budgets admits everything. Safe for concurrent use.
type Budgets struct {
	wait  time.Duration
	pools map[string]*budget // by budget name
}

type budget struct {
	process *pool
	tenants map[string]*pool
}

// NewBudgets compiles cfg.
func NewBudgets(cfg BudgetsConfig) *Budgets {
	b := &Budgets{wait: cfg.Wait, pools: map[string]*budget{}}
	for name, l := range cfg.Limits {
		bb := &budget{tenants: map[string]*pool{}}
		if l.Process > 0 {
			bb.process = &pool{budget: name, scope: "process", limit: l.Process, queue: cfg.Queue}
		}
		for t, n := range l.Tenants {
			if n > 0 {
				bb.tenants[t] = &pool{budget: name, scope: "tenant " + t, limit: n, queue: cfg.Queue}
			}
		}
		b.pools[name] = bb
	}
	return b
}

// Limit returns a budget's limit for a tenant ("" for the process), 0 when
// it has none.
func (b *Budgets) Limit(name, tenant string) int64 {
	if p := b.pool(name, tenant); p != nil {
		return p.limit
	}
	return 0
}

func (b *Budgets) pool(name, tenant string) *pool {
	if b == nil || b.pools[name] == nil {
		return nil
	}
	if tenant == "" {
		return b.pools[name].process
	}
	return b.pools[name].tenants[tenant]
}

// OnFull adds a function Acquire calls when the budget has no room at the
// scope of tenant ("" for the process), and every 50 ms while a caller
// waits: a holder of idle resources (a connection pool) can free them. f
// must not call Acquire.
func (b *Budgets) OnFull(name, tenant string, f func()) {
	if p := b.pool(name, tenant); p != nil {
		p.mu.Lock()
		p.reclaim = append(p.reclaim, f)
		p.mu.Unlock()
	}
}

// Acquire takes n units of budget name for tenant, waiting in line for at
// most the configured wait (and until ctx ends). The release function
// gives them back; it may be called more than once. Errors: a
// *BudgetError (rate_limited when there was no room in time, too_large
// when n alone is over a limit), or context.Cause(ctx).
func (b *Budgets) Acquire(ctx context.Context, name, tenant string, n int64) (release func(), err error) {
	if b == nil {
		return func() {}, nil
	}
	return b.acquire(ctx, name, tenant, n, b.wait)
}

// TryAcquire is Acquire without waiting.
func (b *Budgets) TryAcquire(ctx context.Context, name, tenant string, n int64) (release func(), err error) {
	if b == nil {
		return func() {}, nil
	}
	return b.acquire(ctx, name, tenant, n, 0)
}

func (b *Budgets) acquire(ctx context.Context, name, tenant string, n int64, wait time.Duration) (func(), error) {
	bb := b.pools[name]
	if bb == nil || n <= 0 {
		return func() {}, nil
	}
	deadline := time.Now().Add(wait)
	tp := bb.tenants[tenant]
	if tp != nil {
		if err := tp.acquire(ctx, n, deadline); err != nil {
			return nil, err
		}
	}
	if bb.process != nil {
		if err := bb.process.acquire(ctx, n, deadline); err != nil {
			if tp != nil {
				tp.release(n)
			}
			return nil, err
		}
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			if bb.process != nil {
				bb.process.release(n)
			}
			if tp != nil {
				tp.release(n)
			}
		})
	}, nil
}

// ConnSlots returns the connection budget of tenant as egress's hook: each
// connection the tenant's dialer opens holds one unit until it is closed.
// A refusal is an *egress.Error (code rate_limited or too_large, reason
// airlock.ReasonBudget) wrapping the *BudgetError.
func (b *Budgets) ConnSlots(tenant string) egress.ConnSlots {
	return connSlots{b: b, tenant: tenant}
}

type connSlots struct {
	b      *Budgets
	tenant string
}

func (c connSlots) Acquire(ctx context.Context) (func(), error) {
	release, err := c.b.Acquire(ctx, BudgetConnections, c.tenant, 1)
	var be *BudgetError
	if errors.As(err, &be) {
		return nil, &egress.Error{Code: egress.Code(be.ErrorCode()), Reason: egress.Reason(airlock.ReasonBudget), Op: "dial", Detail: be.Error(), Err: be}
	}
	return release, err
}

// Reader returns r whose reads are counted against the tenant's budget
// name as they arrive (in steps of budgetStep bytes), and a release
// function that gives the bytes back: the caller calls it when it no
// longer holds what it read. A read that finds no room within the wait
// returns the *BudgetError (rate_limited); a body that grows past the
// whole budget is too_large at once.
func (b *Budgets) Reader(ctx context.Context, name, tenant string, r io.Reader) (io.Reader, func()) {
	if b.pool(name, tenant) == nil && b.pool(name, "") == nil {
		return r, func() {}
	}
	br := &budgetReader{ctx: ctx, b: b, name: name, tenant: tenant, r: r}
	for _, p := range []*pool{b.pool(name, tenant), b.pool(name, "")} {
		if p != nil && (br.whole == nil || p.limit < br.whole.limit) {
			br.whole = p
		}
	}
	return br, br.release
}

const budgetStep = 64 << 10

type budgetReader struct {
	ctx          context.Context
	b            *Budgets
	name, tenant string
	r            io.Reader
	whole        *pool // the smallest limit: a body past it can never fit
	read, held   int64
	mu           sync.Mutex
	releases     []func()
	done         bool
}

func (br *budgetReader) Read(p []byte) (int, error) {
	// Take room before reading: what is read is then always covered.
	if br.held-br.read < int64(len(p)) {
		step := max(int64(len(p))-(br.held-br.read), budgetStep)
		if w := br.whole; br.held+step > w.limit {
			// One body larger than the whole budget: too_large at once,
			// rather than a wait that cannot end well.
			step = w.limit - br.held
			if step <= 0 {
				w.mu.Lock()
				w.refused++
				w.mu.Unlock()
				return 0, &BudgetError{Budget: w.budget, Scope: w.scope, Limit: w.limit, Want: br.held + int64(len(p))}
			}
		}
		rel, err := br.b.Acquire(br.ctx, br.name, br.tenant, step)
		if err != nil {
			return 0, err
		}
		br.mu.Lock()
		if br.done {
			br.mu.Unlock()
			rel()
			return 0, io.ErrClosedPipe
		}
		br.releases = append(br.releases, rel)
		br.mu.Unlock()
		br.held += step
	}
	n, err := br.r.Read(p)
	br.read += int64(n)
	return n, err
}

func (br *budgetReader) release() {
	br.mu.Lock()
	rels := br.releases
	br.releases, br.done = nil, true
	br.mu.Unlock()
	for _, r := range rels {
		r()
	}
}

// Usage is one pool's state.
type Usage struct {
	Budget  string
	Scope   string // "process" or "tenant <name>"
	Limit   int64
	InUse   int64
	Peak    int64 // the most in use at once since start
	Waiting int
	Refused int64
}

// Usage returns every pool's state, sorted by budget and scope.
func (b *Budgets) Usage() []Usage {
	if b == nil {
		return nil
	}
	var out []Usage
	for _, bb := range b.pools {
		for _, p := range bb.all() {
			out = append(out, p.usage())
		}
	}
	slices.SortFunc(out, func(x, y Usage) int {
		if x.Budget != y.Budget {
			return cmpString(x.Budget, y.Budget)
		}
		return cmpString(x.Scope, y.Scope)
	})
	return out
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (bb *budget) all() []*pool {
	var ps []*pool
	if bb.process != nil {
		ps = append(ps, bb.process)
	}
	for _, p := range bb.tenants {
		ps = append(ps, p)
	}
	return ps
}

var (
	budgetInUseDesc   = prometheus.NewDesc("airlock_budget_in_use", "Units of a resource budget in use (connections, bytes, crawls, sessions).", []string{"budget", "scope"}, nil)
	budgetLimitDesc   = prometheus.NewDesc("airlock_budget_limit", "The limit of a resource budget.", []string{"budget", "scope"}, nil)
	budgetWaitingDesc = prometheus.NewDesc("airlock_budget_waiting", "Callers waiting for room in a resource budget.", []string{"budget", "scope"}, nil)
	budgetPeakDesc    = prometheus.NewDesc("airlock_budget_peak", "The most units of a resource budget in use at once since start.", []string{"budget", "scope"}, nil)
	budgetRefusedDesc = prometheus.NewDesc("airlock_budget_refused_total", "Requests refused for want of room in a resource budget.", []string{"budget", "scope"}, nil)
)

// Describe implements prometheus.Collector.
func (b *Budgets) Describe(ch chan<- *prometheus.Desc) {
	ch <- budgetInUseDesc
	ch <- budgetLimitDesc
	ch <- budgetWaitingDesc
	ch <- budgetPeakDesc
	ch <- budgetRefusedDesc
}

// Collect implements prometheus.Collector.
func (b *Budgets) Collect(ch chan<- prometheus.Metric) {
	for _, u := range b.Usage() {
		ch <- prometheus.MustNewConstMetric(budgetInUseDesc, prometheus.GaugeValue, float64(u.InUse), u.Budget, u.Scope)
		ch <- prometheus.MustNewConstMetric(budgetLimitDesc, prometheus.GaugeValue, float64(u.Limit), u.Budget, u.Scope)
		ch <- prometheus.MustNewConstMetric(budgetWaitingDesc, prometheus.GaugeValue, float64(u.Waiting), u.Budget, u.Scope)
		ch <- prometheus.MustNewConstMetric(budgetPeakDesc, prometheus.GaugeValue, float64(u.Peak), u.Budget, u.Scope)
		ch <- prometheus.MustNewConstMetric(budgetRefusedDesc, prometheus.CounterValue, float64(u.Refused), u.Budget, u.Scope)
	}
}

// pool is one budget at one scope: at most limit units in use, a FIFO
// line of at most queue waiters.
type pool struct {
	budget, scope string
	limit         int64
	queue         int

	mu      sync.Mutex
	used    int64
	peak    int64
	refused int64
	waiters []*waiter
	reclaim []func()
}

// reclaimEvery is how often a waiting caller asks the holders of idle
// units to free them.
const reclaimEvery = 50 * time.Millisecond

type waiter struct {
	n       int64
	ready   chan struct{}
	granted bool
}

func (p *pool) full(n int64) *BudgetError {
	return &BudgetError{Budget: p.budget, Scope: p.scope, Limit: p.limit, Want: n, Full: true, After: DefaultBudgetRetryAfter}
}

func (p *pool) acquire(ctx context.Context, n int64, deadline time.Time) error {
	if n > p.limit {
		p.mu.Lock()
		p.refused++
		p.mu.Unlock()
		return &BudgetError{Budget: p.budget, Scope: p.scope, Limit: p.limit, Want: n}
	}
	p.mu.Lock()
	if len(p.waiters) == 0 && p.used+n <= p.limit {
		p.takeLocked(n)
		p.mu.Unlock()
		return nil
	}
	wait := time.Until(deadline)
	if wait <= 0 || len(p.waiters) >= p.queue {
		p.refused++
		p.mu.Unlock()
		return p.full(n)
	}
	w := &waiter{n: n, ready: make(chan struct{})}
	p.waiters = append(p.waiters, w)
	reclaim := slices.Clone(p.reclaim)
	p.mu.Unlock()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	// Holders of idle units are asked to free them now and again while
	// the caller waits: what was busy a moment ago may be idle now.
	var tick <-chan time.Time
	if len(reclaim) > 0 {
		for _, f := range reclaim {
			f()
		}
		t := time.NewTicker(reclaimEvery)
		defer t.Stop()
		tick = t.C
	}
	var err error
wait:
	for {
		select {
		case <-w.ready:
			return nil
		case <-ctx.Done():
			err = context.Cause(ctx)
			break wait
		case <-timer.C:
			err = p.full(n)
			break wait
		case <-tick:
			for _, f := range reclaim {
				f()
			}
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if w.granted {
		return nil // granted as the wait ended: keep it
	}
	if i := slices.Index(p.waiters, w); i >= 0 {
		p.waiters = slices.Delete(p.waiters, i, i+1)
	}
	p.refused++
	p.grantLocked() // the line's head may have been w
	return err
}

func (p *pool) takeLocked(n int64) {
	p.used += n
	p.peak = max(p.peak, p.used)
}

func (p *pool) grantLocked() {
	for len(p.waiters) > 0 && p.used+p.waiters[0].n <= p.limit {
		w := p.waiters[0]
		p.waiters = p.waiters[1:]
		p.takeLocked(w.n)
		w.granted = true
		close(w.ready)
	}
}

func (p *pool) release(n int64) {
	p.mu.Lock()
	p.used -= n
	p.grantLocked()
	p.mu.Unlock()
}

func (p *pool) usage() Usage {
	p.mu.Lock()
	defer p.mu.Unlock()
	return Usage{Budget: p.budget, Scope: p.scope, Limit: p.limit, InUse: p.used, Peak: p.peak, Waiting: len(p.waiters), Refused: p.refused}
}
