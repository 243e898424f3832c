package airlock_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"testing"

	"github.com/airlockhq/airlock"
)

// foreignError stands for an error of a package that does not import
// airlock (egress.Error has the same two methods).
type foreignError struct {
	code, reason string
	err          error
}

func (e *foreignError) Error() string       { return "foreign: " + e.code + " (" + e.reason + ")" }
func (e *foreignError) Unwrap() error       { return e.err }
func (e *foreignError) ErrorCode() string   { return e.code }
func (e *foreignError) ErrorReason() string { return e.reason }

func TestClassify(t *testing.T) {
	tests := []struct {
		name       string
		err        error
		wantCode   airlock.Code
		wantReason airlock.Reason
		wantExit   int
	}{
		{name: "nil", err: nil, wantCode: "", wantReason: "", wantExit: 0},
		{name: "plain error", err: errors.New("boom"), wantCode: airlock.CodeInternal, wantExit: 1},
		{name: "io.EOF", err: io.EOF, wantCode: airlock.CodeInternal, wantExit: 1},
		{name: "deadline", err: context.DeadlineExceeded, wantCode: airlock.CodeTimeout, wantReason: "timeout", wantExit: 4},
		{name: "wrapped deadline", err: fmt.Errorf("fetch: %w", context.DeadlineExceeded), wantCode: airlock.CodeTimeout, wantReason: "timeout", wantExit: 4},
		{name: "io deadline", err: fmt.Errorf("read: %w", os.ErrDeadlineExceeded), wantCode: airlock.CodeTimeout, wantReason: "timeout", wantExit: 4},
		{name: "canceled", err: context.Canceled, wantCode: airlock.CodeTimeout, wantReason: "canceled", wantExit: 4},
		{name: "airlock denied", err: &airlock.Error{Code: airlock.CodeDenied, Reason: "capability"}, wantCode: airlock.CodeDenied, wantReason: "capability", wantExit: 3},
		{name: "airlock invalid", err: &airlock.Error{Code: airlock.CodeInvalid, Reason: "usage"}, wantCode: airlock.CodeInvalid, wantReason: "usage", wantExit: 2},
		{name: "airlock not_found", err: &airlock.Error{Code: airlock.CodeNotFound}, wantCode: airlock.CodeNotFound, wantExit: 4},
		{name: "airlock timeout", err: &airlock.Error{Code: airlock.CodeTimeout}, wantCode: airlock.CodeTimeout, wantExit: 4},
		{name: "airlock upstream", err: &airlock.Error{Code: airlock.CodeUpstream, Reason: "http_status"}, wantCode: airlock.CodeUpstream, wantReason: "http_status", wantExit: 4},
		{name: "airlock rate_limited", err: &airlock.Error{Code: airlock.CodeRateLimited}, wantCode: airlock.CodeRateLimited, wantExit: 3},
		{name: "airlock revoked", err: &airlock.Error{Code: airlock.CodeRevoked}, wantCode: airlock.CodeRevoked, wantExit: 3},
		{name: "airlock too_large", err: &airlock.Error{Code: airlock.CodeTooLarge}, wantCode: airlock.CodeTooLarge, wantExit: 4},
		{name: "airlock unavailable", err: &airlock.Error{Code: airlock.CodeUnavailable}, wantCode: airlock.CodeUnavailable, wantExit: 4},
		{name: "airlock internal", err: &airlock.Error{Code: airlock.CodeInternal}, wantCode: airlock.CodeInternal, wantExit: 1},
		{name: "airlock empty code", err: &airlock.Error{Message: "x"}, wantCode: airlock.CodeInternal, wantExit: 1},
		{name: "airlock unknown code", err: &airlock.Error{Code: "nope", Reason: "r"}, wantCode: airlock.CodeInternal, wantReason: "r", wantExit: 1},
		{name: "wrapped airlock", err: fmt.Errorf("op: %w", &airlock.Error{Code: airlock.CodeDenied, Reason: "robots"}), wantCode: airlock.CodeDenied, wantReason: "robots", wantExit: 3},
		{name: "foreign denied", err: &foreignError{code: "denied", reason: "loopback"}, wantCode: airlock.CodeDenied, wantReason: "loopback", wantExit: 3},
		{name: "wrapped foreign", err: fmt.Errorf("fetch %q: %w", "x", &foreignError{code: "too_large", reason: "body_too_large"}), wantCode: airlock.CodeTooLarge, wantReason: "body_too_large", wantExit: 4},
		{name: "foreign unknown code", err: &foreignError{code: "weird", reason: "x"}, wantCode: airlock.CodeInternal, wantReason: "x", wantExit: 1},
		{name: "foreign beats wrapped deadline", err: &foreignError{code: "upstream", reason: "connect", err: context.DeadlineExceeded}, wantCode: airlock.CodeUpstream, wantReason: "connect", wantExit: 4},
		{name: "outermost classified wins", err: &airlock.Error{Code: airlock.CodeInvalid, Reason: "config", Err: &foreignError{code: "denied", reason: "loopback"}}, wantCode: airlock.CodeInvalid, wantReason: "config", wantExit: 2},
		{name: "joined", err: errors.Join(errors.New("a"), &foreignError{code: "revoked", reason: "tenant"}), wantCode: airlock.CodeRevoked, wantReason: "tenant", wantExit: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := airlock.CodeOf(tt.err); got != tt.wantCode {
				t.Errorf("CodeOf = %q, want %q", got, tt.wantCode)
			}
			if got := airlock.ReasonOf(tt.err); got != tt.wantReason {
				t.Errorf("ReasonOf = %q, want %q", got, tt.wantReason)
			}
			if got := airlock.ExitCode(tt.err); got != tt.wantExit {
				t.Errorf("ExitCode = %d, want %d", got, tt.wantExit)
			}
		})
	}
}

func TestCodes(t *testing.T) {
	want := []airlock.Code{"denied", "invalid", "not_found", "timeout", "upstream", "rate_limited", "revoked", "too_large", "unavailable", "internal"}
	got := airlock.Codes()
	if len(got) != len(want) {
		t.Fatalf("Codes() has %d codes, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("Codes()[%d] = %q, want %q", i, got[i], want[i])
		}
		if !got[i].Valid() {
			t.Errorf("%q.Valid() = false, want true", got[i])
		}
	}
	for _, c := range []airlock.Code{"", "Denied", "ok", "error"} {
		if c.Valid() {
			t.Errorf("%q.Valid() = true, want false", c)
		}
	}
	got[0] = "mutated"
	if airlock.Codes()[0] != airlock.CodeDenied {
		t.Error("Codes() shares its backing array with the caller")
	}
}

func TestErrorMessage(t *testing.T) {
	cause := errors.New("connection reset")
	tests := []struct {
		name string
		err  *airlock.Error
		want string
	}{
		{name: "message wins", err: &airlock.Error{Code: airlock.CodeUpstream, Message: "fetch failed", Err: cause}, want: "fetch failed"},
		{name: "cause", err: &airlock.Error{Code: airlock.CodeUpstream, Err: cause}, want: "connection reset"},
		{name: "code and reason", err: &airlock.Error{Code: airlock.CodeDenied, Reason: "loopback"}, want: "denied (loopback)"},
		{name: "code only", err: &airlock.Error{Code: airlock.CodeTimeout}, want: "timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.err.Error(); got != tt.want {
				t.Errorf("Error() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestErrorUnwrap(t *testing.T) {
	sentinel := errors.New("sentinel")
	err := error(&airlock.Error{Code: airlock.CodeUpstream, Err: fmt.Errorf("dial: %w", sentinel)})
	if !errors.Is(err, sentinel) {
		t.Error("errors.Is(err, sentinel) = false, want true")
	}
	var ae *airlock.Error
	if !errors.As(fmt.Errorf("wrap: %w", err), &ae) || ae.Code != airlock.CodeUpstream {
		t.Errorf("errors.As found %+v, want the upstream *Error", ae)
	}
}

func TestErrorf(t *testing.T) {
	sentinel := errors.New("no such host")
	err := airlock.Errorf(airlock.CodeNotFound, "dns_not_found", "resolve %q: %w", "x.example", sentinel)
	if err.Code != airlock.CodeNotFound || err.Reason != "dns_not_found" {
		t.Errorf("Errorf = %q/%q, want not_found/dns_not_found", err.Code, err.Reason)
	}
	if want := `resolve "x.example": no such host`; err.Error() != want {
		t.Errorf("Error() = %q, want %q", err.Error(), want)
	}
	if !errors.Is(err, sentinel) {
		t.Error("errors.Is(Errorf(...%w...), sentinel) = false, want true")
	}
}

func TestPublic(t *testing.T) {
	tests := []struct {
		name       string
		err        error
		decisionID string
		want       airlock.Error
	}{
		{name: "nil", err: nil, want: airlock.Error{}},
		{
			name:       "denied keeps its message",
			err:        &foreignError{code: "denied", reason: "metadata"},
			decisionID: "01J00000000000000000000000",
			want:       airlock.Error{Code: airlock.CodeDenied, Reason: "metadata", Message: "foreign: denied (metadata)", DecisionID: "01J00000000000000000000000"},
		},
		{
			name: "internal hides detail",
			err:  fmt.Errorf("open /var/secret/db: %w", errors.New("permission denied")),
			want: airlock.Error{Code: airlock.CodeInternal, Message: "internal error"},
		},
		{
			name: "explicit internal hides detail",
			err:  &airlock.Error{Code: airlock.CodeInternal, Reason: "panic", Message: "nil map at x.go:12", DecisionID: "D1"},
			want: airlock.Error{Code: airlock.CodeInternal, Reason: "panic", Message: "internal error", DecisionID: "D1"},
		},
		{
			name: "decision id from the chain",
			err:  fmt.Errorf("fetch: %w", &airlock.Error{Code: airlock.CodeRateLimited, Reason: "tenant", Message: "slow down", DecisionID: "D2"}),
			want: airlock.Error{Code: airlock.CodeRateLimited, Reason: "tenant", Message: "fetch: slow down", DecisionID: "D2"},
		},
		{
			name:       "argument beats the chain",
			err:        &airlock.Error{Code: airlock.CodeDenied, Message: "no", DecisionID: "D3"},
			decisionID: "D4",
			want:       airlock.Error{Code: airlock.CodeDenied, Message: "no", DecisionID: "D4"},
		},
		{
			name: "decision id found below an error without one",
			err:  &airlock.Error{Code: airlock.CodeUpstream, Message: "outer", Err: &airlock.Error{Code: airlock.CodeUpstream, DecisionID: "D5"}},
			want: airlock.Error{Code: airlock.CodeUpstream, Message: "outer", DecisionID: "D5"},
		},
		{
			name: "timeout",
			err:  fmt.Errorf("fetch: %w", context.DeadlineExceeded),
			want: airlock.Error{Code: airlock.CodeTimeout, Reason: "timeout", Message: "fetch: context deadline exceeded"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := airlock.Public(tt.err, tt.decisionID)
			got.Err = nil
			if got != tt.want {
				t.Errorf("Public() = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestErrorJSON(t *testing.T) {
	tests := []struct {
		name string
		body airlock.ErrorBody
		want string
	}{
		{
			name: "full",
			body: airlock.ErrorBody{Error: airlock.Error{Code: airlock.CodeDenied, Reason: "loopback", Message: "no", DecisionID: "D", Err: errors.New("secret")}},
			want: `{"error":{"code":"denied","reason":"loopback","message":"no","decision_id":"D"}}`,
		},
		{
			name: "empty fields stay present",
			body: airlock.ErrorBody{Error: airlock.Error{Code: airlock.CodeInternal, Message: "internal error"}},
			want: `{"error":{"code":"internal","reason":"","message":"internal error","decision_id":""}}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := json.Marshal(tt.body)
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tt.want {
				t.Errorf("json = %s, want %s", b, tt.want)
			}
			var back airlock.ErrorBody
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatal(err)
			}
			wantBack := tt.body
			wantBack.Error.Err = nil
			if back != wantBack {
				t.Errorf("round trip = %+v, want %+v", back, wantBack)
			}
		})
	}
}

func ExamplePublic() {
	// An error from a package that does not import airlock, classified
	// through its ErrorCode and ErrorReason methods.
	err := fmt.Errorf("fetch: %w", &foreignError{code: "denied", reason: "loopback"})
	b, _ := json.Marshal(airlock.ErrorBody{Error: airlock.Public(err, "01HZX3")})
	fmt.Println(string(b))
	fmt.Println(airlock.ExitCode(err))
	// Output:
	// {"error":{"code":"denied","reason":"loopback","message":"fetch: foreign: denied (loopback)","decision_id":"01HZX3"}}
	// 3
}

// publicErr is an error with a public message, as egress's are.
type publicErr struct{ full, public string }

func (e *publicErr) Error() string         { return e.full }
func (e *publicErr) PublicMessage() string { return e.public }
func (e *publicErr) ErrorCode() string     { return "denied" }
func (e *publicErr) ErrorReason() string   { return string(airlock.ReasonInternalAddress) }

func TestPublicMessageOf(t *testing.T) {
	inner := &publicErr{full: "check x [10.1.2.3:80] denied", public: "check x denied"}
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"nil", nil, ""},
		{"plain", errors.New("boom"), "boom"},
		{"bare", inner, "check x denied"},
		{"wrapped", fmt.Errorf("fetch: %w", inner), "fetch: check x denied"},
		{"twice", fmt.Errorf("a: %w", fmt.Errorf("b: %w", inner)), "a: b: check x denied"},
		{"vocabulary", airlock.Errorf(airlock.CodeDenied, airlock.ReasonInternalAddress, "crawl: %w", inner), "crawl: check x denied"},
		{"joined", errors.Join(errors.New("first"), inner), "first\ncheck x denied"},
		{"two %w", fmt.Errorf("%w (mid-flight: %w)", errors.New("revoked"), inner), "revoked (mid-flight: check x denied)"},
	}
	for _, tt := range tests {
		if got := airlock.PublicMessageOf(tt.err); got != tt.want {
			t.Errorf("%s: airlock.PublicMessageOf = %q, want %q", tt.name, got, tt.want)
		}
	}
	pub := airlock.Public(fmt.Errorf("fetch: %w", inner), "id")
	if pub.Message != "fetch: check x denied" || pub.Reason != airlock.ReasonInternalAddress || pub.Code != airlock.CodeDenied {
		t.Errorf("Public = %+v", pub)
	}
	var e *airlock.Error = airlock.Errorf(airlock.CodeDenied, "r", "x: %w", inner)
	if e.PublicMessage() != "x: check x denied" || e.Error() != "x: check x [10.1.2.3:80] denied" {
		t.Errorf("*Error: PublicMessage %q, Error %q", e.PublicMessage(), e.Error())
	}
}
