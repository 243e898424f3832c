package browser

import (
	"context"
	"net"
	"net/url"
	"strings"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/dom"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/cdproto/network"

	"github.com/airlockhq/airlock"
)

// The steps of a scrape (Firecrawl's actions, the ones Airlock drives).
const (
	StepWait       = "wait"       // MS, or Selector until it is visible
	StepClick      = "click"      // Selector
	StepWrite      = "write"      // Text, into the focused element
	StepPress      = "press"      // Key
	StepScroll     = "scroll"     // Up, Selector (default: the page)
	StepScreenshot = "screenshot" // FullPage
)

// ScrapeStep is one step of a scrape, checked by the caller (the engine
// maps airlock.PageAction here and bounds every number).
type ScrapeStep struct {
	Kind     string
	MS       int
	Selector string
	Text     string
	Key      string
	Up       bool
	FullPage bool
}

// ScrapeOptions say how Scrape renders a page.
type ScrapeOptions struct {
	// Mobile emulates a phone (MobileWidth × MobileHeight CSS pixels at
	// scale 3, a mobile User-Agent, touch) before the page loads.
	Mobile bool
	// WaitFor pauses after the page loaded and settled.
	WaitFor time.Duration
	// Steps run after WaitFor, in order; the first that fails fails the
	// scrape.
	Steps []ScrapeStep
	// Screenshot takes a PNG once the steps ran (FullPage: the whole
	// page, up to MaxScreenshotHeight).
	Screenshot bool
	FullPage   bool
	// Headers are sent with every request to the scraped URL's origin
	// (scheme, host and port), and to no other: not to a redirect's
	// target on another origin, nor to the subresources of other
	// origins. The caller checks them against the header floor first
	// (layer 2 refuses a request that carries a forbidden one).
	Headers map[string]string
}

// Scraped is a page Scrape rendered: the document as the steps left it.
type Scraped struct {
	Rendered
	Screenshot []byte   // ScrapeOptions.Screenshot's PNG
	Shots      [][]byte // the screenshot steps' PNGs, in order
}

// The phone Mobile emulates.
const (
	MobileWidth  = 390
	MobileHeight = 844
	mobileScale  = 3
)

// Scrape loads rawURL as Render does, then waits, runs the steps (which
// act as the interact steps of the same names do: a click waits for its
// element to be actionable and for what it caused), and reads the
// document and the final URL again. No step evaluates caller code: write
// inserts text through the input domain, scroll runs this package's fixed
// function. Refs from earlier snapshots die.
//
// Errors: those of Render; those of the failing step (with its index);
// timeout when ctx ends.
func (s *Session) Scrape(ctx context.Context, rawURL string, o ScrapeOptions) (Scraped, error) {
	if len(o.Headers) > 0 {
		oh, err := newOriginHeaders(rawURL, o.Headers)
		if err != nil {
			return Scraped{}, err
		}
		s.extra.Store(oh)
		defer s.extra.Store(nil)
	}
	if o.Mobile {
		if err := s.emulateMobile(ctx); err != nil {
			return Scraped{}, err
		}
	}
	r, err := s.Render(ctx, rawURL)
	if err != nil {
		return Scraped{}, err
	}
	out := Scraped{Rendered: r}
	// The tab holds a document now: the steps may act on it.
	if b, err := s.begin(); err == nil {
		if b.cur != nil {
			b.cur.doc = true
		}
		s.mu.Unlock()
	}
	if o.WaitFor > 0 {
		if err := sleepCtx(ctx, o.WaitFor, "waitFor"); err != nil {
			return Scraped{}, err
		}
	}
	kind := "scrape"
	s.curOp.Store(&kind)
	defer s.curOp.Store(nil)
	for i, st := range o.Steps {
		if err := s.scrapeStep(ctx, i, st, &out); err != nil {
			return Scraped{}, airlock.Errorf(airlock.CodeOf(err), airlock.ReasonOf(err), "actions[%d] (%s): %s", i, st.Kind,
				strings.TrimPrefix(airlock.Public(err, "").Message, "browser: "))
		}
	}
	if o.WaitFor > 0 || len(o.Steps) > 0 {
		b, err := s.begin()
		if err != nil {
			return Scraped{}, err
		}
		html, err := settledHTML(ctx, b)
		s.mu.Unlock()
		if err != nil {
			return Scraped{}, err
		}
		if len(html) > MaxRenderedBytes {
			return Scraped{}, airlock.Errorf(airlock.CodeTooLarge, airlock.ReasonRenderedSize,
				"browser: scrape %s: the rendered document is %d bytes (cap %d)", rawURL, len(html), MaxRenderedBytes)
		}
		out.HTML = []byte(html)
		if st, err := s.GetState(ctx); err == nil && st.URL != "" {
			out.URL = st.URL
		}
	}
	if o.Screenshot {
		shot, err := s.Screenshot(ctx, "png", o.FullPage)
		if err != nil {
			return Scraped{}, err
		}
		out.Screenshot = shot.Data
	}
	return out, nil
}

// originHeaders are headers for the requests to one origin.
type originHeaders struct {
	origin string // scheme://host:port, lower case
	h      map[string]string
}

func newOriginHeaders(rawURL string, h map[string]string) (*originHeaders, error) {
	o, ok := originOf(rawURL)
	if !ok {
		return nil, opErr("scrape: %q has no origin for its headers", rawURL)
	}
	return &originHeaders{origin: o, h: h}, nil
}

// originOf is scheme://host:port of an http(s) URL, the port explicit.
func originOf(raw string) (string, bool) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "", false
	}
	scheme := strings.ToLower(u.Scheme)
	port := u.Port()
	switch {
	case port != "":
	case scheme == "http":
		port = "80"
	case scheme == "https":
		port = "443"
	default:
		return "", false
	}
	return scheme + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port), true
}

// headersFor returns the request's headers with the extra ones when raw is
// on their origin; nil (the request's own headers) otherwise.
func (oh *originHeaders) headersFor(raw string, have network.Headers) []*fetch.HeaderEntry {
	if oh == nil {
		return nil
	}
	if o, ok := originOf(raw); !ok || o != oh.origin {
		return nil
	}
	var out []*fetch.HeaderEntry
	for k, v := range have {
		if _, replaced := oh.lookup(k); replaced {
			continue
		}
		if s, ok := v.(string); ok {
			out = append(out, &fetch.HeaderEntry{Name: k, Value: s})
		}
	}
	for k, v := range oh.h {
		out = append(out, &fetch.HeaderEntry{Name: k, Value: v})
	}
	return out
}

func (oh *originHeaders) lookup(name string) (string, bool) {
	for k, v := range oh.h {
		if strings.EqualFold(k, name) {
			return v, true
		}
	}
	return "", false
}

func sleepCtx(ctx context.Context, d time.Duration, what string) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return airlock.Errorf(airlock.CodeTimeout, airlock.ReasonBrowserTimeout, "browser: %s: the scrape's time ran out", what)
	}
}

func (s *Session) scrapeStep(ctx context.Context, i int, st ScrapeStep, out *Scraped) error {
	switch st.Kind {
	case StepWait:
		if st.Selector == "" {
			return sleepCtx(ctx, time.Duration(st.MS)*time.Millisecond, "wait")
		}
		return s.runAction(ctx, i, Action{Action: ActWaitForSelector, Selector: st.Selector}).Err
	case StepClick:
		return s.runAction(ctx, i, Action{Action: ActClick, Selector: st.Selector}).Err
	case StepPress:
		return s.runAction(ctx, i, Action{Action: ActPress, Key: st.Key}).Err
	case StepWrite:
		return s.writeText(ctx, st.Text)
	case StepScroll:
		return s.scroll(ctx, st.Selector, st.Up)
	case StepScreenshot:
		shot, err := s.Screenshot(ctx, "png", st.FullPage)
		if err != nil {
			return err
		}
		out.Shots = append(out.Shots, shot.Data)
		return nil
	}
	return actErr("unknown scrape step %q", st.Kind)
}

// writeText types text into the focused element, as a keyboard's input
// method would (input events fire).
func (s *Session) writeText(ctx context.Context, text string) (err error) {
	defer s.recoverOp("scrape.write", &err)
	b, err := s.begin()
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	if _, err := cdp.Call(ctx, b.target, input.InsertText, input.InsertTextParams{Text: text}); err != nil {
		return cdpErr(ctx, b, "write", err)
	}
	return nil
}

// scrollScript is the fixed function scroll runs on an element or the
// document: one viewport (or the element's height) down or up.
const scrollScript = `function (a) {
	const doc = this.nodeType === 9 ? this : this.ownerDocument;
	const page = doc.scrollingElement || doc.documentElement;
	let t = this.nodeType === 9 || this === doc.documentElement || this === doc.body ? page : this;
	const h = t === page ? doc.defaultView.innerHeight : t.clientHeight;
	t.scrollBy(0, a.up ? -h : h);
	return true;
}`

// scroll scrolls the page, or the element selector names, by one screen.
func (s *Session) scroll(ctx context.Context, selector string, up bool) (err error) {
	defer s.recoverOp("scrape.scroll", &err)
	b, err := s.begin()
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	var backend cdp.BackendNodeID
	what := selector
	if selector != "" {
		if backend, err = findFor(ctx, b, selector, "attached", time.Duration(DefaultActionTimeoutMS)*time.Millisecond); err != nil {
			return err
		}
	} else {
		doc, err := cdp.Call(ctx, b.target, dom.GetDocument, dom.GetDocumentParams{Depth: new(int64(0))})
		if err != nil {
			return cdpErr(ctx, b, "scroll", err)
		}
		if doc.Root == nil {
			return airlock.Errorf(airlock.CodeInternal, airlock.ReasonCDP, "browser: scroll: no document")
		}
		backend, what = doc.Root.BackendNodeID, "the page"
	}
	_, err = callOnNode(ctx, b, backend, what, "scroll", scrollScript, map[string]bool{"up": up})
	return err
}

// emulateMobile makes the tab a phone: viewport, scale, User-Agent (the
// browser's own, as its Android build would send it) and touch.
func (s *Session) emulateMobile(ctx context.Context) error {
	b, err := s.begin()
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	if _, err := cdp.Call(ctx, b.target, emulation.SetDeviceMetricsOverride, emulation.SetDeviceMetricsOverrideParams{
		Width: MobileWidth, Height: MobileHeight, DeviceScaleFactor: mobileScale, Mobile: true,
		ScreenWidth: MobileWidth, ScreenHeight: MobileHeight,
	}); err != nil {
		return cdpErr(ctx, b, "mobile", err)
	}
	if _, err := cdp.Call(ctx, b.target, emulation.SetTouchEmulationEnabled, emulation.SetTouchEmulationEnabledParams{Enabled: true, MaxTouchPoints: 5}); err != nil {
		return cdpErr(ctx, b, "mobile", err)
	}
	ua := "Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Mobile Safari/537.36"
	if v, err := cdp.Call(ctx, b.target, cdpbrowser.GetVersion, cdp.Empty{}); err == nil && strings.Contains(v.UserAgent, "AppleWebKit") {
		ua = mobileUA(v.UserAgent)
	}
	if _, err := cdp.Call(ctx, b.target, emulation.SetUserAgentOverride, emulation.SetUserAgentOverrideParams{UserAgent: ua, Platform: "Linux armv8l"}); err != nil {
		return cdpErr(ctx, b, "mobile", err)
	}
	return nil
}

// mobileUA turns a desktop Chrome User-Agent into its Android form.
func mobileUA(ua string) string {
	if i, j := strings.Index(ua, "("), strings.Index(ua, ")"); i >= 0 && j > i {
		ua = ua[:i] + "(Linux; Android 10; K)" + ua[j+1:]
	}
	ua = strings.Replace(ua, "HeadlessChrome/", "Chrome/", 1)
	if !strings.Contains(ua, "Mobile") {
		ua = strings.Replace(ua, " Safari/", " Mobile Safari/", 1)
	}
	return ua
}

func scrapeActionErr(i int, format string, args ...any) error {
	return airlock.Errorf(airlock.CodeInvalid, airlock.ReasonBrowserAction, "actions[%d]: "+format, append([]any{i}, args...)...)
}

// ScrapeSteps checks a scrape's actions and maps them to steps: each
// type takes only its own fields. Errors: invalid (unsupported_action)
// for a type Airlock does not drive, (browser_action) for a malformed
// action. The numbers are the caller's to bound (limits).
func ScrapeSteps(actions []airlock.PageAction) ([]ScrapeStep, error) {
	var out []ScrapeStep
	for i, a := range actions {
		st := ScrapeStep{Kind: a.Type, MS: a.Milliseconds, Selector: a.Selector, Text: a.Text, Key: a.Key, FullPage: a.FullPage}
		extra := func(ok ...bool) error {
			for _, o := range ok {
				if !o {
					return scrapeActionErr(i, "a field that is not part of a %s action is set", a.Type)
				}
			}
			return nil
		}
		none := func(fields ...bool) bool {
			for _, f := range fields {
				if f {
					return false
				}
			}
			return true
		}
		var err error
		switch a.Type {
		case airlock.PageWait:
			err = extra(none(a.Text != "", a.Key != "", a.Direction != "", a.FullPage))
			if err == nil && (a.Milliseconds > 0) == (a.Selector != "") {
				err = scrapeActionErr(i, "a wait action needs exactly one of milliseconds (above 0) and selector")
			}
		case airlock.PageClick:
			err = extra(none(a.Milliseconds != 0, a.Text != "", a.Key != "", a.Direction != "", a.FullPage))
			if err == nil && a.Selector == "" {
				err = scrapeActionErr(i, "a click action needs a selector")
			}
		case airlock.PageWrite:
			err = extra(none(a.Milliseconds != 0, a.Selector != "", a.Key != "", a.Direction != "", a.FullPage))
		case airlock.PagePress:
			err = extra(none(a.Milliseconds != 0, a.Selector != "", a.Text != "", a.Direction != "", a.FullPage))
			if err == nil {
				err = Action{Action: ActPress, Key: a.Key}.Validate()
				if err != nil {
					err = scrapeActionErr(i, "press: unknown key %q (a key name such as Enter, Tab, Escape, ArrowDown, or one character)", a.Key)
				}
			}
		case airlock.PageScroll:
			err = extra(none(a.Milliseconds != 0, a.Text != "", a.Key != "", a.FullPage))
			switch a.Direction {
			case "", "down":
			case "up":
				st.Up = true
			default:
				err = scrapeActionErr(i, "scroll direction %q: want up or down", a.Direction)
			}
		case airlock.PageScreenshot:
			err = extra(none(a.Milliseconds != 0, a.Selector != "", a.Text != "", a.Key != "", a.Direction != ""))
		default:
			err = airlock.Errorf(airlock.CodeInvalid, airlock.ReasonUnsupportedAction,
				"actions[%d]: action %q is not supported: Airlock drives wait, click, write, press, scroll and screenshot (its browser evaluates no caller JavaScript)", i, a.Type)
		}
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	return out, nil
}
