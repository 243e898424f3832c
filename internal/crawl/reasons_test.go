package crawl

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/airlockhq/airlock"
)

func TestXRobotsTag(t *testing.T) {
	tests := []struct {
		values            []string
		noindex, nofollow bool
	}{
		{nil, false, false},
		{[]string{"noindex"}, true, false},
		{[]string{"NoFollow"}, false, true},
		{[]string{"none"}, true, true},
		{[]string{"noindex, nofollow"}, true, true},
		{[]string{"noarchive", "nofollow"}, false, true},
		{[]string{"googlebot: noindex"}, false, false},
		{[]string{"airlock: noindex"}, true, false},
		{[]string{"Airlock: none"}, true, true},
		{[]string{"unavailable_after: 25 Jun 2010 15:00:00 PST"}, false, false},
		{[]string{"noindex, unavailable_after: 25 Jun 2010 15:00:00 PST"}, true, false},
		{[]string{"max-snippet: 20"}, false, false},
		// An agent addresses the directives after it, up to the next agent.
		{[]string{"otherbot: noindex, airlock: nofollow"}, false, true},
		{[]string{"airlock: noindex, otherbot: nofollow"}, true, false},
	}
	for _, tt := range tests {
		h := map[string][]string{"x-robots-tag": tt.values}
		ni, nf := xRobotsTag(h)
		if ni != tt.noindex || nf != tt.nofollow {
			t.Errorf("xRobotsTag(%q) = %v, %v; want %v, %v", tt.values, ni, nf, tt.noindex, tt.nofollow)
		}
	}
}

func TestSkipReason(t *testing.T) {
	tests := []struct {
		err    error
		reason airlock.Reason
		fatal  bool
	}{
		{airlock.Errorf(airlock.CodeRevoked, "revoked", "gone"), "", true},
		{airlock.Errorf(airlock.CodeDenied, "loopback", "no"), airlock.ReasonPolicy, false},
		{airlock.Errorf(airlock.CodeDenied, "robots", "no"), airlock.ReasonPolicy, false},
		{airlock.Errorf(airlock.CodeTimeout, "timeout", "slow"), airlock.ReasonTimeout, false},
		{fmt.Errorf("get: %w", context.DeadlineExceeded), airlock.ReasonTimeout, false},
		{airlock.Errorf(airlock.CodeUpstream, "bot_wall", "captcha"), airlock.ReasonBotWall, false},
		{airlock.Errorf(airlock.CodeUpstream, "http_status", "404"), airlock.ReasonHTTPStatus, false},
		{airlock.Errorf(airlock.CodeUpstream, "type", "image/png"), airlock.ReasonType, false},
		{airlock.Errorf(airlock.CodeUpstream, airlock.ReasonUnsupportedContent, "image/png"), airlock.ReasonType, false},
		{airlock.Errorf(airlock.CodeRateLimited, "rate_limited", "later"), airlock.ReasonRateLimited, false},
		{airlock.Errorf(airlock.CodeTooLarge, "body_too_large", "big"), airlock.ReasonTooLarge, false},
		{airlock.Errorf(airlock.CodeUpstream, "connect", "refused"), airlock.ReasonError, false},
		{errors.New("secret internal detail"), airlock.ReasonError, false},
	}
	for _, tt := range tests {
		reason, detail, fatal := skipReason(tt.err)
		if reason != tt.reason || fatal != tt.fatal {
			t.Errorf("skipReason(%v) = %q, fatal %v; want %q, %v", tt.err, reason, fatal, tt.reason, tt.fatal)
		}
		if strings.Contains(detail, "secret") {
			t.Errorf("skipReason(%v) detail %q shows an internal error", tt.err, detail)
		}
	}
	if _, d, _ := skipReason(errors.New(strings.Repeat("é", 1000))); len(d) > maxDetail {
		t.Errorf("detail is %d bytes, want at most %d", len(d), maxDetail)
	}
}
