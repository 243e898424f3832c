package browser

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/airlockhq/airlock/internal/child"
)

// startOrphanChromium starts a Chromium tree on userDataDir the way a dead
// airlock leaves one behind: in its own session, tied to nothing. Its
// traffic could only go to a closed loopback port. The test's cleanup
// kills whatever is left of it.
func startOrphanChromium(t *testing.T, userDataDir string) {
	t.Helper()
	cmd := exec.Command(DefaultExecPath, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
		"--disable-background-networking", "--proxy-server=http://127.0.0.1:9", "--host-resolver-rules=MAP * ~NOTFOUND",
		"--remote-debugging-port=0", "--user-data-dir="+userDataDir, "about:blank")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go cmd.Wait() // reap the browser itself when it is killed
	t.Cleanup(func() { killLeftovers(userDataDir) })
}

// treeOf lists the processes whose command line carries userDataDir.
func treeOf(userDataDir string) []child.Proc {
	arg := "--user-data-dir=" + userDataDir
	return child.Find(func(c string) bool { return child.HasArg(c, arg) })
}

// waitTree waits until Chromium on userDataDir runs at least n processes.
func waitTree(t *testing.T, userDataDir string, n int) []child.Proc {
	t.Helper()
	deadline := time.Now().Add(testTimeout) // hang guard
	for {
		if ps := treeOf(userDataDir); len(ps) >= n {
			return ps
		}
		if time.Now().After(deadline) {
			t.Fatalf("Chromium on %s never ran %d processes", userDataDir, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRuntimeSweep: the sweep kills the Chromium tree recorded by an owner
// that is gone, and leaves alone the browser of a live owner (this
// process) and a Chromium it has no record of.
func TestRuntimeSweep(t *testing.T) {
	t.Parallel()
	requireChromium(t)
	root := t.TempDir()
	rt := NewRuntime(filepath.Join(root, "run"))

	// A live owner's session: recorded by this process.
	s, _ := open(t, func(o *Options) { o.Runtime = rt })
	live := s.opts.ProfileDir
	waitTree(t, live, 3)

	// A dead owner's browser: the record names a process that had this
	// pid before (another start time), so is gone.
	dead := filepath.Join(root, "dead", "profile")
	startOrphanChromium(t, dead)
	// A Chromium nobody recorded, whose directory extends the dead one's.
	other := dead + "-other"
	startOrphanChromium(t, other)
	before := waitTree(t, dead, 3)
	waitTree(t, other, 3)
	self, _ := child.ReadProc(os.Getpid())
	b, _ := json.Marshal(runtimeRecord{OwnerPID: self.PID, OwnerStart: self.Start + 1, UserDataDir: dead})
	deadRecord := filepath.Join(rt.dir, "dead.json")
	if err := os.WriteFile(deadRecord, b, 0o600); err != nil {
		t.Fatal(err)
	}

	n, err := rt.Sweep()
	if err != nil {
		t.Fatal(err)
	}
	// Chromium's helpers may exit on their own between the count and the
	// sweep, so the sweep's count is only bounded below by one: what
	// matters is that none of the tree is left.
	if left := treeOf(dead); len(left) != 0 || n < 1 {
		t.Errorf("the sweep killed %d processes; %d of the dead owner's %d are left", n, len(left), len(before))
	}
	if _, err := os.Stat(deadRecord); !os.IsNotExist(err) {
		t.Errorf("the dead owner's record stays: %v", err)
	}
	// Chromium's helper processes come and go (a utility process exits,
	// another starts), so a count is read until it settles: a tree the
	// sweep killed never comes back.
	for deadline := time.Now().Add(5 * time.Second); len(treeOf(live)) < 3 || len(treeOf(other)) < 3; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) { // hang guard
			t.Errorf("the sweep killed processes it does not own: live %d, unrecorded %d", len(treeOf(live)), len(treeOf(other)))
			break
		}
	}
	if _, err := s.GetState(testCtx(t)); err != nil {
		t.Errorf("the live session after the sweep: %v", err)
	}

	// Close removes the live session's record.
	if err := s.Close(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(rt.dir); len(ents) != 0 {
		t.Errorf("records left after Close: %v", ents)
	}
}

// TestRuntimeRefusesForeignDirectory: records in a directory others may
// write to decide nothing.
func TestRuntimeRefusesForeignDirectory(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "run")
	if err := os.Mkdir(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	rt := NewRuntime(dir)
	if _, err := rt.Sweep(); err == nil {
		t.Error("Sweep accepted a world-writable directory")
	}
	if _, err := rt.add("/nonexistent/profile"); err == nil {
		t.Error("add accepted a world-writable directory")
	}
	if n, err := NewRuntime(filepath.Join(dir, "absent")).Sweep(); n != 0 || err != nil {
		t.Errorf("Sweep of a missing directory: %d, %v", n, err)
	}
}
