package egress

import (
	"errors"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"testing"

	whatwg "github.com/nlnwa/whatwg-url/url"
	"golang.org/x/net/idna"
)

// fuzzIDNA canonicalises names read by the other parsers. It is looser
// than the profile ParseURL uses (no bidi rule, no label checks), so that the
// comparison checks the reading, not our own validation.
var fuzzIDNA = idna.New(idna.MapForLookup(), idna.Transitional(false), idna.StrictDomainName(false))

// fuzzCanonHost canonicalises a host as some parser read it: IP literals to
// netip's form, names lowercased, IDNA-mapped, without a trailing dot.
func fuzzCanonHost(h string) string {
	h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	if a, err := netip.ParseAddr(h); err == nil {
		return a.String()
	}
	h = strings.TrimSuffix(strings.ToLower(h), ".")
	if n, err := fuzzIDNA.ToASCII(h); err == nil {
		h = strings.ToLower(n)
	}
	if a, err := netip.ParseAddr(h); err == nil {
		return a.String()
	}
	return h
}

// internalReading reports whether host, as some parser read it, is an
// address the floor of chk denies (embedded IPv4 forms unwrapped when chk
// unwraps them).
func internalReading(chk *Checker, host string) (netip.Addr, bool) {
	h := strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	h = strings.TrimSuffix(h, ".")
	a, err := netip.ParseAddr(h)
	if err != nil {
		return netip.Addr{}, false
	}
	if chk.Unwraps() {
		return a, ClassifyUnwrapped(a) != ""
	}
	return a, Classify(a) != ""
}

func fuzzSeedURLs(f *testing.F) []string {
	seeds := []string{
		"http://example.com/", "https://[::1]:443/", "http://0x7f.1/", "http://2130706433/", "http://127.1/",
		`http:\\127.0.0.1`, "http://a@127.0.0.1@evil.com/", "http://evil.com#@127.0.0.1", "http://[fe80::1%25eth0]/",
		"http://１２７.０.０.１/", "http://127。0。0。1/", "http://bücher.example/", "http://[::ffff:127.0.0.1]/",
		"http://127.0.0.1./", "http://example.com:0/", "http://%31%32%37.0.0.1/", "http:example.com",
		"http://exa\u200bmple.com/", "http://ⓔⓧⓐⓜⓟⓛⓔ.ⓒⓞⓜ/", "HTTP://EXAMPLE.COM.:80/", "http://[64:ff9b::a9fe:a9fe]/",
		"http://xn--bcher-kva.example./", "http://a_b.example/", "http://1e3/", "http://[::127.0.0.1]/",
	}
	for _, c := range readBypassCorpus(f) {
		seeds = append(seeds, c.target)
	}
	return seeds
}

// FuzzParseURL is the differential: whatever ParseURL accepts, net/url and
// the WHATWG parser must read the same host and port, and no parser (nor
// netip on the raw host) may read an internal address that DefaultPolicy
// then allows.
func FuzzParseURL(f *testing.F) {
	for _, s := range fuzzSeedURLs(f) {
		f.Add(s)
	}
	def := DefaultPolicy().MustCompile()
	unwrap := Policy{Lanes: Lanes(), UnwrapEmbeddedIPv4: true}.MustCompile()
	wp := whatwg.NewParser()
	f.Fuzz(func(t *testing.T, raw string) {
		tg, err := ParseURL(raw)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || (e.Code != CodeDenied && e.Code != CodeInvalid) || e.Reason == "" {
				t.Fatalf("ParseURL(%q): error %v is not a denied/invalid *Error with a reason", raw, err)
			}
			return
		}
		// The Target is well formed.
		if tg.Scheme != "http" && tg.Scheme != "https" || tg.Host == "" || tg.Port == 0 || tg.URL == nil {
			t.Fatalf("ParseURL(%q) = %+v: malformed target", raw, tg)
		}
		if a, err := netip.ParseAddr(tg.Host); (err == nil) != tg.IsIP() || (err == nil && a != tg.Addr) {
			t.Fatalf("ParseURL(%q): Host %q and Addr %v disagree", raw, tg.Host, tg.Addr)
		}
		if tg.IsIP() && tg.Addr.Zone() != "" {
			t.Fatalf("ParseURL(%q): zone in %v", raw, tg.Addr)
		}
		if !tg.IsIP() && (strings.ToLower(tg.Host) != tg.Host || strings.HasSuffix(tg.Host, ".") || looksNumeric(tg.Host)) {
			t.Fatalf("ParseURL(%q): host %q is not canonical", raw, tg.Host)
		}
		// The canonical URL is a fixed point.
		again, err := ParseURL(tg.String())
		if err != nil {
			t.Fatalf("ParseURL(%q) = %q, which does not parse again: %v", raw, tg.String(), err)
		}
		if again.Host != tg.Host || again.Port != tg.Port || again.String() != tg.String() {
			t.Fatalf("ParseURL(%q) = %q, then %q", raw, tg.String(), again.String())
		}

		// net/url reads the same host and port.
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatalf("ParseURL accepted %q, net/url refuses it: %v", raw, err)
		}
		if u.User != nil {
			t.Fatalf("ParseURL accepted %q, net/url reads userinfo %q", raw, u.User)
		}
		if got := fuzzCanonHost(u.Hostname()); got != tg.Host {
			t.Fatalf("ParseURL(%q) reads host %q, net/url %q", raw, tg.Host, u.Hostname())
		}
		if p := u.Port(); p != "" {
			if n, err := strconv.ParseUint(p, 10, 16); err != nil || uint16(n) != tg.Port {
				t.Fatalf("ParseURL(%q) reads port %d, net/url %q", raw, tg.Port, p)
			}
		}

		// The WHATWG parser reads the same host and port.
		w, err := wp.Parse(raw)
		if err != nil {
			t.Fatalf("ParseURL accepted %q, the WHATWG parser refuses it: %v", raw, err)
		}
		if got := fuzzCanonHost(w.Hostname()); got != tg.Host {
			t.Fatalf("ParseURL(%q) reads host %q, WHATWG %q", raw, tg.Host, w.Hostname())
		}
		if w.DecodedPort() != int(tg.Port) {
			t.Fatalf("ParseURL(%q) reads port %d, WHATWG %d", raw, tg.Port, w.DecodedPort())
		}
		if w.Username() != "" || w.Password() != "" {
			t.Fatalf("ParseURL accepted %q, WHATWG reads credentials", raw)
		}

		// No reading of an internal address may be allowed.
		readings := []string{u.Hostname(), w.Hostname(), tg.Host, rawAuthorityHost(raw)}
		for _, h := range readings {
			for _, chk := range []*Checker{def, unwrap} {
				a, internal := internalReading(chk, h)
				if !internal {
					continue
				}
				if v := chk.CheckName(LaneHTTP, tg); v.Allow {
					t.Fatalf("%q: a parser reads %s (%s), and the policy (unwrap=%v) allows %v",
						raw, a, Classify(a), chk.Unwraps(), v)
				}
			}
		}
	})
}

// rawAuthorityHost is the host text between // and the first / ? # (and
// after the last @), without any port: what a naive filter would look at.
func rawAuthorityHost(raw string) string {
	_, rest, ok := strings.Cut(raw, "//")
	if !ok {
		return ""
	}
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		rest = rest[:i]
	}
	if i := strings.LastIndexByte(rest, '@'); i >= 0 {
		rest = rest[i+1:]
	}
	if h, _, err := net.SplitHostPort(rest); err == nil {
		return h
	}
	return rest
}

// FuzzParseHostPort: whatever ParseHostPort accepts, net.SplitHostPort,
// netip.ParseAddrPort and the WHATWG parser (given http://HOST:PORT/) read
// the same host and port, and DefaultPolicy never allows an internal reading.
func FuzzParseHostPort(f *testing.F) {
	seeds := []string{
		"[::1]:53", "127.0.0.1:6379", "example.com:443", "host:0", "a:b:c", "::1:53", "127.1:80", "0x7f.1:80",
		"[fe80::1%eth0]:53", "１２７.０.０.１:80", "[::ffff:10.0.0.1]:22", "EXAMPLE.com.:443", "bücher.example:25",
		"2130706433:80", "[64:ff9b::a00:1]:53", "user@host:80", "host:0053",
	}
	for _, c := range readBypassCorpus(f) {
		if h := rawAuthorityHost(c.target); h != "" {
			seeds = append(seeds, h+":80")
		}
		if t, err := ParseURL(c.target); err == nil {
			seeds = append(seeds, t.HostPort())
		}
	}
	for _, s := range seeds {
		f.Add(s)
	}
	def := DefaultPolicy().MustCompile()
	unwrap := Policy{Lanes: Lanes(), UnwrapEmbeddedIPv4: true}.MustCompile()
	wp := whatwg.NewParser()
	f.Fuzz(func(t *testing.T, s string) {
		tg, err := ParseHostPort(s)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || (e.Code != CodeDenied && e.Code != CodeInvalid) || e.Reason == "" {
				t.Fatalf("ParseHostPort(%q): error %v is not a denied/invalid *Error with a reason", s, err)
			}
			return
		}
		if tg.Host == "" || tg.Port == 0 || tg.URL != nil || tg.Scheme != "" {
			t.Fatalf("ParseHostPort(%q) = %+v: malformed target", s, tg)
		}
		again, err := ParseHostPort(tg.HostPort())
		if err != nil || again != tg {
			t.Fatalf("ParseHostPort(%q) = %q, then %+v, %v", s, tg.HostPort(), again, err)
		}
		h, p, err := net.SplitHostPort(s)
		if err != nil {
			t.Fatalf("ParseHostPort accepted %q, net.SplitHostPort refuses it: %v", s, err)
		}
		if got := fuzzCanonHost(h); got != tg.Host {
			t.Fatalf("ParseHostPort(%q) reads host %q, net.SplitHostPort %q", s, tg.Host, h)
		}
		if n, err := strconv.ParseUint(p, 10, 16); err != nil || uint16(n) != tg.Port {
			t.Fatalf("ParseHostPort(%q) reads port %d, net.SplitHostPort %q", s, tg.Port, p)
		}
		if ap, err := netip.ParseAddrPort(s); err == nil && (ap.Addr() != tg.Addr || ap.Port() != tg.Port) {
			t.Fatalf("ParseHostPort(%q) = %v %d, netip reads %v", s, tg.Addr, tg.Port, ap)
		}
		readings := []string{h, tg.Host}
		if w, err := wp.Parse("http://" + s + "/"); err == nil {
			if got := fuzzCanonHost(w.Hostname()); got != tg.Host {
				t.Fatalf("ParseHostPort(%q) reads host %q, WHATWG %q", s, tg.Host, w.Hostname())
			}
			readings = append(readings, w.Hostname())
		}
		for _, r := range readings {
			for _, chk := range []*Checker{def, unwrap} {
				a, internal := internalReading(chk, r)
				if !internal {
					continue
				}
				for _, lane := range []Lane{LaneTCP, LaneUDP, LaneTLS} {
					if v := chk.CheckName(lane, tg); v.Allow {
						t.Fatalf("%q: a parser reads %s (%s), and the policy allows it on %s: %v", s, a, Classify(a), lane, v)
					}
				}
			}
		}
	})
}
