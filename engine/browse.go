package engine

import (
	"context"
	"fmt"
	"strings"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/egress"
	"github.com/airlockhq/airlock/internal/browse"
	"github.com/airlockhq/airlock/internal/crawl"
	"github.com/airlockhq/airlock/internal/doer"
	"github.com/airlockhq/airlock/internal/gate"
	"github.com/airlockhq/airlock/internal/jobs"
	"github.com/airlockhq/airlock/internal/provider/native"
)

// Fetch fetches one page through the resolved provider (capability
// browse) as req.Initiator ("": model), which the tenant must be allowed
// to claim (denied, reason initiator) and which decides the identity sent
// and whether the site's robots.txt is honoured first (a disallowed page
// is denied, reason robots); the audit record says the initiator.
func (e *Engine) Fetch(ctx context.Context, p airlock.Principal, req airlock.FetchRequest) (*airlock.Page, error) {
	call, err := e.begin(ctx, p, airlock.CapabilityBrowse, "fetch", req.URL)
	if err != nil {
		return nil, err
	}
	ini, err := e.initiator(call, req.Initiator)
	if err != nil {
		return nil, call.End(err, 0, 0)
	}
	if err := call.Tenant.Limits.Check(req, ""); err != nil {
		return nil, call.End(err, 0, 0)
	}
	page, in, err := e.fetchIn(call, ini, req)
	if err = call.End(err, in, 0); err != nil {
		return nil, err
	}
	page.DecisionID = call.ID
	return page, nil
}

// fetchIn fetches one page in call as ini, the request's initiator: with
// its identity, after robots.txt when it honours it.
func (e *Engine) fetchIn(call *gate.Call, ini gate.Initiator, req airlock.FetchRequest) (*airlock.Page, int64, error) {
	name, prov, err := e.browse.Resolve(airlock.VerbFetch, req.Provider)
	if err != nil {
		return nil, 0, err
	}
	n, err := browse.Narrowing(req.Narrow)
	if err != nil {
		return nil, 0, err
	}
	d := e.doers.New(call, n, req.Proxy, egress.ProfileChrome, req.Cache)
	d.Timeout = req.Timeout
	req.Proxy = d.Proxy
	e.doers.Identify(ini, d, &req)
	if err := e.doers.CheckRobots(call, ini, d, req); err != nil {
		return nil, d.In(), err
	}
	if name == browse.NativeName {
		page, err := prov.(airlock.Fetcher).Fetch(call.Ctx, d, req)
		return page, d.In(), err
	}
	page, err := browse.FetchRemote(call.Ctx, name, prov, d, req, func(u string) error { return doer.CheckURL(call, n, u) })
	return page, d.In(), err
}

// FetchMany fetches a batch of URLs concurrently as one broker call
// (capabilities browse and parallel): at most limits.fetch_many_urls URLs
// (browse.batch_max by default; more is invalid, reason limit),
// BatchConcurrency at a time, BatchTimeout each. Each URL gets a Page or an
// Error.
func (e *Engine) FetchMany(ctx context.Context, p airlock.Principal, urls []string, opts airlock.FetchRequest) ([]airlock.FetchResult, string, error) {
	call, err := e.begin(ctx, p, airlock.CapabilityBrowse, "fetch_many", fmt.Sprintf("%d urls", len(urls)))
	if err != nil {
		return nil, "", err
	}
	call.Batch = true
	if !call.Tenant.Profile.Has(airlock.CapabilityParallel) {
		return nil, "", call.End(airlock.Errorf(airlock.CodeDenied, airlock.ReasonCapability, "capability parallel is not granted by profile %s", call.Tenant.Profile.Name), 0, 0)
	}
	if err := call.Tenant.Limits.CheckValue(gate.LimitFetchManyURLs, "urls", int64(len(urls))); err != nil {
		return nil, "", call.End(err, 0, 0)
	}
	if err := call.Tenant.Limits.Check(opts, ""); err != nil {
		return nil, "", call.End(err, 0, 0)
	}
	ini, err := e.initiator(call, opts.Initiator)
	if err != nil {
		return nil, "", call.End(err, 0, 0)
	}
	bc := e.cfg.Browse
	conc, to := orInt(bc.BatchConcurrency, airlock.DefaultBatchConcurrency), bc.BatchTimeout
	if to <= 0 {
		to = airlock.DefaultBatchTimeout
	}
	release, err := e.budgets.Acquire(call.Ctx, gate.BudgetCrawls, call.Tenant.Name, 1)
	if err != nil {
		return nil, "", call.End(err, 0, 0)
	}
	defer release()
	out, in := browse.Batch(call.Ctx, urls, conc, to, func(ctx context.Context, u string) (*airlock.Page, int64, error) {
		sub := *call
		sub.Ctx = ctx
		r := opts
		r.URL = u
		page, n, err := e.fetchIn(&sub, ini, r)
		if page != nil {
			page.DecisionID = call.ID
		}
		return page, n, err
	}, func(err error) *airlock.Error { return pub(err, call.ID) })
	return out, call.ID, call.End(nil, in, 0)
}

func pub(err error, id string) *airlock.Error {
	pe := airlock.Public(err, id)
	return &pe
}

func orInt(v, d int) int {
	if v > 0 {
		return v
	}
	return d
}

// Crawl crawls through the resolved provider (capability browse): URLs
// fetched concurrently or a seed walked breadth-first, pages streamed to
// emit as they arrive. Ignoring robots.txt and the chrome TLS profile are
// recorded in the call's audit record; ignoring robots.txt needs the
// tenant's allow_ignore_robots (denied, reason ignore_robots). Values above
// the tenant's ceilings are invalid (reason limit). A revocation stops the
// crawl at its next fetch.
func (e *Engine) Crawl(ctx context.Context, p airlock.Principal, req airlock.CrawlRequest, emit func(*airlock.Page) error, progress func(airlock.CrawlProgress)) (*airlock.CrawlSummary, error) {
	call, err := e.beginCrawl(ctx, p, jobs.Target(req))
	if err != nil {
		return nil, err
	}
	if _, err := e.initiator(call, req.Initiator); err != nil {
		return nil, call.End(err, 0, 0)
	}
	if err := call.Tenant.CheckCrawl(req); err != nil {
		return nil, call.End(err, 0, 0)
	}
	sum, in, err := e.crawlIn(call, nil, false, jobs.CrawlDefaults(req, call.Tenant.Limits), emit, progress)
	if sum != nil {
		sum.DecisionID = call.ID
		if call.Ctx.Err() != nil && sum.Stopped == "" {
			sum.Stopped = string(airlock.ReasonOf(context.Cause(call.Ctx)))
		}
	}
	if err = call.End(err, in, 0); err != nil {
		return sum, err
	}
	return sum, nil
}

// crawlIn runs a crawl in call; shared, when not nil, is the state of a
// crawl job the fleet works (join: another replica seeded it).
func (e *Engine) crawlIn(call *gate.Call, shared crawl.Shared, join bool, req airlock.CrawlRequest, emit func(*airlock.Page) error, progress func(airlock.CrawlProgress)) (*airlock.CrawlSummary, int64, error) {
	name, prov, err := e.browse.Resolve(airlock.VerbCrawl, req.Provider)
	if err != nil {
		return nil, 0, err
	}
	n, err := browse.Narrowing(req.Narrow)
	if err != nil {
		return nil, 0, err
	}
	call.Batch = true // each page fetched is a request of its own
	release, err := e.budgets.Acquire(call.Ctx, gate.BudgetCrawls, call.Tenant.Name, 1)
	if err != nil {
		return nil, 0, err
	}
	defer release()
	d := e.doers.New(call, n, req.Proxy, egress.ProfileGo, req.Cache)
	req.Proxy = d.Proxy
	if emit == nil {
		emit = func(*airlock.Page) error { return nil }
	}
	if progress == nil {
		progress = func(airlock.CrawlProgress) {}
	}
	out := emit
	if name != browse.NativeName {
		if out, err = browse.GuardCrawl(name, req, func(u string) error { return doer.CheckURL(call, n, u) }, emit); err != nil {
			return nil, 0, err
		}
	}
	ctx := call.Ctx
	if shared != nil {
		ctx = crawl.WithShared(ctx, shared, join)
	}
	sum, err := prov.(airlock.Crawler).Crawl(ctx, d, req, out, progress)
	return sum, d.In(), err
}

// Search searches through the resolved provider (capability browse).
func (e *Engine) Search(ctx context.Context, p airlock.Principal, req airlock.SearchRequest) ([]airlock.SearchResult, string, error) {
	call, err := e.begin(ctx, p, airlock.CapabilityBrowse, "search", req.Query)
	if err != nil {
		return nil, "", err
	}
	if strings.TrimSpace(req.Query) == "" {
		return nil, "", call.End(airlock.Errorf(airlock.CodeInvalid, airlock.ReasonQuery, "empty query"), 0, 0)
	}
	if err := call.Tenant.Limits.Check(req, ""); err != nil {
		return nil, "", call.End(err, 0, 0)
	}
	if c := int(call.Tenant.Limits.Ceiling(gate.LimitSearchResults)); req.Limit == 0 && c < native.DefaultSearchLimit {
		req.Limit = c // a tenant's ceiling below the default is the default
	}
	name, prov, err := e.browse.Resolve(airlock.VerbSearch, req.Provider)
	if err != nil {
		return nil, "", call.End(err, 0, 0)
	}
	d := e.doers.New(call, nil, req.Proxy, egress.ProfileChrome, false)
	req.Proxy = d.Proxy
	res, err := prov.(airlock.Searcher).Search(call.Ctx, d, req)
	if err == nil && name != browse.NativeName {
		res = browse.KeepParsable(res)
	}
	if err = call.End(err, d.In(), 0); err != nil {
		return nil, "", err
	}
	return res, call.ID, nil
}
