package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	sdkmcp "github.com/modelcontextprotocol/go-sdk/mcp"
)

// syncBuffer is a bytes.Buffer safe for a server goroutine writing and a
// test reading.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type served struct {
	base, token, admin string
	stdout, stderr     *syncBuffer
	stop               context.CancelFunc // as SIGINT would
	code               chan int
}

var (
	bannerBase  = regexp.MustCompile(`development mode on (http://\S+)`)
	bannerToken = regexp.MustCompile(`API token \(shown once\):\s+(\S+)`)
	bannerAdmin = regexp.MustCompile(`admin token \(shown once\):\s+(\S+)`)
	bannerCurl  = regexp.MustCompile(`-d '([^']+)' (\S+)`)
)

// startServe runs `airlock serve args...` until the test ends, and reads the
// address and tokens from its banner.
func startServe(t *testing.T, args ...string) *served {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := &served{stdout: &syncBuffer{}, stderr: &syncBuffer{}, stop: cancel, code: make(chan int, 1)}
	e := &env{stdin: strings.NewReader(""), stdout: s.stdout, stderr: s.stderr}
	go func() { s.code <- run(ctx, e, append([]string{"serve"}, args...), commands) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-s.code:
		case <-time.After(30 * time.Second):
			t.Error("serve did not stop")
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		out := s.stdout.String()
		if m := bannerBase.FindStringSubmatch(out); m != nil && strings.Contains(out, "API reference") {
			s.base = m[1]
			s.token = bannerToken.FindStringSubmatch(out)[1]
			s.admin = bannerAdmin.FindStringSubmatch(out)[1]
			return s
		}
		select {
		case c := <-s.code:
			t.Fatalf("serve exited %d before listening: %s", c, s.stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("no banner from serve; stdout %q stderr %q", s.stdout.String(), s.stderr.String())
	return nil
}

func (s *served) do(t *testing.T, method, path, token, body string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, s.base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// serveBearer adds the API token to every request of the MCP client.
type serveBearer struct{ token string }

func (b serveBearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

func TestServeDevModeIsLoopbackOnly(t *testing.T) {
	t.Parallel()
	for _, addr := range []string{"0.0.0.0:0", "[::]:0", ":8080", "example.com:80", "nonsense"} {
		r := invoke(t, context.Background(), "", []string{"serve", "--data-dir", t.TempDir(), "--listen", addr})
		if r.code != 2 {
			t.Errorf("serve --listen %s in development mode: exit %d, want 2 (stderr %q)", addr, r.code, r.stderr)
		}
	}
	r := invoke(t, context.Background(), "", []string{"serve", "--data-dir", t.TempDir(), "--listen", "0.0.0.0:0"})
	if !strings.Contains(r.stderr, "loopback") || !strings.Contains(r.stderr, "token") {
		t.Errorf("the refusal should say why and what to do: %q", r.stderr)
	}
}

func TestServeDevelopmentMode(t *testing.T) {
	t.Parallel()
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		io.WriteString(w, `<html><head><title>Served page</title></head><body><main><h1>Served page</h1><p>The development server fetched this page through the engine, under the policy, with an audit record.</p></main></body></html>`)
	}))
	defer site.Close()
	s := startServe(t, "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--except", "127.0.0.1")

	// The printed curl: the same body, with the local page instead of
	// example.com (no internet here), sent to the printed URL.
	m := bannerCurl.FindStringSubmatch(s.stdout.String())
	if m == nil || m[2] != s.base+"/api/browse" {
		t.Fatalf("banner has no curl for %s/api/browse:\n%s", s.base, s.stdout.String())
	}
	var body map[string]any
	if err := json.Unmarshal([]byte(m[1]), &body); err != nil {
		t.Fatalf("printed curl body %q: %v", m[1], err)
	}
	body["url"] = site.URL + "/"
	b, _ := json.Marshal(body)
	code, _, out := s.do(t, "POST", "/api/browse", s.token, string(b))
	if code != 200 || !strings.Contains(out, "fetched this page through the engine") {
		t.Fatalf("printed curl: %d %s", code, out)
	}

	if code, h, _ := s.do(t, "POST", "/api/browse", "", string(b)); code != 401 || h.Get("WWW-Authenticate") == "" {
		t.Errorf("without a token: %d %v", code, h)
	}
	if code, _, _ := s.do(t, "POST", "/mcp", "", `{}`); code != 401 {
		t.Errorf("/mcp without a token: %d, want 401", code)
	}
	// An MCP client (the SDK's) fetches through the served /mcp.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tr := &sdkmcp.StreamableClientTransport{Endpoint: s.base + "/mcp", MaxRetries: -1,
		HTTPClient: &http.Client{Transport: serveBearer{s.token}}}
	cs, err := mcpClient().Connect(ctx, tr, nil)
	if err != nil {
		t.Fatalf("MCP over the served /mcp: %v", err)
	}
	defer cs.Close()
	if out, isErr := mcpCall(t, ctx, cs, "web_fetch", map[string]any{"url": site.URL + "/"}); isErr || !strings.Contains(out, "fetched this page through the engine") {
		t.Errorf("web_fetch through serve: error=%v %q", isErr, out)
	}
	// A denial is visible through the audit API and the metrics.
	code, h, out := s.do(t, "POST", "/api/browse", s.token, `{"verb":"fetch","url":"http://169.254.169.254/latest/meta-data/"}`)
	if code != 403 || h.Get("X-Airlock-Decision") == "" || !strings.Contains(out, `"metadata"`) {
		t.Fatalf("metadata fetch: %d %v %s", code, h, out)
	}
	if code, _, out := s.do(t, "GET", "/api/audit?outcome=deny", s.token, ""); code != 200 || !strings.Contains(out, h.Get("X-Airlock-Decision")) {
		t.Errorf("audit does not show the denial %s: %d %s", h.Get("X-Airlock-Decision"), code, out)
	}
	code, _, metrics := s.do(t, "GET", "/metrics", "", "")
	if code != 200 || !strings.Contains(metrics, "airlock_build_info") || !strings.Contains(metrics, `reason="metadata"`) {
		t.Errorf("metrics on loopback without a token: %d\n%s", code, metrics)
	}
	if code, _, _ := s.do(t, "POST", "/api/admin/revoke", s.token, `{"subject":"local/x"}`); code != 401 && code != 403 {
		t.Errorf("revoke with a tenant token: %d, want 401/403", code)
	}
	if code, _, out := s.do(t, "POST", "/api/admin/revoke", s.admin, `{"subject":"local/x","reason":"test"}`); code/100 != 2 {
		t.Errorf("revoke with the admin token: %d %s", code, out)
	}
}

func TestServeGracefulShutdown(t *testing.T) {
	t.Parallel()
	arrived := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		once.Do(func() { close(arrived) })
		<-release
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, "finished after the shutdown began")
	}))
	defer site.Close()
	dd := t.TempDir()
	s := startServe(t, "--data-dir", dd, "--listen", "127.0.0.1:0", "--except", "127.0.0.1")

	type reply struct {
		code int
		body string
	}
	got := make(chan reply, 1)
	go func() {
		code, _, body := s.do(t, "POST", "/api/browse", s.token, `{"verb":"fetch","url":"`+site.URL+`/slow","as":"text"}`)
		got <- reply{code, body}
	}()
	select {
	case <-arrived:
	case <-time.After(20 * time.Second):
		t.Fatal("the fetch never reached the site")
	}
	s.stop() // SIGINT
	// The server stops accepting while the call in flight goes on.
	deadline := time.Now().Add(10 * time.Second)
	for {
		req, _ := http.NewRequest("GET", s.base+"/healthz", nil)
		resp, err := (&http.Client{Timeout: time.Second}).Do(req)
		if err != nil {
			break
		}
		resp.Body.Close()
		if time.Now().After(deadline) {
			t.Fatal("still accepting connections after the shutdown began")
		}
		time.Sleep(20 * time.Millisecond)
	}
	close(release)
	r := <-got
	if r.code != 200 || !strings.Contains(r.body, "finished after the shutdown began") {
		t.Fatalf("in-flight fetch: %d %q", r.code, r.body)
	}
	select {
	case c := <-s.code:
		s.code <- c
		if c != 0 {
			t.Fatalf("serve exited %d: %s", c, s.stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not exit after draining")
	}
	// The audit log was flushed: the drained fetch is on disk.
	q := invoke(t, context.Background(), "", []string{"audit", "query", "--data-dir", dd, "--broker", "fetch", "--format", "json"})
	if q.code != 0 || !strings.Contains(q.stdout, "/slow") {
		t.Errorf("audit after shutdown: %d %q %q", q.code, q.stdout, q.stderr)
	}
}
