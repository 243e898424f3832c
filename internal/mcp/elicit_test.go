package mcp

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdkmcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/engine"
)

// elicitProtocol is the newest protocol version on which a server may send
// elicitation/create itself.
const elicitProtocol = "2025-11-25"

// elicitPerson is an MCP client's UI: it records the elicitations it is
// shown, whether the navigate that raised each was still pending, and
// answers with answer.
type elicitPerson struct {
	answer   *sdkmcp.ElicitResult
	pending  *atomic.Bool // the navigate call has not returned
	mu       sync.Mutex
	shown    []string
	early    int // elicitations shown after the call returned
	progress []string
}

func (p *elicitPerson) client() *sdkmcp.Client {
	return sdkmcp.NewClient(&sdkmcp.Implementation{Name: "person", Version: "1"}, &sdkmcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *sdkmcp.ElicitRequest) (*sdkmcp.ElicitResult, error) {
			p.mu.Lock()
			defer p.mu.Unlock()
			p.shown = append(p.shown, req.Params.Message)
			if !p.pending.Load() {
				p.early++
			}
			return p.answer, nil
		},
		ProgressNotificationHandler: func(_ context.Context, req *sdkmcp.ProgressNotificationClientRequest) {
			p.mu.Lock()
			defer p.mu.Unlock()
			p.progress = append(p.progress, req.Params.Message)
		},
	})
}

func askSite(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, `<!doctype html><title>Asked</title><p>hello</p>`)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func askEngine(t *testing.T, mode string) *engine.Engine {
	t.Helper()
	if _, err := os.Stat("/usr/lib/chromium/chromium"); err != nil {
		t.Fatalf("needs Debian's Chromium (apt-get install chromium): %v", err)
	}
	cfg := loopback
	cfg.Browser = engine.BrowserConfig{AskTimeout: 45 * time.Second, ApproveViaElicitation: mode,
		Policy: engine.BrowserPolicy{DefaultAction: "ask"}}
	return newEngine(t, cfg)
}

// connect connects c to a NewServer over an in-memory pipe (the stdio
// server's kind) on protocol version.
func connect(t *testing.T, en *engine.Engine, c *sdkmcp.Client, version string) *sdkmcp.ClientSession {
	t.Helper()
	ctx := testCtx(t)
	s := NewServer(en, func(context.Context) airlock.Principal { return en.Principal() }, Options{Version: "test"})
	st, ct := sdkmcp.NewInMemoryTransports()
	ss, err := s.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := c.Connect(ctx, ct, &sdkmcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.Close()
		ss.Wait()
	})
	return cs
}

// navigate calls browser_navigate with a progress token, marking the call
// pending until it returns.
func navigate(t *testing.T, cs *sdkmcp.ClientSession, pending *atomic.Bool, url string) *sdkmcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	params := &sdkmcp.CallToolParams{Name: ToolBrowserNavigate, Arguments: map[string]any{"url": url, "snapshot": false}}
	params.SetProgressToken("nav-1")
	pending.Store(true)
	res, err := cs.CallTool(ctx, params)
	pending.Store(false)
	if err != nil {
		t.Fatalf("browser_navigate: protocol error %v", err)
	}
	return res
}

// An ask raised by browser_navigate is put to the person behind the MCP
// client as an elicitation while the navigate waits: accept with allow
// approves, anything else denies; the call's progress says what waits.
// Before protocol 2026-07-28 the server sends elicitation/create; from it
// on, the call returns input required and the client's retry answers.
func TestBrowserAskElicitation(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		answer *sdkmcp.ElicitResult
		wantOK bool
	}{
		{"accept", &sdkmcp.ElicitResult{Action: "accept", Content: map[string]any{"allow": true}}, true},
		{"accept false", &sdkmcp.ElicitResult{Action: "accept", Content: map[string]any{"allow": false}}, false},
		{"decline", &sdkmcp.ElicitResult{Action: "decline"}, false},
		{"cancel", &sdkmcp.ElicitResult{Action: "cancel"}, false},
	} {
		for _, version := range []string{elicitProtocol, "2026-07-28"} {
			t.Run(tc.name+" "+version, func(t *testing.T) {
				t.Parallel()
				site := askSite(t)
				en := askEngine(t, "")
				p := &elicitPerson{answer: tc.answer, pending: &atomic.Bool{}}
				cs := connect(t, en, p.client(), version)
				res := navigate(t, cs, p.pending, site.URL+"/page")
				p.mu.Lock()
				defer p.mu.Unlock()
				if len(p.shown) != 1 || p.early != 0 {
					t.Fatalf("elicitations shown %d (after the call returned: %d): %q", len(p.shown), p.early, p.shown)
				}
				if msg := p.shown[0]; !strings.Contains(msg, "Allow the browser to open "+site.URL+"?") || !strings.Contains(msg, site.URL+"/page") ||
					!strings.Contains(msg, "tenant local") || !strings.Contains(msg, "ap_") {
					t.Errorf("elicitation message: %q", msg)
				}
				if len(p.progress) == 0 || !strings.HasPrefix(p.progress[0], "waiting for approval ap_") || !strings.HasSuffix(p.progress[0], " of "+site.URL) {
					t.Errorf("progress while pending: %q", p.progress)
				}
				out := text(res)
				if tc.wantOK {
					if res.IsError || !strings.Contains(out, "Title: Asked") {
						t.Fatalf("approved navigate: %s", out)
					}
					return
				}
				if !res.IsError || !strings.HasPrefix(out, "denied") {
					t.Fatalf("denied navigate: %s", out)
				}
			})
		}
	}
}

// A client that did not declare elicitation is no approver: ask denies at
// once, naming what allows the origin; so does a declared one on a
// protocol version that forbids the server's own requests, and any client
// under approve_via_elicitation off.
func TestBrowserAskWithoutElicitation(t *testing.T) {
	t.Parallel()
	accept := &sdkmcp.ElicitResult{Action: "accept", Content: map[string]any{"allow": true}}
	for _, tc := range []struct {
		name, mode, version string
		elicits             bool
	}{
		{"no capability", "", elicitProtocol, false},
		{"mode off", engine.ElicitOff, elicitProtocol, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			site := askSite(t)
			en := askEngine(t, tc.mode)
			p := &elicitPerson{answer: accept, pending: &atomic.Bool{}}
			c := newClient()
			if tc.elicits {
				c = p.client()
			}
			cs := connect(t, en, c, tc.version)
			res := navigate(t, cs, p.pending, site.URL+"/")
			if out := text(res); !res.IsError || !strings.Contains(out, "no_approver") || !strings.Contains(out, "--allow-origin") {
				t.Fatalf("navigate: %s", out)
			}
			if len(p.shown) != 0 {
				t.Errorf("elicited %q", p.shown)
			}
		})
	}
}

// Over streamable HTTP (airlock serve's /mcp) a tenant's client answers
// asks only under approve_via_elicitation all: by default its client may
// be the workload itself, holding the tenant's token.
func TestBrowserAskElicitationHTTP(t *testing.T) {
	t.Parallel()
	accept := &sdkmcp.ElicitResult{Action: "accept", Content: map[string]any{"allow": true}}
	for _, tc := range []struct {
		mode   string
		wantOK bool
	}{
		{"", false},
		{engine.ElicitAll, true},
	} {
		t.Run("mode "+tc.mode, func(t *testing.T) {
			t.Parallel()
			site := askSite(t)
			en := askEngine(t, tc.mode)
			token, err := en.CreateToken(testCtx(t), "local", "mcp test")
			if err != nil {
				t.Fatal(err)
			}
			srv := mcpServer(t, en)
			p := &elicitPerson{answer: accept, pending: &atomic.Bool{}}
			tr := &sdkmcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp", MaxRetries: -1,
				HTTPClient: &http.Client{Transport: bearerTransport{token, srv.Client().Transport}}}
			cs, err := p.client().Connect(testCtx(t), tr, &sdkmcp.ClientSessionOptions{ProtocolVersion: elicitProtocol})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cs.Close() })
			res := navigate(t, cs, p.pending, site.URL+"/")
			out := text(res)
			p.mu.Lock()
			defer p.mu.Unlock()
			if !tc.wantOK {
				if !res.IsError || !strings.Contains(out, "no_approver") || len(p.shown) != 0 {
					t.Fatalf("navigate: %s (elicited %q)", out, p.shown)
				}
				return
			}
			if res.IsError || !strings.Contains(out, "Title: Asked") || len(p.shown) != 1 || p.early != 0 {
				t.Fatalf("navigate: %s (elicited %q, after the call %d)", out, p.shown, p.early)
			}
		})
	}
}

// BenchmarkElicitationApproval measures an approval's round trip through
// an MCP client's elicitation: from the client being asked to the
// navigate call's reply (the page loaded, no snapshot), per protocol
// version. Each iteration asks about a new origin.
func BenchmarkElicitationApproval(b *testing.B) {
	if _, err := os.Stat("/usr/lib/chromium/chromium"); err != nil {
		b.Fatalf("needs Debian's Chromium (apt-get install chromium): %v", err)
	}
	for _, version := range []string{elicitProtocol, "2026-07-28"} {
		b.Run(version, func(b *testing.B) {
			cfg := loopback
			cfg.InMemory = true
			cfg.Browser = engine.BrowserConfig{AskTimeout: 45 * time.Second, Policy: engine.BrowserPolicy{DefaultAction: "ask"}}
			en, err := engine.New(context.Background(), cfg, engine.WithGetenv(func(string) string { return "" }))
			if err != nil {
				b.Fatal(err)
			}
			defer en.Close(context.Background())
			var asked atomic.Int64
			c := sdkmcp.NewClient(&sdkmcp.Implementation{Name: "person", Version: "1"}, &sdkmcp.ClientOptions{
				ElicitationHandler: func(context.Context, *sdkmcp.ElicitRequest) (*sdkmcp.ElicitResult, error) {
					asked.Store(time.Now().UnixNano())
					return &sdkmcp.ElicitResult{Action: "accept", Content: map[string]any{"allow": true}}, nil
				}})
			ctx := context.Background()
			s := NewServer(en, func(context.Context) airlock.Principal { return en.Principal() }, Options{Version: "test"})
			st, ct := sdkmcp.NewInMemoryTransports()
			ss, err := s.Connect(ctx, st, nil)
			if err != nil {
				b.Fatal(err)
			}
			cs, err := c.Connect(ctx, ct, &sdkmcp.ClientSessionOptions{ProtocolVersion: version})
			if err != nil {
				b.Fatal(err)
			}
			defer func() { cs.Close(); ss.Wait() }()
			var lat []time.Duration
			for b.Loop() {
				b.StopTimer()
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					io.WriteString(w, `<title>x</title>`)
				}))
				b.StartTimer()
				res, err := cs.CallTool(ctx, &sdkmcp.CallToolParams{Name: ToolBrowserNavigate, Arguments: map[string]any{"url": srv.URL + "/", "snapshot": false}})
				end := time.Now()
				b.StopTimer()
				srv.Close()
				if err != nil || res.IsError {
					b.Fatalf("navigate: %v %s", err, text(res))
				}
				lat = append(lat, end.Sub(time.Unix(0, asked.Load())))
				b.StartTimer()
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
		})
	}
}
