package airlock

import "time"

// Narrowing is what a request may add to its principal's policy: it can
// only narrow it. Allow, when non-empty, is an allow-list the target must
// also match; Deny adds deny patterns. Pattern forms are egress's.
type Narrowing struct {
	Allow []string `json:"allow,omitempty"`
	Deny  []string `json:"deny,omitempty"`
}

// HTTPRequest is a generic HTTP request made by the engine under policy.
type HTTPRequest struct {
	Method       string              `json:"method,omitempty"` // "": GET
	URL          string              `json:"url"`
	Header       map[string][]string `json:"header,omitempty"`
	Body         []byte              `json:"body,omitempty"`
	Proxy        string              `json:"proxy,omitempty"`         // an operator-configured upstream proxy name
	TLSProfile   string              `json:"tls_profile,omitempty"`   // go, chrome; "": the engine's default
	MaxRedirects *int                `json:"max_redirects,omitempty"` // nil: the engine's default; 0: follow none
	Narrow       *Narrowing          `json:"narrow,omitempty"`
	// Cache asks for the engine's shared HTTP cache (RFC 9111 shared-cache
	// rules, one partition per tenant): GETs without credentials only.
	Cache bool `json:"cache,omitempty"`
}

// HTTPResponse is the answer to an HTTPRequest (or a route call). Body is
// decoded (gzip, br, zstd, deflate) and complete; bodies past the caps are
// errors, not truncations.
type HTTPResponse struct {
	Status     int                 `json:"status"`
	Header     map[string][]string `json:"header"`
	Body       []byte              `json:"body"`
	URL        string              `json:"url"`                 // the final URL after redirects
	Redirects  []string            `json:"redirects,omitempty"` // the URLs redirected through
	Proto      string              `json:"proto"`
	Cache      string              `json:"cache,omitempty"` // hit, miss or bypass when the cache was asked for
	DecisionID string              `json:"decision_id"`
}

// Exchange lanes.
const (
	LaneTCP = "tcp"
	LaneUDP = "udp"
	LaneTLS = "tls"
)

// ExchangeRequest is a one-shot exchange: the engine connects to Target
// (host:port), sends Data and returns the reply.
type ExchangeRequest struct {
	Lane     string        `json:"lane"` // tcp, udp or tls
	Target   string        `json:"target"`
	Data     []byte        `json:"data"`
	Timeout  time.Duration `json:"timeout,omitempty"`   // 0: 10 s (tcp, tls), 5 s (udp)
	MaxReply int64         `json:"max_reply,omitempty"` // 0: 1 MB (tcp, tls), 65,535 (udp)
	Idle     time.Duration `json:"idle,omitempty"`      // tcp/tls: stop after the peer is idle this long after its first byte; 0: 500 ms
	Narrow   *Narrowing    `json:"narrow,omitempty"`
}

// ExchangeResponse is the reply of an exchange.
type ExchangeResponse struct {
	Data       []byte `json:"data"`
	DecisionID string `json:"decision_id"`
}

// RouteRequest calls a credentialed route: the engine adds the route's
// credential header and sends Method Path (relative to the route's base URL).
type RouteRequest struct {
	Name   string              `json:"name"`
	Method string              `json:"method,omitempty"` // "": GET
	Path   string              `json:"path"`
	Header map[string][]string `json:"header,omitempty"`
	Body   []byte              `json:"body,omitempty"`
}

// AuditRecord is one broker decision as the audit log keeps it.
type AuditRecord struct {
	ID         string    `json:"decision_id"`
	Time       time.Time `json:"time"`
	Tenant     string    `json:"tenant"`
	Instance   string    `json:"instance,omitempty"`
	Broker     string    `json:"broker"`
	Outcome    string    `json:"outcome"` // allow, deny, error
	Code       string    `json:"code,omitempty"`
	Reason     string    `json:"reason"`
	Target     string    `json:"target,omitempty"`
	Detail     string    `json:"detail,omitempty"`
	DurationMS int64     `json:"duration_ms"`
	BytesIn    int64     `json:"bytes_in"`
	BytesOut   int64     `json:"bytes_out"`
}

// AuditQuery filters the audit log; zero fields match everything.
type AuditQuery struct {
	Since     time.Time `json:"since"`
	Until     time.Time `json:"until"`
	Principal string    `json:"principal,omitempty"` // tenant or tenant/instance
	Outcome   string    `json:"outcome,omitempty"`
	Broker    string    `json:"broker,omitempty"`
	Reason    string    `json:"reason,omitempty"`
	Limit     int       `json:"limit,omitempty"`
	BeforeID  string    `json:"before_id,omitempty"`
}

// AuditStat counts decisions by broker, outcome and reason.
type AuditStat struct {
	Broker  string `json:"broker"`
	Outcome string `json:"outcome"`
	Reason  string `json:"reason"`
	Count   int64  `json:"count"`
}

// RetryAfter returns how long a rate-limited error says to wait, or 0.
func RetryAfter(err error) time.Duration {
	for err != nil {
		if r, ok := err.(interface{ RetryAfter() time.Duration }); ok {
			return r.RetryAfter()
		}
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return 0
		}
		err = u.Unwrap()
	}
	return 0
}
