package airlock

// Capability names a family of broker calls a principal's profile may grant.
// A principal without a capability cannot reach its calls at all.
type Capability string

// The capabilities, in the order the profiles add them.
const (
	CapabilityTCP      Capability = "tcp"      // one-shot TCP exchanges
	CapabilityUDP      Capability = "udp"      // one-shot UDP exchanges
	CapabilityTLS      Capability = "tls"      // one-shot TLS exchanges
	CapabilitySecrets  Capability = "secrets"  // signing with secrets the workload never sees
	CapabilityHTTP     Capability = "http"     // raw HTTP requests
	CapabilityBrowse   Capability = "browse"   // fetch, crawl and search
	CapabilityRoutes   Capability = "routes"   // credentialed routes: calls the engine authenticates
	CapabilityParallel Capability = "parallel" // batched and concurrent calls
	CapabilityBrowser  Capability = "browser"  // a headless browser session
)

var capabilities = [...]Capability{
	CapabilityTCP, CapabilityUDP, CapabilityTLS, CapabilitySecrets,
	CapabilityHTTP, CapabilityBrowse, CapabilityRoutes, CapabilityParallel,
	CapabilityBrowser,
}

// Capabilities returns every capability in a stable order.
func Capabilities() []Capability { return append([]Capability(nil), capabilities[:]...) }

// Valid reports whether c is one of the known capabilities.
func (c Capability) Valid() bool {
	for _, k := range capabilities {
		if c == k {
			return true
		}
	}
	return false
}

// String returns the capability's name.
func (c Capability) String() string { return string(c) }

// ParseCapability returns the capability named s. Names are exact and
// lower-case; anything else (including surrounding spaces or another case)
// is an *Error with code invalid and reason "unknown_capability".
func ParseCapability(s string) (Capability, error) {
	c := Capability(s)
	if !c.Valid() {
		return "", Errorf(CodeInvalid, ReasonUnknownCapability, "airlock: unknown capability %q", s)
	}
	return c, nil
}
