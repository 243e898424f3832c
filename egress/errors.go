package egress

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
)

// Code is the coarse class of a failure, one of the ten codes of Airlock's
// error vocabulary. egress produces a subset of them.
type Code string

// The codes egress returns. They match the root vocabulary string for string.
const (
	CodeDenied      Code = "denied"
	CodeInvalid     Code = "invalid"
	CodeNotFound    Code = "not_found"
	CodeTimeout     Code = "timeout"
	CodeUpstream    Code = "upstream"
	CodeTooLarge    Code = "too_large"
	CodeUnavailable Code = "unavailable"
	CodeInternal    Code = "internal"
	CodeRateLimited Code = "rate_limited"
)

// Reason is the fine-grained cause of a verdict or a failure.
type Reason string

// Reasons for refusing to parse a target.
const (
	ReasonParseAmbiguous Reason = "parse_ambiguous" // backslash, control char, zone, encoded host, parser differential
	ReasonUserinfo       Reason = "userinfo"
	ReasonBadPort        Reason = "bad_port"
	ReasonEmptyHost      Reason = "empty_host"
	ReasonNumericHost    Reason = "numeric_host" // non-canonical numeric host such as 127.1 or 0x7f.1
	ReasonBadHost        Reason = "bad_host"     // not a valid DNS name or IDN
	ReasonScheme         Reason = "scheme"
	ReasonMalformed      Reason = "malformed"
)

// Reasons for address classes (the floor). See the table in addrclass.go.
const (
	ReasonLoopback      Reason = "loopback"
	ReasonPrivate       Reason = "private"
	ReasonLinkLocal     Reason = "link_local"
	ReasonMetadata      Reason = "metadata"
	ReasonCGNAT         Reason = "cgnat"
	ReasonMulticast     Reason = "multicast"
	ReasonBroadcast     Reason = "broadcast"
	ReasonUnspecified   Reason = "unspecified"
	ReasonDocumentation Reason = "documentation"
	ReasonBenchmarking  Reason = "benchmarking"
	ReasonIPv4Embedded  Reason = "ipv4_embedded"
	ReasonReserved      Reason = "reserved"
)

// Reasons for policy verdicts and failures after parsing.
const (
	ReasonAllowed    Reason = "allowed"   // an allow verdict with no special cause
	ReasonException  Reason = "exception" // allowed through an operator floor exception
	ReasonNoPolicy   Reason = "no_policy" // the zero Policy: nothing is open
	ReasonLane       Reason = "lane"      // the lane is not opened by the policy
	ReasonDenyList   Reason = "deny_list"
	ReasonNotAllowed Reason = "not_allowed" // an allow-list exists and the target is not on it
	ReasonDNSMixed   Reason = "dns_mixed"
	// ReasonInternalAddress: a name resolved to an address the policy
	// refuses, whatever its class (Error.Class keeps the class). The
	// verdicts and decisions keep the class itself; only errors fold it,
	// so that a refusal cannot be used to map internal DNS.
	ReasonInternalAddress Reason = "internal_address"
	ReasonDNSRebinding    Reason = "dns_rebinding"
	ReasonDNSNotFound     Reason = "dns_not_found"
	ReasonDNSNoAddress    Reason = "dns_no_address"
	ReasonDNSTimeout      Reason = "dns_timeout"
	ReasonDNSError        Reason = "dns_error"
	ReasonRedirectLimit   Reason = "redirect_limit"
	ReasonRedirect        Reason = "redirect" // a malformed or missing Location
	ReasonBodyTooLarge    Reason = "body_too_large"
	ReasonDecodedTooLarge Reason = "decoded_too_large"
	ReasonHeaderTooLarge  Reason = "header_too_large"
	ReasonEncoding        Reason = "encoding" // unknown or too many content codings, corrupt data
	ReasonHeaderFloor     Reason = "header_floor"
	ReasonProxy           Reason = "proxy" // an upstream proxy not configured by the operator, or its failure
	ReasonConnect         Reason = "connect"
	ReasonTLS             Reason = "tls"
	ReasonTimeout         Reason = "timeout"
	ReasonIdle            Reason = "idle"
	ReasonTunnelBytes     Reason = "tunnel_bytes" // a tunnel passed its byte cap
	ReasonTunnelTime      Reason = "tunnel_time"  // a tunnel passed its duration cap
	ReasonReplySource     Reason = "reply_source"
	ReasonRateLimited     Reason = "rate_limited"
	ReasonProtocol        Reason = "protocol"
	ReasonCanceled        Reason = "canceled"
)

// Error is the one error type egress returns. Code and Reason follow
// Airlock's error vocabulary; Target, Addr and Hop say where it happened.
// Inspect it with errors.As; it unwraps to the underlying cause, if any.
//
// Error() is the full text, for the operator (logs, audit): it carries the
// address involved, the operator-only detail and the cause's text.
// PublicMessage() is the text a workload may read: no resolved address,
// no resolver answers, no DNS server, no operator detail.
type Error struct {
	Code   Code
	Reason Reason
	Op     string         // "parse", "check", "resolve", "dial", "redirect", "read", "exchange", ...
	Target string         // the target as the caller gave it, or the redirect location
	Addr   netip.AddrPort // the address involved, when there is one; never public
	Hop    int            // redirect hop (0 = the original request)
	Detail string         // a human sentence; never secret, never an address
	// Name is the host name whose answers were refused (reason
	// internal_address), and Class the class of the refused answer
	// (loopback, private, dns_mixed, ...); Class is never public.
	Name  string
	Class Reason
	// Internal is detail for the operator only (resolver answers, pinned
	// addresses, an upstream proxy's address); never public.
	Internal string
	Err      error // the underlying cause, if any
}

func (e *Error) Error() string { return e.text(false) }

// PublicMessage is the text a workload may read: Error() without the
// address, the class of a refused answer, the operator-only detail, and
// with the cause reduced to what it says about the failure (a network
// error's addresses and a DNS error's server are dropped).
func (e *Error) PublicMessage() string { return e.text(true) }

func (e *Error) text(public bool) string {
	var b strings.Builder
	b.WriteString("egress: ")
	if e.Op != "" {
		b.WriteString(e.Op)
		b.WriteString(" ")
	}
	if e.Target != "" {
		fmt.Fprintf(&b, "%q ", e.Target)
	}
	if e.Addr.IsValid() && !public {
		fmt.Fprintf(&b, "[%s] ", e.Addr)
	}
	if e.Hop > 0 {
		fmt.Fprintf(&b, "(redirect hop %d) ", e.Hop)
	}
	fmt.Fprintf(&b, "%s (%s)", e.Code, e.Reason)
	switch {
	case e.Reason == ReasonInternalAddress && e.Code == CodeDenied:
		name := e.Name
		if name == "" {
			name = "the name"
		}
		fmt.Fprintf(&b, ": refused by policy: %s resolves to an address the policy refuses", name)
		if !public && e.Class != "" {
			fmt.Fprintf(&b, " (%s", e.Class)
			if e.Addr.IsValid() {
				fmt.Fprintf(&b, " %s", e.Addr.Addr())
			}
			b.WriteString(")")
		}
	case e.Code == CodeDenied && e.Detail == "":
		phrase, ok := deniedPhrase[e.Reason]
		if !ok {
			break
		}
		// Say it the way a person reads it: "refused by policy: private
		// address 10.0.0.5".
		b.WriteString(": refused by policy: ")
		b.WriteString(phrase)
		if e.Addr.IsValid() && !public {
			if strings.HasSuffix(phrase, "address") {
				fmt.Fprintf(&b, " %s", e.Addr.Addr())
			} else {
				fmt.Fprintf(&b, " (%s)", e.Addr.Addr())
			}
		}
	}
	if e.Detail != "" {
		b.WriteString(": ")
		b.WriteString(e.Detail)
	}
	if e.Internal != "" && !public {
		b.WriteString(": ")
		b.WriteString(e.Internal)
	}
	if e.Err != nil {
		cause := e.Err.Error()
		if public {
			cause = publicCause(e.Err)
		}
		if cause != "" {
			b.WriteString(": ")
			b.WriteString(cause)
		}
	}
	return b.String()
}

// publicCause is the public text of a cause that is not an *Error:
// network errors lose their local and remote addresses, DNS errors their
// server, and anything else that still looks like an IP address (with or
// without a port) is replaced by "[address]".
func publicCause(err error) string {
	if err == nil {
		return ""
	}
	if pm, ok := err.(interface{ PublicMessage() string }); ok {
		return pm.PublicMessage()
	}
	var dnsErr *net.DNSError
	var opErr *net.OpError
	var sysErr *os.SyscallError
	switch {
	case errors.As(err, &dnsErr):
		msg := "lookup"
		if dnsErr.Name != "" {
			msg += " " + dnsErr.Name
		}
		return scrubAddrs(msg + ": " + dnsErr.Err)
	case errors.As(err, &opErr):
		if opErr.Err == nil {
			return opErr.Op
		}
		return opErr.Op + ": " + publicCause(opErr.Err)
	case errors.As(err, &sysErr):
		return sysErr.Syscall + ": " + publicCause(sysErr.Err)
	}
	return scrubAddrs(err.Error())
}

// scrubAddrs replaces every run of characters that parses as an IP address
// or an IP:port by "[address]".
func scrubAddrs(s string) string {
	isAddrByte := func(c byte) bool {
		return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' ||
			c == '.' || c == ':' || c == '[' || c == ']' || c == '%'
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		if !isAddrByte(s[i]) {
			b.WriteByte(s[i])
			i++
			continue
		}
		j := i
		for j < len(s) && isAddrByte(s[j]) {
			j++
		}
		run := s[i:j]
		// A run may end with sentence punctuation: try it with trailing
		// dots and colons trimmed as well.
		core := strings.TrimRight(run, ".:")
		if looksLikeAddr(core) {
			b.WriteString("[address]")
			b.WriteString(run[len(core):])
		} else {
			b.WriteString(run)
		}
		i = j
	}
	return b.String()
}

func looksLikeAddr(s string) bool {
	if !strings.ContainsAny(s, ".:") {
		return false
	}
	if _, err := netip.ParseAddr(strings.Trim(s, "[]")); err == nil {
		return true
	}
	if _, err := netip.ParseAddrPort(s); err == nil {
		return true
	}
	return false
}

func (e *Error) Unwrap() error { return e.Err }

// deniedPhrase names each floor and list reason for people.
var deniedPhrase = map[Reason]string{
	ReasonLoopback:      "loopback address",
	ReasonPrivate:       "private address",
	ReasonLinkLocal:     "link-local address",
	ReasonMetadata:      "cloud metadata address",
	ReasonCGNAT:         "carrier-grade NAT address",
	ReasonMulticast:     "multicast address",
	ReasonBroadcast:     "broadcast address",
	ReasonUnspecified:   "unspecified address",
	ReasonDocumentation: "documentation address",
	ReasonBenchmarking:  "benchmarking address",
	ReasonIPv4Embedded:  "IPv6 form embedding an IPv4 address",
	ReasonReserved:      "reserved address",
	ReasonDenyList:      "on the deny list",
	ReasonNotAllowed:    "not on the allow list",
	ReasonNoPolicy:      "no policy opens anything",
}

// ErrorCode returns the vocabulary code; together with ErrorReason it lets
// packages that do not import egress classify the error through an interface.
func (e *Error) ErrorCode() string { return string(e.Code) }

// ErrorReason returns the fine-grained reason.
func (e *Error) ErrorReason() string { return string(e.Reason) }

// Sentinels for errors.Is.
var (
	ErrDenied        = errors.New("egress: denied")
	ErrRedirectLimit = errors.New("egress: too many redirects")
	ErrTooLarge      = errors.New("egress: too large")
)

// Is lets errors.Is(err, ErrDenied) match every denial, ErrTooLarge every
// cap, and ErrRedirectLimit the redirect cap.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrDenied:
		return e.Code == CodeDenied
	case ErrTooLarge:
		return e.Code == CodeTooLarge
	case ErrRedirectLimit:
		return e.Reason == ReasonRedirectLimit
	}
	return false
}

// IsDenied reports whether err is a policy denial.
func IsDenied(err error) bool { return errors.Is(err, ErrDenied) }

// CodeOf returns the vocabulary code of err, CodeInternal for foreign errors
// and "" for nil.
func CodeOf(err error) Code {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}

// ReasonOf returns the reason of err, or "" when err is not an *Error.
func ReasonOf(err error) Reason {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return ""
}

func denied(op, target string, r Reason, detail string) *Error {
	return &Error{Code: CodeDenied, Reason: r, Op: op, Target: target, Detail: detail}
}

func invalid(op, target string, r Reason, detail string) *Error {
	return &Error{Code: CodeInvalid, Reason: r, Op: op, Target: target, Detail: detail}
}
