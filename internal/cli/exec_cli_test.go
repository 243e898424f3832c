//go:build linux

package cli

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/proxy/sandbox"
)

// execLab is what the exec tests run against: a plain HTTP site with a
// git smart-HTTP repository, a TLS site with a certificate from a test CA,
// a third server on a port no floor exception covers, and a listener on
// the host's loopback that nothing inside the sandbox may reach. Every
// server listens on 127.0.0.1; clients only ever see names.
type execLab struct {
	dir        string // shown to the command read-only: ca.pem, tools
	dataDir    string
	httpPort   string
	tlsPort    string
	otherPort  string
	hostPort   string
	hostHits   *atomic.Int64
	unixSock   string // a Unix socket outside, in a directory not shown
	shownSock  string // a Unix socket in the shown directory
	unixHits   *atomic.Int64
	commitLine string
	execs      int // airlock exec runs so far
}

// needTools fails (never skips) when a program the exec tests drive is
// missing: CI installs them (.ci/run).
func needTools(t *testing.T, names ...string) {
	t.Helper()
	for _, n := range names {
		if _, err := exec.LookPath(n); err != nil {
			t.Fatalf("%s is needed for this test: apt-get install %s (bash .ci/run installs it)", n, n)
		}
	}
}

// needSandbox fails with the reason when this machine cannot build the
// exec sandbox.
func needSandbox(t *testing.T) {
	t.Helper()
	code, err := sandbox.Run(context.Background(), sandbox.Config{Args: []string{"true"}, Dir: "/",
		Env: append(sandbox.BaseEnv(os.Environ()), quickInitEnv),
		Outside: sandbox.OutsideFunc(func(ln net.Listener) error {
			for {
				c, err := ln.Accept()
				if err != nil {
					return err
				}
				c.Close()
			}
		})})
	if err != nil || code != 0 {
		t.Fatalf("the exec sandbox cannot be built here (%d, %v): %s", code, err, airlock.ReasonSandbox.Hint())
	}
}

// quickInitEnv is GORACE with atexit_sleep_ms=0, for the environment of
// the commands the tests run in the sandbox. The sandbox's init is this
// test binary, which the race detector otherwise keeps alive for a second
// after the command ended; the sandbox passes init only the command's
// environment, never this process's GORACE.
var quickInitEnv = "GORACE=" + strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0")

func newExecLab(t *testing.T) *execLab {
	t.Helper()
	lab := &execLab{dir: t.TempDir(), dataDir: t.TempDir(), hostHits: new(atomic.Int64), unixHits: new(atomic.Int64)}
	// The command runs as nobody when the test runs as root: the shown
	// directory (and its parent, made by t.TempDir) must be readable.
	for _, d := range []string{lab.dir, filepath.Dir(lab.dir)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}

	// A git repository served by git http-backend (CGI).
	git, _ := exec.LookPath("git")
	work, repos := filepath.Join(t.TempDir(), "work"), t.TempDir()
	gitEnv := append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+t.TempDir(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@site.test",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@site.test")
	runGit := func(dir string, args ...string) {
		t.Helper()
		c := exec.Command(git, args...)
		c.Dir, c.Env = dir, gitEnv
		if out, err := c.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	if err := os.MkdirAll(work, 0o755); err != nil {
		t.Fatal(err)
	}
	runGit(work, "init", "-q", "-b", "main")
	if err := os.WriteFile(filepath.Join(work, "README"), []byte("through airlock\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	runGit(work, "add", "README")
	lab.commitLine = "exec-test-commit-" + strconv.Itoa(os.Getpid())
	runGit(work, "commit", "-q", "-m", lab.commitLine)
	runGit(repos, "clone", "-q", "--bare", work, "repo.git")

	mux := http.NewServeMux()
	mux.HandleFunc("/hello", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "hello from site.test") })
	mux.Handle("/repo.git/", &cgi.Handler{Path: git, Args: []string{"http-backend"},
		Env: []string{"GIT_PROJECT_ROOT=" + repos, "GIT_HTTP_EXPORT_ALL=1"}})
	plain := httptest.NewServer(mux)
	t.Cleanup(plain.Close)
	lab.httpPort = port(t, plain.URL)

	caPEM, cert := testCA(t, "site.test")
	if err := os.WriteFile(filepath.Join(lab.dir, "ca.pem"), caPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	tlsSrv := httptest.NewUnstartedServer(mux)
	tlsSrv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	tlsSrv.StartTLS()
	t.Cleanup(tlsSrv.Close)
	lab.tlsPort = port(t, tlsSrv.URL)

	other := httptest.NewServer(mux)
	t.Cleanup(other.Close)
	lab.otherPort = port(t, other.URL)

	// The host's loopback: a working sandbox cannot reach it.
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hl.Close() })
	go func() {
		for {
			c, err := hl.Accept()
			if err != nil {
				return
			}
			lab.hostHits.Add(1)
			c.Close()
		}
	}()
	lab.hostPort = strconv.Itoa(hl.Addr().(*net.TCPAddr).Port)

	// Unix sockets outside, open to anyone.
	sockDir := t.TempDir()
	os.Chmod(sockDir, 0o777)
	os.Chmod(filepath.Dir(sockDir), 0o755)
	lab.unixSock = filepath.Join(sockDir, "s.sock")
	lab.shownSock = filepath.Join(lab.dir, "shown.sock")
	for _, p := range []string{lab.unixSock, lab.shownSock} {
		ul, err := net.Listen("unix", p)
		if err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, 0o777)
		t.Cleanup(func() { ul.Close() })
		go func() {
			for {
				c, err := ul.Accept()
				if err != nil {
					return
				}
				lab.unixHits.Add(1)
				c.Close()
			}
		}()
	}
	return lab
}

func port(t *testing.T, u string) string {
	t.Helper()
	_, p, err := net.SplitHostPort(strings.TrimPrefix(strings.TrimPrefix(u, "http://"), "https://"))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// testCA returns a CA certificate (PEM) and a leaf for host signed by it.
func testCA(t *testing.T, host string) ([]byte, tls.Certificate) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "airlock exec test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leafTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: host}, DNSNames: []string{host},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		tls.Certificate{Certificate: [][]byte{leafDER}, PrivateKey: key}
}

// exec runs `airlock exec` with the lab's policy: site.test and
// evil.test answered offline (127.0.0.1 and 127.0.0.9), a floor exception
// for the plain and the TLS site's ports only.
func (lab *execLab) exec(t *testing.T, stdin string, command ...string) result {
	t.Helper()
	lab.execs++
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	args := []string{"exec", "--data-dir", lab.dataDir,
		"--resolve", "site.test=127.0.0.1", "--resolve", "evil.test=127.0.0.9",
		"--except", "127.0.0.1:" + lab.httpPort, "--except", "127.0.0.1:" + lab.tlsPort,
		"--show", lab.dir, "--env", quickInitEnv}
	args = append(append(args, showWorkDir(t)...), "--")
	return invoke(t, ctx, stdin, append(args, command...))
}

// showWorkDir is --show of the test's working directory (the package's)
// when the sandbox would hide it: a clone under /tmp, as CI may make.
func showWorkDir(t *testing.T) []string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"/tmp", "/var/tmp", "/run", "/var/run", "/dev/shm"} {
		if wd == h || strings.HasPrefix(wd, h+"/") {
			return []string{"--show", wd}
		}
	}
	return nil
}

// sh runs a shell script in the sandbox with the test CA known to every
// client and a writable HOME.
func (lab *execLab) sh(t *testing.T, script string) result {
	t.Helper()
	ca := filepath.Join(lab.dir, "ca.pem")
	return lab.exec(t, "", "env", "HOME=/tmp", "SSL_CERT_FILE="+ca, "CURL_CA_BUNDLE="+ca, "GIT_SSL_CAINFO="+ca,
		"GIT_CONFIG_NOSYSTEM=1", "sh", "-c", script)
}

// audit returns the exec's audit records, newest first.
func (lab *execLab) audit(t *testing.T) []airlock.AuditRecord {
	t.Helper()
	r := invoke(t, context.Background(), "", []string{"audit", "query", "--data-dir", lab.dataDir, "--format", "json", "--limit", "1000"})
	if r.code != 0 {
		t.Fatalf("audit query: %d %s", r.code, r.stderr)
	}
	var out []airlock.AuditRecord
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		if line == "" {
			continue
		}
		var rec airlock.AuditRecord
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		out = append(out, rec)
	}
	return out
}

// wantAudit checks that the audit log has a proxy record with target
// and outcome (and reason, when given).
func wantAudit(t *testing.T, recs []airlock.AuditRecord, target, outcome, reason string) {
	t.Helper()
	for _, r := range recs {
		if r.Broker == "proxy" && r.Target == target && r.Outcome == outcome && (reason == "" || r.Reason == reason) {
			return
		}
	}
	var seen []string
	for _, r := range recs {
		seen = append(seen, r.Broker+" "+r.Outcome+" "+r.Reason+" "+r.Target)
	}
	t.Errorf("no audit record proxy %s %s %s; have:\n%s", outcome, reason, target, strings.Join(seen, "\n"))
}

// TestExecClients runs real programs under `airlock exec`: curl (HTTP, and
// HTTPS through CONNECT with a test CA), git clone over smart HTTP,
// Python's urllib and Go's net/http. For each, an allowed target works, a
// target on a port no exception covers and a name that resolves into the
// floor are refused with the reason visible to the program, and the audit
// log has every attempt.
func TestExecClients(t *testing.T) {
	if testing.Short() {
		t.Skip("runs programs in the exec sandbox")
	}
	needTools(t, "curl", "git", "python3", "sh")
	needSandbox(t)
	lab := newExecLab(t)
	// The Go client builds while the other clients run.
	goBin := filepath.Join(lab.dir, "gohttp")
	goBuilt := make(chan error, 1)
	go func() {
		out, err := exec.Command("go", "build", "-o", goBin, "./testdata/gohttp").CombinedOutput()
		if err != nil {
			err = fmt.Errorf("go build ./testdata/gohttp: %v\n%s", err, out)
		}
		goBuilt <- err
	}()
	defer func() { <-goBuilt }() // never leave it writing into a removed directory
	site := "http://site.test:" + lab.httpPort
	tlsSite := "https://site.test:" + lab.tlsPort
	other := "http://site.test:" + lab.otherPort
	evil := "http://evil.test:" + lab.httpPort

	t.Run("curl", func(t *testing.T) {
		r := lab.sh(t, "curl -sS "+site+"/hello && curl -sS "+tlsSite+"/hello")
		if r.code != 0 || strings.Count(r.stdout, "hello from site.test") != 2 {
			t.Fatalf("curl allowed: %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
		}
		r = lab.sh(t, "curl -sS -i "+other+"/hello; echo; curl -sS -i "+evil+"/hello; echo; curl -sS -v https://site.test:"+lab.otherPort+"/hello")
		for _, want := range []string{"HTTP/1.1 403", "X-Airlock-Reason: internal_address", "CONNECT tunnel failed, response 403"} {
			if !strings.Contains(r.stdout+r.stderr, want) {
				t.Errorf("curl refused: %q missing\nstdout %s\nstderr %s", want, r.stdout, r.stderr)
			}
		}
		if r.code == 0 {
			t.Errorf("curl refused CONNECT: exit 0, want curl's failure passed on")
		}
		recs := lab.audit(t)
		wantAudit(t, recs, site+"/hello", "allow", "ok")
		wantAudit(t, recs, "connect://site.test:"+lab.tlsPort, "allow", "ok")
		wantAudit(t, recs, other+"/hello", "deny", "internal_address")
		wantAudit(t, recs, evil+"/hello", "deny", "internal_address")
		wantAudit(t, recs, "connect://site.test:"+lab.otherPort, "deny", "internal_address")
	})

	t.Run("git", func(t *testing.T) {
		r := lab.sh(t, "git clone -q "+site+"/repo.git /tmp/clone && git -C /tmp/clone log --format=%s")
		if r.code != 0 || !strings.Contains(r.stdout, lab.commitLine) {
			t.Fatalf("git clone: %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
		}
		r = lab.sh(t, "git clone -q "+evil+"/repo.git /tmp/clone")
		if r.code == 0 || !strings.Contains(r.stderr, "403") {
			t.Errorf("git clone of a refused target: %d\nstderr %s", r.code, r.stderr)
		}
		recs := lab.audit(t)
		wantAudit(t, recs, site+"/repo.git/info/refs?service=git-upload-pack", "allow", "ok")
		wantAudit(t, recs, site+"/repo.git/git-upload-pack", "allow", "ok")
		wantAudit(t, recs, evil+"/repo.git/info/refs?service=git-upload-pack", "deny", "internal_address")
	})

	t.Run("python", func(t *testing.T) {
		script := `
import sys, urllib.request, urllib.error
for u in sys.argv[1:]:
    try:
        with urllib.request.urlopen(u, timeout=20) as r:
            print(u, r.status, r.read().decode().strip())
    except urllib.error.HTTPError as e:
        print(u, e.code, "reason=" + str(e.headers.get("X-Airlock-Reason")))
    except OSError as e:
        print(u, "error", e)
`
		r := lab.exec(t, "", "env", "SSL_CERT_FILE="+filepath.Join(lab.dir, "ca.pem"), "python3", "-c", script,
			site+"/hello", tlsSite+"/hello", other+"/py", evil+"/py", "https://evil.test:"+lab.tlsPort+"/py")
		for _, want := range []string{
			site + "/hello 200 hello from site.test", tlsSite + "/hello 200 hello from site.test",
			other + "/py 403 reason=internal_address", evil + "/py 403 reason=internal_address",
			"https://evil.test:" + lab.tlsPort + "/py error <urlopen error Tunnel connection failed: 403",
		} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("python: %q missing\nstdout %s\nstderr %s", want, r.stdout, r.stderr)
			}
		}
		recs := lab.audit(t)
		wantAudit(t, recs, other+"/py", "deny", "internal_address")
		wantAudit(t, recs, "connect://evil.test:"+lab.tlsPort, "deny", "internal_address")
	})

	t.Run("go", func(t *testing.T) {
		err := <-goBuilt
		goBuilt <- err // for the deferred wait
		if err != nil {
			t.Fatal(err)
		}
		r := lab.exec(t, "", "env", "SSL_CERT_FILE="+filepath.Join(lab.dir, "ca.pem"), goBin,
			site+"/hello", tlsSite+"/hello", other+"/go", "https://evil.test:"+lab.tlsPort+"/go")
		for _, want := range []string{
			site + `/hello 200 reason= body="hello from site.test"`, tlsSite + `/hello 200 reason= body="hello from site.test"`,
			other + "/go 403 reason=internal_address", "https://evil.test:" + lab.tlsPort + "/go error",
		} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("go: %q missing\nstdout %s\nstderr %s", want, r.stdout, r.stderr)
			}
		}
		if r.code != 1 {
			t.Errorf("go: exit %d, want the program's 1", r.code)
		}
		recs := lab.audit(t)
		wantAudit(t, recs, other+"/go", "deny", "internal_address")
		wantAudit(t, recs, "connect://evil.test:"+lab.tlsPort, "deny", "internal_address")
	})

	t.Run("node", func(t *testing.T) {
		needTools(t, "node")
		if _, err := os.Stat(filepath.Join("testdata", "node", "node_modules", "undici")); err != nil {
			t.Fatalf("undici is not installed: cd internal/cli/testdata/node && npm ci (bash .ci/run does it): %v", err)
		}
		r := lab.exec(t, "", "env", "NODE_EXTRA_CA_CERTS="+filepath.Join(lab.dir, "ca.pem"), "node", filepath.Join("testdata", "node", "run.mjs"),
			site+"/hello", tlsSite+"/hello", other+"/node", "https://evil.test:"+lab.tlsPort+"/node")
		for _, want := range []string{
			site + `/hello 200 reason= body="hello from site.test"`, tlsSite + `/hello 200 reason= body="hello from site.test"`,
			other + "/node ", "https://evil.test:" + lab.tlsPort + "/node error",
		} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("node: %q missing\nstdout %s\nstderr %s", want, r.stdout, r.stderr)
			}
		}
		if strings.Contains(r.stdout, other+"/node 200") || r.code != 1 {
			t.Errorf("node: the refused target answered, or exit %d (want 1)\n%s", r.code, r.stdout)
		}
		recs := lab.audit(t)
		wantAudit(t, recs, "connect://evil.test:"+lab.tlsPort, "deny", "internal_address")
	})

	// Every exec is one session record, broker exec, with its exit code.
	var sessions int
	for _, r := range lab.audit(t) {
		if r.Broker == "exec" {
			sessions++
			if !strings.Contains(r.Detail, "exit ") || r.Instance == "" {
				t.Errorf("exec session record %+v: want an exec instance and the exit code", r)
			}
		}
	}
	if sessions != lab.execs {
		t.Errorf("%d exec session records, want one per exec (%d)", sessions, lab.execs)
	}
}

// TestExecRedTeam tries the ways out a program could look for.
func TestExecRedTeam(t *testing.T) {
	if testing.Short() {
		t.Skip("runs programs in the exec sandbox")
	}
	needTools(t, "curl", "python3", "sh", "nsenter", "getent", "setsid")
	needSandbox(t)
	lab := newExecLab(t)

	t.Run("direct sockets to the host's loopback fail", func(t *testing.T) {
		r := lab.sh(t, `curl --noproxy '*' -sS -m 10 http://127.0.0.1:`+lab.hostPort+`/; echo "curl=$?"; `+
			`python3 -c "import socket; socket.create_connection(('127.0.0.1', `+lab.hostPort+`), timeout=10)" 2>&1 | tail -1`)
		if !strings.Contains(r.stdout, "curl=7") || !strings.Contains(r.stdout, "ConnectionRefusedError") {
			t.Errorf("direct sockets: stdout %s\nstderr %s", r.stdout, r.stderr)
		}
		if n := lab.hostHits.Load(); n != 0 {
			t.Errorf("the host's loopback listener accepted %d connections from the sandbox", n)
		}
	})

	t.Run("IPv6 literals", func(t *testing.T) {
		// Through the proxy, [::1] is the floor's; directly, the host's
		// ::1 (when it has one) is out of reach.
		var hits atomic.Int64
		port := "1"
		if l6, err := net.Listen("tcp", "[::1]:0"); err == nil {
			defer l6.Close()
			port = strconv.Itoa(l6.Addr().(*net.TCPAddr).Port)
			go func() {
				for {
					c, err := l6.Accept()
					if err != nil {
						return
					}
					hits.Add(1)
					c.Close()
				}
			}()
		}
		r := lab.sh(t, "curl -sS -i http://[::1]:"+port+"/; echo; curl -sS -i http://[::ffff:127.0.0.1]:"+lab.httpPort+"/; echo; "+
			"curl --noproxy '*' -sS -m 10 http://[::1]:"+port+"/; echo \"direct=$?\"")
		if strings.Count(r.stdout, "HTTP/1.1 403") != 2 || strings.Contains(r.stdout, "direct=0") || strings.Contains(r.stdout, "hello") {
			t.Errorf("IPv6 literals: stdout %s\nstderr %s", r.stdout, r.stderr)
		}
		if n := hits.Load(); n != 0 {
			t.Errorf("the host's ::1 listener accepted %d connections from the sandbox", n)
		}
		recs := lab.audit(t)
		wantAudit(t, recs, "http://[::1]:"+port+"/", "deny", "loopback")
		wantAudit(t, recs, "http://[::ffff:127.0.0.1]:"+lab.httpPort+"/", "deny", "ipv4_embedded")
	})

	t.Run("inherited descriptors do not reach the command", func(t *testing.T) {
		// A TCP connection to the host's loopback held without
		// close-on-exec, as a harness's socket airlock inherited is.
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		got := make(chan string, 1)
		go func() {
			c, err := l.Accept()
			if err != nil {
				got <- ""
				return
			}
			defer c.Close()
			c.SetReadDeadline(time.Now().Add(90 * time.Second)) // a hang guard
			b, _ := io.ReadAll(c)
			got <- string(b)
		}()
		c, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		f, err := c.(*net.TCPConn).File()
		c.Close()
		if err != nil {
			t.Fatal(err)
		}
		fd, err := syscall.Dup(int(f.Fd())) // no close-on-exec
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		r := lab.exec(t, "", "python3", "-c", "import os, sys\ntry:\n    os.write(int(sys.argv[1]), b'escaped'); print('write ok')\nexcept OSError as e:\n    print('write failed', e.errno)",
			strconv.Itoa(fd))
		syscall.Close(fd) // the sandbox is gone: this ends the connection
		if s := <-got; strings.Contains(s, "escaped") {
			t.Errorf("the command wrote to the host's loopback through inherited descriptor %d", fd)
		}
		if !strings.Contains(r.stdout, "write failed 9") {
			t.Errorf("descriptor %d inside: stdout %q stderr %q, want EBADF", fd, r.stdout, r.stderr)
		}
	})

	t.Run("nsenter into the host's network namespace fails", func(t *testing.T) {
		r := lab.sh(t, "nsenter --net=/proc/1/ns/net true; echo nsenter=$?")
		if strings.Contains(r.stdout, "nsenter=0") {
			t.Errorf("nsenter succeeded: %s %s", r.stdout, r.stderr)
		}
	})

	t.Run("Unix sockets outside are hidden", func(t *testing.T) {
		script := `
import socket, sys
for p in sys.argv[1:]:
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect(p); print(p, "connected")
    except OSError as e:
        print(p, type(e).__name__)
`
		r := lab.exec(t, "", "python3", "-c", script, lab.unixSock, lab.shownSock)
		if strings.Contains(r.stdout, "connected") || strings.Count(r.stdout, "Error") != 2 {
			t.Errorf("unix sockets: stdout %s\nstderr %s", r.stdout, r.stderr)
		}
		if n := lab.unixHits.Load(); n != 0 {
			t.Errorf("a Unix socket outside accepted %d connections from the sandbox", n)
		}
	})

	t.Run("no name resolution inside", func(t *testing.T) {
		r := lab.sh(t, `getent hosts site.test; echo "getent=$?"; getent ahosts evil.test; echo "getent=$?"; `+
			`python3 -c "import socket; socket.getaddrinfo('site.test', 80)" 2>&1 | tail -1`)
		if strings.Count(r.stdout, "getent=2") != 2 || !strings.Contains(r.stdout, "gaierror") || strings.Contains(r.stdout, "127.0.0") {
			t.Errorf("resolution: stdout %s\nstderr %s", r.stdout, r.stderr)
		}
	})

	t.Run("no capability, no_new_privs, unprivileged uid", func(t *testing.T) {
		r := lab.sh(t, "grep -E '^(Cap(Inh|Prm|Eff|Bnd|Amb)|NoNewPrivs|Uid):' /proc/self/status")
		for _, set := range []string{"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"} {
			if !strings.Contains(r.stdout, set+":\t0000000000000000") {
				t.Errorf("%s not empty:\n%s", set, r.stdout)
			}
		}
		if !strings.Contains(r.stdout, "NoNewPrivs:\t1") || strings.Contains(r.stdout, "Uid:\t0\t") {
			t.Errorf("privileges:\n%s", r.stdout)
		}
	})

	t.Run("a detached process dies with exec", func(t *testing.T) {
		const marker = "987.654321"
		r := lab.sh(t, "setsid sleep "+marker+" </dev/null >/dev/null 2>&1 & sleep 0.2; echo started")
		if r.code != 0 || !strings.Contains(r.stdout, "started") {
			t.Fatalf("exec: %d %s %s", r.code, r.stdout, r.stderr)
		}
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
			if err == nil && strings.Contains(string(b), "sleep\x00"+marker) {
				t.Errorf("pid %s (%q) outlived airlock exec", e.Name(), b)
			}
		}
	})

	t.Run("exit codes pass through", func(t *testing.T) {
		for script, want := range map[string]int{"exit 0": 0, "exit 7": 7, "kill -KILL $$": 137} {
			if r := lab.sh(t, script); r.code != want || r.stderr != "" {
				t.Errorf("%q: exit %d stderr %q, want %d and nothing of airlock's", script, r.code, r.stderr, want)
			}
		}
		if r := lab.exec(t, "", "no-such-command-here"); r.code != 127 {
			t.Errorf("a missing command: exit %d, want 127 (%s)", r.code, r.stderr)
		}
	})

	t.Run("a profile without http runs nothing", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		r := invoke(t, ctx, "", append(append([]string{"exec", "--data-dir", lab.dataDir, "--profile", "compute", "--env", quickInitEnv}, showWorkDir(t)...), "--", "sh", "-c", "echo ran"))
		if r.code != 3 || strings.Contains(r.stdout, "ran") || !strings.Contains(r.stderr, "capability") {
			t.Errorf("--profile compute: exit %d stdout %q stderr %q; want 3, capability, nothing run", r.code, r.stdout, r.stderr)
		}
	})

	t.Run("stdin passes through", func(t *testing.T) {
		if r := lab.exec(t, "through stdin\n", "cat"); r.stdout != "through stdin\n" {
			t.Errorf("cat: %q", r.stdout)
		}
	})
}

// TestExecDiesWithAirlock kills the real binary with SIGKILL while its
// command runs: nothing of the sandbox outlives it.
func TestExecDiesWithAirlock(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the airlock binary")
	}
	needTools(t, "sh", "setsid", "sleep")
	needSandbox(t)
	bin := buildAirlock(t)
	marker := "876.5" + strconv.Itoa(os.Getpid()%1000)
	cmd := exec.Command(bin, "exec", "--data-dir", t.TempDir(), "--", "sh", "-c",
		"setsid sleep "+marker+" </dev/null >/dev/null 2>&1 & sleep "+marker)
	cmd.Dir = "/"
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	sleepers := func() []string {
		var pids []string
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
			if err == nil && string(b) == "sleep\x00"+marker+"\x00" {
				pids = append(pids, e.Name())
			}
		}
		return pids
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(sleepers()) < 2 {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("the command's two sleeps did not start; running: %v", sleepers())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	deadline = time.Now().Add(10 * time.Second) // a hang guard, not a timing assertion
	for len(sleepers()) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("processes of the sandbox outlived airlock: %v", sleepers())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestExecRevoked revokes the tenant from another process while a command
// runs: the command is stopped and the session's record says revoked.
func TestExecRevoked(t *testing.T) {
	if testing.Short() {
		t.Skip("runs programs in the exec sandbox")
	}
	needTools(t, "sleep")
	needSandbox(t)
	dd := t.TempDir()
	marker := "59.87" + strconv.Itoa(os.Getpid()%1000)
	done := make(chan result, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		done <- invoke(t, ctx, "", append(append([]string{"exec", "--data-dir", dd, "--env", quickInitEnv}, showWorkDir(t)...), "--", "sleep", marker))
	}()
	deadline := time.Now().Add(30 * time.Second) // hang guard
	for {
		running := false
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			if b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline")); err == nil && string(b) == "sleep\x00"+marker+"\x00" {
				running = true
			}
		}
		if running {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the command did not start")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if r := invoke(t, context.Background(), "", []string{"admin", "revoke", "--data-dir", dd, "local"}); r.code != 0 {
		t.Fatalf("revoke: %d %s", r.code, r.stderr)
	}
	var r result
	select {
	case r = <-done:
	case <-time.After(30 * time.Second): // hang guard
		t.Fatal("exec did not end after the revocation")
	}
	if r.code != 3 || !strings.Contains(r.stderr, "revoked") {
		t.Errorf("exec after a revocation: exit %d, stderr %q; want 3 and revoked", r.code, r.stderr)
	}
}

// TestExecEnvironment: the command gets an allowlisted environment and
// what --env adds, never a variable the configuration or a provider reads
// a secret from, and none of the secret files the configuration names.
func TestExecEnvironment(t *testing.T) {
	if testing.Short() {
		t.Skip("runs programs in the exec sandbox")
	}
	needTools(t, "sh", "env", "cat")
	needSandbox(t)
	lab := newExecLab(t)
	// The secret files sit in the shown directory: visible inside but
	// for the hiding (which covers a file with /dev/null).
	routeFile, tenantFile := filepath.Join(lab.dir, "route.secret"), filepath.Join(lab.dir, "tenant.secret")
	for p, v := range map[string]string{routeFile: "route-file-secret\n", tenantFile: "tenant-file-secret\n"} {
		if err := os.WriteFile(p, []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfgPath := filepath.Join(lab.dir, "airlock.yaml")
	if err := os.WriteFile(cfgPath, []byte(`routes:
  byenv:
    base_url: https://api.site.test/
    header: Authorization
    value_env: ROUTE_TOKEN_VAR
  byfile:
    base_url: https://files.site.test/
    header: Authorization
    value_file: `+routeFile+`
tenants:
  local:
    profile: network
    secrets:
      signing: {env: TENANT_KEY_VAR}
      filed: {file: `+tenantFile+`}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{
		"PATH": os.Getenv("PATH"), "HOME": "/", "LANG": "C.UTF-8", "LC_ALL": "C",
		"BRAVE_SEARCH_API_KEY": "brave-secret", "FIRECRAWL_API_KEY": "firecrawl-secret", "DATAFORSEO_AUTH": "dfs-login:dfs-secret",
		"ROUTE_TOKEN_VAR": "route-env-secret", "TENANT_KEY_VAR": "tenant-env-secret",
		"RANDOM_UNLISTED_VAR": "random-value", "PASSED_VAR": "passed-value",
		"AIRLOCK_TOKEN": "airlock-token-secret",
	}
	var environ []string
	for k, v := range vars {
		environ = append(environ, k+"="+v)
	}
	execWith := func(flags []string, command ...string) result {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		args := append([]string{"exec", "--config", cfgPath, "--data-dir", lab.dataDir, "--show", lab.dir, "--env", quickInitEnv}, showWorkDir(t)...)
		args = append(append(append(args, flags...), "--"), command...)
		var stdout, stderr bytes.Buffer
		e := &env{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr, tty: noTerminal,
			environ: environ, getenv: func(k string) string { return vars[k] }}
		code := run(ctx, e, args, commands)
		return result{code: code, stdout: stdout.String(), stderr: stderr.String()}
	}

	r := execWith([]string{"--env", "PASSED_VAR", "--env", "SET_VAR=set-value"}, "sh", "-c",
		`env; cat "$1" "$2"; echo "sizes $(cat "$1" | wc -c) $(cat "$2" | wc -c)"`, "sh", routeFile, tenantFile)
	if r.code != 0 {
		t.Fatalf("exec: %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
	}
	for _, secret := range []string{"brave-secret", "firecrawl-secret", "dfs-secret", "route-env-secret", "tenant-env-secret",
		"random-value", "airlock-token-secret", "route-file-secret", "tenant-file-secret"} {
		if strings.Contains(r.stdout, secret) {
			t.Errorf("the command saw %q:\n%s", secret, r.stdout)
		}
	}
	for _, want := range []string{"PATH=" + vars["PATH"] + "\n", "HOME=/\n", "LANG=C.UTF-8\n", "LC_ALL=C\n",
		"PASSED_VAR=passed-value\n", "SET_VAR=set-value\n", "HTTP_PROXY=http://127.0.0.1:3128\n", "sizes 0 0\n"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("%q missing inside:\n%s", want, r.stdout)
		}
	}

	// --show cannot uncover a secret file.
	if r := execWith([]string{"--show", routeFile}, "cat", routeFile); r.code != 2 || strings.Contains(r.stdout, "route-file-secret") || !strings.Contains(r.stderr, "hides "+routeFile) {
		t.Errorf("--show %s: exit %d stdout %q stderr %q; want 2 and a usage error", routeFile, r.code, r.stdout, r.stderr)
	}

	// --env never passes a secret source, in either form.
	for _, flag := range []string{"BRAVE_SEARCH_API_KEY", "ROUTE_TOKEN_VAR", "TENANT_KEY_VAR=x", "AIRLOCK_TOKEN"} {
		r := execWith([]string{"--env", flag}, "sh", "-c", "echo ran")
		name, _, _ := strings.Cut(flag, "=")
		if r.code != 2 || strings.Contains(r.stdout, "ran") || !strings.Contains(r.stderr, name) || !strings.Contains(r.stderr, "secret") {
			t.Errorf("--env %s: exit %d stdout %q stderr %q; want 2, a usage error naming it, nothing run", flag, r.code, r.stdout, r.stderr)
		}
	}
}
