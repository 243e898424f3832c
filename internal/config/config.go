// Package config holds the configuration of an engine: its types (with
// their YAML/JSON tags), defaults and checks, and Compile, which turns a
// Config into the immutable Plan an engine runs on, opening nothing.
package config

import (
	"reflect"
	"strings"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/egress"
	"github.com/airlockhq/airlock/internal/gate"
)

// Defaults of the gate, each also a config value.
// AllRoutes in a tenant's routes list grants every configured route.
const AllRoutes = "*"

const (
	DefaultDataDir          = "./airlock-data"
	DefaultTenantRate       = 2000.0 // broker calls per second per tenant
	DefaultTenantBurst      = 2000
	DefaultConnectAttempts  = 50000 // per instance per DefaultConnectWindow
	DefaultConnectWindow    = 10 * time.Second
	DefaultAuditInterval    = 100 * time.Millisecond
	DefaultAuditQueue       = 65536
	DefaultAuditRetention   = 30 * 24 * time.Hour
	DefaultAuditMaxRows     = 5_000_000
	DefaultRevocationPoll   = 250 * time.Millisecond
	DefaultDrainTimeout     = 10 * time.Second
	DefaultExchangeMaxReply = 1 << 20
)

// Config configures an Engine. The zero Config is usable: one tenant,
// "local", with profile posix, the default egress policy, and the data
// directory DefaultDataDir. Load it from YAML with the CLI's loader, or build
// it in Go.
type Config struct {
	// DataDir holds the SQLite store (audit log, revocations, tokens, cache).
	// "" means DefaultDataDir. Memory-only engines set InMemory instead.
	DataDir string `koanf:"data_dir" json:"data_dir"`
	// InMemory keeps the audit log, revocations and tokens in memory (tests,
	// embedded use); DataDir is then ignored.
	InMemory bool `koanf:"in_memory" json:"in_memory"`

	// Tenants by name. Empty: the single tenant "local" with profile posix.
	Tenants map[string]TenantConfig `koanf:"tenants" json:"tenants"`
	// Profiles adds or overrides capability profiles by name.
	Profiles map[string]ProfileConfig `koanf:"profiles" json:"profiles"`
	// DefaultTenant is the tenant calls without a principal run as ("local").
	DefaultTenant string `koanf:"default_tenant" json:"default_tenant"`
	// AdminTokens are hashes ("sha256:<64 hex>") of the tokens that may use
	// the admin surface (revoke, unrevoke, the whole audit log). Empty: no
	// admin over the network; the CLI on the data directory still works.
	AdminTokens []string `koanf:"admin_tokens" json:"admin_tokens"`

	Egress EgressConfig `koanf:"egress" json:"egress"`
	Limits LimitsConfig `koanf:"limits" json:"limits"`
	// Budgets bound the resources the calls in flight hold, per tenant
	// and for the whole process (budgets.go).
	Budgets BudgetsConfig          `koanf:"budgets" json:"budgets"`
	Audit   AuditConfig            `koanf:"audit" json:"audit"`
	Routes  map[string]RouteConfig `koanf:"routes" json:"routes"`
	Browse  BrowseConfig           `koanf:"browse" json:"browse"`
	// Browser configures the headless browser sessions (sections.go).
	Browser BrowserConfig `koanf:"browser" json:"browser"`
	// Guests budgets the WebAssembly guests of a process (sections.go).
	Guests GuestsConfig `koanf:"guests" json:"guests"`
	// State moves the shared parts (rate limits, revocations, DNS pins)
	// to Redis, so that replicas act as one (sections.go).
	State StateConfig `koanf:"state" json:"state"`
}

// BrowseConfig picks the providers of fetch, crawl and search. The API
// providers are those registered with WithProviders (the CLI registers
// them all): their keys are read from the environment variables named
// here (defaults in brackets) and never appear in results, errors or
// logs; a provider whose key is absent is not available.
type BrowseConfig struct {
	// Provider serves every verb it declares (native, firecrawl); "" native.
	Provider string `koanf:"provider" json:"provider"`
	// SearchProvider serves search, whatever Provider is (dataforseo,
	// brave-api, searxng, firecrawl, native).
	SearchProvider string `koanf:"search_provider" json:"search_provider"`
	// Proxy is the upstream proxy (a name from egress.proxies) merged into
	// browse calls that name none.
	Proxy string `koanf:"proxy" json:"proxy"`
	// Base URLs, for self-hosted services and tests.
	FirecrawlURL  string `koanf:"firecrawl_url" json:"firecrawl_url"`   // [https://api.firecrawl.dev]; key FIRECRAWL_API_KEY
	DataForSEOURL string `koanf:"dataforseo_url" json:"dataforseo_url"` // key DATAFORSEO_AUTH
	BraveAPIURL   string `koanf:"brave_api_url" json:"brave_api_url"`   // key BRAVE_SEARCH_API_KEY
	SearXNGURL    string `koanf:"searxng_url" json:"searxng_url"`       // or SEARXNG_URL
	// Engine base URLs of the keyless search cascade (tests).
	DuckDuckGoURL string `koanf:"duckduckgo_url" json:"duckduckgo_url"`
	BraveURL      string `koanf:"brave_url" json:"brave_url"`
	BingURL       string `koanf:"bing_url" json:"bing_url"`
	// Batched fetch: URLs per batch (the default of
	// limits.fetch_many_urls), at once, and each fetch's timeout.
	BatchMax         int           `koanf:"batch_max" json:"batch_max"`
	BatchConcurrency int           `koanf:"batch_concurrency" json:"batch_concurrency"`
	BatchTimeout     time.Duration `koanf:"batch_timeout" json:"batch_timeout"`
	// PageCacheBytes bounds the page cache (pages fetched and rendered
	// lately, read again in parts by MCP web_fetch) in total [64 MiB, at
	// most 4 GiB]; limits.page_cache_bytes bounds each tenant's share.
	PageCacheBytes int64 `koanf:"page_cache_bytes" json:"page_cache_bytes"`
	// PageCacheTTL is how long a page stays in the page cache [5m, at most 1h].
	PageCacheTTL time.Duration `koanf:"page_cache_ttl" json:"page_cache_ttl"`
}

// TenantConfig is one tenant: who it is (token hashes), what it may do (a
// profile) and where it may go (lists and floor exceptions, which narrow and
// except on top of the global egress policy).
type TenantConfig struct {
	// Tokens are API token hashes, "sha256:<64 hex>". Plain tokens are
	// refused: create them with `airlock token create`.
	Tokens []string `koanf:"tokens" json:"tokens"`
	// Profile names the capability profile; "" is posix for "local" and
	// compute otherwise. An unknown name is a configuration error.
	Profile    string   `koanf:"profile" json:"profile"`
	Allow      []string `koanf:"allow" json:"allow"`
	Deny       []string `koanf:"deny" json:"deny"`
	Exceptions []string `koanf:"exceptions" json:"exceptions"`
	// Secrets are named signing keys, read from the environment or a file;
	// their values never leave the engine.
	Secrets map[string]SecretRef `koanf:"secrets" json:"secrets"`
	// Routes lists the credentialed routes this tenant may call. Absent or
	// empty grants none (least privilege); AllRoutes ("*") grants every
	// configured route. Without any tenant configured, the implicit tenant
	// "local" gets AllRoutes.
	Routes []string `koanf:"routes" json:"routes"`
	// Rate and Burst override the per-tenant broker call limit.
	Rate  float64 `koanf:"rate" json:"rate"`
	Burst int     `koanf:"burst" json:"burst"`
	// Budgets override this tenant's share of the resource budgets
	// (budgets.tenant); zero fields keep the default share.
	Budgets TenantBudgets `koanf:"budgets" json:"budgets"`
	// Limits override the ceilings of limits for this tenant; zero keys
	// keep the global value.
	Limits CeilingsConfig `koanf:"limits" json:"limits"`
	// AllowIgnoreRobots lets this tenant's crawls ask for ignore_robots
	// (audited). False: such a crawl is refused (denied, reason
	// ignore_robots).
	AllowIgnoreRobots bool `koanf:"allow_ignore_robots" json:"allow_ignore_robots"`
	// Initiators are the initiators (model, person) this tenant's requests
	// may claim; empty: [model, person] for "local" (the CLI and the
	// development tenant), [model] otherwise (initiator.go).
	Initiators []string `koanf:"initiators" json:"initiators"`
	// Identities say how each initiator's requests are made: identity
	// and robots.txt (initiator.go); absent: the defaults.
	Identities map[string]IdentityConfig `koanf:"identities" json:"identities"`
}

// SecretRef says where a secret's value comes from: exactly one of Env and
// File.
type SecretRef struct {
	Env  string `koanf:"env" json:"env"`
	File string `koanf:"file" json:"file"`
}

// ProfileConfig defines a custom profile.
type ProfileConfig struct {
	Capabilities []string      `koanf:"capabilities" json:"capabilities"`
	MemoryMiB    int           `koanf:"memory_mib" json:"memory_mib"`
	Deadline     time.Duration `koanf:"deadline" json:"deadline"`
}

// EgressConfig is the global egress policy every tenant starts from.
type EgressConfig struct {
	// Exceptions lift the floor for intranet addresses for every tenant.
	Exceptions []string `koanf:"exceptions" json:"exceptions"`
	Allow      []string `koanf:"allow" json:"allow"`
	Deny       []string `koanf:"deny" json:"deny"`
	// Resolve answers names offline: name → addresses.
	Resolve map[string][]string `koanf:"resolve" json:"resolve"`
	// DNSServer is ip:port; "" uses /etc/resolv.conf.
	DNSServer          string        `koanf:"dns_server" json:"dns_server"`
	UnwrapEmbeddedIPv4 bool          `koanf:"unwrap_embedded_ipv4" json:"unwrap_embedded_ipv4"`
	PinDNS             bool          `koanf:"pin_dns" json:"pin_dns"`
	FetchTimeout       time.Duration `koanf:"fetch_timeout" json:"fetch_timeout"`
	MaxRedirects       int           `koanf:"max_redirects" json:"max_redirects"`
	MaxBodyBytes       int64         `koanf:"max_body_bytes" json:"max_body_bytes"`
	MaxDecodedBytes    int64         `koanf:"max_decoded_bytes" json:"max_decoded_bytes"`
	TLSProfile         string        `koanf:"tls_profile" json:"tls_profile"`
	// Proxies are the upstream proxies a request may name: name → URL
	// (http://host:port or socks5://host:port).
	Proxies map[string]string `koanf:"proxies" json:"proxies"`
}

// LimitsConfig holds the rate limits and the ceilings on caller-supplied
// values (CeilingsConfig, whose keys sit beside the rate limits:
// limits.exchange_max_reply).
type LimitsConfig struct {
	TenantRate      float64       `koanf:"tenant_rate" json:"tenant_rate"`
	TenantBurst     int           `koanf:"tenant_burst" json:"tenant_burst"`
	ConnectAttempts int           `koanf:"connect_attempts" json:"connect_attempts"`
	ConnectWindow   time.Duration `koanf:"connect_window" json:"connect_window"`
	CeilingsConfig  `koanf:",squash"`
}

// CeilingsConfig are the operator's ceilings on every caller-supplied
// size, count, duration and concurrency (internal/gate's table of limits:
// each key is a row's name, and a test keeps the two in step). A value
// above its ceiling is refused (invalid, reason limit), never clamped.
// Zero: the table's default (under limits) or the global value (under
// tenants.<name>.limits). Sizes are bytes (characters for the text
// budgets), durations Go durations ("10s").
type CeilingsConfig struct {
	ExchangeMaxReply     int64         `koanf:"exchange_max_reply" json:"exchange_max_reply,omitempty"`
	ExchangeTimeout      time.Duration `koanf:"exchange_timeout" json:"exchange_timeout,omitempty"`
	ExchangeIdle         time.Duration `koanf:"exchange_idle" json:"exchange_idle,omitempty"`
	ExchangeData         int64         `koanf:"exchange_data" json:"exchange_data,omitempty"`
	UDPMaxReply          int64         `koanf:"udp_max_reply" json:"udp_max_reply,omitempty"`
	UDPTimeout           time.Duration `koanf:"udp_timeout" json:"udp_timeout,omitempty"`
	MaxRedirects         int           `koanf:"max_redirects" json:"max_redirects,omitempty"`
	HTTPBody             int64         `koanf:"http_body" json:"http_body,omitempty"`
	CrawlConcurrency     int           `koanf:"crawl_concurrency" json:"crawl_concurrency,omitempty"`
	CrawlPerHost         int           `koanf:"crawl_per_host_concurrency" json:"crawl_per_host_concurrency,omitempty"`
	CrawlMaxPages        int           `koanf:"crawl_max_pages" json:"crawl_max_pages,omitempty"`
	CrawlURLs            int           `koanf:"crawl_urls" json:"crawl_urls,omitempty"`
	CrawlDepth           int           `koanf:"crawl_depth" json:"crawl_depth,omitempty"`
	CrawlTimeout         time.Duration `koanf:"crawl_timeout" json:"crawl_timeout,omitempty"`
	CrawlDelay           time.Duration `koanf:"crawl_delay" json:"crawl_delay,omitempty"`
	FetchTimeout         time.Duration `koanf:"fetch_timeout" json:"fetch_timeout,omitempty"`
	FetchManyURLs        int           `koanf:"fetch_many_urls" json:"fetch_many_urls,omitempty"`
	SearchResults        int           `koanf:"search_results" json:"search_results,omitempty"`
	AuditRecords         int           `koanf:"audit_records" json:"audit_records,omitempty"`
	ListLimit            int           `koanf:"list_limit" json:"list_limit,omitempty"`
	BrowserWaitTimeout   time.Duration `koanf:"browser_wait_timeout" json:"browser_wait_timeout,omitempty"`
	BrowserSleep         time.Duration `koanf:"browser_sleep" json:"browser_sleep,omitempty"`
	BrowserSnapshotChars int           `koanf:"browser_snapshot_chars" json:"browser_snapshot_chars,omitempty"`
	BrowserExtractChars  int           `koanf:"browser_extract_chars" json:"browser_extract_chars,omitempty"`
	BrowserActions       int           `koanf:"browser_actions" json:"browser_actions,omitempty"`
	MCPMaxLength         int           `koanf:"mcp_max_length" json:"mcp_max_length,omitempty"`
	MCPCrawlPages        int           `koanf:"mcp_crawl_pages" json:"mcp_crawl_pages,omitempty"`
	PageCacheBytes       int64         `koanf:"page_cache_bytes" json:"page_cache_bytes,omitempty"`
	ScrapeHeaders        int           `koanf:"scrape_headers" json:"scrape_headers,omitempty"`
	ScrapeHeaderBytes    int64         `koanf:"scrape_header_bytes" json:"scrape_header_bytes,omitempty"`
	ScrapeSelectors      int           `koanf:"scrape_selectors" json:"scrape_selectors,omitempty"`
}

// Defaults of the resource budgets (budgets.*). Zero in the config means
// the default; negative values are configuration errors.
const (
	// DefaultBudgetConnections is the process's upstream connections at
	// once, lowered to the descriptor limit (RLIMIT_NOFILE at start) less
	// the reserve when that is smaller.
	DefaultBudgetConnections = 4096
	// DescriptorReserve is what the connection budget leaves of the
	// descriptor limit for the listener, the store, logs and children
	// (half the limit when the limit is below twice this).
	DescriptorReserve                  = 512
	DefaultBudgetTenantConnections     = 512 // at most half the process total
	DefaultBudgetTenantBytesInFlight   = 256 << 20
	DefaultBudgetCrawls                = 64
	DefaultBudgetTenantCrawls          = 16
	DefaultBudgetBrowserSessions       = 32
	DefaultBudgetTenantBrowserSessions = 8
	// DefaultBudgetExtractBytes is the memory the extractions running at
	// once may take, estimated as input bytes × ExtractFactor.
	DefaultBudgetExtractBytes = 2 << 30
	// DefaultExtractFactor is the measured peak heap of an extraction per
	// input byte (see docs/configuration.md, budgets).
	DefaultExtractFactor = 192
	DefaultBudgetWait    = 10 * time.Second
	DefaultBudgetQueue   = 1024
)

// BudgetsConfig bounds what the calls in flight hold at once: for the
// whole process, and each tenant's share (Tenant, overridden by
// tenants.<name>.budgets). A call that finds no room waits in a bounded
// line (Wait, Queue), then is refused rate_limited with reason budget;
// one request larger than a whole budget is too_large.
type BudgetsConfig struct {
	// Connections bounds the upstream connections open at once, pooled
	// ones included [DefaultBudgetConnections, and at most the descriptor
	// limit less DescriptorReserve: a larger value is a config error].
	Connections int `koanf:"connections" json:"connections"`
	// Crawls bounds the crawls, crawl jobs and fetch batches running
	// at once [64].
	Crawls int `koanf:"crawls" json:"crawls"`
	// BrowserSessions bounds the browser sessions open at once,
	// rendering sessions included [32].
	BrowserSessions int `koanf:"browser_sessions" json:"browser_sessions"`
	// ExtractBytes bounds the estimated memory of the extractions running
	// at once: input bytes × ExtractFactor [2 GiB]. An input whose
	// estimate alone is larger is refused too_large.
	ExtractBytes int64 `koanf:"extract_bytes" json:"extract_bytes"`
	// ExtractFactor is the estimate's bytes of memory per input byte [192].
	ExtractFactor int `koanf:"extract_factor" json:"extract_factor"`
	// Wait is the longest a call waits for room [10s].
	Wait time.Duration `koanf:"wait" json:"wait"`
	// Queue bounds the calls waiting for one budget at one scope [1024].
	Queue int `koanf:"queue" json:"queue"`
	// Tenant is each tenant's share.
	Tenant TenantBudgets `koanf:"tenant" json:"tenant"`
}

// TenantBudgets is one tenant's share of the budgets.
type TenantBudgets struct {
	// Connections [512, at most half of budgets.connections].
	Connections int `koanf:"connections" json:"connections"`
	// BytesInFlight bounds the response body bytes being read [256 MiB].
	BytesInFlight   int64 `koanf:"bytes_in_flight" json:"bytes_in_flight"`
	Crawls          int   `koanf:"crawls" json:"crawls"`                     // [16]
	BrowserSessions int   `koanf:"browser_sessions" json:"browser_sessions"` // [8]
}

// AuditConfig tunes the audit pipeline.
type AuditConfig struct {
	BatchInterval time.Duration `koanf:"batch_interval" json:"batch_interval"`
	QueueSize     int           `koanf:"queue_size" json:"queue_size"`
	Retention     time.Duration `koanf:"retention" json:"retention"`
	MaxRows       int64         `koanf:"max_rows" json:"max_rows"`
}

// RouteConfig is a credentialed route: the engine adds Header: <value of
// ValueEnv> to calls under BaseURL, for the listed methods and path prefix.
type RouteConfig struct {
	BaseURL    string   `koanf:"base_url" json:"base_url"`
	Header     string   `koanf:"header" json:"header"`
	ValueEnv   string   `koanf:"value_env" json:"value_env"`
	ValueFile  string   `koanf:"value_file" json:"value_file"`
	Prefix     string   `koanf:"value_prefix" json:"value_prefix"` // e.g. "Bearer "
	Methods    []string `koanf:"methods" json:"methods"`
	PathPrefix string   `koanf:"path_prefix" json:"path_prefix"`
}

// ceilingValues returns c's non-zero values by key (durations in
// nanoseconds), as gate.NewLimits takes them.
func ceilingValues(c CeilingsConfig) map[string]int64 {
	out := map[string]int64{}
	v := reflect.ValueOf(c)
	for i := range v.NumField() {
		key, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("koanf"), ",")
		if n := v.Field(i).Int(); n != 0 {
			out[key] = n
		}
	}
	return out
}

// globalCeilings are limits' ceilings with the derived defaults filled
// in: max_redirects from egress.max_redirects, fetch_many_urls from
// browse.batch_max.
func globalCeilings(cfg Config) map[string]int64 {
	out := ceilingValues(cfg.Limits.CeilingsConfig)
	if _, ok := out[gate.LimitMaxRedirects]; !ok {
		out[gate.LimitMaxRedirects] = int64(DefaultRedirects(cfg.Egress))
	}
	if _, ok := out[gate.LimitFetchManyURLs]; !ok {
		out[gate.LimitFetchManyURLs] = int64(orInt(cfg.Browse.BatchMax, airlock.DefaultBatchMax))
	}
	return out
}

// DefaultRedirects is the redirects an HTTP request follows when it
// names none: egress.max_redirects (0: egress.DefaultMaxRedirects;
// negative: none).
func DefaultRedirects(eg EgressConfig) int {
	switch {
	case eg.MaxRedirects == 0:
		return egress.DefaultMaxRedirects
	case eg.MaxRedirects < 0:
		return 0
	}
	return eg.MaxRedirects
}

// tenantLimits compiles a tenant's ceilings.
func tenantLimits(cfg Config, name string, tc TenantConfig) (*gate.Limits, error) {
	l, err := gate.NewLimits(name, globalCeilings(cfg), ceilingValues(tc.Limits))
	if err != nil {
		return nil, configErr("%v", err)
	}
	return l, nil
}

func orInt(v, d int) int {
	if v > 0 {
		return v
	}
	return d
}
