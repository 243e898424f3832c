package extract

import (
	"bytes"
	"context"
	"regexp"
	"strings"

	"github.com/JohannesKaufmann/html-to-markdown/v2/converter"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/base"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/commonmark"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/strikethrough"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/table"
	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// mdConverter is shared: a Converter keeps its per-call state in the
// context of each call.
var mdConverter = converter.NewConverter(
	converter.WithPlugins(
		base.NewBasePlugin(),
		commonmark.NewCommonmarkPlugin(),
		strikethrough.NewStrikethroughPlugin(),
		table.NewTablePlugin(
			table.WithSpanCellBehavior(table.SpanBehaviorEmpty),
			// A <br> or a paragraph inside a cell becomes <br> in the
			// cell instead of dropping the table to plain text.
			table.WithNewlineBehavior(table.NewlineBehaviorPreserve),
			table.WithHeaderPromotion(true),
			table.WithSkipEmptyRows(true),
			table.WithCellPaddingBehavior(table.CellPaddingBehaviorMinimal),
		),
	),
)

// cellBreaks matches what the converter makes of a hard line break inside
// a table cell: the Markdown hard break (two spaces or a backslash before
// the newline) turned into "<br />".
var cellBreaks = regexp.MustCompile(`(?:  |\\)?<br />`)

// toMarkdown renders the content tree as GitHub-flavoured Markdown. Links
// and images are resolved against base. It changes n.
func toMarkdown(ctx context.Context, n *html.Node, base string) (md string, err error) {
	defer func() {
		if v := recover(); v != nil {
			md, err = "", errPanic{v}
		}
	}()
	prepareForMarkdown(n)
	out, err := mdConverter.ConvertNode(n, converter.WithDomain(base), converter.WithContext(ctx))
	if err != nil {
		return "", err
	}
	out = cellBreaks.ReplaceAll(out, []byte("<br>"))
	// The converter separates adjacent lists with an HTML comment.
	out = bytes.ReplaceAll(out, []byte("\n<!--THE END-->\n"), []byte("\n"))
	return string(bytes.TrimSpace(out)), nil
}

type errPanic struct{ v any }

func (e errPanic) Error() string { return "panic in converter" }

// prepareForMarkdown fixes what extractors leave that the converter
// misreads: trees built without atoms, <br>s inside table cells, code
// blocks whose language sits on a class.
func prepareForMarkdown(root *html.Node) {
	walkElements(root, func(n *html.Node) bool {
		if n.DataAtom == 0 {
			n.DataAtom = atom.Lookup([]byte(n.Data))
		}
		mergeTextNodes(n)
		return true
	})
}

// mergeTextNodes joins runs of adjacent text children of n (extractors
// that strip tags leave them), in linear time: the converter joins them
// too, quadratically.
func mergeTextNodes(n *html.Node) {
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		if c.Type != html.TextNode || c.NextSibling == nil || c.NextSibling.Type != html.TextNode {
			continue
		}
		var b strings.Builder
		b.WriteString(c.Data)
		for d := c.NextSibling; d != nil && d.Type == html.TextNode; d = c.NextSibling {
			b.WriteString(d.Data)
			n.RemoveChild(d)
		}
		c.Data = b.String()
	}
}

// mdTrim removes the blank-line runs the converter leaves around removed
// elements.
func mdTrim(s string) string {
	for strings.Contains(s, "\n\n\n") {
		s = strings.ReplaceAll(s, "\n\n\n", "\n\n")
	}
	return s
}
