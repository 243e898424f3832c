package child

import (
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// A process tree dies with its root only by the kernel's hand when the root
// is PID 1 of a PID namespace: when it exits, the kernel kills every other
// process in the namespace. InPIDNamespace puts a program there. The
// program also needs a /proc of that namespace (Chromium writes
// /proc/PID/oom_score_adj of its renderers by their pid: with the host's
// /proc, that pid names another process), and mounting one takes a step
// between clone and exec that os/exec has no hook for. So the command
// re-executes this binary (/proc/self/exe) with nsExecEnv set; this
// package's init, which runs before main or TestMain, sees it, mounts /proc
// in the new mount namespace and executes the program in its place.

// nsExecEnv names the program that the re-executed binary becomes; the
// empty value only mounts /proc and exits 0 (the probe).
const nsExecEnv = "AIRLOCK_CHILD_PIDNS_EXEC"

func init() {
	if path, ok := os.LookupEnv(nsExecEnv); ok {
		nsInit(path) // never returns
	}
}

// nsInit runs as PID 1 of the new namespace: it mounts the namespace's
// /proc and becomes path.
func nsInit(path string) {
	os.Unsetenv(nsExecEnv)
	err := mountProc()
	if err == nil && path == "" {
		os.Exit(0)
	}
	if err == nil {
		err = syscall.Exec(path, os.Args, os.Environ())
	}
	fmt.Fprintf(os.Stderr, "airlock: PID namespace for %s: %v\n", path, err)
	os.Exit(126)
}

func mountProc() error {
	// Private first, so that the new /proc does not propagate to the
	// parent's mount namespace.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make / private: %w", err)
	}
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount /proc: %w", err)
	}
	return nil
}

var pidns struct {
	once sync.Once
	err  error
}

// PIDNamespaces reports whether this process may start children in new
// PID and mount namespaces (root, or CAP_SYS_ADMIN, and no seccomp policy
// against it): nil when it may. The first call starts a probe child; the
// answer is kept.
func PIDNamespaces() error {
	pidns.once.Do(func() {
		cmd := exec.Command("/proc/self/exe")
		cmd.Env = append(os.Environ(), nsExecEnv+"=")
		cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID | syscall.CLONE_NEWNS, Pdeathsig: syscall.SIGKILL}
		if out, err := cmd.CombinedOutput(); err != nil {
			pidns.err = fmt.Errorf("child: PID namespace probe: %v %s", err, out)
		}
	})
	return pidns.err
}

// InPIDNamespace rewrites cmd, not yet started, to run as PID 1 of new PID
// and mount namespaces with a /proc of its own, so that every process it
// starts dies when it does; it also asks for SIGKILL when the thread that
// starts it exits (start it from a locked thread, as Run does). It returns
// PIDNamespaces' error, and leaves cmd with only the death signal, when
// namespaces are not permitted here.
//
// The program then runs as PID 1: only SIGKILL and the signals it handles
// reach it, and it inherits the orphans of its tree.
func InPIDNamespace(cmd *exec.Cmd) error {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	if err := PIDNamespaces(); err != nil {
		return err
	}
	cmd.SysProcAttr.Cloneflags |= syscall.CLONE_NEWPID | syscall.CLONE_NEWNS
	cmd.Env = append(cmd.Environ(), nsExecEnv+"="+cmd.Path)
	cmd.Path = "/proc/self/exe"
	return nil
}
