package extract

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/PuerkitoBio/goquery"
	"golang.org/x/net/html"

	"github.com/airlockhq/airlock"
)

// metadataDocs are the HTML documents of testdata, with hand-written
// ones where the attributes hide: deep, in a <template>, in SVG, after the
// body. Parsed once per test binary (parsing them is most of what the
// tests using them cost under the race detector); the trees are shared
// and read-only.
func metadataDocs(t *testing.T) map[string]*html.Node {
	t.Helper()
	metadataDocsOnce.Do(func() { metadataDocsParsed, metadataDocsErr = loadMetadataDocs() })
	if metadataDocsErr != nil {
		t.Fatal(metadataDocsErr)
	}
	return metadataDocsParsed
}

var (
	metadataDocsOnce   sync.Once
	metadataDocsParsed map[string]*html.Node
	metadataDocsErr    error
)

func loadMetadataDocs() (map[string]*html.Node, error) {
	docs := map[string][]byte{
		"deep itemprop":    []byte("<html><body>" + strings.Repeat("<div>", 600) + `<span itemprop="headline">Deep</span>` + strings.Repeat("</div>", 600) + "</body></html>"),
		"template rel":     []byte(`<html><body><template><a rel="author" href="/a">Ann</a></template><p>x</p></body></html>`),
		"svg script type":  []byte(`<html><body><svg><script type="application/ld+json">{"@type":"NewsArticle","headline":"In SVG"}</script></svg></body></html>`),
		"after the body":   []byte(`<html><body><p>x</p></body></html><link rel="canonical" href="/c">`),
		"ld+json at end":   []byte(`<p>x<script type="application/ld+json">{"@type":"NewsArticle","headline":"H","author":{"name":"Bo"}}</script>`),
		"nothing":          []byte(`<html><head><title>Page 1</title></head><body><h1>Page 1</h1><p><a href="/p/2">two</a></p></body></html>`),
		"empty":            nil,
		"itemprop no rel":  []byte(`<div itemscope><meta itemprop="author" content="Cy"><h1 itemprop="headline">T</h1></div>`),
		"script type only": []byte(`<script type="text/javascript">var a</script><p>x</p>`),
	}
	for _, glob := range []string{"testdata/readability/*/source.html", "testdata/short/*.html", "testdata/botwall/*.html"} {
		files, err := filepath.Glob(glob)
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				return nil, err
			}
			docs[f] = b
		}
	}
	if len(docs) < 100 {
		return nil, fmt.Errorf("%d documents: testdata is missing", len(docs))
	}
	parsed := make(map[string]*html.Node, len(docs))
	for name, body := range docs {
		doc, err := parseHTML(body)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", name, err)
		}
		parsed[name] = doc
	}
	return parsed, nil
}

// scanAttrs agrees with the selectors it stands in for.
func TestScanAttrs(t *testing.T) {
	t.Parallel()
	for name, doc := range metadataDocs(t) {
		d := goquery.NewDocumentFromNode(doc)
		want := docAttrs{
			itemprop: d.Find("[itemprop]").Length() > 0,
			rel:      d.Find("[rel]").Length() > 0,
			script:   d.Find("script[type]").Length() > 0,
		}
		if got := scanAttrs(doc); got != want {
			t.Errorf("%s: scanAttrs = %+v, want %+v", name, got, want)
		}
	}
}

// Skipping the selectors that cannot match changes no metadata.
func TestMetadataSkipsNothingThatMatches(t *testing.T) {
	t.Parallel()
	for name, doc := range metadataDocs(t) {
		var got, want airlock.Page
		metadata(doc, nil, &got)
		metadataWith(doc, nil, &want, docAttrs{itemprop: true, rel: true, script: true})
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: metadata differs when selectors are skipped:\ngot  %+v\nwant %+v", name, got, want)
		}
	}
}

// find with its compiled selectors selects what goquery's Find does,
// called again (from the cache) and for a selector that does not parse.
func TestFindCompiledOnce(t *testing.T) {
	t.Parallel()
	sels := []string{"html", "title", "h1", "meta", "h1, h2", `link[rel~="canonical"][href]`, `script[type="application/ld+json"]`,
		`[itemprop~="author"], a[rel~="author"], [rel~="author"]`, `[itemprop~="headline"]`, "p:nth-child(2)", "a[", ""}
	for name, doc := range metadataDocs(t) {
		d := goquery.NewDocumentFromNode(doc)
		for _, sel := range sels {
			for range 2 {
				if got, want := find(d.Selection, sel).Nodes, d.Find(sel).Nodes; !reflect.DeepEqual(got, want) {
					t.Fatalf("%s: find(%q) selected %d nodes, Find %d", name, sel, len(got), len(want))
				}
			}
		}
	}
}
