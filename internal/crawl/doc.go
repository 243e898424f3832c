// Package crawl owns autonomous crawling: the frontier and the set of URLs
// already seen, robots.txt (RFC 9309, through jimsmart/grobotstxt),
// politeness (per-origin concurrency and Crawl-delay), sitemap seeding and
// URL normalisation. It reaches the network only through the airlock.Doer
// it is given and turns responses into pages only through the PageFunc it
// is given, so it depends on neither egress nor the extractor.
//
// A crawl's state sits behind two small interfaces, Frontier and Seen, with
// in-memory implementations here; a shared store (Redis) implements the
// same interfaces and passes the same conformance suite (package
// crawltest). Memory is bounded: pages stream out through the emit
// callback and are not kept, and only the seen set (a 64-bit hash per URL)
// and the frontier's waiting URLs (front-coded) grow with the size of the
// crawl, by 11 to 21 bytes a URL met and about 20 to 30 a URL waiting.
//
// Usage:
//
//	sum, err := crawl.Run(ctx, crawl.Config{
//		Doer:      doer, // bound to the caller's principal and policy
//		Page:      extractPage,
//		UserAgent: crawl.UserAgent(version),
//	}, airlock.CrawlRequest{Seed: "https://example.com/", MaxPages: 100},
//		func(p *airlock.Page) error { return enc.Encode(p) },
//		func(p airlock.CrawlProgress) { log.Printf("%d done", p.Done) })
package crawl
