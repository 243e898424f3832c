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
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	w.Write([]byte("<urlset>"))
	// Runs of 64 KiB between tags: the size cap trips, not the token cap.
	chunk := []byte(strings.Repeat("<x/>"+strings.Repeat(" ", 64<<10-4), 16))
	for range 52 {
		w.Write(chunk)
	}
	for range 51 {
		w.Write(chunk)
	}
	w.Close()
	if b.Len() > 1<<20 {
		t.Fatalf("bomb is %d bytes compressed", b.Len())
	}
	if _, _, err := parseSitemap(b.Bytes(), 10); !errors.Is(err, errSitemapTooLarge) {
		t.Errorf("parseSitemap(51 MB of gzip) error = %v, want errSitemapTooLarge", err)
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
