package gate

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/egress"
)

func TestRedactor(t *testing.T) {
	const cred = "s3cr/et+K=&y z"
	r := NewRedactor(cred, "")
	for _, in := range []string{
		cred,
		"Bearer " + cred,
		url.QueryEscape(cred),
		url.PathEscape(cred),
		"s3cr%2fet%2bK%3d%26y+z", // lower-case hex
		`"s3cr/et+K=\u0026y z"`,  // JSON-escaped
		`s3cr\/et+K=\u0026y z`,   // JSON with escaped slashes
	} {
		if got := r.String("<" + in + ">"); strings.Contains(got, "s3cr") || !strings.Contains(got, RedactedMark) {
			t.Errorf("String(%q) = %q, want the credential redacted", in, got)
		}
	}
	if got := r.String("nothing here"); got != "nothing here" {
		t.Errorf("String changed an innocent string: %q", got)
	}
	h := map[string][]string{"X-Echo": {url.QueryEscape(cred)}, "X-" + cred: {"v"}}
	r.Header(h)
	if h["X-Echo"][0] != RedactedMark || len(h) != 2 || h["X-"+RedactedMark] == nil {
		t.Errorf("Header = %v", h)
	}
	u, _ := url.Parse("https://api.test/cb?token=" + url.QueryEscape(cred))
	if !r.URLCarries(u) || r.CheckRedirect(u) == nil || airlock.ReasonOf(r.CheckRedirect(u)) != airlock.ReasonRouteCredentialInRedirect {
		t.Errorf("a redirect carrying the credential is not refused")
	}
	if u, _ := url.Parse("https://api.test/cb?token=other"); r.CheckRedirect(u) != nil {
		t.Errorf("an innocent redirect is refused")
	}
	var nilR *Redactor
	if nilR.String(cred) != cred || nilR.Contains(cred) || nilR.Error(nil) != nil {
		t.Error("a nil Redactor redacts")
	}
}

func TestRedactorError(t *testing.T) {
	const cred = "tok/EN"
	r := NewRedactor(cred)
	inner := &egress.Error{Code: egress.CodeUpstream, Reason: egress.ReasonRedirect, Op: "redirect",
		Target: "https://api.test/cb?t=" + url.QueryEscape(cred), Internal: "at " + cred}
	err := r.Error(fmt.Errorf("route: %w", inner))
	for _, s := range []string{err.Error(), airlock.PublicMessageOf(err), airlock.Public(err, "").Message} {
		if strings.Contains(s, "tok") {
			t.Errorf("text %q carries the credential", s)
		}
	}
	if airlock.CodeOf(err) != airlock.CodeUpstream || airlock.ReasonOf(err) != "redirect" || !errors.Is(err, inner) {
		t.Errorf("classification lost: %v %v", airlock.CodeOf(err), airlock.ReasonOf(err))
	}
	if plain := errors.New("no secret"); r.Error(plain) != plain {
		t.Error("an error without the credential was rewrapped")
	}
}
