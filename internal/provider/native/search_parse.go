package native

import (
	"bytes"
	"encoding/base64"
	"net/url"
	"strings"

	"github.com/PuerkitoBio/goquery"
	airlock "github.com/airlockhq/airlock"

	"github.com/airlockhq/airlock/internal/provider/apiutil"
)

// page is one engine's answer, parsed.
type page struct {
	engine   string
	status   int
	header   map[string][]string
	base     *url.URL // what relative links resolve against
	endpoint *url.URL // the engine endpoint asked
	doc      *goquery.Document
}

func newPage(engine string, resp *airlock.HTTPResponse, endpoint *url.URL) (page, error) {
	doc, err := goquery.NewDocumentFromReader(bytes.NewReader(resp.Body))
	if err != nil {
		return page{}, err
	}
	base := endpoint
	if u, err := url.Parse(resp.URL); err == nil && u.IsAbs() {
		base = u
	}
	return page{engine: engine, status: resp.Status, header: resp.Header, base: base, endpoint: endpoint, doc: doc}, nil
}

// engineDomains are the search engines' own domains: a link into one of
// them is the engine's navigation, an ad or a redirect, never a result.
var engineDomains = []string{"duckduckgo.com", "duck.com", "bing.com", "bing.net", "bingj.com", "brave.com"}

// chromeDomains are hosts of the engines' page furniture (footers,
// translation links), rejected by the generic anchor scrape only.
var chromeDomains = []string{"microsoft.com", "microsofttranslator.com", "msn.com", "live.com", "brave.app"}

// inDomain reports whether host is domain or one of its subdomains.
func inDomain(host string, domains ...string) bool {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	for _, d := range domains {
		if host == d || strings.HasSuffix(host, "."+d) {
			return true
		}
	}
	return false
}

// resolve makes href absolute against the page; nil when it cannot be.
func (p page) resolve(href string) *url.URL {
	href = strings.TrimSpace(href)
	if href == "" || strings.HasPrefix(href, "#") {
		return nil
	}
	u, err := url.Parse(href)
	if err != nil {
		return nil
	}
	return p.base.ResolveReference(u)
}

// result builds a SearchResult for target, or reports false when target is
// not an http(s) URL outside the engines' own hosts.
func (p page) result(target *url.URL, title, snippet string) (airlock.SearchResult, bool) {
	if target == nil || (target.Scheme != "http" && target.Scheme != "https") || target.Hostname() == "" {
		return airlock.SearchResult{}, false
	}
	host := target.Hostname()
	if inDomain(host, engineDomains...) || strings.EqualFold(host, p.endpoint.Hostname()) {
		return airlock.SearchResult{}, false
	}
	title = clean(title)
	if title == "" {
		return airlock.SearchResult{}, false
	}
	return airlock.SearchResult{Title: title, URL: target.String(), Snippet: clean(snippet), Engine: p.engine}, true
}

// clean collapses white space.
func clean(s string) string { return strings.Join(strings.Fields(s), " ") }

// text is the visible text of the first non-empty match of each selector,
// tried in order.
func text(s *goquery.Selection, selectors ...string) string {
	for _, sel := range selectors {
		var out string
		s.Find(sel).EachWithBreak(func(_ int, m *goquery.Selection) bool {
			out = clean(m.Text())
			return out == ""
		})
		if out != "" {
			return out
		}
	}
	return ""
}

// ---------------------------------------------------------------------------
// DuckDuckGo (html.duckduckgo.com/html/)

// parseDDG reads the HTML endpoint's results: div.result blocks, the title
// link a.result__a (through the //duckduckgo.com/l/?uddg= redirect) and the
// snippet .result__snippet. Ads (.result--ad, y.js links) are skipped.
func parseDDG(p page) []airlock.SearchResult {
	var out []airlock.SearchResult
	p.doc.Find("div.result, div.web-result").Each(func(_ int, s *goquery.Selection) {
		if s.HasClass("result--ad") || s.HasClass("result--ad--small") {
			return
		}
		a := s.Find("a.result__a[href]").First()
		if a.Length() == 0 {
			a = s.Find("h2 a[href]").First()
		}
		href, _ := a.Attr("href")
		target := unwrapDDG(p.resolve(href))
		if r, ok := p.result(target, a.Text(), text(s, ".result__snippet")); ok {
			out = append(out, r)
		}
	})
	return out
}

// unwrapDDG returns the target of a DuckDuckGo redirect link
// (//duckduckgo.com/l/?uddg=<escaped URL>&rut=…), or u itself.
func unwrapDDG(u *url.URL) *url.URL {
	if u == nil || !inDomain(u.Hostname(), "duckduckgo.com") || (u.Path != "/l/" && u.Path != "/l") {
		return u
	}
	t, err := url.Parse(u.Query().Get("uddg"))
	if err != nil || !t.IsAbs() {
		return u
	}
	return t
}

// ---------------------------------------------------------------------------
// Bing (www.bing.com/search)

// parseBing reads li.b_algo blocks of #b_results: the h2 link (through the
// /ck/a?…&u=a1<base64url> click-tracking redirect when present) and the
// caption paragraph. Ads (li.b_ad, /aclick links) are skipped.
func parseBing(p page) []airlock.SearchResult {
	var out []airlock.SearchResult
	p.doc.Find("li.b_algo").Each(func(_ int, s *goquery.Selection) {
		if s.Closest("li.b_ad").Length() > 0 {
			return
		}
		a := s.Find("h2 a[href]").First()
		title := a.Text()
		if a.Length() == 0 {
			a = s.Find(".b_algoheader a[href], .b_title a[href]").First()
			title = text(a, "h2")
		}
		href, _ := a.Attr("href")
		target := unwrapBing(p.resolve(href))
		s.Find(".algoSlug_icon, .b_attribution, .b_tpcn").Remove()
		snippet := text(s, ".b_caption p", "p", ".b_snippet", ".b_caption")
		if r, ok := p.result(target, title, snippet); ok {
			out = append(out, r)
		}
	})
	if len(out) == 0 {
		out = anchorScrape(p, "#b_results")
	}
	return out
}

// unwrapBing returns the target of a Bing click-tracking link
// (/ck/a?!&&p=…&u=a1<base64url of the URL>&ntb=1), or u itself.
func unwrapBing(u *url.URL) *url.URL {
	if u == nil || u.Path != "/ck/a" {
		return u
	}
	v := u.Query().Get("u")
	if !strings.HasPrefix(v, "a1") {
		return u
	}
	v = strings.TrimRight(v[2:], "=")
	b, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil {
		if b, err = base64.RawStdEncoding.DecodeString(v); err != nil {
			return u
		}
	}
	t, err := url.Parse(string(b))
	if err != nil || !t.IsAbs() {
		return u
	}
	return t
}

// ---------------------------------------------------------------------------
// Brave (search.brave.com/search)

// parseBrave reads the web result blocks (div[data-type=web], the
// "snippet" blocks carrying data-pos): the first outbound link, the
// .title / .snippet-title text and the description.
func parseBrave(p page) []airlock.SearchResult {
	blocks := p.doc.Find(`div[data-type="web"]`)
	if blocks.Length() == 0 {
		blocks = p.doc.Find("div.snippet[data-pos]").Not(`[data-type="ad"]`)
	}
	var out []airlock.SearchResult
	blocks.Each(func(_ int, s *goquery.Selection) {
		var target *url.URL
		var a *goquery.Selection
		s.Find("a[href]").EachWithBreak(func(_ int, l *goquery.Selection) bool {
			href, _ := l.Attr("href")
			u := p.resolve(href)
			if u == nil || (u.Scheme != "http" && u.Scheme != "https") || inDomain(u.Hostname(), engineDomains...) {
				return true
			}
			target, a = u, l
			return false
		})
		if target == nil {
			return
		}
		title := text(s, ".snippet-title", ".title")
		if title == "" {
			title, _ = s.Find(".title[title]").First().Attr("title")
		}
		if title == "" {
			title = a.Text()
		}
		snippet := text(s, ".snippet-description", ".generic-snippet .content", ".snippet-content .content",
			".inline-qa-question", ".description", ".content")
		if r, ok := p.result(target, title, snippet); ok {
			out = append(out, r)
		}
	})
	if len(out) == 0 {
		out = anchorScrape(p, "#results, main")
	}
	return out
}

// ---------------------------------------------------------------------------
// Generic fallback and bot-wall detection

// anchorScrape is the fallback when an engine's markup changed: the
// outbound links of the results container that read like titles, without
// snippets. Engine and page-furniture hosts are rejected; so is everything
// when the container itself is absent.
func anchorScrape(p page, container string) []airlock.SearchResult {
	var out []airlock.SearchResult
	p.doc.Find(container).First().Find("a[href]").Each(func(_ int, a *goquery.Selection) {
		href, _ := a.Attr("href")
		target := p.resolve(href)
		title := clean(a.Text())
		if target == nil || inDomain(target.Hostname(), chromeDomains...) || len([]rune(title)) < 8 {
			return
		}
		if r, ok := p.result(target, title, ""); ok {
			out = append(out, r)
		}
	})
	return out
}

// Phrases of the engines' interstitials (lower case): DuckDuckGo's anomaly
// page ("Unfortunately, bots use DuckDuckGo too. Please complete the
// following challenge to confirm this search was made by a human."),
// Bing's and Brave's captcha pages, and the usual generic wordings.
var (
	captchaPhrases = []string{
		"bots use duckduckgo too",
		"complete the following challenge",
		"confirm this search was made by a human",
		"unusual traffic",
		"are you a robot",
		"verify you are a human",
		"verify you are human",
		"confirm you are a human",
		"i'm not a robot",
		"solve the challenge",
		"pardon our interruption",
		"automated queries",
	}
	rateLimitPhrases = []string{"too many requests", "rate limit exceeded", "rate-limited", "you have been rate limited"}
)

// classify explains a page that gave no results: a *SearchError for a rate
// limit, a bot wall or an HTTP error status; nil for a plain "no results".
func classify(p page) error {
	e := &SearchError{Engine: p.engine, Status: p.status}
	if p.status == 429 {
		e.Reason, e.Wait = airlock.ReasonRateLimited, apiutil.RetryAfter(p.header)
		return e
	}
	if kind := wallKind(p); kind != "" {
		e.Reason, e.Kind = airlock.ReasonBotWall, kind
		return e
	}
	switch {
	case p.status == 403:
		e.Reason, e.Kind = airlock.ReasonBotWall, WallAccessDenied
		return e
	case p.status < 200 || p.status > 299:
		e.Reason = airlock.ReasonHTTPStatus
		return e
	}
	body := strings.ToLower(p.doc.Find("body").Text())
	for _, ph := range rateLimitPhrases {
		if strings.Contains(body, ph) {
			e.Reason = airlock.ReasonRateLimited
			return e
		}
	}
	return nil
}

// wallKind reports the kind of bot wall a page is, or "". It looks at the
// page's structure (ids, classes, form actions and frame sources naming a
// captcha or challenge), its title and its visible wording; the query
// echoed in a search box or title is not enough on its own.
func wallKind(p page) string {
	captcha, challenge := false, false
	p.doc.Find("[id], [class], form[action], iframe[src], script[src], [data-testid]").Each(func(_ int, s *goquery.Selection) {
		for _, attr := range []string{"id", "class", "action", "src", "data-testid"} {
			v, ok := s.Attr(attr)
			if !ok {
				continue
			}
			v = strings.ToLower(v)
			switch {
			case strings.Contains(v, "captcha"), strings.Contains(v, "anomaly"):
				captcha = true
			case strings.Contains(v, "cf-challenge"), strings.Contains(v, "challenge-form"),
				strings.Contains(v, "challenge-platform"), strings.Contains(v, "turnstile"):
				challenge = true
			}
		}
	})
	switch {
	case captcha:
		return WallCaptcha
	case challenge:
		return WallChallenge
	}
	title := strings.ToLower(clean(p.doc.Find("title").First().Text()))
	switch {
	case strings.HasPrefix(title, "just a moment"), strings.HasPrefix(title, "attention required"):
		return WallChallenge
	case strings.Contains(title, "access denied"):
		return WallAccessDenied
	}
	body := strings.ToLower(clean(p.doc.Find("body").Text()))
	for _, ph := range captchaPhrases {
		if strings.Contains(body, ph) {
			return WallCaptcha
		}
	}
	return ""
}

// normalizeURL is the deduplication key of a result URL: scheme-less,
// lower-case host without default port or "www.", no fragment, no trailing
// slash, no tracking parameters. It reports false for a URL that is not
// absolute http(s).
func normalizeURL(raw string) (string, bool) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
		return "", false
	}
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	host = strings.TrimPrefix(host, "www.")
	if port := u.Port(); port != "" && port != "80" && port != "443" {
		host += ":" + port
	}
	path := strings.TrimRight(u.EscapedPath(), "/")
	q := u.Query()
	for k := range q {
		lk := strings.ToLower(k)
		if strings.HasPrefix(lk, "utm_") || lk == "fbclid" || lk == "gclid" || lk == "msclkid" {
			q.Del(k)
		}
	}
	key := host + path
	if enc := q.Encode(); enc != "" {
		key += "?" + enc
	}
	return key, true
}
