package config

import (
	"encoding/json"
	"net/url"
	"strings"
	"time"

	"github.com/airlockhq/airlock/internal/browser"
)

// Defaults of the browser, each also a config value.
const (
	DefaultBrowserMaxSessions = 4                // open sessions per tenant
	DefaultBrowserIdleTimeout = 10 * time.Minute // an unused session is closed after this
	DefaultBrowserOpTimeout   = 60 * time.Second // one op, when the caller sets no deadline
	DefaultBrowserAskTimeout  = 30 * time.Second // an unanswered ask is a denial
)

// BrowserConfig configures the headless browser (capability browser).
type BrowserConfig struct {
	// ExecPath is the Chromium binary [/usr/lib/chromium/chromium].
	ExecPath string `koanf:"exec_path" json:"exec_path"`
	// MaxSessions bounds the open sessions of one tenant [4].
	MaxSessions int `koanf:"max_sessions" json:"max_sessions"`
	// IdleTimeout closes a session no op has used for this long [10m].
	IdleTimeout time.Duration `koanf:"idle_timeout" json:"idle_timeout"`
	// OpTimeout bounds one op when the caller gives no deadline [60s].
	OpTimeout time.Duration `koanf:"op_timeout" json:"op_timeout"`
	// AskTimeout is how long a request paused under default_action ask
	// waits for an answer before it is denied [30s].
	AskTimeout time.Duration `koanf:"ask_timeout" json:"ask_timeout"`
	// Policy is the origin policy of a session whose request gives none:
	// allowed_origins, denied_origins, default_action [deny, with no
	// allowed origins: nothing loads until the caller says what may].
	Policy browser.Policy `koanf:"policy" json:"policy"`
	// ApproverTokens are hashes ("sha256:<64 hex>") of tokens that may
	// answer asks on the API (POST .../approvals/{id}), besides the admin
	// tokens, for every tenant's sessions; they can do nothing else.
	// A tenant's token never answers asks [none].
	ApproverTokens []string `koanf:"approver_tokens" json:"approver_tokens"`
	// ApproveViaElicitation says which MCP clients may answer asks through
	// elicitation (the person at the client's UI): ElicitLocal (airlock
	// mcp over stdio, whose client the person runs), ElicitAll (also /mcp
	// on airlock serve: trusts every tenant's MCP client to be a person's,
	// not the workload's) or ElicitOff [local].
	ApproveViaElicitation string `koanf:"approve_via_elicitation" json:"approve_via_elicitation"`
}

// The values of browser.approve_via_elicitation.
const (
	ElicitLocal = "local"
	ElicitAll   = "all"
	ElicitOff   = "off"
)

func (c BrowserConfig) WithDefaults() BrowserConfig {
	if c.ExecPath == "" {
		c.ExecPath = browser.DefaultExecPath
	}
	if c.MaxSessions == 0 {
		c.MaxSessions = DefaultBrowserMaxSessions
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = DefaultBrowserIdleTimeout
	}
	if c.OpTimeout == 0 {
		c.OpTimeout = DefaultBrowserOpTimeout
	}
	if c.AskTimeout == 0 {
		c.AskTimeout = DefaultBrowserAskTimeout
	}
	if c.ApproveViaElicitation == "" {
		c.ApproveViaElicitation = ElicitLocal
	}
	return c
}

func (c BrowserConfig) validate() error {
	switch {
	case c.MaxSessions < 0:
		return configErr("browser.max_sessions %d: want 0 (default) or more", c.MaxSessions)
	case c.IdleTimeout < 0 || c.OpTimeout < 0 || c.AskTimeout < 0:
		return configErr("browser: timeouts must not be negative")
	}
	switch c.ApproveViaElicitation {
	case "", ElicitLocal, ElicitAll, ElicitOff:
	default:
		return configErr("browser.approve_via_elicitation %q: want local, all or off", c.ApproveViaElicitation)
	}
	if err := c.Policy.Validate(); err != nil {
		return configErr("browser.policy.%s", strings.TrimPrefix(err.Error(), "browser policy: "))
	}
	return nil
}

// StateConfig moves the shared parts of the engine to Redis (or Valkey),
// so that replicas behind a load balancer act as one: a tenant's rate
// limit is global, a revocation on one replica stops the tenant
// everywhere, and every replica pins the same DNS answer for a name. The
// default (no redis_url) keeps them in the process and its SQLite.
type StateConfig struct {
	// RedisURL is redis://[user:password@]host:port/db (rediss:// for
	// TLS). Also --redis on serve.
	RedisURL string `koanf:"redis_url" json:"redis_url"`
	// FallbackLocal keeps a replica serving while Redis fails, on limits
	// of its own and on the last revocation set it read, instead of
	// refusing every call as unavailable (the default). Every fallback is
	// logged and recorded in the audit log (broker fleet, reason
	// redis_fallback, at most once per FallbackAuditEvery). A revocation
	// made on another replica meanwhile reaches this one only when Redis
	// is back.
	FallbackLocal bool `koanf:"fallback_local" json:"fallback_local"`
	// Replica names this replica to the others (in errors that send a
	// browser session's calls to its owner); default: the host name and a
	// random suffix.
	Replica string `koanf:"replica" json:"replica"`
	// CrawlLease is how long a replica holds a URL of a shared crawl job
	// without renewing it (it renews every third of it): when a replica
	// dies, its URLs go back to the others this long after. Default 15s.
	CrawlLease time.Duration `koanf:"crawl_lease" json:"crawl_lease,omitempty"`
}

// MarshalJSON hides the password of the Redis URL (config check prints
// the configuration).
func (c StateConfig) MarshalJSON() ([]byte, error) {
	type plain StateConfig
	p := plain(c)
	if u, err := url.Parse(c.RedisURL); err == nil && u.User != nil {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), "redacted")
			p.RedisURL = u.String()
		}
	}
	return json.Marshal(p)
}

func (c StateConfig) validate() error {
	if c.RedisURL == "" {
		if c.FallbackLocal {
			return configErr("state.fallback_local needs state.redis_url")
		}
		return nil
	}
	if c.CrawlLease < 0 || c.CrawlLease > 0 && c.CrawlLease < 300*time.Millisecond {
		return configErr("state.crawl_lease: want at least 300ms (0: the default)")
	}
	u, err := url.Parse(c.RedisURL)
	if err != nil || (u.Scheme != "redis" && u.Scheme != "rediss") || u.Host == "" {
		return configErr("state.redis_url: want redis://host:port/db or rediss://...")
	}
	return nil
}

// GuestsConfig is the budget of the WebAssembly guests one process runs at
// once (`airlock run`, `airlock serve-guest`; the engine itself does not
// read it). Zero fields take the host's defaults (wasmhost.DefaultBudget).
type GuestsConfig struct {
	// Instances running at once in the process.
	Instances int `koanf:"instances" json:"instances"`
	// InstancesPerPrincipal running at once for one principal.
	InstancesPerPrincipal int `koanf:"instances_per_principal" json:"instances_per_principal"`
	// MemoryMiB is the sum of the running instances' memory caps.
	MemoryMiB int `koanf:"memory_mib" json:"memory_mib"`
	// ClientInstances: a served guest's instances at once for one client
	// (an IPv4 address or an IPv6 /64).
	ClientInstances int `koanf:"client_instances" json:"client_instances"`
}

// Bounds of the page cache's configuration.
const (
	maxPageCacheBytes = 4 << 30
	maxPageCacheTTL   = time.Hour
)

func validatePageCache(cfg Config) error {
	b := cfg.Browse
	switch {
	case b.PageCacheBytes < 0 || b.PageCacheBytes > maxPageCacheBytes:
		return configErr("browse.page_cache_bytes %d: want 0 (64 MiB) to %d", b.PageCacheBytes, int64(maxPageCacheBytes))
	case b.PageCacheTTL < 0 || b.PageCacheTTL > maxPageCacheTTL:
		return configErr("browse.page_cache_ttl %s: want 0 (5m) to %s", b.PageCacheTTL, maxPageCacheTTL)
	}
	return nil
}
