package extract

import (
	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/crawl/robotstag"
)

// RobotsAgent is the product token whose agent-specific robots directives
// apply to airlock (<meta name="airlock">, "X-Robots-Tag: airlock: ...").
const RobotsAgent = robotstag.Agent

// Robots reports the indexing directives of a page: <meta name="robots">
// and <meta name="airlock"> (as collected in p.Meta by Extract) and the
// X-Robots-Tag headers of in.Header, including those addressed to
// "airlock:" and ignoring those addressed to other agents ("googlebot:
// noindex"). "none" means both. A crawler honours noindex by not emitting
// the page and nofollow by not following its links. p may be nil (headers
// only). The parser is robotstag's, which the crawler uses too.
func Robots(in Input, p *airlock.Page) (noindex, nofollow bool) {
	noindex, nofollow = robotstag.Header(in.Header.Values("X-Robots-Tag"))
	if p != nil {
		for _, name := range []string{"robots", RobotsAgent} {
			ni, nf := robotstag.Directives(p.Meta[name])
			noindex, nofollow = noindex || ni, nofollow || nf
		}
	}
	return noindex, nofollow
}
