package engine

import (
	"context"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/gate"
	"github.com/airlockhq/airlock/internal/proxy"
)

// The forward proxy surface (`airlock proxy`, `airlock exec`).
type (
	ProxyServer  = proxy.Server  // the HTTP and SOCKS5 forward proxy
	ProxyOptions = proxy.Options // how NewProxy builds it
	ProxyClient  = proxy.Client  // a per-client proxy credential
)

// Defaults of ProxyOptions.
const (
	DefaultProxyMaxTunnelBytes    = proxy.DefaultMaxTunnelBytes
	DefaultProxyMaxTunnelDuration = proxy.DefaultMaxTunnelDuration
	DefaultProxyIdleTimeout       = proxy.DefaultIdleTimeout
)

// NewProxy builds a forward proxy on the engine: every connection it
// serves is a broker call (broker "proxy", capability http) of the gate
// under the caller's principal, through that tenant's policy and floor.
// Serve a listener with its Serve (credentials) or ServeAs (one fixed
// principal); Close it before the engine. Errors: invalid (config).
func (e *Engine) NewProxy(opts ProxyOptions) (*ProxyServer, error) {
	if opts.Logger == nil {
		opts.Logger = e.logger
	}
	return proxy.New(opts, proxy.Deps{
		Begin: func(ctx context.Context, p airlock.Principal, c airlock.Capability, broker, target string) (*gate.Call, error) {
			return e.begin(ctx, p, c, broker, target)
		},
		Authenticate: e.Authenticate,
		Registry:     e.registry,
	})
}
