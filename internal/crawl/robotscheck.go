package crawl

import (
	"context"
	"net/url"
	"time"

	"github.com/airlockhq/airlock"
)

// RobotsCheck is one single-page fetch to check against its origin's
// robots.txt (CheckRobots).
type RobotsCheck struct {
	// Target is the URL to be fetched.
	Target string
	// Partition keys the cache (the tenant), so that one tenant's
	// verdicts are never another's.
	Partition string
	// Header, TLSProfile, Proxy and Narrow are sent with the robots.txt
	// request: the caller's identity and policy.
	Header     map[string][]string
	TLSProfile string
	Proxy      string
	Narrow     *airlock.Narrowing
}

// CheckRobots decides whether robots.txt lets ProductToken fetch
// c.Target, as a crawl decides (RFC 9309): the origin's verdict comes
// from cache (partitioned, bounded, with the crawl's TTLs) or from a GET
// of /robots.txt through d, the caller's guarded Doer. A 4xx robots.txt
// allows everything; a 5xx, 429 or unreachable one refuses everything
// for RobotsRetryTTL; an origin the policy refuses is not decided here
// (the fetch is refused with the policy's reason). A refusal is denied
// with reason robots (ReasonRobots); revoked, canceled and timed-out
// errors of the robots.txt request are returned as they are.
func CheckRobots(ctx context.Context, d airlock.Doer, cache *RobotsCache, c RobotsCheck) error {
	n, err := Normalize(c.Target)
	if err != nil {
		return nil // the fetch refuses it with the policy's reason
	}
	u, err := url.Parse(n)
	if err != nil {
		return nil
	}
	origin := originOf(u)
	key := c.Partition + " " + origin
	now := time.Now()
	rules := cache.get(key, now)
	if rules == nil {
		header := map[string][]string{"Accept": {acceptRobots}}
		for k, v := range c.Header {
			header[k] = v
		}
		redirects := 5 // RFC 9309 §2.3.1.2
		resp, err := d.Do(ctx, &airlock.HTTPRequest{Method: "GET", URL: origin + "/robots.txt", Header: header,
			TLSProfile: c.TLSProfile, Proxy: c.Proxy, Narrow: c.Narrow, MaxRedirects: &redirects})
		now = time.Now()
		if err != nil {
			switch airlock.CodeOf(err) {
			case airlock.CodeRevoked, airlock.CodeRateLimited:
				return err
			}
			if ctx.Err() != nil {
				return err
			}
			rules = robotsFromError(err, now)
		} else {
			rules = robotsFromStatus(resp.Status, resp.Body, now)
		}
		cache.put(key, rules, now)
	}
	if rules.allowed(u) {
		return nil
	}
	if rules.verdict == robotsDisallowAll && rules.detail != "" {
		return airlock.Errorf(airlock.CodeDenied, airlock.ReasonRobots, "%s is refused: %s, and a model-initiated fetch honours robots.txt", c.Target, rules.detail)
	}
	return airlock.Errorf(airlock.CodeDenied, airlock.ReasonRobots,
		"%s is disallowed by the site's robots.txt for user-agent %q; a model-initiated fetch honours robots.txt (a person may fetch it)", c.Target, ProductToken)
}

// robotsFromError is the verdict of a robots.txt request that failed:
// refused by policy, the caller's and not cached (its pages are refused
// too); past the redirect limit, unavailable (allow, RFC 9309
// §2.3.1.2); otherwise unreachable (refuse for RobotsRetryTTL).
func robotsFromError(err error, now time.Time) *robots {
	switch {
	case airlock.CodeOf(err) == airlock.CodeDenied:
		return &robots{verdict: robotsAllowAll, expires: now.Add(DefaultRobotsTTL)}
	case airlock.ReasonOf(err) == airlock.ReasonRedirectLimit:
		return &robots{verdict: robotsAllowAll, expires: now.Add(DefaultRobotsTTL), cache: true}
	default:
		return &robots{verdict: robotsDisallowAll, expires: now.Add(RobotsRetryTTL), cache: true,
			detail: truncate("robots.txt unreachable: "+airlock.Public(err, "").Message, maxDetail)}
	}
}
