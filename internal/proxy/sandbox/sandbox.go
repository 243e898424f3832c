// Package sandbox runs a command so that Airlock's proxy is its only way
// out (`airlock exec`). On Linux the command runs in new user, network,
// PID, mount, IPC and UTS namespaces:
//
//   - user: mapped to one unprivileged uid and gid (the caller's own, or
//     nobody's when the caller is root, with no supplementary groups), no
//     capabilities (the bounding set emptied), no_new_privs;
//   - network: only loopback, brought up; on it the proxy's listening
//     socket (127.0.0.1:ProxyPort), which the init process makes inside
//     and hands over, through a Unix socket pair, to the Outside server in
//     the parent: every connection the command opens to the proxy is
//     accepted and served by Airlock outside, and nothing else leaves;
//   - mount: a fresh /proc; tmpfs over /tmp, /var/tmp, /run, /var/run and
//     /dev/shm; every Unix socket bound in the host's network namespace
//     (read from /proc/net/unix when Run starts) covered with /dev/null;
//     the Hide paths covered; resolv.conf pointing at the namespace's own
//     loopback, where no DNS server listens;
//   - descriptors: the command gets stdin, stdout and stderr only, also
//     of what this process inherited without close-on-exec (fds_linux.go);
//   - environment: Config.Env, by default BaseEnv's allowlist;
//   - PID: an init process of ours is PID 1; when the command exits,
//     every process of the namespace is killed, and init exits with the
//     command's code. Init dies with the caller (a parent-death signal,
//     and the socket pair's end-of-file).
//
// Elsewhere, and where user namespaces are not permitted, Run returns an
// *UnavailableError that says what is needed.
//
// The init process is this same binary re-executed: the package's init
// function recognises it by an environment variable and never returns,
// before main (or TestMain) runs.
package sandbox

import (
	"context"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"

	"github.com/airlockhq/airlock"
)

// DefaultProxyPort is the loopback port of the proxy inside the sandbox.
const DefaultProxyPort = 3128

// Outside serves the proxy's listener, outside the sandbox, as the
// session's principal: every connection accepted on ln comes from the
// command. Serve returns when ln is closed.
type Outside interface {
	Serve(ln net.Listener) error
}

// OutsideFunc adapts a function to Outside.
type OutsideFunc func(net.Listener) error

// Serve calls f(ln).
func (f OutsideFunc) Serve(ln net.Listener) error { return f(ln) }

// Config is one command to run. Args and Outside are required.
type Config struct {
	Args []string // the command and its arguments; Args[0] is looked up in PATH inside
	Env  []string // the command's environment (nil: BaseEnv of this process's); the proxy variables are set over it
	Dir  string   // the working directory; "" is the caller's; it must be visible inside

	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer

	Outside Outside
	// ProxyPort is the proxy's port on the sandbox's loopback; 0 is
	// DefaultProxyPort.
	ProxyPort uint16
	// SOCKS says that Outside also speaks SOCKS5 on the same listener:
	// ALL_PROXY is then socks5h://, else http://.
	SOCKS bool
	// Hide lists more paths to cover (directories with an empty tmpfs,
	// files with /dev/null): the caller's data directory and secrets.
	Hide []string
	// Show lists paths under a hidden directory (such as /tmp) to show to
	// the command read-only.
	Show []string

	Logger *slog.Logger // nil: none
}

func (c *Config) port() uint16 {
	if c.ProxyPort == 0 {
		return DefaultProxyPort
	}
	return c.ProxyPort
}

// baseVars are the variables BaseEnv keeps; LC_* too.
var baseVars = map[string]bool{"PATH": true, "HOME": true, "USER": true, "LOGNAME": true, "LANG": true, "TERM": true,
	"TZ": true, "SHELL": true, "PWD": true, "TMPDIR": true}

// BaseEnv returns the variables of env a command needs to run as the
// caller's and nothing else (no credential of the caller's): PATH, HOME,
// USER, LOGNAME, LANG, LC_*, TERM, TZ, SHELL, PWD and TMPDIR.
func BaseEnv(env []string) []string {
	var out []string
	for _, kv := range env {
		k, _, ok := strings.Cut(kv, "=")
		if ok && (baseVars[k] || strings.HasPrefix(k, "LC_")) {
			out = append(out, kv)
		}
	}
	return out
}

// proxyVars are the environment variables Env is cleared of; ProxyEnv sets
// some of them again.
var proxyVars = []string{"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "FTP_PROXY", "RSYNC_PROXY", "GIT_PROXY_COMMAND", "SOCKS_PROXY", "SOCKS5_PROXY"}

// ProxyEnv returns env without any proxy variable, plus HTTP_PROXY,
// HTTPS_PROXY and ALL_PROXY (and their lower-case forms) pointing at the
// proxy on 127.0.0.1:port, and NO_PROXY empty.
func ProxyEnv(env []string, port uint16, socks bool) []string {
	out := make([]string, 0, len(env)+8)
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		drop := false
		for _, v := range proxyVars {
			if strings.EqualFold(k, v) {
				drop = true
				break
			}
		}
		if !drop {
			out = append(out, kv)
		}
	}
	addr := "127.0.0.1:" + strconv.Itoa(int(port))
	all := "http://" + addr
	if socks {
		all = "socks5h://" + addr
	}
	for _, kv := range [][2]string{
		{"HTTP_PROXY", "http://" + addr}, {"HTTPS_PROXY", "http://" + addr}, {"ALL_PROXY", all}, {"NO_PROXY", ""},
	} {
		out = append(out, kv[0]+"="+kv[1], strings.ToLower(kv[0])+"="+kv[1])
	}
	return out
}

// UnavailableError is Run's error when the sandbox cannot be built here.
// Its code is unavailable and its reason sandbox (whose hint says what is
// needed).
type UnavailableError struct {
	Op  string // what failed: "user namespace", "mount /proc", ...
	Err error
}

func (e *UnavailableError) Error() string {
	msg := "exec sandbox: " + e.Op
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg + "; it needs Linux with user, network, PID and mount namespaces open to this user"
}

func (e *UnavailableError) Unwrap() error       { return e.Err }
func (e *UnavailableError) ErrorCode() string   { return string(airlock.CodeUnavailable) }
func (e *UnavailableError) ErrorReason() string { return string(airlock.ReasonSandbox) }

// StartError is Run's error when the command itself could not be started
// inside (not found, not executable, the working directory hidden): the
// sandbox was built. ExitStatus is 127, as a shell's.
type StartError struct{ Err error }

func (e *StartError) Error() string       { return "exec: " + e.Err.Error() }
func (e *StartError) Unwrap() error       { return e.Err }
func (e *StartError) ExitStatus() int     { return 127 }
func (e *StartError) ErrorCode() string   { return string(airlock.CodeInvalid) }
func (e *StartError) ErrorReason() string { return string(airlock.ReasonUsage) }

// Run runs cfg's command in the sandbox and returns its exit code (128+N
// when signal N ended it). ctx ends it: the command gets SIGTERM, then
// everything in the sandbox SIGKILL a few seconds later. err is an
// *UnavailableError when the sandbox cannot be built, a *StartError when
// the command cannot start; the command's own failure is only its code.
func Run(ctx context.Context, cfg Config) (code int, err error) {
	return run(ctx, cfg)
}
