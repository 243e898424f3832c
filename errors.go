package airlock

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
)

// Code is the coarse class of a failure: one of the ten codes every surface
// (HTTP API, MCP, CLI, WebAssembly guests) reports. The zero Code means "no
// error".
type Code string

// The ten codes of the error vocabulary.
const (
	CodeDenied      Code = "denied"       // policy, profile or capability refused it
	CodeInvalid     Code = "invalid"      // the request, its flags or the configuration are malformed
	CodeNotFound    Code = "not_found"    // the name, page or object does not exist
	CodeTimeout     Code = "timeout"      // a deadline passed, or the caller gave up
	CodeUpstream    Code = "upstream"     // the remote side failed or answered with an error
	CodeRateLimited Code = "rate_limited" // too many calls; retry later
	CodeRevoked     Code = "revoked"      // the principal or its grant has been revoked
	CodeTooLarge    Code = "too_large"    // a size cap was reached
	CodeUnavailable Code = "unavailable"  // a component needed for the call is absent or down
	CodeInternal    Code = "internal"     // a bug or an unclassified failure
)

// codes lists the vocabulary in a stable order.
var codes = [...]Code{
	CodeDenied, CodeInvalid, CodeNotFound, CodeTimeout, CodeUpstream,
	CodeRateLimited, CodeRevoked, CodeTooLarge, CodeUnavailable, CodeInternal,
}

// Codes returns the ten codes in a stable order.
func Codes() []Code { return append([]Code(nil), codes[:]...) }

// Valid reports whether c is one of the ten codes.
func (c Code) Valid() bool {
	for _, k := range codes {
		if c == k {
			return true
		}
	}
	return false
}

// PublicMessager is implemented by errors whose Error text carries detail
// for the operator only (a resolved address, resolver answers, a DNS
// server): PublicMessage is the text a workload may read. egress's *Error
// implements it.
type PublicMessager interface {
	error
	PublicMessage() string
}

// genericMessage replaces the message of internal errors on public surfaces.
const genericMessage = "internal error"

// Error is an error in the one vocabulary: a Code, a fine-grained Reason, a
// human Message and the DecisionID of the broker call it belongs to (a
// ULID, empty when no decision was recorded). Err is the underlying cause;
// it is never serialised.
//
// Its JSON form is {"code","reason","message","decision_id"}; every key is
// always present, and "hint" (Hint: what the caller can do about it, see
// HintOf) when there is one. Use it as an error through a pointer (*Error)
// and inspect it with errors.As.
type Error struct {
	Code       Code   `json:"code"`
	Reason     Reason `json:"reason"`
	Message    string `json:"message"`
	DecisionID string `json:"decision_id"`
	Hint       string `json:"hint,omitempty"`
	Err        error  `json:"-"`
}

// ErrorBody is the envelope every surface sends: {"error": {...}}.
type ErrorBody struct {
	Error Error `json:"error"`
}

// Errorf returns an *Error with the given code and reason whose Message is
// formatted as by fmt.Errorf; a %w verb makes the wrapped error reachable
// through errors.Is and errors.As. reason is a constant of the catalogue
// (reasons.go); a test holds every call site to that.
func Errorf(code Code, reason Reason, format string, args ...any) *Error {
	err := fmt.Errorf(format, args...)
	return &Error{Code: code, Reason: reason, Message: err.Error(), Err: err}
}

// Error returns Message, else the cause's text, else the code and reason.
func (e *Error) Error() string {
	switch {
	case e.Message != "":
		return e.Message
	case e.Err != nil:
		return e.Err.Error()
	case e.Reason != "":
		return fmt.Sprintf("%s (%s)", e.Code, e.Reason)
	default:
		return string(e.Code)
	}
}

// Unwrap returns the underlying cause.
func (e *Error) Unwrap() error { return e.Err }

// PublicMessage returns Error with the text of every error in the chain
// that has a public message replaced by that public message.
func (e *Error) PublicMessage() string {
	return publicText(e.Error(), e.Err)
}

// ErrorCode returns the code as a string, so that *Error satisfies the same
// classification interface as errors of packages that do not import airlock.
func (e *Error) ErrorCode() string { return string(e.Code) }

// ErrorReason returns the reason.
func (e *Error) ErrorReason() string { return string(e.Reason) }

// classified is how errors of packages that do not import airlock (egress,
// whose *egress.Error implements it) declare their code and reason.
type classified interface {
	error
	ErrorCode() string
	ErrorReason() string
}

// CodeOf returns the vocabulary code of err:
//   - "" for nil;
//   - the code of the outermost error in the chain (errors.As order) that
//     implements ErrorCode() string and ErrorReason() string, *Error included;
//     a code outside the ten counts as CodeInternal;
//   - otherwise CodeTimeout for context.DeadlineExceeded and
//     os.ErrDeadlineExceeded, and also CodeTimeout for context.Canceled: a
//     canceled call is one whose caller stopped waiting (Ctrl-C, a closed
//     connection), not a bug, so it is reported like a timeout, with reason
//     "canceled";
//   - CodeInternal for anything else.
func CodeOf(err error) Code {
	code, _ := classify(err)
	return code
}

// ReasonOf returns the reason of err, classified as by CodeOf: the
// classified error's reason, "timeout" or "canceled" for deadlines and
// cancellation, and "" for nil and for unclassified errors.
func ReasonOf(err error) Reason {
	_, reason := classify(err)
	return reason
}

func classify(err error) (Code, Reason) {
	if err == nil {
		return "", ""
	}
	var c classified
	if errors.As(err, &c) {
		code := Code(c.ErrorCode())
		if !code.Valid() {
			code = CodeInternal
		}
		return code, Reason(c.ErrorReason())
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded):
		return CodeTimeout, ReasonTimeout
	case errors.Is(err, context.Canceled):
		return CodeTimeout, ReasonCanceled
	}
	return CodeInternal, ""
}

// ExitCode maps err to the exit status of the airlock command:
//
//	0  nil
//	1  internal (and any unclassified error)
//	2  invalid: usage or configuration
//	3  denied, revoked, rate_limited
//	4  upstream, timeout, too_large, not_found, unavailable
func ExitCode(err error) int {
	switch CodeOf(err) {
	case "":
		return 0
	case CodeInvalid:
		return 2
	case CodeDenied, CodeRevoked, CodeRateLimited:
		return 3
	case CodeUpstream, CodeTimeout, CodeTooLarge, CodeNotFound, CodeUnavailable:
		return 4
	default:
		return 1
	}
}

// PublicMessageOf returns the text of err that a workload may read:
// err.Error() with the text of each error in its chain that implements
// PublicMessager (the outermost first) replaced by its public message.
// Wrapping with %w keeps this working; wrapping an egress error with %v
// does not (its detail is then part of the wrapper's own text), so errors
// are always wrapped with %w. PublicMessageOf of nil is "".
func PublicMessageOf(err error) string {
	if err == nil {
		return ""
	}
	return publicText(err.Error(), err)
}

// publicText rewrites text, which contains the text of err's chain, so that
// every PublicMessager's full text is replaced by its public message.
func publicText(text string, err error) string {
	var walk func(error, int)
	walk = func(err error, depth int) {
		if err == nil || depth > 64 {
			return
		}
		if pm, ok := err.(PublicMessager); ok {
			if full := pm.Error(); full != "" && strings.Contains(text, full) {
				if pub := pm.PublicMessage(); pub != full {
					text = strings.ReplaceAll(text, full, pub)
				}
			}
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			walk(u.Unwrap(), depth+1)
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				walk(e, depth+1)
			}
		}
	}
	walk(err, 0)
	return text
}

// Public returns the shape of err that a surface may show to its caller.
// Code and Reason come from CodeOf and ReasonOf. Message is
// PublicMessageOf(err), except for internal errors, whose detail is for the
// operator's log only: they get a generic message. decisionID is used when not empty; otherwise
// the DecisionID of the outermost *Error in the chain that has one. Public
// of nil is the zero Error.
func Public(err error, decisionID string) Error {
	if err == nil {
		return Error{}
	}
	code, reason := classify(err)
	pub := Error{Code: code, Reason: reason, DecisionID: decisionID}
	if code == CodeInternal {
		pub.Message = genericMessage
	} else {
		pub.Message = PublicMessageOf(err)
	}
	if pub.DecisionID == "" {
		pub.DecisionID = decisionIDOf(err)
	}
	return pub
}

// decisionIDOf finds the first non-empty DecisionID in err's chain.
func decisionIDOf(err error) string {
	for err != nil {
		var e *Error
		if !errors.As(err, &e) {
			return ""
		}
		if e.DecisionID != "" {
			return e.DecisionID
		}
		err = e.Err
	}
	return ""
}
