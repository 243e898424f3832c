package egress

import (
	"errors"
	"fmt"
	"net/netip"
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
	ReasonAllowed         Reason = "allowed"   // an allow verdict with no special cause
	ReasonException       Reason = "exception" // allowed through an operator floor exception
	ReasonNoPolicy        Reason = "no_policy" // the zero Policy: nothing is open
	ReasonLane            Reason = "lane"      // the lane is not opened by the policy
	ReasonDenyList        Reason = "deny_list"
	ReasonNotAllowed      Reason = "not_allowed" // an allow-list exists and the target is not on it
	ReasonDNSMixed        Reason = "dns_mixed"
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
	ReasonReplySource     Reason = "reply_source"
	ReasonRateLimited     Reason = "rate_limited"
	ReasonProtocol        Reason = "protocol"
	ReasonCanceled        Reason = "canceled"
)

// Error is the one error type egress returns. Code and Reason follow
// Airlock's error vocabulary; Target, Addr and Hop say where it happened.
// Inspect it with errors.As; it unwraps to the underlying cause, if any.
type Error struct {
	Code   Code
	Reason Reason
	Op     string         // "parse", "check", "resolve", "dial", "redirect", "read", "exchange", ...
	Target string         // the target as the caller gave it, or the redirect location
	Addr   netip.AddrPort // the address involved, when there is one
	Hop    int            // redirect hop (0 = the original request)
	Detail string         // a human sentence; never secret
	Err    error          // the underlying cause, if any
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("egress: ")
	if e.Op != "" {
		b.WriteString(e.Op)
		b.WriteString(" ")
	}
	if e.Target != "" {
		fmt.Fprintf(&b, "%q ", e.Target)
	}
	if e.Addr.IsValid() {
		fmt.Fprintf(&b, "[%s] ", e.Addr)
	}
	if e.Hop > 0 {
		fmt.Fprintf(&b, "(redirect hop %d) ", e.Hop)
	}
	fmt.Fprintf(&b, "%s (%s)", e.Code, e.Reason)
	if phrase, ok := deniedPhrase[e.Reason]; ok && e.Code == CodeDenied && e.Detail == "" {
		// Say it the way a person reads it: "refused by policy: private
		// address 10.0.0.5".
		b.WriteString(": refused by policy: ")
		b.WriteString(phrase)
		if e.Addr.IsValid() {
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
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
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
