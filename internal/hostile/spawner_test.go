package hostile

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The case children are started by a spawner process, not by the test
// process itself. Linux keeps, in the ru_maxrss of a process that calls
// execve, the peak RSS of the address space it replaces; Go starts a child
// with clone(CLONE_VM|CLONE_VFORK), so that address space is the parent's,
// and a child started by the test process would report at least the test
// process's own peak (which the bombs and pages it serves raise). The
// spawner is started first, while the test process is small, and does
// nothing but start children, so the floor it passes on is small and the
// same for every case (it is part of baseRSS).
const (
	spawnerEnv    = "AIRLOCK_HOSTILE_SPAWNER"
	spawnerPrefix = "hostile-spawned "
)

// spawnRequest asks the spawner for one case child.
type spawnRequest struct {
	ID    int           `json:"id"`
	Case  string        `json:"case"`
	URL   string        `json:"url"`
	Limit time.Duration `json:"limit"` // killed past it
}

// spawnResult is how the child ended: its output, its error, its peak RSS
// (wait4's ru_maxrss, in KiB) and whether it was killed for time.
type spawnResult struct {
	ID       int    `json:"id"`
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr"`
	Err      string `json:"err"`
	Killed   bool   `json:"killed"`
	MaxRSSKB int64  `json:"max_rss_kb"`
}

// spawner is the parent's handle on the spawner process.
type spawner struct {
	mu      sync.Mutex
	in      io.Writer
	next    int
	waiting map[int]chan spawnResult
	dead    chan struct{} // closed when the spawner's output ends
}

func startSpawner(t *testing.T) *spawner {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestSpawner$", "-test.count=1")
	cmd.Env = append(os.Environ(), spawnerEnv+"=1")
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sp := &spawner{in: in, waiting: map[int]chan spawnResult{}, dead: make(chan struct{})}
	go func() {
		defer close(sp.dead)
		sc := bufio.NewScanner(out)
		sc.Buffer(nil, 64<<20)
		for sc.Scan() {
			line, ok := strings.CutPrefix(sc.Text(), spawnerPrefix)
			if !ok {
				continue
			}
			var r spawnResult
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				continue
			}
			sp.mu.Lock()
			ch := sp.waiting[r.ID]
			delete(sp.waiting, r.ID)
			sp.mu.Unlock()
			if ch != nil {
				ch <- r
			}
		}
	}()
	t.Cleanup(func() {
		in.Close() // the spawner ends when its input does
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	return sp
}

// run has the spawner run one case child and waits for it.
func (sp *spawner) run(t *testing.T, req spawnRequest) spawnResult {
	t.Helper()
	ch := make(chan spawnResult, 1)
	sp.mu.Lock()
	sp.next++
	req.ID = sp.next
	sp.waiting[req.ID] = ch
	b, _ := json.Marshal(req)
	_, err := fmt.Fprintf(sp.in, "%s\n", b)
	sp.mu.Unlock()
	if err != nil {
		t.Fatalf("spawner: %v", err)
	}
	select {
	case r := <-ch:
		return r
	case <-sp.dead:
		t.Fatal("the spawner died")
	case <-time.After(req.Limit + 30*time.Second):
		t.Fatal("the spawner did not answer")
	}
	return spawnResult{}
}

// TestSpawner is the spawner process: it reads spawn requests on standard
// input and answers each on standard output when its child has ended.
func TestSpawner(t *testing.T) {
	if os.Getenv(spawnerEnv) == "" {
		t.Skip("the spawner process of TestHostile")
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		var req spawnRequest
		if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
			t.Fatalf("spawn request %q: %v", sc.Text(), err)
		}
		wg.Go(func() {
			r := spawnChild(req)
			b, _ := json.Marshal(r)
			mu.Lock()
			fmt.Printf("%s%s\n", spawnerPrefix, b)
			mu.Unlock()
		})
	}
	wg.Wait()
}

func spawnChild(req spawnRequest) spawnResult {
	ctx, cancel := context.WithTimeout(context.Background(), req.Limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), caseEnv+"="+req.Case, urlEnv+"="+req.URL)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := spawnResult{ID: req.ID, Stdout: stdout.String(), Stderr: stderr.String(), Killed: ctx.Err() != nil}
	if err != nil {
		r.Err = err.Error()
	}
	if ps := cmd.ProcessState; ps != nil {
		if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
			r.MaxRSSKB = ru.Maxrss
		}
	} else if r.Err == "" {
		r.Err = "no process state"
	}
	return r
}
