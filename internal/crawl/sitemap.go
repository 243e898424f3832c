package crawl

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Sitemap limits (sitemaps.org protocol).
const (
	// MaxSitemaps is how many sitemap files one crawl fetches: those of
	// robots.txt and /sitemap.xml, and the children of a sitemap index
	// (one level: an index inside an index is not followed).
	MaxSitemaps = 10
	// MaxSitemapURLs is how many URLs one crawl takes from its sitemaps.
	MaxSitemapURLs = 50000
	// maxSitemapBytes is the protocol's cap on an uncompressed sitemap.
	maxSitemapBytes = 50 << 20
	// maxSitemapToken caps one run of bytes between markup delimiters (a
	// text or a tag): encoding/xml buffers a token whole, and copies it,
	// so a sitemap of one 50 MB run of whitespace cost several times 50 MB.
	// A <loc> is at most 2,048 characters by the protocol.
	maxSitemapToken = 256 << 10
)

var (
	errSitemapTooLarge = errors.New("crawl: sitemap larger than 50 MB uncompressed")
	errSitemapToken    = errors.New("crawl: sitemap text or tag longer than 256 KiB")
)

// parseSitemap reads a sitemap (<urlset>), a sitemap index
// (<sitemapindex>) or a plain-text sitemap (one URL a line), gzipped or
// not, and returns the <loc> values: page URLs for a urlset, sitemap URLs
// for an index. It stops after limit URLs.
func parseSitemap(body []byte, limit int) (locs []string, index bool, err error) {
	return parseSitemapMax(body, limit, maxSitemapBytes)
}

// parseSitemapMax is parseSitemap with maxBytes in place of
// maxSitemapBytes (tests cross a smaller cap).
func parseSitemapMax(body []byte, limit int, maxBytes int64) (locs []string, index bool, err error) {
	var r io.Reader = bytes.NewReader(body)
	if len(body) >= 2 && body[0] == 0x1f && body[1] == 0x8b {
		zr, err := gzip.NewReader(r)
		if err != nil {
			return nil, false, fmt.Errorf("sitemap: %w", err)
		}
		defer zr.Close()
		r = &capReader{r: zr, n: maxBytes}
	}
	br := bufio.NewReader(r)
	if first, err := peekNonSpace(br); err != nil || first != '<' {
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, false, err
		}
		return parseTextSitemap(br, limit)
	}
	dec := xml.NewDecoder(&tokenCapReader{r: br})
	dec.Strict = false
	var root string
	inLoc := false
	var loc strings.Builder
	for len(locs) < limit {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if len(locs) > 0 { // keep what a damaged sitemap gave
				break
			}
			return nil, false, fmt.Errorf("sitemap: %w", err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = t.Name.Local
			}
			if t.Name.Local == "loc" {
				inLoc = true
				loc.Reset()
			}
		case xml.CharData:
			if inLoc && loc.Len() < 8192 {
				loc.Write(t)
			}
		case xml.EndElement:
			if t.Name.Local == "loc" && inLoc {
				inLoc = false
				if s := strings.TrimSpace(loc.String()); s != "" {
					locs = append(locs, s)
				}
			}
		}
	}
	return locs, root == "sitemapindex", nil
}

func peekNonSpace(br *bufio.Reader) (byte, error) {
	for {
		b, err := br.Peek(1)
		if err != nil {
			return 0, err
		}
		switch b[0] {
		case ' ', '\t', '\r', '\n', 0xef, 0xbb, 0xbf: // whitespace and a UTF-8 BOM
			br.Discard(1)
		default:
			return b[0], nil
		}
	}
}

func parseTextSitemap(br *bufio.Reader, limit int) ([]string, bool, error) {
	var locs []string
	sc := bufio.NewScanner(br)
	sc.Buffer(make([]byte, 0, 4096), 8192)
	for sc.Scan() && len(locs) < limit {
		if s := strings.TrimSpace(sc.Text()); strings.HasPrefix(s, "http://") || strings.HasPrefix(s, "https://") {
			locs = append(locs, s)
		}
	}
	if err := sc.Err(); err != nil && len(locs) == 0 {
		return nil, false, fmt.Errorf("sitemap: %w", err)
	}
	return locs, false, nil
}

// capReader fails once more than n bytes were read (a decompression bomb
// is an error, not a truncation).
type capReader struct {
	r io.Reader
	n int64
}

func (c *capReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n -= int64(n)
	if c.n < 0 {
		return n, errSitemapTooLarge
	}
	return n, err
}

// tokenCapReader fails once more than maxSitemapToken bytes come without a
// '<' or '>' among them.
type tokenCapReader struct {
	r   io.Reader
	run int
}

func (c *tokenCapReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	for i := 0; i < n; {
		j := bytes.IndexAny(p[i:n], "<>")
		if j < 0 {
			j = n - i
		}
		if c.run+j > maxSitemapToken {
			return i + maxSitemapToken - c.run, errSitemapToken
		}
		c.run += j
		i += j
		if i < n { // a delimiter
			c.run = 0
			i++
		}
	}
	return n, err
}
