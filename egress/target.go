package egress

import (
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	whatwg "github.com/nlnwa/whatwg-url/url"
	"golang.org/x/net/idna"
)

// MaxURLLength is the longest URL ParseURL accepts.
const MaxURLLength = 8192

// Target is a canonical destination: a lowercase ASCII host name (IDNs in
// punycode, no trailing dot) or an IP literal, and a port. URL targets also
// carry the canonical URL (fragment dropped, default port omitted).
// The zero Target is invalid.
type Target struct {
	Scheme string     // "http" or "https" for URL targets, "" for host:port targets
	Host   string     // canonical host: a name, or the IP literal in netip's form (no brackets)
	Addr   netip.Addr // the literal address when Host is an IP literal, else invalid
	Port   uint16
	URL    *url.URL // canonical URL for URL targets, nil for host:port targets
}

// IsIP reports whether the host is an IP literal (no DNS is needed).
func (t Target) IsIP() bool { return t.Addr.IsValid() }

// HostPort returns host:port with IPv6 literals bracketed.
func (t Target) HostPort() string {
	return joinHostPort(t.Host, t.Port)
}

// Origin returns scheme://host:port, the unit of credential scoping.
func (t Target) Origin() string {
	return t.Scheme + "://" + t.HostPort()
}

// String returns the canonical URL, or host:port.
func (t Target) String() string {
	if t.URL != nil {
		return t.URL.String()
	}
	return t.HostPort()
}

func joinHostPort(host string, port uint16) string {
	p := strconv.FormatUint(uint64(port), 10)
	if strings.IndexByte(host, ':') >= 0 {
		return "[" + host + "]:" + p
	}
	return host + ":" + p
}

var whatwgParser = whatwg.NewParser()

var idnaProfile = idna.New(
	idna.MapForLookup(),
	idna.BidiRule(),
	idna.ValidateLabels(true),
	idna.Transitional(false),
	idna.StrictDomainName(false), // allow '_' (checked below); other ASCII is refused by canonicalName
	idna.VerifyDNSLength(true),
)

// ParseURL parses an http or https URL into a canonical Target. It refuses,
// with an *Error whose Reason says why, anything two parsers could read
// differently: backslashes, control characters and whitespace, userinfo,
// percent-encoded hosts, zone IDs, non-canonical numeric hosts (2130706433,
// 0x7f.1, 0177.0.0.1, 127.1), empty hosts and ports 0 or above 65535.
// Refusals of ambiguous input have Code CodeDenied; merely malformed input
// has Code CodeInvalid. Other schemes are denied with Reason ReasonScheme.
func ParseURL(raw string) (Target, error) {
	const op = "parse"
	if raw == "" {
		return Target{}, invalid(op, raw, ReasonMalformed, "empty URL")
	}
	if len(raw) > MaxURLLength {
		return Target{}, invalid(op, "", ReasonMalformed, "URL longer than "+strconv.Itoa(MaxURLLength)+" bytes")
	}
	if r, ok := badByte(raw); ok {
		return Target{}, denied(op, raw, ReasonParseAmbiguous, "contains "+r)
	}
	colon := strings.IndexByte(raw, ':')
	if colon <= 0 {
		return Target{}, invalid(op, raw, ReasonMalformed, "no scheme")
	}
	scheme := strings.ToLower(raw[:colon])
	if scheme != "http" && scheme != "https" {
		if !validScheme(scheme) {
			return Target{}, invalid(op, raw, ReasonMalformed, "no scheme")
		}
		return Target{}, denied(op, raw, ReasonScheme, "scheme "+strconv.Quote(scheme)+" is not http or https")
	}
	rest := raw[colon+1:]
	if !strings.HasPrefix(rest, "//") {
		return Target{}, denied(op, raw, ReasonParseAmbiguous, "no // after the scheme")
	}
	authority := rest[2:]
	if i := strings.IndexAny(authority, "/?#"); i >= 0 {
		authority = authority[:i]
	}
	if strings.IndexByte(authority, '@') >= 0 {
		return Target{}, denied(op, raw, ReasonUserinfo, "userinfo in URL")
	}
	if strings.IndexByte(authority, '%') >= 0 {
		return Target{}, denied(op, raw, ReasonParseAmbiguous, "percent-encoding or zone in host")
	}
	hostPart, portStr, err := splitAuthority(authority)
	if err != nil {
		err.Op, err.Target = op, raw
		return Target{}, err
	}
	t, perr := canonicalHost(hostPart)
	if perr != nil {
		perr.Op, perr.Target = op, raw
		return Target{}, perr
	}
	t.Scheme = scheme
	t.Port = defaultPort(scheme)
	if portStr != "" {
		p, perr := parsePort(portStr)
		if perr != nil {
			perr.Op, perr.Target = op, raw
			return Target{}, perr
		}
		t.Port = p
	}

	u, uerr := url.Parse(raw)
	if uerr != nil {
		return Target{}, &Error{Code: CodeInvalid, Reason: ReasonMalformed, Op: op, Target: raw, Err: uerr}
	}
	if u.User != nil || u.Opaque != "" {
		return Target{}, denied(op, raw, ReasonParseAmbiguous, "net/url reads an opaque or userinfo form")
	}
	// Differential: net/url and a WHATWG (browser) parser must read the same
	// host and port as our own canonical reading, else someone downstream
	// could connect to a different place than the one we checked.
	if simpleAuthority(authority, t) {
		// Letters, digits, dots and hyphens (or a canonical dotted quad) and a
		// decimal port: every parser reads this the same way; only confirm
		// net/url's split.
		if !strings.EqualFold(u.Host, authority) {
			return Target{}, denied(op, raw, ReasonParseAmbiguous, "net/url reads host "+strconv.Quote(u.Host))
		}
	} else if d := differential(raw, u, t); d != "" {
		return Target{}, denied(op, raw, ReasonParseAmbiguous, d)
	}
	cu := &url.URL{
		Scheme:   scheme,
		Host:     t.Host,
		Path:     u.Path,
		RawPath:  u.RawPath,
		RawQuery: u.RawQuery,
	}
	if t.Addr.Is6() {
		cu.Host = "[" + t.Host + "]"
	}
	if t.Port != defaultPort(scheme) {
		cu.Host = joinHostPort(t.Host, t.Port)
	}
	if cu.Path == "" {
		cu.Path = "/"
		cu.RawPath = ""
	}
	// Escaping can lengthen the URL (" becomes %22): the canonical form
	// must itself parse, so it obeys the same limit.
	if len(cu.String()) > MaxURLLength {
		return Target{}, invalid(op, "", ReasonMalformed, "canonical URL longer than "+strconv.Itoa(MaxURLLength)+" bytes")
	}
	t.URL = cu
	return t, nil
}

// ParseRequestURL is ParseURL for the URL a caller asks for: a string that
// is not an absolute URL at all ("not a url", "example.com:80") is
// malformed (CodeInvalid, ReasonMalformed), and so is a scheme other than
// http or https (CodeInvalid, ReasonScheme): the caller made a mistake, the
// policy refused nothing. Everything else is ParseURL's reading, so
// ambiguous hosts and bytes stay CodeDenied. Redirect locations and URLs a
// page asks for go through ParseURL, which denies other schemes.
func ParseRequestURL(raw string) (Target, error) {
	const op = "parse"
	if raw == "" || len(raw) > MaxURLLength {
		return ParseURL(raw)
	}
	// Read the scheme as a browser would (tabs and newlines removed,
	// leading and trailing spaces and controls trimmed), so that input a
	// browser reads as http is still ParseURL's to refuse as ambiguous.
	s := strings.Map(func(r rune) rune {
		if r == '\t' || r == '\n' || r == '\r' {
			return -1
		}
		return r
	}, raw)
	s = strings.TrimFunc(s, func(r rune) bool { return r <= ' ' })
	colon := strings.IndexByte(s, ':')
	if colon <= 0 || !validScheme(strings.ToLower(s[:colon])) {
		return Target{}, invalid(op, raw, ReasonMalformed, "not an absolute URL (want http:// or https:// and a host)")
	}
	if scheme := strings.ToLower(s[:colon]); scheme != "http" && scheme != "https" {
		return Target{}, invalid(op, raw, ReasonScheme, "scheme "+strconv.Quote(scheme)+" is not http or https")
	}
	return ParseURL(raw)
}

// ParseHostPort parses host:port (IPv6 literals bracketed) for the raw
// exchange lanes, with the same host rules as ParseURL. The port is required.
func ParseHostPort(s string) (Target, error) {
	const op = "parse"
	if s == "" {
		return Target{}, invalid(op, s, ReasonMalformed, "empty target")
	}
	if len(s) > 1024 {
		return Target{}, invalid(op, "", ReasonMalformed, "target too long")
	}
	if r, ok := badByte(s); ok {
		return Target{}, denied(op, s, ReasonParseAmbiguous, "contains "+r)
	}
	if strings.ContainsAny(s, "/?#") {
		return Target{}, invalid(op, s, ReasonMalformed, "want host:port, not a URL")
	}
	if strings.IndexByte(s, '@') >= 0 {
		return Target{}, denied(op, s, ReasonUserinfo, "userinfo in target")
	}
	if strings.IndexByte(s, '%') >= 0 {
		return Target{}, denied(op, s, ReasonParseAmbiguous, "percent-encoding or zone in host")
	}
	hostPart, portStr, err := splitAuthority(s)
	if err != nil {
		err.Op, err.Target = op, s
		return Target{}, err
	}
	if portStr == "" {
		return Target{}, invalid(op, s, ReasonBadPort, "port required")
	}
	t, perr := canonicalHost(hostPart)
	if perr != nil {
		perr.Op, perr.Target = op, s
		return Target{}, perr
	}
	// The same host must read the same in a URL: a browser-style parser
	// reads some names (0-0, 0x-1) as IPv4 addresses.
	if d := hostDifferential(hostPart, t); d != "" {
		return Target{}, denied(op, s, ReasonParseAmbiguous, d)
	}
	p, perr := parsePort(portStr)
	if perr != nil {
		perr.Op, perr.Target = op, s
		return Target{}, perr
	}
	t.Port = p
	return t, nil
}

// ParseHost canonicalises a bare host (name or IP literal, IPv6 optionally
// bracketed) with the rules of ParseURL.
func ParseHost(s string) (Target, error) {
	if r, ok := badByte(s); ok {
		return Target{}, denied("parse", s, ReasonParseAmbiguous, "contains "+r)
	}
	if strings.ContainsAny(s, "%@/?#") {
		return Target{}, denied("parse", s, ReasonParseAmbiguous, "not a bare host")
	}
	t, err := canonicalHost(s)
	if err != nil {
		err.Op, err.Target = "parse", s
		return Target{}, err
	}
	return t, nil
}

func defaultPort(scheme string) uint16 {
	if scheme == "https" {
		return 443
	}
	return 80
}

func validScheme(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z':
		case i > 0 && (c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.'):
		default:
			return false
		}
	}
	return s != ""
}

// badByte finds bytes no URL or host:port may carry unencoded: ASCII control
// characters, DEL, whitespace, backslashes, and Unicode whitespace or
// invisible format characters that parsers strip differently.
func badByte(s string) (string, bool) {
	for i, r := range s {
		switch {
		case r < 0x20 || r == 0x7f:
			return "a control character at byte " + strconv.Itoa(i), true
		case r == ' ':
			return "a space at byte " + strconv.Itoa(i), true
		case r == '\\':
			return "a backslash at byte " + strconv.Itoa(i), true
		case r == 0xfffd:
			return "invalid UTF-8 at byte " + strconv.Itoa(i), true
		case r >= 0x80 && (isUnicodeSpace(r) || isFormatChar(r)):
			return "a Unicode space or format character at byte " + strconv.Itoa(i), true
		}
	}
	return "", false
}

func isUnicodeSpace(r rune) bool {
	switch r {
	case 0x85, 0xa0, 0x1680, 0x2028, 0x2029, 0x202f, 0x205f, 0x3000:
		return true
	}
	return r >= 0x2000 && r <= 0x200a
}

func isFormatChar(r rune) bool {
	switch {
	case r == 0xad, r == 0x34f, r == 0x61c, r == 0xfeff:
		return true
	case r >= 0x180b && r <= 0x180f: // Mongolian variation selectors and vowel separator
		return true
	case r >= 0x200b && r <= 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x2060 && r <= 0x206f:
		return true
	case r >= 0xfe00 && r <= 0xfe0f: // variation selectors, which IDNA maps to nothing
		return true
	case r >= 0xfff0 && r <= 0xfffb, r >= 0x1bca0 && r <= 0x1bca3, r >= 0xe0000 && r <= 0xe0fff:
		return true
	}
	return false
}

// splitAuthority splits host[:port] or [v6][:port].
func splitAuthority(a string) (host, port string, err *Error) {
	if a == "" {
		return "", "", invalid("", "", ReasonEmptyHost, "empty host")
	}
	if a[0] == '[' {
		end := strings.IndexByte(a, ']')
		if end < 0 {
			return "", "", invalid("", "", ReasonMalformed, "unclosed [ in host")
		}
		host, rest := a[:end+1], a[end+1:]
		if rest == "" {
			return host, "", nil
		}
		if rest[0] != ':' {
			return "", "", invalid("", "", ReasonMalformed, "garbage after ]")
		}
		if rest == ":" {
			return host, "", nil
		}
		return host, rest[1:], nil
	}
	i := strings.LastIndexByte(a, ':')
	if i < 0 {
		return a, "", nil
	}
	if strings.IndexByte(a[:i], ':') >= 0 {
		return "", "", denied("", "", ReasonParseAmbiguous, "unbracketed IPv6 or several colons")
	}
	if i == len(a)-1 {
		return a[:i], "", nil // "host:" means the default port, as in both parsers
	}
	return a[:i], a[i+1:], nil
}

func parsePort(s string) (uint16, *Error) {
	if s == "" || len(s) > 5 {
		return 0, invalid("", "", ReasonBadPort, "port "+strconv.Quote(s)+" out of range")
	}
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, invalid("", "", ReasonBadPort, "port "+strconv.Quote(s)+" is not a decimal number")
		}
		n = n*10 + int(c-'0')
	}
	if n == 0 || n > 65535 {
		return 0, invalid("", "", ReasonBadPort, "port "+strconv.Quote(s)+" out of range")
	}
	return uint16(n), nil
}

// canonicalHost turns a host (name, dotted IPv4, or bracketed/unbracketed
// IPv6) into a Target with Host (and Addr for literals) set.
func canonicalHost(h string) (Target, *Error) {
	if h == "" || h == "[]" {
		return Target{}, invalid("", "", ReasonEmptyHost, "empty host")
	}
	if h[0] == '[' {
		if h[len(h)-1] != ']' {
			return Target{}, invalid("", "", ReasonMalformed, "unclosed [ in host")
		}
		inner := h[1 : len(h)-1]
		if strings.IndexByte(inner, '%') >= 0 {
			return Target{}, denied("", "", ReasonParseAmbiguous, "zone ID in IPv6 literal")
		}
		a, err := netip.ParseAddr(inner)
		if err != nil || !a.Is6() {
			return Target{}, invalid("", "", ReasonMalformed, "bad IPv6 literal")
		}
		return Target{Host: a.String(), Addr: a}, nil
	}
	if strings.IndexByte(h, ':') >= 0 {
		if a, err := netip.ParseAddr(h); err == nil && a.Is6() && a.Zone() == "" {
			return Target{Host: a.String(), Addr: a}, nil
		}
		return Target{}, denied("", "", ReasonParseAmbiguous, "colon in host")
	}
	lower := strings.ToLower(h)
	if strings.HasSuffix(lower, ".") {
		lower = lower[:len(lower)-1]
		if lower == "" || strings.HasSuffix(lower, ".") {
			return Target{}, invalid("", "", ReasonBadHost, "empty label")
		}
	}
	if looksNumeric(lower) {
		a, err := netip.ParseAddr(lower)
		if err != nil || !a.Is4() {
			return Target{}, denied("", "", ReasonNumericHost, "non-canonical numeric host "+strconv.Quote(h))
		}
		return Target{Host: a.String(), Addr: a}, nil
	}
	if plainLDH(lower) {
		if e := checkName(lower); e != "" {
			return Target{}, invalid("", "", ReasonBadHost, e)
		}
		return Target{Host: lower}, nil
	}
	name, err := idnaProfile.ToASCII(lower)
	if err != nil {
		return Target{}, &Error{Code: CodeInvalid, Reason: ReasonBadHost, Detail: "not a valid host name", Err: err}
	}
	name = strings.ToLower(name)
	if e := checkName(name); e != "" {
		return Target{}, invalid("", "", ReasonBadHost, e)
	}
	// IDNA mapping can turn fullwidth digits and dots into an address.
	if looksNumeric(name) {
		return Target{}, denied("", "", ReasonNumericHost, "host maps to a numeric form "+strconv.Quote(name))
	}
	return Target{Host: name}, nil
}

// looksNumeric applies the WHATWG "ends in a number" rule: the last label is
// all decimal digits or 0x-hex. Browsers parse such hosts as IPv4 in any
// radix and with fewer than four parts; we accept only the canonical
// dotted quad and refuse everything else.
func looksNumeric(h string) bool {
	last := h
	if i := strings.LastIndexByte(h, '.'); i >= 0 {
		last = h[i+1:]
	}
	if last == "" {
		return false
	}
	if strings.HasPrefix(last, "0x") {
		for i := 2; i < len(last); i++ {
			if !isHex(last[i]) {
				return false
			}
		}
		return true
	}
	for i := 0; i < len(last); i++ {
		if last[i] < '0' || last[i] > '9' {
			return false
		}
	}
	return true
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func checkName(name string) string {
	if name == "" {
		return "empty host"
	}
	if len(name) > 253 {
		return "host longer than 253 bytes"
	}
	for _, label := range strings.Split(name, ".") {
		if label == "" {
			return "empty label"
		}
		if len(label) > 63 {
			return "label longer than 63 bytes"
		}
		if label[0] == '-' || label[len(label)-1] == '-' {
			return "label starts or ends with a hyphen"
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return "character " + strconv.QuoteRune(rune(c)) + " not allowed in a host name"
			}
		}
	}
	return ""
}

// differential returns a description when net/url or the WHATWG parser read
// a different host or port than t, or "" when all three agree.
func differential(raw string, u *url.URL, t Target) string {
	nh, err := canonicalHost(u.Hostname())
	if u.Hostname() != "" && strings.IndexByte(u.Host, '[') >= 0 {
		nh, err = canonicalHost("[" + u.Hostname() + "]")
	}
	if err != nil || nh.Host != t.Host {
		return "net/url reads host " + strconv.Quote(u.Hostname())
	}
	np := t.Port
	if ps := u.Port(); ps != "" {
		p, perr := parsePort(ps)
		if perr != nil || p != t.Port {
			return "net/url reads port " + strconv.Quote(ps)
		}
	} else if np != defaultPort(t.Scheme) {
		return "net/url reads no port"
	}
	w, werr := whatwgParser.Parse(raw)
	if werr != nil {
		return "a WHATWG parser refuses it: " + werr.Error()
	}
	if whatwgHost(w) != t.Host {
		return "a WHATWG parser reads host " + strconv.Quote(w.Hostname())
	}
	wp := defaultPort(t.Scheme)
	if w.Port() != "" {
		wp = uint16(w.DecodedPort())
	}
	if wp != t.Port {
		return "a WHATWG parser reads port " + strconv.Quote(w.Port())
	}
	if !strings.EqualFold(w.Scheme(), t.Scheme) {
		return "a WHATWG parser reads scheme " + strconv.Quote(w.Scheme())
	}
	return ""
}

// whatwgHost is the host the WHATWG parser read, in Target.Host's form.
func whatwgHost(w *whatwg.Url) string {
	wh := w.Hostname()
	if strings.HasPrefix(wh, "[") {
		wh = strings.TrimSuffix(strings.TrimPrefix(wh, "["), "]")
	}
	wh = strings.TrimSuffix(strings.ToLower(wh), ".")
	if a, err := netip.ParseAddr(wh); err == nil {
		return a.String()
	}
	return wh
}

// hostDifferential returns a description when the WHATWG parser reads host
// (bracketed when IPv6) as the authority of an http URL differently from t.
func hostDifferential(host string, t Target) string {
	w, err := whatwgParser.Parse("http://" + host + "/")
	if err != nil {
		return "a WHATWG parser refuses the host: " + err.Error()
	}
	if whatwgHost(w) != t.Host {
		return "a WHATWG parser reads host " + strconv.Quote(w.Hostname())
	}
	return ""
}

// plainLDH reports whether h is lowercase ASCII letters, digits, hyphens
// and dots with no punycode label: IDNA would return it unchanged, so the
// mapping can be skipped (checkName still validates it). The caller has
// already ruled out numeric forms.
func plainLDH(h string) bool {
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.') {
			return false
		}
	}
	return !strings.HasPrefix(h, "xn--") && !strings.Contains(h, ".xn--")
}

// simpleAuthority reports whether the raw authority is a form on which
// net/url, a WHATWG parser and ours cannot disagree: an LDH name (no
// punycode, not numeric) or the canonical dotted quad we produced, with an
// optional decimal port without leading zeros.
func simpleAuthority(authority string, t Target) bool {
	host, port, _ := strings.Cut(authority, ":")
	if port != "" && (port[0] == '0' || strconv.Itoa(int(t.Port)) != port) {
		return false
	}
	if t.Addr.IsValid() {
		return t.Addr.Is4() && host == t.Host
	}
	if host != t.Host || !plainLDH(host) {
		return false
	}
	// Every label starts with a letter: nothing a parser could take for a
	// number in any radix (0x-1, 0-0 are read as addresses by some).
	for i := 0; i < len(host); i++ {
		if (i == 0 || host[i-1] == '.') && !(host[i] >= 'a' && host[i] <= 'z') {
			return false
		}
	}
	return true
}
