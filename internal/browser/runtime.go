package browser

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/airlockhq/airlock/internal/child"
)

// Runtime records, in a directory of its own, the user-data-dir of every
// browser this process runs, so that a later process can kill what a dead
// one left behind (Sweep). Chromium passes --user-data-dir to every helper
// process it starts (zygotes, renderers, GPU and network services), so the
// directory names the whole tree without a process group.
//
// A Runtime only ever kills processes whose command line carries a
// --user-data-dir recorded in its directory by a process that is no longer
// running: never a live owner's browsers, never another Chromium. Its
// methods are safe for concurrent use; the zero value and nil record
// nothing.
type Runtime struct {
	dir string
}

// NewRuntime returns the Runtime whose records live in dir. Nothing is read
// or created until Sweep or a launch.
func NewRuntime(dir string) *Runtime { return &Runtime{dir: dir} }

// runtimeRecord is one file of the directory: a browser and its owner.
type runtimeRecord struct {
	OwnerPID    int    `json:"owner_pid"`
	OwnerStart  uint64 `json:"owner_start"` // clock ticks after boot: with the pid, one process
	UserDataDir string `json:"user_data_dir"`
}

// checkDir creates the directory (mode 0700) when create is set and checks
// that it is a directory of this user that nobody else may write to; a
// record there decides what gets killed.
func (r *Runtime) checkDir(create bool) error {
	if create {
		if err := os.MkdirAll(r.dir, 0o700); err != nil {
			return err
		}
	}
	fi, err := os.Lstat(r.dir)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.IsDir():
		return fmt.Errorf("%s is not a directory", r.dir)
	case !ok || int(st.Uid) != os.Geteuid():
		return fmt.Errorf("%s is not owned by this user", r.dir)
	case fi.Mode().Perm()&0o022 != 0:
		return fmt.Errorf("%s is writable by others (mode %v)", r.dir, fi.Mode().Perm())
	}
	return nil
}

// add records userDataDir as a browser of this process; remove deletes the
// record once the browser and its helpers are gone.
func (r *Runtime) add(userDataDir string) (remove func(), err error) {
	if r == nil || r.dir == "" {
		return func() {}, nil
	}
	if err := r.checkDir(true); err != nil {
		return nil, fmt.Errorf("browser runtime directory: %w", err)
	}
	self, ok := child.ReadProc(os.Getpid())
	if !ok {
		return nil, errors.New("browser runtime: cannot read this process's /proc entry")
	}
	b, err := json.Marshal(runtimeRecord{OwnerPID: self.PID, OwnerStart: self.Start, UserDataDir: userDataDir})
	if err != nil {
		return nil, err
	}
	var rnd [8]byte
	rand.Read(rnd[:])
	name := filepath.Join(r.dir, fmt.Sprintf("%d-%d-%s.json", self.PID, self.Start, hex.EncodeToString(rnd[:])))
	tmp := name + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return nil, fmt.Errorf("browser runtime record: %w", err)
	}
	if err := os.Rename(tmp, name); err != nil {
		os.Remove(tmp)
		return nil, fmt.Errorf("browser runtime record: %w", err)
	}
	return func() { os.Remove(name) }, nil
}

// Sweep kills the leftover browsers of owners that are no longer running
// (a process killed with SIGKILL, a crash, an OOM kill) and removes their
// records. It returns how many processes it killed. A missing directory
// is no error; one that another user owns or may write to is, and then
// nothing is killed.
func (r *Runtime) Sweep() (int, error) {
	if r == nil || r.dir == "" {
		return 0, nil
	}
	if err := r.checkDir(false); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return 0, nil
		}
		return 0, fmt.Errorf("browser runtime directory: %w", err)
	}
	ents, err := os.ReadDir(r.dir)
	if err != nil {
		return 0, err
	}
	killed := 0
	for _, e := range ents {
		path := filepath.Join(r.dir, e.Name())
		if strings.HasSuffix(e.Name(), ".tmp") {
			if fi, err := e.Info(); err == nil && time.Since(fi.ModTime()) > time.Minute {
				os.Remove(path)
			}
			continue
		}
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		var rec runtimeRecord
		if json.Unmarshal(b, &rec) != nil || rec.UserDataDir == "" || !filepath.IsAbs(rec.UserDataDir) {
			os.Remove(path)
			continue
		}
		if owner := (child.Proc{PID: rec.OwnerPID, Start: rec.OwnerStart}); owner.Running() {
			continue
		}
		killed += killLeftovers(rec.UserDataDir)
		os.Remove(path)
	}
	return killed, nil
}

// killLeftovers kills the processes whose command line carries
// --user-data-dir=dir, looking again until a few passes in a row find
// none (a zygote may fork while it is being killed), for at most two
// seconds. It returns how many it killed.
func killLeftovers(dir string) int {
	arg := "--user-data-dir=" + dir
	match := func(cmdline string) bool { return child.HasArg(cmdline, arg) }
	const quietPasses = 3
	n := 0
	deadline := time.Now().Add(2 * time.Second)
	for quiet := 0; quiet < quietPasses && time.Now().Before(deadline); {
		found := child.Find(match)
		for _, p := range found {
			p.Kill()
		}
		n += len(found)
		if len(found) == 0 {
			quiet++
		} else {
			quiet = 0
		}
		time.Sleep(10 * time.Millisecond)
	}
	return n
}
