package cli

import (
	"context"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// runProgram runs name args with env (and PATH, HOME) and returns its exit
// code and combined output.
func runProgram(t *testing.T, env []string, name string, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}, env...)
	out, _ := cmd.CombinedOutput()
	return cmd.ProcessState.ExitCode(), string(out)
}

// TestProxyCommandPrograms: Python's urllib and git (smart HTTP from a
// local git http-backend) through `airlock proxy`, with the proxy
// variables; a refused target fails with Airlock's reason visible.
func TestProxyCommandPrograms(t *testing.T) {
	t.Parallel()
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Fatal("python3 is needed: install it (apt-get install python3)")
	}
	git, err := exec.LookPath("git")
	if err != nil {
		t.Fatal("git is needed: install it (apt-get install git)")
	}
	httpPort, tlsPort, caFile := proxySites(t)
	hp, tp := strconv.Itoa(httpPort), strconv.Itoa(tlsPort)

	// A repository served by git http-backend.
	root := t.TempDir()
	work := filepath.Join(t.TempDir(), "work")
	gitEnv := []string{"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t", "GIT_CONFIG_NOSYSTEM=1"}
	for _, args := range [][]string{
		{"init", "-q", "-b", "main", work},
		{"-C", work, "commit", "-q", "--allow-empty", "-m", "hello through airlock"},
		{"clone", "-q", "--bare", work, filepath.Join(root, "repo.git")},
	} {
		if code, out := runProgram(t, gitEnv, git, args...); code != 0 {
			t.Fatalf("git %v: %s", args, out)
		}
	}
	execPath, _ := exec.Command(git, "--exec-path").Output()
	backend := &cgi.Handler{Path: filepath.Join(strings.TrimSpace(string(execPath)), "git-http-backend"),
		Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"}}
	gitSite := httptest.NewServer(backend)
	t.Cleanup(gitSite.Close)
	gp := strings.TrimPrefix(gitSite.URL, "http://127.0.0.1:")

	addr, _ := startProxyCmd(t, "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0",
		"--resolve", "site.test=127.0.0.1", "--resolve", "internal.test=127.0.0.9",
		"--except", "127.0.0.1:"+hp, "--except", "127.0.0.1:"+tp, "--except", "127.0.0.1:"+gp)
	proxyEnv := []string{"http_proxy=http://" + addr, "https_proxy=http://" + addr, "HTTP_PROXY=http://" + addr, "HTTPS_PROXY=http://" + addr, "NO_PROXY=", "no_proxy="}

	t.Run("git clone", func(t *testing.T) {
		dest := filepath.Join(t.TempDir(), "clone")
		code, out := runProgram(t, append(proxyEnv, gitEnv...), git, "clone", "-q", "http://site.test:"+gp+"/repo.git", dest)
		if code != 0 {
			t.Fatalf("git clone: exit %d: %s", code, out)
		}
		code, out = runProgram(t, gitEnv, git, "-C", dest, "log", "--format=%s")
		if code != 0 || strings.TrimSpace(out) != "hello through airlock" {
			t.Fatalf("cloned log: %q", out)
		}
		code, out = runProgram(t, append(proxyEnv, gitEnv...), git, "clone", "-q", "http://internal.test:"+gp+"/repo.git", filepath.Join(t.TempDir(), "no"))
		if code == 0 || !strings.Contains(out, "403") {
			t.Fatalf("git clone of a refused target: exit %d: %s", code, out)
		}
	})

	t.Run("python urllib", func(t *testing.T) {
		script := `
import sys, ssl, urllib.request, urllib.error
ctx = ssl.create_default_context(cafile=sys.argv[1])
for url in sys.argv[2:]:
    try:
        with urllib.request.urlopen(url, context=ctx, timeout=20) as r:
            print("ok", r.read().decode())
    except urllib.error.HTTPError as e:
        print("refused", e.code, e.headers.get("X-Airlock-Reason"))
    except urllib.error.URLError as e:
        print("failed", e.reason)
`
		code, out := runProgram(t, proxyEnv, python, "-c", script, caFile,
			"http://site.test:"+hp+"/py", "https://site.test:"+tp+"/pys", "http://internal.test:"+hp+"/")
		if code != 0 {
			t.Fatalf("python: exit %d: %s", code, out)
		}
		for _, want := range []string{"ok hello from /py", "ok secure hello from /pys", "refused 403 internal_address"} {
			if !strings.Contains(out, want) {
				t.Errorf("python output lacks %q:\n%s", want, out)
			}
		}
	})
}
