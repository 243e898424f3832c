// Package extract owns HTML → Page: it turns a fetched response body into
// an airlock.Page (main content as text and Markdown, metadata, headings,
// links, tables) without any network access. It never fetches: relative
// URLs are resolved against Input.URL, nothing is downloaded.
//
// HTML goes through charset detection (byte order mark, Content-Type,
// <meta charset>) to UTF-8, bot-wall detection, metadata (goquery: title,
// OpenGraph, Twitter cards, JSON-LD, <html lang>) and main-content
// extraction: our own density extractor (density.go: text blocks scored by
// length, link density and furniture marks, the maximum-sum region kept)
// merged with readability (readeck's port of Readability.js), trimmed of
// trailing blocks the two do not agree on, and the readable body text
// (of <main> when the page has one) when the main content is
// under airlock.MinMainContent characters. Plain text, JSON and XML pass through; PDF text is read in
// a child process killed at its deadline; other types give metadata only.
//
// Usage:
//
//	p, err := extract.Extract(ctx, extract.Input{
//		URL:         resp.Request.URL.String(),
//		Body:        body,
//		ContentType: resp.Header.Get("Content-Type"),
//		Header:      resp.Header,
//	}, extract.Options{})
//	var wall *extract.BotWallError
//	if errors.As(err, &wall) {
//		// a captcha or challenge page, not content
//	}
//	noindex, nofollow := extract.Robots(in, p)
//
// The Markdown is written by the package's own converter (markdown.go,
// mdtable.go): headings, nested and numbered lists, fenced code with the
// language the page names, GitHub tables (cell by cell when a table
// cannot be one), block quotes, links and images, with text that would
// read as markup escaped; docs/mcp.md describes it.
//
// CPU-heavy work is bounded: input size caps, a pool of GOMAXPROCS
// concurrent extractions, and the PDF parser in its own process. A
// document of more than 60,000 elements skips the content extractors and
// the Markdown converter (its Markdown is its readable text), and at most
// 40,000 anchors are examined for links; even so a 10 MiB page of a
// million links peaks near 500 MB, mostly the HTML tree itself
// (internal/hostile measures it).
package extract
