package engine

import (
	"context"
	"encoding/json"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/browse"
	"github.com/airlockhq/airlock/internal/doer"
	"github.com/airlockhq/airlock/internal/gate"
	"github.com/airlockhq/airlock/internal/pagecache"
)

// LimitPageCacheBytes is the ceiling on one tenant's share of the page
// cache.
const LimitPageCacheBytes = gate.LimitPageCacheBytes

// RenderedPage is a page fetched and rendered by FetchRendered.
type RenderedPage struct {
	pagecache.Entry
	DecisionID string
	Cached     bool // served from the page cache: no upstream fetch
}

// RenderOptions say how FetchRendered renders a page.
type RenderOptions struct {
	// Raw asks for the response body as it came (as text), not extracted.
	Raw bool
	// Variant names what else Render's output depends on (a format): part
	// of the cache key.
	Variant string
	// Render renders the extracted page (not called when Raw).
	Render func(*airlock.Page) (string, error)
}

// FetchRendered is Fetch for a caller that reads a long page in parts: the
// rendered page is kept in the page cache for browse.page_cache_ttl, keyed
// by principal, request and options, so the next part costs no upstream
// fetch. Every call, hit or miss, is a fetch call of the gate (revocation,
// rate limit, capability, audit), and on a hit the policy decides the URL
// and the page's final URL again before the cached page is returned.
func (e *Engine) FetchRendered(ctx context.Context, p airlock.Principal, req airlock.FetchRequest, opts RenderOptions) (*RenderedPage, error) {
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
	rp, in, err := e.fetchRendered(call, ini, req, opts)
	if err = call.End(err, in, 0); err != nil {
		return nil, err
	}
	rp.DecisionID = call.ID
	return rp, nil
}

func (e *Engine) fetchRendered(call *gate.Call, ini gate.Initiator, req airlock.FetchRequest, opts RenderOptions) (*RenderedPage, int64, error) {
	n, err := browse.Narrowing(req.Narrow)
	if err != nil {
		return nil, 0, err
	}
	// Keyed by principal, bounded by tenant.
	tenant, key := call.Principal.Tenant, call.Key()+"\x00"+pageKey(req, opts)
	if ent, ok := e.pages.Get(tenant, key); ok {
		if err := doer.CheckURL(call, n, req.URL); err != nil {
			return nil, 0, err
		}
		if err := doer.CheckURL(call, n, ent.URL); err != nil {
			return nil, 0, err
		}
		return &RenderedPage{Entry: ent, Cached: true}, 0, nil
	}
	var ent pagecache.Entry
	var in int64
	if opts.Raw {
		if ent, in, err = e.doers.FetchRaw(call, ini, n, req); err != nil {
			return nil, in, err
		}
	} else {
		page, pin, err := e.fetchIn(call, ini, req)
		in = pin
		if err != nil {
			return nil, in, err
		}
		content, err := opts.Render(page)
		if err != nil {
			return nil, in, err
		}
		ent = pagecache.Entry{Title: page.Title, URL: page.URL, ContentType: page.ContentType, Content: content}
	}
	e.pages.Put(tenant, key, ent, call.Tenant.Limits.Ceiling(gate.LimitPageCacheBytes))
	return &RenderedPage{Entry: ent}, in, nil
}

// pageKey is the page cache key of a request: everything that can change
// the page or its rendering.
func pageKey(req airlock.FetchRequest, opts RenderOptions) string {
	b, _ := json.Marshal(struct {
		Req     airlock.FetchRequest
		Raw     bool
		Variant string
	}{req, opts.Raw, opts.Variant})
	return string(b)
}
