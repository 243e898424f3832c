// Package robotstag parses robots indexing directives: the content of
// <meta name="robots"> (or of a meta tag named for one agent) and the
// X-Robots-Tag response header. It is the one parser that the crawler
// (internal/crawl, which reads the header of each response) and the
// extractor (internal/extract, which reads the meta tags of a page) share;
// it imports only the standard library, so that both can use it without
// either importing the other.
package robotstag

import "strings"

// Agent is the product token whose agent-specific directives apply to
// airlock: <meta name="airlock">, "X-Robots-Tag: airlock: nofollow", and
// the User-agent of a robots.txt group.
const Agent = "airlock"

// Directives reads one comma-separated list of directives, as in
// <meta name="robots" content="noindex, follow">: "noindex", "nofollow"
// and "none" (both) count, case-insensitively; anything else is ignored.
func Directives(list string) (noindex, nofollow bool) {
	for d := range strings.SplitSeq(list, ",") {
		ni, nf := directive(d)
		noindex = noindex || ni
		nofollow = nofollow || nf
	}
	return noindex, nofollow
}

func directive(d string) (noindex, nofollow bool) {
	switch strings.ToLower(strings.TrimSpace(d)) {
	case "noindex":
		return true, false
	case "nofollow":
		return false, true
	case "none":
		return true, true
	}
	return false, false
}

// Header reads the values of the X-Robots-Tag headers of one response.
// A directive counts when no agent addresses it or when Agent does
// (case-insensitively). An agent prefix ("googlebot: noindex, nofollow")
// addresses the directives after it up to the next agent prefix in the
// same value, so "otherbot: noindex, airlock: nofollow" is nofollow for
// airlock. Directives that take a value ("max-snippet: 20",
// "unavailable_after: 25 Jun 2010 15:00:00 PST") are not agents.
func Header(values []string) (noindex, nofollow bool) {
	for _, v := range values {
		agent := ""
		for part := range strings.SplitSeq(v, ",") {
			if name, rest, ok := strings.Cut(part, ":"); ok {
				if name = strings.TrimSpace(name); isAgent(name) {
					agent = strings.ToLower(name)
					part = rest
				}
			}
			if agent != "" && agent != Agent {
				continue
			}
			ni, nf := directive(part)
			noindex = noindex || ni
			nofollow = nofollow || nf
		}
	}
	return noindex, nofollow
}

// isAgent reports whether the text before a colon names a user agent: one
// word that is not a directive taking a value. The date of
// "unavailable_after: Friday, 25 Jun 2010 15:00:00 PST" puts a colon after
// "25 Jun 2010 15", which has spaces and so is not an agent either.
func isAgent(name string) bool {
	if name == "" || strings.ContainsAny(name, " \t") {
		return false
	}
	switch strings.ToLower(name) {
	case "unavailable_after", "max-snippet", "max-image-preview", "max-video-preview", "indexifembedded":
		return false
	}
	return true
}
