// Package child starts helper processes that cannot outlive the process
// that started them, under kernel-enforced CPU and memory limits: the PDF
// reader (`airlock __pdftext`) today.
//
// Linux delivers a parent-death signal (Pdeathsig) when the thread that
// forked the child exits, not when the process does; a Go goroutine moves
// between threads and the runtime may end a thread. So Run starts and waits
// for the child on one goroutine locked to its OS thread for the child's
// whole life. The child calls Enter first: it sets the death signal again
// from its side, exits at once when it was already re-parented, and gives
// SIGTERM and SIGINT back their default action (the airlock command's main
// catches them for a graceful shutdown, which a child stuck in a parser
// never reaches).
//
// Linux only: the death signal, prlimit(2) and PR_SET_PDEATHSIG have no
// portable equivalent.
package child

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// ParentEnv is the environment variable through which Run tells the child
// its parent's pid, for Enter's re-parenting check.
const ParentEnv = "AIRLOCK_CHILD_PARENT"

// ErrCPULimit is wrapped by Run's error when the kernel killed the child at
// its CPU limit.
var ErrCPULimit = errors.New("child: killed at its CPU limit")

// ErrOrphaned is Enter's error when the parent that started the child is
// already gone.
var ErrOrphaned = errors.New("child: the parent process is gone")

// Limits are a child's resource limits, set with prlimit(2) on its pid as
// soon as it has started (before it has read any input). The zero value
// sets none.
type Limits struct {
	// CPU is the CPU time (user and system) after which the kernel kills
	// the child with SIGKILL: RLIMIT_CPU with soft = hard, in whole
	// seconds rounded up. The soft limit alone would only send SIGXCPU,
	// which the Go runtime ignores.
	CPU time.Duration
	// Data is RLIMIT_DATA in bytes: the private writable memory the child
	// may map (heap, stacks, anonymous mappings). A Go child past it dies
	// with "fatal error: runtime: out of memory". Address-space
	// reservations (PROT_NONE) do not count, so unlike RLIMIT_AS it does not
	// trip over the Go runtime's arena reservations.
	Data int64
}

// Run starts cmd, tied to this process and under lim (see Start), and
// waits for it, as cmd.Run does.
func Run(cmd *exec.Cmd, lim Limits) error {
	wait, err := Start(cmd, lim)
	if err != nil {
		return err
	}
	return wait()
}

// Start starts cmd tied to this process: the child gets SIGKILL when this
// process dies (the thread that started it lives until it has been waited
// for), lim is in force before Start returns, and ParentEnv is added to its
// environment. When setting a limit fails the child is killed and Start
// returns the error: a child never runs on without its limits. wait waits
// for the child (call it exactly once, instead of cmd.Wait); cmd.Process
// may be read once Start has returned.
//
// Errors: those of cmd.Start; wait's are those of cmd.Wait, and one
// wrapping ErrCPULimit when the kernel killed the child at lim.CPU.
func Start(cmd *exec.Cmd, lim Limits) (wait func() error, err error) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	cmd.Env = append(cmd.Environ(), ParentEnv+"="+strconv.Itoa(os.Getpid()))

	started := make(chan error, 1)
	done := make(chan error, 1)
	go func() {
		// Never unlocked: the thread ends with the goroutine, after the
		// child has been reaped, and no other goroutine ever runs on it.
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		if err := setLimits(cmd.Process.Pid, lim); err != nil {
			cmd.Process.Kill()
			cmd.Wait()
			started <- fmt.Errorf("child: set limits: %w", err)
			return
		}
		started <- nil
		done <- cpuLimited(cmd.Wait(), cmd.ProcessState, lim.CPU)
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return func() error { return <-done }, nil
}

func setLimits(pid int, lim Limits) error {
	if lim.CPU > 0 {
		secs := uint64((lim.CPU + time.Second - 1) / time.Second)
		if err := unix.Prlimit(pid, unix.RLIMIT_CPU, &unix.Rlimit{Cur: secs, Max: secs}, nil); err != nil {
			return fmt.Errorf("RLIMIT_CPU: %w", err)
		}
	}
	if lim.Data > 0 {
		n := uint64(lim.Data)
		if err := unix.Prlimit(pid, unix.RLIMIT_DATA, &unix.Rlimit{Cur: n, Max: n}, nil); err != nil {
			return fmt.Errorf("RLIMIT_DATA: %w", err)
		}
	}
	return nil
}

// cpuLimited wraps ErrCPULimit into err when the child was killed with
// SIGKILL after using its whole CPU allowance.
func cpuLimited(err error, ps *os.ProcessState, limit time.Duration) error {
	if err == nil || ps == nil || limit <= 0 {
		return err
	}
	ws, ok := ps.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		return err
	}
	used := ps.UserTime() + ps.SystemTime()
	secs := (limit + time.Second - 1) / time.Second * time.Second
	// The kernel kills at the limit by the scheduler's precise clock; the
	// user and system times wait4 reports are sampled on ticks and scaled,
	// and come out up to a few percent lower (927 ms for a 1 s limit seen
	// under the race detector). A SIGKILL after three quarters of the
	// allowance is the limit's: nothing else here kills with SIGKILL but
	// the caller's own timeout, which it knows about.
	if used*4 < secs*3 {
		return err
	}
	return fmt.Errorf("%w (%s of CPU): %w", ErrCPULimit, used.Round(time.Millisecond), err)
}

// Enter is the first thing a child that Run started does. It restores the
// default action of SIGTERM and SIGINT (so either ends it at once), asks
// the kernel for SIGKILL when its parent dies, and returns ErrOrphaned when
// its parent is already gone (re-parented before it got here); the caller
// then exits at once. Outside a child of Run (no ParentEnv) only the first
// two happen.
func Enter() error {
	signal.Reset(syscall.SIGTERM, syscall.SIGINT)
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(syscall.SIGKILL), 0, 0, 0); err != nil {
		return fmt.Errorf("child: PR_SET_PDEATHSIG: %w", err)
	}
	want := os.Getenv(ParentEnv)
	if want == "" {
		return nil
	}
	if got := os.Getppid(); strconv.Itoa(got) != want {
		return fmt.Errorf("%w (parent %s, now %d)", ErrOrphaned, want, got)
	}
	return nil
}
