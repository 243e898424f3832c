package cli

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/engine"
	"github.com/airlockhq/airlock/internal/render"
)

func init() {
	registerCommand("fetch", newFetchCmd)
	registerCommand("crawl", newCrawlCmd)
	registerCommand("search", newSearchCmd)
}

// outFormat is the --format of a browse verb, with its default.
func (e *env) outFormat(def string) string {
	if e.format == "" {
		return def
	}
	return e.format
}

func newFetchCmd(e *env) *cobra.Command {
	pf := policyFlags{person: true}
	var provider, profile, proxy string
	var cache bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:         "fetch URL",
		Annotations: map[string]string{formatDefault: "md"},
		Short:       "Fetch one page under the policy and print it as markdown, org, text or JSON",
		Long: `Fetch one page through the engine (the native provider by default: the chrome TLS
profile and headers, 20 s, 5 redirects, every hop checked) and print the parsed page.
--format md (default), org, text, or json (the Page object). A non-2xx answer is an
error (exit 4, reason http_status); a bot wall is an error (reason bot_wall), never content.`,
		Example: `  airlock fetch https://example.com/
  airlock fetch --format org https://go.dev/doc/
  airlock fetch --format json --except 127.0.0.1 http://127.0.0.1:8080/`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return e.withEngine(&pf, func(en *engine.Engine, p airlock.Principal) error {
				page, err := en.Fetch(cmd.Context(), p, airlock.FetchRequest{URL: args[0], Initiator: airlock.InitiatorPerson, Provider: provider, TLSProfile: profile, Proxy: proxy, Cache: cache, Timeout: timeout})
				if err != nil {
					return err
				}
				return render.Render(e.stdout, e.outFormat("md"), page)
			})
		},
	}
	pf.register(cmd)
	f := cmd.Flags()
	f.StringVar(&provider, "provider", "", "provider: native, firecrawl (default: the configured resolution)")
	f.StringVar(&profile, "tls-profile", "", "TLS handshake profile: chrome (default) or go")
	f.StringVar(&proxy, "proxy", "", "upstream proxy name from the configuration's egress.proxies")
	f.BoolVar(&cache, "cache", false, "use the shared HTTP cache")
	f.DurationVar(&timeout, "timeout", 0, "time for each request, redirects included (default egress.fetch_timeout, 20s; at most limits.fetch_timeout)")
	return cmd
}

func isTerminal(w io.Writer) bool {
	if t, ok := w.(interface{ IsTerminal() bool }); ok {
		return t.IsTerminal()
	}
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func newCrawlCmd(e *env) *cobra.Command {
	pf := policyFlags{person: true}
	req := airlock.CrawlRequest{Initiator: airlock.InitiatorPerson}
	var urlsFile string
	cmd := &cobra.Command{
		Use:         "crawl SEED | --urls FILE",
		Annotations: map[string]string{formatDefault: "jsonl"},
		Short:       "Crawl a site breadth-first from SEED, or a list of URLs, politely",
		Long: `Crawl one seed breadth-first on its host (--subdomains to widen), or fetch a list of
URLs (--urls FILE, one per line, "-" for stdin) concurrently. The crawler identifies
itself, obeys robots.txt (RFC 9309) and Crawl-delay, limits requests per host, and
honours noindex/nofollow. Refused or dead URLs never stop it: they are reported.
--format jsonl (default) prints one Page per line on stdout as pages arrive, with
skipped URLs and the summary on stderr; org prints one document; md prints pages
separated by rules. --extract none returns links and metadata only (discovery).`,
		Example: `  airlock crawl https://docs.example.com/ --max-pages 100 --depth 3
  airlock crawl --urls urls.txt --format org > pages.org
  airlock crawl https://example.com/ --extract none --format jsonl | jq -r .url`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				req.Seed = args[0]
			}
			if urlsFile != "" {
				if req.Seed != "" {
					return usageErrorf("crawl: give a SEED or --urls, not both")
				}
				var r io.Reader = e.stdin
				if urlsFile != "-" {
					f, err := os.Open(urlsFile)
					if err != nil {
						return usageErrorf("crawl: %v", err)
					}
					defer f.Close()
					r = f
				}
				sc := bufio.NewScanner(r)
				for sc.Scan() {
					if u := strings.TrimSpace(sc.Text()); u != "" && !strings.HasPrefix(u, "#") {
						req.URLs = append(req.URLs, u)
					}
				}
				if err := sc.Err(); err != nil {
					return err
				}
			}
			if req.Seed == "" && len(req.URLs) == 0 {
				return usageErrorf("crawl: a SEED or --urls FILE is required")
			}
			// Flags left alone ask for the engine's defaults (the values
			// shown), so that a tenant's lower ceiling (limits.crawl_*)
			// becomes the default instead of refusing the crawl.
			for name, v := range map[string]*int{"depth": &req.Depth, "concurrency": &req.Concurrency, "per-host-concurrency": &req.PerHostConcurrency} {
				if !cmd.Flags().Changed(name) {
					*v = 0
				}
			}
			budget := req.MaxPages
			if n := len(req.URLs); n > 0 && (budget <= 0 || n < budget) {
				budget = n
			}
			if !cmd.Flags().Changed("max-pages") && req.Seed != "" {
				req.MaxPages = 0
			}
			if !cmd.Flags().Changed("timeout") {
				req.Timeout = 0
			}
			if req.Extract != "" && req.Extract != airlock.ExtractFull && req.Extract != airlock.ExtractNone {
				return usageErrorf("crawl: --extract must be full or none")
			}
			format := e.outFormat("jsonl")
			if format == "json" {
				format = "jsonl"
			}
			defer crawlGC(e.environ, heapInUse())()
			return e.withEngine(&pf, func(en *engine.Engine, p airlock.Principal) error {
				cw, err := render.NewCrawlWriter(e.stdout, format)
				if err != nil {
					return err
				}
				// On a terminal, a bar toward the page budget on stderr;
				// page output on the same terminal clears it first.
				var progress func(airlock.CrawlProgress)
				emit := cw.Page
				var bar *crawlBar
				if isTerminal(e.stderr) {
					bar = newCrawlBar(e.stderr, budget, nil)
					progress = bar.Update
					if isTerminal(e.stdout) {
						emit = func(pg *airlock.Page) error {
							return bar.Around(func() error { return cw.Page(pg) })
						}
					}
				}
				sum, err := en.Crawl(cmd.Context(), p, req, emit, progress)
				if bar != nil {
					bar.Clear()
				}
				if sum != nil {
					if werr := cw.End(sum); werr != nil && err == nil {
						err = werr
					}
					for _, s := range sum.Skipped {
						fmt.Fprintf(e.stderr, "skipped %s: %s %s\n", s.URL, s.Reason, s.Detail)
					}
					fmt.Fprintf(e.stderr, "crawl: %d pages, %d skipped, %d failed, %.1f pages/s in %s\n", sum.Pages, len(sum.Skipped), sum.Failed, sum.PagesPerS, time.Duration(sum.ElapsedMS)*time.Millisecond)
				}
				return err
			})
		},
	}
	pf.register(cmd)
	f := cmd.Flags()
	f.StringVar(&urlsFile, "urls", "", "file of URLs to fetch concurrently, one per line (- for stdin)")
	f.IntVar(&req.Depth, "depth", 2, "link depth from the seed")
	f.IntVar(&req.MaxPages, "max-pages", 25, "stop after this many pages")
	f.IntVar(&req.Concurrency, "concurrency", 8, "fetches at once")
	f.IntVar(&req.PerHostConcurrency, "per-host-concurrency", 2, "fetches at once per host")
	f.DurationVar(&req.Timeout, "timeout", 25*time.Second, "per-page timeout")
	f.DurationVar(&req.Delay, "delay", 0, "least time between two requests to one origin (lengthens robots.txt's Crawl-delay, never shortens it)")
	f.StringVar(&req.Extract, "extract", airlock.ExtractFull, "full, or none (links and metadata only)")
	f.BoolVar(&req.Subdomains, "subdomains", false, "follow links to subdomains of the seed's host too")
	f.BoolVar(&req.IgnoreRobots, "ignore-robots", false, "do not obey robots.txt (audited; the tenant needs allow_ignore_robots)")
	f.BoolVar(&req.Sitemap, "sitemap", false, "seed from the site's sitemap too")
	f.StringVar(&req.TLSProfile, "tls-profile", "", "TLS handshake profile: go (default for crawls) or chrome (audited)")
	f.StringVar(&req.Provider, "provider", "", "provider: native, firecrawl")
	f.StringVar(&req.Proxy, "proxy", "", "upstream proxy name from the configuration's egress.proxies")
	return cmd
}

func newSearchCmd(e *env) *cobra.Command {
	var pf policyFlags
	var req airlock.SearchRequest
	cmd := &cobra.Command{
		Use:   "search QUERY",
		Short: "Search the web (keyless engines, or a configured search API)",
		Long: `Search through the configured search provider, or the keyless cascade
(DuckDuckGo HTML, then Brave, then Bing; the first non-empty answer wins), preceded by
any search API whose key is in the environment (DATAFORSEO_AUTH, BRAVE_SEARCH_API_KEY,
SEARXNG_URL). --engine picks one: dataforseo, brave-api, searxng, ddg, brave, bing.`,
		Example: `  airlock search 'rfc 9309 robots'
  airlock search --engine ddg --limit 5 --format json golang generics`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req.Query = strings.Join(args, " ")
			return e.withEngine(&pf, func(en *engine.Engine, p airlock.Principal) error {
				res, _, err := en.Search(cmd.Context(), p, req)
				if err != nil {
					return err
				}
				return render.RenderSearch(e.stdout, e.outFormat("text"), req.Query, res)
			})
		},
	}
	pf.register(cmd)
	f := cmd.Flags()
	f.StringVar(&req.Engine, "engine", "", "dataforseo, brave-api, searxng, ddg, brave or bing")
	f.IntVar(&req.Limit, "limit", 10, "at most this many results")
	f.StringVar(&req.Provider, "provider", "", "search provider (default: the configured resolution)")
	f.StringVar(&req.Proxy, "proxy", "", "upstream proxy name from the configuration's egress.proxies")
	return cmd
}

// crawlGCPercent is the collector's highest target for `airlock crawl`: a
// crawl makes a page's worth of garbage per request and keeps little (the
// frontier and the seen set), so at Go's default of 100 the collector runs
// every few hundred pages, 560 times in a 20,000-page crawl and a third
// of its CPU. At 400 the heap grows to five times what is live (about
// 50 MB at 20,000 pages) before a collection.
const crawlGCPercent = 400

// crawlGCHeadroom bounds that growth when much is live at the start (an
// extractor's tables): the target is lowered, never below Go's default,
// so that the heap grows past the live heap by about this much.
const crawlGCHeadroom = 32 << 20

// crawlGCPercentFor is the target for a crawl that starts with live bytes
// of heap.
func crawlGCPercentFor(live uint64) int {
	if live == 0 {
		return crawlGCPercent
	}
	return int(min(max(crawlGCHeadroom*100/live, 100), crawlGCPercent))
}

// crawlGC sets crawlGCPercentFor(live) for the crawl, unless GOGC in
// environ says otherwise, and returns the function that restores the
// setting.
func crawlGC(environ []string, live uint64) func() {
	for _, kv := range environ {
		if strings.HasPrefix(kv, "GOGC=") {
			return func() {}
		}
	}
	old := debug.SetGCPercent(crawlGCPercentFor(live))
	return func() { debug.SetGCPercent(old) }
}

// heapInUse is the heap allocated now, live or not yet collected.
func heapInUse() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
