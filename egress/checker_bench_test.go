package egress

import (
	"context"
	"net/netip"
	"testing"
)

// benchChecker is a realistic operator policy: a few allow and deny
// patterns of every kind and one floor exception.
func benchChecker(b *testing.B) *Checker {
	b.Helper()
	c, err := Policy{
		Lanes: Lanes(),
		Allow: []string{
			"*.example.com", "api.partner.example:443", "93.184.216.0/24",
			"[2606:4700::/32]:443", "10.20.0.0/16:8080",
		},
		Deny:       []string{"admin.example.com", "203.0.113.0/24", "*:25"},
		Exceptions: []string{"10.20.30.40:8080"},
	}.Compile()
	if err != nil {
		b.Fatal(err)
	}
	return c
}

var benchVerdict Verdict

// BenchmarkCheckAddrLiteral is the checker's decision for an IP literal
// target, as CheckName makes it: no DNS, no logging, no audit. Target:
// at most 1 µs/op and 0 allocs/op.
func BenchmarkCheckAddrLiteral(b *testing.B) {
	c := benchChecker(b)
	cases := []struct {
		name  string
		addr  string
		port  uint16
		allow bool
	}{
		{"allow/v4", "93.184.216.34", 443, true},
		{"allow/v6", "2606:4700::1111", 443, true},
		{"allow/exception", "10.20.30.40", 8080, true},
		{"deny/loopback", "127.0.0.1", 80, false},
		{"deny/metadata", "169.254.169.254", 80, false},
		{"deny/deny-list", "203.0.113.7", 443, false},
		{"deny/not-allowed", "8.8.8.8", 443, false},
		{"deny/mapped", "::ffff:10.0.0.1", 443, false},
		{"deny/teredo", "2001:0:4136:e378:8000:63bf:f5ff:fffe", 443, false},
	}
	for _, tc := range cases {
		a := netip.MustParseAddr(tc.addr)
		t := Target{Host: a.String(), Addr: a, Port: tc.port}
		b.Run(tc.name, func(b *testing.B) {
			if v := c.CheckName(LaneHTTP, t); v.Allow != tc.allow {
				b.Fatalf("%s: %v, want allow=%v", tc.addr, v, tc.allow)
			}
			b.ReportAllocs()
			for b.Loop() {
				benchVerdict = c.CheckName(LaneHTTP, t)
			}
		})
	}
}

// BenchmarkCheckNameCached is the whole decision for a name whose answer is
// cached (a StaticResolver stands for the cache): Dialer.Resolve with the
// name checks, the lookup and every answer checked, with no Logger and no
// Auditor. Target: at most 2 µs/op.
func BenchmarkCheckNameCached(b *testing.B) {
	c := benchChecker(b)
	r := &StaticResolver{Hosts: map[string][]netip.Addr{
		"www.example.com":      {netip.MustParseAddr("93.184.216.34"), netip.MustParseAddr("2606:4700::1111")},
		"intranet.example.com": {netip.MustParseAddr("10.1.2.3")},
		"mixed.example.com":    {netip.MustParseAddr("93.184.216.34"), netip.MustParseAddr("127.0.0.1")},
	}}
	d := &Dialer{Policy: c, Resolver: r}
	ctx := context.Background()
	cases := []struct {
		name, host string
		allow      bool
	}{
		{"allow", "www.example.com", true},
		{"deny/private", "intranet.example.com", false},
		{"deny/dns-mixed", "mixed.example.com", false},
		{"deny/before-dns", "admin.example.com", false},
	}
	for _, tc := range cases {
		t := Target{Scheme: "https", Host: tc.host, Port: 443}
		b.Run(tc.name, func(b *testing.B) {
			if _, err := d.Resolve(ctx, LaneHTTP, t, nil); (err == nil) != tc.allow {
				b.Fatalf("%s: %v, want allow=%v", tc.host, err, tc.allow)
			}
			b.ReportAllocs()
			for b.Loop() {
				d.Resolve(ctx, LaneHTTP, t, nil)
			}
		})
	}
}

// BenchmarkParseURL is the parse that precedes every check.
func BenchmarkParseURL(b *testing.B) {
	for _, raw := range []string{"https://www.example.com/a/b?c=d", "http://93.184.216.34:8080/", "http://0x7f.1/"} {
		b.Run(raw, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				ParseURL(raw)
			}
		})
	}
}
