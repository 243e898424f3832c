package engine

import (
	"github.com/airlockhq/airlock/internal/config"
	"github.com/airlockhq/airlock/internal/gate"
)

// The configuration, as internal/config defines, defaults, checks and
// compiles it; these aliases are the engine's public names for it.
type (
	// Config configures an Engine. The zero Config is usable: one tenant,
	// "local", with profile posix, the default egress policy, and the data
	// directory DefaultDataDir. Load it from YAML with the CLI's loader, or
	// build it in Go.
	Config = config.Config
	// BrowseConfig picks the providers of fetch, crawl and search.
	BrowseConfig = config.BrowseConfig
	// TenantConfig is one tenant: tokens, profile, lists and secrets.
	TenantConfig = config.TenantConfig
	// SecretRef says where a secret's value comes from.
	SecretRef = config.SecretRef
	// ProfileConfig defines a custom profile.
	ProfileConfig = config.ProfileConfig
	// EgressConfig is the global egress policy every tenant starts from.
	EgressConfig = config.EgressConfig
	// LimitsConfig holds the rate limits and the ceilings.
	LimitsConfig = config.LimitsConfig
	// CeilingsConfig are the operator's ceilings on caller-supplied values.
	CeilingsConfig = config.CeilingsConfig
	// BudgetsConfig bounds what the calls in flight hold at once.
	BudgetsConfig = config.BudgetsConfig
	// TenantBudgets is one tenant's share of the budgets.
	TenantBudgets = config.TenantBudgets
	// AuditConfig tunes the audit pipeline.
	AuditConfig = config.AuditConfig
	// RouteConfig is a credentialed route.
	RouteConfig = config.RouteConfig
	// IdentityConfig is how one initiator's requests are made.
	IdentityConfig = config.IdentityConfig
	// BrowserConfig configures the headless browser (capability browser).
	BrowserConfig = config.BrowserConfig
	// StateConfig moves the shared parts of the engine to Redis.
	StateConfig = config.StateConfig
	// GuestsConfig is the budget of the WebAssembly guests of a process.
	GuestsConfig = config.GuestsConfig
)

// AllRoutes in a tenant's routes list grants every configured route.
const AllRoutes = config.AllRoutes

// Defaults of the gate, each also a config value.
const (
	DefaultDataDir          = config.DefaultDataDir
	DefaultTenantRate       = config.DefaultTenantRate
	DefaultTenantBurst      = config.DefaultTenantBurst
	DefaultConnectAttempts  = config.DefaultConnectAttempts
	DefaultConnectWindow    = config.DefaultConnectWindow
	DefaultAuditInterval    = config.DefaultAuditInterval
	DefaultAuditQueue       = config.DefaultAuditQueue
	DefaultAuditRetention   = config.DefaultAuditRetention
	DefaultAuditMaxRows     = config.DefaultAuditMaxRows
	DefaultRevocationPoll   = config.DefaultRevocationPoll
	DefaultDrainTimeout     = config.DefaultDrainTimeout
	DefaultExchangeMaxReply = config.DefaultExchangeMaxReply
)

// Defaults of the resource budgets (budgets.*).
const (
	DefaultBudgetConnections           = config.DefaultBudgetConnections
	DescriptorReserve                  = config.DescriptorReserve
	DefaultBudgetTenantConnections     = config.DefaultBudgetTenantConnections
	DefaultBudgetTenantBytesInFlight   = config.DefaultBudgetTenantBytesInFlight
	DefaultBudgetCrawls                = config.DefaultBudgetCrawls
	DefaultBudgetTenantCrawls          = config.DefaultBudgetTenantCrawls
	DefaultBudgetBrowserSessions       = config.DefaultBudgetBrowserSessions
	DefaultBudgetTenantBrowserSessions = config.DefaultBudgetTenantBrowserSessions
	DefaultBudgetExtractBytes          = config.DefaultBudgetExtractBytes
	DefaultExtractFactor               = config.DefaultExtractFactor
	DefaultBudgetWait                  = config.DefaultBudgetWait
	DefaultBudgetQueue                 = config.DefaultBudgetQueue
)

// Defaults of the browser, each also a config value.
const (
	DefaultBrowserMaxSessions = config.DefaultBrowserMaxSessions
	DefaultBrowserIdleTimeout = config.DefaultBrowserIdleTimeout
	DefaultBrowserOpTimeout   = config.DefaultBrowserOpTimeout
	DefaultBrowserAskTimeout  = config.DefaultBrowserAskTimeout
)

// The values of browser.approve_via_elicitation.
const (
	ElicitLocal = config.ElicitLocal
	ElicitAll   = config.ElicitAll
	ElicitOff   = config.ElicitOff
)

// Robots values of an IdentityConfig.
const (
	RobotsObey   = config.RobotsObey
	RobotsIgnore = config.RobotsIgnore
)

// Effective returns cfg with every default filled in, as New would run it:
// the value of each key a start uses, for `airlock config check` to show
// (config.Effective says which keys keep their configured value). Feed
// New the configuration as written, not this.
func Effective(cfg Config) Config { return config.Effective(cfg) }

// Names of the ceilings a surface checks itself with CheckLimit (the
// others are checked on the root request types).
const (
	LimitMCPMaxLength  = gate.LimitMCPMaxLength
	LimitMCPCrawlPages = gate.LimitMCPCrawlPages
	LimitCrawlMaxPages = gate.LimitCrawlMaxPages
	LimitCrawlTimeout  = gate.LimitCrawlTimeout
	LimitSearchResults = gate.LimitSearchResults
	LimitListLimit     = gate.LimitListPage
)

// CeilingMax returns the most the code allows for the ceiling name whatever
// the configuration says (a tool schema's maximum), or 0 when the
// configuration may set any value.
func CeilingMax(name string) int64 {
	c, _ := gate.LookupCeiling(name)
	return c.Max
}
