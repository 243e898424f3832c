package egress

import (
	"net/netip"
	"strings"
	"testing"
)

func compileOrFatal(t *testing.T, p Policy) *Checker {
	t.Helper()
	c, err := p.Compile()
	if err != nil {
		t.Fatalf("Compile(%+v): %v", p, err)
	}
	return c
}

// allLanes returns p with every lane open.
func allLanes(p Policy) Policy {
	p.Lanes = Lanes()
	return p
}

func TestPolicyZeroDeniesEverything(t *testing.T) {
	zero := compileOrFatal(t, Policy{})
	var nilChecker *Checker
	name := Target{Host: "example.com", Port: 443}
	ip := Target{Host: "8.8.8.8", Addr: netip.MustParseAddr("8.8.8.8"), Port: 443}
	for _, c := range []*Checker{zero, nilChecker} {
		for _, lane := range Lanes() {
			if v := c.CheckName(lane, name); v.Allow || v.Reason != ReasonNoPolicy || v.NeedsDNS {
				t.Errorf("CheckName(%s, name) = %+v, want no_policy", lane, v)
			}
			if v := c.CheckName(lane, ip); v.Allow || v.Reason != ReasonNoPolicy {
				t.Errorf("CheckName(%s, ip) = %+v, want no_policy", lane, v)
			}
			if v := c.CheckAddr(lane, "example.com", ip.Addr, 443); v.Allow || v.Reason != ReasonNoPolicy {
				t.Errorf("CheckAddr(%s) = %+v, want no_policy", lane, v)
			}
			if v := c.CheckAddrs(lane, "example.com", []netip.Addr{ip.Addr}, 443); v.Allow || v.Reason != ReasonNoPolicy {
				t.Errorf("CheckAddrs(%s) = %+v, want no_policy", lane, v)
			}
		}
	}
	if nilChecker.Unwraps() {
		t.Error("nil checker unwraps")
	}
	// A policy with patterns but no lanes still denies everything.
	c := compileOrFatal(t, Policy{Allow: []string{"*"}, Exceptions: []string{"10.0.0.0/8"}})
	if v := c.CheckAddr(LaneHTTP, "", ip.Addr, 80); v.Allow || v.Reason != ReasonNoPolicy {
		t.Errorf("no lanes: %+v, want no_policy", v)
	}
}

func TestDefaultPolicy(t *testing.T) {
	c := DefaultPolicy().MustCompile()
	for _, lane := range Lanes() {
		for _, s := range []string{"8.8.8.8", "1.1.1.1", "2606:4700::1111", "93.184.216.34"} {
			a := netip.MustParseAddr(s)
			v := c.CheckName(lane, Target{Host: a.String(), Addr: a, Port: 443})
			if !v.Allow || v.Reason != ReasonAllowed || v.Excepted || v.Addr != a {
				t.Errorf("%s %s: %+v, want allowed", lane, s, v)
			}
		}
		for s, want := range map[string]Reason{
			"127.0.0.1":        ReasonLoopback,
			"10.0.0.1":         ReasonPrivate,
			"169.254.169.254":  ReasonMetadata,
			"100.64.0.1":       ReasonCGNAT,
			"::1":              ReasonLoopback,
			"::ffff:127.0.0.1": ReasonIPv4Embedded,
			"fd00:ec2::254":    ReasonMetadata,
			"0.0.0.0":          ReasonUnspecified,
			"255.255.255.255":  ReasonBroadcast,
		} {
			a := netip.MustParseAddr(s)
			v := c.CheckAddr(lane, "", a, 80)
			if v.Allow || v.Reason != want || v.Addr != a {
				t.Errorf("%s %s: %+v, want %s", lane, s, v, want)
			}
		}
		v := c.CheckName(lane, Target{Host: "example.com", Port: 443})
		if !v.Allow || !v.NeedsDNS {
			t.Errorf("%s name: %+v, want allowed with NeedsDNS", lane, v)
		}
	}
	if c.Unwraps() {
		t.Error("DefaultPolicy unwraps embedded IPv4")
	}
}

func TestPolicyLanes(t *testing.T) {
	c := compileOrFatal(t, Policy{Lanes: []Lane{LaneHTTP}})
	a := netip.MustParseAddr("8.8.8.8")
	if v := c.CheckAddr(LaneHTTP, "", a, 80); !v.Allow {
		t.Errorf("http: %+v", v)
	}
	for _, lane := range []Lane{LaneTCP, LaneUDP, LaneTLS, "ftp", ""} {
		if v := c.CheckAddr(lane, "", a, 80); v.Allow || v.Reason != ReasonLane {
			t.Errorf("%q: %+v, want lane", lane, v)
		}
		if v := c.CheckName(lane, Target{Host: "example.com", Port: 80}); v.Allow || v.Reason != ReasonLane {
			t.Errorf("%q name: %+v, want lane", lane, v)
		}
	}
	if _, err := (Policy{Lanes: []Lane{"ftp"}}).Compile(); err == nil {
		t.Error("Compile accepted lane ftp")
	}
	for _, s := range []string{"http", "TCP", "Udp", "tls"} {
		if _, err := ParseLane(s); err != nil {
			t.Errorf("ParseLane(%q): %v", s, err)
		}
	}
	if _, err := ParseLane("smtp"); CodeOf(err) != CodeInvalid {
		t.Errorf("ParseLane(smtp) = %v", err)
	}
}

func TestPolicyOrderOfChecks(t *testing.T) {
	tests := []struct {
		name     string
		policy   Policy
		host     string // "" for an IP literal target
		addr     string
		port     uint16
		allow    bool
		reason   Reason
		excepted bool
		rule     string
	}{
		// Metadata beats everything.
		{name: "metadata beats allow IP", policy: Policy{Allow: []string{"169.254.169.254"}}, addr: "169.254.169.254", port: 80, reason: ReasonMetadata},
		{name: "metadata beats allow *", policy: Policy{Allow: []string{"*"}}, addr: "169.254.169.254", port: 80, reason: ReasonMetadata},
		{name: "metadata beats link-local exception", policy: Policy{Exceptions: []string{"169.254.0.0/16"}}, addr: "169.254.169.254", port: 80, reason: ReasonMetadata},
		{name: "link-local exception lifts the rest", policy: Policy{Exceptions: []string{"169.254.0.0/16"}}, addr: "169.254.1.1", port: 80, allow: true, reason: ReasonException, excepted: true},
		{name: "metadata beats exact exception", policy: Policy{Exceptions: []string{"169.254.169.254"}}, addr: "169.254.169.254", port: 80, reason: ReasonMetadata},
		{name: "metadata beats IP:port exception", policy: Policy{Exceptions: []string{"168.63.129.16:80"}}, addr: "168.63.129.16", port: 80, reason: ReasonMetadata},
		{name: "metadata beats 0/0 exception", policy: Policy{Exceptions: []string{"0.0.0.0/0", "::/0"}}, addr: "100.100.100.200", port: 80, reason: ReasonMetadata},
		{name: "IPv6 metadata beats ::/0 exception", policy: Policy{Exceptions: []string{"::/0"}}, addr: "fd00:ec2::254", port: 80, reason: ReasonMetadata},
		{name: "mapped metadata beats exception", policy: Policy{Exceptions: []string{"::ffff:0:0/96"}}, addr: "::ffff:169.254.169.254", port: 80, reason: ReasonMetadata},
		{name: "NAT64 metadata beats exception and unwrap", policy: Policy{Exceptions: []string{"64:ff9b::/96"}, UnwrapEmbeddedIPv4: true}, addr: "64:ff9b::a9fe:a9fe", port: 80, reason: ReasonMetadata},
		{name: "metadata name with public answer", policy: Policy{}, host: "metadata.google.internal", addr: "8.8.8.8", port: 80, reason: ReasonMetadata},
		{name: "metadata name beats allow", policy: Policy{Allow: []string{"metadata.google.internal"}}, host: "metadata.google.internal", addr: "8.8.8.8", port: 80, reason: ReasonMetadata},

		// Deny beats allow and exceptions.
		{name: "deny name beats allow name", policy: Policy{Allow: []string{"example.com"}, Deny: []string{"example.com"}}, host: "example.com", addr: "93.184.216.34", port: 443, reason: ReasonDenyList, rule: "example.com"},
		{name: "deny suffix beats allow name", policy: Policy{Allow: []string{"a.example.com"}, Deny: []string{"*.example.com"}}, host: "a.example.com", addr: "93.184.216.34", port: 443, reason: ReasonDenyList, rule: "*.example.com"},
		{name: "deny prefix beats allow name", policy: Policy{Allow: []string{"example.com"}, Deny: []string{"93.184.216.0/24"}}, host: "example.com", addr: "93.184.216.34", port: 443, reason: ReasonDenyList, rule: "93.184.216.0/24"},
		{name: "deny beats exception", policy: Policy{Exceptions: []string{"10.0.0.0/8"}, Deny: []string{"10.0.0.5"}}, addr: "10.0.0.5", port: 80, reason: ReasonDenyList, rule: "10.0.0.5"},
		{name: "deny port only", policy: Policy{Deny: []string{"*:25"}}, addr: "8.8.8.8", port: 25, reason: ReasonDenyList, rule: "*:25"},
		{name: "deny port other port", policy: Policy{Deny: []string{"*:25"}}, addr: "8.8.8.8", port: 26, allow: true, reason: ReasonAllowed},
		{name: "deny name does not match a literal", policy: Policy{Deny: []string{"example.com"}}, addr: "93.184.216.34", port: 80, allow: true, reason: ReasonAllowed},

		// The floor, and exceptions.
		{name: "floor", policy: Policy{}, addr: "10.0.0.1", port: 80, reason: ReasonPrivate},
		{name: "exception for its address", policy: Policy{Exceptions: []string{"10.1.2.3"}}, addr: "10.1.2.3", port: 80, allow: true, reason: ReasonException, excepted: true},
		{name: "exception not for its neighbour", policy: Policy{Exceptions: []string{"10.1.2.3"}}, addr: "10.1.2.4", port: 80, reason: ReasonPrivate},
		{name: "IP:port exception on its port", policy: Policy{Exceptions: []string{"10.1.2.3:8080"}}, addr: "10.1.2.3", port: 8080, allow: true, reason: ReasonException, excepted: true},
		{name: "IP:port exception on another port", policy: Policy{Exceptions: []string{"10.1.2.3:8080"}}, addr: "10.1.2.3", port: 80, reason: ReasonPrivate},
		{name: "IPv6 IP:port exception", policy: Policy{Exceptions: []string{"[fd12::1]:443"}}, addr: "fd12::1", port: 443, allow: true, reason: ReasonException, excepted: true},
		{name: "IPv6 IP:port exception other port", policy: Policy{Exceptions: []string{"[fd12::1]:443"}}, addr: "fd12::1", port: 444, reason: ReasonPrivate},
		{name: "IPv4 exception does not cover the mapped form", policy: Policy{Exceptions: []string{"10.0.0.0/8"}, UnwrapEmbeddedIPv4: true}, addr: "::ffff:10.0.0.1", port: 80, reason: ReasonPrivate},
		{name: "exception on a public address changes nothing", policy: Policy{Exceptions: []string{"8.8.8.0/24"}}, addr: "8.8.8.8", port: 80, allow: true, reason: ReasonAllowed},

		// An exception never widens a non-empty allow list.
		{name: "exception does not widen allow (literal)", policy: Policy{Allow: []string{"example.com"}, Exceptions: []string{"10.0.0.0/8"}}, addr: "10.0.0.1", port: 80, reason: ReasonNotAllowed},
		{name: "exception does not widen allow (other name)", policy: Policy{Allow: []string{"example.com"}, Exceptions: []string{"10.0.0.0/8"}}, host: "other.example", addr: "10.0.0.1", port: 80, reason: ReasonNotAllowed},
		{name: "exception with allowed name", policy: Policy{Allow: []string{"intranet.example"}, Exceptions: []string{"10.0.0.0/8"}}, host: "intranet.example", addr: "10.0.0.1", port: 80, allow: true, reason: ReasonException, excepted: true, rule: "intranet.example"},
		{name: "exception with allowed prefix", policy: Policy{Allow: []string{"10.0.0.0/24"}, Exceptions: []string{"10.0.0.0/8"}}, addr: "10.0.0.1", port: 80, allow: true, reason: ReasonException, excepted: true, rule: "10.0.0.0/24"},
		{name: "allowed prefix without exception", policy: Policy{Allow: []string{"10.0.0.0/24"}}, addr: "10.0.0.1", port: 80, reason: ReasonPrivate},

		// Suffix patterns.
		{name: "suffix matches a subdomain", policy: Policy{Allow: []string{"*.example.com"}}, host: "a.example.com", addr: "93.184.216.34", port: 443, allow: true, reason: ReasonAllowed, rule: "*.example.com"},
		{name: "suffix matches a deeper subdomain", policy: Policy{Allow: []string{"*.example.com"}}, host: "a.b.example.com", addr: "93.184.216.34", port: 443, allow: true, reason: ReasonAllowed, rule: "*.example.com"},
		{name: "suffix does not match the apex", policy: Policy{Allow: []string{"*.example.com"}}, host: "example.com", addr: "93.184.216.34", port: 443, reason: ReasonNotAllowed},
		{name: "suffix does not match a lookalike", policy: Policy{Allow: []string{"*.example.com"}}, host: "badexample.com", addr: "93.184.216.34", port: 443, reason: ReasonNotAllowed},
		{name: "suffix does not match as a prefix", policy: Policy{Allow: []string{"*.example.com"}}, host: "example.com.evil.net", addr: "93.184.216.34", port: 443, reason: ReasonNotAllowed},
		{name: "suffix does not match a literal", policy: Policy{Allow: []string{"*.example.com"}}, addr: "93.184.216.34", port: 443, reason: ReasonNotAllowed},
		{name: "name pattern case-insensitive", policy: Policy{Allow: []string{"EXAMPLE.com."}}, host: "example.com", addr: "93.184.216.34", port: 443, allow: true, reason: ReasonAllowed, rule: "EXAMPLE.com."},
		{name: "IDN pattern", policy: Policy{Allow: []string{"bücher.example"}}, host: "xn--bcher-kva.example", addr: "93.184.216.34", port: 443, allow: true, reason: ReasonAllowed, rule: "bücher.example"},

		// Ports and ranges.
		{name: "range low end", policy: Policy{Allow: []string{"example.com:8000-8100"}}, host: "example.com", addr: "93.184.216.34", port: 8000, allow: true, reason: ReasonAllowed, rule: "example.com:8000-8100"},
		{name: "range high end", policy: Policy{Allow: []string{"example.com:8000-8100"}}, host: "example.com", addr: "93.184.216.34", port: 8100, allow: true, reason: ReasonAllowed, rule: "example.com:8000-8100"},
		{name: "below range", policy: Policy{Allow: []string{"example.com:8000-8100"}}, host: "example.com", addr: "93.184.216.34", port: 7999, reason: ReasonNotAllowed},
		{name: "above range", policy: Policy{Allow: []string{"example.com:8000-8100"}}, host: "example.com", addr: "93.184.216.34", port: 8101, reason: ReasonNotAllowed},
		{name: "any host one port", policy: Policy{Allow: []string{"*:443"}}, host: "example.com", addr: "93.184.216.34", port: 443, allow: true, reason: ReasonAllowed, rule: "*:443"},
		{name: "any host other port", policy: Policy{Allow: []string{"*:443"}}, addr: "93.184.216.34", port: 80, reason: ReasonNotAllowed},
		{name: "any port star", policy: Policy{Allow: []string{"example.com:*"}}, host: "example.com", addr: "93.184.216.34", port: 1, allow: true, reason: ReasonAllowed, rule: "example.com:*"},
		{name: "prefix with port and exception", policy: Policy{Allow: []string{"10.0.0.0/8:22"}, Exceptions: []string{"10.0.0.0/8"}}, addr: "10.1.1.1", port: 22, allow: true, reason: ReasonException, excepted: true, rule: "10.0.0.0/8:22"},
		{name: "prefix with port other port", policy: Policy{Allow: []string{"10.0.0.0/8:22"}, Exceptions: []string{"10.0.0.0/8"}}, addr: "10.1.1.1", port: 23, reason: ReasonNotAllowed},

		// IPv6 patterns.
		{name: "bracketed IPv6 with port", policy: Policy{Allow: []string{"[2606:4700::1111]:443"}}, addr: "2606:4700::1111", port: 443, allow: true, reason: ReasonAllowed, rule: "[2606:4700::1111]:443"},
		{name: "bracketed IPv6 other port", policy: Policy{Allow: []string{"[2606:4700::1111]:443"}}, addr: "2606:4700::1111", port: 80, reason: ReasonNotAllowed},
		{name: "bracketed IPv6 no port", policy: Policy{Allow: []string{"[2606:4700::1111]"}}, addr: "2606:4700::1111", port: 80, allow: true, reason: ReasonAllowed, rule: "[2606:4700::1111]"},
		{name: "unbracketed IPv6", policy: Policy{Allow: []string{"2606:4700::1111"}}, addr: "2606:4700::1111", port: 80, allow: true, reason: ReasonAllowed, rule: "2606:4700::1111"},
		{name: "unbracketed IPv6 prefix", policy: Policy{Allow: []string{"2606:4700::/32"}}, addr: "2606:4700:10::1", port: 80, allow: true, reason: ReasonAllowed, rule: "2606:4700::/32"},
		{name: "bracketed IPv6 prefix with port range", policy: Policy{Allow: []string{"[2606:4700::/32]:440-450"}}, addr: "2606:4700:10::1", port: 443, allow: true, reason: ReasonAllowed, rule: "[2606:4700::/32]:440-450"},
		{name: "bracketed IPv6 prefix outside range", policy: Policy{Allow: []string{"[2606:4700::/32]:440-450"}}, addr: "2606:4700:10::1", port: 80, reason: ReasonNotAllowed},
		{name: "IPv6 pattern does not match IPv4", policy: Policy{Allow: []string{"::ffff:8.8.8.8"}}, addr: "8.8.8.8", port: 80, reason: ReasonNotAllowed},
		{name: "IPv4 literal pattern", policy: Policy{Allow: []string{"8.8.8.8"}}, addr: "8.8.8.8", port: 53, allow: true, reason: ReasonAllowed, rule: "8.8.8.8"},
		{name: "name pattern does not match a literal", policy: Policy{Allow: []string{"example.com"}}, addr: "93.184.216.34", port: 80, reason: ReasonNotAllowed},
		{name: "name resolving to an allowed address", policy: Policy{Allow: []string{"93.184.216.0/24", "other.example"}}, host: "example.com", addr: "93.184.216.34", port: 80, allow: true, reason: ReasonAllowed, rule: "93.184.216.0/24"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := compileOrFatal(t, allLanes(tt.policy))
			a := netip.MustParseAddr(tt.addr)
			v := c.CheckAddr(LaneHTTP, tt.host, a, tt.port)
			if v.Allow != tt.allow || v.Reason != tt.reason || v.Excepted != tt.excepted || v.Rule != tt.rule || v.Addr != a {
				t.Errorf("CheckAddr(%q, %s, %d) = %+v; want allow=%v reason=%s excepted=%v rule=%q",
					tt.host, a, tt.port, v, tt.allow, tt.reason, tt.excepted, tt.rule)
			}
			// The literal path through CheckName reaches the same verdict.
			if tt.host == "" {
				w := c.CheckName(LaneHTTP, Target{Host: a.String(), Addr: a, Port: tt.port})
				if w != v {
					t.Errorf("CheckName(literal) = %+v, CheckAddr = %+v", w, v)
				}
				return
			}
			// A name refused before DNS must be refused after it too.
			if w := c.CheckName(LaneHTTP, Target{Host: tt.host, Port: tt.port}); !w.Allow && v.Allow {
				t.Errorf("CheckName refused %q (%+v) but CheckAddr allows it", tt.host, w)
			}
		})
	}
}

func TestCheckNameBeforeDNS(t *testing.T) {
	tests := []struct {
		name     string
		policy   Policy
		host     string
		port     uint16
		allow    bool
		reason   Reason
		needsDNS bool
	}{
		{"default", Policy{}, "example.com", 443, true, ReasonAllowed, true},
		{"metadata name", Policy{}, "metadata.google.internal", 80, false, ReasonMetadata, false},
		{"metadata short name", Policy{Allow: []string{"*"}}, "metadata", 80, false, ReasonMetadata, false},
		{"instance-data", Policy{}, "instance-data", 80, false, ReasonMetadata, false},
		{"deny name", Policy{Deny: []string{"*.evil.example"}}, "a.evil.example", 80, false, ReasonDenyList, false},
		{"deny prefix waits for DNS", Policy{Deny: []string{"10.0.0.0/8"}}, "a.example", 80, true, ReasonAllowed, true},
		{"names-only allow list, listed", Policy{Allow: []string{"example.com"}}, "example.com", 443, true, ReasonAllowed, true},
		{"names-only allow list, not listed", Policy{Allow: []string{"example.com"}}, "other.example", 443, false, ReasonNotAllowed, false},
		{"names-only allow list, wrong port", Policy{Allow: []string{"example.com:443"}}, "example.com", 80, false, ReasonNotAllowed, false},
		{"IP-only allow list refuses names without DNS", Policy{Allow: []string{"8.8.8.8", "1.1.1.0/24", "[2606:4700::1111]:443"}}, "example.com", 443, false, ReasonNotAllowed, false},
		{"mixed allow list may match an address", Policy{Allow: []string{"example.com", "8.8.8.8"}}, "other.example", 443, true, ReasonAllowed, true},
		{"star allow list", Policy{Allow: []string{"*:443"}}, "other.example", 443, true, ReasonAllowed, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := compileOrFatal(t, allLanes(tt.policy))
			v := c.CheckName(LaneHTTP, Target{Host: tt.host, Port: tt.port})
			if v.Allow != tt.allow || v.Reason != tt.reason || v.NeedsDNS != tt.needsDNS {
				t.Errorf("CheckName(%q) = %+v; want allow=%v reason=%s needsDNS=%v", tt.host, v, tt.allow, tt.reason, tt.needsDNS)
			}
		})
	}
}

func TestNarrow(t *testing.T) {
	base := compileOrFatal(t, allLanes(Policy{
		Deny:       []string{"evil.example", "1.2.3.0/24"},
		Exceptions: []string{"10.0.0.0/8"},
	}))
	narrowing := compileOrFatal(t, allLanes(Policy{
		Allow:      []string{"*.example.com", "10.1.1.1", "evil.example"},
		Exceptions: []string{"192.168.0.0/16", "10.1.1.1"},
	}))
	c := base.Narrow(narrowing)
	tests := []struct {
		name     string
		host     string
		addr     string
		allow    bool
		reason   Reason
		excepted bool
	}{
		{"allowed by both", "a.example.com", "93.184.216.34", true, ReasonAllowed, false},
		{"narrowing allow list applies", "other.example", "93.184.216.34", false, ReasonNotAllowed, false},
		{"narrowing exception does not lift the base floor", "a.example.com", "192.168.1.1", false, ReasonPrivate, false},
		{"base exception does not lift the narrowing floor", "a.example.com", "10.2.2.2", false, ReasonPrivate, false},
		{"excepted by both", "", "10.1.1.1", true, ReasonException, true},
		{"base deny name still applies", "evil.example", "93.184.216.34", false, ReasonDenyList, false},
		{"base deny prefix still applies", "a.example.com", "1.2.3.4", false, ReasonDenyList, false},
		{"metadata", "a.example.com", "169.254.169.254", false, ReasonMetadata, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := c.CheckAddr(LaneHTTP, tt.host, netip.MustParseAddr(tt.addr), 443)
			if v.Allow != tt.allow || v.Reason != tt.reason || v.Excepted != tt.excepted {
				t.Errorf("CheckAddr(%q, %s) = %+v; want allow=%v reason=%s excepted=%v", tt.host, tt.addr, v, tt.allow, tt.reason, tt.excepted)
			}
		})
	}
	if v := c.CheckName(LaneHTTP, Target{Host: "evil.example", Port: 443}); v.Allow || v.Reason != ReasonDenyList {
		t.Errorf("CheckName(evil.example) = %+v, want deny_list", v)
	}
	// The narrowing's allow list holds an address: names wait for DNS.
	if v := c.CheckName(LaneHTTP, Target{Host: "other.example", Port: 443}); !v.Allow || !v.NeedsDNS {
		t.Errorf("CheckName(other.example) = %+v, want allowed pending DNS", v)
	}

	// The narrowing can close lanes but not open them.
	httpOnly := compileOrFatal(t, Policy{Lanes: []Lane{LaneHTTP}})
	tcpOnly := compileOrFatal(t, Policy{Lanes: []Lane{LaneTCP}})
	pub := netip.MustParseAddr("8.8.8.8")
	if v := DefaultPolicy().MustCompile().Narrow(httpOnly).CheckAddr(LaneTCP, "", pub, 53); v.Allow || v.Reason != ReasonLane {
		t.Errorf("narrowed lane: %+v", v)
	}
	if v := httpOnly.Narrow(DefaultPolicy().MustCompile()).CheckAddr(LaneTCP, "", pub, 53); v.Allow || v.Reason != ReasonLane {
		t.Errorf("widened lane: %+v", v)
	}
	if v := httpOnly.Narrow(tcpOnly).CheckAddr(LaneHTTP, "", pub, 80); v.Allow {
		t.Errorf("disjoint lanes allow: %+v", v)
	}

	// The narrowing cannot switch on unwrapping for the base.
	unwrap := compileOrFatal(t, allLanes(Policy{UnwrapEmbeddedIPv4: true}))
	mappedPub := netip.MustParseAddr("::ffff:8.8.8.8")
	if v := DefaultPolicy().MustCompile().Narrow(unwrap).CheckAddr(LaneHTTP, "", mappedPub, 80); v.Allow || v.Reason != ReasonIPv4Embedded {
		t.Errorf("unwrap narrowing widened: %+v", v)
	}
	if v := unwrap.Narrow(DefaultPolicy().MustCompile()).CheckAddr(LaneHTTP, "", mappedPub, 80); v.Allow {
		t.Errorf("narrowing without unwrap allowed a mapped address: %+v", v)
	}

	// An IP-only narrowing refuses names before DNS.
	ipOnly := compileOrFatal(t, allLanes(Policy{Allow: []string{"8.8.8.8"}}))
	if v := DefaultPolicy().MustCompile().Narrow(ipOnly).CheckName(LaneHTTP, Target{Host: "dns.google", Port: 443}); v.Allow || v.NeedsDNS {
		t.Errorf("IP-only narrowing: CheckName(name) = %+v", v)
	}

	// Nil handling and chains.
	if got := base.Narrow(nil); got != base {
		t.Error("Narrow(nil) is not the base")
	}
	var nilChecker *Checker
	if v := nilChecker.Narrow(narrowing).CheckAddr(LaneHTTP, "", pub, 80); v.Allow {
		t.Errorf("nil base narrowed allows: %+v", v)
	}
	second := compileOrFatal(t, allLanes(Policy{Deny: []string{"b.example.com"}}))
	chain := base.Narrow(narrowing).Narrow(second)
	for host, want := range map[string]bool{"a.example.com": true, "b.example.com": false, "other.example": false, "evil.example": false} {
		if v := chain.CheckAddr(LaneHTTP, host, pub, 443); v.Allow != want {
			t.Errorf("chain %s: %+v, want allow=%v", host, v, want)
		}
	}
	// Narrowing does not change the checkers it combines.
	if v := narrowing.CheckAddr(LaneHTTP, "evil.example", pub, 443); !v.Allow {
		t.Errorf("narrowing itself changed: %+v", v)
	}
}

func TestCheckAddrs(t *testing.T) {
	addrs := func(ss ...string) []netip.Addr {
		var out []netip.Addr
		for _, s := range ss {
			out = append(out, netip.MustParseAddr(s))
		}
		return out
	}
	def := DefaultPolicy().MustCompile()
	loop4 := compileOrFatal(t, allLanes(Policy{Exceptions: []string{"127.0.0.1"}}))
	loopBoth := compileOrFatal(t, allLanes(Policy{Exceptions: []string{"127.0.0.1", "::1"}}))
	loopPrefixes := compileOrFatal(t, allLanes(Policy{Exceptions: []string{"127.0.0.0/8", "::1/128"}}))
	tests := []struct {
		name     string
		c        *Checker
		addrs    []netip.Addr
		allow    bool
		reason   Reason
		mixed    Reason
		addr     string
		excepted bool
	}{
		{"all allowed", def, addrs("8.8.8.8", "2606:4700::1111"), true, ReasonAllowed, "", "8.8.8.8", false},
		{"all denied reports the first", def, addrs("10.0.0.1", "127.0.0.1"), false, ReasonPrivate, "", "10.0.0.1", false},
		{"mixed public first", def, addrs("8.8.8.8", "10.0.0.1"), false, ReasonDNSMixed, ReasonPrivate, "10.0.0.1", false},
		{"mixed private first", def, addrs("10.0.0.1", "8.8.8.8"), false, ReasonDNSMixed, ReasonPrivate, "10.0.0.1", false},
		{"mixed metadata", def, addrs("8.8.8.8", "169.254.169.254"), false, ReasonDNSMixed, ReasonMetadata, "169.254.169.254", false},
		{"mixed mapped", def, addrs("8.8.8.8", "::ffff:8.8.8.8"), false, ReasonDNSMixed, ReasonIPv4Embedded, "::ffff:8.8.8.8", false},
		{"none", def, nil, false, ReasonDNSNoAddress, "", "", false},
		{"localhost with one exception", loop4, addrs("127.0.0.1", "::1"), false, ReasonDNSMixed, ReasonLoopback, "::1", false},
		{"localhost with both exceptions", loopBoth, addrs("127.0.0.1", "::1"), true, ReasonException, "", "127.0.0.1", true},
		{"localhost with both prefixes", loopPrefixes, addrs("::1", "127.0.0.1"), true, ReasonException, "", "::1", true},
		{"excepted and public", loop4, addrs("8.8.8.8", "127.0.0.1"), true, ReasonException, "", "8.8.8.8", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := tt.c.CheckAddrs(LaneHTTP, "localhost.example", tt.addrs, 80)
			var want netip.Addr
			if tt.addr != "" {
				want = netip.MustParseAddr(tt.addr)
			}
			if v.Allow != tt.allow || v.Reason != tt.reason || v.MixedWith != tt.mixed || v.Addr != want || v.Excepted != tt.excepted {
				t.Errorf("CheckAddrs(%v) = %+v; want allow=%v reason=%s mixed=%s addr=%v excepted=%v",
					tt.addrs, v, tt.allow, tt.reason, tt.mixed, want, tt.excepted)
			}
		})
	}
}

// TestDenyListSeesEmbeddedIPv4: with UnwrapEmbeddedIPv4 an IPv6 form of a
// denied IPv4 address must not pass where the IPv4 address itself is denied.
func TestDenyListSeesEmbeddedIPv4(t *testing.T) {
	forms := []string{"::ffff:8.8.8.8", "64:ff9b::808:808", "2002:808:808::1", "::8.8.8.8"}
	unwrap := compileOrFatal(t, allLanes(Policy{Deny: []string{"8.8.8.0/24"}, UnwrapEmbeddedIPv4: true}))
	classes := compileOrFatal(t, allLanes(Policy{Deny: []string{"8.8.8.0/24"}}))
	plain := compileOrFatal(t, allLanes(Policy{UnwrapEmbeddedIPv4: true}))
	for _, s := range forms {
		a := netip.MustParseAddr(s)
		if v := unwrap.CheckAddr(LaneHTTP, "", a, 80); v.Allow || v.Reason != ReasonDenyList {
			t.Errorf("unwrap: CheckAddr(%s) = %+v, want deny_list", a, v)
		}
		if v := classes.CheckAddr(LaneHTTP, "", a, 80); v.Allow {
			t.Errorf("classes: CheckAddr(%s) = %+v, want a denial", a, v)
		}
		if v := plain.CheckAddr(LaneHTTP, "", a, 80); !v.Allow {
			t.Errorf("unwrap without deny: CheckAddr(%s) = %+v, want allowed", a, v)
		}
	}
	if v := unwrap.CheckAddr(LaneHTTP, "", netip.MustParseAddr("::ffff:10.0.0.1"), 80); v.Allow || v.Reason != ReasonPrivate {
		t.Errorf("unwrap mapped private: %+v", v)
	}
}

func TestCompileErrors(t *testing.T) {
	tests := []struct {
		name   string
		policy Policy
		want   string // in the error text
	}{
		{"empty allow", Policy{Allow: []string{""}}, `allow ""`},
		{"blank allow", Policy{Allow: []string{"   "}}, "allow"},
		{"bad CIDR", Policy{Allow: []string{"10.0.0.0/33"}}, `allow "10.0.0.0/33"`},
		{"bad CIDR address", Policy{Deny: []string{"10.0.0/8"}}, `deny "10.0.0/8"`},
		{"port 0", Policy{Allow: []string{"example.com:0"}}, "out of range"},
		{"port 70000", Policy{Allow: []string{"example.com:70000"}}, "out of range"},
		{"bare port 70000", Policy{Allow: []string{":70000"}}, "allow"},
		{"range 9-1", Policy{Allow: []string{"example.com:9-1"}}, "empty port range"},
		{"open range", Policy{Allow: []string{"example.com:80-"}}, "allow"},
		{"non-decimal port", Policy{Allow: []string{"example.com:http"}}, "not a decimal number"},
		{"star dot alone", Policy{Allow: []string{"*."}}, `allow "*."`},
		{"star dot IP", Policy{Allow: []string{"*.127.0.0.1"}}, `allow "*.127.0.0.1"`},
		{"double star", Policy{Allow: []string{"*.*.example.com"}}, "allow"},
		{"unclosed bracket", Policy{Allow: []string{"[::1"}}, "unclosed ["},
		{"garbage after bracket", Policy{Allow: []string{"[::1]x"}}, "garbage after ]"},
		{"non-canonical IPv4", Policy{Allow: []string{"127.1"}}, "non-canonical"},
		{"space in name", Policy{Allow: []string{"exa mple.com"}}, "allow"},
		{"zone", Policy{Allow: []string{"fe80::1%eth0"}}, "allow"},
		{"name in exceptions", Policy{Exceptions: []string{"intranet.example"}}, "not a name"},
		{"suffix in exceptions", Policy{Exceptions: []string{"*.example.com"}}, "not a name"},
		{"star in exceptions", Policy{Exceptions: []string{"*"}}, "not a name"},
		{"range in exceptions", Policy{Exceptions: []string{"10.0.0.1:80-81"}}, "one port"},
		{"empty exception", Policy{Exceptions: []string{""}}, "exception"},
		{"bad lane", Policy{Lanes: []Lane{"smtp"}}, "unknown lane"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := tt.policy.Compile()
			if err == nil {
				t.Fatalf("Compile(%+v) = %v, want an error", tt.policy, c)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Compile(%+v): %q does not say %q", tt.policy, err, tt.want)
			}
			if CodeOf(err) != CodeInvalid && CodeOf(err) != CodeDenied {
				t.Errorf("Compile(%+v): code %q", tt.policy, CodeOf(err))
			}
		})
	}
	defer func() {
		if recover() == nil {
			t.Error("MustCompile did not panic")
		}
	}()
	Policy{Allow: []string{"*."}}.MustCompile()
}

func TestCompileAccepts(t *testing.T) {
	for _, p := range []string{
		"*", "*:443", "*:8000-8100", "example.com", "EXAMPLE.COM.", "*.example.com", "*.example.com:443",
		"bücher.example", "8.8.8.8", "8.8.8.8:53", "10.0.0.0/8", "10.0.0.1/8", "10.0.0.0/8:22",
		"::1", "[::1]", "[::1]:53", "2001:db8::/32", "[2001:db8::/32]:443", "example.com:*", " example.com ",
	} {
		if _, err := (Policy{Allow: []string{p}, Deny: []string{p}}).Compile(); err != nil {
			t.Errorf("Compile(%q): %v", p, err)
		}
	}
	for _, p := range []string{"10.0.0.0/8", "10.0.0.1", "10.0.0.1:8080", "[fd00::1]:443", "fd00::/8", "127.0.0.1:*"} {
		if _, err := (Policy{Exceptions: []string{p}}).Compile(); err != nil {
			t.Errorf("Compile(exception %q): %v", p, err)
		}
	}
}

func TestCheckAddrDoesNotAllocate(t *testing.T) {
	c := compileOrFatal(t, allLanes(Policy{
		Allow:      []string{"*.example.com", "93.184.216.0/24", "[2606:4700::/32]:443", "10.0.0.0/8"},
		Deny:       []string{"bad.example.com", "203.0.113.0/24"},
		Exceptions: []string{"10.0.0.0/8"},
	}))
	u := compileOrFatal(t, allLanes(Policy{Deny: []string{"203.0.113.0/24"}, UnwrapEmbeddedIPv4: true}))
	for _, s := range []string{"93.184.216.34", "10.1.1.1", "127.0.0.1", "169.254.169.254", "2606:4700::1111", "::ffff:10.0.0.1", "2002:a00:1::", "64:ff9b:1::a00:1", "2001:0:4136:e378:8000:63bf:f5ff:fffe"} {
		a := netip.MustParseAddr(s)
		for _, chk := range []*Checker{c, u} {
			if n := testing.AllocsPerRun(100, func() { chk.CheckAddr(LaneHTTP, "a.example.com", a, 443) }); n != 0 {
				t.Errorf("CheckAddr(%s) allocates %v times", a, n)
			}
		}
	}
}

func TestVerdictString(t *testing.T) {
	for v, want := range map[Verdict]string{
		{Allow: true, Reason: ReasonAllowed}:                   "allow allowed",
		{Reason: ReasonDenyList, Rule: "*.example.com"}:        `deny deny_list ("*.example.com")`,
		{Allow: true, Reason: ReasonException, Excepted: true}: "allow exception",
		{Reason: ReasonDNSMixed, MixedWith: ReasonLoopback}:    "deny dns_mixed",
		{}: "deny ",
	} {
		if got := v.String(); got != want {
			t.Errorf("%+v.String() = %q, want %q", v, got, want)
		}
	}
}
