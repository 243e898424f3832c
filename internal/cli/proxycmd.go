package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/engine"
)

func init() { registerCommand("proxy", newProxyCmd) }

// defaultProxyListen is where `airlock proxy` listens without --listen or
// proxy.listen.
const defaultProxyListen = "127.0.0.1:3128"

// ProxyConfig is the forward proxy (`airlock proxy`, and `airlock serve`
// when Listen is set). The engine itself does not read this section.
type ProxyConfig struct {
	// Listen is host:port with an IP literal host: HTTP proxy and SOCKS5
	// on one port. Empty: `airlock serve` starts no proxy, and `airlock
	// proxy` listens on 127.0.0.1:3128.
	Listen string `koanf:"listen" json:"listen"`
	// SOCKSListen is an optional second port (SOCKS5, and HTTP too: the
	// first byte tells them apart).
	SOCKSListen string `koanf:"socks_listen" json:"socks_listen"`
	// PlainPorts are the ports a tunnel may carry something other than
	// TLS to (ssh on 22, ...). Empty: TLS only.
	PlainPorts []int `koanf:"plain_ports" json:"plain_ports"`
	// MaxTunnelBytes caps one tunnel, both directions together [1 GiB].
	MaxTunnelBytes int64 `koanf:"max_tunnel_bytes" json:"max_tunnel_bytes"`
	// MaxTunnelDuration caps one tunnel's life [1h].
	MaxTunnelDuration time.Duration `koanf:"max_tunnel_duration" json:"max_tunnel_duration"`
	// IdleTimeout ends a tunnel with no byte either way [5m].
	IdleTimeout time.Duration `koanf:"idle_timeout" json:"idle_timeout"`
	// Clients are per-client credentials: user name → password hash and
	// principal.
	Clients map[string]ProxyClientConfig `koanf:"clients" json:"clients"`
}

// ProxyClientConfig is one per-client proxy credential.
type ProxyClientConfig struct {
	// PasswordHash is "sha256:<hex>" of the password (airlock token
	// generate prints a token and its hash).
	PasswordHash string `koanf:"password_hash" json:"password_hash"`
	// Principal is tenant or tenant/instance.
	Principal string `koanf:"principal" json:"principal"`
}

// withDefaults is p as the proxy runs it.
func (p ProxyConfig) withDefaults() ProxyConfig {
	if p.MaxTunnelBytes <= 0 {
		p.MaxTunnelBytes = engine.DefaultProxyMaxTunnelBytes
	}
	if p.MaxTunnelDuration <= 0 {
		p.MaxTunnelDuration = engine.DefaultProxyMaxTunnelDuration
	}
	if p.IdleTimeout <= 0 {
		p.IdleTimeout = engine.DefaultProxyIdleTimeout
	}
	return p
}

// options compiles p for engine.NewProxy. dev: no tenant is configured,
// so a loopback client without credentials is local.
func (p ProxyConfig) options(en *engine.Engine, dev bool) (engine.ProxyOptions, error) {
	p = p.withDefaults()
	o := engine.ProxyOptions{MaxTunnelBytes: p.MaxTunnelBytes, MaxTunnelDuration: p.MaxTunnelDuration, IdleTimeout: p.IdleTimeout,
		Development: dev, Local: en.Principal()}
	for _, port := range p.PlainPorts {
		if port < 1 || port > 65535 {
			return o, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonConfig, "proxy.plain_ports: %d is not a port", port)
		}
		o.PlainPorts = append(o.PlainPorts, uint16(port))
	}
	users := make([]string, 0, len(p.Clients))
	for u := range p.Clients {
		users = append(users, u)
	}
	sort.Strings(users)
	for _, u := range users {
		c := p.Clients[u]
		pr, err := airlock.ParsePrincipal(c.Principal)
		if err != nil {
			return o, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonConfig, "proxy.clients.%s.principal: %v", u, err)
		}
		if en.Profile(pr.Tenant) == "" {
			return o, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonConfig, "proxy.clients.%s.principal: no tenant %q", u, pr.Tenant)
		}
		if !strings.HasPrefix(c.PasswordHash, "sha256:") {
			return o, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonConfig, "proxy.clients.%s.password_hash: want sha256:<hex> (airlock token generate prints one)", u)
		}
		o.Clients = append(o.Clients, engine.ProxyClient{User: u, PasswordHash: c.PasswordHash, Principal: pr})
	}
	return o, nil
}

func newProxyCmd(e *env) *cobra.Command {
	var pf policyFlags
	var listen, socksListen string
	cmd := &cobra.Command{
		Use:   "proxy [--listen 127.0.0.1:3128]",
		Short: "Run a forward proxy (HTTP, CONNECT and SOCKS5) under the egress policy, for programs that do not speak Airlock",
		Long: `Run an HTTP forward proxy (absolute-form requests and CONNECT tunnels) and a
SOCKS5 proxy (CONNECT, names resolved by Airlock: socks5h) on one port, for
unmodified programs: curl, git, pip, npm, a Python or Node agent
(HTTP_PROXY=http://127.0.0.1:3128, ALL_PROXY=socks5h://127.0.0.1:3128).

Every connection is a broker call (broker "proxy", capability http): the
caller's principal, revocation (a revoked principal's open tunnels are cut),
the tenant's rate, its policy with the floor, one DNS resolution pinned for
the connection, and an audited decision. A refusal is 403 with the
X-Airlock-Reason and X-Airlock-Decision headers and a one-line body (SOCKS5:
reply "not allowed by ruleset"). A tunnel must start with a TLS ClientHello
whose server name is the tunnel's host, unless its port is on
proxy.plain_ports; every plain-HTTP request is decided on its own.

Callers give a tenant token as the proxy password (http://x:TOKEN@host:port,
socks5h://x:TOKEN@host:port) or a proxy.clients credential. With no tenant
configured (development mode) the proxy listens on loopback only and serves
loopback clients without credentials as tenant "local". The policy flags
apply to the default tenant. SIGINT or SIGTERM stops it and flushes the
audit log.`,
		Example: `  airlock proxy --resolve site.test=127.0.0.1 --except 127.0.0.1:8443
  HTTPS_PROXY=http://127.0.0.1:3128 curl https://site.test:8443/
  curl --proxy socks5h://127.0.0.1:3128 https://example.com/`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return e.proxy(cmd.Context(), &pf, listen, cmd.Flags().Changed("listen"), socksListen)
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "", "address to listen on, host:port with an IP literal (proxy.listen) [127.0.0.1:3128]")
	cmd.Flags().StringVar(&socksListen, "socks-listen", "", "a second port, for SOCKS5 clients that want their own (proxy.socks_listen)")
	pf.register(cmd)
	return cmd
}

func (e *env) proxy(ctx context.Context, pf *policyFlags, listen string, listenSet bool, socksListen string) error {
	cfg, _, err := loadConfig(e.configPath, e.environ)
	if err != nil {
		return err
	}
	if e.dataDir != "" {
		cfg.DataDir = e.dataDir
	}
	dev := len(cfg.Tenants) == 0
	if err := pf.applyTo(&cfg.Config); err != nil {
		return err
	}
	if !listenSet {
		listen = cfg.Proxy.Listen
	}
	if listen == "" {
		listen = defaultProxyListen
	}
	if socksListen == "" {
		socksListen = cfg.Proxy.SOCKSListen
	}
	lns, err := proxyListeners(dev, listen, socksListen)
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	en, err := engine.New(ctx, cfg.Config, e.engineOptions(cfg.Config, engine.WithLogger(logger))...)
	if err != nil {
		closeAll(lns)
		return err
	}
	stop, err := startProxy(en, cfg.Proxy, dev, lns, logger)
	if err != nil {
		closeAll(lns)
		return errors.Join(err, closeEngine(en))
	}
	p := en.Principal()
	for _, ln := range lns {
		fmt.Fprintf(e.stdout, "airlock proxy: HTTP and SOCKS5 on %s\n", ln.Addr())
	}
	if dev {
		fmt.Fprintf(e.stdout, "  development mode: loopback clients without credentials are tenant %q (profile %s)\n", p.Tenant, en.Profile(p.Tenant))
	} else {
		fmt.Fprintf(e.stdout, "  credentials: a tenant token as the proxy password (http://x:TOKEN@%s)\n", lns[0].Addr())
	}
	sigctx, cancel := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer cancel()
	serveErr := <-stop.done(sigctx)
	cerr := closeEngine(en)
	if serveErr != nil {
		return errors.Join(airlock.Errorf(airlock.CodeUnavailable, airlock.ReasonServe, "proxy: %v", serveErr), cerr)
	}
	return cerr
}

// proxyListeners binds the proxy's ports: loopback only in development
// mode.
func proxyListeners(dev bool, addrs ...string) ([]net.Listener, error) {
	var lns []net.Listener
	for _, a := range addrs {
		if a == "" {
			continue
		}
		ap, err := checkListen(a)
		if err != nil {
			closeAll(lns)
			return nil, err
		}
		if dev && !ap.Addr().Unmap().IsLoopback() {
			closeAll(lns)
			return nil, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonDevModeLoopback,
				"development mode (no tenants configured) serves the proxy on loopback only; %s is not loopback: configure a tenant with a token first", a)
		}
		ln, err := net.Listen("tcp", netip.AddrPortFrom(ap.Addr(), ap.Port()).String())
		if err != nil {
			closeAll(lns)
			return nil, airlock.Errorf(airlock.CodeUnavailable, airlock.ReasonListen, "listen on %s: %v", ap, errors.Unwrap(err))
		}
		lns = append(lns, ln)
	}
	return lns, nil
}

func closeAll(lns []net.Listener) {
	for _, l := range lns {
		l.Close()
	}
}

// runningProxy is a proxy serving its listeners.
type runningProxy struct {
	srv    *engine.ProxyServer
	served chan error
	n      int
}

// startProxy serves lns with a proxy on en.
func startProxy(en *engine.Engine, pc ProxyConfig, dev bool, lns []net.Listener, logger *slog.Logger) (*runningProxy, error) {
	opts, err := pc.options(en, dev)
	if err != nil {
		return nil, err
	}
	opts.Logger = logger
	srv, err := en.NewProxy(opts)
	if err != nil {
		return nil, err
	}
	rp := &runningProxy{srv: srv, served: make(chan error, len(lns)), n: len(lns)}
	for _, ln := range lns {
		go func() { rp.served <- srv.Serve(ln) }()
	}
	return rp, nil
}

// done closes the proxy when ctx ends or a listener fails, and reports
// the first failure.
func (rp *runningProxy) done(ctx context.Context) <-chan error {
	out := make(chan error, 1)
	go func() {
		var first error
		select {
		case <-ctx.Done():
		case first = <-rp.served:
			rp.n--
		}
		rp.srv.Close()
		for ; rp.n > 0; rp.n-- {
			if err := <-rp.served; first == nil {
				first = err
			}
		}
		out <- first
	}()
	return out
}
