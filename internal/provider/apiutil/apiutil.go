// Package apiutil holds what every API provider does with an answer that
// went wrong: a short snippet of the body for the message, the wait a
// rate-limited answer asks for, and the Doer's own error with the
// provider's credentials redacted.
package apiutil

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/airlockhq/airlock"
)

// Redacted replaces a credential in messages.
const Redacted = "[REDACTED]"

// Redact replaces every non-empty secret in s with Redacted.
func Redact(s string, secrets ...string) string {
	for _, sec := range secrets {
		if sec != "" {
			s = strings.ReplaceAll(s, sec, Redacted)
		}
	}
	return s
}

// TransportError is the Doer's error with credentials redacted from its
// message; the original stays reachable for errors.Is/As and keeps its
// classification (code, reason, retry-after).
type TransportError struct {
	msg     string
	prefix  string
	secrets []string
	err     error
}

// Transport wraps err as prefix + its message, secrets redacted.
func Transport(err error, prefix string, secrets ...string) *TransportError {
	return &TransportError{msg: Redact(prefix+err.Error(), secrets...), prefix: prefix, secrets: secrets, err: err}
}

func (e *TransportError) Error() string { return e.msg }

// PublicMessage is the message with the cause's public text (no resolved
// address or DNS server; see airlock.PublicMessager).
func (e *TransportError) PublicMessage() string {
	return Redact(e.prefix+airlock.PublicMessageOf(e.err), e.secrets...)
}
func (e *TransportError) Unwrap() error { return e.err }

// snippetRunes bounds Snippet.
const snippetRunes = 300

// Snippet is the start of an error body for a message: white space
// collapsed, at most 300 runes.
func Snippet(b []byte) string {
	s := strings.Join(strings.Fields(string(b)), " ")
	if r := []rune(s); len(r) > snippetRunes {
		s = string(r[:snippetRunes]) + "…"
	}
	return s
}

// RetryAfter reads Retry-After in seconds, else the first comma-separated
// value of each header in also (e.g. X-RateLimit-Reset), in order; 0 when
// none holds a positive number of seconds.
func RetryAfter(h map[string][]string, also ...string) time.Duration {
	hh := http.Header(h)
	for _, name := range append([]string{"Retry-After"}, also...) {
		v, _, _ := strings.Cut(hh.Get(name), ",")
		if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && n > 0 {
			return time.Duration(n) * time.Second
		}
	}
	return 0
}
