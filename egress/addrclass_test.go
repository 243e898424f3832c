package egress

import (
	"math/rand/v2"
	"net/netip"
	"testing"

	"code.dny.dev/ssrf"
)

// lastOf returns the last address of p.
func lastOf(p netip.Prefix) netip.Addr {
	p = p.Masked()
	b := p.Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// rfc6052 embeds v4 in the IPv6 prefix p the way RFC 6052 section 2.2 does
// for prefix lengths 32, 40, 48, 56, 64 and 96 (bits 64-71 stay zero).
func rfc6052(p netip.Prefix, v4 netip.Addr) netip.Addr {
	b := p.Masked().Addr().As16()
	v := v4.As4()
	pos := p.Bits() / 8
	for _, c := range v {
		if pos == 8 {
			pos++ // the u octet
		}
		b[pos] = c
		pos++
	}
	return netip.AddrFrom16(b)
}

// teredo builds a Teredo address: server IPv4, flags, obfuscated port and
// obfuscated client IPv4 (RFC 4380).
func teredo(server, client netip.Addr) netip.Addr {
	var b [16]byte
	b[0], b[1] = 0x20, 0x01
	s, c := server.As4(), client.As4()
	copy(b[4:8], s[:])
	b[8], b[9] = 0x80, 0x00
	b[10], b[11] = 0x63, 0xbf // port 40000 obfuscated
	for i := range 4 {
		b[12+i] = ^c[i]
	}
	return netip.AddrFrom16(b)
}

func sixToFour(v4 netip.Addr) netip.Addr {
	var b [16]byte
	b[0], b[1] = 0x20, 0x02
	v := v4.As4()
	copy(b[2:6], v[:])
	b[15] = 1
	return netip.AddrFrom16(b)
}

func compat(v4 netip.Addr) netip.Addr {
	var b [16]byte
	v := v4.As4()
	copy(b[12:], v[:])
	return netip.AddrFrom16(b)
}

func mapped(v4 netip.Addr) netip.Addr { return netip.AddrFrom16(v4.As16()) }

var (
	nat64WKP      = netip.MustParsePrefix("64:ff9b::/96")
	nat64LocalUse = netip.MustParsePrefix("64:ff9b:1::/48")
	teredoServer  = netip.MustParseAddr("65.54.227.120") // a public Teredo server
)

func TestClassifyBoundaries(t *testing.T) {
	tests := []struct {
		addr string
		want Reason
	}{
		// 0.0.0.0/8
		{"0.0.0.0", ReasonUnspecified},
		{"0.0.0.1", ReasonUnspecified},
		{"0.255.255.255", ReasonUnspecified},
		{"1.0.0.0", ""},
		// 10/8
		{"9.255.255.255", ""},
		{"10.0.0.0", ReasonPrivate},
		{"10.255.255.255", ReasonPrivate},
		{"11.0.0.0", ""},
		// 100.64/10
		{"100.63.255.255", ""},
		{"100.64.0.0", ReasonCGNAT},
		{"100.127.255.255", ReasonCGNAT},
		{"100.128.0.0", ""},
		{"100.100.100.199", ReasonCGNAT},
		{"100.100.100.200", ReasonMetadata},
		{"100.100.100.201", ReasonCGNAT},
		// 127/8
		{"126.255.255.255", ""},
		{"127.0.0.0", ReasonLoopback},
		{"127.0.0.1", ReasonLoopback},
		{"127.255.255.255", ReasonLoopback},
		{"128.0.0.0", ""},
		// 169.254/16
		{"169.253.255.255", ""},
		{"169.254.0.0", ReasonLinkLocal},
		{"169.254.169.253", ReasonLinkLocal},
		{"169.254.169.254", ReasonMetadata},
		{"169.254.169.255", ReasonLinkLocal},
		{"169.254.170.1", ReasonLinkLocal},
		{"169.254.170.2", ReasonMetadata},
		{"169.254.255.255", ReasonLinkLocal},
		{"169.255.0.0", ""},
		// 172.16/12
		{"172.15.255.255", ""},
		{"172.16.0.0", ReasonPrivate},
		{"172.31.255.255", ReasonPrivate},
		{"172.32.0.0", ""},
		// 192.0.0/24 and 192.0.2/24
		{"191.255.255.255", ""},
		{"192.0.0.0", ReasonReserved},
		{"192.0.0.191", ReasonReserved},
		{"192.0.0.192", ReasonMetadata},
		{"192.0.0.255", ReasonReserved},
		{"192.0.1.0", ""},
		{"192.0.1.255", ""},
		{"192.0.2.0", ReasonDocumentation},
		{"192.0.2.255", ReasonDocumentation},
		{"192.0.3.0", ""},
		// AS112-v4, AMT, 6to4 relay, AS112 direct delegation
		{"192.31.195.255", ""},
		{"192.31.196.0", ReasonReserved},
		{"192.31.196.255", ReasonReserved},
		{"192.31.197.0", ""},
		{"192.52.192.255", ""},
		{"192.52.193.0", ReasonReserved},
		{"192.52.193.255", ReasonReserved},
		{"192.52.194.0", ""},
		{"192.88.98.255", ""},
		{"192.88.99.0", ReasonReserved},
		{"192.88.99.255", ReasonReserved},
		{"192.88.100.0", ""},
		{"192.175.47.255", ""},
		{"192.175.48.0", ReasonReserved},
		{"192.175.48.255", ReasonReserved},
		{"192.175.49.0", ""},
		// 192.168/16
		{"192.167.255.255", ""},
		{"192.168.0.0", ReasonPrivate},
		{"192.168.255.255", ReasonPrivate},
		{"192.169.0.0", ""},
		// 198.18/15
		{"198.17.255.255", ""},
		{"198.18.0.0", ReasonBenchmarking},
		{"198.19.255.255", ReasonBenchmarking},
		{"198.20.0.0", ""},
		// TEST-NET-2 and -3
		{"198.51.99.255", ""},
		{"198.51.100.0", ReasonDocumentation},
		{"198.51.100.255", ReasonDocumentation},
		{"198.51.101.0", ""},
		{"203.0.112.255", ""},
		{"203.0.113.0", ReasonDocumentation},
		{"203.0.113.255", ReasonDocumentation},
		{"203.0.114.0", ""},
		// Azure WireServer in public space
		{"168.63.129.15", ""},
		{"168.63.129.16", ReasonMetadata},
		{"168.63.129.17", ""},
		// 224/4, 240/4, broadcast
		{"223.255.255.255", ""},
		{"224.0.0.0", ReasonMulticast},
		{"239.255.255.255", ReasonMulticast},
		{"240.0.0.0", ReasonReserved},
		{"255.255.255.254", ReasonReserved},
		{"255.255.255.255", ReasonBroadcast},
		// public IPv4
		{"8.8.8.8", ""},
		{"1.1.1.1", ""},
		{"9.9.9.9", ""},
		{"93.184.216.34", ""},

		// IPv6 outside 2000::/3
		{"::", ReasonUnspecified},
		{"::1", ReasonLoopback},
		{"::2", ReasonIPv4Embedded},
		{"::ffff:ffff", ReasonIPv4Embedded},
		{"::1:0:0", ReasonReserved},
		{"::fffe:ffff:ffff", ReasonReserved},
		{"::ffff:0:0", ReasonIPv4Embedded},
		{"::ffff:ffff:ffff", ReasonIPv4Embedded},
		{"::1:0:0:0", ReasonReserved},
		{"::ffff:0:7f00:1", ReasonReserved}, // SIIT IPv4-translated: outside 2000::/3
		{"64:ff9a:ffff:ffff:ffff:ffff:ffff:ffff", ReasonReserved},
		{"64:ff9b::", ReasonIPv4Embedded},
		{"64:ff9b::ffff:ffff", ReasonIPv4Embedded},
		{"64:ff9b::1:0:0", ReasonReserved},
		{"64:ff9b:0:ffff:ffff:ffff:ffff:ffff", ReasonReserved},
		{"64:ff9b:1::", ReasonIPv4Embedded},
		{"64:ff9b:1:ffff:ffff:ffff:ffff:ffff", ReasonIPv4Embedded},
		{"64:ff9b:2::", ReasonReserved},
		{"100::", ReasonReserved},
		{"100::ffff:ffff:ffff:ffff", ReasonReserved},
		{"100:0:0:1::", ReasonReserved},
		{"fbff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", ReasonReserved},
		{"fc00::", ReasonPrivate},
		{"fd00:ec2::253", ReasonPrivate},
		{"fd00:ec2::254", ReasonMetadata},
		{"fd00:ec2::255", ReasonPrivate},
		{"fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", ReasonPrivate},
		{"fe00::", ReasonReserved},
		{"fe7f:ffff:ffff:ffff:ffff:ffff:ffff:ffff", ReasonReserved},
		{"fe80::", ReasonLinkLocal},
		{"fe80::1", ReasonLinkLocal},
		{"febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff", ReasonLinkLocal},
		{"fec0::", ReasonPrivate},
		{"feff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", ReasonPrivate},
		{"ff00::", ReasonMulticast},
		{"ff02::1", ReasonMulticast},
		{"ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", ReasonMulticast},
		// 2000::/3 boundaries
		{"1fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", ReasonReserved},
		{"2000::", ""},
		{"3fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", ""},
		{"4000::", ReasonReserved},
		// inside 2000::/3
		{"2000:ffff:ffff:ffff:ffff:ffff:ffff:ffff", ""},
		{"2001::", ReasonIPv4Embedded},
		{"2001:0:ffff:ffff:ffff:ffff:ffff:ffff", ReasonIPv4Embedded},
		{"2001:1::", ReasonReserved},
		{"2001:1ff:ffff:ffff:ffff:ffff:ffff:ffff", ReasonReserved},
		{"2001:200::", ""},
		{"2001:db7:ffff:ffff:ffff:ffff:ffff:ffff", ""},
		{"2001:db8::", ReasonDocumentation},
		{"2001:db8:ffff:ffff:ffff:ffff:ffff:ffff", ReasonDocumentation},
		{"2001:db9::", ""},
		{"2001:ffff:ffff:ffff:ffff:ffff:ffff:ffff", ""},
		{"2002::", ReasonIPv4Embedded},
		{"2002:ffff:ffff:ffff:ffff:ffff:ffff:ffff", ReasonIPv4Embedded},
		{"2003::", ""},
		{"2620:4f:7fff:ffff:ffff:ffff:ffff:ffff", ""},
		{"2620:4f:8000::", ReasonReserved},
		{"2620:4f:8000:ffff:ffff:ffff:ffff:ffff", ReasonReserved},
		{"2620:4f:8001::", ""},
		{"3ffe:ffff:ffff:ffff:ffff:ffff:ffff:ffff", ""},
		{"3fff::", ReasonDocumentation},
		{"3fff:fff:ffff:ffff:ffff:ffff:ffff:ffff", ReasonDocumentation},
		{"3fff:1000::", ""},
		// public IPv6
		{"2606:4700::1111", ""},
		{"2001:4860:4860::8888", ""},
	}
	for _, tt := range tests {
		a := netip.MustParseAddr(tt.addr)
		if got := Classify(a); got != tt.want {
			t.Errorf("Classify(%s) = %q, want %q", a, got, tt.want)
		}
		// Unwrapping changes nothing for addresses that carry no IPv4.
		if tt.want != ReasonIPv4Embedded {
			if got := ClassifyUnwrapped(a); got != tt.want {
				t.Errorf("ClassifyUnwrapped(%s) = %q, want %q", a, got, tt.want)
			}
		}
	}
}

func TestClassifyZoneAndInvalid(t *testing.T) {
	if got := Classify(netip.MustParseAddr("fe80::1%eth0")); got != ReasonLinkLocal {
		t.Errorf("Classify(fe80::1%%eth0) = %q", got)
	}
	if got := Classify(netip.MustParseAddr("2606:4700::1111%eth0")); got != "" {
		t.Errorf("Classify(2606:4700::1111%%eth0) = %q", got)
	}
	if got := Classify(netip.Addr{}); got == "" {
		t.Errorf("Classify(invalid) allowed")
	}
}

// TestFloorTableEntries walks the named table itself: the first and last
// address of every entry is denied, with the entry's reason or that of a
// more specific entry listed before it (or metadata).
func TestFloorTableEntries(t *testing.T) {
	if FloorSource == "" {
		t.Fatal("FloorSource is empty")
	}
	for i, e := range floorNamed {
		for _, a := range []netip.Addr{e.prefix.Addr(), lastOf(e.prefix)} {
			got := Classify(a)
			if got == "" {
				t.Errorf("%s (%s, %s): %s is allowed", e.prefix, e.reason, e.note, a)
				continue
			}
			want := e.reason
			for _, earlier := range floorNamed[:i] {
				if earlier.prefix.Contains(a) && earlier.prefix.Bits() > e.prefix.Bits() {
					want = earlier.reason
					break
				}
			}
			if IsMetadata(a) {
				want = ReasonMetadata
			}
			if got != want {
				t.Errorf("%s: Classify(%s) = %q, want %q", e.prefix, a, got, want)
			}
		}
	}
}

// TestFloorCoversGenerated proves the floor is never narrower than the IANA
// registries as generated into code.dny.dev/ssrf.
func TestFloorCoversGenerated(t *testing.T) {
	prefixes := append([]netip.Prefix{}, ssrf.IPv4DeniedPrefixes...)
	prefixes = append(prefixes, ssrf.IPv6DeniedPrefixes...)
	prefixes = append(prefixes, ssrf.IPv6NAT64Prefix)
	if len(prefixes) < 20 {
		t.Fatalf("only %d generated prefixes", len(prefixes))
	}
	for _, p := range prefixes {
		for _, a := range []netip.Addr{p.Addr(), lastOf(p)} {
			if r := Classify(a); r == "" {
				t.Errorf("generated prefix %s: Classify(%s) allows it", p, a)
			}
			if r := ClassifyUnwrapped(a); r == "" && !p.Contains(netip.MustParseAddr("64:ff9b::")) &&
				!netip.MustParsePrefix("2001::/32").Contains(a) && !netip.MustParsePrefix("2002::/16").Contains(a) {
				t.Errorf("generated prefix %s: ClassifyUnwrapped(%s) allows it", p, a)
			}
		}
	}
	// Everything outside 2000::/3 is denied: every /8's first and last
	// address and a deterministic sample in between.
	global := ssrf.IPv6GlobalUnicast
	for hi := 0; hi < 256; hi++ {
		var b [16]byte
		b[0] = byte(hi)
		first := netip.AddrFrom16(b)
		last := lastOf(netip.PrefixFrom(first, 8))
		for _, a := range []netip.Addr{first, last} {
			if global.Contains(a) {
				continue
			}
			if Classify(a) == "" || ClassifyUnwrapped(a) == "" {
				t.Errorf("%s is outside 2000::/3 but allowed", a)
			}
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		var b [16]byte
		for i := range b {
			b[i] = byte(rng.UintN(256))
		}
		a := netip.AddrFrom16(b)
		if global.Contains(a) {
			continue
		}
		if Classify(a) == "" {
			t.Fatalf("%s is outside 2000::/3 but allowed", a)
		}
		if ClassifyUnwrapped(a) == "" && !a.Is4In6() && !nat64WKP.Contains(a) && !nat64LocalUse.Contains(a) &&
			!netip.MustParsePrefix("::/96").Contains(a) {
			t.Fatalf("%s is outside 2000::/3 but allowed unwrapped", a)
		}
	}
}

func TestClassifyEmbedded(t *testing.T) {
	private := netip.MustParseAddr("10.0.0.1")
	loop := netip.MustParseAddr("127.0.0.1")
	public := netip.MustParseAddr("8.8.8.8")
	tests := []struct {
		name      string
		addr      netip.Addr
		unwrapped Reason // ClassifyUnwrapped; Classify is always ipv4_embedded
	}{
		{"mapped private", mapped(private), ReasonPrivate},
		{"mapped loopback", mapped(loop), ReasonLoopback},
		{"mapped public", mapped(public), ""},
		{"compatible private", compat(private), ReasonPrivate},
		{"compatible loopback", compat(loop), ReasonLoopback},
		{"compatible public", compat(public), ""},
		{"NAT64 private", rfc6052(nat64WKP, private), ReasonPrivate},
		{"NAT64 literal 64:ff9b::a00:1", netip.MustParseAddr("64:ff9b::a00:1"), ReasonPrivate},
		{"NAT64 loopback", rfc6052(nat64WKP, loop), ReasonLoopback},
		{"NAT64 public", netip.MustParseAddr("64:ff9b::808:808"), ""},
		{"NAT64 local-use /48 private", rfc6052(nat64LocalUse, private), ReasonPrivate},
		{"NAT64 local-use /56 private", rfc6052(netip.MustParsePrefix("64:ff9b:1:0800::/56"), netip.MustParseAddr("192.168.1.1")), ReasonPrivate},
		// Every other RFC 6052 reading of this one is public (8.192.168.1,
		// 168.1.1.8, 8.8.8.8); under a /56 prefix it is 192.168.1.1.
		{"NAT64 local-use /56 private, public elsewhere", netip.MustParseAddr("64:ff9b:1:8c0:a8:101:808:808"), ReasonPrivate},
		{"NAT64 local-use /64 private", rfc6052(netip.MustParsePrefix("64:ff9b:1:808::/64"), netip.MustParseAddr("172.16.8.8")), ReasonPrivate},
		{"NAT64 local-use /96 private", rfc6052(netip.MustParsePrefix("64:ff9b:1:808:808:808::/96"), private), ReasonPrivate},
		{"6to4 private", netip.MustParseAddr("2002:0a00:0001::"), ReasonPrivate},
		{"6to4 loopback", sixToFour(loop), ReasonLoopback},
		{"6to4 public", netip.MustParseAddr("2002:0808:0808::1"), ""},
		{"Teredo private client", teredo(teredoServer, private), ReasonPrivate},
		{"Teredo loopback client", teredo(teredoServer, loop), ReasonLoopback},
		{"Teredo private server", teredo(private, public), ReasonPrivate},
		{"Teredo public", teredo(teredoServer, public), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Classify(tt.addr); got != ReasonIPv4Embedded {
				t.Errorf("Classify(%s) = %q, want %q", tt.addr, got, ReasonIPv4Embedded)
			}
			if got := ClassifyUnwrapped(tt.addr); got != tt.unwrapped {
				t.Errorf("ClassifyUnwrapped(%s) = %q, want %q", tt.addr, got, tt.unwrapped)
			}
		})
	}
}

// TestClassifyEmbeddedLocalUseIsConservative: in 64:ff9b:1::/48 the prefix
// length is the operator's choice, so unwrapping reads the IPv4 at every
// RFC 6052 position and denies when any reading is internal.
func TestClassifyEmbeddedLocalUseIsConservative(t *testing.T) {
	// 8.8.8.8 at /96 reads 0.0.0.0 at /48: not allowed.
	a := rfc6052(netip.MustParsePrefix("64:ff9b:1::/96"), netip.MustParseAddr("8.8.8.8"))
	if got := ClassifyUnwrapped(a); got == "" {
		t.Errorf("ClassifyUnwrapped(%s) allowed", a)
	}
	// A public address whose every reading is public is allowed.
	b := netip.MustParseAddr("64:ff9b:1:808:8:808:808:808")
	if got := ClassifyUnwrapped(b); got != "" {
		t.Errorf("ClassifyUnwrapped(%s) = %q, want allowed", b, got)
	}
}

func TestMetadataInEveryEmbedding(t *testing.T) {
	for _, m := range metadataAddrs {
		forms := []netip.Addr{m}
		if m.Is4() {
			forms = append(forms,
				mapped(m), compat(m), rfc6052(nat64WKP, m), sixToFour(m),
				teredo(teredoServer, m), teredo(m, netip.MustParseAddr("8.8.8.8")),
			)
			for _, bits := range []int{48, 56, 64, 96} {
				forms = append(forms, rfc6052(netip.PrefixFrom(nat64LocalUse.Addr(), bits), m))
			}
		}
		for _, a := range forms {
			if !IsMetadata(a) {
				t.Errorf("IsMetadata(%s) = false (embedding %s)", a, m)
			}
			if got := Classify(a); got != ReasonMetadata {
				t.Errorf("Classify(%s) = %q, want metadata (embedding %s)", a, got, m)
			}
			if got := ClassifyUnwrapped(a); got != ReasonMetadata {
				t.Errorf("ClassifyUnwrapped(%s) = %q, want metadata (embedding %s)", a, got, m)
			}
		}
	}
	for _, s := range []string{"169.254.169.253", "168.63.129.17", "fd00:ec2::253", "::ffff:8.8.8.8"} {
		if IsMetadata(netip.MustParseAddr(s)) {
			t.Errorf("IsMetadata(%s) = true", s)
		}
	}
}

func TestRFC6052Helper(t *testing.T) {
	// RFC 6052 section 2.4 examples for 192.0.2.33.
	v4 := netip.MustParseAddr("192.0.2.33")
	for _, tt := range []struct{ prefix, want string }{
		{"2001:db8::/32", "2001:db8:c000:221::"},
		{"2001:db8:100::/40", "2001:db8:1c0:2:21::"},
		{"2001:db8:122::/48", "2001:db8:122:c000:2:2100::"},
		{"2001:db8:122:300::/56", "2001:db8:122:3c0:0:221::"},
		{"2001:db8:122:344::/64", "2001:db8:122:344:c0:2:2100:0"},
		{"2001:db8:122:344::/96", "2001:db8:122:344::192.0.2.33"},
	} {
		if got := rfc6052(netip.MustParsePrefix(tt.prefix), v4); got != netip.MustParseAddr(tt.want) {
			t.Errorf("rfc6052(%s) = %s, want %s", tt.prefix, got, tt.want)
		}
	}
}
