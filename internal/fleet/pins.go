package fleet

import (
	"context"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/airlockhq/airlock/egress"
	"github.com/airlockhq/airlock/internal/store"
)

// MaxPinTTL caps how long a pinned answer lives in Redis, whatever the
// dialer asks.
const MaxPinTTL = 10 * time.Minute

// Pins is an egress.PinStore in Redis: the first answer any replica pins
// for a name (SET NX with an expiry) is the answer every replica gets
// until it expires, so a name cannot resolve differently on two replicas
// within the pin window (DNS rebinding through a second node).
type Pins struct{ f *Fleet }

// Pins returns the fleet-wide pin store.
func (f *Fleet) Pins() *Pins { return &Pins{f: f} }

// Pin implements egress.PinStore: it stores addrs for name unless an
// unexpired pin exists, and returns the pinned answer.
func (p *Pins) Pin(ctx context.Context, name string, addrs []netip.Addr, ttl time.Duration) ([]netip.Addr, error) {
	if ttl <= 0 || ttl > MaxPinTTL {
		ttl = min(max(ttl, time.Second), MaxPinTTL)
	}
	key := p.f.key("pin", strings.ToLower(name))
	val := encodeAddrs(addrs)
	for range 3 {
		ok, err := p.f.rdb.SetNX(ctx, key, val, ttl).Result()
		if err != nil {
			return nil, unavailable("pin", err)
		}
		if ok {
			return slices.Clone(addrs), nil
		}
		got, err := p.f.rdb.Get(ctx, key).Result()
		if err == redis.Nil {
			continue // expired between the two calls: try to pin again
		}
		if err != nil {
			return nil, unavailable("pin", err)
		}
		return decodeAddrs(got)
	}
	return nil, unavailable("pin", store.ErrNotFound)
}

func encodeAddrs(addrs []netip.Addr) string {
	s := make([]string, len(addrs))
	for i, a := range addrs {
		s[i] = a.String()
	}
	sort.Strings(s)
	return strings.Join(s, ",")
}

func decodeAddrs(v string) ([]netip.Addr, error) {
	var out []netip.Addr
	for _, s := range strings.Split(v, ",") {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, unavailable("pin", err)
		}
		out = append(out, a)
	}
	return out, nil
}

var _ egress.PinStore = (*Pins)(nil)

// PinTTL is how long a fleet pins a DNS answer when egress.pin_dns is
// off: the bound of the resolver's cache, so that every replica uses the
// answer one process would.
const PinTTL = egress.MaxCacheTTL

// PinsFor returns the DNS pins of the tenants' dialers and the TTL that
// overrides the dialers' own (0: none). With egress.pin_dns (pinDNS),
// trust-on-first-use for egress's DefaultPinTTL; a fleet (fl not nil)
// pins every answer in Redis for PinTTL even without it, so that a name
// resolves the same on every replica, as it does within one process
// through the cache.
func PinsFor(fl *Fleet, pinDNS bool) (egress.PinStore, time.Duration) {
	switch {
	case fl != nil && pinDNS:
		return fl.Pins(), 0
	case fl != nil:
		return fl.Pins(), PinTTL
	case pinDNS:
		return &egress.MemoryPins{}, 0
	}
	return nil, 0
}
