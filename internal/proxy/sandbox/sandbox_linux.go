package sandbox

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlockhq/airlock/internal/child"
)

// initEnv carries the init process's spec (JSON); its presence makes this
// binary the sandbox's init (init_linux.go).
const initEnv = "AIRLOCK_EXEC_SANDBOX_INIT"

// nobody is the uid and gid a root caller's command runs as.
const nobody = 65534

// killGrace is how long the command has between SIGTERM (ctx ended) and
// SIGKILL of everything in the sandbox.
const killGrace = 5 * time.Second

// maxHostSockets bounds how many host socket paths are covered one by one
// (beyond the tmpfs over the usual directories).
const maxHostSockets = 4096

// spec is what the init process is told.
type spec struct {
	Args []string `json:"args"`
	Dir  string   `json:"dir"`
	Port uint16   `json:"port"`
	Hide []string `json:"hide"`
	Show []string `json:"show"`
}

// Messages of the control socket, init to parent: "ok" with the proxy
// listener's descriptor, or one of these prefixes and a text.
const (
	msgOK    = "ok"
	msgSetup = "setup: "
	msgStart = "start: "
)

// The init process's inherited descriptors.
const (
	ctlFD = 3 // the control socket pair's end
	exeFD = 4 // this binary, executed as /proc/self/fd/4
)

// testHookReading, when set, runs after init has started and the reader
// of its ready message is running, before run waits for either: a test
// makes it wait so that a quick command's exit and the message are both
// ready by then.
var testHookReading func()

func run(ctx context.Context, cfg Config) (int, error) {
	if len(cfg.Args) == 0 || cfg.Args[0] == "" {
		return -1, &StartError{Err: errors.New("no command")}
	}
	if cfg.Outside == nil {
		return -1, errors.New("sandbox: no Outside server")
	}
	dir := cfg.Dir
	if dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return -1, &StartError{Err: err}
		}
		dir = wd
	}
	sp := spec{Args: cfg.Args, Dir: dir, Port: cfg.port(), Hide: append(append([]string(nil), cfg.Hide...), hostSockets()...), Show: cfg.Show}
	js, err := json.Marshal(sp)
	if err != nil {
		return -1, err
	}
	// Init gets the two ExtraFiles and stdio, none of the descriptors
	// this process inherited without close-on-exec (fds_linux.go).
	if err := cloexecFrom(3); err != nil {
		return -1, &UnavailableError{Op: "close-on-exec", Err: err}
	}
	// The binary is executed through a descriptor: a root caller's init
	// runs as nobody, who may not be able to reach it by its path.
	exe, err := os.Open("/proc/self/exe")
	if err != nil {
		return -1, &UnavailableError{Op: "open /proc/self/exe", Err: err}
	}
	defer exe.Close()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, &UnavailableError{Op: "socket pair", Err: err}
	}
	ctl := os.NewFile(uintptr(fds[0]), "sandbox-ctl")
	defer ctl.Close()
	childEnd := os.NewFile(uintptr(fds[1]), "sandbox-ctl-child")

	base := cfg.Env
	if base == nil {
		base = BaseEnv(os.Environ())
	}
	env := ProxyEnv(base, cfg.port(), cfg.SOCKS)
	cmd := &exec.Cmd{
		Path:       fmt.Sprintf("/proc/self/fd/%d", exeFD),
		Args:       []string{"airlock-exec-init"},
		Env:        append(env, initEnv+"="+string(js)),
		Dir:        "/",
		Stdin:      cfg.Stdin,
		Stdout:     cfg.Stdout,
		Stderr:     cfg.Stderr,
		ExtraFiles: []*os.File{childEnd, exe},
	}
	uid, gid := os.Getuid(), os.Getgid()
	attr := &syscall.SysProcAttr{
		Cloneflags: syscall.CLONE_NEWUSER | syscall.CLONE_NEWNET | syscall.CLONE_NEWPID | syscall.CLONE_NEWNS |
			syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS,
		// What init needs to build the sandbox, kept across its exec;
		// the command gets none of them.
		AmbientCaps: []uintptr{unix.CAP_SYS_ADMIN, unix.CAP_NET_ADMIN, unix.CAP_SETPCAP},
	}
	if uid == 0 {
		// Root's command runs as nobody, with no supplementary group: a
		// command mapped to uid 0 would own the host's root files.
		uid, gid = nobody, nobody
		attr.GidMappingsEnableSetgroups = true
		attr.Credential = &syscall.Credential{Uid: nobody, Gid: nobody, Groups: []uint32{}}
	}
	attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}}
	attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}}
	cmd.SysProcAttr = attr

	wait, err := child.Start(cmd, child.Limits{})
	childEnd.Close()
	if err != nil {
		return -1, &UnavailableError{Op: "start the sandbox (user namespace)", Err: err}
	}
	exited := make(chan error, 1)
	go func() { exited <- wait() }()
	status := func(err error) int {
		if cmd.ProcessState == nil {
			return -1
		}
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return cmd.ProcessState.ExitCode()
	}

	type hello struct {
		msg string
		fd  int
		err error
	}
	got := make(chan hello, 1)
	go func() {
		buf := make([]byte, 4096)
		oob := make([]byte, unix.CmsgSpace(4))
		n, oobn, _, _, err := unix.Recvmsg(int(ctl.Fd()), buf, oob, unix.MSG_CMSG_CLOEXEC)
		h := hello{msg: string(buf[:max(n, 0)]), fd: -1, err: err}
		if err == nil && oobn > 0 {
			if cms, perr := unix.ParseSocketControlMessage(oob[:oobn]); perr == nil && len(cms) == 1 {
				if rights, rerr := unix.ParseUnixRights(&cms[0]); rerr == nil && len(rights) == 1 {
					h.fd = rights[0]
				}
			}
		}
		got <- h
	}()

	if testHookReading != nil {
		testHookReading()
	}

	// ended reaps init once; every return below waits for it, and for the
	// reader, which must be done with ctl before the deferred Close.
	var werr error
	reaped := false
	ended := func() error {
		if !reaped {
			werr, reaped = <-exited, true
		}
		return werr
	}
	var h hello
	select {
	case h = <-got:
	case werr = <-exited:
		// Init ended, so its end of the socket is closed and the reader
		// returns with what init said, if anything. A command that ends at
		// once ends init just after its ready message: then both are
		// waiting here, and the message decides.
		reaped = true
		h = <-got
	case <-ctx.Done():
		cmd.Process.Kill()
		ended()
		if h := <-got; h.fd >= 0 {
			unix.Close(h.fd)
		}
		return -1, ctx.Err()
	}
	switch {
	case h.err != nil || h.msg == "":
		if reaped {
			// Init ended before saying anything: it could not start.
			return -1, &UnavailableError{Op: "sandbox init", Err: fmt.Errorf("exited (status %d) before the sandbox was ready: %v", status(werr), werr)}
		}
		cmd.Process.Kill()
		ended()
		return -1, &UnavailableError{Op: "sandbox init", Err: fmt.Errorf("no answer: %v", h.err)}
	case strings.HasPrefix(h.msg, msgSetup):
		ended()
		return -1, &UnavailableError{Op: strings.TrimPrefix(h.msg, msgSetup)}
	case strings.HasPrefix(h.msg, msgStart):
		ended()
		return -1, &StartError{Err: errors.New(strings.TrimPrefix(h.msg, msgStart))}
	case h.msg != msgOK || h.fd < 0:
		if h.fd >= 0 {
			unix.Close(h.fd)
		}
		cmd.Process.Kill()
		ended()
		return -1, &UnavailableError{Op: "sandbox init", Err: fmt.Errorf("unexpected answer %q", h.msg)}
	}
	if reaped {
		// The command ran and ended before the proxy was served: nothing
		// can reach the listener any more.
		unix.Close(h.fd)
		return status(werr), nil
	}
	lf := os.NewFile(uintptr(h.fd), "sandbox-proxy-listener")
	ln, err := net.FileListener(lf)
	lf.Close()
	if err != nil {
		cmd.Process.Kill()
		ended()
		return -1, &UnavailableError{Op: "proxy listener", Err: err}
	}
	served := make(chan error, 1)
	go func() { served <- cfg.Outside.Serve(ln) }()

	select {
	case werr = <-exited:
	case <-ctx.Done():
		// Init passes SIGTERM on to the command; everything dies with
		// init at the latest after the grace period.
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case werr = <-exited:
		case <-time.After(killGrace):
			cmd.Process.Kill()
			werr = <-exited
		}
	}
	ln.Close()
	if serr := <-served; serr != nil && !errors.Is(serr, net.ErrClosed) && cfg.Logger != nil {
		cfg.Logger.Warn("exec proxy stopped", slog.String("error", serr.Error()))
	}
	return status(werr), nil
}

// hostSockets returns the paths of the Unix sockets bound in this
// process's network namespace (/proc/net/unix), which the sandbox covers
// one by one: a path socket is reachable from any network namespace.
func hostSockets() []string {
	f, err := os.Open("/proc/net/unix")
	if err != nil {
		return nil
	}
	defer f.Close()
	seen := map[string]bool{}
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() && len(out) < maxHostSockets {
		fs := strings.Fields(sc.Text())
		if len(fs) < 8 || !strings.HasPrefix(fs[7], "/") || seen[fs[7]] {
			continue
		}
		seen[fs[7]] = true
		out = append(out, fs[7])
	}
	return out
}
