package extract

import (
	"maps"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/net/html"
)

// longText only ever says "too long" of a document whose collected text
// is too long, so the rules see every page they saw before.
func TestLongTextIsALowerBound(t *testing.T) {
	t.Parallel()
	docs := maps.Clone(metadataDocs(t)) // shared: add to a copy
	wall := `<html><head><title>Just a moment...</title></head><body><div id="cf-wrapper"><p>`
	for _, n := range []int{0, 100, 1400, 1490, 1500, 1501, 1510, 1600, 3000} {
		docs["ascii "+strconv.Itoa(n)] = mustParse(t, wall+strings.Repeat("a", n)+`</p><div class="cf-error-details">you have been blocked</div></div></body></html>`)
		docs["spaced "+strconv.Itoa(n)] = mustParse(t, wall+strings.Repeat("a \n\t", n)+`</p><script>var _cf_chl_opt={}</script></div></body></html>`)
		docs["non-ascii "+strconv.Itoa(n)] = mustParse(t, wall+strings.Repeat("é\u00a0", n)+`</p><div class="cf-error-details">access denied</div></div></body></html>`)
		docs["noscript "+strconv.Itoa(n)] = mustParse(t, wall+`</p><noscript>`+strings.Repeat("enable javascript ", n/10)+`</noscript>`+strings.Repeat("b", n)+`<div class="g-recaptcha"></div></div></body></html>`)
	}
	long := 0
	for name, doc := range docs {
		_, short := collectWallSignals(doc)
		if longText(doc) {
			long++
			if short {
				t.Errorf("%s: longText says long, collectWallSignals short", name)
			}
		}
		if got, want := detectBotWall(doc, nil), wallRulesMatch(doc); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: detectBotWall = %v, the rules alone %v", name, got, want)
		}
	}
	if long < len(docs)/2 {
		t.Errorf("longText ruled out %d of %d documents: the pre-check does nothing", long, len(docs))
	}
}

func mustParse(t *testing.T, s string) *html.Node {
	t.Helper()
	doc, err := parseHTML([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return doc
}
