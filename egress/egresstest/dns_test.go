package egresstest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/miekg/dns"
)

func startDNS(t *testing.T) *DNSServer {
	t.Helper()
	s, err := StartDNS()
	if err != nil {
		t.Fatalf("StartDNS: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// exchange asks s one question over network ("udp" or "tcp").
func exchange(t *testing.T, s *DNSServer, network, name string, qtype uint16) *dns.Msg {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	c := &dns.Client{Net: network, Timeout: 5 * time.Second}
	r, _, err := c.ExchangeContext(t.Context(), m, s.Addr())
	if err != nil {
		t.Fatalf("exchange %s %s over %s: %v", name, dns.Type(qtype), network, err)
	}
	return r
}

// record is an answer record in a form that go-cmp can compare.
type record struct {
	Name string
	Type string
	TTL  uint32
	Data string
}

func records(t *testing.T, m *dns.Msg) []record {
	t.Helper()
	var out []record
	for _, rr := range m.Answer {
		h := rr.Header()
		r := record{Name: h.Name, Type: dns.Type(h.Rrtype).String(), TTL: h.Ttl}
		switch rr := rr.(type) {
		case *dns.A:
			r.Data = addrFromSlice(t, rr.A).String()
		case *dns.AAAA:
			if len(rr.AAAA) != net.IPv6len {
				t.Errorf("AAAA record of %d bytes, want 16", len(rr.AAAA))
			}
			r.Data = addrFromSlice(t, rr.AAAA).String()
		case *dns.CNAME:
			r.Data = rr.Target
		default:
			t.Errorf("unexpected record %v", rr)
		}
		out = append(out, r)
	}
	return out
}

func addrFromSlice(t *testing.T, b []byte) netip.Addr {
	t.Helper()
	a, ok := netip.AddrFromSlice(b)
	if !ok {
		t.Fatalf("bad address bytes %v", b)
	}
	return a
}

var (
	ip    = netip.MustParseAddr
	pub4  = ip("192.0.2.1")
	pub4b = ip("192.0.2.2")
	pub6  = ip("2001:db8::1")
	lo4   = ip("127.0.0.1")
	lo6   = ip("::1")
	// An IPv4-mapped IPv6 address: Is4 is false, Is4In6 is true.
	mapped = ip("::ffff:127.0.0.1")
)

func TestDNSAddr(t *testing.T) {
	s1 := startDNS(t)
	s2 := startDNS(t)
	for _, s := range []*DNSServer{s1, s2} {
		ap, err := netip.ParseAddrPort(s.Addr())
		if err != nil {
			t.Fatalf("Addr() = %q: %v", s.Addr(), err)
		}
		if ap.Addr() != lo4 || ap.Port() == 0 {
			t.Errorf("Addr() = %q, want 127.0.0.1 and a port", s.Addr())
		}
		s.SetA("x.test", 60, pub4)
		for _, network := range []string{"udp", "tcp"} {
			r := exchange(t, s, network, "x.test.", dns.TypeA)
			if len(r.Answer) != 1 {
				t.Errorf("over %s: got %d answers, want 1", network, len(r.Answer))
			}
		}
	}
	if s1.Addr() == s2.Addr() {
		t.Errorf("two servers share the address %s", s1.Addr())
	}
}

func TestDNSAnswers(t *testing.T) {
	tests := []struct {
		name      string
		setup     func(s *DNSServer)
		qname     string
		qtype     uint16
		network   string // udp when empty
		wantRcode int
		want      []record
	}{
		{
			name:  "A",
			setup: func(s *DNSServer) { s.SetA("v4.test", 60, pub4, pub4b) },
			qname: "v4.test.", qtype: dns.TypeA,
			want: []record{
				{"v4.test.", "A", 60, "192.0.2.1"},
				{"v4.test.", "A", 60, "192.0.2.2"},
			},
		},
		{
			name:  "A over TCP",
			setup: func(s *DNSServer) { s.SetA("v4.test", 60, pub4) },
			qname: "v4.test.", qtype: dns.TypeA, network: "tcp",
			want: []record{{"v4.test.", "A", 60, "192.0.2.1"}},
		},
		{
			name:  "setter name case and trailing dot ignored",
			setup: func(s *DNSServer) { s.SetA("Mixed.TEST.", 60, pub4) },
			qname: "mIXED.test.", qtype: dns.TypeA,
			want: []record{{"mIXED.test.", "A", 60, "192.0.2.1"}},
		},
		{
			name:  "AAAA",
			setup: func(s *DNSServer) { s.SetAAAA("v6.test", 60, pub6, lo6) },
			qname: "v6.test.", qtype: dns.TypeAAAA,
			want: []record{
				{"v6.test.", "AAAA", 60, "2001:db8::1"},
				{"v6.test.", "AAAA", 60, "::1"},
			},
		},
		{
			name:  "AAAA of an IPv4-only name is NODATA",
			setup: func(s *DNSServer) { s.SetA("v4.test", 60, pub4) },
			qname: "v4.test.", qtype: dns.TypeAAAA,
		},
		{
			name:  "IPv4-mapped AAAA",
			setup: func(s *DNSServer) { s.SetAAAA("mapped.test", 60, mapped) },
			qname: "mapped.test.", qtype: dns.TypeAAAA,
			want: []record{{"mapped.test.", "AAAA", 60, "::ffff:127.0.0.1"}},
		},
		{
			name:  "IPv4-mapped address is not served as A",
			setup: func(s *DNSServer) { s.SetAddrs("mapped.test", 60, mapped) },
			qname: "mapped.test.", qtype: dns.TypeA,
		},
		{
			name:  "SetAddrs A",
			setup: func(s *DNSServer) { s.SetAddrs("both.test", 30, lo4, lo6, mapped, pub4) },
			qname: "both.test.", qtype: dns.TypeA,
			want: []record{
				{"both.test.", "A", 30, "127.0.0.1"},
				{"both.test.", "A", 30, "192.0.2.1"},
			},
		},
		{
			name:  "SetAddrs AAAA",
			setup: func(s *DNSServer) { s.SetAddrs("both.test", 30, lo4, lo6, mapped, pub4) },
			qname: "both.test.", qtype: dns.TypeAAAA,
			want: []record{
				{"both.test.", "AAAA", 30, "::1"},
				{"both.test.", "AAAA", 30, "::ffff:127.0.0.1"},
			},
		},
		{
			name: "SetA keeps AAAA",
			setup: func(s *DNSServer) {
				s.SetAAAA("both.test", 30, lo6)
				s.SetA("both.test", 60, lo4)
			},
			qname: "both.test.", qtype: dns.TypeAAAA,
			want: []record{{"both.test.", "AAAA", 30, "::1"}},
		},
		{
			name:  "TTL 0",
			setup: func(s *DNSServer) { s.SetA("zero.test", 0, pub4) },
			qname: "zero.test.", qtype: dns.TypeA,
			want: []record{{"zero.test.", "A", 0, "192.0.2.1"}},
		},
		{
			name:  "TTL 0 AAAA over TCP",
			setup: func(s *DNSServer) { s.SetAAAA("zero.test", 0, pub6) },
			qname: "zero.test.", qtype: dns.TypeAAAA, network: "tcp",
			want: []record{{"zero.test.", "AAAA", 0, "2001:db8::1"}},
		},
		{
			name:  "unknown name",
			setup: func(s *DNSServer) {},
			qname: "unknown.test.", qtype: dns.TypeA,
			wantRcode: dns.RcodeNameError,
		},
		{
			name:  "other type of a known name is NODATA",
			setup: func(s *DNSServer) { s.SetA("v4.test", 60, pub4) },
			qname: "v4.test.", qtype: dns.TypeTXT,
		},
		{
			name: "NXDOMAIN replaces records",
			setup: func(s *DNSServer) {
				s.SetA("gone.test", 60, pub4)
				s.SetNXDOMAIN("gone.test")
			},
			qname: "gone.test.", qtype: dns.TypeA,
			wantRcode: dns.RcodeNameError,
		},
		{
			name:  "SERVFAIL",
			setup: func(s *DNSServer) { s.SetServFail("broken.test") },
			qname: "broken.test.", qtype: dns.TypeAAAA,
			wantRcode: dns.RcodeServerFailure,
		},
		{
			name: "SetA replaces SERVFAIL",
			setup: func(s *DNSServer) {
				s.SetServFail("fixed.test")
				s.SetA("fixed.test", 60, pub4)
			},
			qname: "fixed.test.", qtype: dns.TypeA,
			want: []record{{"fixed.test.", "A", 60, "192.0.2.1"}},
		},
		{
			name:  "CNAME chain to localhost A",
			setup: cnameChain,
			qname: "a.test.", qtype: dns.TypeA,
			want: []record{
				{"a.test.", "CNAME", 10, "b.test."},
				{"b.test.", "CNAME", 20, "localhost."},
				{"localhost.", "A", 0, "127.0.0.1"},
			},
		},
		{
			name:  "CNAME chain to localhost AAAA",
			setup: cnameChain,
			qname: "a.test.", qtype: dns.TypeAAAA, network: "tcp",
			want: []record{
				{"a.test.", "CNAME", 10, "b.test."},
				{"b.test.", "CNAME", 20, "localhost."},
				{"localhost.", "AAAA", 0, "::1"},
			},
		},
		{
			name:  "CNAME query answers the CNAME alone",
			setup: cnameChain,
			qname: "a.test.", qtype: dns.TypeCNAME,
			want: []record{{"a.test.", "CNAME", 10, "b.test."}},
		},
		{
			name:  "CNAME to an unknown name",
			setup: func(s *DNSServer) { s.SetCNAME("dangling.test", "nowhere.test", 5) },
			qname: "dangling.test.", qtype: dns.TypeA,
			wantRcode: dns.RcodeNameError,
			want:      []record{{"dangling.test.", "CNAME", 5, "nowhere.test."}},
		},
		{
			name: "CNAME to SERVFAIL",
			setup: func(s *DNSServer) {
				s.SetCNAME("alias.test", "broken.test", 5)
				s.SetServFail("broken.test")
			},
			qname: "alias.test.", qtype: dns.TypeA,
			wantRcode: dns.RcodeServerFailure,
		},
		{
			name: "CNAME loop",
			setup: func(s *DNSServer) {
				s.SetCNAME("loop1.test", "loop2.test", 5)
				s.SetCNAME("loop2.test", "loop1.test", 5)
			},
			qname: "loop1.test.", qtype: dns.TypeA,
			wantRcode: dns.RcodeServerFailure,
		},
		{
			name: "SetA replaces CNAME",
			setup: func(s *DNSServer) {
				s.SetCNAME("was-alias.test", "localhost", 5)
				s.SetA("was-alias.test", 60, pub4)
			},
			qname: "was-alias.test.", qtype: dns.TypeA,
			want: []record{{"was-alias.test.", "A", 60, "192.0.2.1"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := startDNS(t)
			tt.setup(s)
			network := tt.network
			if network == "" {
				network = "udp"
			}
			r := exchange(t, s, network, tt.qname, tt.qtype)
			if r.Rcode != tt.wantRcode {
				t.Errorf("rcode = %s, want %s", dns.RcodeToString[r.Rcode], dns.RcodeToString[tt.wantRcode])
			}
			if !r.RecursionAvailable {
				t.Error("RA bit not set")
			}
			if r.Truncated {
				t.Error("TC bit set")
			}
			if diff := cmp.Diff(tt.want, records(t, r)); diff != "" {
				t.Errorf("answer mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// cnameChain sets a.test → b.test → localhost., which has loopback addresses
// with TTL 0.
func cnameChain(s *DNSServer) {
	s.SetCNAME("a.test", "B.test", 10)
	s.SetCNAME("b.test.", "localhost", 20)
	s.SetAddrs("localhost.", 0, lo4, lo6)
}

func TestDNSSequence(t *testing.T) {
	s := startDNS(t)
	s.SetSequence("rebind.test", 0,
		[]netip.Addr{pub4, pub6},
		[]netip.Addr{lo4, lo6, mapped},
	)
	steps := []struct {
		qtype uint16
		want  []string
	}{
		{dns.TypeA, []string{"192.0.2.1"}},
		// AAAA is counted apart from A: its first query is the public one.
		{dns.TypeAAAA, []string{"2001:db8::1"}},
		{dns.TypeA, []string{"127.0.0.1"}},
		// After the last answer the last one repeats.
		{dns.TypeA, []string{"127.0.0.1"}},
		{dns.TypeAAAA, []string{"::1", "::ffff:127.0.0.1"}},
		{dns.TypeAAAA, []string{"::1", "::ffff:127.0.0.1"}},
		// Other types neither answer nor count.
		{dns.TypeTXT, nil},
	}
	for i, step := range steps {
		r := exchange(t, s, "udp", "rebind.test.", step.qtype)
		if diff := cmp.Diff(step.want, answerData(t, r)); diff != "" {
			t.Errorf("query %d (%s): answer mismatch (-want +got):\n%s", i, dns.Type(step.qtype), diff)
		}
		for _, rr := range r.Answer {
			if rr.Header().Ttl != 0 {
				t.Errorf("query %d: TTL = %d, want 0", i, rr.Header().Ttl)
			}
		}
	}

	// Setting the sequence again starts it over.
	s.SetSequence("rebind.test", 0, []netip.Addr{pub4}, []netip.Addr{lo4})
	for i, want := range []string{"192.0.2.1", "127.0.0.1"} {
		r := exchange(t, s, "tcp", "REBIND.test.", dns.TypeA)
		if diff := cmp.Diff([]string{want}, answerData(t, r)); diff != "" {
			t.Errorf("query %d after reset: answer mismatch (-want +got):\n%s", i, diff)
		}
	}
}

func TestDNSSequenceThroughCNAME(t *testing.T) {
	s := startDNS(t)
	s.SetCNAME("www.test", "rebind.test", 60)
	// The first answer has no IPv6 address: AAAA is NODATA, then loopback.
	s.SetSequence("rebind.test", 0, []netip.Addr{pub4}, []netip.Addr{lo4, lo6})
	steps := []struct {
		qtype uint16
		want  []string
	}{
		{dns.TypeA, []string{"rebind.test.", "192.0.2.1"}},
		{dns.TypeAAAA, []string{"rebind.test."}},
		{dns.TypeA, []string{"rebind.test.", "127.0.0.1"}},
		{dns.TypeAAAA, []string{"rebind.test.", "::1"}},
	}
	for i, step := range steps {
		r := exchange(t, s, "udp", "www.test.", step.qtype)
		if diff := cmp.Diff(step.want, answerData(t, r)); diff != "" {
			t.Errorf("query %d (%s): answer mismatch (-want +got):\n%s", i, dns.Type(step.qtype), diff)
		}
	}
}

func answerData(t *testing.T, m *dns.Msg) []string {
	t.Helper()
	var out []string
	for _, r := range records(t, m) {
		out = append(out, r.Data)
	}
	return out
}

func TestDNSTruncate(t *testing.T) {
	s := startDNS(t)
	s.SetTruncate(true)
	s.SetSequence("rebind.test", 60, []netip.Addr{pub4}, []netip.Addr{lo4})

	r := exchange(t, s, "udp", "rebind.test.", dns.TypeA)
	if !r.Truncated || len(r.Answer) != 0 || r.Rcode != dns.RcodeSuccess {
		t.Errorf("over UDP: TC = %v, %d answers, rcode %s; want TC, no answers, NOERROR",
			r.Truncated, len(r.Answer), dns.RcodeToString[r.Rcode])
	}
	// The truncated answer did not use up the first element of the sequence.
	r = exchange(t, s, "tcp", "rebind.test.", dns.TypeA)
	if r.Truncated {
		t.Error("over TCP: TC bit set")
	}
	if diff := cmp.Diff([]string{"192.0.2.1"}, answerData(t, r)); diff != "" {
		t.Errorf("over TCP: answer mismatch (-want +got):\n%s", diff)
	}
	want := []DNSQuery{
		{Name: "rebind.test.", Type: "A", Net: "udp"},
		{Name: "rebind.test.", Type: "A", Net: "tcp"},
	}
	if diff := cmp.Diff(want, s.Queries()); diff != "" {
		t.Errorf("Queries() mismatch (-want +got):\n%s", diff)
	}

	s.SetTruncate(false)
	r = exchange(t, s, "udp", "rebind.test.", dns.TypeA)
	if r.Truncated {
		t.Error("TC bit set after SetTruncate(false)")
	}
	if diff := cmp.Diff([]string{"127.0.0.1"}, answerData(t, r)); diff != "" {
		t.Errorf("over UDP after SetTruncate(false): answer mismatch (-want +got):\n%s", diff)
	}
}

func TestDNSTruncateBySize(t *testing.T) {
	s := startDNS(t)
	var addrs []netip.Addr
	for i := range 100 {
		addrs = append(addrs, netip.AddrFrom4([4]byte{10, 0, 0, byte(i)}))
	}
	s.SetA("big.test", 60, addrs...)

	r := exchange(t, s, "udp", "big.test.", dns.TypeA)
	if !r.Truncated || len(r.Answer) >= len(addrs) {
		t.Errorf("over UDP: TC = %v with %d answers; want TC and fewer than %d", r.Truncated, len(r.Answer), len(addrs))
	}
	r = exchange(t, s, "tcp", "big.test.", dns.TypeA)
	if r.Truncated || len(r.Answer) != len(addrs) {
		t.Errorf("over TCP: TC = %v with %d answers; want no TC and %d", r.Truncated, len(r.Answer), len(addrs))
	}
}

// TestDNSGoResolver checks that Go's own resolver accepts the server's
// answers and retries truncated ones over TCP.
func TestDNSGoResolver(t *testing.T) {
	s := startDNS(t)
	s.SetAddrs("both.test", 60, lo4, lo6)
	s.SetA("v4only.test", 60, pub4)
	s.SetNXDOMAIN("missing.test")
	r := &net.Resolver{
		PreferGo: true,
		Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, s.Addr())
		},
	}
	lookup := func(host string) ([]netip.Addr, error) {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		return r.LookupNetIP(ctx, "ip", host)
	}
	// Lookup order is not part of what is tested.
	addrOpts := []cmp.Option{
		cmpopts.EquateComparable(netip.Addr{}),
		cmpopts.SortSlices(netip.Addr.Less),
	}

	got, err := lookup("v4only.test.")
	if err != nil {
		t.Fatalf("lookup v4only.test: %v", err)
	}
	if diff := cmp.Diff([]netip.Addr{pub4}, got, addrOpts...); diff != "" {
		t.Errorf("lookup v4only.test mismatch (-want +got):\n%s", diff)
	}

	_, err = lookup("missing.test.")
	if dnsErr := (*net.DNSError)(nil); !errors.As(err, &dnsErr) || !dnsErr.IsNotFound {
		t.Errorf("lookup missing.test: error %v, want a not-found DNSError", err)
	}

	s.SetTruncate(true)
	s.ResetQueries()
	got, err = lookup("both.test.")
	if err != nil {
		t.Fatalf("lookup both.test with truncation: %v", err)
	}
	if diff := cmp.Diff([]netip.Addr{lo4, lo6}, got, addrOpts...); diff != "" {
		t.Errorf("lookup both.test mismatch (-want +got):\n%s", diff)
	}
	count := map[string]int{}
	for _, q := range s.Queries() {
		count[q.Type+"/"+q.Net]++
	}
	want := map[string]int{"A/udp": 1, "A/tcp": 1, "AAAA/udp": 1, "AAAA/tcp": 1}
	if diff := cmp.Diff(want, count); diff != "" {
		t.Errorf("queries by type and transport mismatch (-want +got):\n%s", diff)
	}
}

func TestDNSQueryLog(t *testing.T) {
	s := startDNS(t)
	if got := s.Queries(); len(got) != 0 {
		t.Errorf("Queries() before any query = %v, want none", got)
	}
	if got := s.QueryCount("log.test"); got != 0 {
		t.Errorf("QueryCount before any query = %d, want 0", got)
	}

	s.SetA("log.test", 60, pub4)
	exchange(t, s, "udp", "log.test.", dns.TypeA)
	exchange(t, s, "tcp", "LOG.Test.", dns.TypeAAAA)
	exchange(t, s, "udp", "unknown.test.", dns.TypeHTTPS)
	exchange(t, s, "udp", "log.test.", 65280)

	want := []DNSQuery{
		{Name: "log.test.", Type: "A", Net: "udp"},
		{Name: "log.test.", Type: "AAAA", Net: "tcp"},
		{Name: "unknown.test.", Type: "HTTPS", Net: "udp"},
		{Name: "log.test.", Type: "TYPE65280", Net: "udp"},
	}
	got := s.Queries()
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Queries() mismatch (-want +got):\n%s", diff)
	}
	got[0].Name = "changed"
	if s.Queries()[0].Name != "log.test." {
		t.Error("Queries() returned the server's own slice")
	}

	counts := []struct {
		name string
		want int
	}{
		{"log.test", 3},
		{"Log.Test.", 3},
		{"unknown.test", 1},
		{"other.test", 0},
	}
	for _, c := range counts {
		if got := s.QueryCount(c.name); got != c.want {
			t.Errorf("QueryCount(%q) = %d, want %d", c.name, got, c.want)
		}
	}

	s.ResetQueries()
	if got := s.QueryCount("log.test"); got != 0 {
		t.Errorf("QueryCount after ResetQueries = %d, want 0", got)
	}
	if got := s.Queries(); len(got) != 0 {
		t.Errorf("Queries() after ResetQueries = %v, want none", got)
	}
}

func TestDNSDelay(t *testing.T) {
	s, err := StartDNS()
	if err != nil {
		t.Fatalf("StartDNS: %v", err)
	}
	s.SetA("slow.test", 60, pub4)
	s.SetA("fast.test", 60, pub4)

	const delay = 50 * time.Millisecond
	s.SetDelay("slow.test", delay)
	start := time.Now()
	r := exchange(t, s, "udp", "slow.test.", dns.TypeA)
	if elapsed := time.Since(start); elapsed < delay {
		t.Errorf("answer after %v, want at least %v", elapsed, delay)
	}
	if len(r.Answer) != 1 {
		t.Errorf("delayed answer has %d records, want 1", len(r.Answer))
	}

	// An answer held far past the client's timeout: the client gives up.
	s.SetDelay("slow.test", time.Hour)
	for _, network := range []string{"udp", "tcp"} {
		m := new(dns.Msg)
		m.SetQuestion("slow.test.", dns.TypeA)
		c := &dns.Client{Net: network, Timeout: 100 * time.Millisecond}
		_, _, err = c.Exchange(m, s.Addr())
		if netErr := net.Error(nil); !errors.As(err, &netErr) || !netErr.Timeout() {
			t.Errorf("over %s: error %v, want a timeout", network, err)
		}
	}
	if got := s.QueryCount("slow.test"); got != 3 {
		t.Errorf("QueryCount(slow.test) = %d, want 3: delayed queries are logged on arrival", got)
	}
	// Other names are not delayed.
	exchange(t, s, "udp", "fast.test.", dns.TypeA)

	s.SetDelay("slow.test", 0)
	exchange(t, s, "udp", "slow.test.", dns.TypeA)

	// Close does not wait for the held answers.
	s.SetDelay("slow.test", time.Hour)
	m := new(dns.Msg)
	m.SetQuestion("slow.test.", dns.TypeA)
	c := &dns.Client{Net: "tcp", Timeout: 100 * time.Millisecond}
	c.Exchange(m, s.Addr())
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestDNSSetterPanics(t *testing.T) {
	s := startDNS(t)
	tests := []struct {
		name string
		call func()
	}{
		{"SetA IPv6", func() { s.SetA("x.test", 0, pub6) }},
		{"SetA IPv4-mapped", func() { s.SetA("x.test", 0, mapped) }},
		{"SetA invalid", func() { s.SetA("x.test", 0, netip.Addr{}) }},
		{"SetAAAA IPv4", func() { s.SetAAAA("x.test", 0, lo4) }},
		{"SetAAAA zone", func() { s.SetAAAA("x.test", 0, ip("fe80::1%eth0")) }},
		{"SetAddrs invalid", func() { s.SetAddrs("x.test", 0, lo4, netip.Addr{}) }},
		{"SetSequence empty", func() { s.SetSequence("x.test", 0) }},
		{"SetSequence invalid", func() { s.SetSequence("x.test", 0, []netip.Addr{netip.Addr{}}) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("no panic")
				}
			}()
			tt.call()
		})
	}
}

// TestDNSConcurrent exercises setters and queries together for the race
// detector.
func TestDNSConcurrent(t *testing.T) {
	s := startDNS(t)
	var wg sync.WaitGroup
	for i := range 8 {
		name := fmt.Sprintf("n%d.test.", i%2)
		wg.Go(func() {
			for j := range 20 {
				switch j % 4 {
				case 0:
					s.SetAddrs(name, 0, lo4, lo6)
				case 1:
					s.SetSequence(name, 0, []netip.Addr{pub4}, []netip.Addr{lo4})
				case 2:
					s.SetCNAME(name, "n0.test", 0)
				case 3:
					s.SetTruncate(j%8 == 3)
				}
				network := []string{"udp", "tcp"}[j%2]
				exchange(t, s, network, name, dns.TypeA)
				s.QueryCount(name)
				s.Queries()
			}
		})
	}
	wg.Wait()
	if got, want := len(s.Queries()), 8*20; got != want {
		t.Errorf("%d queries logged, want %d", got, want)
	}
}
