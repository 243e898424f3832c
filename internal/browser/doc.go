// Package browser drives a real headless Chromium over the Chrome DevTools
// Protocol (chromedp, pipe transport, no debugging port) behind a narrow,
// typed surface: a Session navigates, reports its URL and title, takes
// accessibility snapshots that name elements by refs (@e1, @e2, ...) and
// clicks and fills those refs with synthetic input events. No method
// evaluates caller-supplied JavaScript.
//
// Every byte the browser sends goes to one forward proxy (egress.Proxy),
// authenticated with per-session Basic credentials answered through CDP
// Fetch.authRequired; Chromium resolves no name itself
// (--host-resolver-rules) and bypasses the proxy for nothing, loopback
// included. On top of that (layer 1), every request of the page target is
// paused by CDP Fetch interception and put to Options.Decide; a refused
// request fails with BlockedByClient and is reported to Options.OnDenied.
//
//	s, err := browser.Open(ctx, browser.Options{
//		ProxyAddr: "127.0.0.1:8118", ProxyUser: "sess-1", ProxyPass: secret,
//		ProfileDir: dir, Decide: decide, // func(url string) error
//	})
//	if err != nil { ... }
//	defer s.Close(ctx)
//	err = s.Navigate(ctx, "https://example.org/", true)
//	snap, err := s.Snapshot(ctx)
//	err = s.Click(ctx, "@e3")
//
// Ops. The locked union of 18 op kinds (OpCount) is Op, a tagged JSON
// union {"kind":"navigate","url":"…"} decoded strictly by ParseOp and run
// by Session.Do. Implemented today: `navigate`, `snapshot`, `click`,
// `fill`, `press`, `select`, `screenshot`, `get_state`, `wait_for`,
// `console`, `back` and `forward`. The other six kinds of the union
// parse and validate, and Do answers them with unavailable
// (op_not_implemented). No op evaluates caller-supplied JavaScript; the one
// script this package runs is the fixed selectScript of select (CDP has no
// command that chooses an <option>), run in an isolated world with the
// option value as a JSON argument.
//
// Coverage of layer 1 today: the page target (its main frame, same-process
// iframes, fetch/XHR and subresources). Out-of-process iframes, workers,
// service workers and popups are separate CDP targets that this package
// does not attach to yet; their traffic is still forced through the proxy
// (layer 2).
package browser
