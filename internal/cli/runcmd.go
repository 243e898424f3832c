package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/engine"
	"github.com/airlockhq/airlock/internal/wasmhost"
)

func init() {
	registerCommand("run", newRunCmd)
	registerCommand("serve-guest", newServeGuestCmd)
}

// Defaults of run and serve-guest: untrusted guests get no network unless
// the profile is named.
const (
	defaultGuestListen  = "127.0.0.1:8081"
	defaultGuestProfile = "compute"
)

// guestExitError is a guest that ended with a non-zero exit code. Its
// ExitStatus is the guest's code, for a caller that passes it on; through
// the one vocabulary it is an upstream failure (exit 4).
type guestExitError struct{ code uint32 }

func (e *guestExitError) Error() string       { return fmt.Sprintf("the guest exited with code %d", e.code) }
func (e *guestExitError) ErrorCode() string   { return string(airlock.CodeUpstream) }
func (e *guestExitError) ErrorReason() string { return "guest_exit" }
func (e *guestExitError) ExitStatus() int     { return int(e.code) }

// guestSetup is what run and serve-guest share: the engine with the
// default tenant given the guest's profile, the host, and the loaded guest.
type guestSetup struct {
	en     *engine.Engine
	host   *wasmhost.Host
	guest  *wasmhost.Guest
	guests engine.GuestsConfig // the budget, flags applied
}

// guestFlags are serve-guest's overrides of the guests: budget.
type guestFlags struct {
	instances, memoryMiB, clientInstances int
}

func (f *guestFlags) register(cmd *cobra.Command) {
	cmd.Flags().IntVar(&f.instances, "instances", 0, "guest instances running at once (default: guests.instances, else 16 per CPU); 503 with Retry-After above it")
	cmd.Flags().IntVar(&f.memoryMiB, "memory-mib", 0, "MiB of guest memory at once, counting each instance at its profile's cap (default: guests.memory_mib, else half the machine's memory)")
	cmd.Flags().IntVar(&f.clientInstances, "client-instances", 0, "instances at once per client, an IPv4 address or an IPv6 /64 (default: guests.client_instances, else a quarter of what the budget holds); 429 above it")
}

func (f *guestFlags) apply(g *engine.GuestsConfig) error {
	if f == nil {
		return nil
	}
	if f.instances < 0 || f.memoryMiB < 0 || f.clientInstances < 0 {
		return usageErrorf("--instances, --memory-mib and --client-instances cannot be negative")
	}
	if f.instances > 0 {
		g.Instances = f.instances
	}
	if f.memoryMiB > 0 {
		g.MemoryMiB = f.memoryMiB
	}
	if f.clientInstances > 0 {
		g.ClientInstances = f.clientInstances
	}
	return nil
}

func (s *guestSetup) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var errs []error
	if s.guest != nil {
		errs = append(errs, s.guest.Close(ctx))
	}
	if s.host != nil {
		errs = append(errs, s.host.Close(ctx))
	}
	if s.en != nil {
		errs = append(errs, s.en.Close(ctx))
	}
	return errors.Join(errs...)
}

// loadGuest reads the module, starts an engine whose default tenant has
// the profile named (an unknown name is a configuration error) and loads
// the module for principal tenant/instance. The import check runs here: an
// ungranted import is a denied error (exit 3) before anything runs.
func (e *env) loadGuest(ctx context.Context, pf *policyFlags, gf *guestFlags, profile, path, instance string) (*guestSetup, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, usageErrorf("%s: %v", path, errors.Unwrap(err))
	}
	if st.Size() > wasmhost.MaxModuleBytes {
		return nil, usageErrorf("%s: %d bytes; at most %d", path, st.Size(), wasmhost.MaxModuleBytes)
	}
	wasm, err := os.ReadFile(path)
	if err != nil {
		return nil, usageErrorf("%s: %v", path, errors.Unwrap(err))
	}
	cfg, _, err := e.config(pf)
	if err != nil {
		return nil, err
	}
	tenant, tc, err := defaultTenant(&cfg.Config)
	if err != nil {
		return nil, err
	}
	tc.Profile = profile
	cfg.Tenants[tenant] = tc
	if err := gf.apply(&cfg.Guests); err != nil {
		return nil, err
	}
	gc := cfg.Guests
	s := &guestSetup{guests: gc}
	if s.en, err = engine.New(ctx, cfg.Config, e.engineOptions(cfg.Config)...); err != nil {
		return nil, err
	}
	cacheDir := ""
	if !cfg.InMemory {
		cacheDir = filepath.Join(engine.Effective(cfg.Config).DataDir, "wasm-cache")
	}
	budget := wasmhost.Budget{Instances: gc.Instances, InstancesPerPrincipal: gc.InstancesPerPrincipal, Memory: int64(gc.MemoryMiB) << 20}
	if s.host, err = wasmhost.New(ctx, wasmhost.Config{Broker: s.en, CacheDir: cacheDir, Budget: budget}); err != nil {
		return nil, errors.Join(err, s.close())
	}
	if s.guest, err = s.host.Load(ctx, airlock.Principal{Tenant: tenant, Instance: instance}, filepath.Base(path), wasm); err != nil {
		return nil, errors.Join(err, s.close())
	}
	return s, nil
}

func newRunCmd(e *env) *cobra.Command {
	var pf policyFlags
	var profile string
	var maxStdout, maxStderr int64
	cmd := &cobra.Command{
		Use:   "run GUEST.wasm [--profile P] [policy flags] [-- ARGS...]",
		Short: "Run a WebAssembly guest (WASI command module) with the network only through the engine",
		Long: `Run an untrusted WebAssembly guest (GOOS=wasip1 GOARCH=wasm, a WASI preview 1
command module). The guest gets no socket, no DNS, no files and no environment:
only the arguments after --, standard input and output, and the imports of the
"airlock" module that its profile grants (docs/wasm-abi.md). Every import call
passes the gate and the egress policy and is audited like any broker call.

The profile (default compute: no network at all) decides which imports exist,
the memory cap and the wall-clock deadline. A guest importing a function its
profile does not grant is refused before it runs (exit 3); a guest stopped at
its deadline or its memory cap exits 4; otherwise airlock reports the guest's
exit code (0 for success; any other code is an error, exit 4). The policy
flags apply to the guest's tenant.`,
		Example: `  GOOS=wasip1 GOARCH=wasm go build -o summarise.wasm ./examples/guests/summarise
  airlock run summarise.wasm --profile network -- https://example.com/
  airlock run summarise.wasm --profile network --except 127.0.0.1 -- http://127.0.0.1:8000/`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			s, err := e.loadGuest(ctx, &pf, nil, profile, args[0], "run")
			if err != nil {
				return err
			}
			res, err := s.guest.Run(ctx, wasmhost.RunOptions{Args: args[1:], Stdin: e.stdin, Stdout: e.stdout, Stderr: e.stderr,
				MaxStdout: maxStdout, MaxStderr: maxStderr})
			cerr := s.close()
			if err != nil {
				return err
			}
			if res.StdoutTruncated || res.StderrTruncated {
				fmt.Fprintf(e.stderr, "airlock: the guest's output was cut at the caps (--max-stdout %d, --max-stderr %d)\n",
					orInt64(maxStdout, wasmhost.DefaultMaxStdout), orInt64(maxStderr, wasmhost.DefaultMaxStderr))
			}
			if res.ExitCode != 0 {
				return &guestExitError{code: res.ExitCode}
			}
			return cerr
		},
	}
	cmd.Flags().StringVar(&profile, "profile", defaultGuestProfile, "the guest's profile: compute, minimal, network, posix or one from the config file")
	cmd.Flags().Int64Var(&maxStdout, "max-stdout", 0, "bytes of guest stdout passed on; the rest is dropped (default 8 MiB)")
	cmd.Flags().Int64Var(&maxStderr, "max-stderr", 0, "bytes of guest stderr passed on (default 1 MiB)")
	pf.register(cmd)
	return cmd
}

func orInt64(v, d int64) int64 {
	if v > 0 {
		return v
	}
	return d
}

func newServeGuestCmd(e *env) *cobra.Command {
	var pf policyFlags
	var gf guestFlags
	var profile, listen string
	var clientRate float64
	var clientBurst int
	cmd := &cobra.Command{
		Use:   "serve-guest HANDLER.wasm --listen ADDR [--profile P] [policy flags]",
		Short: "Serve HTTP with a WebAssembly guest as the handler (the server flip)",
		Long: `Listen on ADDR and answer each HTTP request with a fresh instance of the guest:
the request is the guest's standard input as an HTTP/1.1 message, and its
standard output is the response (an HTTP/1.x response message, or plain bytes,
which are a 200 body). The host owns the socket; the guest only handles.

Per request: the client's rate and its instances at once are checked first
(429, before any guest CPU; a client is an IPv4 address or an IPv6 /64), bodies
over 4 MB are refused (413), a request that finds the process's budget of
instances or guest memory full gets 503 with Retry-After, a revoked tenant gets
503 (a revocation also stops the instances already running), and a guest that
exits non-zero, passes its deadline or answers more than 8 MB is a 502. Each
request is one audited decision. Any outbound call the guest makes goes through
the engine's policy like any other. SIGINT or SIGTERM stops it.`,
		Example: `  GOOS=wasip1 GOARCH=wasm go build -o handler.wasm ./examples/guests/handler
  airlock serve-guest handler.wasm --listen 127.0.0.1:8081 --profile network`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			ap, err := checkListen(listen)
			if err != nil {
				return err
			}
			s, err := e.loadGuest(ctx, &pf, &gf, profile, args[0], "serve")
			if err != nil {
				return err
			}
			logger := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
			hd, err := wasmhost.NewHandler(wasmhost.ServeConfig{Guest: s.guest, ClientRate: clientRate, ClientBurst: clientBurst,
				ClientInstances: s.guests.ClientInstances, Logger: logger})
			if err != nil {
				return errors.Join(err, s.close())
			}
			ln, err := net.Listen("tcp", ap.String())
			if err != nil {
				return errors.Join(airlock.Errorf(airlock.CodeUnavailable, airlock.ReasonListen, "listen on %s: %v", ap, errors.Unwrap(err)), s.close())
			}
			srv := &http.Server{Handler: hd, ReadHeaderTimeout: serveReadHeaderTimeout, ReadTimeout: serveReadTimeout,
				IdleTimeout: serveIdleTimeout, MaxHeaderBytes: serveMaxHeaderBytes, ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}
			p := s.guest.Principal()
			b := s.host.Budget()
			fmt.Fprintf(e.stdout, "airlock serve-guest: serving %s on http://%s (principal %s, profile %s; at most %d instances and %d MiB of guest memory, %d per client)\n",
				filepath.Base(args[0]), ln.Addr(), p, s.guest.Profile().Name, min(b.Instances, b.InstancesPerPrincipal), b.Memory>>20, hd.ClientInstances())
			if f, ok := e.stdout.(interface{ Sync() error }); ok {
				f.Sync()
			}
			sigctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
			defer stop()
			served := make(chan error, 1)
			go func() { served <- srv.Serve(ln) }()
			var serveErr error
			select {
			case serveErr = <-served:
			case <-sigctx.Done():
				sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), engine.DefaultDrainTimeout)
				if err := srv.Shutdown(sctx); err != nil {
					srv.Close()
				}
				cancel()
				<-served
			}
			if errors.Is(serveErr, http.ErrServerClosed) {
				serveErr = nil
			}
			cerr := s.close()
			if serveErr != nil {
				return errors.Join(airlock.Errorf(airlock.CodeUnavailable, airlock.ReasonServe, "serve: %v", serveErr), cerr)
			}
			return cerr
		},
	}
	cmd.Flags().StringVar(&listen, "listen", defaultGuestListen, "address to listen on, host:port with an IP literal")
	cmd.Flags().StringVar(&profile, "profile", defaultGuestProfile, "the handler's profile: compute, minimal, network, posix or one from the config file")
	cmd.Flags().Float64Var(&clientRate, "client-rate", wasmhost.DefaultClientRate, "requests per second per client, an IPv4 address or an IPv6 /64 (429 above it)")
	cmd.Flags().IntVar(&clientBurst, "client-burst", wasmhost.DefaultClientBurst, "burst of requests per client (an IPv4 address or an IPv6 /64)")
	gf.register(cmd)
	pf.register(cmd)
	return cmd
}
