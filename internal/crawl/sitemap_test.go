package crawl

import (
	"bytes"
	"compress/gzip"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseSitemap(t *testing.T) {
	tests := []struct {
		name  string
		body  string
		limit int
		want  []string
		index bool
	}{
		{
			name:  "urlset",
			body:  `<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><url><loc> http://a.test/1 </loc></url><url><loc>http://a.test/2?x=1&amp;y=2</loc><priority>1</priority></url></urlset>`,
			limit: 10, want: []string{"http://a.test/1", "http://a.test/2?x=1&y=2"},
		},
		{
			name:  "index",
			body:  `<sitemapindex><sitemap><loc>http://a.test/s1.xml</loc></sitemap><sitemap><loc>http://a.test/s2.xml</loc></sitemap></sitemapindex>`,
			limit: 10, want: []string{"http://a.test/s1.xml", "http://a.test/s2.xml"}, index: true,
		},
		{
			name:  "limit",
			body:  `<urlset><url><loc>http://a.test/1</loc></url><url><loc>http://a.test/2</loc></url><url><loc>http://a.test/3</loc></url></urlset>`,
			limit: 2, want: []string{"http://a.test/1", "http://a.test/2"},
		},
		{
			name:  "text",
			body:  "\xef\xbb\xbfhttp://a.test/1\n\nnot a url\r\nhttps://a.test/2\n",
			limit: 10, want: []string{"http://a.test/1", "https://a.test/2"},
		},
		{
			name:  "damaged after some urls",
			body:  `<urlset><url><loc>http://a.test/1</loc></url><url><loc>http://a.test/2</loc></url></ur`,
			limit: 10, want: []string{"http://a.test/1", "http://a.test/2"},
		},
		{name: "empty", body: "", limit: 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, gz := range []bool{false, true} {
				body := []byte(tt.body)
				if gz {
					var b bytes.Buffer
					w := gzip.NewWriter(&b)
					w.Write(body)
					w.Close()
					body = b.Bytes()
				}
				got, index, err := parseSitemap(body, tt.limit)
				if err != nil {
					t.Fatalf("gzip %v: %v", gz, err)
				}
				if diff := cmp.Diff(tt.want, got); diff != "" || index != tt.index {
					t.Errorf("gzip %v: index %v (want %v), locs (-want +got):\n%s", gz, index, tt.index, diff)
				}
			}
		})
	}
}

func TestParseSitemapBomb(t *testing.T) {
	t.Parallel()
	// A smaller cap than maxSitemapBytes, so that crossing it costs 2 MB
	// of decoding rather than 50 (the hostile suite's sitemap_gzip_bomb
	// crosses the default cap through a whole crawl).
	const maxBytes = 1 << 20
	bomb := func(runs int) []byte {
		var b bytes.Buffer
		w := gzip.NewWriter(&b)
		w.Write([]byte("<urlset>"))
		// Runs of 64 KiB between tags: the size cap trips, not the token
		// cap. The one URL comes last (a sitemap that gave URLs before it
		// broke keeps them).
		chunk := []byte("<x/>" + strings.Repeat(" ", 64<<10-4))
		for range runs {
			w.Write(chunk)
		}
		w.Write([]byte("<url><loc>http://a.example/</loc></url></urlset>"))
		w.Close()
		return b.Bytes()
	}
	b := bomb(2 * maxBytes / (64 << 10))
	if len(b) > maxBytes/16 {
		t.Fatalf("bomb is %d bytes compressed", len(b))
	}
	if _, _, err := parseSitemapMax(b, 10, maxBytes); !errors.Is(err, errSitemapTooLarge) {
		t.Errorf("parseSitemapMax(2 MB of gzip, cap 1 MB) error = %v, want errSitemapTooLarge", err)
	}
	// Just under the cap it parses: the cap, not something else, refused
	// the bomb.
	if locs, _, err := parseSitemapMax(bomb(maxBytes/(64<<10)-1), 10, maxBytes); err != nil || len(locs) != 1 {
		t.Errorf("a sitemap just under the cap: locs %q, error %v; want one URL, no error", locs, err)
	}
	if maxSitemapBytes != 50<<20 {
		t.Errorf("maxSitemapBytes = %d, want the protocol's 50 MB", maxSitemapBytes)
	}
}

// TestParseSitemapLongToken: one run of text or one tag longer than
// maxSitemapToken is refused, plain or gzipped, before the XML decoder
// buffers it whole (a 50 MB run of whitespace cost the crawl several times
// 50 MB).
func TestParseSitemapLongToken(t *testing.T) {
	long := strings.Repeat(" ", maxSitemapToken+1)
	for name, body := range map[string]string{
		"text":      "<urlset><url><loc>" + long + "http://a.example/</loc></url></urlset>",
		"attribute": `<urlset a="` + long + `"><url><loc>http://a.example/</loc></url></urlset>`,
	} {
		var gz bytes.Buffer
		w := gzip.NewWriter(&gz)
		w.Write([]byte(body))
		w.Close()
		for kind, b := range map[string][]byte{"plain": []byte(body), "gzip": gz.Bytes()} {
			if _, _, err := parseSitemap(b, 10); !errors.Is(err, errSitemapToken) {
				t.Errorf("%s, %s: error = %v, want errSitemapToken", name, kind, err)
			}
		}
	}
	// A run of exactly maxSitemapToken bytes is fine.
	ok := "<urlset><url><loc>http://a.example/" + strings.Repeat("a", maxSitemapToken-len("http://a.example/")) + "</loc></url></urlset>"
	if _, _, err := parseSitemap([]byte(ok), 10); err != nil {
		t.Errorf("a %d-byte run: %v", maxSitemapToken, err)
	}
}
