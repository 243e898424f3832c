package wasmhost

import (
	"net/netip"
	"testing"

	"github.com/airlockhq/airlock"
)

func TestClientKey(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		same bool
	}{
		{"2001:db8:1:2::1", "2001:db8:1:2:ffff:ffff:ffff:ffff", true}, // one /64
		{"2001:db8:1:2::1", "2001:db8:1:3::1", false},                 // the next /64
		{"fe80::1%eth0", "fe80::2%eth1", true},                        // zones do not make clients
		{"127.0.0.2", "127.0.0.3", false},                             // IPv4: the address
		{"::ffff:127.0.0.2", "127.0.0.2", true},                       // v4-mapped is IPv4
		{"::1", "::2", true},
	} {
		ka, kb := clientKey(netip.MustParseAddr(tc.a)), clientKey(netip.MustParseAddr(tc.b))
		if (ka == kb) != tc.same {
			t.Errorf("clientKey(%s) = %s, clientKey(%s) = %s: same %v, want %v", tc.a, ka, tc.b, kb, ka == kb, tc.same)
		}
	}
	if k := clientKey(netip.MustParseAddr("2001:db8:1:2:3:4:5:6")); k.String() != "2001:db8:1:2::/64" {
		t.Errorf("key %s, want 2001:db8:1:2::/64", k)
	}
	if k := clientKey(netip.Addr{}); k.IsValid() {
		t.Errorf("key of no address %s, want the zero prefix", k)
	}
}

func TestBudgetAcquire(t *testing.T) {
	const mib = 1 << 20
	b := newBudget(Budget{Instances: 4, InstancesPerPrincipal: 2, Memory: 200 * mib})
	var releases []func()
	take := func(p string, mem int64, reason string) {
		t.Helper()
		rel, err := b.acquire(p, mem)
		if reason == "" {
			if err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			releases = append(releases, rel)
			return
		}
		if airlock.CodeOf(err) != airlock.CodeUnavailable || airlock.ReasonOf(err) != airlock.Reason(reason) || airlock.RetryAfter(err) <= 0 {
			t.Fatalf("%s: %v, want unavailable %s with a retry-after", p, err, reason)
		}
	}
	take("a/1", 64*mib, "")
	take("a/1", 64*mib, "")
	take("a/1", 64*mib, string(airlock.ReasonGuestInstances)) // per principal
	take("b/1", 64*mib, "")
	take("c/1", 64*mib, string(airlock.ReasonGuestMemory)) // 4 × 64 MiB > 200 MiB
	take("c/1", 8*mib, "")
	take("d/1", 8*mib, string(airlock.ReasonGuestInstances)) // 4 at once
	if running, peak := b.stats(); running != 4 || peak != 4 {
		t.Fatalf("running %d, peak %d; want 4, 4", running, peak)
	}
	for _, rel := range releases {
		rel()
		rel() // twice is once
	}
	if running, _ := b.stats(); running != 0 || b.memory != 0 || len(b.byPrincipal) != 0 {
		t.Fatalf("after release: running %d, memory %d, principals %v", running, b.memory, b.byPrincipal)
	}
	if n := b.fits(64 * mib); n != 2 {
		t.Fatalf("fits %d instances of 64 MiB, want 2 (per principal)", n)
	}
}

func TestDefaultBudget(t *testing.T) {
	d := DefaultBudget()
	if d.Instances <= 0 || d.InstancesPerPrincipal != d.Instances || d.Memory <= 0 || d.Memory > machineMemory() {
		t.Fatalf("default budget %+v with machine memory %d", d, machineMemory())
	}
	if _, err := (Budget{Instances: -1}).withDefaults(); airlock.CodeOf(err) != airlock.CodeInvalid {
		t.Fatalf("negative budget: %v", err)
	}
}
