// Package browser drives a real headless Chromium over the Chrome DevTools
// Protocol (chromedp, pipe transport, no debugging port) behind a narrow,
// typed surface: a Session navigates, takes accessibility snapshots that
// name elements by refs (@e1, @e2, ...), acts on those refs with synthetic
// input events, runs interact sequences that name elements by CSS
// selector (piercing open shadow roots, query.go), and reads pages through
// the Browse extractor (or their rendered text, when it keeps little of an
// app: visible.go). No method
// evaluates caller-supplied JavaScript.
//
//	s, err := browser.Open(ctx, browser.Options{
//		ProxyAddr: "127.0.0.1:8118", ProxyUser: "sess-1", ProxyPass: secret,
//		ProfileDir: dir, FilesDir: files, Decide: decide, // func(url string) error
//		Policy: browser.Policy{AllowedOrigins: []string{"https://example.org"}},
//	})
//	if err != nil { ... }
//	defer s.Close(ctx)
//	err = s.Navigate(ctx, "https://example.org/", true)
//	snap, err := s.Snapshot(ctx, browser.SnapshotOptions{})
//	err = s.Click(ctx, "@e3")
//
// Network. Every byte the browser sends goes to one forward proxy
// (egress.Proxy), authenticated with per-session Basic credentials
// answered through CDP Fetch.authRequired; Chromium resolves no name itself
// (--host-resolver-rules), bypasses the proxy for nothing, loopback
// included, and has QUIC, non-proxied WebRTC UDP and background networking
// off. The policy is enforced at two layers:
//
//   - Layer 1: Fetch interception enabled on the browser target itself, so
//     it pauses the requests of every target the browser has or will have:
//     pages, iframes in or out of process, popups, dedicated and shared
//     workers, service workers. Each request and each redirect hop (at most
//     MaxRedirects per chain) is checked: the scheme (only http and https
//     load), Options.Decide (the egress floor and the tenant's policy), then
//     the origin Policy (allowed_origins, denied_origins, default_action
//     deny / allow / ask). A refused request fails with BlockedByClient and
//     is reported as an EventPolicyDenied. Under ask it waits for Approve or
//     Deny (EventApprovalRequired), which never take the session's op lock;
//     silence denies after the ask timeout, and with Options.NoApprover set
//     and no Approver attached (Options.Approvers) ask denies at once.
//     Approvers (a terminal prompt, an MCP client's elicitation) are asked
//     on their own goroutines; the first answer resolves the approval.
//     Interception is installed before the first target runs; if it cannot
//     be, Open fails and the browser is stopped.
//   - Layer 2: the egress proxy, which also sees what CDP cannot pause
//     (WebSocket handshakes, Chromium's own background traffic), pins DNS,
//     and asks Session.Admit (the same origin Policy on host and port, then
//     denied_origins on the pinned addresses, so a denied address has no
//     other name) as its egress.ProxyClient.Admit.
//
// Ops. The locked union of 22 op kinds (OpCount) is Op, a tagged JSON union
// {"kind":"navigate","url":"…"} decoded strictly by ParseOp and run by
// Session.Do: `navigate`, `snapshot`, `read`, `click`, `fill`, `press`,
// `select`, `upload`, `download`, `screenshot`, `get_state`, `wait_for`,
// `network_log`, `console`, `new_tab`, `close_tab`, `back` and `forward`.
// Interact sequences (Action, tagged by "action") run through
// Session.Interact. The scripts this package runs in pages are its own
// fixed functions (select's selectScript, extract_text's textScript), in an
// isolated world, with arguments passed as JSON values.
//
// Snapshots come from Accessibility.getFullAXTree of the main frame and of
// each same-process iframe (a cross-site iframe, in its own process, shows
// as its iframe line), shadow DOM included. A ref maps to a backend node of
// one document (the main frame's loader id); a ref number is never reused,
// refs die when the main frame navigates, and a dead or unknown ref is a
// stale_ref error. Snapshots are cut at a character budget
// (DefaultSnapshotChars) with a marker naming the offset to page on.
//
// Processes. Chromium runs as PID 1 of a PID namespace of its own (with its
// own /proc; see child.InPIDNamespace), so that its zygotes, renderers and
// services die with it, and it dies with this process. Options.Runtime
// records its --user-data-dir while it runs, so that the next start can
// sweep what a killed process left (Runtime.Sweep).
//
// Files. Upload reads and download and interact screenshots write only
// under Options.FilesDir: "..", absolute paths outside it and symlinks
// that lead out are refused before any browser call. A download runs in a
// background tab of the same browser (cookies, both layers, ask) and
// streams the response body to disk from the Fetch response stage, so the
// current tab never moves.
package browser
