package engine

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/egress"
	"github.com/airlockhq/airlock/internal/browse"
	"github.com/airlockhq/airlock/internal/browser"
	"github.com/airlockhq/airlock/internal/doer"
	"github.com/airlockhq/airlock/internal/gate"
	"github.com/airlockhq/airlock/internal/htmlfilter"
	"github.com/airlockhq/airlock/internal/provider/native"
)

// Scrape fetches one page for a Firecrawl-style scrape (capability
// browse; with req.Browser, browser too): natively, with the caller's
// headers, or rendered in a browser session of its own (waits, phone
// emulation, actions, screenshots); then its tags are filtered
// (IncludeTags, ExcludeTags) before extraction, and the result holds the
// extracted page, the cleaned HTML and the raw document. One audited
// fetch call. The native path honours the initiator's identity and
// robots.txt as Fetch does, without the page providers (the document
// itself is needed: Provider may only name native); the browser path is
// the chromium provider's.
//
// Errors: those of Fetch; denied (capability) for Browser without the
// browser capability; invalid (limit) above a ceiling, (bad_selector),
// (browser_action) for a malformed action, (header_identity) for a header
// the identity sets; denied (header_floor) for a header the floor
// forbids; those of the failing action.
func (e *Engine) Scrape(ctx context.Context, p airlock.Principal, req airlock.ScrapeRequest) (*airlock.ScrapeResult, error) {
	call, err := e.begin(ctx, p, airlock.CapabilityBrowse, "fetch", req.URL)
	if err != nil {
		return nil, err
	}
	res, in, err := e.scrape(call, req)
	if err = call.End(err, in, 0); err != nil {
		return nil, err
	}
	res.Page.DecisionID = call.ID
	return res, nil
}

func (e *Engine) scrape(call *gate.Call, req airlock.ScrapeRequest) (*airlock.ScrapeResult, int64, error) {
	if req.Browser != nil && !call.Tenant.Profile.Has(airlock.CapabilityBrowser) {
		return nil, 0, airlock.Errorf(airlock.CodeDenied, airlock.ReasonCapability,
			"capability browser is not granted by profile %s: waitFor, mobile, actions and screenshots need the browser", call.Tenant.Profile.Name)
	}
	if err := checkScrape(call.Tenant.Limits, req); err != nil {
		return nil, 0, err
	}
	if req.Provider != "" && req.Provider != native.Name {
		return nil, 0, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonUnsupported,
			"provider %q: a scrape fetches natively, or renders in its own browser session with Browser", req.Provider)
	}
	if _, err := htmlfilter.Selectors("includeTags", req.IncludeTags); err != nil {
		return nil, 0, err
	}
	if _, err := htmlfilter.Selectors("excludeTags", req.ExcludeTags); err != nil {
		return nil, 0, err
	}
	var steps []browser.ScrapeStep
	if req.Browser != nil {
		var err error
		if steps, err = browser.ScrapeSteps(req.Browser.Actions); err != nil {
			return nil, 0, err
		}
	}
	ini, err := e.initiator(call, req.Initiator)
	if err != nil {
		return nil, 0, err
	}
	if req.Browser != nil {
		// The audit record says the page was rendered, and how.
		call.Note += fmt.Sprintf(" browser actions=%d", len(req.Browser.Actions))
		if req.Browser.Mobile {
			call.Note += " mobile"
		}
	}
	h := http.Header{}
	for k, v := range req.Headers {
		if strings.EqualFold(strings.TrimSpace(k), "User-Agent") {
			return nil, 0, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonHeaderIdentity,
				"header %s: the initiator's identity (%s) sets the User-Agent; a caller may not replace it", k, ini.Identity)
		}
		h[k] = []string{v}
	}
	// The floor's forbidden headers are refused before any request
	// (robots.txt included), whichever path sends them.
	if err := egress.CheckHeaders(h); err != nil {
		return nil, 0, err
	}
	n, err := browse.Narrowing(req.Narrow)
	if err != nil {
		return nil, 0, err
	}
	cache := req.Cache && len(req.Headers) == 0
	d := e.doers.New(call, n, req.Proxy, egress.ProfileChrome, cache)
	d.Timeout = req.Timeout
	req.Proxy = d.Proxy
	e.doers.Identify(ini, d, &req.FetchRequest)
	if err := e.doers.CheckRobots(call, ini, d, req.FetchRequest); err != nil {
		return nil, d.In(), err
	}
	var resp *airlock.HTTPResponse
	out := &airlock.ScrapeResult{}
	in := d.In()
	if req.Browser != nil {
		if err := doer.CheckURL(call, n, req.URL); err != nil {
			return nil, in, err
		}
		bctx := call.Ctx
		if _, ok := bctx.Deadline(); !ok {
			var cancel context.CancelFunc
			bctx, cancel = context.WithTimeout(bctx, scrapeBudget(req.Browser))
			defer cancel()
		}
		r, err := e.browser.Scrape(bctx, call.Principal, req.Narrow, req.URL, browser.ScrapeOptions{Mobile: req.Browser.Mobile,
			WaitFor: req.Browser.WaitFor, Steps: steps, Screenshot: req.Browser.Screenshot, FullPage: req.Browser.FullPage, Headers: req.Headers})
		if err != nil {
			return nil, in, err
		}
		in += int64(len(r.HTML))
		ct := "text/html; charset=utf-8"
		if r.MIMEType != "" && !strings.Contains(r.MIMEType, "html") {
			ct = r.MIMEType
		}
		resp = &airlock.HTTPResponse{Status: r.Status, URL: r.URL, Body: r.HTML, Header: map[string][]string{"Content-Type": {ct}}}
		out.Screenshot, out.ActionScreenshots = r.Screenshot, r.Shots
	} else {
		resp, err = d.Do(call.Ctx, &airlock.HTTPRequest{URL: req.URL, Header: h, TLSProfile: req.TLSProfile, Proxy: d.Proxy, Cache: cache, Narrow: req.Narrow})
		in = d.In()
		if err != nil {
			return nil, in, err
		}
	}
	if (resp.Status < 200 || resp.Status > 299) && !req.ErrorPages {
		return nil, in, &native.StatusError{URL: resp.URL, Status: resp.Status}
	}
	out.RawHTML = strings.ToValidUTF8(string(resp.Body), "\uFFFD")
	ct := http.Header(resp.Header).Get("Content-Type")
	doc := resp
	if strings.Contains(strings.ToLower(ct), "html") && (req.HTML || len(req.IncludeTags) > 0 || len(req.ExcludeTags) > 0) {
		f, err := htmlfilter.Apply(resp.Body, ct, htmlfilter.Options{Include: req.IncludeTags, Exclude: req.ExcludeTags, WholePage: req.WholePage})
		if err != nil {
			return nil, in, err
		}
		out.HTML = f.HTML
		doc = &airlock.HTTPResponse{Status: resp.Status, URL: resp.URL, Body: f.Document,
			Header: map[string][]string{"Content-Type": {"text/html; charset=utf-8"}}}
	}
	page, err := native.ExtractResponse(call.Ctx, doc, airlock.ExtractFull)
	if err != nil {
		return nil, in, err
	}
	page.RequestedURL, page.Provider = req.URL, native.Name
	if req.Browser != nil {
		page.Provider = ChromiumProvider
	}
	out.Page = page
	return out, in, nil
}

// checkScrape checks every number of req against the tenant's ceilings.
func checkScrape(l *gate.Limits, req airlock.ScrapeRequest) error {
	if err := l.Check(req, ""); err != nil {
		return err
	}
	if err := l.Check(req.FetchRequest, ""); err != nil {
		return err
	}
	size := 0
	for k, v := range req.Headers {
		size += len(k) + len(v)
	}
	if err := l.CheckValue(gate.LimitScrapeHeaderSize, "headers", int64(size)); err != nil {
		return err
	}
	if req.Browser == nil {
		return nil
	}
	if err := l.Check(req.Browser, ""); err != nil {
		return err
	}
	for i := range req.Browser.Actions {
		if err := l.Check(req.Browser.Actions[i], ""); err != nil {
			return err
		}
	}
	return nil
}

// scrapeBudget bounds a browser scrape whose caller set no timeout: the
// load, the wait, and each action's own wait and timeout.
func scrapeBudget(b *airlock.BrowserScrape) time.Duration {
	d := DefaultScrapeTimeout + b.WaitFor
	for _, a := range b.Actions {
		d += time.Duration(a.Milliseconds)*time.Millisecond + time.Duration(browser.DefaultActionTimeoutMS)*time.Millisecond + 5*time.Second
	}
	return min(d, browser.MaxInteractBudget)
}

// DefaultScrapeTimeout is a browser scrape's time for loading its page,
// before its wait and actions, when the caller sets no timeout.
const DefaultScrapeTimeout = 30 * time.Second
