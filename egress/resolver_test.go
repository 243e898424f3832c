package egress

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/airlockhq/airlock/egress/egresstest"
)

func startDNS(t *testing.T) *egresstest.DNSServer {
	t.Helper()
	s, err := egresstest.StartDNS()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func mustResolver(t *testing.T, addr string) *DNSResolver {
	t.Helper()
	r, err := NewDNSResolver(addr)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

var (
	a1 = netip.MustParseAddr("127.0.0.1")
	a3 = netip.MustParseAddr("127.0.0.3")
	p1 = netip.MustParseAddr("10.0.0.1")
	v6 = netip.MustParseAddr("::1")
)

func TestDNSResolver(t *testing.T) {
	s := startDNS(t)
	s.SetA("both.test", 60, a1)
	s.SetAAAA("both.test", 60, v6)
	s.SetCNAME("alias.test", "both.test", 60)
	s.SetNXDOMAIN("gone.test")
	s.SetServFail("broken.test")
	s.SetA("a-only.test", 0, a3)
	ctx := context.Background()

	tests := []struct {
		name       string
		host       string
		want       []netip.Addr
		wantReason Reason
	}{
		{"A and AAAA", "both.test", []netip.Addr{a1, v6}, ""},
		{"trailing dot", "both.test.", []netip.Addr{a1, v6}, ""},
		{"case", "BOTH.Test", []netip.Addr{a1, v6}, ""},
		{"cname", "alias.test", []netip.Addr{a1, v6}, ""},
		{"A only", "a-only.test", []netip.Addr{a3}, ""},
		{"nxdomain", "gone.test", nil, ReasonDNSNotFound},
		{"unknown", "never.test", nil, ReasonDNSNotFound},
		{"servfail", "broken.test", nil, ReasonDNSError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := mustResolver(t, s.Addr())
			got, err := r.LookupNetIP(ctx, "ip", tt.host)
			if tt.wantReason != "" {
				if ReasonOf(err) != tt.wantReason {
					t.Fatalf("LookupNetIP(%q) err = %v, want reason %s", tt.host, err, tt.wantReason)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !sameAddrs(got, tt.want) {
				t.Errorf("LookupNetIP(%q) = %v, want %v", tt.host, got, tt.want)
			}
		})
	}
}

func sameAddrs(a, b []netip.Addr) bool {
	if len(a) != len(b) {
		return false
	}
	m := map[netip.Addr]int{}
	for _, x := range a {
		m[x]++
	}
	for _, x := range b {
		m[x]--
	}
	for _, v := range m {
		if v != 0 {
			return false
		}
	}
	return true
}

func TestDNSResolverNoSearchListAndCache(t *testing.T) {
	s := startDNS(t)
	s.SetA("cached.test", 60, a1)
	s.SetA("ttl0.test", 0, a1)
	r := mustResolver(t, s.Addr())
	ctx := context.Background()
	for range 3 {
		if _, err := r.LookupNetIP(ctx, "ip", "cached.test"); err != nil {
			t.Fatal(err)
		}
		if _, err := r.LookupNetIP(ctx, "ip", "ttl0.test"); err != nil {
			t.Fatal(err)
		}
	}
	if n := s.QueryCount("cached.test"); n != 2 {
		t.Errorf("cached.test: %d queries, want 2 (one A, one AAAA, then cached)", n)
	}
	if n := s.QueryCount("ttl0.test"); n != 6 {
		t.Errorf("ttl0.test: %d queries, want 6 (TTL 0 is never cached)", n)
	}
	// A single-label name is asked as is, never expanded with a search list.
	s.ResetQueries()
	r.LookupNetIP(ctx, "ip", "intranet")
	for _, q := range s.Queries() {
		if q.Name != "intranet." {
			t.Errorf("query for %q, want only intranet.", q.Name)
		}
	}
}

func TestDNSResolverTruncationAndTimeout(t *testing.T) {
	s := startDNS(t)
	s.SetA("big.test", 60, a1, a3)
	s.SetTruncate(true)
	r := mustResolver(t, s.Addr())
	got, err := r.LookupNetIP(context.Background(), "ip4", "big.test")
	if err != nil || !sameAddrs(got, []netip.Addr{a1, a3}) {
		t.Fatalf("truncated answer: %v %v", got, err)
	}
	s.SetTruncate(false)
	s.SetA("slow.test", 60, a1)
	s.SetDelay("slow.test", 2*time.Second)
	_, err = r.WithTimeout(100*time.Millisecond).LookupNetIP(context.Background(), "ip", "slow.test")
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeTimeout || e.Reason != ReasonDNSTimeout {
		t.Fatalf("slow DNS: %v, want timeout dns_timeout", err)
	}
}

func TestHostsFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "hosts")
	os.WriteFile(p, []byte("127.0.0.1 localhost\n::1 localhost ip6-localhost # comment\nbad line\n10.0.0.1 Intranet.\n"), 0o600)
	h := loadHosts(p)
	if !sameAddrs(h["localhost"], []netip.Addr{a1, v6}) || !sameAddrs(h["intranet"], []netip.Addr{p1}) {
		t.Errorf("hosts = %v", h)
	}
}

func TestStaticResolver(t *testing.T) {
	s := &StaticResolver{Hosts: map[string][]netip.Addr{"x.test": {a1, v6}}}
	got, err := s.LookupNetIP(context.Background(), "ip6", "X.test.")
	if err != nil || !sameAddrs(got, []netip.Addr{v6}) {
		t.Errorf("ip6 lookup = %v %v", got, err)
	}
	if _, err := s.LookupNetIP(context.Background(), "ip", "y.test"); ReasonOf(err) != ReasonDNSNotFound {
		t.Errorf("unknown name with no Next: %v", err)
	}
}

func TestDialerLimiterAndAudit(t *testing.T) {
	var decisions []Decision
	var keys []string
	d := &Dialer{
		Policy:   DefaultPolicy().MustCompile(),
		Resolver: &StaticResolver{},
		Limiter: func(_ context.Context, key string) error {
			keys = append(keys, key)
			if len(keys) > 2 {
				return errors.New("over budget")
			}
			return nil
		},
		Auditor: AuditorFunc(func(d Decision) { decisions = append(decisions, d) }),
	}
	ctx := context.Background()
	t1, _ := ParseHostPort("10.0.0.1:80")
	t2, _ := ParseHostPort("93.184.215.14:443")
	if _, err := d.Resolve(ctx, LaneTCP, t1, &Call{Key: "tenant/a"}); !IsDenied(err) {
		t.Fatalf("private: %v", err)
	}
	if _, err := d.Resolve(ctx, LaneTCP, t2, &Call{Key: "tenant/a"}); err != nil {
		t.Fatalf("public: %v", err)
	}
	_, err := d.Resolve(ctx, LaneTCP, t2, &Call{Key: "tenant/a"})
	if CodeOf(err) != CodeRateLimited {
		t.Fatalf("third attempt: %v, want rate_limited", err)
	}
	if len(keys) != 3 || keys[0] != "tenant/a" {
		t.Errorf("limiter saw %v: every attempt, denied ones included, must be counted", keys)
	}
	if len(decisions) != 3 || decisions[0].Allow || decisions[0].Reason != ReasonPrivate || !decisions[1].Allow || decisions[2].Reason != ReasonRateLimited {
		t.Errorf("decisions = %+v", decisions)
	}
}

func TestZeroDialerDeniesEverything(t *testing.T) {
	var d Dialer
	tg, _ := ParseHostPort("93.184.215.14:443")
	if _, err := d.Dial(context.Background(), "tcp", LaneTCP, tg, nil); ReasonOf(err) != ReasonNoPolicy {
		t.Errorf("zero Dialer: %v, want no_policy", err)
	}
}

func TestDialerAdmit(t *testing.T) {
	var decisions []Decision
	d := &Dialer{
		Policy:   DefaultPolicy().MustCompile(),
		Resolver: &StaticResolver{},
		Auditor:  AuditorFunc(func(d Decision) { decisions = append(decisions, d) }),
	}
	ctx := context.Background()
	ok, _ := ParseHostPort("93.184.215.14:443")
	other, _ := ParseHostPort("93.184.215.15:443")
	private, _ := ParseHostPort("10.0.0.1:80")
	var asked []string
	c := &Call{Key: "k", Admit: func(t Target, addrs []netip.Addr) error {
		asked = append(asked, t.String())
		if len(addrs) != 1 || addrs[0] != t.Addr {
			return errors.New("a literal is admitted with its own address")
		}
		if t.Addr != ok.Addr {
			return &Error{Code: CodeDenied, Reason: "denied_origin", Op: "check", Target: t.String(), Detail: "not an allowed origin"}
		}
		return nil
	}}
	if _, err := d.Resolve(ctx, LaneHTTP, ok, c); err != nil {
		t.Fatalf("admitted: %v", err)
	}
	if _, err := d.Resolve(ctx, LaneHTTP, other, c); !IsDenied(err) || ReasonOf(err) != "denied_origin" {
		t.Fatalf("refused by Admit: %v", err)
	}
	// The policy decides first: Admit never widens and is not asked about
	// what the policy refuses.
	if _, err := d.Resolve(ctx, LaneHTTP, private, c); ReasonOf(err) != ReasonPrivate {
		t.Fatalf("private: %v", err)
	}
	if len(asked) != 2 {
		t.Errorf("Admit asked about %v, want the two public targets only", asked)
	}
	// A plain error becomes not_allowed.
	c.Admit = func(Target, []netip.Addr) error { return errors.New("no") }
	if _, err := d.Resolve(ctx, LaneHTTP, ok, c); ReasonOf(err) != ReasonNotAllowed {
		t.Fatalf("plain error: %v", err)
	}
	if len(decisions) != 4 || !decisions[0].Allow || decisions[1].Allow || decisions[1].Reason != "denied_origin" || decisions[3].Reason != ReasonNotAllowed {
		t.Errorf("decisions = %+v", decisions)
	}
}

// Admit is asked about a name before it is resolved, then about the
// answers it will be pinned to: a rule over addresses holds under any name,
// and a name it refuses is never looked up.
func TestDialerAdmitSeesPinnedAnswers(t *testing.T) {
	var decisions []Decision
	lookups := 0
	d := &Dialer{
		Policy: DefaultPolicy().MustCompile(),
		Resolver: resolverFunc(func(_ context.Context, _, host string) ([]netip.Addr, error) {
			lookups++
			return []netip.Addr{netip.MustParseAddr("93.184.215.14")}, nil
		}),
		Auditor: AuditorFunc(func(d Decision) { decisions = append(decisions, d) }),
	}
	ctx := context.Background()
	bad := netip.MustParseAddr("93.184.215.14")
	type ask struct {
		host  string
		addrs []netip.Addr
	}
	var asked []ask
	c := &Call{Key: "k", Admit: func(t Target, addrs []netip.Addr) error {
		asked = append(asked, ask{t.Host, addrs})
		if t.Host == "refused.example" {
			return &Error{Code: CodeDenied, Reason: "denied_origin", Op: "check", Target: t.String()}
		}
		for _, a := range addrs {
			if a == bad {
				return &Error{Code: CodeDenied, Reason: "denied_origin", Op: "check", Target: t.String()}
			}
		}
		return nil
	}}
	alias, _ := ParseHostPort("alias.example:443")
	if _, err := d.Resolve(ctx, LaneHTTP, alias, c); ReasonOf(err) != "denied_origin" {
		t.Fatalf("a name for a refused address: %v", err)
	}
	if len(asked) != 2 || asked[0].addrs != nil || len(asked[1].addrs) != 1 || asked[1].addrs[0] != bad {
		t.Fatalf("Admit asked %+v, want the name, then its answer", asked)
	}
	if len(decisions) != 1 || decisions[0].Allow || decisions[0].Reason != "denied_origin" || len(decisions[0].Addrs) != 1 {
		t.Fatalf("decisions = %+v, want one denial with the answer", decisions)
	}
	refused, _ := ParseHostPort("refused.example:443")
	if _, err := d.Resolve(ctx, LaneHTTP, refused, c); ReasonOf(err) != "denied_origin" || lookups != 1 {
		t.Fatalf("refused name: %v after %d lookups, want no lookup", err, lookups)
	}
}

type resolverFunc func(ctx context.Context, network, host string) ([]netip.Addr, error)

func (f resolverFunc) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	return f(ctx, network, host)
}
