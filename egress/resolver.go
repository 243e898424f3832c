package egress

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
)

// DefaultDNSTimeout bounds one resolution (A and AAAA together).
const DefaultDNSTimeout = 5 * time.Second

// MaxCacheTTL caps how long DNSResolver reuses an answer, whatever its TTL.
const MaxCacheTTL = 60 * time.Second

// Resolver resolves a host name to addresses. network is "ip", "ip4" or
// "ip6", as for net.Resolver.LookupNetIP. Implementations must not apply a
// search list: the name is absolute. The returned slice must not be
// modified by the caller.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// DNSResolver asks DNS servers directly for A and AAAA records, over UDP
// with a TCP retry on truncation, with no search-domain expansion. It
// consults Hosts first and caches answers for their TTL (at most
// MaxCacheTTL). Create it with NewDNSResolver or SystemResolver; it is safe
// for concurrent use.
type DNSResolver struct {
	servers []string
	hosts   map[string][]netip.Addr
	timeout time.Duration

	mu    sync.Mutex
	cache map[string]cacheEntry
}

type cacheEntry struct {
	addrs   []netip.Addr
	expires time.Time
}

const maxCacheEntries = 10000

// NewDNSResolver returns a resolver that asks the given servers (ip:port,
// or ip for port 53) in order, with no hosts file.
func NewDNSResolver(servers ...string) (*DNSResolver, error) {
	r := &DNSResolver{timeout: DefaultDNSTimeout, cache: map[string]cacheEntry{}}
	for _, s := range servers {
		ap, err := netip.ParseAddrPort(s)
		if err != nil {
			a, aerr := netip.ParseAddr(s)
			if aerr != nil {
				return nil, invalid("dns", s, ReasonMalformed, "DNS server must be ip or ip:port")
			}
			ap = netip.AddrPortFrom(a, 53)
		}
		r.servers = append(r.servers, ap.String())
	}
	if len(r.servers) == 0 {
		return nil, invalid("dns", "", ReasonMalformed, "no DNS server")
	}
	return r, nil
}

var (
	systemOnce     sync.Once
	systemResolver *DNSResolver
	systemErr      error
)

// SystemResolver returns the resolver configured by /etc/resolv.conf
// (servers only: its search list is ignored) and /etc/hosts. It is built
// once per process.
func SystemResolver() (*DNSResolver, error) {
	systemOnce.Do(func() {
		cfg, err := dns.ClientConfigFromFile("/etc/resolv.conf")
		if err != nil {
			systemErr = &Error{Code: CodeUnavailable, Reason: ReasonDNSError, Op: "dns", Detail: "read /etc/resolv.conf", Err: err}
			return
		}
		var servers []string
		for _, s := range cfg.Servers {
			servers = append(servers, net.JoinHostPort(s, cfg.Port))
		}
		r, err := NewDNSResolver(servers...)
		if err != nil {
			systemErr = err
			return
		}
		r.hosts = loadHosts("/etc/hosts")
		systemResolver = r
	})
	return systemResolver, systemErr
}

// WithTimeout returns a copy of r that bounds each resolution by d.
func (r *DNSResolver) WithTimeout(d time.Duration) *DNSResolver {
	cp := &DNSResolver{servers: r.servers, hosts: r.hosts, timeout: d, cache: map[string]cacheEntry{}}
	return cp
}

func loadHosts(path string) map[string][]netip.Addr {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	m := map[string][]netip.Addr{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		fields := strings.Fields(line)
		if len(fields) < 2 {
			continue
		}
		a, err := netip.ParseAddr(fields[0])
		if err != nil || a.Zone() != "" {
			continue
		}
		for _, name := range fields[1:] {
			name = strings.TrimSuffix(strings.ToLower(name), ".")
			m[name] = append(m[name], a)
		}
	}
	return m
}

// LookupNetIP implements Resolver.
func (r *DNSResolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	name := strings.TrimSuffix(strings.ToLower(host), ".")
	if a, ok := r.hosts[name]; ok {
		return filterFamily(a, network), nil
	}
	key := network + " " + name
	now := time.Now()
	r.mu.Lock()
	if e, ok := r.cache[key]; ok && now.Before(e.expires) {
		r.mu.Unlock()
		return e.addrs, nil
	}
	r.mu.Unlock()

	if r.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.timeout)
		defer cancel()
	}
	addrs, ttl, err := r.resolve(ctx, network, dns.Fqdn(name), 0)
	if err != nil {
		return nil, err
	}
	if ttl > 0 {
		d := time.Duration(ttl) * time.Second
		if d > MaxCacheTTL {
			d = MaxCacheTTL
		}
		r.mu.Lock()
		if len(r.cache) >= maxCacheEntries {
			for k, e := range r.cache {
				if now.After(e.expires) || len(r.cache) >= maxCacheEntries {
					delete(r.cache, k)
				}
			}
		}
		r.cache[key] = cacheEntry{addrs: addrs, expires: now.Add(d)}
		r.mu.Unlock()
	}
	return addrs, nil
}

func filterFamily(in []netip.Addr, network string) []netip.Addr {
	if network != "ip4" && network != "ip6" {
		return in
	}
	out := make([]netip.Addr, 0, len(in))
	for _, a := range in {
		if (network == "ip4") == a.Is4() {
			out = append(out, a)
		}
	}
	return out
}

type famResult struct {
	addrs []netip.Addr
	ttl   uint32
	next  string // CNAME target to chase when no address came back
	err   error
}

func (r *DNSResolver) resolve(ctx context.Context, network, fqdn string, depth int) ([]netip.Addr, uint32, error) {
	if depth > 8 {
		return nil, 0, &Error{Code: CodeUpstream, Reason: ReasonDNSError, Op: "resolve", Target: fqdn, Detail: "CNAME chain too long"}
	}
	var types []uint16
	switch network {
	case "ip4":
		types = []uint16{dns.TypeA}
	case "ip6":
		types = []uint16{dns.TypeAAAA}
	default:
		types = []uint16{dns.TypeA, dns.TypeAAAA}
	}
	results := make([]famResult, len(types))
	var wg sync.WaitGroup
	for i, qt := range types {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = r.query(ctx, fqdn, qt)
		}()
	}
	wg.Wait()
	var addrs []netip.Addr
	var ttl uint32 = ^uint32(0)
	var firstErr error
	nx := 0
	var next string
	for _, res := range results {
		if res.err != nil {
			if ReasonOf(res.err) == ReasonDNSNotFound {
				nx++
			} else if firstErr == nil {
				firstErr = res.err
			}
			continue
		}
		addrs = append(addrs, res.addrs...)
		if len(res.addrs) > 0 && res.ttl < ttl {
			ttl = res.ttl
		}
		if res.next != "" {
			next = res.next
		}
	}
	if len(addrs) == 0 && next != "" && firstErr == nil {
		return r.resolve(ctx, network, next, depth+1)
	}
	if len(addrs) == 0 {
		if firstErr != nil {
			return nil, 0, firstErr
		}
		if nx > 0 {
			return nil, 0, &Error{Code: CodeNotFound, Reason: ReasonDNSNotFound, Op: "resolve", Target: strings.TrimSuffix(fqdn, "."), Detail: "no such host"}
		}
		return nil, 0, &Error{Code: CodeNotFound, Reason: ReasonDNSNoAddress, Op: "resolve", Target: strings.TrimSuffix(fqdn, "."), Detail: "no A or AAAA records"}
	}
	if ttl == ^uint32(0) {
		ttl = 0
	}
	return addrs, ttl, nil
}

func (r *DNSResolver) query(ctx context.Context, fqdn string, qt uint16) famResult {
	m := new(dns.Msg)
	m.SetQuestion(fqdn, qt)
	m.RecursionDesired = true
	var lastErr error
	var lastServer string // operator detail: never in a public message
	for _, server := range r.servers {
		in, err := exchangeDNS(ctx, m, server)
		if err != nil {
			lastErr, lastServer = err, server
			if ctx.Err() != nil {
				break
			}
			continue
		}
		switch in.Rcode {
		case dns.RcodeSuccess:
			return parseAnswer(in, fqdn, qt)
		case dns.RcodeNameError:
			return famResult{err: &Error{Code: CodeNotFound, Reason: ReasonDNSNotFound, Op: "resolve", Target: strings.TrimSuffix(fqdn, ".")}}
		default:
			lastErr, lastServer = errors.New("the DNS server answered "+dns.RcodeToString[in.Rcode]), server
		}
	}
	internal := ""
	if lastServer != "" {
		internal = "DNS server " + lastServer
	}
	if ctx.Err() != nil || isTimeout(lastErr) {
		return famResult{err: &Error{Code: CodeTimeout, Reason: ReasonDNSTimeout, Op: "resolve", Target: strings.TrimSuffix(fqdn, "."), Internal: internal, Err: lastErr}}
	}
	return famResult{err: &Error{Code: CodeUpstream, Reason: ReasonDNSError, Op: "resolve", Target: strings.TrimSuffix(fqdn, "."), Internal: internal, Err: lastErr}}
}

func exchangeDNS(ctx context.Context, m *dns.Msg, server string) (*dns.Msg, error) {
	c := &dns.Client{Net: "udp", UDPSize: 4096}
	in, _, err := c.ExchangeContext(ctx, m, server)
	if err == nil && in.Truncated {
		c = &dns.Client{Net: "tcp"}
		in, _, err = c.ExchangeContext(ctx, m, server)
	}
	if err == nil && in.Id != m.Id {
		return nil, errors.New("DNS answer ID mismatch")
	}
	return in, err
}

func parseAnswer(in *dns.Msg, fqdn string, qt uint16) famResult {
	owner := strings.ToLower(fqdn)
	chain := map[string]bool{owner: true}
	// Follow CNAMEs in the answer section from the question name.
	for range 10 {
		advanced := false
		for _, rr := range in.Answer {
			if c, ok := rr.(*dns.CNAME); ok && chain[strings.ToLower(c.Hdr.Name)] && !chain[strings.ToLower(c.Target)] {
				chain[strings.ToLower(c.Target)] = true
				owner = strings.ToLower(c.Target)
				advanced = true
			}
		}
		if !advanced {
			break
		}
	}
	var res famResult
	res.ttl = ^uint32(0)
	for _, rr := range in.Answer {
		h := rr.Header()
		if !chain[strings.ToLower(h.Name)] {
			continue
		}
		var a netip.Addr
		switch v := rr.(type) {
		case *dns.A:
			if qt != dns.TypeA {
				continue
			}
			a, _ = netip.AddrFromSlice(v.A.To4())
		case *dns.AAAA:
			if qt != dns.TypeAAAA {
				continue
			}
			a, _ = netip.AddrFromSlice(v.AAAA.To16())
		default:
			if h.Rrtype == dns.TypeCNAME && h.Ttl < res.ttl {
				res.ttl = h.Ttl
			}
			continue
		}
		if !a.IsValid() {
			continue
		}
		res.addrs = append(res.addrs, a)
		if h.Ttl < res.ttl {
			res.ttl = h.Ttl
		}
	}
	if len(res.addrs) == 0 && owner != strings.ToLower(fqdn) {
		res.next = owner
	}
	if res.ttl == ^uint32(0) {
		res.ttl = 0
	}
	return res
}

// StaticResolver answers names from a fixed map (like curl's --resolve) and
// passes every other name to Next. A nil Next refuses unknown names with
// ReasonDNSNotFound, so no DNS is ever sent.
type StaticResolver struct {
	Hosts map[string][]netip.Addr // canonical lowercase names, no trailing dot
	Next  Resolver
}

// LookupNetIP implements Resolver.
func (s *StaticResolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	name := strings.TrimSuffix(strings.ToLower(host), ".")
	if a, ok := s.Hosts[name]; ok {
		return filterFamily(a, network), nil
	}
	if s.Next == nil {
		return nil, &Error{Code: CodeNotFound, Reason: ReasonDNSNotFound, Op: "resolve", Target: name, Detail: "not in the static table"}
	}
	return s.Next.LookupNetIP(ctx, network, host)
}

// PinStore is the trust-on-first-use pin cache: the first answer for a name
// is pinned for a while, and a later different answer is refused as DNS
// rebinding. Pin stores addrs as name's pin unless a live pin exists, and
// returns the live pin (addrs itself when it stored them). A shared
// implementation makes every replica of a fleet pin the same answer.
type PinStore interface {
	Pin(ctx context.Context, name string, addrs []netip.Addr, ttl time.Duration) ([]netip.Addr, error)
}

// DefaultPinTTL is how long a first answer stays pinned.
const DefaultPinTTL = 5 * time.Minute

// MemoryPins is an in-process PinStore. The zero value is ready to use and
// is safe for concurrent use.
type MemoryPins struct {
	mu sync.Mutex
	m  map[string]cacheEntry
}

// Pin implements PinStore.
func (p *MemoryPins) Pin(_ context.Context, name string, addrs []netip.Addr, ttl time.Duration) ([]netip.Addr, error) {
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[string]cacheEntry{}
	}
	if e, ok := p.m[name]; ok && now.Before(e.expires) {
		return e.addrs, nil
	}
	if len(p.m) >= maxCacheEntries {
		for k, e := range p.m {
			if now.After(e.expires) {
				delete(p.m, k)
			}
		}
		if len(p.m) >= maxCacheEntries {
			return addrs, nil // full of live pins: fail open on pinning only, the floor still applies
		}
	}
	p.m[name] = cacheEntry{addrs: append([]netip.Addr(nil), addrs...), expires: now.Add(ttl)}
	return addrs, nil
}
