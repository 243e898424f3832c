package browser

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/cdproto/target"

	"github.com/airlockhq/airlock"
)

// Bounds of the wait after an action (settle).
const (
	// settleQuiet is how long the DOM must go without a mutation to count
	// as settled; settleMax bounds that wait.
	settleQuiet = 100 * time.Millisecond
	settleMax   = time.Second
	// settleNavMax bounds the wait for a navigation an action caused: its
	// commit, then its load event. Past it the reply says loading.
	settleNavMax = 15 * time.Second
	// stateNavMax bounds how long get_state and read wait for a pending
	// navigation to commit.
	stateNavMax = 5 * time.Second
)

// DefaultReplySnapshotTimeout bounds the fresh snapshot of an action's
// reply (unless Options.ReplySnapshotTimeout says otherwise): a renderer
// that a page's script keeps busy costs the snapshot, not the action.
const DefaultReplySnapshotTimeout = 10 * time.Second

// PageInfo is where an action left the tab: the page it is really on.
type PageInfo struct {
	URL   string `json:"url"`
	Title string `json:"title"`
	// Navigated says a new document committed in the tab during the
	// action; Status is its HTTP status (0 when none was seen: an error
	// page, a page from cache, a navigation within the document).
	Navigated bool `json:"navigated,omitempty"`
	Status    int  `json:"status,omitempty"`
	// Loading says the navigation had not finished loading (or not yet
	// committed) when the wait's bound ran out.
	Loading bool `json:"loading,omitempty"`
	// Error is set when the document that committed is Chromium's error
	// page (the URL is the one that failed): the network error, such as
	// net::ERR_BLOCKED_BY_CLIENT when the policy refused it.
	Error string `json:"error,omitempty"`
	// NewTabs are the windows the page opened during the action (popups,
	// target=_blank); ops keep running on the current tab.
	NewTabs []NewTab `json:"new_tabs,omitempty"`
	// Downloads are the downloads the page started during the action (an
	// attachment link, <a download>). Pages never download (nothing is
	// saved); the download op with the URL saves the file.
	Downloads []PageDownload `json:"downloads,omitempty"`
	// Refused are the requests the browser's policy (layer 1) refused
	// during the action (at most MaxRefusedReported).
	Refused []Refusal `json:"refused,omitempty"`
	// SnapshotError says why the fresh snapshot is missing (the page's
	// renderer did not answer within its bound); the action itself
	// succeeded.
	SnapshotError string `json:"snapshot_error,omitempty"`
}

// PageDownload is a download a page started: refused, since only the
// download op saves files.
type PageDownload struct {
	URL  string `json:"url"`
	Name string `json:"name,omitempty"` // the file name Chromium suggested
}

// MaxRefusedReported caps PageInfo.Refused.
const MaxRefusedReported = 20

// Refusal is one request the policy refused during an action.
type Refusal struct {
	URL          string `json:"url"`
	Reason       string `json:"reason"`
	ResourceType string `json:"resource_type,omitempty"`
}

// NewTab is a window a page opened.
type NewTab struct {
	URL string `json:"url"`
}

// navTracker follows the main frame of one tab from its events: whether a
// navigation is in flight, the committed document, its load and HTTP
// status, and the windows it opens.
type navTracker struct {
	frame cdp.FrameID        // the main frame (its id is the target's)
	stop  context.CancelFunc // ends the tracker's subscriptions (the tab closed)

	mu        sync.Mutex
	changed   chan struct{}           // closed and replaced on every change
	pending   bool                    // a main-frame navigation is requested and not yet committed or stopped
	commits   int                     // main-frame documents committed so far
	loader    cdp.LoaderID            // the committed document
	loaded    bool                    // its load event fired
	errorPage string                  // the committed document's unreachable URL when it is an error page
	failed    map[cdp.LoaderID]string // documents' network errors
	status    map[cdp.LoaderID]int64
	popups    []target.ID
	popupURLs map[target.ID]string
	downloads []PageDownload // started by the main frame
	// inflight are the tab's requests not yet finished or failed, each
	// with its sequence number (reqSeq counts requests seen), so that an
	// action can wait for the requests it started.
	inflight map[network.RequestID]int
	reqSeq   int
}

// maxInflight bounds the requests a tracker follows; past it the table is
// dropped (an action then waits for none of them).
const maxInflight = 512

// navMark is the tracker's counters before an action.
type navMark struct {
	commits, popups, requests, downloads, reqSeq int
}

// busyLocked reports whether a request started after m is in flight. The
// caller holds tr.mu.
func (tr *navTracker) busyLocked(m navMark) bool {
	for _, seq := range tr.inflight {
		if seq > m.reqSeq {
			return true
		}
	}
	return false
}

// trackerOf returns the tracker of b's current tab, starting it on first
// use. The caller holds s.mu.
func (s *Session) trackerOf(b *instance) *navTracker {
	tb := b.cur
	if tb == nil {
		return nil
	}
	if tb.nav != nil {
		return tb.nav
	}
	if b.eventsCtx == nil {
		return nil
	}
	ctx, stop := context.WithCancel(b.eventsCtx)
	tr := &navTracker{frame: cdp.FrameID(tb.target.TargetID), stop: stop, changed: make(chan struct{}),
		status: map[cdp.LoaderID]int64{}, failed: map[cdp.LoaderID]string{}, popupURLs: map[target.ID]string{},
		inflight: map[network.RequestID]int{}}
	tb.nav = tr
	// cdp.Events subscribes now: nothing is missed between here and the
	// goroutines' first reads.
	t := tb.target
	requested := cdp.Events(ctx, t, page.FrameRequestedNavigation)
	started := cdp.Events(ctx, t, page.FrameStartedNavigating)
	navigated := cdp.Events(ctx, t, page.FrameNavigated)
	stopped := cdp.Events(ctx, t, page.FrameStoppedLoading)
	life := cdp.Events(ctx, t, page.LifecycleEvent)
	resp := cdp.Events(ctx, t, network.ResponseReceived)
	fail := cdp.Events(ctx, t, network.LoadingFailed)
	sent := cdp.Events(ctx, t, network.RequestWillBeSent)
	finished := cdp.Events(ctx, t, network.LoadingFinished)
	created := cdp.Events(ctx, b.browser, target.TargetCreated)
	changed := cdp.Events(ctx, b.browser, target.TargetInfoChanged)
	downloads := cdp.Events(ctx, b.browser, cdpbrowser.DownloadWillBegin)
	follow(b, downloads, func(ev cdpbrowser.EventDownloadWillBegin) {
		if ev.FrameID != tr.frame {
			return
		}
		tr.update(func() {
			if len(tr.downloads) < MaxTabs*4 {
				tr.downloads = append(tr.downloads, PageDownload{URL: cut(ev.URL, maxLoggedURL), Name: ev.SuggestedFilename})
			}
		})
	})
	follow(b, requested, func(ev page.EventFrameRequestedNavigation) {
		if ev.FrameID == tr.frame && ev.Disposition == page.ClientNavigationDispositionCurrentTab {
			tr.update(func() { tr.pending = true })
		}
	})
	follow(b, started, func(ev page.EventFrameStartedNavigating) {
		if ev.FrameID != tr.frame {
			return
		}
		switch ev.NavigationType {
		case page.FrameStartedNavigatingNavigationTypeSameDocument, page.FrameStartedNavigatingNavigationTypeHistorySameDocument:
			return
		}
		tr.update(func() { tr.pending = true })
	})
	follow(b, navigated, func(ev page.EventFrameNavigated) {
		if ev.Frame == nil || ev.Frame.ID != tr.frame {
			return
		}
		tr.update(func() {
			tr.pending, tr.loaded = false, false
			tr.commits++
			tr.loader = ev.Frame.LoaderID
			tr.errorPage = ev.Frame.UnreachableURL
		})
	})
	follow(b, sent, func(ev network.EventRequestWillBeSent) {
		tr.update(func() {
			if len(tr.inflight) >= maxInflight {
				clear(tr.inflight)
			}
			tr.reqSeq++
			tr.inflight[ev.RequestID] = tr.reqSeq
		})
	})
	follow(b, finished, func(ev network.EventLoadingFinished) {
		tr.update(func() { delete(tr.inflight, ev.RequestID) })
	})
	follow(b, fail, func(ev network.EventLoadingFailed) {
		tr.update(func() { delete(tr.inflight, ev.RequestID) })
		if ev.Type != network.ResourceTypeDocument {
			return
		}
		// A navigation's request id is its loader id.
		tr.update(func() {
			if len(tr.failed) > 64 {
				clear(tr.failed)
			}
			tr.failed[cdp.LoaderID(ev.RequestID)] = ev.ErrorText
		})
	})
	follow(b, stopped, func(ev page.EventFrameStoppedLoading) {
		if ev.FrameID == tr.frame {
			tr.update(func() { tr.pending = false })
		}
	})
	follow(b, life, func(ev page.EventLifecycleEvent) {
		if ev.FrameID == tr.frame && ev.Name == "load" {
			tr.update(func() {
				if ev.LoaderID == tr.loader {
					tr.loaded = true
				}
			})
		}
	})
	follow(b, resp, func(ev network.EventResponseReceived) {
		if ev.FrameID != tr.frame || ev.Type != network.ResourceTypeDocument || ev.Response == nil {
			return
		}
		tr.update(func() {
			if len(tr.status) > 64 {
				clear(tr.status)
			}
			tr.status[ev.LoaderID] = ev.Response.Status
		})
	})
	follow(b, created, func(ev target.EventTargetCreated) {
		ti := ev.TargetInfo
		if ti == nil || ti.OpenerID != tb.target.TargetID || ti.Type != "page" {
			return
		}
		tr.update(func() {
			if len(tr.popups) < MaxTabs*4 {
				tr.popups = append(tr.popups, ti.TargetID)
				tr.popupURLs[ti.TargetID] = ti.URL
			}
		})
	})
	follow(b, changed, func(ev target.EventTargetInfoChanged) {
		ti := ev.TargetInfo
		if ti == nil {
			return
		}
		tr.update(func() {
			if _, ok := tr.popupURLs[ti.TargetID]; ok {
				tr.popupURLs[ti.TargetID] = ti.URL
			}
		})
	})
	return tr
}

// follow hands each event of seq to fn on a goroutine of b's until b's
// events stop.
func follow[E any](b *instance, seq func(func(E, error) bool), fn func(E)) {
	b.events.Add(1)
	go func() {
		defer b.events.Done()
		for ev, err := range seq {
			if err != nil {
				return
			}
			fn(ev)
		}
	}()
}

// update changes the tracker under its lock and wakes the waiters.
func (tr *navTracker) update(fn func()) {
	tr.mu.Lock()
	fn()
	close(tr.changed)
	tr.changed = make(chan struct{})
	tr.mu.Unlock()
}

func (tr *navTracker) mark() navMark {
	if tr == nil {
		return navMark{}
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return navMark{commits: tr.commits, popups: len(tr.popups), downloads: len(tr.downloads), reqSeq: tr.reqSeq}
}

// waitUntil waits until cond holds (read under the lock), ctx ends or d
// passes; it reports whether cond held.
func (tr *navTracker) waitUntil(ctx context.Context, d time.Duration, cond func() bool) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		tr.mu.Lock()
		ok, ch := cond(), tr.changed
		tr.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-ch:
		case <-t.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// waitCommitted waits, up to d, until no main-frame navigation is in
// flight. It reports whether none is.
func (tr *navTracker) waitCommitted(ctx context.Context, d time.Duration) bool {
	if tr == nil {
		return true
	}
	return tr.waitUntil(ctx, d, func() bool { return !tr.pending })
}

// quietScript resolves once the document has gone settleQuiet without a
// mutation and shows no element marked aria-busy="true" (ARIA's "being
// updated", which apps set around asynchronous work), or after settleMax.
// It runs in an isolated world: the page's scripts cannot replace what it
// uses, and it observes the shared DOM.
const quietScript = `new Promise((resolve) => {
	let quiet = 0, cap = 0;
	const busy = () => {
		for (const el of document.querySelectorAll('[aria-busy="true"]')) {
			if (typeof el.checkVisibility !== "function" || el.checkVisibility()) return true;
		}
		return false;
	};
	const done = () => { mo.disconnect(); clearTimeout(quiet); clearTimeout(cap); resolve(true); };
	const calm = () => { if (busy()) quiet = setTimeout(calm, %QUIET%); else done(); };
	const mo = new MutationObserver(() => { clearTimeout(quiet); quiet = setTimeout(calm, %QUIET%); });
	mo.observe(document, {subtree: true, childList: true, attributes: true, characterData: true});
	quiet = setTimeout(calm, %QUIET%);
	cap = setTimeout(done, %MAX%);
})`

// waitQuiet waits for the DOM of the current document to settle. A
// navigation that replaces the document ends the wait early (the world
// dies with it); errors are not the action's.
func waitQuiet(ctx context.Context, b *instance) {
	ctx, cancel := context.WithTimeout(ctx, settleMax+time.Second)
	defer cancel()
	ft, err := cdp.Call(ctx, b.target, page.GetFrameTree, cdp.Empty{})
	if err != nil || ft.FrameTree == nil || ft.FrameTree.Frame == nil {
		return
	}
	world, err := cdp.Call(ctx, b.target, page.CreateIsolatedWorld, page.CreateIsolatedWorldParams{FrameID: ft.FrameTree.Frame.ID, WorldName: "airlock"})
	if err != nil {
		return
	}
	cdp.Call(ctx, b.target, runtime.Evaluate, runtime.EvaluateParams{
		Expression:   quietExpr,
		ContextID:    world.ExecutionContextID,
		AwaitPromise: new(true),
		Silent:       new(true),
	})
}

var quietExpr = strings.NewReplacer(
	"%QUIET%", strconv.Itoa(int(settleQuiet/time.Millisecond)),
	"%MAX%", strconv.Itoa(int(settleMax/time.Millisecond)),
).Replace(quietScript)

// settle waits for what an action caused — a navigation (committed, then
// loaded, bounded by settleNavMax), new windows, or the DOM settling —
// and reports where the tab is now. waitLoad false (a navigate that does
// not wait for its load) waits for nothing. The caller holds s.mu.
func (s *Session) settle(ctx context.Context, b *instance, tr *navTracker, m navMark, waitLoad bool) (PageInfo, error) {
	var info PageInfo
	if tr != nil && !waitLoad {
		// Not the load: only the commit, so that the state is the new
		// document's (bounded as get_state's wait).
		tr.waitCommitted(ctx, stateNavMax)
	}
	if tr != nil && waitLoad {
		nav := func() bool {
			tr.mu.Lock()
			defer tr.mu.Unlock()
			return tr.pending || tr.commits != m.commits
		}
		if !nav() {
			// Input events are answered before the renderer's events of
			// the navigation they start may have arrived; the quiet wait
			// is a round trip to the renderer after them.
			waitQuiet(ctx, b)
		}
		if !nav() && tr.waitUntil(ctx, 0, func() bool { return tr.busyLocked(m) }) {
			// Requests the action started are in flight (a form posted
			// by script, data fetched before a redirect): wait for them,
			// bounded as the settling is, then for what they caused.
			tr.waitUntil(ctx, settleMax, func() bool {
				return tr.pending || tr.commits != m.commits || !tr.busyLocked(m)
			})
			if !nav() {
				waitQuiet(ctx, b)
			}
		}
		if nav() {
			loaded := tr.waitUntil(ctx, settleNavMax, func() bool {
				return !tr.pending && (tr.commits == m.commits || tr.loaded)
			})
			info.Loading = !loaded
			if loaded {
				// An app renders after its load event (data it reads,
				// storage, a framework's first render): the reply shows
				// it once the DOM settles, as after a click.
				waitQuiet(ctx, b)
			}
		}
	}
	st, err := currentState(ctx, b, "settle")
	if err != nil {
		return PageInfo{}, err
	}
	info.URL, info.Title = st.URL, st.Title
	for _, e := range s.netlog.refusedSince(m.requests, MaxRefusedReported) {
		info.Refused = append(info.Refused, Refusal{URL: e.URL, Reason: e.Reason, ResourceType: e.ResourceType})
	}
	if tr != nil {
		tr.mu.Lock()
		info.Navigated = tr.commits != m.commits
		if info.Navigated {
			info.Status = int(tr.status[tr.loader])
		}
		if tr.pending {
			info.Loading = true
		}
		if tr.errorPage != "" {
			info.URL = tr.errorPage
			info.Error = tr.failed[tr.loader]
			if info.Error == "" {
				info.Error = "the page failed to load"
			}
		}
		for _, id := range tr.popups[min(m.popups, len(tr.popups)):] {
			info.NewTabs = append(info.NewTabs, NewTab{URL: tr.popupURLs[id]})
		}
		info.Downloads = append(info.Downloads, tr.downloads[min(m.downloads, len(tr.downloads)):]...)
		tr.mu.Unlock()
	}
	return info, nil
}

// pageState is get_state: the tab's URL and title at call time, after a
// pending navigation commits (bounded by stateNavMax).
func (s *Session) pageState(ctx context.Context) (State, error) {
	b, err := s.begin()
	if err != nil {
		return State{}, err
	}
	defer s.mu.Unlock()
	s.trackerOf(b).waitCommitted(ctx, stateNavMax)
	return currentState(ctx, b, "get_state")
}

// actionKinds are the ops that act on the page: they wait for what they
// caused and report it (Result.Page, and a fresh snapshot unless the op
// says snapshot: false).
var actionKinds = map[string]bool{
	KindNavigate: true, KindClick: true, KindFill: true, KindPress: true, KindSelect: true,
	KindBack: true, KindForward: true, KindHover: true, KindDblclick: true, KindCheck: true, KindUncheck: true,
}

// beforeAction starts following the current tab and marks its counters.
func (s *Session) beforeAction() (*navTracker, navMark) {
	b, err := s.begin()
	if err != nil {
		return nil, navMark{}
	}
	defer s.mu.Unlock()
	tr := s.trackerOf(b)
	m := tr.mark()
	m.requests = s.netlog.count()
	return tr, m
}

// afterAction settles the action and fills r.Page, and r.Snapshot unless
// the op opted out.
func (s *Session) afterAction(ctx context.Context, op Op, tr *navTracker, m navMark, r *Result) error {
	b, err := s.begin()
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	if b.cur == nil || b.cur.nav != tr {
		tr = nil // the tab changed under the action: report, do not wait
	}
	waitLoad := !(op.Kind == KindNavigate && op.WaitUntilLoaded != nil && !*op.WaitUntilLoaded)
	info, err := s.settle(ctx, b, tr, m, waitLoad)
	if err != nil {
		return err
	}
	r.Page = &info
	if op.Snapshot == nil || *op.Snapshot {
		d := s.opts.ReplySnapshotTimeout
		if d <= 0 {
			d = DefaultReplySnapshotTimeout
		}
		sctx, cancel := context.WithTimeout(ctx, d)
		snap, err := s.snapshotLocked(sctx, b, SnapshotOptions{})
		cancel()
		if err != nil {
			if b.lost() {
				return errCrashed(err)
			}
			info.SnapshotError = "no snapshot: " + airlock.PublicMessageOf(err)
			return nil
		}
		r.Snapshot = &snap
	}
	return nil
}
