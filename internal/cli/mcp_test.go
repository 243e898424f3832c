package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/airlockhq/airlock/internal/leakcheck"
	sdkmcp "github.com/modelcontextprotocol/go-sdk/mcp"
)

func mcpClient() *sdkmcp.Client {
	return sdkmcp.NewClient(&sdkmcp.Implementation{Name: "cli-test-agent", Version: "1"}, nil)
}

func mcpCall(t *testing.T, ctx context.Context, cs *sdkmcp.ClientSession, name string, args map[string]any) (string, bool) {
	t.Helper()
	res, err := cs.CallTool(ctx, &sdkmcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("CallTool(%s): protocol error %v", name, err)
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*sdkmcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String(), res.IsError
}

// lockedBuffer is a bytes.Buffer safe for a writer and a reader in two
// goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startMCP runs `airlock mcp args...` in process on pipes and connects the
// SDK's client to it. wait closes the client and returns the exit code.
func startMCP(t *testing.T, ctx context.Context, environ []string, args ...string) (cs *sdkmcp.ClientSession, stderr *lockedBuffer, wait func() int, err error) {
	t.Helper()
	cr, sw := io.Pipe() // server → client
	sr, cw := io.Pipe() // client → server
	stderr = &lockedBuffer{}
	e := &env{stdin: sr, stdout: sw, stderr: stderr, environ: environ, tty: noTerminal}
	done := make(chan int, 1)
	go func() {
		code := run(ctx, e, append([]string{"mcp"}, args...), commands)
		sw.Close()
		sr.Close()
		done <- code
	}()
	wait = func() int {
		if cs != nil {
			cs.Close()
		} else {
			cw.Close()
		}
		select {
		case code := <-done:
			return code
		case <-time.After(60 * time.Second): // hang guard
			t.Fatal("airlock mcp did not end after its client left")
			return -1
		}
	}
	cs, err = mcpClient().Connect(ctx, &sdkmcp.IOTransport{Reader: cr, Writer: cw}, nil)
	return cs, stderr, wait, err
}

// TestMCPCommand runs `airlock mcp` in process: the policy flags apply,
// the tools work, and the audit log has the calls once the client left.
func TestMCPCommand(t *testing.T) {
	t.Parallel()
	srv := browseSite()
	defer srv.Close()
	dd := t.TempDir()
	ctx := context.Background()

	cs, stderr, wait, err := startMCP(t, ctx, nil, "--data-dir", dd, "--except", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	tools, err := cs.ListTools(ctx, nil)
	if err != nil || len(tools.Tools) != 26 {
		t.Fatalf("ListTools: %v %v", tools, err)
	}
	if out, isErr := mcpCall(t, ctx, cs, "web_fetch", map[string]any{"url": srv.URL + "/"}); isErr || !strings.Contains(out, "# Page /") {
		t.Errorf("web_fetch: %v\n%s", isErr, out)
	}
	if out, isErr := mcpCall(t, ctx, cs, "web_fetch", map[string]any{"url": "http://10.0.0.5/"}); !isErr || !strings.HasPrefix(out, "denied (private): ") {
		t.Errorf("web_fetch of a private address: %v %q", isErr, out)
	}
	if code := wait(); code != 0 {
		t.Fatalf("exit %d, stderr %q", code, stderr.String())
	}
	r := invoke(t, ctx, "", []string{"audit", "query", "--data-dir", dd, "--broker", "fetch", "--format", "json"})
	if strings.Count(r.stdout, "\n") != 2 || !strings.Contains(r.stdout, `"outcome":"deny"`) || !strings.Contains(r.stdout, `"tenant":"local"`) {
		t.Errorf("audit after the session:\n%s", r.stdout)
	}
}

// TestMCPCommandToken checks that AIRLOCK_TOKEN picks the principal: the
// tenant acme may reach the loopback, local may not.
func TestMCPCommandToken(t *testing.T) {
	t.Parallel()
	srv := browseSite()
	defer srv.Close()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "airlock.yaml")
	yaml := "data_dir: " + filepath.Join(dir, "data") + "\ntenants:\n  local:\n    profile: posix\n  acme:\n    profile: network\n    exceptions: [\"127.0.0.1\"]\n"
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	r := invoke(t, ctx, "", []string{"token", "create", "--config", cfg, "--tenant", "acme"})
	token := strings.TrimSpace(r.stdout)
	if r.code != 0 || !strings.HasPrefix(token, "alk_") {
		t.Fatalf("token create: %d %q %q", r.code, r.stdout, r.stderr)
	}

	for _, tc := range []struct {
		name    string
		environ []string
		denied  bool
	}{
		{"token of acme", []string{"AIRLOCK_CONFIG=" + cfg, "AIRLOCK_TOKEN=" + token}, false},
		{"no token: local", []string{"AIRLOCK_CONFIG=" + cfg}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs, stderr, wait, err := startMCP(t, ctx, tc.environ)
			if err != nil {
				t.Fatal(err)
			}
			out, isErr := mcpCall(t, ctx, cs, "web_fetch", map[string]any{"url": srv.URL + "/a"})
			if isErr != tc.denied || tc.denied && !strings.HasPrefix(out, "denied (loopback)") {
				t.Errorf("web_fetch: error %v, want %v: %s", isErr, tc.denied, out)
			}
			if code := wait(); code != 0 {
				t.Errorf("exit %d: %s", code, stderr.String())
			}
		})
	}

	// A bad token is refused before serving: exit 3, the reason on stderr.
	cs, stderr, wait, err := startMCP(t, ctx, []string{"AIRLOCK_CONFIG=" + cfg, "AIRLOCK_TOKEN=alk_wrong"})
	if err == nil {
		cs.Close()
	}
	if code := wait(); code != 3 || !strings.Contains(stderr.String(), "unknown token") {
		t.Errorf("bad token: exit %d, stderr %q", code, stderr.String())
	}
}

// buildAirlock builds the airlock command into a temporary directory.
func buildAirlock(t *testing.T) string {
	t.Helper()
	bin, err := airlockBinary()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// airlockBinary builds ./cmd/airlock into buildDir once per test binary,
// for the tests that run it (TestMCPBinaryStdio, TestPDFChildBinary, ...):
// two links of the whole program, at the same time, cost more than the
// tests themselves.
var airlockBinary = sync.OnceValues(func() (string, error) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("the go command is needed to build airlock for this test: %v", err)
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		return "", err
	}
	bin := filepath.Join(buildDir, "airlock")
	cmd := exec.Command(gobin, "build", "-o", bin, "./cmd/airlock")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/airlock: %v\n%s", err, out)
	}
	return bin, nil
})

func TestMain(m *testing.M) {
	// Most of this package's tests wait (Chromium, the sandbox, child
	// processes, servers) rather than compute.
	leakcheck.RaiseParallel(max(8, runtime.GOMAXPROCS(0)))
	var err error
	if buildDir, err = os.MkdirTemp("", "airlock-cli-test-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// Start building what the tests run now, while the first tests run,
	// rather than when the first test that needs it asks (each takes
	// many seconds).
	building := !testing.Short()
	if building {
		go airlockBinary()
	}
	go guests()
	code := m.Run()
	// Never remove buildDir under a build still writing to it.
	if building {
		airlockBinary()
	}
	guests()
	os.RemoveAll(buildDir)
	os.Exit(code)
}

// TestMCPBinaryStdio runs the real binary the way an agent client does,
// with the SDK's CommandTransport, and ends it both ways: the client
// closing stdin, and SIGTERM. Either way the audit log holds the calls.
func TestMCPBinaryStdio(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the airlock binary")
	}
	t.Parallel()
	bin := buildAirlock(t)
	srv := browseSite()
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	for _, end := range []string{"close stdin", "SIGTERM"} {
		t.Run(end, func(t *testing.T) {
			dir := t.TempDir()
			var stderr lockedBuffer
			cmd := exec.Command(bin, "mcp", "--data-dir", filepath.Join(dir, "data"), "--except", "127.0.0.1/32")
			cmd.Dir = dir // no ./airlock.yaml
			cmd.Env = []string{"HOME=" + dir, "PATH=" + os.Getenv("PATH")}
			cmd.Stderr = &stderr
			cs, err := mcpClient().Connect(ctx, &sdkmcp.CommandTransport{Command: cmd}, nil)
			if err != nil {
				t.Fatalf("connect: %v; stderr %s", err, stderr.String())
			}
			if v := cs.InitializeResult().ServerInfo; v.Name != "airlock" {
				t.Errorf("server info %+v", v)
			}
			tools, err := cs.ListTools(ctx, nil)
			if err != nil || len(tools.Tools) != 26 {
				t.Fatalf("ListTools: %v %v", tools, err)
			}
			out, isErr := mcpCall(t, ctx, cs, "web_fetch", map[string]any{"url": srv.URL + "/one", "max_length": 40})
			if isErr || !strings.HasPrefix(out, "Content: characters 0 to 40 of ") || !strings.Contains(out, "call web_fetch with start_index=40 to continue>") {
				t.Errorf("web_fetch: %v\n%s", isErr, out)
			}
			if out, isErr := mcpCall(t, ctx, cs, "web_fetch", map[string]any{"url": "http://192.168.1.1/"}); !isErr || !strings.HasPrefix(out, "denied (private)") {
				t.Errorf("private address: %v %q", isErr, out)
			}
			if end == "SIGTERM" {
				if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
					t.Fatal(err)
				}
				cs.Wait() // the server ends the session by exiting
			}
			cs.Close() // closes stdin and waits for the process
			if cmd.ProcessState == nil || !cmd.ProcessState.Exited() || cmd.ProcessState.ExitCode() != 0 {
				t.Errorf("process state %v; stderr %q", cmd.ProcessState, stderr.String())
			}
			if strings.Contains(stderr.String(), "{") {
				t.Errorf("protocol output on stderr? %q", stderr.String())
			}
			r := invoke(t, ctx, "", []string{"audit", "query", "--data-dir", filepath.Join(dir, "data"), "--broker", "fetch", "--format", "json"})
			if strings.Count(r.stdout, "\n") != 2 || !strings.Contains(r.stdout, `"outcome":"deny"`) {
				t.Errorf("audit after %s:\n%s%s", end, r.stdout, r.stderr)
			}
		})
	}
}
