package gate

import (
	"encoding/json"
	"net/url"
	"slices"
	"strings"

	"github.com/airlockhq/airlock"
)

// RedactedMark replaces a credential in what a caller receives.
const RedactedMark = "[REDACTED]"

// Redactor finds and replaces a credential in the strings a caller
// receives. It matches the credential verbatim, in its percent-encoded
// forms (query and path escaping, with upper- or lower-case hex digits)
// and as a JSON string's content.
// Give it the credential alone, without a prefix such as "Bearer ": the
// prefixed value contains it, so it is covered too. Transformed echoes
// (base64, hex, a credential split across lines) are not found.
//
// The zero Redactor and a nil *Redactor redact nothing. A Redactor is
// immutable and safe for concurrent use.
type Redactor struct {
	forms []string // longest first
}

// NewRedactor returns a Redactor for the given credentials; empty ones are
// ignored.
func NewRedactor(secrets ...string) *Redactor {
	r := &Redactor{}
	for _, s := range secrets {
		if s == "" {
			continue
		}
		for _, f := range []string{s, url.QueryEscape(s), url.PathEscape(s)} {
			r.add(f)
			r.add(lowerHex(f))
		}
		// Inside a JSON string: "&", "<", ">" and quotes escaped, and "/"
		// as "\/" as some encoders write it.
		if js, err := json.Marshal(s); err == nil {
			j := string(js[1 : len(js)-1])
			r.add(j)
			r.add(strings.ReplaceAll(j, "/", `\/`))
		}
	}
	// Longest first, so that a longer form is replaced whole before a
	// shorter one inside it.
	slices.SortStableFunc(r.forms, func(a, b string) int { return len(b) - len(a) })
	return r
}

func (r *Redactor) add(f string) {
	if f != "" && !slices.Contains(r.forms, f) {
		r.forms = append(r.forms, f)
	}
}

// lowerHex returns s with the hex digits of its percent escapes in lower
// case.
func lowerHex(s string) string {
	b := []byte(s)
	for i := 0; i+2 < len(b); i++ {
		if b[i] == '%' {
			for j := i + 1; j <= i+2; j++ {
				if b[j] >= 'A' && b[j] <= 'F' {
					b[j] += 'a' - 'A'
				}
			}
		}
	}
	return string(b)
}

// Contains reports whether s carries a form of the credential.
func (r *Redactor) Contains(s string) bool {
	if r == nil {
		return false
	}
	for _, f := range r.forms {
		if strings.Contains(s, f) {
			return true
		}
	}
	return false
}

// String returns s with every form of the credential replaced by
// RedactedMark.
func (r *Redactor) String(s string) string {
	if r == nil {
		return s
	}
	for _, f := range r.forms {
		if strings.Contains(s, f) {
			s = strings.ReplaceAll(s, f, RedactedMark)
		}
	}
	return s
}

// Bytes is String for a body; it returns b itself when there is nothing to
// replace.
func (r *Redactor) Bytes(b []byte) []byte {
	if r == nil || !r.Contains(string(b)) {
		return b
	}
	return []byte(r.String(string(b)))
}

// Strings redacts each string of ss in place.
func (r *Redactor) Strings(ss []string) {
	for i, s := range ss {
		ss[i] = r.String(s)
	}
}

// Header redacts every value (and name) of h in place.
func (r *Redactor) Header(h map[string][]string) {
	if r == nil {
		return
	}
	for k, vs := range h {
		r.Strings(vs)
		if nk := r.String(k); nk != k {
			delete(h, k)
			h[nk] = append(h[nk], vs...)
		}
	}
}

// URLCarries reports whether u carries a form of the credential anywhere:
// its text, or its decoded path, query or fragment.
func (r *Redactor) URLCarries(u *url.URL) bool {
	if r == nil || u == nil {
		return false
	}
	q, _ := url.QueryUnescape(u.RawQuery)
	return r.Contains(u.String()) || r.Contains(u.Path) || r.Contains(q) || r.Contains(u.Fragment) ||
		u.User != nil && r.Contains(u.User.String())
}

// CheckRedirect refuses a redirect target that carries the credential
// (code denied, reason route_credential_in_redirect); its shape is
// egress.Request.CheckRedirect's.
func (r *Redactor) CheckRedirect(next *url.URL) error {
	if !r.URLCarries(next) {
		return nil
	}
	return airlock.Errorf(airlock.CodeDenied, airlock.ReasonRouteCredentialInRedirect,
		"the route's upstream redirected to a URL that carries the route's credential")
}

// Error returns err with every form of the credential removed from both its
// full text (for the audit) and its public text (for the caller); its code,
// reason and chain (errors.Is, errors.As) are kept. nil stays nil.
func (r *Redactor) Error(err error) error {
	if err == nil || r == nil {
		return err
	}
	full, public := err.Error(), airlock.PublicMessageOf(err)
	if !r.Contains(full) && !r.Contains(public) {
		return err
	}
	return &redactedError{err: err, full: r.String(full), public: r.String(public)}
}

// redactedError is an error whose texts had a credential removed.
type redactedError struct {
	err          error
	full, public string
}

func (e *redactedError) Error() string         { return e.full }
func (e *redactedError) PublicMessage() string { return e.public }
func (e *redactedError) Unwrap() error         { return e.err }
func (e *redactedError) ErrorCode() string     { return string(airlock.CodeOf(e.err)) }
func (e *redactedError) ErrorReason() string   { return string(airlock.ReasonOf(e.err)) }

var _ airlock.PublicMessager = (*redactedError)(nil)
