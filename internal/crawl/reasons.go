package crawl

import (
	"net/textproto"
	"strings"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/crawl/robotstag"
)

// Reasons a URL is listed in CrawlSummary.Skipped.
const (
	ReasonRobots      = "robots"       // robots.txt disallows it, or its robots.txt is unreachable
	ReasonPolicy      = "policy"       // the Doer refused it (code denied); Detail has the policy reason
	ReasonHTTPStatus  = "http_status"  // a status outside 2xx; Detail has the status
	ReasonTimeout     = "timeout"      // the per-page timeout passed
	ReasonOffHost     = "off_host"     // a link outside the seed's host (or its subdomains)
	ReasonDepth       = "depth"        // a link deeper than the depth limit
	ReasonPath        = "path"         // a link whose path include_paths or exclude_paths leave out
	ReasonType        = "type"         // the page function refused its content type
	ReasonDuplicate   = "duplicate"    // a listed URL that was already listed (after Normalize)
	ReasonLimit       = "limit"        // not fetched: the page limit was reached
	ReasonBotWall     = "bot_wall"     // a captcha or challenge page instead of content
	ReasonRateLimited = "rate_limited" // the Doer's rate limit held after retries
	ReasonTooLarge    = "too_large"    // the body passed a size cap
	ReasonInvalid     = "invalid"      // a listed URL that is not an absolute http(s) URL
	ReasonError       = "error"        // anything else; Detail says what
	// ReasonTruncated marks the last entry of a skipped list cut at
	// MaxSkipped: its Detail says how many more URLs were skipped.
	ReasonTruncated = "truncated"
)

// Why a crawl stopped early (CrawlSummary.Stopped).
const (
	StoppedCanceled = "canceled" // the context was canceled
	StoppedTimeout  = "timeout"  // the context's deadline passed
	StoppedRevoked  = "revoked"  // the Doer answered revoked: the principal lost its grant
	StoppedEmit     = "emit"     // the emit callback failed
	StoppedStore    = "store"    // the Frontier or Seen failed
	// StoppedRequests: the run made RequestsPerPage × max_pages page
	// requests (failures included) and stopped; the rest is skipped as
	// limit. Not an error: the pages gathered are the crawl's result.
	StoppedRequests = "request_limit"
)

// Error reasons this package matches in errors it did not make: the
// vocabulary's reasons for bot walls, HTTP statuses and content types.
const (
	errReasonBotWall    = "bot_wall"
	errReasonHTTPStatus = "http_status"
	errReasonType       = "type"
)

// maxDetail bounds a Skipped.Detail.
const maxDetail = 512

// skipReason classifies the error of a fetch or of the page function.
// fatal is true for errors that end the whole crawl (a revoked principal).
func skipReason(err error) (reason, detail string, fatal bool) {
	code, why := airlock.CodeOf(err), airlock.ReasonOf(err)
	switch {
	case code == airlock.CodeRevoked:
		return "", "", true
	case why == errReasonBotWall:
		reason = ReasonBotWall
	case code == airlock.CodeDenied:
		reason = ReasonPolicy
	case code == airlock.CodeTimeout:
		reason = ReasonTimeout
	case code == airlock.CodeRateLimited:
		reason = ReasonRateLimited
	case code == airlock.CodeTooLarge:
		reason = ReasonTooLarge
	case why == errReasonHTTPStatus:
		reason = ReasonHTTPStatus
	case why == errReasonType:
		reason = ReasonType
	default:
		reason = ReasonError
	}
	// Public hides the text of internal errors, which is for the log.
	detail = airlock.Public(err, "").Message
	if why != "" && reason == ReasonPolicy {
		detail = why + ": " + detail
	}
	return reason, truncate(detail, maxDetail), false
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !startsRune(s[n]) {
		n--
	}
	return s[:n]
}

func startsRune(b byte) bool { return b&0xc0 != 0x80 }

// headerValues returns the values of a header, whatever the case of its key.
func headerValues(h map[string][]string, name string) []string {
	if v, ok := h[textproto.CanonicalMIMEHeaderKey(name)]; ok {
		return v
	}
	for k, v := range h {
		if strings.EqualFold(k, name) {
			return v
		}
	}
	return nil
}

// xRobotsTag reads the X-Robots-Tag headers of a response: directives with
// no user-agent prefix, or with ours, count (robotstag.Header).
func xRobotsTag(h map[string][]string) (noindex, nofollow bool) {
	return robotstag.Header(headerValues(h, "X-Robots-Tag"))
}
