package airlock

// ScrapeRequest asks for one page as a Firecrawl-style scrape: the page
// fetched (or rendered in the browser, with Browser), its tags filtered
// by CSS selectors before extraction, and, besides the extracted Page,
// the cleaned HTML and the screenshots asked for.
type ScrapeRequest struct {
	FetchRequest
	// Headers are sent with the page's request. The floor's forbidden
	// headers (hop-by-hop, proxy credentials, ...) are refused (denied,
	// header_floor), and so is a header the initiator's identity sets
	// (invalid, header_identity); Authorization and Cookie are dropped
	// when a redirect leaves the origin. A request with headers is never
	// served from the shared HTTP cache. At most limits.scrape_headers
	// of them, limits.scrape_header_bytes in all. With Browser, they go
	// with every request to the page's origin and to no other origin.
	Headers map[string]string `json:"headers,omitempty"`
	// IncludeTags keeps only the elements these CSS selectors match;
	// ExcludeTags removes the elements they match. Both apply before
	// extraction (Markdown, links) and to HTML.
	IncludeTags []string `json:"include_tags,omitempty"`
	ExcludeTags []string `json:"exclude_tags,omitempty"`
	// HTML asks for ScrapeResult.HTML, the cleaned HTML; WholePage makes
	// it the whole cleaned body instead of the main content (Firecrawl's
	// onlyMainContent: false).
	HTML      bool `json:"html,omitempty"`
	WholePage bool `json:"whole_page,omitempty"`
	// Browser renders the page in the browser (capability browser).
	Browser *BrowserScrape `json:"browser,omitempty"`
}

// BrowserScrape says how the browser renders a scraped page: the page
// loads (and its DOM settles), then WaitFor passes, then the Actions run
// in order, then the screenshot is taken and the document read.
type BrowserScrape struct {
	// WaitFor is a pause after the page loaded (at most
	// limits.browser_sleep).
	WaitFor Duration `json:"wait_for,omitempty"`
	// Mobile emulates a phone: its viewport, User-Agent and touch.
	Mobile bool `json:"mobile,omitempty"`
	// Actions run after WaitFor (at most limits.browser_actions).
	Actions []PageAction `json:"actions,omitempty"`
	// Screenshot asks for a PNG of the page once the actions ran; with
	// FullPage, of the whole page rather than the viewport.
	Screenshot bool `json:"screenshot,omitempty"`
	FullPage   bool `json:"full_page,omitempty"`
}

// The page actions a scrape runs. No action runs caller JavaScript.
const (
	PageWait       = "wait"       // Milliseconds, or Selector (until it is visible); exactly one
	PageClick      = "click"      // Selector
	PageWrite      = "write"      // Text, typed into the focused element
	PagePress      = "press"      // Key (Enter, Tab, Escape, ArrowDown, ... or one character)
	PageScroll     = "scroll"     // Direction up or down (default down), Selector (the element to scroll; default the page)
	PageScreenshot = "screenshot" // FullPage
)

// PageAction is one step of a scrape's actions; only the fields of its
// Type are set.
type PageAction struct {
	Type         string `json:"type"`
	Milliseconds int    `json:"milliseconds,omitempty"` // wait: at most limits.browser_sleep
	Selector     string `json:"selector,omitempty"`
	Text         string `json:"text,omitempty"`
	Key          string `json:"key,omitempty"`
	Direction    string `json:"direction,omitempty"`
	FullPage     bool   `json:"full_page,omitempty"`
}

// ScrapeResult is a scraped page.
type ScrapeResult struct {
	// Page is the extracted page (after the tag filters), with Status the
	// page's HTTP status and DecisionID the call's.
	Page *Page `json:"page"`
	// HTML is the cleaned HTML (when ScrapeRequest.HTML): the filtered
	// document without scripts, styles and the head, reduced to its main
	// content unless WholePage; "" for a document that is not HTML.
	HTML string `json:"html"`
	// RawHTML is the document as served, or as the browser left it.
	RawHTML string `json:"raw_html"`
	// Screenshot is the PNG BrowserScrape.Screenshot asked for;
	// ActionScreenshots those of the screenshot actions, in order.
	Screenshot        []byte   `json:"screenshot,omitempty"`
	ActionScreenshots [][]byte `json:"action_screenshots,omitempty"`
}
