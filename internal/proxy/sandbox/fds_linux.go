package sandbox

import (
	"errors"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// The command gets stdin, stdout and stderr and no other descriptor. Go
// sets close-on-exec on every descriptor it opens, but a descriptor this
// process inherited without it (from an agent harness: a socket in the
// host's network namespace, a pipe) passes through every fork and exec:
// into the sandbox's init and from there into the command, a way out
// past the proxy. So Run marks this process's descriptors close-on-exec
// before it starts init (init gets only what ExtraFiles passes), init
// closes any other that still came through (one made in between by
// another goroutine), and marks all of its own close-on-exec before it
// starts the command.

// closeInherited closes every descriptor above stderr that init did not
// open and was not meant to get: the caller passes the control socket and
// the binary (ctlFD, exeFD); anything else without close-on-exec came
// through the fork by accident (what the runtime opens is close-on-exec).
// Without /proc it closes nothing: cloexecFrom still keeps such
// descriptors from the command.
func closeInherited() {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil || fd <= 2 || fd == ctlFD || fd == exeFD {
			continue
		}
		if flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err == nil && flags&unix.FD_CLOEXEC == 0 {
			unix.Close(fd)
		}
	}
}

// cloexecFrom marks every descriptor from first up close-on-exec:
// close_range(2) where the kernel has it (5.11), else one by one from
// /proc/self/fd. It fails when neither works.
func cloexecFrom(first int) error {
	err := unix.CloseRange(uint(first), ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	if err == nil {
		return nil
	}
	if !errors.Is(err, unix.ENOSYS) && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.EPERM) {
		return fmt.Errorf("close_range: %w", err)
	}
	if werr := cloexecWalk(first); werr != nil {
		return fmt.Errorf("close_range: %v; %w", err, werr)
	}
	return nil
}

// cloexecWalk is cloexecFrom without close_range(2).
func cloexecWalk(first int) error {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return err
	}
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil || fd < first {
			continue
		}
		// EBADF: ReadDir's own descriptor, closed since.
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC); err != nil && !errors.Is(err, unix.EBADF) {
			return fmt.Errorf("close-on-exec %d: %w", fd, err)
		}
	}
	return nil
}
