package crawl

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jimsmart/grobotstxt"

	"github.com/airlockhq/airlock/internal/crawl/robotstag"
)

// Robots-related limits (RFC 9309).
const (
	// ProductToken is the name a robots.txt group must give to address
	// this crawler ("User-agent: airlock").
	ProductToken = robotstag.Agent
	// MaxRobotsBytes of a robots.txt are parsed; the rest is ignored
	// (RFC 9309 §2.5 asks for at least 500 KiB).
	MaxRobotsBytes = 500 << 10
	// DefaultRobotsTTL is how long a fetched robots.txt (or a 4xx answer)
	// is trusted (RFC 9309 §2.4: at most 24 hours).
	DefaultRobotsTTL = 24 * time.Hour
	// RobotsRetryTTL is how long an unreachable robots.txt (5xx, network
	// error, timeout) keeps its host closed before it is fetched again.
	RobotsRetryTTL = 5 * time.Minute
	// MaxCrawlDelay caps a robots.txt Crawl-delay.
	MaxCrawlDelay = 30 * time.Second
	// maxRobotsSitemaps caps the Sitemap lines kept from one robots.txt.
	maxRobotsSitemaps = 20
)

// robotsVerdict is the kind of answer a robots.txt fetch produced.
type robotsVerdict uint8

const (
	robotsRules       robotsVerdict = iota // a robots.txt was parsed
	robotsAllowAll                         // 4xx, too many redirects, or the fetch was refused by policy
	robotsDisallowAll                      // 5xx, 429, unreachable, timeout
)

// robots is what a crawl knows of one origin's robots.txt. It is immutable
// once built and shared between runs through a RobotsCache.
type robots struct {
	verdict  robotsVerdict
	body     string // the rules that apply to ProductToken, re-serialised (see compactRobots)
	delay    time.Duration
	sitemaps []string
	detail   string // why, for robotsDisallowAll
	expires  time.Time
	cache    bool // false for verdicts that depend on the caller (policy)
}

// allowed reports whether the path and query of the normalised URL u may
// be fetched.
func (r *robots) allowed(u *url.URL) (ok bool) {
	switch r.verdict {
	case robotsAllowAll:
		return true
	case robotsDisallowAll:
		return false
	}
	p := u.EscapedPath()
	if p == "/robots.txt" || r.body == "" {
		return true
	}
	if u.RawQuery != "" {
		p += "?" + u.RawQuery
	}
	defer func() {
		if recover() != nil { // grobotstxt panics on some inputs: refuse
			ok = false
		}
	}()
	return grobotstxt.AgentAllowed(r.body, ProductToken, p)
}

// parseRobots builds the rules of a robots.txt body fetched at now.
func parseRobots(body []byte, now time.Time) (r *robots) {
	if len(body) > MaxRobotsBytes {
		body = body[:MaxRobotsBytes]
		if i := strings.LastIndexAny(string(body), "\r\n"); i >= 0 {
			body = body[:i] // never parse half a rule
		}
	}
	defer func() {
		if recover() != nil {
			r = &robots{verdict: robotsDisallowAll, detail: "robots.txt could not be parsed", expires: now.Add(RobotsRetryTTL), cache: true}
		}
	}()
	s := &robotsScan{}
	grobotstxt.Parse(escapeRobots(body), s)
	return s.result(now)
}

// escapeRobots puts every percent-encoding of a robots.txt in the form
// Normalize gives URLs: unreserved characters decoded, other escapes in
// upper case, bytes outside ASCII encoded. RFC 9309 §2.2.2 compares paths
// that way, and grobotstxt v1.0.3 must not rewrite escapes itself: its
// upper-casing (escapePattern) turns digits into control characters
// ("%7e" becomes "%\x17E"), whenever a pattern has a lower-case escape or
// a byte outside ASCII.
func escapeRobots(body []byte) string {
	body = bytes.TrimPrefix(body, []byte("\xef\xbb\xbf"))
	var b strings.Builder
	b.Grow(len(body) + len(body)/16)
	for i := 0; i < len(body); i++ {
		c := body[i]
		switch {
		case c >= 0x80:
			b.WriteByte('%')
			b.WriteByte(upperHex[c>>4])
			b.WriteByte(upperHex[c&15])
		case c == '%' && i+2 < len(body):
			hi, ok1 := unhex(body[i+1])
			lo, ok2 := unhex(body[i+2])
			if !ok1 || !ok2 {
				b.WriteByte(c)
				continue
			}
			if d := hi<<4 | lo; isUnreserved(d) {
				b.WriteByte(d)
			} else {
				b.WriteByte('%')
				b.WriteByte(upperHex[hi])
				b.WriteByte(upperHex[lo])
			}
			i += 2
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// robotsGroup is one group of a robots.txt: its user-agent lines, then its
// rules.
type robotsGroup struct {
	specific, global bool
	rules            []string // "allow: /x", "disallow: /y"
}

// robotsScan is a grobotstxt.ParseHandler that keeps the groups addressed
// to ProductToken (or, when none is, to "*"), the crawl-delay that applies
// and the Sitemap lines.
//
// Its groups for rules are grobotstxt's own (RFC 9309 §2.2): a user-agent
// line after an allow or disallow line starts a new group, other lines do
// not end one. Crawl-delay, which the RFC does not define, is read as the
// crawlers that honour it do: as a rule of the user-agent lines above it,
// so that "User-agent: *", "Crawl-delay: 9", "User-agent: airlock",
// "Crawl-delay: 1" gives us 1.
type robotsScan struct {
	groups   []*robotsGroup
	cur      *robotsGroup
	sep      bool // an allow/disallow line was seen in cur
	sitemaps []string

	// crawl-delay groups
	dSpecific, dGlobal, dSep, dStarted bool
	delay                              [2]time.Duration // global, specific
	hasDelay                           [2]bool
	anySpecific                        bool
}

func (s *robotsScan) HandleRobotsStart() {}
func (s *robotsScan) HandleRobotsEnd()   {}

func (s *robotsScan) HandleUserAgent(_ int, v string) {
	if s.cur == nil || s.sep {
		s.cur = &robotsGroup{}
		s.groups = append(s.groups, s.cur)
		s.sep = false
	}
	if !s.dStarted || s.dSep {
		s.dSpecific, s.dGlobal, s.dSep, s.dStarted = false, false, false, true
	}
	// As grobotstxt matches: "*" (optionally followed by a space and
	// anything), else the product token at the start of the value.
	if v != "" && v[0] == '*' && (len(v) == 1 || v[1] == ' ' || v[1] == '\t') {
		s.cur.global, s.dGlobal = true, true
	} else if strings.EqualFold(productToken(v), ProductToken) {
		s.cur.specific, s.dSpecific, s.anySpecific = true, true, true
	}
}

// productToken returns the leading RFC 7231 token of a user-agent value.
func productToken(v string) string {
	for i := 0; i < len(v); i++ {
		c := v[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return v[:i]
		}
	}
	return v
}

func (s *robotsScan) rule(key, v string) {
	if s.cur == nil { // rules before any user-agent line are ignored
		return
	}
	s.sep, s.dSep = true, true
	s.cur.rules = append(s.cur.rules, key+": "+v)
}

func (s *robotsScan) HandleAllow(_ int, v string)    { s.rule("allow", v) }
func (s *robotsScan) HandleDisallow(_ int, v string) { s.rule("disallow", v) }

func (s *robotsScan) HandleSitemap(_ int, v string) {
	if v != "" && len(s.sitemaps) < maxRobotsSitemaps {
		s.sitemaps = append(s.sitemaps, v)
	}
}

func (s *robotsScan) HandleUnknownAction(_ int, action, v string) {
	if !s.dStarted || !strings.EqualFold(action, "crawl-delay") && !strings.EqualFold(action, "crawldelay") {
		return
	}
	s.dSep = true
	f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil || f < 0 || math.IsNaN(f) || math.IsInf(f, 0) {
		return
	}
	d := min(time.Duration(f*float64(time.Second)), MaxCrawlDelay)
	for i, applies := range [2]bool{s.dGlobal, s.dSpecific} {
		if applies && !s.hasDelay[i] {
			s.delay[i], s.hasDelay[i] = d, true
		}
	}
}

// result keeps the groups that apply. grobotstxt gives the rules of the
// groups naming the product token precedence over those of "*" groups
// (which are then ignored entirely), and merges groups of the same kind;
// so writing the applicable rules under one user-agent line matches
// exactly as the whole file would, and matching a URL parses only them.
func (s *robotsScan) result(now time.Time) *robots {
	specific := false
	for _, g := range s.groups {
		specific = specific || g.specific
	}
	var b strings.Builder
	r := &robots{verdict: robotsRules, sitemaps: s.sitemaps, expires: now.Add(DefaultRobotsTTL), cache: true}
	if specific {
		b.WriteString("user-agent: " + ProductToken + "\n")
	} else {
		b.WriteString("user-agent: *\n")
	}
	rules := false
	for _, g := range s.groups {
		if specific && !g.specific || !specific && !g.global {
			continue
		}
		for _, l := range g.rules {
			b.WriteString(l)
			b.WriteByte('\n')
			rules = true
		}
	}
	if s.anySpecific {
		r.delay = s.delay[1]
	} else {
		r.delay = s.delay[0]
	}
	if rules {
		r.body = b.String()
	}
	return r
}

// RobotsCache keeps robots.txt verdicts per origin (scheme, host and port)
// so that crawls do not fetch them again within their TTL. A nil
// *RobotsCache caches nothing. It is safe for concurrent use; two crawls
// missing the same origin at once may both fetch it.
type RobotsCache struct {
	mu  sync.Mutex
	m   map[string]*robots
	max int
}

// NewRobotsCache returns a cache of at most maxOrigins entries (0: 10,000).
func NewRobotsCache(maxOrigins int) *RobotsCache {
	if maxOrigins <= 0 {
		maxOrigins = 10000
	}
	return &RobotsCache{m: make(map[string]*robots), max: maxOrigins}
}

func (c *RobotsCache) get(origin string, now time.Time) *robots {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.m[origin]
	if r != nil && !now.Before(r.expires) {
		delete(c.m, origin)
		return nil
	}
	return r
}

func (c *RobotsCache) put(origin string, r *robots, now time.Time) {
	if c == nil || !r.cache {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= c.max {
		for k, v := range c.m { // expired entries first, else any
			if !now.Before(v.expires) {
				delete(c.m, k)
			}
		}
		for k := range c.m {
			if len(c.m) < c.max {
				break
			}
			delete(c.m, k)
		}
	}
	c.m[origin] = r
}

// robotsFromStatus maps the status of a robots.txt answer (RFC 9309
// §2.3.1): 2xx is parsed, 4xx opens the origin (except 429, which like
// 5xx closes it for RobotsRetryTTL: the server is asking us to slow down).
func robotsFromStatus(status int, body []byte, now time.Time) *robots {
	switch {
	case status >= 200 && status < 300:
		return parseRobots(body, now)
	case status >= 400 && status < 500 && status != 429:
		return &robots{verdict: robotsAllowAll, expires: now.Add(DefaultRobotsTTL), cache: true}
	default:
		return &robots{verdict: robotsDisallowAll, detail: fmt.Sprintf("robots.txt answered %d", status), expires: now.Add(RobotsRetryTTL), cache: true}
	}
}

// sharedRobotsVerdict is a robots verdict as a shared crawl stores it.
type sharedRobotsVerdict struct {
	Verdict  robotsVerdict `json:"v"`
	Body     string        `json:"b,omitempty"`
	Delay    time.Duration `json:"d,omitempty"`
	Sitemaps []string      `json:"s,omitempty"`
	Detail   string        `json:"x,omitempty"`
	Expires  time.Time     `json:"e"`
}

// sharedRobots returns the verdict another run of a shared crawl stored
// for origin, or nil.
func (r *run) sharedRobots(ctx context.Context, origin string) *robots {
	if r.polite == nil {
		return nil
	}
	data, err := r.polite.LoadRobots(ctx, origin)
	if err != nil || data == nil {
		return nil // fetch it, as if none were stored
	}
	var v sharedRobotsVerdict
	if json.Unmarshal(data, &v) != nil || !time.Now().Before(v.Expires) {
		return nil
	}
	rules := &robots{verdict: v.Verdict, body: v.Body, delay: min(max(v.Delay, 0), MaxCrawlDelay), sitemaps: v.Sitemaps,
		detail: v.Detail, expires: v.Expires, cache: true}
	r.robots.put(origin, rules, time.Now())
	return rules
}

// shareRobots stores a verdict for the other runs of a shared crawl, when
// it is the origin's and not the caller's (a policy refusal).
func (r *run) shareRobots(ctx context.Context, origin string, rules *robots, now time.Time) {
	if r.polite == nil || !rules.cache {
		return
	}
	data, err := json.Marshal(sharedRobotsVerdict{Verdict: rules.verdict, Body: rules.body, Delay: rules.delay,
		Sitemaps: rules.sitemaps, Detail: rules.detail, Expires: rules.expires})
	if err == nil {
		err = r.polite.StoreRobots(ctx, origin, data, rules.expires.Sub(now))
	}
	if err != nil {
		r.log.Debug("crawl: robots.txt verdict not shared", "origin", origin, "error", err)
	}
}
