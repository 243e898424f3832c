package browser

import (
	"context"
	"strconv"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"

	"github.com/airlockhq/airlock"
)

// tab is one page target of the browser that ops can run on. Popups that a
// page opens are not tabs (ops cannot reach them) but are intercepted like
// every other target.
type tab struct {
	id     string
	target *chromedp.Target
	cancel context.CancelFunc // nil for the browser's first tab
	doc    bool               // a navigate was sent to it (see requireDocument)
	nav    *navTracker        // follows the main frame; started on first use (trackerOf)
}

// Tab is a tab as ops report it.
type Tab struct {
	ID      string `json:"id"`
	URL     string `json:"url"`
	Title   string `json:"title"`
	Current bool   `json:"current,omitempty"`
}

// MaxTabs caps the tabs of a session.
const MaxTabs = 16

// addTab registers t as a tab and makes it current. The caller holds s.mu.
func (s *Session) addTab(b *instance, t *chromedp.Target, cancel context.CancelFunc) *tab {
	s.tabSeq++
	tb := &tab{id: "tab-" + strconv.Itoa(s.tabSeq), target: t, cancel: cancel}
	b.tabs = append(b.tabs, tb)
	s.tabMu.Lock()
	if s.tabOf == nil {
		s.tabOf = map[string]string{}
	}
	s.tabOf[string(t.TargetID)] = tb.id
	s.tabMu.Unlock()
	s.switchTo(b, tb)
	return tb
}

// switchTo makes tb the tab ops run on; refs die.
func (s *Session) switchTo(b *instance, tb *tab) {
	b.cur = tb
	b.target = tb.target
	s.refs = newRefTable()
}

// tabOfFrame names the tab whose main frame is id ("" for frames of
// iframes, workers and popups).
func (s *Session) tabOfFrame(id cdp.FrameID) string {
	s.tabMu.RLock()
	defer s.tabMu.RUnlock()
	return s.tabOf[string(id)]
}

// NewTab opens a tab, makes it current (refs die) and, when rawURL is not
// "", navigates it there after the same checks as Navigate.
//
// Errors: invalid (too_many_tabs), those of Navigate, timeout, unavailable
// (browser_crashed).
func (s *Session) NewTab(ctx context.Context, rawURL string) ([]Tab, error) {
	if rawURL != "" {
		if err := s.checkURL(rawURL); err != nil {
			return nil, err
		}
	}
	b, err := s.begin()
	if err != nil {
		return nil, err
	}
	if len(b.tabs) >= MaxTabs {
		s.mu.Unlock()
		return nil, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonTooManyTabs, "browser: new_tab: a session has at most %d tabs", MaxTabs)
	}
	tctx, cancel := chromedp.NewContext(b.browserCtx)
	if err := runWithin(ctx, tctx); err != nil {
		cancel()
		s.mu.Unlock()
		return nil, cdpErr(ctx, b, "new_tab", err)
	}
	if err := openBlank(ctx, chromedp.FromContext(tctx).Target); err != nil {
		cancel()
		s.mu.Unlock()
		return nil, cdpErr(ctx, b, "new_tab", err)
	}
	s.addTab(b, chromedp.FromContext(tctx).Target, cancel)
	s.watchConsole(b.eventsCtx, b, b.target)
	s.mu.Unlock()
	if rawURL != "" {
		if err := s.Navigate(ctx, rawURL, true); err != nil {
			return nil, err
		}
	}
	return s.Tabs(ctx)
}

// runWithin runs tctx's first (target-creating) Run, bounded by ctx.
func runWithin(ctx, tctx context.Context) error {
	done := make(chan error, 1)
	go func() {
		done <- chromedp.Do(tctx, chromedp.Func(func(context.Context, *chromedp.Target) error { return nil }))
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// CloseTab closes the current tab and makes the most recently opened
// remaining tab current; refs die. The last tab cannot be closed.
//
// Errors: invalid (last_tab), timeout, unavailable (browser_crashed).
func (s *Session) CloseTab(ctx context.Context) ([]Tab, error) {
	b, err := s.begin()
	if err != nil {
		return nil, err
	}
	if len(b.tabs) <= 1 {
		s.mu.Unlock()
		return nil, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonLastTab, "browser: close_tab: the last tab cannot be closed (close the session instead)")
	}
	cur := b.cur
	if _, err := cdp.Call(ctx, b.browser, target.CloseTarget, target.CloseTargetParams{TargetID: cur.target.TargetID}); err != nil {
		s.mu.Unlock()
		return nil, cdpErr(ctx, b, "close_tab", err)
	}
	if cur.cancel != nil {
		cur.cancel()
	}
	if cur.nav != nil {
		cur.nav.stop()
	}
	for i, tb := range b.tabs {
		if tb == cur {
			b.tabs = append(b.tabs[:i], b.tabs[i+1:]...)
			break
		}
	}
	s.tabMu.Lock()
	delete(s.tabOf, string(cur.target.TargetID))
	s.tabMu.Unlock()
	s.switchTo(b, b.tabs[len(b.tabs)-1])
	s.mu.Unlock()
	return s.Tabs(ctx)
}

// Tabs lists the session's tabs with their URL and title.
func (s *Session) Tabs(ctx context.Context) ([]Tab, error) {
	b, err := s.begin()
	if err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	out := make([]Tab, 0, len(b.tabs))
	for _, tb := range b.tabs {
		tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		info, err := cdp.Call(tctx, b.browser, target.GetTargetInfo, target.GetTargetInfoParams{TargetID: tb.target.TargetID})
		cancel()
		t := Tab{ID: tb.id, Current: tb == b.cur}
		if err == nil && info.TargetInfo != nil {
			t.URL, t.Title = info.TargetInfo.URL, info.TargetInfo.Title
		}
		out = append(out, t)
	}
	return out, nil
}
