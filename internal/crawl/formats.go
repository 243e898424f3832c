package crawl

import (
	"slices"
	"strings"

	"github.com/airlockhq/airlock"
)

// checkFormats refuses a CrawlRequest.Formats name that is not one of
// airlock.CrawlFormats.
func checkFormats(formats []string) error {
	for _, f := range formats {
		if !slices.Contains(airlock.CrawlFormats(), f) {
			return invalid("format %q: want one of %s", f, strings.Join(airlock.CrawlFormats(), ", "))
		}
	}
	return nil
}

// keepsRaw says whether a crawl with these formats keeps each page's body.
func keepsRaw(formats []string) bool { return slices.Contains(formats, airlock.FormatRawHTML) }

// rawText is a body as Page.RawHTML keeps it: text, invalid UTF-8
// replaced.
func rawText(body []byte) string { return strings.ToValidUTF8(string(body), "\uFFFD") }
