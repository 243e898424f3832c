package sessions

import (
	"context"
	"sync"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/browser"
)

// Render renders url in a pooled session of p's tenant (the chromium
// provider's): the same proxy and layer-1 policy as the tenant's own
// sessions, with default action allow, so the egress policy decides. The
// pooled sessions are not listed among the tenant's, do not count against
// Config.MaxSessions, and wait in line for the sessions budget.
//
// Errors: those of Open and browser.Session.Render; timeout (render_pool)
// when ctx ends while every pooled session is busy.
func (m *Manager) Render(ctx context.Context, p airlock.Principal, url string) (browser.Rendered, error) {
	bs, release, err := m.pool.get(ctx, m, p)
	if err != nil {
		return browser.Rendered{}, err
	}
	defer release()
	bs.lastUsed.Store(time.Now().UnixNano())
	defer func() { bs.lastUsed.Store(time.Now().UnixNano()) }()
	if bs.s.Crashed() {
		if err := bs.s.Restart(ctx); err != nil {
			return browser.Rendered{}, err
		}
	}
	return bs.s.Render(ctx, url)
}

// openPooled opens a render session for the chromium provider.
func (m *Manager) openPooled(ctx context.Context, p airlock.Principal) (*Session, error) {
	return m.open(ctx, p, OpenRequest{Policy: &browser.Policy{DefaultAction: browser.ActionAllow}}, true)
}

// renderPool holds up to size ephemeral sessions per tenant.
type renderPool struct {
	size  int
	mu    sync.Mutex
	free  map[string][]*Session
	total map[string]int
	wake  map[string]chan struct{}
}

func (rp *renderPool) get(ctx context.Context, m *Manager, p airlock.Principal) (*Session, func(), error) {
	key := p.Tenant
	for {
		rp.mu.Lock()
		if rp.free == nil {
			rp.free, rp.total, rp.wake = map[string][]*Session{}, map[string]int{}, map[string]chan struct{}{}
		}
		if n := len(rp.free[key]); n > 0 {
			bs := rp.free[key][n-1]
			rp.free[key] = rp.free[key][:n-1]
			rp.mu.Unlock()
			return bs, func() { rp.put(key, bs) }, nil
		}
		if rp.total[key] < rp.size {
			rp.total[key]++
			rp.mu.Unlock()
			bs, err := m.openPooled(ctx, airlock.Principal{Tenant: p.Tenant})
			if err != nil {
				rp.mu.Lock()
				rp.total[key]--
				rp.signal(key)
				rp.mu.Unlock()
				return nil, nil, err
			}
			return bs, func() { rp.put(key, bs) }, nil
		}
		w := rp.wake[key]
		if w == nil {
			w = make(chan struct{})
			rp.wake[key] = w
		}
		rp.mu.Unlock()
		select {
		case <-w:
		case <-ctx.Done():
			return nil, nil, airlock.Errorf(airlock.CodeTimeout, airlock.ReasonRenderPool, "chromium provider: waiting for a browser: %v", ctx.Err())
		}
	}
}

// signal wakes the waiters of key; rp.mu is held.
func (rp *renderPool) signal(key string) {
	if w := rp.wake[key]; w != nil {
		close(w)
		delete(rp.wake, key)
	}
}

func (rp *renderPool) put(key string, bs *Session) {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	rp.free[key] = append(rp.free[key], bs)
	rp.signal(key)
}

// remove takes an idle session out of the pool for closing; false when
// it is rendering.
func (rp *renderPool) remove(bs *Session) bool {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	key := bs.principal.Tenant
	for i, f := range rp.free[key] {
		if f == bs {
			rp.free[key] = append(rp.free[key][:i], rp.free[key][i+1:]...)
			rp.total[key]--
			rp.signal(key)
			return true
		}
	}
	return false
}
