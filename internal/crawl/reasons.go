package crawl

import (
	"net/textproto"
	"strings"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/crawl/robotstag"
)

// The reasons a URL is listed in CrawlSummary.Skipped are the catalogue's
// (airlock.ReasonRobots, airlock.ReasonPolicy, airlock.ReasonHTTPStatus, ...).

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

// maxDetail bounds a Skipped.Detail.
const maxDetail = 512

// skipReason classifies the error of a fetch or of the page function.
// fatal is true for errors that end the whole crawl (a revoked principal).
func skipReason(err error) (reason airlock.Reason, detail string, fatal bool) {
	code, why := airlock.CodeOf(err), airlock.ReasonOf(err)
	switch {
	case code == airlock.CodeRevoked:
		return "", "", true
	case why == airlock.ReasonBotWall:
		reason = airlock.ReasonBotWall
	case code == airlock.CodeDenied:
		reason = airlock.ReasonPolicy
	case code == airlock.CodeTimeout:
		reason = airlock.ReasonTimeout
	case code == airlock.CodeRateLimited:
		reason = airlock.ReasonRateLimited
	case code == airlock.CodeTooLarge:
		reason = airlock.ReasonTooLarge
	case why == airlock.ReasonHTTPStatus:
		reason = airlock.ReasonHTTPStatus
	case why == airlock.ReasonType, why == airlock.ReasonUnsupportedContent:
		reason = airlock.ReasonType
	default:
		reason = airlock.ReasonError
	}
	// Public hides the text of internal errors, which is for the log.
	detail = airlock.Public(err, "").Message
	if why != "" && reason == airlock.ReasonPolicy {
		detail = string(why) + ": " + detail
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
