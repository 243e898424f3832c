// Package egress is Airlock's SSRF-safe network layer: the only package of
// Airlock that resolves names or opens sockets. It is usable alone by any Go
// program that must fetch URLs or exchange bytes on behalf of someone it
// does not trust.
//
// It owns:
//   - canonical targets: ParseURL and ParseHostPort refuse, with a reason,
//     anything two parsers could read differently (backslashes, control
//     characters, userinfo, zone IDs, percent-encoded or non-canonical
//     numeric hosts such as 0x7f.1 or 127.1);
//   - the floor: every address the IANA special-purpose registries mark as
//     not globally reachable, plus cloud metadata addresses in public space
//     (Classify, FloorSource);
//   - policy: Policy compiled once into an immutable *Checker (allow and
//     deny patterns, floor exceptions, lanes), with the order of checks
//     parse → scheme → metadata → deny → floor unless excepted → allow;
//   - resolution: resolve once per request, every answer checked, optional
//     trust-on-first-use pins (Dialer.Resolve, DNSResolver, PinStore);
//   - dialling: only pinned addresses, re-checked in the socket's control
//     hook (Dialer), with a connect-attempt limiter hook and one audited
//     Decision per attempt;
//   - HTTP: Client follows redirects by hand and decides every hop again,
//     drops credentials across origins, decodes bodies itself under caps,
//     and speaks h2 or HTTP/1.1 after ALPN with Go or browser TLS profiles;
//   - upstream proxies (HTTP CONNECT, SOCKS5) chosen per request among
//     those the operator configured;
//   - a forward proxy (Proxy) for callers that make their own connections,
//     such as a browser;
//   - one-shot TCP, TLS and UDP exchanges.
//
// The zero Policy denies everything; DefaultPolicy allows what is above the
// floor:
//
//	pol := egress.DefaultPolicy()
//	pol.Exceptions = []string{"10.1.2.3:8080"} // one intranet service
//	chk, err := pol.Compile()
//	if err != nil { ... }
//	c := &egress.Client{Dialer: &egress.Dialer{Policy: chk}}
//	resp, err := c.Get(ctx, "https://example.com/")
//	if egress.IsDenied(err) { ... } // errors are *egress.Error with Code and Reason
//
// Every error is an *Error whose Code follows Airlock's error vocabulary
// (denied, invalid, not_found, timeout, upstream, too_large, ...) and whose
// Reason names the cause (loopback, metadata, parse_ambiguous,
// redirect_limit, ...). A name whose answers the policy refuses is reason
// internal_address whatever their class (Class keeps it), so that a
// refusal shown to a workload cannot map internal DNS. Error() is the full
// text, for the operator; PublicMessage() is the text a workload may read:
// no resolved address, resolver answer or DNS server.
package egress
