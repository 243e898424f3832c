package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/airlockhq/airlock/internal/child"
)

func init() {
	if js, ok := os.LookupEnv(initEnv); ok {
		os.Exit(sandboxInit(js))
	}
}

// hiddenDirs get an empty tmpfs: where the host keeps its sockets (nscd,
// systemd-resolved, D-Bus, Docker, Redis) and temporary files.
var hiddenDirs = []string{"/tmp", "/var/tmp", "/run", "/var/run", "/dev/shm"}

// resolvConf sends the command's resolver to its own loopback, where no
// DNS server listens: a query fails at once. Names are the proxy's.
const resolvConf = "# airlock exec: no DNS inside the sandbox; the proxy resolves names\nnameserver 127.0.0.1\noptions timeout:1 attempts:1\n"

// sandboxInit is PID 1 of the sandbox: it builds the sandbox, hands the
// proxy listener to the parent, runs the command without privileges,
// reaps every process and returns the command's exit code.
func sandboxInit(js string) int {
	os.Unsetenv(initEnv)
	os.Unsetenv(child.ParentEnv)
	// Descriptors the caller held without close-on-exec (ones airlock
	// inherited from its own launcher: a harness's socket in the host's
	// network namespace, a pipe) came through the fork; none is ours.
	closeInherited()
	unix.Close(exeFD)
	unix.CloseOnExec(ctlFD)
	// Nothing of ours can be read or traced by the command.
	unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	say := func(msg string, fd int) {
		var oob []byte
		if fd >= 0 {
			oob = unix.UnixRights(fd)
		}
		unix.Sendmsg(ctlFD, []byte(msg), oob, nil, 0)
	}
	var sp spec
	if err := json.Unmarshal([]byte(js), &sp); err != nil {
		say(msgSetup+"spec: "+err.Error(), -1)
		return 125
	}
	lnFile, err := build(&sp)
	var hd *hiddenDirError
	if errors.As(err, &hd) {
		say(msgStart+err.Error(), -1)
		return 127
	}
	if err != nil {
		say(msgSetup+err.Error(), -1)
		return 125
	}
	// The command gets stdin, stdout and stderr, and nothing else.
	if err := cloexecFrom(3); err != nil {
		lnFile.Close()
		say(msgSetup+"close-on-exec: "+err.Error(), -1)
		return 125
	}
	pid, err := startCommand(&sp)
	if err != nil {
		lnFile.Close()
		say(msgStart+err.Error(), -1)
		return 127
	}
	say(msgOK, int(lnFile.Fd()))
	lnFile.Close()

	// The parent's end closing (the parent died) ends everything.
	go func() {
		buf := make([]byte, 16)
		for {
			n, _, _, _, err := unix.Recvmsg(ctlFD, buf, nil, 0)
			if err == unix.EINTR {
				continue
			}
			if n <= 0 || err != nil {
				unix.Kill(-1, unix.SIGKILL)
				os.Exit(137)
			}
		}
	}()
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, unix.SIGINT, unix.SIGTERM, unix.SIGHUP, unix.SIGQUIT, unix.SIGUSR1, unix.SIGUSR2, unix.SIGWINCH)
	go func() {
		for s := range sigs {
			unix.Kill(pid, s.(syscall.Signal))
		}
	}()
	return reap(pid)
}

// reap waits for every process of the namespace; when the command exits,
// the others are killed. It returns the command's code.
func reap(pid int) int {
	code := -1
	for {
		var ws unix.WaitStatus
		p, err := unix.Wait4(-1, &ws, 0, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil { // ECHILD: nothing is left
			if code < 0 {
				code = 125
			}
			return code
		}
		if p != pid {
			continue
		}
		switch {
		case ws.Exited():
			code = ws.ExitStatus()
		case ws.Signaled():
			code = 128 + int(ws.Signal())
		default:
			continue
		}
		// From PID 1, -1 is every other process of the namespace.
		unix.Kill(-1, unix.SIGKILL)
	}
}

// build makes the mount and network views and the proxy listener.
func build(sp *spec) (*os.File, error) {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return nil, fmt.Errorf("make / private: %w", err)
	}
	// Paths to show again are opened before anything covers them.
	var shown []shownPath
	for _, p := range sp.Show {
		fd, err := unix.Open(p, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, fmt.Errorf("show %s: %w", p, err)
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return nil, fmt.Errorf("show %s: %w", p, err)
		}
		shown = append(shown, shownPath{path: p, fd: fd, dir: st.Mode&unix.S_IFMT == unix.S_IFDIR})
	}
	for _, p := range sp.Hide {
		if underHidden(p) && !underAny(p, sp.Show) {
			continue // the tmpfs below covers it
		}
		if err := hide(p); err != nil {
			return nil, err
		}
	}
	var resolvTarget string
	if t, err := filepath.EvalSymlinks("/etc/resolv.conf"); err == nil && t != "/etc/resolv.conf" {
		resolvTarget = t
	}
	for _, d := range hiddenDirs {
		if fi, err := os.Lstat(d); err != nil || !fi.IsDir() {
			continue // missing, or a symlink into another hidden one
		}
		if err := unix.Mount("tmpfs", d, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777"); err != nil {
			return nil, fmt.Errorf("tmpfs over %s: %w", d, err)
		}
	}
	for _, s := range shown {
		if err := s.bind(); err != nil {
			return nil, err
		}
	}
	if err := writeResolvConf(resolvTarget); err != nil {
		return nil, err
	}
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return nil, fmt.Errorf("mount /proc: %w", err)
	}
	if err := loopbackUp(); err != nil {
		return nil, fmt.Errorf("bring up lo: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(int(sp.Port)))
	if err != nil {
		return nil, fmt.Errorf("proxy listener: %w", err)
	}
	f, err := ln.(*net.TCPListener).File()
	ln.Close()
	if err != nil {
		return nil, fmt.Errorf("proxy listener: %w", err)
	}
	if err := os.Chdir(sp.Dir); err != nil {
		f.Close()
		return nil, &hiddenDirError{dir: sp.Dir, err: err}
	}
	return f, nil
}

type hiddenDirError struct {
	dir string
	err error
}

func (e *hiddenDirError) Error() string {
	return fmt.Sprintf("the working directory %s is not visible inside the sandbox (%v); run from another directory, or show it with --show", e.dir, e.err)
}

// hide covers p: a directory with an empty read-only tmpfs, anything else
// with /dev/null. A path that is missing, or that this uid cannot reach
// (the command, with the same uid and no capability, cannot either), is
// left.
func hide(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return nil
	}
	if fi.IsDir() {
		err = unix.Mount("tmpfs", p, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC|unix.MS_RDONLY, "size=4k,mode=0555")
	} else {
		err = unix.Mount("/dev/null", p, "", unix.MS_BIND, "")
	}
	if err != nil && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.EACCES) {
		return fmt.Errorf("hide %s: %w", p, err)
	}
	return nil
}

type shownPath struct {
	path string
	fd   int
	dir  bool
}

// bind shows the path again, read-only, from the descriptor opened before
// it was covered.
func (s shownPath) bind() error {
	defer unix.Close(s.fd)
	if s.dir {
		if err := os.MkdirAll(s.path, 0o755); err != nil {
			return fmt.Errorf("show %s: %w", s.path, err)
		}
	} else {
		if err := os.MkdirAll(filepath.Dir(s.path), 0o755); err != nil {
			return fmt.Errorf("show %s: %w", s.path, err)
		}
		if f, err := os.OpenFile(s.path, os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
			f.Close()
		}
	}
	src := "/proc/self/fd/" + strconv.Itoa(s.fd)
	if err := unix.Mount(src, s.path, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("show %s: %w", s.path, err)
	}
	// A read-only remount keeps the flags the kernel locked on the source.
	var st unix.Statfs_t
	flags := uintptr(unix.MS_BIND | unix.MS_REMOUNT | unix.MS_RDONLY)
	if unix.Statfs(s.path, &st) == nil {
		for _, f := range []struct{ st, ms int64 }{
			{unix.ST_NOSUID, unix.MS_NOSUID}, {unix.ST_NODEV, unix.MS_NODEV}, {unix.ST_NOEXEC, unix.MS_NOEXEC},
			{unix.ST_NOATIME, unix.MS_NOATIME}, {unix.ST_NODIRATIME, unix.MS_NODIRATIME}, {unix.ST_RELATIME, unix.MS_RELATIME},
		} {
			if st.Flags&f.st != 0 {
				flags |= uintptr(f.ms)
			}
		}
	}
	if err := unix.Mount("", s.path, "", flags, ""); err != nil {
		return fmt.Errorf("show %s read-only: %w", s.path, err)
	}
	return nil
}

// writeResolvConf points the resolver at the namespace's loopback: a
// symlinked resolv.conf whose target was hidden gets the file at its
// target, a plain one is covered.
func writeResolvConf(target string) error {
	if target != "" && underHidden(target) {
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return fmt.Errorf("resolv.conf: %w", err)
		}
		return os.WriteFile(target, []byte(resolvConf), 0o644)
	}
	if _, err := os.Stat("/etc/resolv.conf"); err != nil {
		return nil // none: the resolver's default is the loopback too
	}
	const ours = "/run/airlock-exec/resolv.conf"
	if err := os.MkdirAll(filepath.Dir(ours), 0o755); err != nil {
		return fmt.Errorf("resolv.conf: %w", err)
	}
	if err := os.WriteFile(ours, []byte(resolvConf), 0o444); err != nil {
		return fmt.Errorf("resolv.conf: %w", err)
	}
	if err := unix.Mount(ours, "/etc/resolv.conf", "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("resolv.conf: %w", err)
	}
	return nil
}

func underHidden(p string) bool { return underAny(p, hiddenDirs) }

// underAny reports whether p is one of dirs or inside one.
func underAny(p string, dirs []string) bool {
	for _, d := range dirs {
		if p == d || strings.HasPrefix(p, strings.TrimSuffix(d, "/")+"/") {
			return true
		}
	}
	return false
}

// loopbackUp sets IFF_UP on lo. Any socket of the namespace takes the
// interface ioctls; a Unix socket pair opens no network.
func loopbackUp() error {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fds[0], unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fds[0], unix.SIOCSIFFLAGS, ifr)
}

// startCommand starts the command with no capability and no_new_privs,
// from a thread that has dropped them all (a child's credentials are its
// forking thread's).
func startCommand(sp *spec) (int, error) {
	type started struct {
		pid int
		err error
	}
	done := make(chan started, 1)
	go func() {
		// Never unlocked: the thread holds no privilege any more and ends
		// with this goroutine.
		runtime.LockOSThread()
		if err := dropPrivileges(); err != nil {
			done <- started{err: fmt.Errorf("drop privileges: %w", err)}
			return
		}
		path, err := exec.LookPath(sp.Args[0])
		if err != nil {
			done <- started{err: err}
			return
		}
		cmd := &exec.Cmd{Path: path, Args: sp.Args, Env: os.Environ(), Dir: sp.Dir,
			Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}
		// No parent-death signal: it would fire when this thread ends.
		// The command dies with init, PID 1 of its namespace.
		if err := cmd.Start(); err != nil {
			done <- started{err: err}
			return
		}
		done <- started{pid: cmd.Process.Pid}
	}()
	s := <-done
	return s.pid, s.err
}

// dropPrivileges leaves the calling thread with no capability in any set,
// an empty bounding set, no ambient capability and no_new_privs.
func dropPrivileges() error {
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return fmt.Errorf("clear ambient: %w", err)
	}
	for c := 0; c <= unix.CAP_LAST_CAP; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("drop %d from the bounding set: %w", c, err)
		}
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capset: %w", err)
	}
	return nil
}
