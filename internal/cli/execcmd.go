package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/engine"
	"github.com/airlockhq/airlock/internal/proxy/sandbox"
)

func init() { commands = append(commands, newExecCmd) }

// defaultExecProfile is exec's profile unless --profile names another:
// the http lane, which the proxy decides on, and nothing more.
const defaultExecProfile = "network"

// commandExitError is a command run by exec that exited non-zero: airlock
// exits with the same code and prints nothing (the command's stderr is
// its own).
type commandExitError struct{ code int }

func (e *commandExitError) Error() string {
	return fmt.Sprintf("the command exited with code %d", e.code)
}
func (e *commandExitError) ErrorCode() string   { return string(airlock.CodeUpstream) }
func (e *commandExitError) ErrorReason() string { return string(airlock.ReasonCommandExit) }
func (e *commandExitError) ExitStatus() int     { return e.code }
func (e *commandExitError) Quiet() bool         { return true }

func newExecCmd(e *env) *cobra.Command {
	var pf policyFlags
	var profile string
	var port uint16
	var show []string
	cmd := &cobra.Command{
		Use:   "exec [--profile P] [policy flags] -- CMD [ARGS...]",
		Short: "Run a program whose only way to the network is Airlock's proxy (Linux)",
		Long: `Run CMD in its own user, network, PID and mount namespaces (Linux): it has
no network but its own loopback, where a forward proxy listens (127.0.0.1:3128,
--port) that Airlock serves from outside under the policy flags and the
profile's tenant. HTTP_PROXY, HTTPS_PROXY and ALL_PROXY (and their lower-case
forms) point at it and NO_PROXY is empty, so curl, git, pip, Python, Go and Node
programs work unmodified; every connection is decided, rate-limited and audited
(airlock audit query --broker proxy). No DNS server is reachable inside: names
are resolved by Airlock. A direct socket fails at once.

CMD runs with no capability and no_new_privs, as your uid (nobody when airlock
runs as root); it sees the file system as you do, except /tmp, /var/tmp, /run,
/var/run, /dev/shm (empty), the host's Unix sockets, Airlock's data directory
and configuration file (hidden); --show PATH shows a hidden path read-only.
When CMD exits, every process it started is killed; airlock exits with CMD's
code. A revocation of the principal stops it.`,
		Example: `  airlock exec -- curl -sS https://example.com/
  airlock exec --allow '*.github.com' --allow github.com -- git clone https://github.com/org/repo.git
  airlock exec --profile network --resolve site.test=127.0.0.1 --except 127.0.0.1:8443 -- python3 agent.py`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return e.exec(cmd.Context(), &pf, profile, port, show, args)
		},
	}
	cmd.Flags().SetInterspersed(false)
	cmd.Flags().StringVar(&profile, "profile", defaultExecProfile, "the command's profile: network, posix or one from the config file (it needs the http capability)")
	cmd.Flags().Uint16Var(&port, "port", sandbox.DefaultProxyPort, "the proxy's port on the sandbox's loopback")
	cmd.Flags().StringArrayVar(&show, "show", nil, "show a hidden path (under /tmp, /run, ...) to the command, read-only (repeatable)")
	pf.register(cmd)
	return cmd
}

func (e *env) exec(ctx context.Context, pf *policyFlags, profile string, port uint16, show, args []string) error {
	if port == 0 {
		return usageErrorf("--port must be 1 to 65535")
	}
	for i, p := range show {
		if !filepath.IsAbs(p) {
			return usageErrorf("--show %q: want an absolute path", p)
		}
		show[i] = filepath.Clean(p)
	}
	cfg, cfgPath, err := e.config(pf)
	if err != nil {
		return err
	}
	tenant, tc, err := defaultTenant(&cfg.Config)
	if err != nil {
		return err
	}
	tc.Profile = profile
	cfg.Tenants[tenant] = tc
	en, err := engine.New(ctx, cfg.Config, e.engineOptions(cfg.Config)...)
	if err != nil {
		return err
	}
	var hide []string
	if !cfg.InMemory {
		if d, err := filepath.Abs(engine.Effective(cfg.Config).DataDir); err == nil {
			hide = append(hide, d)
		}
	}
	if cfgPath != "" {
		if p, err := filepath.Abs(cfgPath); err == nil {
			hide = append(hide, p)
		}
	}

	var id [6]byte
	rand.Read(id[:])
	p := airlock.Principal{Tenant: tenant, Instance: "exec-" + hex.EncodeToString(id[:])}
	sess, err := en.BeginExec(ctx, p, strings.Join(args, " "))
	if err != nil {
		return errors.Join(err, closeEngine(en))
	}
	// The outside server: the engine's forward proxy (HTTP and CONNECT),
	// one gate call per request, as the session's principal. The product
	// proxy (internal/proxy, with SOCKS5) takes its place through the
	// same Outside interface: OutsideFunc(func(ln) error { return
	// server.ServeAs(ln, p) }) with SOCKS set.
	srv := &http.Server{Handler: sess, ReadHeaderTimeout: serveReadHeaderTimeout, MaxHeaderBytes: serveMaxHeaderBytes,
		ErrorLog: slog.NewLogLogger(slog.DiscardHandler, slog.LevelDebug)}
	environ := e.environ
	if environ == nil {
		environ = os.Environ()
	}
	code, rerr := sandbox.Run(sess.Context(), sandbox.Config{
		Args: args, Env: withoutAirlockVars(environ),
		Stdin: e.stdin, Stdout: e.stdout, Stderr: e.stderr,
		Outside:   sandbox.OutsideFunc(func(ln net.Listener) error { return srv.Serve(ln) }),
		ProxyPort: port, Hide: hide, Show: show,
	})
	srv.Close()
	if rerr == nil {
		// A revocation or a shutdown that stopped the command is the
		// session's outcome.
		rerr = context.Cause(sess.Context())
		if rerr != nil && !isCoded(rerr) {
			rerr = nil
		}
	}
	serr := sess.End(rerr, fmt.Sprintf("exit %d; %d proxy requests", code, sess.Connections()))
	cerr := closeEngine(en)
	switch {
	case serr != nil:
		return serr
	case cerr != nil:
		return cerr
	case code != 0:
		return &commandExitError{code: code}
	}
	return nil
}

func isCoded(err error) bool {
	var c interface{ ErrorCode() string }
	return errors.As(err, &c)
}

// withoutAirlockVars drops Airlock's own configuration (tokens, the
// config path) from the command's environment.
func withoutAirlockVars(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		if !strings.HasPrefix(kv, "AIRLOCK_") {
			out = append(out, kv)
		}
	}
	return out
}
