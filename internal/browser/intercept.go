package browser

import (
	"context"
	"net/url"
	"strings"
	"sync"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/network"
)

// intercept installs layer 1 on b's page target: Fetch.enable for every
// request at the request stage, with authRequired answered from the
// session's proxy credentials. Events are handled until b is killed.
func (s *Session) intercept(ctx context.Context, b *instance) error {
	evCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	b.stopEvents = stop
	t := b.target
	paused := cdp.Events(evCtx, t, fetch.RequestPaused)
	auth := cdp.Events(evCtx, t, fetch.AuthRequired)
	s.watchConsole(evCtx, b)

	// cdp.Events subscribes when it is called, so nothing is lost between
	// here and the goroutines' first reads.
	var tries sync.Map // fetch.RequestID → proxy challenges answered
	b.events.Add(2)
	go func() {
		defer b.events.Done()
		for ev, err := range paused {
			if err != nil {
				return
			}
			b.events.Add(1)
			go func() {
				defer b.events.Done()
				s.onPaused(evCtx, b, ev)
			}()
		}
	}()
	go func() {
		defer b.events.Done()
		for ev, err := range auth {
			if err != nil {
				return
			}
			b.events.Add(1)
			go func() {
				defer b.events.Done()
				s.onAuth(evCtx, b, ev, &tries)
			}()
		}
	}()

	_, err := cdp.Call(ctx, t, fetch.Enable, fetch.EnableParams{
		Patterns:           []*fetch.RequestPattern{{URLPattern: "*", RequestStage: fetch.RequestStageRequest}},
		HandleAuthRequests: new(true),
	})
	return err
}

// onPaused decides one paused request: continue it, or fail it with
// BlockedByClient and report the denial.
func (s *Session) onPaused(ctx context.Context, b *instance, ev fetch.EventRequestPaused) {
	if ev.Request == nil {
		return
	}
	raw := ev.Request.URL + ev.Request.URLFragment
	d, denied := s.decide(raw)
	if !denied {
		cdp.Call(ctx, b.target, fetch.ContinueRequest, fetch.ContinueRequestParams{RequestID: ev.RequestID})
		return
	}
	d.ResourceType = string(ev.ResourceType)
	cdp.Call(ctx, b.target, fetch.FailRequest, fetch.FailRequestParams{
		RequestID: ev.RequestID, ErrorReason: network.ErrorReasonBlockedByClient,
	})
	s.emit(Event{Type: EventPolicyDenied, URL: d.URL, Reason: d.Reason, ResourceType: d.ResourceType, Message: d.Message})
}

// decide applies the scheme rule and Decide to a request URL.
func (s *Session) decide(raw string) (Denial, bool) {
	u, err := url.Parse(raw)
	if err != nil || !allowedSchemes[strings.ToLower(u.Scheme)] {
		return Denial{URL: raw, Reason: "scheme", Message: "only http and https load"}, true
	}
	if s.opts.Decide == nil {
		return Denial{}, false
	}
	if err := s.opts.Decide(raw); err != nil {
		return Denial{URL: raw, Reason: reasonOf(err), Message: err.Error()}, true
	}
	return Denial{}, false
}

// onAuth answers the proxy's challenge with the session's credentials,
// once per request: a second challenge means they were refused, and the
// request is cancelled rather than retried forever. Challenges from
// servers are cancelled: sites' HTTP authentication is not supported.
func (s *Session) onAuth(ctx context.Context, b *instance, ev fetch.EventAuthRequired, tries *sync.Map) {
	resp := &fetch.AuthChallengeResponse{Response: fetch.AuthChallengeResponseResponseCancelAuth}
	if ev.AuthChallenge != nil && ev.AuthChallenge.Source == fetch.AuthChallengeSourceProxy {
		if _, again := tries.LoadOrStore(ev.RequestID, true); !again {
			resp = &fetch.AuthChallengeResponse{
				Response: fetch.AuthChallengeResponseResponseProvideCredentials,
				Username: s.opts.ProxyUser,
				Password: s.opts.ProxyPass,
			}
		}
	}
	cdp.Call(ctx, b.target, fetch.ContinueWithAuth, fetch.ContinueWithAuthParams{RequestID: ev.RequestID, AuthChallengeResponse: resp})
}
