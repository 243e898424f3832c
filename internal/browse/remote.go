package browse

import (
	"cmp"
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/egress"
	"github.com/airlockhq/airlock/internal/provider/native"
)

// Narrowing compiles a request's narrowing (nil: none).
func Narrowing(n *airlock.Narrowing) (*egress.Checker, error) {
	if n == nil || len(n.Allow) == 0 && len(n.Deny) == 0 {
		return nil, nil
	}
	pol := egress.DefaultPolicy()
	pol.Allow, pol.Deny = n.Allow, n.Deny
	// The narrowing's own floor must not deny what the tenant excepted: an
	// exception-free floor here would, so the narrowing opens the floor and
	// relies on the tenant's checker for it.
	pol.Exceptions = []string{"0.0.0.0/0", "::/0"}
	chk, err := pol.Compile()
	if err != nil {
		return nil, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonNarrow, "request narrowing: %v", err)
	}
	return chk, nil
}

// Scraper is a remote provider that returns raw HTML; the engine runs its
// own extractor on it so every provider's Page has the same shape.
type Scraper interface {
	Scrape(ctx context.Context, d airlock.Doer, url string) (html []byte, finalURL string, status int, err error)
}

// FetchRemote fetches req through prov, a remote provider named name,
// with d: check (the policy on a URL, without fetching it) decides the
// target before delegating, and every final URL the provider reports
// after. Its own subrequests happen outside our floor (see the README).
func FetchRemote(ctx context.Context, name string, prov Provider, d airlock.Doer, req airlock.FetchRequest, check func(string) error) (*airlock.Page, error) {
	if err := check(req.URL); err != nil {
		return nil, err
	}
	start := time.Now()
	var page *airlock.Page
	var err error
	if s, ok := prov.(Scraper); ok {
		html, final, status, err := s.Scrape(ctx, d, req.URL)
		if err != nil {
			return nil, err
		}
		if final == "" {
			final = req.URL
		}
		if err := check(final); err != nil {
			return nil, err
		}
		if status != 0 && (status < 200 || status > 299) && !req.ErrorPages {
			return nil, &native.StatusError{URL: final, Status: status}
		}
		page, err = native.ExtractResponse(ctx, &airlock.HTTPResponse{Status: cmp.Or(status, 200), URL: final, Body: html,
			Header: map[string][]string{"Content-Type": {"text/html; charset=utf-8"}}}, airlock.ExtractFull)
		if err != nil {
			return nil, err
		}
	} else {
		page, err = prov.(airlock.Fetcher).Fetch(ctx, d, req)
		if err != nil {
			return nil, err
		}
		if err := check(page.URL); err != nil {
			return nil, err
		}
	}
	page.RequestedURL, page.Provider = req.URL, name
	page.ElapsedMS = time.Since(start).Milliseconds()
	return page, nil
}

// GuardCrawl checks the URLs a crawl through a remote provider named name
// starts from, and returns emit behind check: a page the policy refuses is
// dropped, the others are marked with the provider.
func GuardCrawl(name string, req airlock.CrawlRequest, check func(string) error, emit func(*airlock.Page) error) (func(*airlock.Page) error, error) {
	for _, u := range append([]string{req.Seed}, req.URLs...) {
		if u == "" {
			continue
		}
		if err := check(u); err != nil {
			return nil, err
		}
	}
	return func(pg *airlock.Page) error {
		if check(pg.URL) != nil {
			return nil // a page the policy refuses is dropped
		}
		pg.Provider = name
		return emit(pg)
	}, nil
}

// KeepParsable keeps the results of a remote search whose URLs parse.
func KeepParsable(res []airlock.SearchResult) []airlock.SearchResult {
	kept := res[:0]
	for _, r := range res {
		if _, perr := egress.ParseURL(r.URL); perr == nil {
			kept = append(kept, r)
		}
	}
	return kept
}

// Batch fetches urls conc at a time, each within timeout under ctx, and
// returns each URL's page or public error (pub), and the bytes received.
func Batch(ctx context.Context, urls []string, conc int, timeout time.Duration, fetch func(ctx context.Context, url string) (*airlock.Page, int64, error),
	pub func(error) *airlock.Error) ([]airlock.FetchResult, int64) {
	out := make([]airlock.FetchResult, len(urls))
	sem := make(chan struct{}, conc)
	var wg sync.WaitGroup
	var in atomic.Int64
	for i, u := range urls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				out[i] = airlock.FetchResult{URL: u, Error: pub(context.Cause(ctx))}
				return
			}
			defer func() { <-sem }()
			ctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			page, n, err := fetch(ctx, u)
			in.Add(n)
			if err != nil {
				out[i] = airlock.FetchResult{URL: u, Error: pub(err)}
				return
			}
			out[i] = airlock.FetchResult{URL: u, Page: page}
		}()
	}
	wg.Wait()
	return out, in.Load()
}
