package mcp

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
	sdkmcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/engine"
	"github.com/airlockhq/airlock/internal/render"
)

// Tool names.
const (
	ToolFetch  = "web_fetch"
	ToolSearch = "web_search"
	ToolCrawl  = "web_crawl"
)

// Defaults and caps of the tools (ARCHITECTURE.md "Defaults"). Lengths are
// in characters (Unicode code points) of the rendered reply.
const (
	DefaultFetchLength = 5000 // web_fetch max_length; at most limits.mcp_max_length (1,000,000), above it refused
	DefaultSearchLimit = 10   // web_search limit; at most limits.search_results (100), above it refused
	DefaultCrawlPages  = 10   // web_crawl max_pages: fewer than the CLI's 25, for an agent's context; at most limits.mcp_crawl_pages (100)
	// CrawlPageBudget is the share of a web_crawl reply that page contents
	// may take; long pages are cut to fair shares of it.
	CrawlPageBudget = 40000
	// MaxCrawlReply caps a whole web_crawl reply; past it the reply is cut.
	MaxCrawlReply = 50000
	// maxSkippedListed is how many skipped URLs a web_crawl reply lists.
	maxSkippedListed = 20
	// maxReplyLine bounds a line about one URL (a skipped URL and why).
	maxReplyLine = 300
)

// Output formats the tools accept.
var toolFormats = []any{"markdown", "md", "text", "org", "json"}

// FetchInput is the input of web_fetch.
type FetchInput struct {
	URL        string `json:"url" jsonschema:"The absolute http or https URL of the page to read."`
	Format     string `json:"format,omitempty" jsonschema:"How to render the page: markdown (the default: the main content with headings, lists, tables and links), text (plain text), org (an Org-mode node with outline and links) or json (every extracted field: title, description, headings, links, text, markdown, tables)."`
	MaxLength  int    `json:"max_length,omitempty" jsonschema:"The most characters to return in this call (default 5000; at most 1000000, or the operator's lower ceiling; a larger value is refused)."`
	StartIndex int    `json:"start_index,omitempty" jsonschema:"The character offset to start from (default 0). When a reply ends with <content truncated: ...>, call again with the same url, format, raw and max_length and the start_index it gives to read the next part."`
	Raw        bool   `json:"raw,omitempty" jsonschema:"Return the response body as it came (HTML, JSON, ...), not extracted; format is then ignored (default false)."`
}

// SearchInput is the input of web_search.
type SearchInput struct {
	Query string `json:"query" jsonschema:"What to search the web for, as you would type it into a search engine."`
	Limit int    `json:"limit,omitempty" jsonschema:"The most results to return (default 10; at most 100, or the operator's lower ceiling; a larger value is refused)."`
}

// CrawlInput is the input of web_crawl.
type CrawlInput struct {
	Seed     string   `json:"seed,omitempty" jsonschema:"A URL to start from: the crawl follows links breadth-first on that host, obeying robots.txt. Give seed or urls, not both."`
	URLs     []string `json:"urls,omitempty" jsonschema:"A list of URLs to fetch concurrently (no link following). Give seed or urls, not both."`
	MaxPages int      `json:"max_pages,omitempty" jsonschema:"Stop after this many pages (default 10; at most 100, or the operator's lower ceiling; a larger value is refused)."`
	Depth    int      `json:"depth,omitempty" jsonschema:"How many links away from the seed to go (default 2; 1 reads the seed and the pages it links to). For the seed alone, set max_pages to 1."`
	Format   string   `json:"format,omitempty" jsonschema:"How to render the pages: markdown (default), text, org or json. Long pages are cut so that the reply stays under 50000 characters; read a cut page whole with web_fetch."`
}

func readOnly(title string) *sdkmcp.ToolAnnotations {
	open := true
	return &sdkmcp.ToolAnnotations{Title: title, ReadOnlyHint: true, OpenWorldHint: &open}
}

// schema infers the input schema of In and lets tune add what tags cannot
// say (defaults, bounds, enumerations).
func schema[In any](tune func(props map[string]*jsonschema.Schema)) *jsonschema.Schema {
	s, err := jsonschema.For[In](nil)
	if err != nil {
		panic(fmt.Sprintf("mcp: schema of %T: %v", *new(In), err))
	}
	notNull(s)
	tune(s.Properties)
	return s
}

// notNull makes the ["null", T] types that jsonschema.For gives slices and
// maps plain T: an agent sends a list or leaves the property out, and
// clients that read only a plain type see what to send.
func notNull(s *jsonschema.Schema) {
	if s == nil {
		return
	}
	if len(s.Types) == 2 && slices.Contains(s.Types, "null") {
		for _, t := range s.Types {
			if t != "null" {
				s.Type, s.Types = t, nil
			}
		}
	}
	for _, p := range s.Properties {
		notNull(p)
	}
	notNull(s.Items)
}

// ceilingMax is the schema maximum of a value under the ceiling name.
func ceilingMax(name string) *float64 {
	if m := engine.CeilingMax(name); m > 0 {
		return ptr(float64(m))
	}
	return nil
}

func addBrowseTools(s *sdkmcp.Server) {
	AddTool(s, &sdkmcp.Tool{
		Name:  ToolFetch,
		Title: "Fetch a web page",
		Description: "Fetch one web page through Airlock's egress policy and return its main content, by default as markdown, " +
			"headed by its title, final URL (after redirects) and a line of what the page is (Kind: article, listing or other) and its author, site, " +
			"publishing date and language when known, or with raw=true the response body as it came. Long pages come in parts of max_length characters: " +
			"a reply that ends with <content truncated: N characters remain; call web_fetch with start_index=K to continue> " +
			"has more, and calling again with start_index=K returns the next part. Refused targets (private addresses, deny lists), " +
			"HTTP errors and bot walls are error results with a code and a reason.",
		Annotations: readOnly("Fetch a web page"),
		InputSchema: schema[FetchInput](func(p map[string]*jsonschema.Schema) {
			p["format"].Enum, p["format"].Default = toolFormats, jsonRaw(`"markdown"`)
			// No schema default: the SDK would fill it in, and a tenant
			// whose ceiling is below it could then never leave it out.
			p["max_length"].Minimum, p["max_length"].Maximum = ptr(1.0), ceilingMax(engine.LimitMCPMaxLength)
			p["start_index"].Minimum, p["start_index"].Default = ptr(0.0), jsonRaw(`0`)
		}),
	}, webFetch)
	AddTool(s, &sdkmcp.Tool{
		Name:  ToolSearch,
		Title: "Search the web",
		Description: "Search the web through Airlock (a configured search API or keyless engines) and return a bulleted list " +
			"of results, each with its title, URL and snippet. Read a result with web_fetch.",
		Annotations: readOnly("Search the web"),
		InputSchema: schema[SearchInput](func(p map[string]*jsonschema.Schema) {
			p["limit"].Minimum, p["limit"].Maximum = ptr(1.0), ceilingMax(engine.LimitSearchResults) // no schema default: see max_length
		}),
	}, webSearch)
	AddTool(s, &sdkmcp.Tool{
		Name:  ToolCrawl,
		Title: "Crawl a site",
		Description: "Crawl a site breadth-first from a seed URL (same host, robots.txt obeyed), or fetch a list of URLs " +
			"concurrently, through Airlock's egress policy, and return the pages rendered as markdown (default), text, org or json, " +
			"followed by the URLs that were skipped and why. The reply stays under 50000 characters: long pages are cut, " +
			"and each cut says how to read that page whole with web_fetch.",
		Annotations: readOnly("Crawl a site"),
		InputSchema: schema[CrawlInput](func(p map[string]*jsonschema.Schema) {
			p["format"].Enum, p["format"].Default = toolFormats, jsonRaw(`"markdown"`)
			p["max_pages"].Minimum, p["max_pages"].Maximum = ptr(1.0), ceilingMax(engine.LimitMCPCrawlPages) // no schema default: see max_length
			p["depth"].Minimum = ptr(1.0)
			p["urls"].Items.Description = "An absolute http or https URL."
		}),
	}, webCrawl)
}

func ptr[T any](v T) *T { return &v }

func jsonRaw(s string) []byte { return []byte(s) }

func invalid(reason airlock.Reason, format string, args ...any) error {
	return airlock.Errorf(airlock.CodeInvalid, reason, format, args...)
}

// toolFormat maps a tool's format argument to a renderer format.
func toolFormat(f string) (string, error) {
	switch f {
	case "", "markdown", "md":
		return render.FormatMarkdown, nil
	case "text", "org", "json":
		return f, nil
	}
	return "", invalid(airlock.ReasonFormat, "format %q: want markdown, text, org or json", f)
}

func formatName(f string) string {
	if f == render.FormatMarkdown {
		return "markdown"
	}
	return f
}

func webFetch(ctx context.Context, en *engine.Engine, p airlock.Principal, in FetchInput) (*sdkmcp.CallToolResult, error) {
	if strings.TrimSpace(in.URL) == "" {
		return nil, invalid(airlock.ReasonURL, "url is required")
	}
	format, err := toolFormat(in.Format)
	if err != nil {
		return nil, err
	}
	maxLen := in.MaxLength
	switch {
	case maxLen < 0:
		return nil, invalid(airlock.ReasonMaxLength, "max_length %d: want a positive number of characters", maxLen)
	case maxLen == 0:
		maxLen = int(min(DefaultFetchLength, en.Ceiling(p, engine.LimitMCPMaxLength)))
	}
	if err := en.CheckLimit(ctx, p, "fetch", engine.LimitMCPMaxLength, "max_length", int64(maxLen)); err != nil {
		return nil, err
	}
	if in.StartIndex < 0 {
		return nil, invalid(airlock.ReasonStartIndex, "start_index %d: want 0 or more", in.StartIndex)
	}
	variant := format
	if in.Raw {
		variant = "raw"
	}
	page, err := en.FetchRendered(ctx, p, airlock.FetchRequest{URL: in.URL, Initiator: airlock.InitiatorModel}, engine.RenderOptions{
		Raw: in.Raw, Variant: variant,
		Render: func(pg *airlock.Page) (string, error) {
			var doc bytes.Buffer
			err := render.Render(&doc, format, pg)
			return doc.String(), err
		},
	})
	if err != nil {
		return nil, err
	}
	content := page.Content
	total := utf8.RuneCountInString(content)
	if in.StartIndex > 0 && in.StartIndex >= total {
		return nil, invalid(airlock.ReasonStartIndex, "start_index %d is past the end of the content (%s characters as %s); nothing more to read",
			in.StartIndex, thousands(total), variantName(variant))
	}
	lo := runeOffset(content, 0, in.StartIndex)
	hi := runeOffset(content, lo, maxLen)
	end := in.StartIndex + utf8.RuneCountInString(content[lo:hi])

	// The rendered page carries its title and URL; a raw body does not, and
	// a later part has neither.
	var b strings.Builder
	if in.Raw {
		fmt.Fprintf(&b, "URL: %s\n", oneLine(page.URL))
		if ct := oneLine(page.ContentType); ct != "" {
			fmt.Fprintf(&b, "Content-Type: %s\n", ct)
		}
	} else if in.StartIndex > 0 {
		fmt.Fprintf(&b, "URL: %s\n", oneLine(page.URL))
	}
	if in.StartIndex > 0 || end < total {
		fmt.Fprintf(&b, "Content: characters %d to %d of %s (%s)\n", in.StartIndex, end, thousands(total), variantName(variant))
	}
	if b.Len() > 0 {
		b.WriteString("\n")
	}
	b.WriteString(content[lo:hi])
	if end < total {
		fmt.Fprintf(&b, "\n\n<content truncated: %s characters remain; call web_fetch with start_index=%d to continue>", thousands(total-end), end)
	}
	res := Text(b.String())
	res.Meta = sdkmcp.Meta{"decision_id": page.DecisionID}
	if page.Cached {
		res.Meta["cache"] = "hit"
	}
	return res, nil
}

func variantName(v string) string {
	if v == "raw" {
		return "the raw body"
	}
	return formatName(v)
}

// runeOffset returns the byte offset n runes after byte offset from in s,
// or len(s).
func runeOffset(s string, from, n int) int {
	i := from
	for ; n > 0 && i < len(s); n-- {
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
	}
	return i
}

func webSearch(ctx context.Context, en *engine.Engine, p airlock.Principal, in SearchInput) (*sdkmcp.CallToolResult, error) {
	if strings.TrimSpace(in.Query) == "" {
		return nil, invalid(airlock.ReasonQuery, "query is required")
	}
	limit := in.Limit
	switch {
	case limit < 0:
		return nil, invalid(airlock.ReasonLimit, "limit %d: want a positive number of results", limit)
	case limit == 0:
		limit = int(min(DefaultSearchLimit, en.Ceiling(p, engine.LimitSearchResults)))
	}
	results, id, err := en.Search(ctx, p, airlock.SearchRequest{Query: in.Query, Limit: limit})
	if err != nil {
		return nil, err
	}
	if len(results) > limit {
		results = results[:limit]
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Search results for %q: %d\n", oneLine(in.Query), len(results))
	if len(results) == 0 {
		b.WriteString("\nNo results.\n")
	}
	for _, r := range results {
		title := oneLine(r.Title)
		if title == "" {
			title = oneLine(r.URL)
		}
		fmt.Fprintf(&b, "\n- %s\n  URL: %s\n", title, oneLine(r.URL))
		if s := oneLine(r.Snippet); s != "" {
			fmt.Fprintf(&b, "  %s\n", s)
		}
	}
	res := Text(b.String())
	res.Meta = sdkmcp.Meta{"decision_id": id}
	return res, nil
}

func webCrawl(ctx context.Context, en *engine.Engine, p airlock.Principal, in CrawlInput) (*sdkmcp.CallToolResult, error) {
	seed := strings.TrimSpace(in.Seed)
	switch {
	case seed != "" && len(in.URLs) > 0:
		return nil, invalid(airlock.ReasonCrawlInput, "give seed or urls, not both")
	case seed == "" && len(in.URLs) == 0:
		return nil, invalid(airlock.ReasonCrawlInput, "seed or urls is required")
	}
	format, err := toolFormat(in.Format)
	if err != nil {
		return nil, err
	}
	maxPages := in.MaxPages
	switch {
	case maxPages < 0:
		return nil, invalid(airlock.ReasonMaxPages, "max_pages %d: want a positive number of pages", maxPages)
	case maxPages == 0:
		maxPages = int(min(DefaultCrawlPages, en.Ceiling(p, engine.LimitMCPCrawlPages), en.Ceiling(p, engine.LimitCrawlMaxPages)))
	}
	if err := en.CheckLimit(ctx, p, "crawl", engine.LimitMCPCrawlPages, "max_pages", int64(maxPages)); err != nil {
		return nil, err
	}
	if in.Depth < 0 {
		return nil, invalid(airlock.ReasonDepth, "depth %d: want 0 or more", in.Depth)
	}
	req := airlock.CrawlRequest{Initiator: airlock.InitiatorModel, Seed: seed, URLs: in.URLs, MaxPages: maxPages, Depth: in.Depth, Extract: airlock.ExtractFull}
	var mu sync.Mutex
	var pages []*airlock.Page
	sum, err := en.Crawl(ctx, p, req, func(pg *airlock.Page) error {
		mu.Lock()
		pages = append(pages, pg)
		mu.Unlock()
		return nil
	}, nil)
	if err != nil {
		return nil, err
	}
	cut := fitPages(pages, format, CrawlPageBudget)
	var doc bytes.Buffer
	if err := render.RenderCrawl(&doc, format, pages, sum); err != nil {
		return nil, err
	}

	var head strings.Builder
	from := seed
	if from == "" {
		from = fmt.Sprintf("%d URLs", len(in.URLs))
	}
	fmt.Fprintf(&head, "Crawled %d pages from %s: %d skipped, %d failed, %s.\n", sum.Pages, clip(oneLine(from), maxReplyLine), len(sum.Skipped), sum.Failed,
		(time.Duration(sum.ElapsedMS) * time.Millisecond).Round(time.Millisecond))
	if sum.Stopped != "" {
		fmt.Fprintf(&head, "Stopped early: %s.\n", sum.Stopped)
	}
	if cut > 0 {
		fmt.Fprintf(&head, "%d long pages were cut to fit the reply; each cut says how to read the page whole.\n", cut)
	}
	head.WriteString("\n")
	var tail strings.Builder
	if len(sum.Skipped) > 0 {
		tail.WriteString("\nSkipped:\n")
		for i, s := range sum.Skipped {
			if i == maxSkippedListed {
				fmt.Fprintf(&tail, "- and %d more\n", len(sum.Skipped)-i)
				break
			}
			line := oneLine(s.URL) + ": " + string(s.Reason)
			if d := oneLine(s.Detail); d != "" {
				line += " (" + d + ")"
			}
			tail.WriteString("- " + clip(line, maxReplyLine) + "\n")
		}
	}
	// The pages get what the head and the skipped list leave of the cap.
	room := MaxCrawlReply - utf8.RuneCountInString(head.String()) - utf8.RuneCountInString(tail.String())
	body := doc.String()
	if n := utf8.RuneCountInString(body); n > room {
		note := func(more int) string {
			return fmt.Sprintf("\n\n<reply truncated: %s more characters not shown; use a smaller max_pages or read pages with web_fetch>\n", thousands(more))
		}
		keep := max(0, room-utf8.RuneCountInString(note(n)))
		body = body[:runeOffset(body, 0, keep)] + note(n-keep)
	}
	var b strings.Builder
	b.WriteString(head.String())
	b.WriteString(body)
	b.WriteString(tail.String())
	res := Text(b.String())
	res.Meta = sdkmcp.Meta{"decision_id": sum.DecisionID}
	return res, nil
}

// fitPages cuts the content fields that format renders so that all pages
// together take at most budget characters: pages shorter than a fair share
// stay whole and leave their unused share to the others. Each cut field
// ends with a note saying how to read the page whole. It returns how many
// pages were cut.
func fitPages(pages []*airlock.Page, format string, budget int) int {
	type field struct {
		ptr *string
		n   int
	}
	var fields []field
	perPage := map[*string]*airlock.Page{}
	for _, pg := range pages {
		var ptrs []*string
		switch format {
		case render.FormatMarkdown:
			if strings.TrimSpace(pg.Markdown) != "" {
				ptrs = []*string{&pg.Markdown}
			} else {
				ptrs = []*string{&pg.Text}
			}
		case render.FormatText, render.FormatOrg:
			ptrs = []*string{&pg.Text}
		case render.FormatJSON:
			ptrs = []*string{&pg.Markdown, &pg.Text}
		}
		for _, p := range ptrs {
			fields = append(fields, field{p, utf8.RuneCountInString(*p)})
			perPage[p] = pg
		}
	}
	sizes := make([]int, len(fields))
	for i, f := range fields {
		sizes[i] = f.n
	}
	share := fairShare(sizes, budget)
	cut := map[*airlock.Page]bool{}
	for _, f := range fields {
		if f.n <= share {
			continue
		}
		pg := perPage[f.ptr]
		*f.ptr = (*f.ptr)[:runeOffset(*f.ptr, 0, share)] +
			fmt.Sprintf("\n\n<page truncated: %s characters cut; call web_fetch with url=%s to read it whole>", thousands(f.n-share), oneLine(pg.URL))
		if !cut[pg] {
			cut[pg] = true
			pg.Truncated = append(pg.Truncated, "mcp_reply")
		}
	}
	return len(cut)
}

// fairShare returns the largest c such that the sum of min(n, c) over
// sizes is at most budget (max-min fairness).
func fairShare(sizes []int, budget int) int {
	slices.Sort(sizes)
	left := budget
	for i, n := range sizes {
		rest := len(sizes) - i
		if n*rest <= left {
			left -= n
			continue
		}
		return left / rest
	}
	if len(sizes) == 0 {
		return budget
	}
	return sizes[len(sizes)-1]
}

// oneLine collapses whitespace and drops control characters: a title, URL
// or snippet from the web cannot break the reply's lines.
func oneLine(s string) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) && !unicode.IsSpace(r) {
			return -1
		}
		return r
	}, s)
	return strings.Join(strings.Fields(s), " ")
}

// clip cuts s to at most n characters, the last one an ellipsis.
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return s[:runeOffset(s, 0, n-1)] + "…"
}

// thousands formats n with comma separators: 12,345.
func thousands(n int) string {
	s := strconv.Itoa(n)
	if n < 0 {
		return "-" + thousands(-n)
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
