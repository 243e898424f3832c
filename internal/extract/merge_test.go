package extract

import (
	"strings"
	"testing"

	"golang.org/x/net/html"
)

// bodyOf parses src and returns its <body>.
func bodyOf(t *testing.T, src string) (doc, body *html.Node) {
	t.Helper()
	doc, err := parseHTML([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	walkElements(doc, func(n *html.Node) bool {
		if n.Data == "body" {
			body = n
		}
		return body == nil
	})
	return doc, body
}

const (
	gapA = "The council voted on Tuesday to close the old bridge to all traffic from next month."
	gapB = "Engineers found cracks in two of the supports during an inspection carried out last winter."
	gapC = "A replacement is expected to take three years and cost far more than first planned."
	gapD = "Residents say the detour will add half an hour to their daily journeys into the town centre."
)

func TestFillGaps(t *testing.T) {
	t.Parallel()
	page := `<body><ul class="crumbs"><li><a href="/">Home</a></li><li>News about the old bridge and the vote taken on Tuesday evening</li></ul>
<p>` + gapD + `</p><p>` + gapA + `</p><h2>What went wrong</h2><p>` + gapB + `</p>
<figure><img src="x.jpg"><figcaption>The old bridge seen from the river bank on a grey morning last week.</figcaption></figure>
<h2>Lost heading</h2><p>Short.</p><p>` + gapC + `</p><p>Read more about the bridge and the people who cross it every single day.</p></body>`
	doc, body := bodyOf(t, page)
	// readability's output: the whole body; the density output: A and C only.
	rNode := cloneFiltered(body, -1)
	_, tRoot := bodyOf(t, `<body><p>`+gapA+`</p><p>`+gapC+`</p></body>`)
	fillGaps(tRoot, rNode, nil, newSourceIndex(doc), nil)
	// The lede D goes before A, the heading and B between A and C; the
	// breadcrumb list, the caption, the heading over a short line and the
	// trailing paragraph do not.
	want := strings.Join([]string{gapD, gapA, "What went wrong", gapB, gapC}, "\n")
	if got := nodeText(tRoot); got != want {
		t.Errorf("after fillGaps:\n%s\nwant\n%s", got, want)
	}
}

func TestFillGapsNeedsAgreement(t *testing.T) {
	t.Parallel()
	other := "An unrelated story about a football match that ended in a draw after extra time was played."
	doc, body := bodyOf(t, `<body><p>`+gapA+`</p><p>`+gapB+`</p><p>`+gapC+`</p><p>`+gapD+`</p></body>`)
	_, tRoot := bodyOf(t, `<body><p>`+other+`</p><p>`+gapD+`</p><p>`+other+other+other+`</p></body>`)
	before := nodeText(tRoot)
	fillGaps(tRoot, cloneFiltered(body, -1), nil, newSourceIndex(doc), nil)
	if got := nodeText(tRoot); got != before {
		t.Errorf("fillGaps changed an output the extractors disagree on:\n%s", got)
	}
}

func TestMarkWords(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in    string
		want  []string
		share bool
	}{
		{"article-share-bar", []string{"article", "share", "bar"}, true},
		{"relatedStories", []string{"related", "stories"}, false},
		{"post_shared2 x", []string{"post", "shared", "x"}, false},
		{"SocialLinks", []string{"social", "links"}, false},
		{"", nil, false},
	}
	for _, tt := range tests {
		got := markWords(tt.in)
		if strings.Join(got, ",") != strings.Join(tt.want, ",") {
			t.Errorf("markWords(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if hasMark(tt.in, markSet("share")) != tt.share {
			t.Errorf("hasMark(%q, share) = %v, want %v", tt.in, !tt.share, tt.share)
		}
	}
	if !hasMark("wp-caption-text", captionMarks) || !hasMark("imageCaption", captionMarks) || !hasMark("thumbcaption", captionMarks) {
		t.Error("caption classes not recognised")
	}
}

func TestDropMarked(t *testing.T) {
	t.Parallel()
	share := "Share this story with your friends on every network you use today."
	comments := "Join the conversation: there are 941 comments on this story so far."
	doc, body := bodyOf(t, `<body><div class="story"><p>`+gapA+`</p><p>`+gapB+`</p></div>
<div class="share-tools"><p>`+share+`</p></div><div id="comments"><p>`+comments+`</p></div>
<div id="sharing-with-a-single-developer"><p>`+gapC+`</p></div></body>`)
	root := cloneFiltered(body, -1)
	// readability has the article, without the furniture and without C.
	dropMarked(root, newShingleSet(gapA+"\n"+gapB), newSourceIndex(doc), nil)
	want := strings.Join([]string{gapA, gapB, gapC}, "\n")
	if got := nodeText(root); got != want {
		t.Errorf("after dropMarked:\n%s\nwant\n%s", got, want)
	}
}
