package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/engine"
	"github.com/airlockhq/airlock/internal/proxy/sandbox"
)

func init() { registerCommand("exec", newExecCmd) }

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
	var show, envFlags []string
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

CMD's environment is PATH, HOME, USER, LOGNAME, LANG, LC_*, TERM, TZ, SHELL,
PWD and TMPDIR of yours, the proxy variables, and what --env adds (--env NAME
copies your NAME, --env NAME=VALUE sets it). A variable Airlock reads a secret
from (a provider's key such as BRAVE_SEARCH_API_KEY, a route's value_env, a
tenant secret's env, AIRLOCK_*) never reaches CMD: --env naming one is an
error. CMD gets stdin, stdout and stderr and no other descriptor.

CMD runs with no capability and no_new_privs, as your uid (nobody when airlock
runs as root); it sees the file system as you do, except /tmp, /var/tmp, /run,
/var/run, /dev/shm (empty), the host's Unix sockets, Airlock's data directory,
its configuration file and the secret files it names (value_file,
secrets.*.file) (hidden); --show PATH shows a hidden path read-only.
When CMD exits, every process it started is killed; airlock exits with CMD's
code. A revocation of the principal stops it.`,
		Example: `  airlock exec -- curl -sS https://example.com/
  airlock exec --allow '*.github.com' --allow github.com -- git clone https://github.com/org/repo.git
  airlock exec --profile network --resolve site.test=127.0.0.1 --except 127.0.0.1:8443 -- python3 agent.py
  airlock exec --env AGENT_MODEL --env MODE=offline -- python3 agent.py`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return e.exec(cmd.Context(), &pf, profile, port, show, envFlags, args)
		},
	}
	cmd.Flags().SetInterspersed(false)
	cmd.Flags().StringVar(&profile, "profile", defaultExecProfile, "the command's profile: network, posix or one from the config file (it needs the http capability)")
	cmd.Flags().Uint16Var(&port, "port", sandbox.DefaultProxyPort, "the proxy's port on the sandbox's loopback")
	cmd.Flags().StringArrayVar(&show, "show", nil, "show a hidden path (under /tmp, /run, ...) to the command, read-only (repeatable)")
	cmd.Flags().StringArrayVar(&envFlags, "env", nil, "pass NAME (your value) or NAME=VALUE to the command's environment (repeatable); never a secret's variable")
	pf.register(cmd)
	return cmd
}

func (e *env) exec(ctx context.Context, pf *policyFlags, profile string, port uint16, show, envFlags, args []string) error {
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
	environ := e.environ
	if environ == nil {
		environ = os.Environ()
	}
	secretVars, secretFiles := secretSources(&cfg.Config)
	cmdEnv, err := commandEnv(environ, envFlags, secretVars)
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
		hide = append(hide, hidePaths(cfgPath)...)
	}
	for _, f := range secretFiles {
		hide = append(hide, hidePaths(f)...)
	}
	// --show of a directory above a hidden path keeps it covered; of the
	// path itself, or of something inside it, would uncover it.
	for _, sp := range show {
		for _, h := range hide {
			if sp == h || strings.HasPrefix(sp, strings.TrimSuffix(h, "/")+"/") {
				return usageErrorf("--show %s: airlock exec hides %s (its data directory, configuration or a secret file) from the command", sp, h)
			}
		}
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
	var id [6]byte
	rand.Read(id[:])
	p := airlock.Principal{Tenant: tenant, Instance: "exec-" + hex.EncodeToString(id[:])}
	sess, err := en.BeginExec(ctx, p, strings.Join(args, " "))
	if err != nil {
		return errors.Join(err, closeEngine(en))
	}
	// The outside server: internal/proxy's, as `airlock proxy` runs it
	// (HTTP forward proxy, CONNECT with its ClientHello checks, SOCKS5),
	// every connection the session's principal, each a gate call.
	popts, err := cfg.Proxy.options(en, false)
	if err != nil {
		return errors.Join(err, sess.End(err, "the proxy's configuration"), closeEngine(en))
	}
	code, rerr := sandbox.Run(sess.Context(), sandbox.Config{
		Args: args, Env: cmdEnv,
		Stdin: e.stdin, Stdout: e.stdout, Stderr: e.stderr,
		Outside:   sandbox.OutsideFunc(func(ln net.Listener) error { return sess.Serve(ln, popts) }),
		SOCKS:     true,
		ProxyPort: port, Hide: hide, Show: show,
	})
	if rerr == nil {
		// A revocation or a shutdown that stopped the command is the
		// session's outcome.
		rerr = context.Cause(sess.Context())
		if rerr != nil && !isCoded(rerr) {
			rerr = nil
		}
	}
	serr := sess.End(rerr, fmt.Sprintf("exit %d", code))
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

// secretSources returns the environment variables and the files cfg (and
// the providers) read secrets from: provider keys, routes' value_env and
// value_file, every tenant's secrets.
func secretSources(cfg *engine.Config) (vars map[string]string, files []string) {
	vars = map[string]string{}
	for _, v := range providerEnv {
		vars[v] = "a provider's credential"
	}
	for name, r := range cfg.Routes {
		if r.ValueEnv != "" {
			vars[r.ValueEnv] = "routes." + name + ".value_env"
		}
		if r.ValueFile != "" {
			files = append(files, r.ValueFile)
		}
	}
	for tname, tc := range cfg.Tenants {
		for sname, ref := range tc.Secrets {
			if ref.Env != "" {
				vars[ref.Env] = "tenants." + tname + ".secrets." + sname + ".env"
			}
			if ref.File != "" {
				files = append(files, ref.File)
			}
		}
	}
	return vars, files
}

// commandEnv is the command's environment (before the proxy variables):
// sandbox.BaseEnv of environ, then each --env NAME (environ's value, if
// it has one) or NAME=VALUE. AIRLOCK_* and the secrets' variables are
// never in it; an --env naming one is a usage error.
func commandEnv(environ, envFlags []string, secretVars map[string]string) ([]string, error) {
	isSecret := func(name string) (string, bool) {
		if strings.HasPrefix(name, "AIRLOCK_") {
			return "Airlock's own configuration", true
		}
		src, ok := secretVars[name]
		return src, ok
	}
	set := map[string]string{}
	var order []string
	put := func(name, value string) {
		if _, ok := set[name]; !ok {
			order = append(order, name)
		}
		set[name] = value
	}
	for _, kv := range sandbox.BaseEnv(environ) {
		name, value, _ := strings.Cut(kv, "=")
		if _, secret := isSecret(name); !secret {
			put(name, value)
		}
	}
	for _, f := range envFlags {
		name, value, hasValue := strings.Cut(f, "=")
		if name == "" || strings.ContainsRune(f, 0) {
			return nil, usageErrorf("--env %q: want NAME or NAME=VALUE", f)
		}
		if src, secret := isSecret(name); secret {
			return nil, usageErrorf("--env %s: %s is where a secret is read from (%s); airlock exec never passes it to the command", name, name, src)
		}
		if !hasValue {
			v, ok := environValue(environ, name)
			if !ok {
				continue // unset: nothing to pass
			}
			value = v
		}
		put(name, value)
	}
	out := make([]string, 0, len(order))
	for _, name := range order {
		out = append(out, name+"="+set[name])
	}
	return out, nil
}

// environValue is environ's value of name (the last, when it is there twice).
func environValue(environ []string, name string) (string, bool) {
	for i := len(environ) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(environ[i], "="); ok && k == name {
			return v, true
		}
	}
	return "", false
}

// hidePaths is p made absolute and, when it is a symbolic link, its
// target too.
func hidePaths(p string) []string {
	abs, err := filepath.Abs(p)
	if err != nil {
		return nil
	}
	out := []string{abs}
	if t, err := filepath.EvalSymlinks(abs); err == nil && t != abs {
		out = append(out, t)
	}
	return out
}
