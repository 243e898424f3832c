package browser

import (
	"net/netip"
	"testing"

	"github.com/airlockhq/airlock/egress"
)

func mustTarget(t *testing.T, hostport string) egress.Target {
	t.Helper()
	tg, err := egress.ParseHostPort(hostport)
	if err != nil {
		t.Fatal(err)
	}
	return tg
}

func addrs(ss ...string) []netip.Addr {
	out := make([]netip.Addr, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParseAddr(s)
	}
	return out
}

// A denied host cannot be reached under another name: denied_origins
// match the address layer 2 pinned, and a loopback entry every loopback
// address (they all reach this machine's listeners). Allow-lists match
// names only: an answer never widens them.
func TestPolicyMatchesPinnedAddresses(t *testing.T) {
	t.Parallel()
	s := &Session{}
	c, err := Policy{DefaultAction: ActionAllow, DeniedOrigins: []string{"http://127.0.0.1:8080", "10.1.2.3"}}.compile()
	if err != nil {
		t.Fatal(err)
	}
	s.policy = c
	cases := []struct {
		target string
		addrs  []netip.Addr
		deny   bool
	}{
		{"alias.test:8080", nil, false}, // the name alone: not denied (no lookup is made)
		{"alias.test:8080", addrs("127.0.0.1"), true},
		{"localhost:8080", addrs("127.0.0.1", "::1"), true},
		{"localhost:8080", addrs("::1"), true},
		{"[::1]:8080", nil, true},
		{"127.0.0.2:8080", nil, true},
		{"[::ffff:127.0.0.1]:8080", nil, true},
		{"alias.test:8081", addrs("127.0.0.1"), false}, // another port
		{"intranet.test:443", addrs("10.1.2.3"), true}, // a host entry: any port
		{"intranet.test:443", addrs("10.1.2.4"), false},
	}
	for _, tc := range cases {
		err := s.Admit(mustTarget(t, tc.target), tc.addrs)
		if (err != nil) != tc.deny {
			t.Errorf("Admit(%s, %v) = %v, want deny %v", tc.target, tc.addrs, err, tc.deny)
		}
		if err != nil && egress.ReasonOf(err) != "denied_origin" {
			t.Errorf("Admit(%s, %v): reason %q, want denied_origin", tc.target, tc.addrs, egress.ReasonOf(err))
		}
	}

	// The layer-1 pre-check sees an IP literal as its address too.
	for _, raw := range []string{"http://[::1]:8080/", "http://127.0.0.1:8080/x", "http://127.1.2.3:8080/"} {
		tg, _ := egress.ParseURL(raw)
		if v, _ := s.policy.decide(tg.Scheme, tg.Host, int(tg.Port)); v != verdictDeny {
			t.Errorf("decide(%s) = %v, want deny", raw, v)
		}
	}

	// localhost is loopback by definition (RFC 6761): no lookup is needed
	// to refuse it, before the browser asks the proxy.
	tg, _ := egress.ParseURL("http://localhost:8080/")
	if v, _ := s.policy.decide(tg.Scheme, tg.Host, int(tg.Port)); v != verdictDeny {
		t.Errorf("decide(localhost) = %v, want deny", v)
	}
	c, err = Policy{DefaultAction: ActionAllow, DeniedOrigins: []string{"http://localhost:8080"}}.compile()
	if err != nil {
		t.Fatal(err)
	}
	s.policy = c
	for _, hp := range []string{"127.0.0.1:8080", "[::1]:8080", "app.localhost:8080"} {
		if err := s.Admit(mustTarget(t, hp), nil); egress.ReasonOf(err) != "denied_origin" {
			t.Errorf("denied localhost, Admit(%s) = %v", hp, err)
		}
	}

	// Allow-lists match names only.
	c, err = Policy{AllowedOrigins: []string{"http://127.0.0.1:8080", "allowed.test"}}.compile()
	if err != nil {
		t.Fatal(err)
	}
	s.policy = c
	if err := s.Admit(mustTarget(t, "alias.test:8080"), addrs("127.0.0.1")); egress.ReasonOf(err) != "default_deny" {
		t.Errorf("an answer widened the allow-list: %v", err)
	}
	if err := s.Admit(mustTarget(t, "[::1]:8080"), nil); egress.ReasonOf(err) != "default_deny" {
		t.Errorf("::1 allowed by an entry for 127.0.0.1: %v", err)
	}
	if err := s.Admit(mustTarget(t, "allowed.test:443"), addrs("127.0.0.1")); err != nil {
		t.Errorf("allowed name refused: %v", err)
	}

	// Under ask, an approval of a name does not reach a denied address.
	c, err = Policy{DefaultAction: ActionAsk, DeniedOrigins: []string{"http://127.0.0.1:8080"}}.compile()
	if err != nil {
		t.Fatal(err)
	}
	s.policy = c
	c.approve("http", "alias.test", 8080)
	if err := s.Admit(mustTarget(t, "alias.test:8080"), nil); err != nil {
		t.Errorf("approved name refused before resolution: %v", err)
	}
	if err := s.Admit(mustTarget(t, "alias.test:8080"), addrs("127.0.0.1")); egress.ReasonOf(err) != "denied_origin" {
		t.Errorf("approved name reaches a denied address: %v", err)
	}
}
