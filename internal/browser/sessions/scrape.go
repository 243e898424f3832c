package sessions

import (
	"context"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/browser"
)

// Scrape renders url for p in a session of its own (browser.Session.Scrape:
// emulation, waits and steps), opened for this scrape and closed, its
// profile wiped, when it ends: what the steps did (cookies a login set, a
// phone's emulation) never reaches another call. The session is the render
// pool's kind: the tenant's proxy, and a layer-1 policy that refuses
// browser.policy's denied_origins and leaves the rest to the egress
// policy (default action allow: a scrape has no person to ask); not
// listed among the tenant's sessions; waiting in line for the sessions
// budget.
//
// narrow, when not nil, narrows the tenant's policy for this session.
//
// Errors: those of Open and browser.Session.Scrape.
func (m *Manager) Scrape(ctx context.Context, p airlock.Principal, narrow *airlock.Narrowing, url string, o browser.ScrapeOptions) (browser.Scraped, error) {
	bs, err := m.open(ctx, airlock.Principal{Tenant: p.Tenant}, OpenRequest{Narrow: narrow,
		Policy: &browser.Policy{DeniedOrigins: m.cfg.Policy.DeniedOrigins, DefaultAction: browser.ActionAllow}}, true)
	if err != nil {
		return browser.Scraped{}, err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), browser.DefaultCloseTimeout)
		defer cancel()
		m.closeSession(cctx, bs, true)
	}()
	bs.lastUsed.Store(time.Now().UnixNano())
	return bs.s.Scrape(ctx, url, o)
}
