package engine

import (
	"github.com/airlockhq/airlock/internal/browser"
	"github.com/airlockhq/airlock/internal/pagecache"
)

// The types a BrowserResult and a BrowserInteractResult hold, and the page
// a RenderedPage embeds, so that a program can name all it is handed
// (TestPublicAPINamesNoInternalType keeps the list whole).
type (
	BrowserActionResult   = browser.ActionResult   // one interact step's outcome
	BrowserPageInfo       = browser.PageInfo       // where an action left the tab
	BrowserPageDownload   = browser.PageDownload   // a download a page started (refused)
	BrowserRefusal        = browser.Refusal        // a request refused during an action
	BrowserNewTab         = browser.NewTab         // a window a page opened
	BrowserConsoleLog     = browser.ConsoleLog     // the session's console messages
	BrowserConsoleMessage = browser.ConsoleMessage // one console API call
	BrowserDownload       = browser.Download       // what the download op saved
	BrowserNetworkLog     = browser.NetworkLog     // the result of network_log
	BrowserNetworkEntry   = browser.NetworkEntry   // one request layer 1 saw
	BrowserReadResult     = browser.ReadResult     // the result of read
	BrowserScreenshot     = browser.Screenshot     // an encoded image of the page
	BrowserSnapshot       = browser.Snapshot       // an outline of the accessibility tree
	BrowserState          = browser.State          // the page's URL and title
	BrowserTab            = browser.Tab            // a tab as ops report it
	RenderedPageEntry     = pagecache.Entry        // the rendered page a RenderedPage embeds
)
