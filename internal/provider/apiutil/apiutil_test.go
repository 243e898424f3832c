package apiutil

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestRedactAndTransport(t *testing.T) {
	if got := Redact("key=abc&user=u", "abc", "", "u"); got != "key="+Redacted+"&"+Redacted+"ser="+Redacted {
		t.Errorf("Redact = %q", got)
	}
	cause := errors.New("dial abc failed")
	err := Transport(cause, "p: ", "abc")
	if err.Error() != "p: dial "+Redacted+" failed" || !errors.Is(err, cause) {
		t.Errorf("Transport = %q (Is %v)", err, errors.Is(err, cause))
	}
}

func TestSnippet(t *testing.T) {
	if got := Snippet([]byte("  a \n\t b  ")); got != "a b" {
		t.Errorf("Snippet = %q", got)
	}
	long := Snippet([]byte(strings.Repeat("é", 400)))
	if r := []rune(long); len(r) != snippetRunes+1 || !strings.HasSuffix(long, "…") {
		t.Errorf("long snippet: %d runes", len(r))
	}
}

func TestRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		h    map[string][]string
		also []string
		want time.Duration
	}{
		{map[string][]string{"Retry-After": {" 7 "}}, nil, 7 * time.Second},
		{map[string][]string{"Retry-After": {"Wed, 21 Oct 2015 07:28:00 GMT"}}, nil, 0},
		{map[string][]string{"Retry-After": {"0"}}, nil, 0},
		{map[string][]string{"X-Ratelimit-Reset": {"3, 2000"}}, []string{"X-RateLimit-Reset"}, 3 * time.Second},
		{map[string][]string{"X-Ratelimit-Reset": {"3"}}, nil, 0},
		{map[string][]string{"Retry-After": {"2"}, "X-Ratelimit-Reset": {"9"}}, []string{"X-RateLimit-Reset"}, 2 * time.Second},
	} {
		if got := RetryAfter(tc.h, tc.also...); got != tc.want {
			t.Errorf("RetryAfter(%v, %v) = %v, want %v", tc.h, tc.also, got, tc.want)
		}
	}
}
