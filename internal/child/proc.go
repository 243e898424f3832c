package child

import (
	"bytes"
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
// match accepts.
func Find(match func(args []string) bool) []Proc {
	return scan(nil, match)
}

func scan(keep func(Proc) bool, match func(args []string) bool) []Proc {
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
			if err != nil || !match(strings.Split(string(bytes.TrimSuffix(b, []byte{0})), "\x00")) {
				continue
			}
		}
		out = append(out, p)
	}
	return out
}
