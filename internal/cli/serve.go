package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/engine"
	"github.com/airlockhq/airlock/internal/api"
	"github.com/airlockhq/airlock/internal/mcp"
)

func init() { registerCommand("serve", newServeCmd) }

// Timeouts of the HTTP server. Responses set their own write deadlines (a
// crawl or an event stream runs longer than a fetch), so the server has no
// WriteTimeout.
const (
	serveReadHeaderTimeout = 10 * time.Second
	serveReadTimeout       = 60 * time.Second
	serveIdleTimeout       = 120 * time.Second
	serveMaxHeaderBytes    = 64 << 10
)

func newServeCmd(e *env) *cobra.Command {
	pf := policyFlags{browser: &browserFlags{devOnly: true}}
	var listen, redisURL string
	cmd := &cobra.Command{
		Use:   "serve [--listen 127.0.0.1:8080]",
		Short: "Run the HTTP API, MCP over HTTP (/mcp) and the metrics",
		Long: `Run the HTTP API, MCP over streamable HTTP at /mcp, and /metrics.

With no tenant configured, serve starts in development mode: loopback only,
tenant "local" with profile posix, and a fresh API token and admin token
printed once. Only token hashes are stored, so each start makes a new API
token and revokes the development tokens of earlier starts (the banner says
how many; airlock token list and airlock token revoke manage stored tokens).
The listen port is bound before any token is made. The policy flags (--except, --allow, --deny, --resolve,
--dns-server) apply to the default tenant, so a local page can be served to
an agent without writing a config file; --allow-origin, --deny-origin and
--browser-default shape its browser's origin policy (development mode only:
with tenants configured, set browser.policy).

SIGINT or SIGTERM stops accepting, lets calls in flight finish (up to
serve.drain_timeout), and flushes the audit log.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return e.serve(cmd.Context(), &pf, listen, cmd.Flags().Changed("listen"), redisURL)
		},
	}
	cmd.Flags().StringVar(&listen, "listen", defaultListen, "address to listen on, host:port with an IP literal (serve.listen)")
	cmd.Flags().StringVar(&redisURL, "redis", "", "share rate limits, revocations and DNS pins with other replicas through this Redis: redis://host:port/db (state.redis_url)")
	pf.register(cmd)
	pf.browser.register(cmd)
	return cmd
}

// checkListen parses a listen address. The host must be an IP literal (or
// localhost): resolving a name to listen on would be DNS outside egress.
func checkListen(addr string) (netip.AddrPort, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return netip.AddrPort{}, usageErrorf("--listen %q: want host:port, e.g. 127.0.0.1:8080", addr)
	}
	if host == "localhost" {
		host = "127.0.0.1"
	}
	if host == "" {
		return netip.AddrPort{}, usageErrorf("--listen %q: give the address to listen on, e.g. 127.0.0.1%s or 0.0.0.0%s", addr, addr, addr)
	}
	ap, err := netip.ParseAddrPort(net.JoinHostPort(host, port))
	if err != nil {
		return netip.AddrPort{}, usageErrorf("--listen %q: the host must be an IP address, e.g. 127.0.0.1:8080", addr)
	}
	return ap, nil
}

func (e *env) serve(ctx context.Context, pf *policyFlags, listen string, listenSet bool, redisURL string) error {
	cfg, _, err := loadConfig(e.configPath, e.environ)
	if err != nil {
		return err
	}
	if e.dataDir != "" {
		cfg.DataDir = e.dataDir
	}
	if redisURL != "" {
		cfg.State.RedisURL = redisURL
	}
	dev := len(cfg.Tenants) == 0
	if err := pf.applyTo(&cfg.Config); err != nil {
		return err
	}
	serveCfg := cfg.Serve.withDefaults()
	if !listenSet {
		listen = serveCfg.Listen
	}
	ap, err := checkListen(listen)
	if err != nil {
		return err
	}
	loopback := ap.Addr().Unmap().IsLoopback()
	if dev && !loopback {
		return airlock.Errorf(airlock.CodeInvalid, airlock.ReasonDevModeLoopback,
			"development mode (no tenants configured) listens on loopback only; %s is not loopback: configure a tenant with a token first (airlock token generate, then tenants.NAME.tokens in airlock.yaml)", listen)
	}
	// Bind the port first: a port in use must not cost a token.
	ln, err := net.Listen("tcp", ap.String())
	if err != nil {
		return airlock.Errorf(airlock.CodeUnavailable, airlock.ReasonListen, "listen on %s: %v", ap, errors.Unwrap(err))
	}
	// The forward proxy (proxy.listen), bound before anything is made too.
	var proxyLns []net.Listener
	if cfg.Proxy.Listen != "" {
		if proxyLns, err = proxyListeners(dev, cfg.Proxy.Listen, cfg.Proxy.SOCKSListen); err != nil {
			ln.Close()
			return err
		}
	}
	var adminToken string
	if dev {
		adminToken = engine.NewToken()
		cfg.AdminTokens = append(cfg.AdminTokens, engine.HashToken(adminToken))
	}

	logger := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	en, err := engine.New(ctx, cfg.Config, e.engineOptions(cfg.Config, engine.WithLogger(logger))...)
	if err != nil {
		ln.Close()
		closeAll(proxyLns)
		return err
	}
	// From here on the engine is closed on every path: that flushes the
	// audit log.
	drain := serveCfg.DrainTimeout
	closeEngine := func() error {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), drain)
		defer cancel()
		return en.Close(cctx)
	}

	var dt devTokens
	if dev {
		dt, err = mintDevToken(ctx, en)
		if err != nil {
			ln.Close()
			closeAll(proxyLns)
			return errors.Join(err, closeEngine())
		}
	}
	var fwd *runningProxy
	if len(proxyLns) > 0 {
		if fwd, err = startProxy(en, cfg.Proxy, dev, proxyLns, logger); err != nil {
			ln.Close()
			closeAll(proxyLns)
			return errors.Join(err, closeEngine())
		}
		for _, l := range proxyLns {
			logger.Info("forward proxy", "addr", l.Addr().String())
		}
	}
	proxyCtx, stopProxy := context.WithCancel(context.WithoutCancel(ctx))
	defer stopProxy()
	var proxyDone <-chan error
	if fwd != nil {
		proxyDone = fwd.done(proxyCtx)
	}

	version := releaseVersion()
	var stopping atomic.Bool
	streams, stopStreams := context.WithCancel(context.WithoutCancel(ctx))
	defer stopStreams()
	maxBody := serveCfg.MaxBodyBytes
	handler := api.New(en, api.Options{
		MCP:           mcp.HTTPHandler(en, mcp.Options{Version: version, Logger: logger}),
		PublicMetrics: loopback || cfg.Serve.PublicMetrics,
		MaxBody:       maxBody,
		Logger:        logger,
		Version:       version,
		Ready: func(ctx context.Context) error {
			if stopping.Load() {
				return airlock.Errorf(airlock.CodeUnavailable, airlock.ReasonShuttingDown, "shutting down")
			}
			return en.Ready(ctx)
		},
		Streams: streams,
	})
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: serveReadHeaderTimeout,
		ReadTimeout:       serveReadTimeout,
		IdleTimeout:       serveIdleTimeout,
		MaxHeaderBytes:    serveMaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}

	base := "http://" + ln.Addr().String()
	try, offline := tryURL(pf.except)
	e.printBanner(base, dev, dt, adminToken, try, offline, en)
	logger.Info("serving", "addr", ln.Addr().String(), "version", version, "development", dev, "public_metrics", loopback || cfg.Serve.PublicMetrics)

	sigctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	var serveErr error
	select {
	case serveErr = <-served:
	case <-sigctx.Done():
		logger.Info("shutting down: draining calls in flight", "timeout", drain)
		stopping.Store(true)
		stopStreams() // event streams end; ordinary calls drain
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), drain)
		err := srv.Shutdown(sctx)
		cancel()
		if err != nil {
			logger.Warn("drain deadline passed; closing remaining connections", "err", err)
			srv.Close()
		}
		<-served
	}
	if errors.Is(serveErr, http.ErrServerClosed) {
		serveErr = nil
	}
	if proxyDone != nil {
		stopProxy()
		if perr := <-proxyDone; perr != nil && serveErr == nil {
			serveErr = perr
		}
	}
	cerr := closeEngine()
	if cerr == nil {
		logger.Info("stopped; audit log flushed")
	}
	if serveErr != nil {
		return errors.Join(airlock.Errorf(airlock.CodeUnavailable, airlock.ReasonServe, "serve: %v", serveErr), cerr)
	}
	return cerr
}

// devTokenLabel starts the label of every development token, so that a
// restart finds the earlier ones.
const devTokenLabel = "airlock serve development token"

// devTokens is the development token of this run and what became of the
// earlier ones.
type devTokens struct {
	token   string // the new token, shown once
	revoked int    // earlier development tokens revoked
	others  int    // other stored tokens of the tenant, left alone
}

// mintDevToken makes this run's development token and revokes the ones
// earlier runs made: only hashes are stored, so an earlier token cannot be
// shown again, and a restart must not leave valid tokens behind that
// nobody knows about. Tokens made with `airlock token create` are kept.
func mintDevToken(ctx context.Context, en *engine.Engine) (devTokens, error) {
	tenant := en.Principal().Tenant
	earlier, err := en.ListTokens(ctx, tenant)
	if err != nil {
		return devTokens{}, err
	}
	var dt devTokens
	dt.token, err = en.CreateToken(ctx, tenant, devTokenLabel+" "+time.Now().UTC().Format(time.RFC3339))
	if err != nil {
		return devTokens{}, err
	}
	for _, t := range earlier {
		if !strings.HasPrefix(t.Label, devTokenLabel) {
			dt.others++
			continue
		}
		if _, err := en.RevokeToken(ctx, t.Hash); err != nil && airlock.CodeOf(err) != airlock.CodeNotFound {
			return devTokens{}, err
		}
		dt.revoked++
	}
	return dt, nil
}

// tryURL is the page the banner's example fetches: a loopback IP:PORT the
// floor exceptions (--except) let through, which works offline, else
// example.com, which needs the internet (the floor refuses every local
// address, airlock's own included).
func tryURL(except []string) (url string, offline bool) {
	for _, x := range except {
		if ap, err := netip.ParseAddrPort(x); err == nil && ap.Addr().Unmap().IsLoopback() {
			return "http://" + ap.String() + "/", true
		}
	}
	return "https://example.com/", false
}

// printBanner tells a person where the server is and, in development mode,
// the tokens (shown only here) and a request to try.
func (e *env) printBanner(base string, dev bool, dt devTokens, adminToken string, try string, offline bool, en *engine.Engine) {
	w := e.stdout
	if !dev {
		fmt.Fprintf(w, "airlock serve: listening on %s (API %s/api, MCP %s/mcp, metrics %s/metrics)\n", base, base, base, base)
		return
	}
	p := en.Principal()
	fmt.Fprintf(w, "airlock serve: development mode on %s (loopback only; tenant %q, profile %s)\n\n", base, p.Tenant, en.Profile(p.Tenant))
	fmt.Fprintf(w, "  API token (shown once):   %s\n", dt.token)
	fmt.Fprintf(w, "  admin token (shown once): %s\n", adminToken)
	switch dt.revoked {
	case 0:
	case 1:
		fmt.Fprintf(w, "  revoked 1 earlier development token: a restart makes a new one.\n")
	default:
		fmt.Fprintf(w, "  revoked %d earlier development tokens: a restart makes a new one.\n", dt.revoked)
	}
	if dt.revoked > 0 || dt.others > 0 {
		fmt.Fprintf(w, "  stored API tokens of tenant %q: 1 development token", p.Tenant)
		if dt.others > 0 {
			fmt.Fprintf(w, " and %d made with token create", dt.others)
		}
		fmt.Fprintf(w, " (airlock token list, airlock token revoke ID)\n")
	}
	fmt.Fprintln(w)
	if offline {
		fmt.Fprintf(w, "  try (the page you serve on %s, excepted from the floor by --except):\n", strings.TrimSuffix(strings.TrimPrefix(try, "http://"), "/"))
	} else {
		fmt.Fprintf(w, "  try (needs the internet; offline, serve a page on 127.0.0.1:8000 and restart with --except 127.0.0.1:8000):\n")
	}
	fmt.Fprintf(w, "    curl -s -H 'Authorization: Bearer %s' \\\n      -d '{\"verb\":\"fetch\",\"url\":\"%s\",\"as\":\"md\"}' %s/api/browse\n\n", dt.token, try, base)
	fmt.Fprintf(w, "  MCP (streamable HTTP): %s/mcp with the header Authorization: Bearer <API token>\n", base)
	fmt.Fprintf(w, "  API reference: %s/api/openapi.json   metrics: %s/metrics\n", base, base)
	fmt.Fprintf(w, "  Configure tenants in airlock.yaml (see airlock.example.yaml) to leave development mode.\n")
	if f, ok := w.(interface{ Sync() error }); ok {
		f.Sync()
	}
}
