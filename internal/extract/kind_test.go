package extract

import (
	"fmt"
	"strings"
	"testing"
)

// listing is a page of n teaser items, each a linked headline and a line
// of summary.
func listing(n int) string {
	var b strings.Builder
	b.WriteString(`<nav><a href="/">Home</a> <a href="/news">News</a></nav><h1>Latest news</h1><div class="river">`)
	for i := range n {
		fmt.Fprintf(&b, `<div class="teaser"><h3><a href="/story/%d">Story number %d makes the headlines today</a></h3>
			<p>A short summary of story %d, in one line.</p></div>`, i, i, i)
	}
	b.WriteString(`</div>`)
	return b.String()
}

func TestPageKind(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, head, body, want string
	}{
		{"article by its prose", ``, `<h1>Headline</h1>` + article(8), KindArticle},
		{"article with a related list", ``, `<h1>Headline</h1>` + article(8) + listing(10), KindArticle},
		{"article declared in JSON-LD, short", `<script type="application/ld+json">{"@type":"NewsArticle","headline":"H"}</script>`,
			`<h1>H</h1><p>Two short paragraphs of a brief.</p><p>That is all there is.</p>`, KindArticle},
		{"og:type article", `<meta property="og:type" content="article">`, `<h1>H</h1><p>A brief.</p>`, KindArticle},
		{"listing of teasers", ``, listing(12), KindListing},
		{"short post beside a sidebar of links", ``, `<div id="post"><h1>A short post</h1>` + article(3) + `</div><div id="side"><ul>` +
			strings.Repeat(`<li><a href="/p">An older post with a long enough title</a></li>`, 12) + `</ul></div>`, KindArticle},
		{"short dated post", `<meta property="article:published_time" content="2024-03-05">`, `<h1>Short</h1>` + article(2) + listing(3), KindArticle},
		{"listing with an intro paragraph", ``, `<p>` + strings.Repeat("An introduction to this section of the site. ", 10) + `</p>` + listing(20), KindListing},
		{"listing declared as CollectionPage", `<script type="application/ld+json">{"@type":"CollectionPage"}</script>`, listing(3), KindListing},
		{"article declared but a river of teasers", `<meta property="og:type" content="article">`, listing(30), KindListing},
		{"search results in a list", ``, `<form><input name="q"></form><ol>` + strings.Repeat(`<li class="result"><a href="/r">A result title of some length</a> <cite>example.com</cite></li>`, 10) + `</ol>`, KindListing},
		{"menu is not a listing", ``, `<ul>` + strings.Repeat(`<li><a href="/x">Menu</a></li>`, 20) + `</ul><p>Hello.</p>`, KindOther},
		{"app shell", ``, `<div id="root"></div><noscript>You need to enable JavaScript to run this app.</noscript>`, KindOther},
		{"login form", ``, `<h1>Sign in</h1><form><input name="user"><input type="password" name="pw"><button>Sign in</button></form>`, KindOther},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := pageOf(t, "https://example.com/a", "<html><head><title>T</title>"+tt.head+"</head><body>"+tt.body+"</body></html>")
			if p.Kind != tt.want {
				t.Errorf("Kind = %q, want %q", p.Kind, tt.want)
			}
		})
	}
}

// TestPageKindNotHTML: kinds are for HTML pages only.
func TestPageKindNotHTML(t *testing.T) {
	t.Parallel()
	p, err := Extract(t.Context(), Input{Body: []byte(`{"a":1}`), ContentType: "application/json"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Kind != "" {
		t.Errorf("Kind = %q, want empty for JSON", p.Kind)
	}
}

// TestCorpusKind: the corpus pages are articles (Readability's test
// pages); a few are not (a listing of links, a short page), so the floor
// is a share.
func TestCorpusKind(t *testing.T) {
	t.Parallel()
	cases, pages := extractCorpus(t)
	counts := map[string]int{}
	for i, p := range pages {
		counts[p.Kind]++
		if p.Kind != KindArticle {
			t.Logf("%s: %s", cases[i].name, p.Kind)
		}
	}
	share := float64(counts[KindArticle]) / float64(len(pages))
	t.Logf("kinds: %v (article %.3f)", counts, share)
	if share < corpusArticleFloor {
		t.Errorf("article share %.3f is below the floor %.2f", share, corpusArticleFloor)
	}
}

const corpusArticleFloor = 0.92
