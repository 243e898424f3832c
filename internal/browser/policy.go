package browser

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"sync"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/egress"
)

// Default actions of a Policy: what happens to a request whose origin is on
// neither list.
const (
	ActionDeny  = "deny"
	ActionAllow = "allow"
	ActionAsk   = "ask"
)

// MaxRedirects is the redirect cap of one request chain at layer 1.
const MaxRedirects = 10

// Policy is a session's BrowserPolicy, on top of the egress floor and the
// tenant's egress policy (which always apply, at both layers):
//
//   - AllowedOrigins and DeniedOrigins: each entry is an origin
//     `scheme://host[:port]` (the scheme's default port when omitted), a
//     host name `example.com` (http and https, any port) or a suffix glob
//     `*.example.com` (its subdomains, not example.com itself). Deny wins.
//   - DefaultAction: deny (the default: fail closed), allow, or ask (the
//     request is paused and an approval-required event emitted; Approve or
//     Deny resolves it, silence denies it after the ask timeout).
//
// The same Policy is enforced at layer 1 (CDP interception, on the full
// URL) and at layer 2 (the egress proxy, on host and port: there a scheme
// cannot be told apart, so a deny on any scheme of a host:port wins).
//
// Denials hold under any name: a DeniedOrigins entry whose host is an IP
// address also matches a request whose host is that address in another
// spelling, or a name that layer 2 resolved and pinned to it (no lookup
// is made for the policy: layer 2 matches the answers it dials anyway).
// An entry for a loopback address matches every loopback address
// (127.0.0.0/8, ::1, and the unspecified 0.0.0.0 and ::), since all of
// them reach this machine's listeners, and localhost (and names under it,
// RFC 6761) is loopback without a lookup. Approvals under ask do not lift a
// denial. Allow lists, and approvals, match names only: a DNS answer never
// widens them.
type Policy struct {
	AllowedOrigins []string `koanf:"allowed_origins" json:"allowed_origins,omitempty"`
	DeniedOrigins  []string `koanf:"denied_origins" json:"denied_origins,omitempty"`
	DefaultAction  string   `koanf:"default_action" json:"default_action,omitempty"`
}

// origin is one compiled list entry.
type origin struct {
	scheme string // "" for host and suffix entries: http and https
	host   string // canonical host, or the suffix with its leading dot
	port   int    // 0: any port (host and suffix entries)
	suffix bool
	addr   netip.Addr // the host's address when it is an IP literal
}

func (o origin) String() string {
	switch {
	case o.suffix:
		return "*" + o.host
	case o.scheme == "":
		return o.host
	}
	return o.scheme + "://" + hostPort(o.host, o.port)
}

func hostPort(host string, port int) string {
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	return host + ":" + strconv.Itoa(port)
}

func (o origin) match(scheme, host string, port int) bool {
	if o.suffix {
		return strings.HasSuffix(host, o.host) && len(host) > len(o.host)
	}
	if host != o.host {
		return false
	}
	if o.scheme == "" {
		return true
	}
	return (scheme == "" || scheme == o.scheme) && port == o.port
}

// matchAddr reports whether an entry for an IP literal names the host at
// address a (see Policy: every loopback address is one host).
func (o origin) matchAddr(scheme string, a netip.Addr, port int) bool {
	if !o.addr.IsValid() || !sameHost(o.addr, a) {
		return false
	}
	if o.scheme == "" {
		return true
	}
	return (scheme == "" || scheme == o.scheme) && port == o.port
}

func sameHost(x, y netip.Addr) bool {
	x, y = x.Unmap().WithZone(""), y.Unmap().WithZone("")
	if thisMachine(x) && thisMachine(y) {
		return true
	}
	return x == y
}

// thisMachine reports whether a connection to a reaches this machine's own
// listeners.
func thisMachine(a netip.Addr) bool { return a.IsLoopback() || a.IsUnspecified() }

// loopbackName reports whether host is localhost or a name under it, which
// always resolve to loopback (RFC 6761): their address is known without a
// lookup.
func loopbackName(host string) bool {
	return host == "localhost" || strings.HasSuffix(host, ".localhost")
}

// hostAddr is the address a host is known to have without a lookup: an IP
// literal's own, or loopback for localhost; invalid otherwise.
func hostAddr(host string) netip.Addr {
	if a, err := netip.ParseAddr(host); err == nil {
		return a
	}
	if loopbackName(host) {
		return netip.AddrFrom4([4]byte{127, 0, 0, 1})
	}
	return netip.Addr{}
}

// compiledPolicy is a validated Policy plus the origins approved under ask.
type compiledPolicy struct {
	allowed, denied []origin
	action          string

	mu       sync.Mutex
	approved map[string]bool // scheme://host:port

	noApprover  string      // set: ask is a denial (no_approver) unless hasApprover, and this says how to allow
	hasApprover func() bool // nil: none; true: an Approver can answer asks now
}

func policyErr(format string, args ...any) error {
	return airlock.Errorf(airlock.CodeInvalid, airlock.ReasonBrowserPolicy, "browser policy: "+format, args...)
}

// Validate checks the policy's entries and action. Errors: invalid
// (browser_policy).
func (p Policy) Validate() error {
	_, err := p.compile()
	return err
}

func (p Policy) compile() (*compiledPolicy, error) {
	c := &compiledPolicy{action: p.DefaultAction, approved: map[string]bool{}}
	switch c.action {
	case "":
		c.action = ActionDeny
	case ActionDeny, ActionAllow, ActionAsk:
	default:
		return nil, policyErr("default_action %q: want deny, allow or ask", p.DefaultAction)
	}
	var err error
	if c.allowed, err = parseOrigins("allowed_origins", p.AllowedOrigins); err != nil {
		return nil, err
	}
	if c.denied, err = parseOrigins("denied_origins", p.DeniedOrigins); err != nil {
		return nil, err
	}
	return c, nil
}

// MaxOrigins caps each origin list.
const MaxOrigins = 1024

func parseOrigins(field string, entries []string) ([]origin, error) {
	if len(entries) > MaxOrigins {
		return nil, policyErr("%s: %d entries, at most %d", field, len(entries), MaxOrigins)
	}
	out := make([]origin, 0, len(entries))
	for _, raw := range entries {
		o, err := parseOrigin(raw)
		if err != nil {
			return nil, policyErr("%s: %q: %v", field, raw, err)
		}
		out = append(out, o)
	}
	return out, nil
}

func parseOrigin(raw string) (origin, error) {
	s := strings.TrimSpace(raw)
	switch {
	case s == "":
		return origin{}, fmt.Errorf("empty entry")
	case strings.HasPrefix(s, "*."):
		t, err := egress.ParseHostPort(s[2:] + ":1")
		if err != nil || t.IsIP() {
			return origin{}, fmt.Errorf("a suffix glob is *.domain")
		}
		return origin{host: "." + t.Host, suffix: true}, nil
	case !strings.Contains(s, "://"):
		t, err := egress.ParseHostPort(hostOnly(s) + ":1")
		if err != nil || strings.ContainsAny(s, "/*@") {
			return origin{}, fmt.Errorf("want scheme://host[:port], a host name or *.suffix")
		}
		return origin{host: t.Host, addr: hostAddr(t.Host)}, nil
	}
	t, err := egress.ParseURL(s)
	if err != nil {
		return origin{}, err
	}
	if t.Scheme != "http" && t.Scheme != "https" {
		return origin{}, fmt.Errorf("only http and https origins load")
	}
	rest := s[strings.Index(s, "://")+3:]
	if i := strings.IndexAny(rest, "/?#"); i >= 0 && strings.Trim(rest[i:], "/") != "" {
		return origin{}, fmt.Errorf("an origin has no path, query or fragment")
	}
	return origin{scheme: t.Scheme, host: t.Host, port: int(t.Port), addr: hostAddr(t.Host)}, nil
}

// hostOnly brackets an IPv6 literal so that ParseHostPort reads it.
func hostOnly(s string) string {
	if strings.Count(s, ":") > 1 && !strings.HasPrefix(s, "[") {
		return "[" + s + "]"
	}
	return s
}

// verdict is the policy's answer for one target.
type verdict int

const (
	verdictAllow verdict = iota
	verdictDeny
	verdictAsk
)

// decide answers for a request to scheme://host:port ("" scheme: layer 2,
// which cannot see it). The reason names the rule for a deny.
func (c *compiledPolicy) decide(scheme, host string, port int) (verdict, string) {
	return c.decideAt(scheme, host, port, nil)
}

// decideAt is decide for a host layer 2 has pinned to addrs (nil: not
// resolved yet; an IP literal host is its own address): denied_origins
// match the name and the addresses, everything else the name only.
func (c *compiledPolicy) decideAt(scheme, host string, port int, addrs []netip.Addr) (verdict, string) {
	if a := hostAddr(host); a.IsValid() {
		addrs = append(addrs[:len(addrs):len(addrs)], a)
	}
	for _, o := range c.denied {
		if o.match(scheme, host, port) {
			return verdictDeny, "denied_origin"
		}
		for _, a := range addrs {
			if o.matchAddr(scheme, a, port) {
				return verdictDeny, "denied_origin"
			}
		}
	}
	for _, o := range c.allowed {
		if o.match(scheme, host, port) {
			return verdictAllow, ""
		}
	}
	if c.isApproved(scheme, host, port) {
		return verdictAllow, ""
	}
	switch c.action {
	case ActionAllow:
		return verdictAllow, ""
	case ActionAsk:
		if c.noApprover != "" && (c.hasApprover == nil || !c.hasApprover()) {
			return verdictDeny, "no_approver"
		}
		if scheme == "" {
			// Layer 2 cannot pause a socket: only what layer 1 had
			// approved passes.
			return verdictDeny, "not_approved"
		}
		return verdictAsk, ""
	}
	return verdictDeny, "default_deny"
}

func (c *compiledPolicy) approve(scheme, host string, port int) {
	c.mu.Lock()
	c.approved[scheme+"://"+hostPort(host, port)] = true
	c.mu.Unlock()
}

func (c *compiledPolicy) isApproved(scheme, host string, port int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if scheme != "" {
		return c.approved[scheme+"://"+hostPort(host, port)]
	}
	return c.approved["http://"+hostPort(host, port)] || c.approved["https://"+hostPort(host, port)]
}

// Admit is layer 2's check of a target the proxy is about to open for this
// session: host and port only (see Policy), then the addresses the proxy
// pinned the name to, against denied_origins. It is the session's
// egress.ProxyClient.Admit.
func (s *Session) Admit(t egress.Target, addrs []netip.Addr) error {
	v, reason := s.policy.decideAt("", t.Host, int(t.Port), addrs)
	if v == verdictAllow {
		return nil
	}
	return &egress.Error{Code: egress.CodeDenied, Reason: egress.Reason(reason), Op: "check", Target: t.String(),
		Detail: "not admitted by the browser session's origin policy"}
}

// refusal is a layer-1 refusal by the origin lists or the default action,
// in the vocabulary.
func (c *compiledPolicy) refusal(raw, reason string) error {
	if reason == "no_approver" {
		return airlock.Errorf(airlock.CodeDenied, airlock.ReasonNoApprover, "browser: %s refused: default_action is ask and no approver can answer; %s", raw, c.noApprover)
	}
	return originDenied(raw, airlock.Reason(reason))
}

// originDenied is a layer-1 refusal by the origin lists or the default
// action, in the vocabulary.
func originDenied(raw string, reason airlock.Reason) error {
	msg := map[airlock.Reason]string{
		"denied_origin": "its origin is on denied_origins",
		"default_deny":  "its origin is not on allowed_origins and default_action is deny",
		"not_approved":  "it was not approved",
		"ask_timeout":   "no approval came before the ask timeout",
	}[reason]
	return airlock.Errorf(airlock.CodeDenied, reason, "browser: %s refused: %s", raw, msg)
}
