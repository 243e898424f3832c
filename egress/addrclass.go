package egress

import (
	"net/netip"

	"code.dny.dev/ssrf"
)

// The floor: every address the IANA IPv4 and IPv6 Special-Purpose Address
// Registries mark as not globally reachable, plus the cloud metadata
// addresses that sit in public space.
//
// Source and date: FloorSource. The IANA registries as generated into
// code.dny.dev/ssrf v0.3.0 are taken as the set of denied prefixes at init;
// the table below names a reason for each and adds what the generated set
// lacks (cloud metadata,
// NAT64 local-use 64:ff9b:1::/48, the IPv6 classes outside 2000::/3, and the
// IPv4-embedding IPv6 forms). TestFloorCoversGenerated proves the floor is a
// superset of the generated registry set, so the table is never narrower than
// the registries even where a reason is named by hand.
const FloorSource = "IANA IPv4/IPv6 Special-Purpose Address Registries via code.dny.dev/ssrf v0.3.0 (generated), reviewed 2026-11-22"

type floorEntry struct {
	prefix netip.Prefix
	reason Reason
	note   string
}

// floorNamed gives the reason for each registry prefix (most specific first
// where they nest) and the additions.
var floorNamed = []floorEntry{
	// IPv4
	{pfx("0.0.0.0/32"), ReasonUnspecified, "unspecified"},
	{pfx("0.0.0.0/8"), ReasonUnspecified, "this network, RFC 791"},
	{pfx("10.0.0.0/8"), ReasonPrivate, "RFC 1918"},
	{pfx("100.64.0.0/10"), ReasonCGNAT, "shared address space, RFC 6598"},
	{pfx("127.0.0.0/8"), ReasonLoopback, "RFC 1122"},
	{pfx("169.254.0.0/16"), ReasonLinkLocal, "RFC 3927"},
	{pfx("172.16.0.0/12"), ReasonPrivate, "RFC 1918"},
	{pfx("192.0.0.0/24"), ReasonReserved, "IETF protocol assignments, RFC 6890"},
	{pfx("192.0.2.0/24"), ReasonDocumentation, "TEST-NET-1, RFC 5737"},
	{pfx("192.31.196.0/24"), ReasonReserved, "AS112-v4, RFC 7535"},
	{pfx("192.52.193.0/24"), ReasonReserved, "AMT, RFC 7450"},
	{pfx("192.88.99.0/24"), ReasonReserved, "6to4 relay anycast (deprecated), RFC 7526"},
	{pfx("192.168.0.0/16"), ReasonPrivate, "RFC 1918"},
	{pfx("192.175.48.0/24"), ReasonReserved, "direct delegation AS112, RFC 7534"},
	{pfx("198.18.0.0/15"), ReasonBenchmarking, "RFC 2544"},
	{pfx("198.51.100.0/24"), ReasonDocumentation, "TEST-NET-2, RFC 5737"},
	{pfx("203.0.113.0/24"), ReasonDocumentation, "TEST-NET-3, RFC 5737"},
	{pfx("224.0.0.0/4"), ReasonMulticast, "RFC 1112"},
	{pfx("255.255.255.255/32"), ReasonBroadcast, "limited broadcast, RFC 919"},
	{pfx("240.0.0.0/4"), ReasonReserved, "reserved for future use, RFC 1112"},

	// IPv6 outside 2000::/3 (all of it is denied; these name the reason).
	{pfx("::/128"), ReasonUnspecified, "RFC 4291"},
	{pfx("::1/128"), ReasonLoopback, "RFC 4291"},
	{pfx("::ffff:0:0/96"), ReasonIPv4Embedded, "IPv4-mapped, RFC 4291"},
	{pfx("::/96"), ReasonIPv4Embedded, "IPv4-compatible (deprecated), RFC 4291"},
	{pfx("64:ff9b::/96"), ReasonIPv4Embedded, "NAT64 well-known prefix, RFC 6052"},
	{pfx("64:ff9b:1::/48"), ReasonIPv4Embedded, "NAT64 local-use, RFC 8215"},
	{pfx("100::/64"), ReasonReserved, "discard-only, RFC 6666"},
	{pfx("fc00::/7"), ReasonPrivate, "unique local, RFC 4193"},
	{pfx("fe80::/10"), ReasonLinkLocal, "RFC 4291"},
	{pfx("fec0::/10"), ReasonPrivate, "site-local (deprecated), RFC 3879"},
	{pfx("ff00::/8"), ReasonMulticast, "RFC 4291"},
	{pfx("::/0"), ReasonReserved, "outside global unicast 2000::/3"},

	// IPv6 inside 2000::/3 that the registries mark.
	{pfx("2001::/32"), ReasonIPv4Embedded, "Teredo, RFC 4380"},
	{pfx("2001:db8::/32"), ReasonDocumentation, "RFC 3849"},
	{pfx("2001::/23"), ReasonReserved, "IETF protocol assignments, RFC 2928"},
	{pfx("2002::/16"), ReasonIPv4Embedded, "6to4, RFC 3056"},
	{pfx("2620:4f:8000::/48"), ReasonReserved, "direct delegation AS112, RFC 7534"},
	{pfx("3fff::/20"), ReasonDocumentation, "RFC 9637"},
}

// metadataAddrs are the cloud metadata services. They are denied before the
// floor and can never be excepted, in any form (mapped, NAT64, 6to4, ...).
var metadataAddrs = []netip.Addr{
	netip.MustParseAddr("169.254.169.254"), // AWS, GCP, Azure IMDS, OpenStack, DigitalOcean, ...
	netip.MustParseAddr("169.254.170.2"),   // AWS ECS task metadata
	netip.MustParseAddr("168.63.129.16"),   // Azure WireServer
	netip.MustParseAddr("192.0.0.192"),     // Oracle Cloud
	netip.MustParseAddr("100.100.100.200"), // Alibaba Cloud
	netip.MustParseAddr("fd00:ec2::254"),   // AWS IMDS over IPv6
	netip.MustParseAddr("169.254.170.23"),  // AWS EKS Pod Identity agent
	netip.MustParseAddr("fd00:ec2::23"),    // AWS EKS Pod Identity agent over IPv6
	netip.MustParseAddr("fd20:ce::254"),    // Google Cloud metadata over IPv6
	netip.MustParseAddr("169.254.0.23"),    // Tencent Cloud (metadata.tencentyun.com)
	netip.MustParseAddr("169.254.42.42"),   // Scaleway
	netip.MustParseAddr("fd00:42::42"),     // Scaleway over IPv6
}

// metadataNames are metadata host names, refused before any DNS lookup.
var metadataNames = map[string]bool{
	"metadata.google.internal":     true,
	"metadata.goog":                true,
	"metadata":                     true,
	"instance-data":                true,
	"instance-data.ec2.internal":   true,
	"metadata.azure.com":           true,
	"metadata.platformequinix.com": true,
	"metadata.packet.net":          true, // Equinix Metal's former name
	"metadata.tencentyun.com":      true,
}

func pfx(s string) netip.Prefix { return netip.MustParsePrefix(s) }

// v4 floor as masked uint32 ranges for a cheap scan; v6 as prefixes.
type v4range struct {
	base, mask uint32
	reason     Reason
}

var (
	floor4 []v4range
	floor6 []floorEntry
	// floor6 split by the space an entry can match, so that a global
	// unicast address scans only the entries inside 2000::/3.
	floor6Global, floor6Other []floorEntry
	meta4                     []uint32
	meta6                     []netip.Addr
)

func init() {
	for _, e := range floorNamed {
		if e.prefix.Addr().Is4() {
			floor4 = append(floor4, v4range{base: u32(e.prefix.Addr()), mask: maskBits(e.prefix.Bits()), reason: e.reason})
		} else {
			addFloor6(e)
		}
	}
	// Anything the generated registry set holds that the named table misses
	// is still denied, as reserved.
	for _, p := range ssrf.IPv4DeniedPrefixes {
		if classify4(u32(p.Addr())) == "" {
			floor4 = append(floor4, v4range{base: u32(p.Addr()), mask: maskBits(p.Bits()), reason: ReasonReserved})
		}
	}
	for _, p := range ssrf.IPv6DeniedPrefixes {
		if classify6raw(p.Addr()) == "" {
			addFloor6(floorEntry{prefix: p, reason: ReasonReserved, note: "generated"})
		}
	}
	for _, a := range metadataAddrs {
		if a.Is4() {
			meta4 = append(meta4, u32(a))
		} else {
			meta6 = append(meta6, a)
		}
	}
}

var globalUnicast = pfx("2000::/3")

func addFloor6(e floorEntry) {
	floor6 = append(floor6, e)
	if e.prefix.Bits() == 0 {
		return // the catch-all is applied in classify6raw
	}
	if e.prefix.Overlaps(globalUnicast) {
		floor6Global = append(floor6Global, e)
	}
	if e.prefix.Bits() < globalUnicast.Bits() || !globalUnicast.Contains(e.prefix.Addr()) {
		floor6Other = append(floor6Other, e)
	}
}

func u32(a netip.Addr) uint32 {
	b := a.As4()
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

func maskBits(bits int) uint32 {
	if bits == 0 {
		return 0
	}
	return ^uint32(0) << (32 - bits)
}

func classify4(v uint32) Reason {
	for _, r := range floor4 {
		if v&r.mask == r.base {
			return r.reason
		}
	}
	return ""
}

// classify6raw classifies a 16-byte address without unwrapping.
func classify6raw(a netip.Addr) Reason {
	if a.Is4In6() {
		return ReasonIPv4Embedded
	}
	global := a.As16()[0]&0xe0 == 0x20 // 2000::/3
	entries := floor6Other
	if global {
		entries = floor6Global
	}
	for _, e := range entries {
		if e.prefix.Contains(a) {
			return e.reason
		}
	}
	if !global {
		return ReasonReserved
	}
	return ""
}

var (
	prefixCompat   = pfx("::/96")
	prefixNAT64    = pfx("64:ff9b::/96")
	prefixNAT64Loc = pfx("64:ff9b:1::/48")
	prefix6to4     = pfx("2002::/16")
	prefixTeredo   = pfx("2001::/32")
)

// embeddedIPv4 returns the IPv4 addresses an IPv6 address carries under the
// embedding forms we know: mapped, compatible, NAT64 (both prefixes, every
// RFC 6052 position for local-use), 6to4 and Teredo (server and client).
// The first n entries of out are set; an array keeps the checker's hot path
// free of allocations.
func embeddedIPv4(a netip.Addr) (out [4]netip.Addr, n int) {
	b := a.As16()
	v4 := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{b[i], b[i+1], b[i+2], b[i+3]}) }
	switch {
	case a.Is4In6():
		out[0], n = a.Unmap(), 1
	case prefixCompat.Contains(a):
		out[0], n = v4(12), 1
	case prefixNAT64.Contains(a):
		out[0], n = v4(12), 1
	case prefixNAT64Loc.Contains(a):
		// RFC 6052 positions for /48 (bits 48-63 and 72-87), /56 (bits
		// 56-63 and 72-95), /64 and /96: the operator picks the length.
		out[0] = netip.AddrFrom4([4]byte{b[6], b[7], b[9], b[10]})
		out[1] = netip.AddrFrom4([4]byte{b[7], b[9], b[10], b[11]})
		out[2], out[3], n = v4(9), v4(12), 4
	case prefix6to4.Contains(a):
		out[0], n = v4(2), 1
	case prefixTeredo.Contains(a):
		out[0], out[1], n = v4(4), netip.AddrFrom4([4]byte{^b[12], ^b[13], ^b[14], ^b[15]}), 2
	}
	return out, n
}

// Classify returns the floor class of a, or "" when a is globally reachable.
// IPv6 forms that embed an IPv4 address are ReasonIPv4Embedded as a class;
// see ClassifyUnwrapped for the operator option. Metadata addresses report
// ReasonMetadata.
func Classify(a netip.Addr) Reason { return classify(a, false) }

// ClassifyUnwrapped is Classify with embedded IPv4 addresses unwrapped and
// re-checked instead of denied as a class: a 6to4 or NAT64 address of a
// public IPv4 address is allowed, one of a private address is not.
func ClassifyUnwrapped(a netip.Addr) Reason { return classify(a, true) }

// IsMetadata reports whether a is a cloud metadata address, in any
// embedding.
func IsMetadata(a netip.Addr) bool {
	if a.Is4() {
		v := u32(a)
		for _, m := range meta4 {
			if v == m {
				return true
			}
		}
		return false
	}
	if a.Is4In6() {
		return IsMetadata(a.Unmap())
	}
	a = a.WithZone("")
	for _, m := range meta6 {
		if a == m {
			return true
		}
	}
	emb, n := embeddedIPv4(a)
	for _, e := range emb[:n] {
		if IsMetadata(e) {
			return true
		}
	}
	return false
}

func classify(a netip.Addr, unwrap bool) Reason {
	if !a.IsValid() {
		return ReasonReserved
	}
	if IsMetadata(a) {
		return ReasonMetadata
	}
	if a.Is4() {
		return classify4(u32(a))
	}
	a = a.WithZone("")
	r := classify6raw(a)
	if r != ReasonIPv4Embedded || !unwrap {
		return r
	}
	emb, n := embeddedIPv4(a)
	if n == 0 {
		return r
	}
	for _, e := range emb[:n] {
		if er := classify4(u32(e)); er != "" {
			return er
		}
	}
	return ""
}
