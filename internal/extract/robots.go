package extract

import (
	"strings"

	"github.com/airlockhq/airlock"
)

// RobotsAgent is the product token whose agent-specific robots directives
// apply to airlock (<meta name="airlock">, "X-Robots-Tag: airlock: ...").
const RobotsAgent = "airlock"

// Robots reports the indexing directives of a page: <meta name="robots">
// and <meta name="airlock"> (as collected in p.Meta by Extract) and the
// X-Robots-Tag headers of in.Header, including those addressed to
// "airlock:" and ignoring those addressed to other agents ("googlebot:
// noindex"). "none" means both. A crawler honours noindex by not emitting
// the page and nofollow by not following its links. p may be nil (headers
// only).
func Robots(in Input, p *airlock.Page) (noindex, nofollow bool) {
	apply := func(directives string) {
		for _, d := range strings.Split(strings.ToLower(directives), ",") {
			switch strings.TrimSpace(d) {
			case "noindex":
				noindex = true
			case "nofollow":
				nofollow = true
			case "none":
				noindex, nofollow = true, true
			}
		}
	}
	if p != nil {
		apply(p.Meta["robots"])
		apply(p.Meta[RobotsAgent])
	}
	for _, v := range in.Header.Values("X-Robots-Tag") {
		// "googlebot: noindex, nofollow" addresses one agent; a value
		// may also carry several: "airlock: noindex, otherbot: nofollow".
		agent := ""
		for _, part := range strings.Split(v, ",") {
			part = strings.TrimSpace(part)
			if i := strings.Index(part, ":"); i > 0 && !strings.ContainsAny(part[:i], " ") && !isDirective(part[:i]) {
				agent = strings.ToLower(part[:i])
				part = strings.TrimSpace(part[i+1:])
			}
			if agent == "" || agent == RobotsAgent {
				apply(part)
			}
		}
	}
	return noindex, nofollow
}

// isDirective tells "unavailable_after: date" and "max-snippet: 20" apart
// from "googlebot: noindex".
func isDirective(s string) bool {
	switch strings.ToLower(s) {
	case "unavailable_after", "max-snippet", "max-image-preview", "max-video-preview":
		return true
	}
	return false
}
