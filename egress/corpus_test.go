package egress

import (
	"bufio"
	"context"
	"fmt"
	"net/netip"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// The bypass corpus: testdata/ssrf-bypass-corpus.txt holds payloads taken
// from public SSRF payload lists (sources at the top of the file), one a
// line as EXPECT<TAB>TARGET[<TAB>resolve=NAME=IP[,IP...]]. TestCorpus runs
// each through ParseURL and a Dialer's Resolve with DefaultPolicy and a
// StaticResolver, so names are answered offline and no DNS is ever sent.
// TestCorpusGenerated adds the encodings the lists describe for every
// internal IPv4 address of interest (decimal, octal, hex, mixed, short,
// overflowing, Unicode, percent-encoded, IPv6 embeddings) inside the URL
// templates of cujanovic/SSRF-Testing's ip.py and the parser-confusion
// tricks of the same lists.

const corpusFile = "testdata/ssrf-bypass-corpus.txt"

type corpusCase struct {
	line    int    // 0 for generated cases
	expect  bool   // true: allow
	target  string // the URL as given
	hosts   map[string][]netip.Addr
	unwrap  *bool // the verdict with UnwrapEmbeddedIPv4, when it differs or matters
	comment string
}

func (c corpusCase) String() string {
	where := c.comment
	if c.line > 0 {
		where = corpusFile + ":" + strconv.Itoa(c.line)
	}
	return fmt.Sprintf("%s %q", where, c.target)
}

// readBypassCorpus parses the corpus file.
func readBypassCorpus(tb testing.TB) []corpusCase {
	tb.Helper()
	f, err := os.Open(corpusFile)
	if err != nil {
		tb.Fatalf("open corpus: %v", err)
	}
	defer f.Close()
	var out []corpusCase
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Split(line, "\t")
		if len(fields) < 2 {
			tb.Fatalf("%s:%d: want EXPECT<TAB>TARGET, got %q", corpusFile, n, line)
		}
		c := corpusCase{line: n, target: fields[1]}
		switch fields[0] {
		case "allow":
			c.expect = true
		case "deny":
		default:
			tb.Fatalf("%s:%d: EXPECT %q is not allow or deny", corpusFile, n, fields[0])
		}
		if strings.HasPrefix(c.target, `"`) {
			if c.target, err = strconv.Unquote(c.target); err != nil {
				tb.Fatalf("%s:%d: %v", corpusFile, n, err)
			}
		}
		for _, opt := range fields[2:] {
			spec, ok := strings.CutPrefix(opt, "resolve=")
			if !ok {
				tb.Fatalf("%s:%d: unknown option %q", corpusFile, n, opt)
			}
			name, addrs, err := parseResolveSpec(spec)
			if err != nil {
				tb.Fatalf("%s:%d: %v", corpusFile, n, err)
			}
			if c.hosts == nil {
				c.hosts = map[string][]netip.Addr{}
			}
			c.hosts[name] = addrs
		}
		out = append(out, c)
	}
	if err := sc.Err(); err != nil {
		tb.Fatal(err)
	}
	return out
}

// parseResolveSpec reads NAME=IP[,IP...] like curl's --resolve, with the
// name canonicalised as ParseURL does.
func parseResolveSpec(spec string) (string, []netip.Addr, error) {
	name, list, ok := strings.Cut(spec, "=")
	if !ok {
		return "", nil, fmt.Errorf("resolve %q: want NAME=IP[,IP...]", spec)
	}
	t, err := ParseHost(name)
	if err != nil || t.IsIP() {
		return "", nil, fmt.Errorf("resolve %q: bad name: %v", spec, err)
	}
	var addrs []netip.Addr
	for _, s := range strings.Split(list, ",") {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return "", nil, fmt.Errorf("resolve %q: %v", spec, err)
		}
		addrs = append(addrs, a)
	}
	return t.Host, addrs, nil
}

// corpusVerdict decides target the way a fetch does: parse, then the
// dialer's one resolution and check. It reports the reason of a denial.
func corpusVerdict(chk *Checker, target string, hosts map[string][]netip.Addr) (allow bool, reason Reason, addrs []netip.Addr) {
	t, err := ParseURL(target)
	if err != nil {
		return false, ReasonOf(err), nil
	}
	d := &Dialer{Policy: chk, Resolver: &StaticResolver{Hosts: hosts}}
	res, err := d.Resolve(context.Background(), LaneHTTP, t, nil)
	if err != nil {
		return false, ReasonOf(err), nil
	}
	if res.Excepted {
		return true, ReasonException, res.Addrs
	}
	return true, ReasonAllowed, res.Addrs
}

type corpusStats struct {
	total, allowed int
	reasons        map[Reason]int
}

func runCorpus(t *testing.T, cases []corpusCase) corpusStats {
	t.Helper()
	def := DefaultPolicy().MustCompile()
	unwrap := Policy{Lanes: Lanes(), UnwrapEmbeddedIPv4: true}.MustCompile()
	st := corpusStats{reasons: map[Reason]int{}}
	for _, c := range cases {
		allow, reason, addrs := corpusVerdict(def, c.target, c.hosts)
		st.total++
		st.reasons[reason]++
		if allow {
			st.allowed++
		}
		if reason == ReasonDNSNotFound {
			t.Errorf("%v: the name needs a resolve= answer (no DNS in tests)", c)
			continue
		}
		if allow != c.expect {
			t.Errorf("%v: got allow=%v (%s), want allow=%v", c, allow, reason, c.expect)
			continue
		}
		for _, a := range addrs {
			if r := Classify(a); allow && r != "" {
				t.Errorf("%v: allowed with an internal answer %s (%s)", c, a, r)
			}
		}
		// Unwrapping embedded IPv4 must never let an internal target through.
		want := c.expect
		if c.unwrap != nil {
			want = *c.unwrap
		}
		if uallow, ureason, _ := corpusVerdict(unwrap, c.target, c.hosts); uallow != want {
			t.Errorf("%v: with UnwrapEmbeddedIPv4 got allow=%v (%s), want allow=%v", c, uallow, ureason, want)
		}
	}
	return st
}

func (s corpusStats) String() string {
	var keys []string
	for r, n := range s.reasons {
		keys = append(keys, fmt.Sprintf("%s=%d", r, n))
	}
	sort.Strings(keys)
	return fmt.Sprintf("%d payloads: %d allowed, %d denied (%s)", s.total, s.allowed, s.total-s.allowed, strings.Join(keys, " "))
}

func TestCorpus(t *testing.T) {
	cases := readBypassCorpus(t)
	if len(cases) < 300 {
		t.Fatalf("corpus has %d payloads, want at least 300", len(cases))
	}
	st := runCorpus(t, cases)
	if st.allowed == 0 || st.allowed == st.total {
		t.Errorf("corpus is one-sided: %v", st)
	}
	t.Logf("%s: %v", corpusFile, st)
}

// internalV4 are the internal IPv4 addresses of interest: one or two per
// floor class, and every metadata address.
var internalV4 = []string{
	"127.0.0.1", "127.1.2.3", "0.0.0.0", "10.0.0.1", "10.255.255.254", "172.16.0.1", "172.31.255.254",
	"192.168.0.1", "192.168.1.1", "169.254.169.254", "169.254.170.2", "169.254.1.1", "100.100.100.200",
	"168.63.129.16", "192.0.0.192", "100.64.0.1", "198.18.0.1", "224.0.0.1", "255.255.255.255",
	"240.0.0.1", "192.0.2.1",
}

var publicV4 = []string{"8.8.8.8", "1.1.1.1", "93.184.216.34"}

// hostForm is one spelling of an address as a URL host.
type hostForm struct {
	kind string
	host string
	// how the host reads: "canonical" (the address itself, allowed when
	// public), "embedded" (an IPv6 form: denied by default, re-checked with
	// unwrapping), "conservative" (an IPv6 form unwrapping still denies),
	// or "refused" (never accepted).
	reads string
}

func ipv4Forms(a netip.Addr) []hostForm {
	b := a.As4()
	v := uint64(b[0])<<24 | uint64(b[1])<<16 | uint64(b[2])<<8 | uint64(b[3])
	each := func(f string) string {
		return fmt.Sprintf(f+"."+f+"."+f+"."+f, b[0], b[1], b[2], b[3])
	}
	forms := []hostForm{
		{"canonical", a.String(), "canonical"},
		{"trailing dot", a.String() + ".", "canonical"},
		{"upper-case trailing dot", strings.ToUpper(a.String()) + ".", "canonical"},
		{"dotless decimal", strconv.FormatUint(v, 10), "refused"},
		{"dotless decimal overflow", strconv.FormatUint(v+1<<32, 10), "refused"},
		{"dotless hex", fmt.Sprintf("0x%x", v), "refused"},
		{"dotless hex upper", fmt.Sprintf("0X%X", v), "refused"},
		{"dotless hex padded", fmt.Sprintf("0x%016x", v), "refused"},
		{"dotless hex overflow", fmt.Sprintf("0x41414141%08x", v), "refused"},
		{"dotless octal", fmt.Sprintf("0%o", v), "refused"},
		{"dotted hex", each("0x%x"), "refused"},
		{"dotted hex padded", each("0x%08x"), "refused"},
		{"dotted octal", each("0%o"), "refused"},
		{"dotted octal padded", each("0000%o"), "refused"},
		{"zero padded", each("%03d"), "refused"},
		{"dotted overflow", fmt.Sprintf("%d.%d.%d.%d", int(b[0])+256, int(b[1])+256, int(b[2])+256, int(b[3])+256), "refused"},
		{"mixed hex octal", fmt.Sprintf("0x%x.0%o.%d.%d", b[0], b[1], b[2], b[3]), "refused"},
		{"mixed octal first", fmt.Sprintf("0%o.%d.%d.%d", b[0], b[1], b[2], b[3]), "refused"},
		{"three parts", fmt.Sprintf("%d.%d.%d", b[0], b[1], uint(b[2])<<8|uint(b[3])), "refused"},
		{"two parts", fmt.Sprintf("%d.%d", b[0], uint(b[1])<<16|uint(b[2])<<8|uint(b[3])), "refused"},
		{"two parts hex", fmt.Sprintf("0x%x.0x%x", b[0], uint(b[1])<<16|uint(b[2])<<8|uint(b[3])), "refused"},
		{"five parts", a.String() + ".0", "refused"},
		{"leading zero part", "0" + a.String(), "refused"},
		{"fullwidth digits", toFullwidth(a.String(), false), "refused"},
		{"fullwidth digits and dots", toFullwidth(a.String(), true), "refused"},
		{"ideographic full stops", strings.ReplaceAll(a.String(), ".", "。"), "refused"},
		{"halfwidth ideographic full stops", strings.ReplaceAll(a.String(), ".", "｡"), "refused"},
		{"circled digits", toCircled(a.String()), "refused"},
		{"mathematical bold digits", toMathBold(a.String()), "refused"},
		{"percent-encoded", percentEncodeAll(a.String()), "refused"},
		{"percent-encoded dots", strings.ReplaceAll(a.String(), ".", "%2E"), "refused"},
		{"encoded ideographic full stops", strings.ReplaceAll(a.String(), ".", "%E3%80%82"), "refused"},
		{"bracketed IPv4", "[" + a.String() + "]", "refused"},
	}
	hex := fmt.Sprintf("%x:%x", uint(b[0])<<8|uint(b[1]), uint(b[2])<<8|uint(b[3]))
	six := []hostForm{
		{"mapped", "[::ffff:" + a.String() + "]", "embedded"},
		{"mapped hex", "[::ffff:" + hex + "]", "embedded"},
		{"mapped expanded", "[0:0:0:0:0:ffff:" + a.String() + "]", "embedded"},
		{"mapped upper", "[::FFFF:" + strings.ToUpper(hex) + "]", "embedded"},
		{"compatible", "[::" + a.String() + "]", "embedded"},
		{"compatible hex", "[::" + hex + "]", "embedded"},
		{"NAT64", "[64:ff9b::" + a.String() + "]", "embedded"},
		{"NAT64 hex", "[64:ff9b::" + hex + "]", "embedded"},
		{"NAT64 local-use /96", "[" + rfc6052(netip.MustParsePrefix("64:ff9b:1::/96"), a).String() + "]", "conservative"},
		{"NAT64 local-use /48", "[" + rfc6052(nat64LocalUse, a).String() + "]", "conservative"},
		{"NAT64 local-use /56", "[" + rfc6052(netip.MustParsePrefix("64:ff9b:1::/56"), a).String() + "]", "conservative"},
		{"NAT64 local-use /64", "[" + rfc6052(netip.MustParsePrefix("64:ff9b:1::/64"), a).String() + "]", "conservative"},
		{"6to4", "[2002:" + hex + "::]", "embedded"},
		{"6to4 host", "[2002:" + hex + "::1]", "embedded"},
		{"Teredo client", "[" + teredo(teredoServer, a).String() + "]", "embedded"},
		{"Teredo server", "[" + teredo(a, netip.MustParseAddr("8.8.4.4")).String() + "]", "embedded"},
		{"mapped with zone", "[::ffff:" + a.String() + "%25eth0]", "refused"},
		{"mapped unbracketed", "::ffff:" + a.String(), "refused"},
	}
	if a.IsUnspecified() {
		// ::0.0.0.0 is "::" and 2002:0:0:: sits in 2002::/16 with 0.0.0.0
		// inside: all still embedded forms of an internal address.
		six = six[:len(six):len(six)]
	}
	return append(forms, six...)
}

func toFullwidth(s string, dots bool) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r >= '0' && r <= '9':
			b.WriteRune('０' + r - '0')
		case r == '.' && dots:
			b.WriteRune('．')
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func toCircled(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '0':
			b.WriteRune('⓪')
		case r >= '1' && r <= '9':
			b.WriteRune('①' + r - '1')
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func toMathBold(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r >= '0' && r <= '9' {
			b.WriteRune('𝟎' + r - '0')
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}

func percentEncodeAll(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		fmt.Fprintf(&b, "%%%02X", s[i])
	}
	return b.String()
}

// urlTemplate places a host form {H} in a URL next to the whitelisted
// host {G}. reads says what the URL's host is: "H" (the form itself), "good" (the whitelisted public host), or
// "refused" (the trick is refused whatever H is).
type urlTemplate struct {
	tmpl  string
	reads string
}

// goodHost stands for the whitelisted host of ip.py; it is public.
const goodHost = "www.google.com"

var urlTemplates = []urlTemplate{
	{"http://{H}/", "H"},
	{"https://{H}:443/", "H"},
	{"http://{H}:8080/admin", "H"},
	{"http://{H}/%61dmin", "H"},
	{"http://{H}:80?@{G}/", "H"},
	{"http://{H}:80#@{G}/", "H"},
	{"http://{H}/?url=http://{G}/", "H"},
	{"HTTP://{H}/", "H"},
	{"http://{G}@{H}:80/", "refused"},
	{"http://user:pass@{H}/", "refused"},
	{"http://{G}@@{H}:80/", "refused"},
	{"http://{G}@@@{H}:80/", "refused"},
	{"http://RandomText123@{H}:80@{G}/", "refused"},
	{"http://RandomText123@{H}:80+@{G}/", "refused"},
	{"http://RandomText123@{G}@{H}:80/", "refused"},
	{"http://{H}:80+&@{G}#+@{G}/", "refused"},
	{"http://{G}+&@{H}:80#+@{G}/", "refused"},
	{"http://{G}:80+&@{G}:80#+@{H}:80/", "refused"},
	{"http://{H}:80:80/", "refused"},
	{"http://{H}:80\t{G}/", "refused"},
	{"http://{H}:80%09{G}/", "refused"},
	{"http://{H}:80%2509{G}/", "refused"},
	{"http://{H}%20{G}:80/", "refused"},
	{"http://{H}:80;{G}:80/", "refused"},
	{"http://{H}:80,{G}:80/", "refused"},
	{"0://{H}:80;{G}:80/", "refused"},
	{`http://{H}\@{G}/`, "refused"},
	{`http://{G}\@{H}/`, "refused"},
	{`http://{H}:80\@@{G}:80/`, "refused"},
	{`http://{H}:80#\@{G}:80/`, "refused"},
	{`http:\\{H}/`, "refused"},
	{`http:/\/\{H}/`, "refused"},
	{"http:{H}/", "refused"},
	{"http:/{H}/", "refused"},
	{"http:///{H}/", "refused"},
	{"//{H}/", "refused"},
	{"http://{H}\r\nSLAVEOF evil 6379\r\n:80/", "refused"},
	{"http://{H}\x00.{G}/", "refused"},
	{"http://{H}%00.{G}/", "refused"},
	{"http://{G}%23@{H}/", "refused"},
	{"http://{H}.{G}/", "G-suffix"},
	{"gopher://{H}:6379/_INFO", "refused"},
	{"file://{H}/etc/passwd", "refused"},
	{"dict://{H}:11211/stats", "refused"},
	{"http://{G}/#@{H}/", "good"},
	{"http://{G}/?@{H}", "good"},
	{"http://{G}/{H}", "good"},
	{"http://{G}:80#@{H}:80/", "good"},
}

// TestCorpusGenerated crosses every host form of the addresses of interest
// with the URL templates, and adds the names that resolve to them.
func TestCorpusGenerated(t *testing.T) {
	t.Parallel()
	var cases []corpusCase
	goodHosts := map[string][]netip.Addr{goodHost: {netip.MustParseAddr("142.250.74.36")}}
	f, tr := false, true
	for _, list := range [][]string{internalV4, publicV4} {
		for _, s := range list {
			a := netip.MustParseAddr(s)
			internal := Classify(a) != ""
			for _, form := range ipv4Forms(a) {
				for _, tm := range urlTemplates {
					target := strings.ReplaceAll(strings.ReplaceAll(tm.tmpl, "{H}", form.host), "{G}", goodHost)
					c := corpusCase{target: target, hosts: goodHosts, comment: s + " " + form.kind + " in " + strconv.Quote(tm.tmpl)}
					switch tm.reads {
					case "refused":
						c.expect = false
					case "good":
						c.expect = true
					case "G-suffix":
						// H.www.google.com: a name when H is a name-like
						// form, refused when it ends in a number; the name
						// resolves to the public good host.
						if strings.HasSuffix(form.host, ".") {
							continue // H. + .G makes an empty label
						}
						c.expect = false
						if tg, err := ParseURL(target); err == nil && !tg.IsIP() {
							c.hosts = map[string][]netip.Addr{tg.Host: goodHosts[goodHost]}
							c.expect = true
						}
					case "H":
						switch form.reads {
						case "canonical":
							c.expect = !internal
						case "embedded":
							c.expect = false
							c.unwrap = &f
							if !internal {
								c.unwrap = &tr
							}
						case "conservative", "refused":
							c.expect = false
						}
					}
					cases = append(cases, c)
				}
			}
			// Names that answer this address, as wildcard DNS services do.
			for _, name := range []string{
				s + ".nip.io", "app." + s + ".nip.io", "customer1.app.localhost.my.company." + s + ".nip.io",
				s + ".xip.io", "www." + s + ".xip.io", strings.ReplaceAll(s, ".", "-") + ".sslip.io",
				"spoofed." + s + ".burpcollaborator.net",
			} {
				for _, tm := range []string{"http://{N}/", "https://{N}:8443/x", "http://{N}./", "http://{N}:80#@{G}/"} {
					target := strings.ReplaceAll(strings.ReplaceAll(tm, "{N}", name), "{G}", goodHost)
					cases = append(cases, corpusCase{target: target, hosts: map[string][]netip.Addr{name: {a}}, expect: !internal, comment: "name " + name})
				}
			}
			// A name answering the address and a public one is dns_mixed
			// (localtest.me-style, or one rebinding resolution).
			mixed := map[string][]netip.Addr{"rebind.example": {netip.MustParseAddr("93.184.216.34"), a}}
			cases = append(cases, corpusCase{target: "http://rebind.example/", hosts: mixed, expect: !internal, comment: "mixed answers with " + s})
			// AAAA-only answers carrying the address.
			for _, e := range []netip.Addr{mapped(a), rfc6052(nat64WKP, a), sixToFour(a)} {
				c := corpusCase{target: "http://aaaa.example/", hosts: map[string][]netip.Addr{"aaaa.example": {e}}, comment: "AAAA " + e.String()}
				c.unwrap = &f
				if !internal {
					c.unwrap = &tr
				}
				cases = append(cases, c)
			}
		}
	}
	st := runCorpus(t, cases)
	t.Logf("generated: %v", st)
}
