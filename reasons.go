package airlock

import "slices"

// Reason is the fine-grained cause of an error, next to its Code: "loopback",
// "token", "capability", ... Every reason Airlock can emit is a constant of
// this file and an entry of its catalogue (Reasons), which documents it for
// docs/api.md and gives the CLI its hint. A test checks that no error of the
// vocabulary is given a reason from anywhere else (a string literal, another
// package's constant).
//
// egress, a standalone library that imports nothing of ours, keeps its own
// egress.Reason constants; the catalogue lists each of them under the same
// string, and a test holds the two together.
type Reason string

// ReasonNone is the reason of an error that has no finer cause than its
// code: an internal error, or an error that is not of the vocabulary.
const ReasonNone Reason = ""

// Reasons of the root package's own classification.
const (
	ReasonTimeout  Reason = "timeout"  // context.DeadlineExceeded or an I/O deadline
	ReasonCanceled Reason = "canceled" // context.Canceled: the caller stopped waiting
	ReasonUsage    Reason = "usage"    // a malformed command line
	// ReasonRevocationsStale (with CodeUnavailable): the shared revocation
	// set cannot be trusted (Redis cannot be read, or lost its data), so
	// every broker call is refused.
	ReasonRevocationsStale Reason = "revocations_stale"
	// ReasonInternalAddress: a name the caller gave resolves to an address
	// the policy refuses (loopback, private, link-local, metadata, a deny
	// list range, a mix of public and internal answers, ...). One reason
	// whatever the class, so that refusals cannot map internal DNS; the
	// audit record keeps the class and the address. A literal address the
	// caller gave keeps its class ("private", "loopback", ...).
	ReasonInternalAddress Reason = "internal_address"
	// ReasonLimit: a caller-supplied size, count, duration or concurrency
	// is above its operator ceiling (limits.<name>), or negative: code
	// invalid, never clamped. In a crawl's skipped list: not fetched, the
	// page limit was reached.
	ReasonLimit Reason = "limit"
	// ReasonUnknownCapability is the reason of the error ParseCapability
	// returns.
	ReasonUnknownCapability Reason = "unknown_capability"
	// ReasonCapability is the reason of a call refused (code denied)
	// because the principal's profile does not grant a capability it
	// needs: by the gate, or by the WebAssembly host for an import the
	// guest's profile does not grant.
	ReasonCapability Reason = "capability"
	ReasonConfig     Reason = "config"    // the configuration is malformed
	ReasonPrincipal  Reason = "principal" // a malformed or refused principal
	// ReasonUnknownFormat is the reason of the CodeInvalid error that the
	// renderers return for a format they do not know.
	ReasonUnknownFormat Reason = "unknown_format"
	ReasonShuttingDown  Reason = "shutting_down" // the process is stopping
	ReasonStore         Reason = "store"         // the state store failed
	ReasonOK            Reason = "ok"            // audit records of allowed calls
	// ReasonUnsupportedContent (with CodeUpstream): the response is of a
	// type the extractor cannot read (an image, an archive, an unlabelled
	// binary); the message names the type and the size.
	ReasonUnsupportedContent Reason = "unsupported_content"
	// ReasonAuditQuery (with CodeInvalid): an audit query names a value no
	// record can have (an outcome other than allow, deny or error).
	ReasonAuditQuery Reason = "audit_query"
	// ReasonInitiator: a request's initiator is unknown (invalid) or not
	// one the tenant may claim (denied; tenants.NAME.initiators).
	ReasonInitiator Reason = "initiator"
	// ReasonDownloadStatus (with CodeUpstream): a browser download was
	// answered with a status other than 2xx.
	ReasonDownloadStatus Reason = "download_status"
	// ReasonArguments (with CodeInvalid): an MCP tool's arguments do not
	// match its input schema.
	ReasonArguments Reason = "arguments"
	// ReasonRequestState (with CodeInvalid): an MCP client's answer to an
	// elicitation names a request the server no longer waits on.
	ReasonRequestState Reason = "request_state"
	// ReasonUnsupported (with CodeInvalid): a Firecrawl-compatible field
	// or value Airlock does not implement (an LLM format, tag filters,
	// caller headers...).
	ReasonUnsupported Reason = "unsupported"
	// ReasonUnsupportedAction (with CodeInvalid): a Firecrawl browser
	// action outside the ones Airlock drives (notably executeJavascript:
	// the browser evaluates no caller JavaScript).
	ReasonUnsupportedAction Reason = "unsupported_action"
	// ReasonHeaderIdentity (with CodeInvalid): a caller header that the
	// request's identity sets (the airlock identity's User-Agent): a
	// caller may not pose as another client.
	ReasonHeaderIdentity Reason = "header_identity"
)

// Reasons of the gate.
const (
	ReasonRevoked       Reason = "revoked"
	ReasonTenantRate    Reason = "tenant_rate"
	ReasonConnectRate   Reason = "connect_rate"
	ReasonUnknownTenant Reason = "unknown_tenant"
	// ReasonIgnoreRobots: a crawl asks to ignore robots.txt and its
	// tenant may not (tenants.NAME.allow_ignore_robots).
	ReasonIgnoreRobots Reason = "ignore_robots"
	// ReasonRouteCredentialInRedirect: a route's upstream redirected to a
	// URL that carries the route's credential.
	ReasonRouteCredentialInRedirect Reason = "route_credential_in_redirect"
	ReasonRedisFallback             Reason = "redis_fallback"
	// ReasonBudget: a refusal for want of a budget (budgets.*):
	// rate_limited when it had no room within the wait, too_large when one
	// request alone is larger than the whole budget.
	ReasonBudget Reason = "budget"
)

// Reasons of the HTTP API and the engine's administrative calls.
const (
	ReasonToken            Reason = "token"    // no bearer token, or an unknown one (401)
	ReasonAdmin            Reason = "admin"    // a route that needs the admin token
	ReasonApprover         Reason = "approver" // an approval answered with a tenant's token
	ReasonTenant           Reason = "tenant"   // another tenant's records or jobs
	ReasonBody             Reason = "body"     // a body that is not the JSON the route reads
	ReasonRequest          Reason = "request"  // a request whose fields do not fit together
	ReasonQuery            Reason = "query"    // a bad query parameter
	ReasonRoute            Reason = "route"    // no such route
	ReasonMethod           Reason = "method"   // the route exists for other methods
	ReasonNotReady         Reason = "not_ready"
	ReasonPanic            Reason = "panic"
	ReasonMaxPages         Reason = "max_pages"
	ReasonAdminToken       Reason = "admin_token"
	ReasonApproverToken    Reason = "approver_token"
	ReasonBadProfile       Reason = "bad_profile"
	ReasonNarrow           Reason = "narrow"
	ReasonNoSession        Reason = "no_session"
	ReasonNotLost          Reason = "not_lost"
	ReasonProfileInUse     Reason = "profile_in_use"
	ReasonRenderPool       Reason = "render_pool"
	ReasonRevocation       Reason = "revocation"
	ReasonRevocationCopy   Reason = "revocation_copy"
	ReasonRouteMethod      Reason = "route_method"
	ReasonRoutePath        Reason = "route_path"
	ReasonSecret           Reason = "secret"
	ReasonSessionElsewhere Reason = "session_elsewhere"
	ReasonRedisURL         Reason = "redis_url"
	ReasonRedis            Reason = "redis"
	ReasonEngine           Reason = "engine"
	ReasonProvider         Reason = "provider"
)

// Reasons of the forward proxy surface (airlock proxy, airlock exec).
const (
	// ReasonProxyCredentials: a proxy request without credentials where
	// they are needed, or with credentials that name no principal (407).
	ReasonProxyCredentials Reason = "proxy_credentials"
	// ReasonSNIMismatch: a tunnel's TLS ClientHello names another host
	// than the tunnel's target (domain fronting), or an ECH outer name
	// differs from it.
	ReasonSNIMismatch Reason = "sni_mismatch"
	// ReasonSNIMissing: a tunnel to a name whose ClientHello carries no
	// SNI (only an IP literal target may go without one).
	ReasonSNIMissing Reason = "sni_missing"
	// ReasonTunnelNotTLS: a tunnel whose first bytes are not a TLS
	// ClientHello, to a port not on proxy.plain_ports.
	ReasonTunnelNotTLS Reason = "tunnel_not_tls"
	// ReasonSOCKS: a SOCKS request the proxy does not serve (SOCKS4, a
	// command other than CONNECT, an unknown address type).
	ReasonSOCKS Reason = "socks"
	// ReasonTunnelBytes: a tunnel passed proxy.max_tunnel_bytes.
	ReasonTunnelBytes Reason = "tunnel_bytes"
	// ReasonTunnelTime: a tunnel passed proxy.max_tunnel_duration.
	ReasonTunnelTime Reason = "tunnel_time"
)

// Reasons of crawl jobs and crawl requests.
const (
	ReasonCrawlJob          Reason = "crawl_job"
	ReasonCrawlJobElsewhere Reason = "crawl_job_elsewhere"
	ReasonCrawlJobLost      Reason = "crawl_job_lost"
	ReasonCrawlJobPages     Reason = "crawl_job_pages"
	ReasonCrawlJobs         Reason = "crawl_jobs"
	ReasonCrawlRequest      Reason = "crawl_request"
	ReasonCrawlTarget       Reason = "crawl_target"
)

// Reasons a URL is listed in CrawlSummary.Skipped (with ReasonTimeout,
// ReasonLimit, ReasonBotWall, ReasonRateLimited, ReasonHTTPStatus).
const (
	ReasonRobots    Reason = "robots"    // robots.txt disallows it, or its robots.txt is unreachable
	ReasonPolicy    Reason = "policy"    // the fetch was refused (code denied); Detail has the policy reason
	ReasonOffHost   Reason = "off_host"  // a link outside the seed's host (or its subdomains)
	ReasonPath      Reason = "path"      // a link whose path include_paths or exclude_paths leave out
	ReasonDepth     Reason = "depth"     // a link deeper than the depth limit; an invalid depth argument
	ReasonType      Reason = "type"      // the page function refused its content type
	ReasonDuplicate Reason = "duplicate" // a listed URL that was already listed (after Normalize)
	ReasonTooLarge  Reason = "too_large" // the body passed a size cap
	ReasonInvalid   Reason = "invalid"   // a listed URL that is not an absolute http(s) URL
	ReasonError     Reason = "error"     // anything else; Detail says what (also airlock policy check)
	// ReasonTruncated marks the last entry of a skipped list cut at its
	// maximum: its Detail says how many more URLs were skipped.
	ReasonTruncated Reason = "truncated"
)

// Reasons of the command line.
const (
	ReasonDevModeLoopback Reason = "dev_mode_loopback"
	ReasonFile            Reason = "file"
	ReasonListen          Reason = "listen"
	ReasonScreenshot      Reason = "screenshot"
	ReasonServe           Reason = "serve"
)

// Reasons of extraction and search providers.
const (
	ReasonInputTooLarge  Reason = "input_too_large" // the body is larger than the extractor's input cap
	ReasonBotWall        Reason = "bot_wall"        // a captcha, challenge or access-denied page instead of content
	ReasonPDF            Reason = "pdf"             // the PDF could not be read
	ReasonCPUDeadline    Reason = "cpu_deadline"    // a sandboxed reader or guest ran out of time
	ReasonMemoryLimit    Reason = "memory_limit"    // a sandboxed reader or guest ran out of memory
	ReasonExtractMode    Reason = "extract_mode"
	ReasonHTML           Reason = "html"
	ReasonProviderAuth   Reason = "provider_auth"  // the provider refused the credential
	ReasonHTTPStatus     Reason = "http_status"    // an HTTP error status
	ReasonProviderError  Reason = "provider_error" // the provider answered with an error, or unreadably
	ReasonProviderConfig Reason = "provider_config"
	ReasonEmptyQuery     Reason = "empty_query"
)

// Reasons of the WebAssembly host and guests.
const (
	ReasonTrap            Reason = "trap"
	ReasonModule          Reason = "module"
	ReasonNoStart         Reason = "no_start"
	ReasonGuestInstances  Reason = "guest_instances"
	ReasonGuestMemory     Reason = "guest_memory"
	ReasonClientRate      Reason = "client_rate"
	ReasonClientInstances Reason = "client_instances"
	ReasonArgument        Reason = "argument"
	ReasonBatch           Reason = "batch"
	ReasonBounds          Reason = "bounds"
	ReasonCache           Reason = "cache"
	ReasonClosed          Reason = "closed"
	ReasonGuestExit       Reason = "guest_exit"
	ReasonJSON            Reason = "json"
	ReasonPort            Reason = "port"
	ReasonResponse        Reason = "response"
	ReasonResult          Reason = "result"
	ReasonUnknownImport   Reason = "unknown_import"
	ReasonABI             Reason = "abi"
)

// Reasons of the MCP server's tool arguments.
const (
	ReasonCrawlInput Reason = "crawl_input"
	ReasonFormat     Reason = "format"
	ReasonMaxLength  Reason = "max_length"
	ReasonStartIndex Reason = "start_index"
	ReasonURL        Reason = "url"
	ReasonMCPState   Reason = "mcp_state"
)

// Reasons of browser sessions.
const (
	ReasonApproval        Reason = "approval"
	ReasonBadRef          Reason = "bad_ref"
	ReasonBadSelector     Reason = "bad_selector"
	ReasonBadURL          Reason = "bad_url"
	ReasonBlocked         Reason = "blocked"
	ReasonBrowserAction   Reason = "browser_action"
	ReasonBrowserClose    Reason = "browser_close"
	ReasonBrowserCrashed  Reason = "browser_crashed"
	ReasonBrowserLaunch   Reason = "browser_launch"
	ReasonBrowserMissing  Reason = "browser_missing"
	ReasonBrowserOp       Reason = "browser_op"
	ReasonBrowserPanic    Reason = "browser_panic"
	ReasonBrowserPolicy   Reason = "browser_policy"
	ReasonBrowserProxy    Reason = "browser_proxy"
	ReasonBrowserSessions Reason = "browser_sessions"
	ReasonBrowserTimeout  Reason = "browser_timeout"
	ReasonBrowserWipe     Reason = "browser_wipe"
	ReasonCDP             Reason = "cdp"
	ReasonCheckFailed     Reason = "check_failed"
	ReasonChromium        Reason = "chromium"
	ReasonDisabled        Reason = "disabled"
	ReasonDownloadFailed  Reason = "download_failed"
	ReasonDownloadSize    Reason = "download_size"
	ReasonFilesDir        Reason = "files_dir"
	ReasonLastTab         Reason = "last_tab"
	ReasonMissingOption   Reason = "missing_option"
	ReasonNavigateFailed  Reason = "navigate_failed"
	ReasonNeedsURL        Reason = "needs_url"
	ReasonNoFile          Reason = "no_file"
	ReasonNoFilesDir      Reason = "no_files_dir"
	ReasonNoHistory       Reason = "no_history"
	ReasonNoMatch         Reason = "no_match"
	ReasonNoOption        Reason = "no_option"
	ReasonNotActionable   Reason = "not_actionable"
	ReasonNotCheckable    Reason = "not_checkable"
	ReasonNotFileInput    Reason = "not_file_input"
	ReasonNotFillable     Reason = "not_fillable"
	ReasonNotSelect       Reason = "not_select"
	ReasonNotVisible      Reason = "not_visible"
	ReasonPathEscape      Reason = "path_escape"
	ReasonProxyAuth       Reason = "proxy_auth"
	ReasonRenderedSize    Reason = "rendered_size"
	ReasonSessionClosed   Reason = "session_closed"
	ReasonSessionStarting Reason = "session_starting"
	ReasonStaleRef        Reason = "stale_ref"
	ReasonStaleSnapshot   Reason = "stale_snapshot"
	ReasonTooManyTabs     Reason = "too_many_tabs"
	ReasonWaitForHidden   Reason = "wait_for_hidden"
	ReasonWaitForTimeout  Reason = "wait_for_timeout"
	ReasonDeniedOrigin    Reason = "denied_origin"
	ReasonDefaultDeny     Reason = "default_deny"
	ReasonNotApproved     Reason = "not_approved"
	ReasonAskTimeout      Reason = "ask_timeout"
	ReasonNoApprover      Reason = "no_approver"
)

// Reasons of egress, string for string its egress.Reason constants.
const (
	ReasonParseAmbiguous  Reason = "parse_ambiguous"
	ReasonUserinfo        Reason = "userinfo"
	ReasonBadPort         Reason = "bad_port"
	ReasonEmptyHost       Reason = "empty_host"
	ReasonNumericHost     Reason = "numeric_host"
	ReasonBadHost         Reason = "bad_host"
	ReasonScheme          Reason = "scheme"
	ReasonMalformed       Reason = "malformed"
	ReasonLoopback        Reason = "loopback"
	ReasonPrivate         Reason = "private"
	ReasonLinkLocal       Reason = "link_local"
	ReasonMetadata        Reason = "metadata"
	ReasonCGNAT           Reason = "cgnat"
	ReasonMulticast       Reason = "multicast"
	ReasonBroadcast       Reason = "broadcast"
	ReasonUnspecified     Reason = "unspecified"
	ReasonDocumentation   Reason = "documentation"
	ReasonBenchmarking    Reason = "benchmarking"
	ReasonIPv4Embedded    Reason = "ipv4_embedded"
	ReasonReserved        Reason = "reserved"
	ReasonAllowed         Reason = "allowed"
	ReasonException       Reason = "exception"
	ReasonNoPolicy        Reason = "no_policy"
	ReasonLane            Reason = "lane"
	ReasonDenyList        Reason = "deny_list"
	ReasonNotAllowed      Reason = "not_allowed"
	ReasonDNSMixed        Reason = "dns_mixed"
	ReasonDNSRebinding    Reason = "dns_rebinding"
	ReasonDNSNotFound     Reason = "dns_not_found"
	ReasonDNSNoAddress    Reason = "dns_no_address"
	ReasonDNSTimeout      Reason = "dns_timeout"
	ReasonDNSError        Reason = "dns_error"
	ReasonRedirectLimit   Reason = "redirect_limit"
	ReasonRedirect        Reason = "redirect"
	ReasonBodyTooLarge    Reason = "body_too_large"
	ReasonDecodedTooLarge Reason = "decoded_too_large"
	ReasonHeaderTooLarge  Reason = "header_too_large"
	ReasonEncoding        Reason = "encoding"
	ReasonHeaderFloor     Reason = "header_floor"
	ReasonProxy           Reason = "proxy"
	ReasonConnect         Reason = "connect"
	ReasonTLS             Reason = "tls"
	ReasonIdle            Reason = "idle"
	ReasonReplySource     Reason = "reply_source"
	ReasonRateLimited     Reason = "rate_limited"
	ReasonProtocol        Reason = "protocol"
)

// Reasons of `airlock exec` (internal/proxy/sandbox).
const (
	// ReasonSandbox (with CodeUnavailable): the exec sandbox cannot be
	// built here: not Linux, user namespaces not permitted, or a mount of
	// the sandbox refused.
	ReasonSandbox Reason = "sandbox"
	// ReasonCommandExit (with CodeUpstream): the command run by `airlock
	// exec` exited non-zero; airlock exits with the command's own code.
	ReasonCommandExit Reason = "command_exit"
)

// ReasonInfo documents one reason of the catalogue.
type ReasonInfo struct {
	Reason Reason
	// Codes are the codes the reason comes with. None: it is not an
	// error's reason but a crawl's skipped entry, an audit outcome or a
	// policy verdict.
	Codes   []Code
	Meaning string // one line: what happened
	// Hint is what a person at the terminal can do next; the CLI prints
	// it under the error. "" when there is nothing useful to say.
	Hint string
}

// floorHint is the way out of a floor denial for a person testing against
// their own services. The CLI replaces ADDR with the refused address.
const floorHint = "the address is below the egress floor; to reach your own service there, lift the floor for it with --except ADDR (or tenants.NAME.exceptions in the config)"

// catalogue is every reason, in the order docs/api.md lists them.
var catalogue = []ReasonInfo{
	{ReasonNone, []Code{CodeInternal}, "No finer cause than the code: an internal error, or a failure outside the vocabulary.", ""},

	// Egress: the floor and the policy.
	{ReasonLoopback, []Code{CodeDenied}, "A loopback address (127.0.0.0/8, ::1).", floorHint},
	{ReasonPrivate, []Code{CodeDenied}, "A private address (RFC 1918, IPv6 ULA fc00::/7, site-local).", floorHint},
	{ReasonLinkLocal, []Code{CodeDenied}, "A link-local address (169.254/16, fe80::/10).", floorHint},
	{ReasonCGNAT, []Code{CodeDenied}, "A carrier-grade NAT address (100.64/10).", floorHint},
	{ReasonMetadata, []Code{CodeDenied}, "A cloud metadata address.", "cloud metadata addresses are never reachable, whatever the configuration"},
	{ReasonMulticast, []Code{CodeDenied}, "A multicast address.", "multicast addresses are below the egress floor and are never reachable"},
	{ReasonBroadcast, []Code{CodeDenied}, "The broadcast address.", "the broadcast address is below the egress floor and is never reachable"},
	{ReasonUnspecified, []Code{CodeDenied}, "The unspecified address (0.0.0.0, ::) or 0/8.", "the unspecified address is below the egress floor and is never reachable"},
	{ReasonDocumentation, []Code{CodeDenied}, "A documentation range (TEST-NETs, 2001:db8::/32).", "documentation ranges are below the egress floor; use a real address"},
	{ReasonBenchmarking, []Code{CodeDenied}, "A benchmarking range (198.18/15).", floorHint},
	{ReasonIPv4Embedded, []Code{CodeDenied}, "An IPv6 form that carries an IPv4 address (v4-mapped, NAT64, 6to4, Teredo).", "write the IPv4 address itself; IPv6 forms that carry one are refused as a class"},
	{ReasonReserved, []Code{CodeDenied}, "Another address that is not globally reachable (reserved, 240/4, discard).", "the address is not globally reachable and is below the egress floor"},
	{ReasonUnsupportedContent, []Code{CodeUpstream}, "The response is of a type the extractor cannot read (an image, an archive, a binary); the message names the type and size.", "fetch it as bytes with 'airlock http' (or the API's http verb) instead"},
	{ReasonAuditQuery, []Code{CodeInvalid}, "An audit query names a value no record can have (an outcome other than allow, deny or error).", ""},
	{ReasonDownloadStatus, []Code{CodeUpstream}, "A browser download was answered with a status other than 2xx.", ""},
	{ReasonArguments, []Code{CodeInvalid}, "An MCP tool's arguments do not match its input schema.", ""},
	{ReasonUnsupported, []Code{CodeInvalid}, "A Firecrawl-compatible field or value Airlock does not implement (docs/firecrawl.md lists them).", ""},
	{ReasonUnsupportedAction, []Code{CodeInvalid}, "A Firecrawl browser action Airlock does not drive (executeJavascript never: the browser evaluates no caller JavaScript).", ""},
	{ReasonHeaderIdentity, []Code{CodeInvalid}, "A caller header that the request's identity sets (the airlock identity's User-Agent).", "drop the header, or fetch as an initiator whose identity does not set it"},
	{ReasonRequestState, []Code{CodeInvalid}, "An answer names an elicitation the server no longer waits on.", ""},
	{ReasonInitiator, []Code{CodeInvalid, CodeDenied}, "The request's initiator is unknown, or one the tenant may not claim.", "a tenant claims person only when tenants.NAME.initiators lists it"},
	{ReasonInternalAddress, []Code{CodeDenied}, "A name resolves to an address the policy refuses (any class; the audit record keeps which).", "the name resolves to an address below the egress floor or on a deny list; the audit record (airlock audit query) has the class and the address"},
	{ReasonDNSMixed, []Code{CodeDenied}, "A name resolves to both public and internal addresses.", "the name has both public and internal answers and is refused as a whole; the audit record has the answers"},
	{ReasonDNSRebinding, []Code{CodeDenied}, "A name's answers changed to a refused address between the check and the connection.", "the name's answers changed between the check and the connection (DNS rebinding); egress.pin_dns pins them"},
	{ReasonNoPolicy, []Code{CodeDenied}, "No policy opens anything: the zero policy, or an unresolved target.", "no policy is configured for this call; give the tenant an allow-list (tenants.NAME.allow) or egress.allow"},
	{ReasonLane, []Code{CodeDenied, CodeInvalid}, "The lane (http, tcp, udp, ...) is not opened by the policy, or is not a lane.", "the policy does not open this lane; see the tenant's profile with 'airlock config check'"},
	{ReasonDenyList, []Code{CodeDenied}, "The target matches a deny pattern.", "the target matches a deny pattern (--deny, tenants.NAME.deny or egress.deny)"},
	{ReasonNotAllowed, []Code{CodeDenied}, "An allow-list is in force and the target is not on it.", "an allow-list is in force and the target is not on it: add it with --allow PATTERN (or tenants.NAME.allow)"},
	{ReasonAllowed, nil, "A policy verdict: allowed.", ""},
	{ReasonException, nil, "A policy verdict: allowed through an operator floor exception.", ""},
	{ReasonHeaderFloor, []Code{CodeDenied}, "A request header that the floor never lets through (hop-by-hop, proxy credentials, ...).", "drop the header: it is never forwarded, whatever the configuration"},
	{ReasonReplySource, []Code{CodeDenied}, "A datagram reply from another address than the one asked.", "the reply came from another address than the one asked; nothing to configure"},

	// Egress: parsing.
	{ReasonParseAmbiguous, []Code{CodeInvalid, CodeDenied}, "An ambiguous target: backslash, control character, zone, encoded host, parsers disagree.", "write the URL plainly: no backslashes, control characters, zone ids or percent-encoded host"},
	{ReasonUserinfo, []Code{CodeInvalid, CodeDenied}, "A URL with userinfo (user:password@).", "credentials in URLs are refused; use a route (routes.NAME) to add them"},
	{ReasonBadPort, []Code{CodeInvalid, CodeDenied}, "An invalid or zero port.", "give a port between 1 and 65535"},
	{ReasonEmptyHost, []Code{CodeInvalid, CodeDenied}, "No host.", "the URL has no host"},
	{ReasonNumericHost, []Code{CodeInvalid, CodeDenied}, "A non-canonical numeric host (127.1, 0x7f.1, 2130706433).", "write the address in its canonical dotted form"},
	{ReasonBadHost, []Code{CodeInvalid, CodeDenied}, "A host that is not a valid DNS name or IDN.", "the host is not a valid DNS name"},
	{ReasonScheme, []Code{CodeInvalid, CodeDenied}, "A scheme other than the lane's (http, https, ...).", "only http and https URLs are fetched"},
	{ReasonMalformed, []Code{CodeInvalid}, "A target or TLS setting that does not parse.", ""},

	// Egress: the exchange.
	{ReasonDNSNotFound, []Code{CodeNotFound}, "The name does not exist.", "the name does not resolve; --resolve HOST=IP answers it without DNS"},
	{ReasonDNSNoAddress, []Code{CodeNotFound}, "The name has no A or AAAA records.", "the name has no address; --resolve HOST=IP answers it without DNS"},
	{ReasonDNSTimeout, []Code{CodeTimeout}, "The resolver did not answer in time.", ""},
	{ReasonDNSError, []Code{CodeUpstream, CodeUnavailable}, "The resolver failed or is not configured.", ""},
	{ReasonRedirectLimit, []Code{CodeUpstream, CodeDenied}, "Too many redirects.", "the redirect limit is limits.max_redirects (egress.max_redirects)"},
	{ReasonRedirect, []Code{CodeUpstream, CodeDenied}, "A malformed or missing Location, or a refused redirect.", "the redirect was malformed or led somewhere the policy refuses; the audit record says which"},
	{ReasonBodyTooLarge, []Code{CodeTooLarge}, "The body passed egress.max_body_bytes.", ""},
	{ReasonDecodedTooLarge, []Code{CodeTooLarge}, "The decoded body passed egress.max_decoded_bytes.", ""},
	{ReasonHeaderTooLarge, []Code{CodeTooLarge}, "The response headers passed their cap.", ""},
	{ReasonEncoding, []Code{CodeUpstream}, "An unknown or repeated content coding, or corrupt compressed data.", ""},
	{ReasonProxy, []Code{CodeDenied, CodeUpstream, CodeUnavailable, CodeTimeout}, "An upstream proxy not configured by the operator, or its failure.", "only the proxies of egress.proxies are used"},
	{ReasonConnect, []Code{CodeUpstream, CodeTimeout, CodeUnavailable}, "The connection could not be made.", ""},
	{ReasonTLS, []Code{CodeUpstream, CodeInternal, CodeTimeout, CodeUnavailable}, "The TLS handshake failed.", ""},
	{ReasonIdle, []Code{CodeTimeout}, "The exchange was idle for too long.", ""},
	{ReasonProtocol, []Code{CodeUpstream, CodeInternal}, "The remote side broke the protocol.", ""},
	{ReasonRateLimited, []Code{CodeRateLimited, CodeUnavailable}, "A rate limit held: the provider's, the connect-attempt limit or a crawl's fetches.", "wait and retry; the connect-attempt limit is limits.connect_attempts per limits.connect_window"},
	{ReasonTimeout, []Code{CodeTimeout}, "A deadline passed.", ""},
	{ReasonCanceled, []Code{CodeTimeout, CodeUnavailable}, "The caller stopped waiting, or the component closed.", ""},

	// The gate.
	{ReasonCapability, []Code{CodeDenied}, "The tenant's profile does not grant a capability the call needs.", "the tenant's profile does not grant this capability; 'airlock config check' shows the tenant's profile"},
	{ReasonUnknownCapability, []Code{CodeInvalid}, "A capability name that does not exist.", ""},
	{ReasonRevoked, []Code{CodeRevoked}, "The principal or its grant is revoked.", "lift the revocation with: airlock admin unrevoke SUBJECT ('airlock admin revocations' lists them)"},
	{ReasonRevocationsStale, []Code{CodeUnavailable}, "The shared revocation set cannot be trusted (Redis unreadable or emptied): every call is refused.", ""},
	{ReasonTenantRate, []Code{CodeRateLimited, CodeUnavailable}, "The tenant's rate limit was reached, or the limiter is down.", "the tenant's rate limit (limits.tenant_rate) was reached; wait and retry"},
	{ReasonConnectRate, []Code{CodeRateLimited}, "The tenant's connect-attempt limit was reached.", "the connect-attempt limit (limits.connect_attempts per limits.connect_window) was reached; wait and retry"},
	{ReasonUnknownTenant, []Code{CodeDenied}, "No such tenant.", "configure the tenant under tenants in airlock.yaml, or use default_tenant"},
	{ReasonPrincipal, []Code{CodeInvalid, CodeDenied}, "A malformed principal (tenant/instance), or one the token may not act for.", "a principal is TENANT or TENANT/INSTANCE (letters, digits, '-', '_', '.', ':')"},
	{ReasonIgnoreRobots, []Code{CodeDenied}, "A crawl asked to ignore robots.txt and its tenant may not.", "set tenants.NAME.allow_ignore_robots to let the tenant ignore robots.txt"},
	{ReasonRouteCredentialInRedirect, []Code{CodeDenied}, "A route's upstream redirected to a URL carrying the route's credential.", "the upstream echoes the route's credential in a redirect; do not route to it"},
	{ReasonLimit, []Code{CodeInvalid, CodeInternal}, "A caller-supplied size, count or duration is above its ceiling (limits.NAME), or negative; in a crawl's skipped list, the page limit was reached.", ""},
	{ReasonBudget, []Code{CodeRateLimited, CodeTooLarge}, "A budget (connections, bytes in flight, crawls, browser sessions) had no room, or one request is larger than the whole budget.", "the budget is full; wait and retry, or raise it (budgets.NAME, budgets.tenant.NAME)"},
	{ReasonOK, nil, "An audit record of an allowed call.", ""},
	{ReasonRedisFallback, []Code{CodeUnavailable}, "An audit record: Redis is down and the process runs on its local state.", ""},

	// The HTTP API, tokens and the engine's administration.
	{ReasonToken, []Code{CodeDenied, CodeInvalid, CodeNotFound}, "No bearer token, or an unknown one (HTTP 401); for 'airlock token revoke', a malformed or unknown token id.", "create a token with: airlock token create --tenant NAME"},
	{ReasonAdmin, []Code{CodeDenied}, "The route needs the admin token.", "the route needs a token of admin_tokens (make one with: airlock token generate)"},
	{ReasonApprover, []Code{CodeDenied}, "An approval answered with a tenant's token: a workload may not answer its own asks.", "answer approvals with a token of browser.approver_tokens or admin_tokens"},
	{ReasonTenant, []Code{CodeDenied, CodeNotFound}, "Another tenant's records or jobs, or no such tenant.", "a tenant's token sees only its own records and jobs"},
	{ReasonAdminToken, []Code{CodeDenied}, "The admin token is missing or wrong.", "the route needs a token of admin_tokens (make one with: airlock token generate)"},
	{ReasonApproverToken, []Code{CodeDenied}, "The approver token is missing or wrong.", "answer approvals with a token of browser.approver_tokens or admin_tokens"},
	{ReasonBody, []Code{CodeInvalid, CodeTooLarge}, "A body that is not the JSON the route reads, or larger than serve.max_body_bytes.", ""},
	{ReasonRequest, []Code{CodeInvalid}, "A request whose fields do not fit together.", ""},
	{ReasonQuery, []Code{CodeInvalid}, "A bad query parameter or search query.", ""},
	{ReasonRoute, []Code{CodeNotFound}, "No such route, or one the tenant is not granted.", ""},
	{ReasonMethod, []Code{CodeInvalid}, "The route exists for other methods.", ""},
	{ReasonRouteMethod, []Code{CodeDenied}, "The route does not allow this HTTP method (routes.NAME.methods).", "the route's methods are routes.NAME.methods"},
	{ReasonRoutePath, []Code{CodeInvalid}, "A path outside the route's path_prefix, or not a path.", ""},
	{ReasonNotReady, []Code{CodeUnavailable}, "/readyz: a dependency is down.", ""},
	{ReasonPanic, []Code{CodeInternal}, "A handler or a crawl job panicked, or a crawled page's reader did (skipped); the process recovered.", ""},
	{ReasonSecret, []Code{CodeNotFound}, "A secret the configuration names cannot be read.", ""},
	{ReasonRevocation, []Code{CodeNotFound}, "No such revocation.", ""},
	{ReasonRevocationCopy, []Code{CodeNotFound}, "No revocation copy to restore from.", ""},
	{ReasonBadProfile, []Code{CodeInvalid}, "A profile that does not exist or does not compile.", ""},
	{ReasonNarrow, []Code{CodeInvalid}, "A narrowing that would widen the tenant's policy.", ""},
	{ReasonConfig, []Code{CodeInvalid}, "The configuration is malformed.", "'airlock config check' reports every problem of the configuration"},
	{ReasonRedisURL, []Code{CodeInvalid}, "A malformed state.redis_url.", ""},
	{ReasonRedis, []Code{CodeUnavailable}, "Redis cannot be reached.", ""},
	{ReasonStore, []Code{CodeUnavailable}, "The state store failed.", ""},
	{ReasonShuttingDown, []Code{CodeUnavailable}, "The process is shutting down.", ""},
	{ReasonEngine, []Code{CodeInvalid}, "An unknown search engine.", ""},
	{ReasonProvider, []Code{CodeInvalid, CodeUnavailable, CodeInternal}, "An unknown provider, or one that is not configured (internal: a registered provider declares other verbs than its registration).", ""},
	{ReasonUnknownFormat, []Code{CodeInvalid}, "An output format the renderers do not know.", ""},

	// Crawls and crawl jobs.
	{ReasonCrawlRequest, []Code{CodeInvalid}, "A crawl request whose fields do not fit together.", ""},
	{ReasonCrawlTarget, []Code{CodeInvalid}, "A crawl target that is not an absolute http(s) URL.", ""},
	{ReasonCrawlJob, []Code{CodeInvalid, CodeNotFound}, "No such crawl job, or a bad job id.", ""},
	{ReasonCrawlJobElsewhere, []Code{CodeUnavailable}, "The crawl job runs on another instance of the fleet.", ""},
	{ReasonCrawlJobLost, []Code{CodeUnavailable}, "The crawl job's process died; the job was interrupted.", ""},
	{ReasonCrawlJobPages, []Code{CodeTooLarge}, "A crawl job's stored pages passed their cap.", ""},
	{ReasonCrawlJobs, []Code{CodeRateLimited}, "The tenant runs as many crawl jobs as its budget allows.", "wait for a crawl job to end, or raise budgets.crawls (budgets.tenant.crawls)"},
	{ReasonMaxPages, []Code{CodeTooLarge}, "max_pages is above the ceiling (limits.crawl_max_pages, limits.mcp_crawl_pages).", ""},
	{ReasonRobots, []Code{CodeDenied}, "robots.txt disallows it, or its robots.txt is unreachable (a model-initiated fetch; in a crawl's skipped list, the page was not fetched).", "a model-initiated fetch honours robots.txt: open the page yourself, or have a person fetch it (airlock fetch)"},
	{ReasonPolicy, nil, "Skipped: the fetch was refused; the detail has the policy reason.", ""},
	{ReasonOffHost, nil, "Skipped: a link outside the seed's host (or its subdomains).", ""},
	{ReasonPath, nil, "Skipped: a link whose path include_paths or exclude_paths leave out.", ""},
	{ReasonDepth, []Code{CodeInvalid}, "Skipped: a link deeper than the depth limit; as an error, a bad depth argument.", ""},
	{ReasonType, nil, "Skipped: the content type is not one the crawl extracts.", ""},
	{ReasonDuplicate, nil, "Skipped: a URL already listed (after normalisation).", ""},
	{ReasonTooLarge, nil, "Skipped: the body passed a size cap.", ""},
	{ReasonInvalid, nil, "Skipped: a listed URL that is not an absolute http(s) URL.", ""},
	{ReasonError, nil, "Skipped, or a policy check that could not decide: any other failure; the detail says what.", ""},
	{ReasonTruncated, nil, "The last entry of a skipped list cut at its maximum; the detail says how many more.", ""},

	// Extraction and search providers.
	{ReasonInputTooLarge, []Code{CodeTooLarge}, "The body is larger than the extractor's input cap.", ""},
	{ReasonBotWall, []Code{CodeUpstream}, "A captcha, challenge or access-denied page instead of content.", "the site answered with a bot wall (captcha, challenge); try later or another provider with --provider"},
	{ReasonPDF, []Code{CodeUpstream, CodeUnavailable}, "The PDF could not be read.", ""},
	{ReasonHTML, []Code{CodeUpstream}, "The HTML could not be read.", ""},
	{ReasonExtractMode, []Code{CodeInvalid}, "An unknown extraction mode.", ""},
	{ReasonCPUDeadline, []Code{CodeTimeout}, "A sandboxed reader or guest passed its deadline and was stopped.", ""},
	{ReasonMemoryLimit, []Code{CodeTooLarge}, "A sandboxed reader or guest asked for more memory than it may have.", ""},
	{ReasonProviderAuth, []Code{CodeUnavailable}, "The provider refused the configured credential.", ""},
	{ReasonHTTPStatus, []Code{CodeUpstream}, "An HTTP error status.", ""},
	{ReasonProviderError, []Code{CodeUpstream}, "The provider answered with an error, or unreadably.", ""},
	{ReasonProviderConfig, []Code{CodeInvalid}, "The provider's configuration is malformed (its URL, its credential).", ""},
	{ReasonEmptyQuery, []Code{CodeInvalid}, "An empty search query.", ""},

	// The WebAssembly host and guests.
	{ReasonModule, []Code{CodeInvalid, CodeTooLarge}, "The bytes are not a valid module, it does not instantiate, or it is too large.", ""},
	{ReasonNoStart, []Code{CodeInvalid}, "The module exports no _start: not a command module.", ""},
	{ReasonUnknownImport, []Code{CodeInvalid}, "The module imports a function the host does not provide.", ""},
	{ReasonTrap, []Code{CodeUpstream}, "The guest trapped (unreachable, out-of-bounds access, ...).", ""},
	{ReasonGuestExit, []Code{CodeUpstream}, "The guest exited with a non-zero status.", ""},
	{ReasonGuestInstances, []Code{CodeRateLimited}, "The host, or the principal, runs as many guest instances as its budget allows.", "wait for a guest to end, or raise guests.instances (guests.instances_per_principal)"},
	{ReasonGuestMemory, []Code{CodeInvalid, CodeRateLimited}, "The memory caps of the running guests fill the host's budget, or a profile's memory is too large.", "wait for a guest to end, or raise guests.memory_mib"},
	{ReasonClientRate, []Code{CodeRateLimited}, "A served guest's client sent too many requests.", "wait and retry"},
	{ReasonClientInstances, []Code{CodeRateLimited}, "A served guest's client has too many requests at once.", "wait for a request to end (guests.client_instances)"},
	{ReasonArgument, []Code{CodeInvalid, CodeTooLarge}, "A guest passed a malformed or oversized argument to an import.", ""},
	{ReasonBounds, []Code{CodeInvalid}, "A guest passed a pointer outside its memory.", ""},
	{ReasonBatch, []Code{CodeTooLarge}, "A batch larger than its cap.", ""},
	{ReasonJSON, []Code{CodeInvalid}, "A guest passed JSON that does not decode.", ""},
	{ReasonPort, []Code{CodeInvalid}, "A port out of range.", ""},
	{ReasonResponse, []Code{CodeTooLarge, CodeUpstream}, "A served guest's response is malformed or too large.", ""},
	{ReasonResult, []Code{CodeTooLarge}, "A result larger than the guest's buffer.", ""},
	{ReasonCache, []Code{CodeUnavailable}, "The compiled-module cache failed.", ""},
	{ReasonClosed, []Code{CodeUnavailable}, "The host is closed.", ""},
	{ReasonABI, []Code{CodeInternal}, "The host and the guest library disagree on the ABI.", ""},

	// MCP tool arguments.
	{ReasonURL, []Code{CodeInvalid}, "A missing or malformed url argument.", ""},
	{ReasonFormat, []Code{CodeInvalid}, "An unknown format argument.", ""},
	{ReasonMaxLength, []Code{CodeInvalid}, "A bad max_length argument.", ""},
	{ReasonStartIndex, []Code{CodeInvalid}, "A bad start_index argument.", ""},
	{ReasonCrawlInput, []Code{CodeInvalid}, "Crawl arguments that do not fit together.", ""},
	{ReasonMCPState, []Code{CodeInternal}, "The MCP server's state is inconsistent.", ""},

	// The command line.
	{ReasonUsage, []Code{CodeInvalid}, "A malformed command line.", ""},
	{ReasonFile, []Code{CodeInvalid, CodeNotFound, CodeTooLarge}, "A file argument cannot be read, or is too large.", ""},
	{ReasonDevModeLoopback, []Code{CodeInvalid}, "Development mode listens on loopback only.", ""},
	{ReasonListen, []Code{CodeUnavailable}, "The listen address cannot be bound.", ""},
	{ReasonServe, []Code{CodeUnavailable}, "The server stopped with an error.", ""},
	{ReasonScreenshot, []Code{CodeInternal}, "A screenshot could not be written.", ""},

	// Browser sessions.
	{ReasonDisabled, []Code{CodeInvalid}, "Browser sessions are not enabled (browser.exec_path).", "set browser.exec_path to a Chromium binary to enable browser sessions"},
	{ReasonBrowserMissing, []Code{CodeUnavailable}, "The Chromium binary is missing.", "install Chromium, or set browser.exec_path"},
	{ReasonBrowserLaunch, []Code{CodeTimeout, CodeUnavailable}, "Chromium could not be started.", ""},
	{ReasonBrowserCrashed, []Code{CodeUnavailable}, "Chromium crashed.", ""},
	{ReasonBrowserClose, []Code{CodeInternal}, "The session could not be closed cleanly.", ""},
	{ReasonBrowserPanic, []Code{CodeInternal}, "A session operation panicked; the session was closed.", ""},
	{ReasonBrowserWipe, []Code{CodeInternal}, "The session's profile could not be wiped.", ""},
	{ReasonBrowserProxy, []Code{CodeUnavailable}, "The session's egress proxy could not be started.", ""},
	{ReasonBrowserSessions, []Code{CodeRateLimited}, "The tenant runs as many browser sessions as its budget allows.", "close a session, or raise budgets.browser_sessions (budgets.tenant.browser_sessions)"},
	{ReasonBrowserPolicy, []Code{CodeInvalid}, "A malformed browser policy.", ""},
	{ReasonBrowserOp, []Code{CodeInvalid}, "An unknown session operation.", ""},
	{ReasonBrowserAction, []Code{CodeInvalid}, "A malformed action.", ""},
	{ReasonBrowserTimeout, []Code{CodeTimeout}, "The operation passed browser.op_timeout.", ""},
	{ReasonChromium, []Code{CodeInternal}, "The Chromium provider failed.", ""},
	{ReasonCDP, []Code{CodeInternal}, "A DevTools protocol call failed.", ""},
	{ReasonNoSession, []Code{CodeNotFound}, "No such browser session.", ""},
	{ReasonSessionClosed, []Code{CodeInvalid, CodeUnavailable}, "The session is closed.", ""},
	{ReasonSessionStarting, []Code{CodeDenied}, "The session is not open yet.", "wait for the session to open"},
	{ReasonSessionElsewhere, []Code{CodeUnavailable}, "The session lives on another instance of the fleet.", ""},
	{ReasonProfileInUse, []Code{CodeUnavailable}, "The browser profile is used by another session.", ""},
	{ReasonNotLost, []Code{CodeInvalid}, "The session is not lost: nothing to recover.", ""},
	{ReasonRenderPool, []Code{CodeTimeout}, "No render slot came free in time.", ""},
	{ReasonProxyAuth, []Code{CodeUnavailable}, "The session's proxy refused Chromium's credential.", ""},
	{ReasonBadURL, []Code{CodeInvalid}, "A URL that does not parse.", ""},
	{ReasonNeedsURL, []Code{CodeInvalid}, "The operation needs a url.", ""},
	{ReasonBadRef, []Code{CodeInvalid}, "A malformed element reference.", ""},
	{ReasonStaleRef, []Code{CodeInvalid}, "An element reference of an earlier snapshot.", ""},
	{ReasonStaleSnapshot, []Code{CodeInvalid}, "The page changed since the snapshot.", ""},
	{ReasonBadSelector, []Code{CodeInvalid}, "A malformed selector.", ""},
	{ReasonNoMatch, []Code{CodeNotFound}, "No element matches.", ""},
	{ReasonNotVisible, []Code{CodeInvalid}, "The element is not visible.", ""},
	{ReasonNotActionable, []Code{CodeInvalid}, "The element cannot be acted on.", ""},
	{ReasonNotCheckable, []Code{CodeInvalid}, "The element is not a checkbox or radio button.", ""},
	{ReasonCheckFailed, []Code{CodeInvalid}, "The element did not take the checked state.", ""},
	{ReasonNotFillable, []Code{CodeInvalid}, "The element is not a text field.", ""},
	{ReasonNotSelect, []Code{CodeInvalid}, "The element is not a select.", ""},
	{ReasonNoOption, []Code{CodeInvalid}, "The select has no such option.", ""},
	{ReasonMissingOption, []Code{CodeInvalid}, "An option the operation needs is missing.", ""},
	{ReasonNotFileInput, []Code{CodeInvalid}, "The element is not a file input.", ""},
	{ReasonNoFile, []Code{CodeInvalid}, "No such file in the session's files directory.", ""},
	{ReasonNoFilesDir, []Code{CodeInvalid}, "The session has no files directory.", ""},
	{ReasonFilesDir, []Code{CodeInternal}, "The session's files directory failed.", ""},
	{ReasonPathEscape, []Code{CodeDenied}, "A file path that leaves the session's files directory.", "name a file inside the session's files directory"},
	{ReasonLastTab, []Code{CodeInvalid}, "The last tab cannot be closed.", ""},
	{ReasonTooManyTabs, []Code{CodeInvalid}, "The session has as many tabs as it may.", ""},
	{ReasonNoHistory, []Code{CodeInvalid}, "No page to go back or forward to.", ""},
	{ReasonWaitForTimeout, []Code{CodeTimeout}, "The awaited element did not appear in time.", ""},
	{ReasonWaitForHidden, []Code{CodeTimeout}, "The element did not disappear in time.", ""},
	{ReasonNavigateFailed, []Code{CodeUpstream}, "The navigation failed.", ""},
	{ReasonDownloadFailed, []Code{CodeUpstream}, "The download failed.", ""},
	{ReasonDownloadSize, []Code{CodeTooLarge}, "The download passed its cap.", ""},
	{ReasonRenderedSize, []Code{CodeTooLarge}, "The rendered output passed its cap.", ""},
	{ReasonBlocked, []Code{CodeDenied}, "The browser blocked a request of the page.", "the page's request was refused by the session's policy; the audit record says why"},
	{ReasonApproval, []Code{CodeNotFound}, "No such pending approval.", ""},
	{ReasonDeniedOrigin, []Code{CodeDenied}, "The origin is on browser.policy.denied_origins.", "the origin is on browser.policy.denied_origins"},
	{ReasonDefaultDeny, []Code{CodeDenied}, "The origin is not on allowed_origins and default_action is deny.", "add the origin to browser.policy.allowed_origins"},
	{ReasonNotApproved, []Code{CodeDenied}, "An approver refused the origin.", "the approver refused the origin; ask again or add it to browser.policy.allowed_origins"},
	{ReasonAskTimeout, []Code{CodeDenied}, "No approval came before browser.ask_timeout.", "no approver answered within browser.ask_timeout; answer asks sooner, or raise the timeout"},
	{ReasonNoApprover, []Code{CodeDenied}, "default_action is ask and no approver can answer.", "configure browser.approver_tokens, or set browser.policy.default_action"},

	// airlock exec.
	{ReasonSandbox, []Code{CodeUnavailable}, "The exec sandbox cannot be built here: it needs Linux with user, network, PID and mount namespaces.", "airlock exec needs Linux with user namespaces open to this user: sysctl user.max_user_namespaces > 0, kernel.unprivileged_userns_clone=1 (Debian), kernel.apparmor_restrict_unprivileged_userns=0 (Ubuntu); in a container, a seccomp profile that allows unshare(CLONE_NEWUSER) and a /proc that is not masked"},
	{ReasonCommandExit, []Code{CodeUpstream}, "The command run by airlock exec exited with a non-zero status (airlock exits with the same code).", ""},

	// The forward proxy.
	{ReasonProxyCredentials, []Code{CodeDenied}, "Proxy credentials are missing or name no principal.", "give a tenant token as the proxy password (http://x:TOKEN@host:port), or a proxy.clients credential"},
	{ReasonSNIMismatch, []Code{CodeDenied}, "A tunnel's TLS server name differs from its target (domain fronting).", "connect to the host the TLS server name names"},
	{ReasonSNIMissing, []Code{CodeDenied}, "A TLS tunnel to a name without a server name (SNI).", "send SNI, or tunnel to an IP literal"},
	{ReasonTunnelNotTLS, []Code{CodeDenied}, "A tunnel that does not start with a TLS ClientHello, to a port the operator did not list.", "the operator lists ports for other protocols in proxy.plain_ports"},
	{ReasonSOCKS, []Code{CodeInvalid}, "A SOCKS request the proxy does not serve (SOCKS4, a command other than CONNECT, an unknown address type).", "use SOCKS5 CONNECT with a domain name (socks5h://)"},
	{ReasonTunnelBytes, []Code{CodeTooLarge}, "A tunnel passed proxy.max_tunnel_bytes.", "raise proxy.max_tunnel_bytes"},
	{ReasonTunnelTime, []Code{CodeTimeout}, "A tunnel passed proxy.max_tunnel_duration.", "raise proxy.max_tunnel_duration"},
}

var catalogueIndex = func() map[Reason]int {
	m := make(map[Reason]int, len(catalogue))
	for i, r := range catalogue {
		m[r.Reason] = i
	}
	return m
}()

// Reasons returns the catalogue: every reason Airlock can emit, in the
// order docs/api.md lists them. The slice is a copy.
func Reasons() []ReasonInfo {
	out := make([]ReasonInfo, len(catalogue))
	for i, r := range catalogue {
		r.Codes = slices.Clone(r.Codes)
		out[i] = r
	}
	return out
}

// Info returns the catalogue's entry of r, and false if r is not in it.
func (r Reason) Info() (ReasonInfo, bool) {
	i, ok := catalogueIndex[r]
	if !ok {
		return ReasonInfo{}, false
	}
	info := catalogue[i]
	info.Codes = slices.Clone(info.Codes)
	return info, true
}

// Hint returns the catalogue's hint for r: what a person at the terminal
// can do next, or "".
func (r Reason) Hint() string {
	if i, ok := catalogueIndex[r]; ok {
		return catalogue[i].Hint
	}
	return ""
}
