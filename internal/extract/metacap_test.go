package extract

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// TestMetaMapCap: one <meta> naming thousands of keys (property="k0 k1
// ...") adds at most maxMetaEntries keys to Page.Meta, and a key longer
// than maxMetaKey is not one (each would carry the tag's content, up to
// maxMetaValue bytes).
func TestMetaMapCap(t *testing.T) {
	t.Parallel()
	var keys strings.Builder
	for i := range 9000 {
		fmt.Fprintf(&keys, "k%d ", i)
	}
	long := strings.Repeat("x", 60000)
	content := strings.Repeat("v", 4000)
	page := `<html><head><title>T</title><meta property="og:title" content="Headline here">` +
		`<meta property="` + keys.String() + `" content="` + content + `">` +
		`<meta name="` + long[:1000] + `" content="` + content + `">` +
		`<meta itemprop="` + long + ` ok" content="` + content + `">` +
		`</head><body><p>` + para(1) + `</p></body></html>`
	p, err := Extract(context.Background(), Input{URL: "https://example.com/", Body: []byte(page)}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Meta) > maxMetaEntries {
		t.Errorf("Meta has %d keys, want at most %d", len(p.Meta), maxMetaEntries)
	}
	size := 0
	for k, v := range p.Meta {
		if len(k) > maxMetaKey {
			t.Errorf("Meta key of %d bytes, want at most %d", len(k), maxMetaKey)
		}
		if len(v) > maxMetaValue {
			t.Errorf("Meta value of %d bytes, want at most %d", len(v), maxMetaValue)
		}
		size += len(k) + len(v)
	}
	if p.Meta["og:title"] != "Headline here" {
		t.Errorf("og:title = %q, want the first tag's", p.Meta["og:title"])
	}
	if size > maxMetaEntries*(maxMetaKey+maxMetaValue) {
		t.Errorf("Meta holds %d bytes", size)
	}
}
