package egresstest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/miekg/dns"
)

// maxCNAMEHops bounds how far the server follows its own CNAMEs, so that a
// loop set up by a test ends in SERVFAIL, as at a real recursive resolver.
const maxCNAMEHops = 8

// listenAttempts bounds the search for a port that is free for both UDP and
// TCP.
const listenAttempts = 20

// shutdownTimeout bounds how long Close waits for in-flight exchanges.
const shutdownTimeout = 5 * time.Second

// DNSQuery is one question received by a [DNSServer].
type DNSQuery struct {
	// Name is the queried name, fully qualified and in lower case
	// ("example.com.").
	Name string
	// Type is the query type as DNS presentation format spells it: "A",
	// "AAAA", "HTTPS", or "TYPE65280" for a type without a mnemonic.
	Type string
	// Net is the transport the query came over: "udp" or "tcp".
	Net string
}

// DNSServer is a stub DNS server on loopback for tests of resolvers. It
// answers like a recursive resolver (RA set, CNAMEs chased within its own
// records) from records that tests set, and logs every question it receives.
//
// Names are compared case-insensitively and may be given with or without the
// trailing dot. A name that was never set is NXDOMAIN; a name that has records
// of some other type answers NOERROR with no records (NODATA). Each setter
// replaces what the name answered before, except that SetA and SetAAAA each
// replace only their own family of a name that has plain addresses.
// SetDelay and SetTruncate combine with any answer.
//
// The zero value is not usable; start one with [StartDNS]. Methods are safe
// for concurrent use, including while queries are in flight. Setters panic on
// addresses that cannot be served, such as an IPv6 address given to SetA.
type DNSServer struct {
	addr      string
	udp, tcp  *dns.Server
	served    chan error // one result per server when it stops serving
	done      chan struct{}
	closeOnce sync.Once
	closeErr  error

	mu       sync.Mutex
	names    map[string]*dnsEntry // by canonical name
	delays   map[string]time.Duration
	truncate bool
	queries  []DNSQuery
}

// dnsEntry is what one name answers. Exactly one of rcode (an error), cname,
// seq (rebinding mode) or the a and aaaa sets is in use.
type dnsEntry struct {
	rcode    int
	cname    string
	cnameTTL uint32
	a, aaaa  addrSet
	seq      [][]netip.Addr
	seqTTL   uint32
	seqN     [2]int // queries answered from seq so far: A, AAAA
}

type addrSet struct {
	ttl   uint32
	addrs []netip.Addr
}

// StartDNS starts a DNS server on 127.0.0.1, serving UDP and TCP on the same
// random port. The caller must call Close.
func StartDNS() (*DNSServer, error) {
	pc, ln, err := listenUDPAndTCP()
	if err != nil {
		return nil, err
	}
	s := &DNSServer{
		addr:   ln.Addr().String(),
		served: make(chan error, 2),
		done:   make(chan struct{}),
		names:  make(map[string]*dnsEntry),
		delays: make(map[string]time.Duration),
	}
	s.udp = &dns.Server{PacketConn: pc, Handler: s.handler("udp")}
	s.tcp = &dns.Server{Listener: ln, Handler: s.handler("tcp")}
	if err := s.serve(s.udp); err != nil {
		pc.Close()
		ln.Close()
		return nil, fmt.Errorf("egresstest: serve DNS over UDP: %w", err)
	}
	if err := s.serve(s.tcp); err != nil {
		ln.Close()
		s.udp.Shutdown()
		<-s.served
		return nil, fmt.Errorf("egresstest: serve DNS over TCP: %w", err)
	}
	return s, nil
}

// listenUDPAndTCP binds a random UDP port on 127.0.0.1 and the TCP port with
// the same number, trying again with another port when that one is taken.
func listenUDPAndTCP() (net.PacketConn, net.Listener, error) {
	var lastErr error
	for range listenAttempts {
		pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
		if err != nil {
			return nil, nil, fmt.Errorf("egresstest: listen DNS over UDP: %w", err)
		}
		port := pc.LocalAddr().(*net.UDPAddr).Port
		ln, err := net.Listen("tcp4", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err == nil {
			return pc, ln, nil
		}
		pc.Close()
		lastErr = err
	}
	return nil, nil, fmt.Errorf("egresstest: listen DNS over TCP on the UDP port, %d attempts: %w", listenAttempts, lastErr)
}

// serve starts srv and returns once it accepts queries, so that Close can
// always shut it down.
func (s *DNSServer) serve(srv *dns.Server) error {
	started := make(chan struct{})
	srv.NotifyStartedFunc = func() { close(started) }
	go func() { s.served <- srv.ActivateAndServe() }()
	select {
	case <-started:
		return nil
	case err := <-s.served:
		return err
	}
}

// Addr returns the server's address, "127.0.0.1:port", for both UDP and TCP.
func (s *DNSServer) Addr() string { return s.addr }

// Close stops the server and waits for in-flight exchanges; delayed answers
// are dropped. Calls after the first return the first call's result.
func (s *DNSServer) Close() error {
	s.closeOnce.Do(func() {
		close(s.done)
		ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		defer cancel()
		errs := []error{
			s.udp.ShutdownContext(ctx),
			s.tcp.ShutdownContext(ctx),
		}
		for range 2 {
			select {
			case err := <-s.served:
				errs = append(errs, err)
			case <-ctx.Done():
				errs = append(errs, ctx.Err())
			}
		}
		if err := errors.Join(errs...); err != nil {
			s.closeErr = fmt.Errorf("egresstest: close DNS server: %w", err)
		}
	})
	return s.closeErr
}

// SetA sets the IPv4 addresses name answers for A queries, keeping its AAAA
// records. No addresses means NODATA for A. It panics if an address is not
// IPv4; an IPv4-mapped IPv6 address belongs in SetAAAA.
func (s *DNSServer) SetA(name string, ttl uint32, addrs ...netip.Addr) {
	set := addrSet{ttl: ttl, addrs: checkAddrs("SetA", addrs, netip.Addr.Is4)}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.addrEntry(name).a = set
}

// SetAAAA sets the IPv6 addresses name answers for AAAA queries, keeping its
// A records. IPv4-mapped addresses (::ffff:127.0.0.1) are served as AAAA
// records, as a hostile server would. No addresses means NODATA for AAAA. It
// panics if an address is not IPv6.
func (s *DNSServer) SetAAAA(name string, ttl uint32, addrs ...netip.Addr) {
	set := addrSet{ttl: ttl, addrs: checkAddrs("SetAAAA", addrs, netip.Addr.Is6)}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.addrEntry(name).aaaa = set
}

// SetAddrs sets both families of name at once: IPv4 addresses are served as
// A records, all others (IPv4-mapped ones included) as AAAA records.
func (s *DNSServer) SetAddrs(name string, ttl uint32, addrs ...netip.Addr) {
	checkAddrs("SetAddrs", addrs, nil)
	v4, v6 := splitFamilies(addrs)
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.addrEntry(name)
	e.a = addrSet{ttl: ttl, addrs: v4}
	e.aaaa = addrSet{ttl: ttl, addrs: v6}
}

// SetCNAME makes name an alias of target. Queries for name answer the CNAME
// record followed by the answer for target when the server has records for
// it, like a recursive resolver. If target was never set the answer is the
// CNAME with NXDOMAIN (RFC 6604); a CNAME query answers the CNAME alone.
func (s *DNSServer) SetCNAME(name, target string, ttl uint32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.names[dns.CanonicalName(name)] = &dnsEntry{cname: dns.CanonicalName(target), cnameTTL: ttl}
}

// SetSequence puts name in rebinding mode: the n-th A query for name, counted
// from 0 since this call, answers the IPv4 addresses of answers[n], and after
// the last element keeps answering the last element. AAAA queries are counted
// separately and answer the IPv6 addresses (IPv4-mapped ones included). A
// query truncated by SetTruncate does not count; a query that reaches name
// through a CNAME does. It panics if answers is empty.
func (s *DNSServer) SetSequence(name string, ttl uint32, answers ...[]netip.Addr) {
	if len(answers) == 0 {
		panic("egresstest: SetSequence: no answers")
	}
	seq := make([][]netip.Addr, len(answers))
	for i, addrs := range answers {
		seq[i] = checkAddrs("SetSequence", addrs, nil)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.names[dns.CanonicalName(name)] = &dnsEntry{seq: seq, seqTTL: ttl}
}

// SetNXDOMAIN makes name answer NXDOMAIN to every query.
func (s *DNSServer) SetNXDOMAIN(name string) {
	s.setRcode(name, dns.RcodeNameError)
}

// SetServFail makes name answer SERVFAIL to every query.
func (s *DNSServer) SetServFail(name string) {
	s.setRcode(name, dns.RcodeServerFailure)
}

// SetDelay makes every answer for name, whatever it is, wait d before it is
// sent, for timeout tests. The query is logged, and a sequence advanced, when
// it arrives. A delay of zero or less removes the delay.
func (s *DNSServer) SetDelay(name string, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if d <= 0 {
		delete(s.delays, dns.CanonicalName(name))
		return
	}
	s.delays[dns.CanonicalName(name)] = d
}

// SetTruncate sets whether every UDP answer is an empty one with the TC bit
// set, so that the client must retry over TCP. TCP answers are never
// truncated. Without it, UDP answers are truncated only when they exceed the
// client's buffer size (512 bytes, or its EDNS(0) size).
func (s *DNSServer) SetTruncate(truncate bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.truncate = truncate
}

// Queries returns the questions received since the start or the last
// ResetQueries, in order of arrival.
func (s *DNSServer) Queries() []DNSQuery {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]DNSQuery(nil), s.queries...)
}

// QueryCount returns how many questions for name, of any type and over
// either transport, were received since the start or the last ResetQueries.
func (s *DNSServer) QueryCount(name string) int {
	name = dns.CanonicalName(name)
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, q := range s.queries {
		if q.Name == name {
			n++
		}
	}
	return n
}

// ResetQueries empties the query log. It does not restart sequences.
func (s *DNSServer) ResetQueries() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queries = nil
}

func (s *DNSServer) setRcode(name string, rcode int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.names[dns.CanonicalName(name)] = &dnsEntry{rcode: rcode}
}

// addrEntry returns the plain-address entry for name, replacing any other
// kind. s.mu must be held.
func (s *DNSServer) addrEntry(name string) *dnsEntry {
	name = dns.CanonicalName(name)
	e := s.names[name]
	if e == nil || e.rcode != dns.RcodeSuccess || e.cname != "" || e.seq != nil {
		e = &dnsEntry{}
		s.names[name] = e
	}
	return e
}

// checkAddrs panics unless every address can go in a DNS record and, when
// family is not nil, belongs to it. It returns a copy of addrs.
func checkAddrs(op string, addrs []netip.Addr, family func(netip.Addr) bool) []netip.Addr {
	for _, a := range addrs {
		switch {
		case !a.IsValid():
			panic(fmt.Sprintf("egresstest: %s: invalid address", op))
		case a.Zone() != "":
			panic(fmt.Sprintf("egresstest: %s: %v: DNS cannot carry a zone", op, a))
		case family != nil && !family(a):
			panic(fmt.Sprintf("egresstest: %s: %v is of the wrong family", op, a))
		}
	}
	return append([]netip.Addr(nil), addrs...)
}

// splitFamilies returns the addresses for A records and those for AAAA
// records. IPv4-mapped IPv6 addresses are not Is4, so they go to AAAA.
func splitFamilies(addrs []netip.Addr) (v4, v6 []netip.Addr) {
	for _, a := range addrs {
		if a.Is4() {
			v4 = append(v4, a)
		} else {
			v6 = append(v6, a)
		}
	}
	return v4, v6
}

// handler answers queries arriving over network ("udp" or "tcp").
func (s *DNSServer) handler(network string) dns.Handler {
	return dns.HandlerFunc(func(w dns.ResponseWriter, req *dns.Msg) {
		reply := new(dns.Msg)
		reply.SetReply(req)
		// Go's resolver takes a NODATA answer without RA or AA for a lame
		// referral.
		reply.RecursionAvailable = true
		if len(req.Question) != 1 {
			reply.Rcode = dns.RcodeFormatError
			w.WriteMsg(reply)
			return
		}
		q := req.Question[0]
		name := dns.CanonicalName(q.Name)

		s.mu.Lock()
		s.queries = append(s.queries, DNSQuery{Name: name, Type: dns.Type(q.Qtype).String(), Net: network})
		delay := s.delays[name]
		if network == "udp" && s.truncate {
			reply.Truncated = true
		} else {
			s.answer(reply, q)
		}
		s.mu.Unlock()

		if delay > 0 {
			t := time.NewTimer(delay)
			defer t.Stop()
			select {
			case <-t.C:
			case <-s.done:
				return
			}
		}
		size := dns.MinMsgSize
		if opt := req.IsEdns0(); opt != nil {
			size = max(int(opt.UDPSize()), dns.MinMsgSize)
			reply.SetEdns0(opt.UDPSize(), false)
		}
		if network == "udp" {
			reply.Truncate(size)
		}
		w.WriteMsg(reply)
	})
}

// answer fills reply for q from the server's records. s.mu must be held.
func (s *DNSServer) answer(reply *dns.Msg, q dns.Question) {
	owner := q.Name // as asked, case included
	name := dns.CanonicalName(q.Name)
	for hops := 0; ; hops++ {
		e := s.names[name]
		switch {
		case e == nil:
			reply.Rcode = dns.RcodeNameError
			return
		case e.rcode == dns.RcodeServerFailure:
			reply.Rcode = e.rcode
			reply.Answer = nil
			return
		case e.rcode != dns.RcodeSuccess:
			reply.Rcode = e.rcode
			return
		case e.cname != "":
			if hops == maxCNAMEHops {
				reply.Rcode = dns.RcodeServerFailure
				reply.Answer = nil
				return
			}
			reply.Answer = append(reply.Answer, &dns.CNAME{
				Hdr:    rrHeader(owner, dns.TypeCNAME, e.cnameTTL),
				Target: e.cname,
			})
			if q.Qtype == dns.TypeCNAME {
				return
			}
			owner, name = e.cname, e.cname
			continue
		}
		set := e.addrs(q.Qtype)
		for _, a := range set.addrs {
			switch q.Qtype {
			case dns.TypeA:
				reply.Answer = append(reply.Answer, &dns.A{
					Hdr: rrHeader(owner, dns.TypeA, set.ttl),
					A:   a.AsSlice(),
				})
			case dns.TypeAAAA:
				b := a.As16() // 16 bytes for IPv4-mapped addresses too
				reply.Answer = append(reply.Answer, &dns.AAAA{
					Hdr:  rrHeader(owner, dns.TypeAAAA, set.ttl),
					AAAA: b[:],
				})
			}
		}
		return
	}
}

// addrs returns the addresses e answers for qtype, advancing its sequence.
func (e *dnsEntry) addrs(qtype uint16) addrSet {
	var i int
	switch qtype {
	case dns.TypeA:
		i = 0
	case dns.TypeAAAA:
		i = 1
	default:
		return addrSet{}
	}
	if e.seq == nil {
		return [2]addrSet{e.a, e.aaaa}[i]
	}
	n := min(e.seqN[i], len(e.seq)-1)
	e.seqN[i]++
	v4, v6 := splitFamilies(e.seq[n])
	return addrSet{ttl: e.seqTTL, addrs: [2][]netip.Addr{v4, v6}[i]}
}

func rrHeader(name string, rrtype uint16, ttl uint32) dns.RR_Header {
	return dns.RR_Header{Name: name, Rrtype: rrtype, Class: dns.ClassINET, Ttl: ttl}
}
