package crawl

import (
	"errors"
	"net"
	"net/url"
	"strings"
	"sync"
)

// Errors of Normalize.
var (
	ErrScheme = errors.New("crawl: not an http or https URL")
	ErrNoHost = errors.New("crawl: URL has no host")
)

// Normalize returns the form of an absolute http(s) URL that a crawl
// fetches and deduplicates on. It is conservative: it changes only what
// cannot change the resource on any server (RFC 3986 §6.2.2-6.2.3):
//   - spaces and control characters around it trimmed, tabs and newlines in
//     it removed, as browsers do;
//   - scheme and host in lower case, trailing dots of the host dropped;
//   - the scheme's default port dropped;
//   - percent-encoding, in the path and the query: hex digits in upper
//     case, unreserved characters (ALPHA DIGIT - . _ ~) decoded, bytes
//     outside ASCII and what browsers escape in a query encoded;
//   - dot segments removed from the path, an empty path made "/";
//   - the fragment and an empty query ("?") dropped.
//
// Query parameters are neither reordered nor removed. It returns ErrScheme
// for other schemes, ErrNoHost for a URL without a host and the parse
// error of net/url for a malformed URL.
func Normalize(raw string) (string, error) {
	u, err := url.Parse(preEscape(raw))
	if err != nil {
		return "", err
	}
	return normalizeURL(u)
}

func normalizeURL(u *url.URL) (string, error) {
	scheme := strings.ToLower(u.Scheme)
	if scheme != "http" && scheme != "https" {
		return "", ErrScheme
	}
	if u.Opaque != "" || u.Host == "" {
		return "", ErrNoHost
	}
	host, port := splitHostPort(u.Host)
	host = canonicalHost(host)
	if host == "" {
		return "", ErrNoHost
	}
	if port == defaultPort(scheme) {
		port = ""
	}
	var user string
	if u.User != nil {
		user = u.User.String() + "@"
	}
	if strings.IndexByte(host, ':') >= 0 {
		host = "[" + host + "]"
	}
	if port != "" {
		port = ":" + port
	}
	p := removeDotSegments(normalizeEscapes(u.EscapedPath()))
	if p == "" {
		p = "/"
	}
	q := ""
	if u.RawQuery != "" {
		q = "?" + escapeQuery(normalizeEscapes(u.RawQuery))
	}
	// One allocation of the exact size: frontiers hold many of these.
	var b strings.Builder
	b.Grow(len(scheme) + 3 + len(user) + len(host) + len(port) + len(p) + len(q))
	b.WriteString(scheme)
	b.WriteString("://")
	b.WriteString(user)
	b.WriteString(host)
	b.WriteString(port)
	b.WriteString(p)
	b.WriteString(q)
	return b.String(), nil
}

// preEscape prepares a URL reference for net/url as a browser would read
// it (WHATWG URL): leading and trailing spaces and control characters
// trimmed, tabs and newlines removed, then the bytes outside ASCII, spaces
// and control characters percent-encoded, except in the authority. net/url
// would otherwise drop the written form of such a path (RawPath), and with
// it the difference between "%2F" and "/".
func preEscape(ref string) string {
	ref = strings.TrimFunc(ref, func(r rune) bool { return r <= ' ' })
	if strings.ContainsAny(ref, "\t\n\r") {
		ref = strings.NewReplacer("\t", "", "\n", "", "\r", "").Replace(ref)
	}
	i := 0
	for ; i < len(ref); i++ {
		if c := ref[i]; c >= 0x80 || c <= ' ' || c == 0x7f {
			break
		}
	}
	if i == len(ref) {
		return ref
	}
	// Skip the scheme and authority, if any.
	start := 0
	if j := strings.Index(ref, "//"); j >= 0 && (j == 0 || j > 0 && ref[j-1] == ':' && !strings.ContainsAny(ref[:j-1], "/?#")) {
		start = j + 2
		if k := strings.IndexAny(ref[start:], "/?#"); k >= 0 {
			start += k
		} else {
			return ref
		}
	}
	var b strings.Builder
	b.Grow(len(ref) + 16)
	b.WriteString(ref[:start])
	for i := start; i < len(ref); i++ {
		if c := ref[i]; c >= 0x80 || c <= ' ' || c == 0x7f {
			b.WriteByte('%')
			b.WriteByte(upperHex[c>>4])
			b.WriteByte(upperHex[c&15])
		} else {
			b.WriteByte(c)
		}
	}
	return b.String()
}

// splitHostPort splits u.Host; IPv6 brackets are removed from the host.
func splitHostPort(hostport string) (host, port string) {
	if h, p, err := net.SplitHostPort(hostport); err == nil {
		return h, p
	}
	return strings.TrimSuffix(strings.TrimPrefix(hostport, "["), "]"), ""
}

// canonicalHost lower-cases a host name and drops its trailing dots.
func canonicalHost(h string) string {
	return strings.TrimRight(strings.ToLower(h), ".")
}

// hostOf returns the canonical host name (no port, no brackets) of a
// normalised URL.
func hostOf(u *url.URL) string { return canonicalHost(u.Hostname()) }

// originOf returns scheme://host[:port] of a normalised URL: the unit that
// robots.txt, crawl-delay and the per-host limit apply to (RFC 9309 §2.3).
func originOf(u *url.URL) string { return u.Scheme + "://" + u.Host }

func defaultPort(scheme string) string {
	if scheme == "https" {
		return "443"
	}
	return "80"
}

func isUnreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~'
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

const upperHex = "0123456789ABCDEF"

// normalizeEscapes decodes percent-encoded unreserved characters and
// upper-cases the hex digits of the other escapes (RFC 3986 §6.2.2.1-2).
// A '%' not followed by two hex digits is left as it is.
func normalizeEscapes(s string) string {
	i := strings.IndexByte(s, '%')
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	b.WriteString(s[:i])
	for ; i < len(s); i++ {
		c := s[i]
		if c != '%' || i+2 >= len(s) {
			b.WriteByte(c)
			continue
		}
		hi, ok1 := unhex(s[i+1])
		lo, ok2 := unhex(s[i+2])
		if !ok1 || !ok2 {
			b.WriteByte(c)
			continue
		}
		if d := hi<<4 | lo; isUnreserved(d) {
			b.WriteByte(d)
		} else {
			b.WriteByte('%')
			b.WriteByte(upperHex[hi])
			b.WriteByte(upperHex[lo])
		}
		i += 2
	}
	return b.String()
}

// escapeQuery percent-encodes what a browser would in a query (the WHATWG
// query percent-encode set): net/url keeps RawQuery as it was written.
func escapeQuery(q string) string {
	need := false
	for i := 0; i < len(q); i++ {
		if queryEscaped(q[i]) {
			need = true
			break
		}
	}
	if !need {
		return q
	}
	var b strings.Builder
	b.Grow(len(q) + 8)
	for i := 0; i < len(q); i++ {
		if c := q[i]; queryEscaped(c) {
			b.WriteByte('%')
			b.WriteByte(upperHex[c>>4])
			b.WriteByte(upperHex[c&15])
		} else {
			b.WriteByte(c)
		}
	}
	return b.String()
}

func queryEscaped(c byte) bool {
	return c <= ' ' || c >= 0x7f || c == '"' || c == '<' || c == '>' || c == '\'' || c == '`'
}

// removeDotSegments is RFC 3986 §5.2.4 on an escaped path.
func removeDotSegments(p string) string {
	if !strings.Contains(p, ".") {
		return p
	}
	segs := strings.Split(p, "/")
	out := make([]string, 0, len(segs))
	for i, s := range segs {
		last := i == len(segs)-1
		switch s {
		case ".":
			if last {
				out = append(out, "")
			}
		case "..":
			if len(out) > 1 {
				out = out[:len(out)-1]
			}
			if last {
				out = append(out, "")
			}
		default:
			out = append(out, s)
		}
	}
	r := strings.Join(out, "/")
	if strings.HasPrefix(p, "/") && !strings.HasPrefix(r, "/") {
		r = "/" + r
	}
	return r
}

// scope decides which hosts a seed crawl stays on. It is safe for
// concurrent use: a seed that redirects widens it once.
type scope struct {
	mu         sync.RWMutex
	bases      []string // canonical host names
	subdomains bool
	external   bool // every host is in scope (the policy still decides each fetch)
}

func newScope(host string, subdomains bool) *scope {
	s := &scope{subdomains: subdomains}
	s.add(host)
	return s
}

// add admits host (and, with subdomains, the hosts under it). With
// subdomains a leading "www." is dropped, so that www.example.com admits
// example.com and blog.example.com.
func (s *scope) add(host string) {
	if s.subdomains && net.ParseIP(host) == nil {
		host = strings.TrimPrefix(host, "www.")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, b := range s.bases {
		if b == host {
			return
		}
	}
	s.bases = append(s.bases, host)
}

func (s *scope) contains(host string) bool {
	if s.external {
		return true
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, b := range s.bases {
		if host == b {
			return true
		}
		if s.subdomains && len(host) > len(b) && strings.HasSuffix(host, b) &&
			host[len(host)-len(b)-1] == '.' && net.ParseIP(b) == nil {
			return true
		}
	}
	return false
}
