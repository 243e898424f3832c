package extract

import "net/url"

// The crawler's one-pass page reader (internal/crawl, Discover) resolves
// links and trims titles exactly as the extractor does, through these.

// ResolveLink resolves href against base (nil: href as it is) and keeps
// http and https links only, without their fragment or user information,
// with the host lower-cased; nil for anything else.
func ResolveLink(base *url.URL, href string) *url.URL { return resolveLink(base, href) }

// AbsURL is ref resolved against base as an http or https URL, or "".
func AbsURL(base *url.URL, ref string) string { return absURL(base, ref) }

// TrimSiteName cuts the site's name and its separator off either end of
// title ("Headline | Site"), when at least two words remain.
func TrimSiteName(title, site string) string { return trimSiteName(title, site) }
