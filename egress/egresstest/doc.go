// Package egresstest provides loopback test servers for package egress, in
// the manner of net/http/httptest: a stub DNS server with rebinding modes, a
// server that captures TLS ClientHellos, and hostile HTTP servers.
//
// Every server listens on 127.0.0.1 only, so tests never reach the internet.
// A test starts a server, points the code under test at its address and
// closes it when done:
//
//	dns, err := egresstest.StartDNS()
//	if err != nil {
//		t.Fatal(err)
//	}
//	defer dns.Close()
//
//	// First answer public, then loopback: a DNS rebinding attempt.
//	dns.SetSequence("rebind.example", 0,
//		[]netip.Addr{netip.MustParseAddr("192.0.2.1")},
//		[]netip.Addr{netip.MustParseAddr("127.0.0.1")},
//	)
//	// ... resolve through dns.Addr() ...
//	if got := dns.QueryCount("rebind.example"); got != 2 {
//		t.Errorf("DNS queries = %d, want 2: one A and one AAAA", got)
//	}
package egresstest
