package egress

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Lane is the kind of traffic a check is for.
type Lane string

// The lanes.
const (
	LaneHTTP Lane = "http" // URL fetches: the HTTP client and the forward proxy
	LaneTCP  Lane = "tcp"
	LaneUDP  Lane = "udp"
	LaneTLS  Lane = "tls"
)

// Lanes lists every lane.
func Lanes() []Lane { return []Lane{LaneHTTP, LaneTCP, LaneUDP, LaneTLS} }

// ParseLane parses a lane name.
func ParseLane(s string) (Lane, error) {
	switch l := Lane(strings.ToLower(s)); l {
	case LaneHTTP, LaneTCP, LaneUDP, LaneTLS:
		return l, nil
	}
	return "", invalid("policy", s, ReasonMalformed, "unknown lane (want http, tcp, udp or tls)")
}

// Policy says what may be reached. Compile it once into a *Checker.
//
// The zero Policy opens no lane and so denies everything; DefaultPolicy
// allows every lane to every address above the floor. The order of checks,
// for every target and every redirect hop, is: lane → cloud metadata (never)
// → Deny → floor (unless an Exception covers the address) → Allow (when
// non-empty, everything not on it is denied).
//
// Patterns in Allow and Deny:
//
//	example.com            the name exactly (any port)
//	*.example.com          subdomains of example.com, not example.com itself
//	*                      any host (useful with a port: *:443)
//	93.184.216.34, 2001:db8::1, [2001:db8::1]   an address
//	203.0.113.0/24, 2001:db8::/32               a prefix
//	any of the above followed by :PORT or :LO-HI (IPv6 bracketed: [::1]:53)
//
// Name patterns match the requested name; address patterns match the
// addresses it resolves to (or the literal). When Allow holds only address
// patterns, names are refused without any DNS lookup.
//
// Exceptions lift the floor for an intranet address: a CIDR, an IP, or
// IP:PORT. They never lift the metadata denial, and never widen Allow.
type Policy struct {
	Lanes              []Lane
	Allow              []string
	Deny               []string
	Exceptions         []string
	UnwrapEmbeddedIPv4 bool // re-check the IPv4 inside mapped/NAT64/6to4/Teredo forms instead of denying the class
}

// DefaultPolicy opens every lane to everything above the floor.
func DefaultPolicy() Policy { return Policy{Lanes: Lanes()} }

type patKind uint8

const (
	patAny patKind = iota
	patName
	patSuffix
	patPrefix
)

type pattern struct {
	kind   patKind
	name   string // patName: the name; patSuffix: ".example.com"
	prefix netip.Prefix
	lo, hi uint16 // port range; 0, 0 = any
	raw    string
}

func (p *pattern) portOK(port uint16) bool {
	return p.lo == 0 || port >= p.lo && port <= p.hi
}

func (p *pattern) matchName(name string, port uint16) bool {
	switch p.kind {
	case patAny:
		return p.portOK(port)
	case patName:
		return name == p.name && p.portOK(port)
	case patSuffix:
		return len(name) > len(p.name) && strings.HasSuffix(name, p.name) && p.portOK(port)
	}
	return false
}

func (p *pattern) matchAddr(a netip.Addr, port uint16) bool {
	switch p.kind {
	case patAny:
		return p.portOK(port)
	case patPrefix:
		return p.prefix.Contains(a) && p.portOK(port)
	}
	return false
}

// Checker is a compiled, immutable Policy. It is safe for concurrent use.
// A nil *Checker denies everything.
type Checker struct {
	lanes      [4]bool
	anyLane    bool
	allow      []pattern
	allowNames bool // some allow pattern can match a name
	allowAddrs bool // some allow pattern can match an address
	deny       []pattern
	exceptions []pattern
	unwrap     bool
	parent     *Checker // Narrow: both must allow
}

// Compile validates the policy and returns its immutable checker.
func (p Policy) Compile() (*Checker, error) {
	c := &Checker{unwrap: p.UnwrapEmbeddedIPv4}
	for _, l := range p.Lanes {
		i := laneIndex(l)
		if i < 0 {
			return nil, invalid("policy", string(l), ReasonMalformed, "unknown lane")
		}
		c.lanes[i] = true
		c.anyLane = true
	}
	for _, s := range p.Allow {
		pt, err := parsePattern(s)
		if err != nil {
			return nil, fmt.Errorf("allow %q: %w", s, err)
		}
		c.allow = append(c.allow, pt)
		if pt.kind != patPrefix {
			c.allowNames = true
		}
		if pt.kind == patPrefix || pt.kind == patAny {
			c.allowAddrs = true
		}
	}
	for _, s := range p.Deny {
		pt, err := parsePattern(s)
		if err != nil {
			return nil, fmt.Errorf("deny %q: %w", s, err)
		}
		c.deny = append(c.deny, pt)
	}
	for _, s := range p.Exceptions {
		pt, err := parseException(s)
		if err != nil {
			return nil, fmt.Errorf("exception %q: %w", s, err)
		}
		c.exceptions = append(c.exceptions, pt)
	}
	return c, nil
}

// MustCompile is Compile for policies known to be valid; it panics otherwise.
func (p Policy) MustCompile() *Checker {
	c, err := p.Compile()
	if err != nil {
		panic(err)
	}
	return c
}

// Narrow returns a checker that allows only what both c and n allow: a
// request can narrow a policy, never widen it. Exceptions in n only lift
// n's own floor; c's floor still applies. A nil n returns c.
func (c *Checker) Narrow(n *Checker) *Checker {
	if n == nil || c == nil {
		return c
	}
	cp := *n
	if cp.parent != nil {
		cp.parent = cp.parent.Narrow(c)
	} else {
		cp.parent = c
	}
	return &cp
}

// Unwraps reports whether embedded IPv4 addresses are re-checked.
func (c *Checker) Unwraps() bool { return c != nil && c.unwrap }

func laneIndex(l Lane) int {
	switch l {
	case LaneHTTP:
		return 0
	case LaneTCP:
		return 1
	case LaneUDP:
		return 2
	case LaneTLS:
		return 3
	}
	return -1
}

func parsePortRange(s string) (lo, hi uint16, err error) {
	if s == "*" {
		return 0, 0, nil
	}
	a, b, ok := strings.Cut(s, "-")
	if !ok {
		b = a
	}
	l, e1 := parsePort(a)
	h, e2 := parsePort(b)
	if e1 != nil {
		return 0, 0, e1
	}
	if e2 != nil {
		return 0, 0, e2
	}
	if l > h {
		return 0, 0, invalid("policy", s, ReasonBadPort, "empty port range")
	}
	return l, h, nil
}

// splitPattern separates an optional :PORT or :LO-HI suffix.
func splitPattern(s string) (host, ports string, err error) {
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return "", "", invalid("policy", s, ReasonMalformed, "unclosed [")
		}
		host, rest := s[1:end], s[end+1:]
		if rest == "" {
			return host, "", nil
		}
		if rest[0] != ':' {
			return "", "", invalid("policy", s, ReasonMalformed, "garbage after ]")
		}
		return host, rest[1:], nil
	}
	if strings.Count(s, ":") > 1 {
		return s, "", nil // unbracketed IPv6 address or prefix, no port
	}
	if h, p, ok := strings.Cut(s, ":"); ok {
		return h, p, nil
	}
	return s, "", nil
}

func parsePattern(s string) (pattern, error) {
	s = strings.TrimSpace(s)
	pt := pattern{raw: s}
	host, ports, err := splitPattern(s)
	if err != nil {
		return pt, err
	}
	if ports != "" {
		if pt.lo, pt.hi, err = parsePortRange(ports); err != nil {
			return pt, err
		}
	}
	switch {
	case host == "*":
		pt.kind = patAny
	case strings.HasPrefix(host, "*."):
		t, err := ParseHost(host[2:])
		if err != nil {
			return pt, err
		}
		if t.IsIP() {
			return pt, invalid("policy", s, ReasonBadHost, "*. needs a name suffix")
		}
		pt.kind, pt.name = patSuffix, "."+t.Host
	case strings.Contains(host, "/"):
		p, err := netip.ParsePrefix(host)
		if err != nil {
			return pt, invalid("policy", s, ReasonMalformed, "bad prefix")
		}
		pt.kind, pt.prefix = patPrefix, p.Masked()
	case host == "":
		return pt, invalid("policy", s, ReasonEmptyHost, "empty pattern")
	default:
		if a, err := netip.ParseAddr(host); err == nil {
			if a.Zone() != "" {
				return pt, invalid("policy", s, ReasonParseAmbiguous, "zone in address")
			}
			pt.kind, pt.prefix = patPrefix, netip.PrefixFrom(a, a.BitLen())
			break
		}
		t, err := ParseHost(host)
		if err != nil {
			return pt, err
		}
		if t.IsIP() { // a canonical dotted quad that netip also accepts; handled above
			pt.kind, pt.prefix = patPrefix, netip.PrefixFrom(t.Addr, t.Addr.BitLen())
			break
		}
		pt.kind, pt.name = patName, t.Host
	}
	return pt, nil
}

func parseException(s string) (pattern, error) {
	pt, err := parsePattern(s)
	if err != nil {
		return pt, err
	}
	if pt.kind != patPrefix {
		return pt, invalid("policy", s, ReasonMalformed, "an exception is a CIDR, an IP or IP:PORT, not a name")
	}
	if pt.lo != pt.hi {
		return pt, invalid("policy", s, ReasonBadPort, "an exception names one port")
	}
	return pt, nil
}

// Verdict is the outcome of one check. The zero Verdict is a denial with no
// reason.
type Verdict struct {
	Allow     bool
	Reason    Reason // ReasonAllowed or ReasonException when allowed
	Excepted  bool   // a floor exception was used
	Rule      string // the pattern that decided, when one did
	Addr      netip.Addr
	NeedsDNS  bool // CheckName allowed the name to be resolved
	MixedWith Reason
}

func deny(r Reason, rule string) Verdict { return Verdict{Reason: r, Rule: rule} }

// CheckName is the part of the decision that needs no DNS: the lane, the
// metadata names, name patterns of the deny list, and the allow list when it
// cannot match any address. For an IP literal target it is the whole
// decision. When it allows a name, NeedsDNS is set and every resolved
// address must then pass CheckAddr.
func (c *Checker) CheckName(lane Lane, t Target) Verdict {
	if t.IsIP() {
		return c.CheckAddr(lane, "", t.Addr, t.Port)
	}
	for k := c; k != nil; k = k.parent {
		if v := k.checkName(lane, t.Host, t.Port); !v.Allow {
			return v
		}
	}
	if c == nil {
		return deny(ReasonNoPolicy, "")
	}
	return Verdict{Allow: true, Reason: ReasonAllowed, NeedsDNS: true}
}

func (c *Checker) checkName(lane Lane, name string, port uint16) Verdict {
	if v, ok := c.checkLane(lane); !ok {
		return v
	}
	if metadataNames[name] {
		return deny(ReasonMetadata, "")
	}
	for i := range c.deny {
		if c.deny[i].kind != patPrefix && c.deny[i].matchName(name, port) {
			return deny(ReasonDenyList, c.deny[i].raw)
		}
	}
	if len(c.allow) > 0 && !c.allowNames {
		// Only address patterns: a name is refused without any DNS lookup.
		return deny(ReasonNotAllowed, "")
	}
	if len(c.allow) > 0 && !c.allowAddrs {
		if _, ok := c.matchAllowName(name, port); !ok {
			return deny(ReasonNotAllowed, "")
		}
	}
	return Verdict{Allow: true, Reason: ReasonAllowed}
}

func (c *Checker) checkLane(lane Lane) (Verdict, bool) {
	if !c.anyLane {
		return deny(ReasonNoPolicy, ""), false
	}
	i := laneIndex(lane)
	if i < 0 || !c.lanes[i] {
		return deny(ReasonLane, ""), false
	}
	return Verdict{}, true
}

func (c *Checker) matchAllowName(name string, port uint16) (string, bool) {
	if name == "" {
		return "", false
	}
	for i := range c.allow {
		if c.allow[i].kind != patPrefix && c.allow[i].matchName(name, port) {
			return c.allow[i].raw, true
		}
	}
	return "", false
}

// CheckAddr decides one address that name resolved to; name is "" for an
// IP literal target. It does not allocate.
func (c *Checker) CheckAddr(lane Lane, name string, a netip.Addr, port uint16) Verdict {
	if c == nil {
		return deny(ReasonNoPolicy, "")
	}
	var out Verdict
	for k := c; k != nil; k = k.parent {
		v := k.checkAddr(lane, name, a, port)
		if !v.Allow {
			v.Addr = a
			return v
		}
		if k == c {
			out = v
		}
		out.Excepted = out.Excepted || v.Excepted
	}
	if out.Excepted {
		out.Reason = ReasonException
	}
	out.Addr = a
	return out
}

func (c *Checker) checkAddr(lane Lane, name string, a netip.Addr, port uint16) Verdict {
	if v, ok := c.checkLane(lane); !ok {
		return v
	}
	a = a.WithZone("")
	isName := name != ""
	if isName && metadataNames[name] {
		return deny(ReasonMetadata, "")
	}
	if IsMetadata(a) {
		return deny(ReasonMetadata, "")
	}
	for i := range c.deny {
		d := &c.deny[i]
		if d.matchAddr(a, port) || (isName && d.kind != patPrefix && d.matchName(name, port)) {
			return deny(ReasonDenyList, d.raw)
		}
	}
	if c.unwrap && a.Is6() && len(c.deny) > 0 {
		// The floor is about to judge the embedded IPv4 address: so must
		// the deny list, or ::ffff:a.b.c.d would pass where a.b.c.d is denied.
		emb, n := embeddedIPv4(a)
		for _, e := range emb[:n] {
			for i := range c.deny {
				if c.deny[i].matchAddr(e, port) {
					return deny(ReasonDenyList, c.deny[i].raw)
				}
			}
		}
	}
	excepted := false
	if r := classify(a, c.unwrap); r != "" {
		ex := false
		for i := range c.exceptions {
			if c.exceptions[i].matchAddr(a, port) {
				ex = true
				break
			}
		}
		if !ex {
			return deny(r, "")
		}
		excepted = true
	}
	if len(c.allow) > 0 {
		ok := false
		rule := ""
		if isName {
			rule, ok = c.matchAllowName(name, port)
		}
		if !ok {
			for i := range c.allow {
				if c.allow[i].matchAddr(a, port) {
					rule, ok = c.allow[i].raw, true
					break
				}
			}
		}
		if !ok {
			return deny(ReasonNotAllowed, "")
		}
		return Verdict{Allow: true, Reason: ReasonAllowed, Excepted: excepted, Rule: rule}
	}
	return Verdict{Allow: true, Reason: ReasonAllowed, Excepted: excepted}
}

// CheckAddrs decides a resolved name: every address must pass, or the name
// is denied (dns_mixed when some passed and some did not).
func (c *Checker) CheckAddrs(lane Lane, name string, addrs []netip.Addr, port uint16) Verdict {
	if len(addrs) == 0 {
		return deny(ReasonDNSNoAddress, "")
	}
	var first Verdict
	var firstDeny *Verdict
	allowed, excepted := 0, false
	for i, a := range addrs {
		v := c.CheckAddr(lane, name, a, port)
		if i == 0 {
			first = v
		}
		if v.Allow {
			allowed++
			excepted = excepted || v.Excepted
			continue
		}
		if firstDeny == nil {
			vv := v
			firstDeny = &vv
		}
	}
	if firstDeny == nil {
		first.Excepted = excepted
		if excepted {
			first.Reason = ReasonException
		}
		return first
	}
	if allowed > 0 {
		v := *firstDeny
		v.MixedWith = v.Reason
		v.Reason = ReasonDNSMixed
		return v
	}
	return *firstDeny
}

// String describes the policy for logs.
func (v Verdict) String() string {
	s := "deny"
	if v.Allow {
		s = "allow"
	}
	s += " " + string(v.Reason)
	if v.Rule != "" {
		s += " (" + strconv.Quote(v.Rule) + ")"
	}
	return s
}
