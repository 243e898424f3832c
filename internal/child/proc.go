package child

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Proc is a process as /proc/PID/stat shows it. PID and Start together
// name one process: a pid is reused, its start time is not.
type Proc struct {
	PID   int
	PPID  int
	State byte          // R, S, D, Z (zombie), ...
	CPU   time.Duration // user and system time
	Start uint64        // start time, in clock ticks after boot
}

// clockTick is USER_HZ, 100 on every architecture Linux and Go share.
const clockTick = 10 * time.Millisecond

// ReadProc reads /proc/PID/stat; false when there is no such process.
func ReadProc(pid int) (Proc, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return Proc{}, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')') // the command name may hold anything
	if i < 0 {
		return Proc{}, false
	}
	f := strings.Fields(s[i+1:]) // f[0] is field 3, the state
	if len(f) < 20 || f[0] == "" {
		return Proc{}, false
	}
	num := func(field int) uint64 { n, _ := strconv.ParseUint(f[field-3], 10, 64); return n }
	return Proc{PID: pid, PPID: int(num(4)), State: f[0][0],
		CPU: time.Duration(num(14)+num(15)) * clockTick, Start: num(22)}, true
}

// Alive reports whether the process has not exited (a zombie has).
func (p Proc) Alive() bool { return p.State != 'Z' && p.State != 'X' }

// Running reports whether p.PID still names this process, alive.
func (p Proc) Running() bool {
	now, ok := ReadProc(p.PID)
	return ok && now.Start == p.Start && now.Alive()
}

// Kill sends SIGKILL to the process if p.PID still names it.
func (p Proc) Kill() {
	if p.PID > 0 && p.Running() {
		syscall.Kill(p.PID, syscall.SIGKILL)
	}
}

// Children lists the live children of ppid.
func Children(ppid int) []Proc {
	return scan(func(p Proc) bool { return p.PPID == ppid }, nil)
}

// Find lists the live processes, this one excepted, whose command line
// match accepts: /proc/PID/cmdline as it is, arguments ended by NUL bytes
// (a process that rewrote its title, as Chromium's helpers do, may have
// one argument with spaces instead; see HasArg).
func Find(match func(cmdline string) bool) []Proc {
	return scan(nil, match)
}

func scan(keep func(Proc) bool, match func(cmdline string) bool) []Proc {
	ents, _ := os.ReadDir("/proc")
	self := os.Getpid()
	var out []Proc
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		p, ok := ReadProc(pid)
		if !ok || !p.Alive() || keep != nil && !keep(p) {
			continue
		}
		if match != nil {
			b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
			if err != nil || !match(string(b)) {
				continue
			}
		}
		out = append(out, p)
	}
	return out
}

// HasArg reports whether cmdline (as Find gives it) holds arg as a whole
// argument: at the start or after a NUL or a space, and followed by a NUL,
// a space or the end.
func HasArg(cmdline, arg string) bool {
	for i := 0; ; {
		j := strings.Index(cmdline[i:], arg)
		if j < 0 {
			return false
		}
		j += i
		end := j + len(arg)
		if (j == 0 || sep(cmdline[j-1])) && (end == len(cmdline) || sep(cmdline[end])) {
			return true
		}
		i = j + 1
	}
}

func sep(c byte) bool { return c == 0 || c == ' ' }
