package gate

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/egress"
)

// LimitKind says what a limit's value measures.
type LimitKind int

// Kinds of limits.
const (
	KindCount    LimitKind = iota // a number of things (pages, hops, connections)
	KindBytes                     // a size in bytes, or in characters for text budgets
	KindDuration                  // a time.Duration; int request fields are milliseconds
)

// Names of the limits: each is the config key under limits (and
// tenants.<name>.limits).
const (
	LimitExchangeMaxReply = "exchange_max_reply"
	LimitExchangeTimeout  = "exchange_timeout"
	LimitExchangeIdle     = "exchange_idle"
	LimitExchangeData     = "exchange_data"
	LimitUDPMaxReply      = "udp_max_reply"
	LimitUDPTimeout       = "udp_timeout"
	LimitMaxRedirects     = "max_redirects"
	LimitHTTPBody         = "http_body"
	LimitCrawlConcurrency = "crawl_concurrency"
	LimitCrawlPerHost     = "crawl_per_host_concurrency"
	LimitCrawlMaxPages    = "crawl_max_pages"
	LimitCrawlURLs        = "crawl_urls"
	LimitCrawlDepth       = "crawl_depth"
	LimitCrawlTimeout     = "crawl_timeout"
	LimitCrawlDelay       = "crawl_delay"
	LimitFetchTimeout     = "fetch_timeout"
	LimitFetchManyURLs    = "fetch_many_urls"
	LimitSearchResults    = "search_results"
	LimitAuditRecords     = "audit_records"
	LimitListPage         = "list_limit"
	LimitBrowserWait      = "browser_wait_timeout"
	LimitBrowserSleep     = "browser_sleep"
	LimitBrowserChars     = "browser_snapshot_chars"
	LimitBrowserExtract   = "browser_extract_chars"
	LimitBrowserActions   = "browser_actions"
	LimitMCPMaxLength     = "mcp_max_length"
	LimitMCPCrawlPages    = "mcp_crawl_pages"
	LimitPageCacheBytes   = "page_cache_bytes"
	LimitScrapeHeaders    = "scrape_headers"
	LimitScrapeHeaderSize = "scrape_header_bytes"
	LimitScrapeSelectors  = "scrape_selectors"
)

// Ceiling is one row of the table of limits: a caller-supplied value, the
// request fields that carry it, and the operator's ceiling on it.
type Ceiling struct {
	// Name is the config key: limits.<Name>, tenants.<t>.limits.<Name>.
	Name string
	Kind LimitKind
	// Default is the ceiling when the configuration sets none (durations
	// in nanoseconds). The engine derives a few from other keys (see
	// Derived).
	Default int64
	// Derived names the config key the default comes from, if any.
	Derived string
	// Max, when not zero, is the most the code can do whatever the
	// configuration says (a built-in bound): a higher ceiling is a
	// configuration error.
	Max int64
	// Fields are the request fields that carry the value, "Type.Field",
	// or "Type.Field@variant" for a field whose ceiling depends on the
	// request (the exchange lane). A slice or string field is measured by
	// its length; an int field of a duration limit is in milliseconds.
	// A limit without fields is checked by name (CheckValue).
	Fields []string
	// Doc is the one-line description of docs/configuration.md.
	Doc string
}

// Ceilings is the table of limits, in the order docs/configuration.md
// lists them. Every numeric field of the root request types (and of the
// browser ops the engine exposes) is in one row's Fields or in
// ExemptFields: a test enforces it, and a request that carries a field
// in neither is refused (fail closed).
var Ceilings = []Ceiling{
	{Name: LimitExchangeMaxReply, Kind: KindBytes, Default: 1 << 20,
		Fields: []string{"ExchangeRequest.MaxReply@tcp", "ExchangeRequest.MaxReply@tls"},
		Doc:    "`max_reply` of a TCP or TLS exchange (0: 1 MiB)"},
	{Name: LimitExchangeTimeout, Kind: KindDuration, Default: int64(10 * time.Second),
		Fields: []string{"ExchangeRequest.Timeout@tcp", "ExchangeRequest.Timeout@tls"},
		Doc:    "`timeout` of a TCP or TLS exchange (0: 10 s)"},
	{Name: LimitExchangeIdle, Kind: KindDuration, Default: int64(10 * time.Second),
		Fields: []string{"ExchangeRequest.Idle"},
		Doc:    "`idle` of an exchange: the quiet time after the first byte that ends a reply (0: 500 ms)"},
	{Name: LimitExchangeData, Kind: KindBytes, Default: 1 << 20,
		Fields: []string{"ExchangeRequest.Data"},
		Doc:    "bytes an exchange sends (UDP: one datagram, 65,535 at most)"},
	{Name: LimitUDPMaxReply, Kind: KindBytes, Default: 65535, Max: 65535,
		Fields: []string{"ExchangeRequest.MaxReply@udp"},
		Doc:    "`max_reply` of a UDP exchange (0: 65,535)"},
	{Name: LimitUDPTimeout, Kind: KindDuration, Default: int64(5 * time.Second),
		Fields: []string{"ExchangeRequest.Timeout@udp"},
		Doc:    "`timeout` of a UDP exchange (0: 5 s)"},
	{Name: LimitMaxRedirects, Kind: KindCount, Derived: "egress.max_redirects",
		Fields: []string{"HTTPRequest.MaxRedirects"},
		Doc:    "`max_redirects` of an HTTP request (nil: egress.max_redirects)"},
	{Name: LimitHTTPBody, Kind: KindBytes, Default: 10 << 20,
		Fields: []string{"HTTPRequest.Body", "RouteRequest.Body"},
		Doc:    "the body an HTTP request or a route call sends"},
	{Name: LimitCrawlConcurrency, Kind: KindCount, Default: 64,
		Fields: []string{"CrawlRequest.Concurrency"},
		Doc:    "`concurrency` of a crawl: requests at once (0: 8)"},
	{Name: LimitCrawlPerHost, Kind: KindCount, Default: 8,
		Fields: []string{"CrawlRequest.PerHostConcurrency"},
		Doc:    "`per_host_concurrency` of a crawl: requests at once to one origin (0: 2); a request may lower it, never raise it above this"},
	{Name: LimitCrawlMaxPages, Kind: KindCount, Default: 10000,
		Fields: []string{"CrawlRequest.MaxPages"},
		Doc:    "`max_pages` of a crawl (0: 25 for a seed, every URL of a list); a crawl makes at most 4 × max_pages page requests, failures included"},
	{Name: LimitCrawlURLs, Kind: KindCount, Default: 10000,
		Fields: []string{"CrawlRequest.URLs"},
		Doc:    "URLs listed in one crawl request"},
	{Name: LimitCrawlDepth, Kind: KindCount, Default: 100,
		Fields: []string{"CrawlRequest.Depth"},
		Doc:    "`depth` of a crawl from its seed (0: 2); -1 (no limit) is above every ceiling"},
	{Name: LimitCrawlTimeout, Kind: KindDuration, Default: int64(2 * time.Minute),
		Fields: []string{"CrawlRequest.Timeout"},
		Doc:    "`timeout` of one page of a crawl (0: 25 s)"},
	{Name: LimitCrawlDelay, Kind: KindDuration, Default: int64(time.Minute),
		Fields: []string{"CrawlRequest.Delay"},
		Doc:    "`delay` of a crawl: the least time between two requests to one origin; it lengthens robots.txt's Crawl-delay, never shortens it"},
	{Name: LimitFetchTimeout, Kind: KindDuration, Default: int64(2 * time.Minute),
		Fields: []string{"FetchRequest.Timeout"},
		Doc:    "`timeout` of a fetch (`airlock fetch --timeout`): each request, redirects included (0: egress.fetch_timeout)"},
	{Name: LimitFetchManyURLs, Kind: KindCount, Derived: "browse.batch_max",
		Doc: "URLs in one batched fetch (`POST /api/browse` fetch with `urls`, `fetch_many`)"},
	{Name: LimitSearchResults, Kind: KindCount, Default: 100, Max: 100,
		Fields: []string{"SearchRequest.Limit"},
		Doc:    "`limit` of a search: results asked for (0: 10)"},
	{Name: LimitAuditRecords, Kind: KindCount, Default: 10000, Max: 10000,
		Fields: []string{"AuditQuery.Limit"},
		Doc:    "`limit` of an audit query: records in one page (0: 100)"},
	{Name: LimitListPage, Kind: KindCount, Default: 500, Max: 500,
		Doc: "`limit` of a page of crawl jobs or of a crawl job's pages (0: 50)"},
	{Name: LimitBrowserWait, Kind: KindDuration, Default: int64(2 * time.Minute), Max: int64(2 * time.Minute),
		Fields: []string{"Op.TimeoutMS", "Action.TimeoutMS", "Action.WaitForHiddenMS"},
		Doc:    "browser `timeout_ms` of wait_for and interact steps, and `wait_for_hidden_ms` (0: 5 s, 10 s)"},
	{Name: LimitBrowserSleep, Kind: KindDuration, Default: int64(time.Minute), Max: int64(time.Minute),
		Fields: []string{"Action.MS", "BrowserScrape.WaitFor", "PageAction.Milliseconds"},
		Doc:    "browser interact `sleep` `ms`; a scrape's `waitFor` and `wait` action `milliseconds`"},
	{Name: LimitBrowserChars, Kind: KindBytes, Default: 200000, Max: 200000,
		Fields: []string{"Op.MaxChars"},
		Doc:    "browser snapshot `max_chars`: characters of one page of the outline (0: 12,000)"},
	{Name: LimitBrowserExtract, Kind: KindBytes, Default: 1 << 20, Max: 1 << 20,
		Fields: []string{"Action.MaxChars"},
		Doc:    "browser interact extract_text `max_chars` (0: 20,000)"},
	{Name: LimitBrowserActions, Kind: KindCount, Default: 200, Max: 200,
		Fields: []string{"BrowserScrape.Actions"},
		Doc:    "steps of one browser interact sequence, and actions of one scrape"},
	{Name: LimitMCPMaxLength, Kind: KindBytes, Default: 1000000, Max: 1000000,
		Doc: "MCP web_fetch `max_length`: characters of one reply (0: 5,000)"},
	{Name: LimitMCPCrawlPages, Kind: KindCount, Default: 100, Max: 100,
		Doc: "MCP web_crawl `max_pages` (0: 10)"},
	{Name: LimitPageCacheBytes, Kind: KindBytes, Default: 16 << 20, Max: 1 << 30,
		Doc: "bytes of rendered pages a tenant may hold in the page cache that pages MCP web_fetch (at most `browse.page_cache_bytes`)"},
	{Name: LimitScrapeHeaders, Kind: KindCount, Default: 32, Max: 100,
		Fields: []string{"ScrapeRequest.Headers"},
		Doc:    "caller `headers` of one scrape (Firecrawl's `headers`)"},
	{Name: LimitScrapeHeaderSize, Kind: KindBytes, Default: 16 << 10, Max: 64 << 10,
		Doc: "bytes of a scrape's caller `headers`, names and values together"},
	{Name: LimitScrapeSelectors, Kind: KindCount, Default: 100, Max: 1000,
		Fields: []string{"ScrapeRequest.IncludeTags", "ScrapeRequest.ExcludeTags"},
		Doc:    "CSS selectors in a scrape's `includeTags`, and in its `excludeTags`"},
}

// ExemptFields are the numeric request fields that carry no ceiling, and
// why. Keep it short: a value a caller can raise to cost the host more
// belongs in Ceilings.
var ExemptFields = map[string]string{
	"Op.Offset":   "a position in an outline already built and bounded by max_chars pages; past its end is refused",
	"Op.MaxDepth": "it can only shorten a snapshot, whose size max_chars bounds",
}

// ceilingByName and ceilingByField index Ceilings.
var ceilingByName, ceilingByField = func() (map[string]*Ceiling, map[string]*Ceiling) {
	byName, byField := map[string]*Ceiling{}, map[string]*Ceiling{}
	for i := range Ceilings {
		c := &Ceilings[i]
		byName[c.Name] = c
		for _, f := range c.Fields {
			byField[f] = c
		}
	}
	return byName, byField
}()

// LookupCeiling returns the row of the table named name.
func LookupCeiling(name string) (Ceiling, bool) {
	c, ok := ceilingByName[name]
	if !ok {
		return Ceiling{}, false
	}
	return *c, true
}

// Limits are the compiled ceilings of one tenant: the global values of
// limits.* with the tenant's overrides. The zero Limits has every ceiling
// at its table default (a derived one at zero: nothing allowed). It is
// immutable and safe for concurrent use.
type Limits struct {
	values map[string]int64
	keys   map[string]string // the config key each value came from
}

// NewLimits compiles the ceilings of tenant: global values (by name; a
// missing or zero value is the table default) and the tenant's overrides
// (zero: the global value). Unknown names, negative values and values
// above a built-in bound are errors.
func NewLimits(tenant string, global, override map[string]int64) (*Limits, error) {
	l := &Limits{values: map[string]int64{}, keys: map[string]string{}}
	for _, m := range []map[string]int64{global, override} {
		for name := range m {
			if ceilingByName[name] == nil {
				return nil, fmt.Errorf("limits: unknown limit %q", name)
			}
		}
	}
	for _, c := range Ceilings {
		v, key := c.Default, "limits."+c.Name
		if g := global[c.Name]; g != 0 {
			v = g
		}
		if o := override[c.Name]; o != 0 {
			v, key = o, "tenants."+tenant+".limits."+c.Name
		}
		if v < 0 {
			return nil, fmt.Errorf("%s: negative ceiling %s", key, c.format(v))
		}
		if c.Max != 0 && v > c.Max {
			return nil, fmt.Errorf("%s: %s is above the most the code does, %s", key, c.format(v), c.format(c.Max))
		}
		l.values[c.Name], l.keys[c.Name] = v, key
	}
	return l, nil
}

// Ceiling returns the ceiling named name (0 for an unknown name).
func (l *Limits) Ceiling(name string) int64 {
	if l == nil {
		if c := ceilingByName[name]; c != nil {
			return c.Default
		}
		return 0
	}
	return l.values[name]
}

// Key returns the config key the ceiling named name comes from.
func (l *Limits) Key(name string) string {
	if l == nil || l.keys[name] == "" {
		return "limits." + name
	}
	return l.keys[name]
}

func (c *Ceiling) format(v int64) string {
	if c.Kind == KindDuration {
		return time.Duration(v).String()
	}
	return fmt.Sprint(v)
}

// CheckValue refuses (invalid, reason limit) a value of the field named
// field (as the caller spelled it: "max_reply") above the ceiling name,
// or negative. A zero value asks for the default and passes.
func (l *Limits) CheckValue(name, field string, v int64) error {
	c := ceilingByName[name]
	if c == nil {
		return airlock.Errorf(airlock.CodeInternal, airlock.ReasonLimit, "limits: no ceiling named %q", name)
	}
	ceil := l.Ceiling(name)
	switch {
	case v < 0:
		return airlock.Errorf(airlock.CodeInvalid, airlock.ReasonLimit, "%s %s is negative; the ceiling is %s (%s)", field, c.format(v), c.format(ceil), l.Key(name))
	case v > ceil:
		return airlock.Errorf(airlock.CodeInvalid, airlock.ReasonLimit, "%s %s is above the ceiling %s (%s)", field, c.format(v), c.format(ceil), l.Key(name))
	}
	return nil
}

var durationType = reflect.TypeFor[time.Duration]()

// Check refuses (invalid, reason limit) a request whose numeric fields,
// or the lengths of its listed slice and string fields, are above their
// ceilings or negative. req is a request struct or a pointer to one;
// variant selects the "@variant" rows (the exchange lane). A numeric
// field in no row and not exempt is refused as internal: a new field
// cannot slip past the table.
func (l *Limits) Check(req any, variant string) error {
	v := reflect.ValueOf(req)
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return nil
		}
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return airlock.Errorf(airlock.CodeInternal, airlock.ReasonLimit, "limits: %T is not a request struct", req)
	}
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		id := t.Name() + "." + f.Name
		c := ceilingByField[id+"@"+variant]
		if c == nil {
			c = ceilingByField[id]
		}
		fv := v.Field(i)
		if c == nil {
			if _, exempt := ExemptFields[id]; !exempt && numeric(f.Type) {
				return airlock.Errorf(airlock.CodeInternal, airlock.ReasonLimit, "limits: request field %s has no ceiling", id)
			}
			continue
		}
		n, ok := measure(fv, c.Kind)
		if !ok {
			continue // a nil pointer: the default
		}
		if err := l.CheckValue(c.Name, jsonName(f), n); err != nil {
			return err
		}
	}
	return nil
}

// numeric reports whether t is an integer, a float, a time.Duration, or a
// pointer to one.
func numeric(t reflect.Type) bool {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64:
		return true
	}
	return false
}

// NumericFields lists the exported numeric fields of the struct type t
// (integers, floats, durations and pointers to them) as "Type.Field".
func NumericFields(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		if f.IsExported() && numeric(f.Type) {
			out = append(out, t.Name()+"."+f.Name)
		}
	}
	return out
}

// HasCeiling reports whether the field "Type.Field" is in a row of the
// table (for some variant) or exempt.
func HasCeiling(field string) bool {
	if _, ok := ExemptFields[field]; ok {
		return true
	}
	for f := range ceilingByField {
		if base, _, _ := strings.Cut(f, "@"); base == field {
			return true
		}
	}
	return false
}

// measure returns a field's value in the unit of kind: integers and
// durations as they are (int milliseconds for a duration limit), slices
// and strings by their length; ok is false for a nil pointer.
func measure(v reflect.Value, kind LimitKind) (int64, bool) {
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return 0, false
		}
		v = v.Elem()
	}
	switch v.Kind() {
	case reflect.Slice, reflect.String, reflect.Map:
		return int64(v.Len()), true
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n := v.Int()
		if kind == KindDuration && v.Type() != durationType {
			n = saturatingMul(n, int64(time.Millisecond))
		}
		return n, true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		u := v.Uint()
		if u > 1<<62 {
			return 1 << 62, true
		}
		return int64(u), true
	case reflect.Float32, reflect.Float64:
		f := v.Float()
		if f > 1<<62 {
			return 1 << 62, true
		}
		if f < 0 {
			return -1, true
		}
		return int64(f), true
	}
	return 0, false
}

func saturatingMul(a, b int64) int64 {
	const most = 1<<63 - 1
	switch {
	case a > most/b:
		return most
	case a < -most/b:
		return -most
	}
	return a * b
}

// jsonName is the field's name as callers spell it (its JSON key).
func jsonName(f reflect.StructField) string {
	if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name != "" && name != "-" {
		return name
	}
	return f.Name
}

// CheckCrawl checks a crawl request against the tenant's ceilings (a list
// without max_pages asks for every URL: their number is its max_pages),
// and its ignore_robots against the tenant's permission: a tenant without
// allow_ignore_robots is refused (denied, reason ignore_robots).
func (t *Tenant) CheckCrawl(req airlock.CrawlRequest) error {
	if err := t.Limits.Check(req, ""); err != nil {
		return err
	}
	if req.Seed == "" && req.MaxPages == 0 {
		if err := t.Limits.CheckValue(LimitCrawlMaxPages, "urls", int64(len(req.URLs))); err != nil {
			return err
		}
	}
	if req.IgnoreRobots && !t.AllowIgnoreRobots {
		return airlock.Errorf(airlock.CodeDenied, airlock.ReasonIgnoreRobots,
			"ignore_robots is not allowed for tenant %s (tenants.%s.allow_ignore_robots)", t.Name, t.Name)
	}
	return nil
}

// LimitNames returns the names of the table, in its order.
func LimitNames() []string {
	out := make([]string, len(Ceilings))
	for i, c := range Ceilings {
		out[i] = c.Name
	}
	return slices.Clip(out)
}

// ExchangeDefaults fills the zero values of an exchange the way egress
// would, except where the ceiling is below egress's default: then the
// ceiling is the default.
func (l *Limits) ExchangeDefaults(req airlock.ExchangeRequest) airlock.ExchangeRequest {
	reply, timeout := egress.DefaultTCPReplyCap, egress.DefaultTCPTimeout
	replyLimit, timeoutLimit := LimitExchangeMaxReply, LimitExchangeTimeout
	if req.Lane == airlock.LaneUDP {
		reply, timeout = egress.DefaultUDPReplyCap, egress.DefaultUDPTimeout
		replyLimit, timeoutLimit = LimitUDPMaxReply, LimitUDPTimeout
	}
	if req.MaxReply == 0 {
		req.MaxReply = min(int64(reply), l.Ceiling(replyLimit))
	}
	if req.Timeout == 0 {
		req.Timeout = min(timeout, time.Duration(l.Ceiling(timeoutLimit)))
	}
	if req.Idle == 0 {
		req.Idle = min(egress.DefaultIdleAfterFirstByte, time.Duration(l.Ceiling(LimitExchangeIdle)))
	}
	return req
}
