package browser

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/egress"
)

// testTimeout bounds each test's browser work; generous for a loaded
// 2-core machine under -race.
const testTimeout = 45 * time.Second

const (
	proxyUser = "sess-1"
	proxyPass = "s3cret"
)

// requireChromium fails (never skips) when Chromium is absent.
func requireChromium(t *testing.T) {
	t.Helper()
	if err := checkExec(DefaultExecPath); err != nil {
		t.Fatalf("these tests need Debian's Chromium: %v", err)
	}
}

// testProxy is an egress.Proxy on loopback that lets 127.0.0.1 through and
// records the key of every decision.
type testProxy struct {
	addr string
	mu   sync.Mutex
	keys []string
}

func (p *testProxy) decisionKeys() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.keys...)
}

func startProxy(t testing.TB) *testProxy { return startProxyWith(t, nil) }

// startProxyWith is startProxy with the proxy's handler wrapped by wrap
// (nil: none).
func startProxyWith(t testing.TB, wrap func(http.Handler) http.Handler) *testProxy {
	t.Helper()
	tp := &testProxy{}
	d := &egress.Dialer{
		Policy:   egress.Policy{Lanes: egress.Lanes(), Exceptions: []string{"127.0.0.1"}}.MustCompile(),
		Resolver: &egress.StaticResolver{},
		Auditor: egress.AuditorFunc(func(d egress.Decision) {
			tp.mu.Lock()
			tp.keys = append(tp.keys, d.Key)
			tp.mu.Unlock()
		}),
	}
	p := &egress.Proxy{Dialer: d, Authorize: func(_ *http.Request, user, pass string) (egress.ProxyClient, bool) {
		if user != proxyUser || subtle.ConstantTimeCompare([]byte(pass), []byte(proxyPass)) != 1 {
			return egress.ProxyClient{}, false
		}
		return egress.ProxyClient{Key: user}, true
	}}
	var h http.Handler = p
	if wrap != nil {
		h = wrap(p)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		srv.Close()
		p.Close()
	})
	tp.addr = srv.Listener.Addr().String()
	return tp
}

// open starts a session through a fresh proxy; Close runs at cleanup.
func open(t *testing.T, tweak func(*Options)) (*Session, *testProxy) {
	t.Helper()
	requireChromium(t)
	p := startProxy(t)
	opts := Options{ProxyAddr: p.addr, ProxyUser: proxyUser, ProxyPass: proxyPass, ProfileDir: t.TempDir(),
		FilesDir: t.TempDir(), Policy: Policy{DefaultAction: ActionAllow}}
	if tweak != nil {
		tweak(&opts)
	}
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	s, err := Open(ctx, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		if err := s.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s, p
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

func serve(t *testing.T, h http.HandlerFunc) *httptest.Server {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

func html(w http.ResponseWriter, body string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	io.WriteString(w, body)
}

func wantCode(t *testing.T, err error, code airlock.Code, reason string) {
	t.Helper()
	var ae *airlock.Error
	if !errors.As(err, &ae) || ae.Code != code || ae.Reason != airlock.Reason(reason) {
		t.Fatalf("err = %v, want *airlock.Error %s/%s", err, code, reason)
	}
}

func TestOpenMissingBinary(t *testing.T) {
	t.Parallel()
	_, err := Open(t.Context(), Options{ExecPath: "/nonexistent/chromium", ProxyAddr: "127.0.0.1:1", ProfileDir: t.TempDir()})
	wantCode(t, err, airlock.CodeUnavailable, "browser_missing")
	if !strings.Contains(err.Error(), "apt-get install chromium") {
		t.Errorf("error %q does not say how to install Chromium", err)
	}
}

func TestOpenInvalidOptions(t *testing.T) {
	t.Parallel()
	for _, o := range []Options{
		{ProxyAddr: "127.0.0.1:1"},
		{ProfileDir: "x", ProxyAddr: "no-port"},
		{ProfileDir: "x"},
	} {
		_, err := Open(t.Context(), o)
		wantCode(t, err, airlock.CodeInvalid, "missing_option")
	}
}

// A zero Session has no browser: a refusal from it proves that the URL was
// refused before any browser call.
func TestNavigateRefusesSchemesBeforeBrowser(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{
		"javascript:alert(1)", "data:text/html,hi", "file:///etc/passwd", "blob:http://a.test/x",
		"chrome://settings", "view-source:http://a.test/", "ftp://a.test/f", "JAVASCRIPT:alert(1)",
	} {
		t.Run(raw, func(t *testing.T) {
			err := (&Session{}).Navigate(t.Context(), raw, true)
			wantCode(t, err, airlock.CodeDenied, "scheme")
		})
	}
	err := (&Session{}).Navigate(t.Context(), "not a url", true)
	wantCode(t, err, airlock.CodeInvalid, "bad_url")
	err = (&Session{opts: Options{Decide: func(string) error {
		return airlock.Errorf(airlock.CodeDenied, "denied_origin", "no")
	}}}).Navigate(t.Context(), "http://a.test/", true)
	wantCode(t, err, airlock.CodeDenied, "denied_origin")
}

func TestNavigateThroughProxy(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	site := serve(t, func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		html(w, "<title>Hello proxy</title><p>hi</p>")
	})
	s, p := open(t, nil)
	ctx := testCtx(t)
	if err := s.Navigate(ctx, site.URL+"/page", true); err != nil {
		t.Fatalf("Navigate: %v", err)
	}
	st, err := s.GetState(ctx)
	if err != nil {
		t.Fatalf("GetState: %v", err)
	}
	if st.URL != site.URL+"/page" || st.Title != "Hello proxy" {
		t.Errorf("GetState = %+v, want %s/page, Hello proxy", st, site.URL)
	}
	if hits.Load() == 0 {
		t.Error("the site saw no request")
	}
	keys := p.decisionKeys()
	if len(keys) == 0 {
		t.Fatal("the proxy decided nothing: the browser bypassed it")
	}
	for _, k := range keys {
		if k != proxyUser {
			t.Errorf("proxy decision with key %q, want %q (the session's credentials)", k, proxyUser)
		}
	}
}

func TestWrongProxyCredentialsFail(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	site := serve(t, func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		html(w, "<title>x</title>")
	})
	s, _ := open(t, func(o *Options) { o.ProxyPass = "wrong" })
	err := s.Navigate(testCtx(t), site.URL, true)
	wantCode(t, err, airlock.CodeUnavailable, "proxy_auth")
	if n := hits.Load(); n != 0 {
		t.Errorf("the site saw %d requests through a proxy that refused the credentials", n)
	}
}

func TestInterceptDeniesSubresources(t *testing.T) {
	t.Parallel()
	var deniedHits atomic.Int32
	denied := serve(t, func(w http.ResponseWriter, r *http.Request) {
		deniedHits.Add(1)
		w.Header().Set("Access-Control-Allow-Origin", "*")
		io.WriteString(w, "leaked")
	})
	allowed := serve(t, func(w http.ResponseWriter, r *http.Request) {
		html(w, fmt.Sprintf(`<title>redteam</title>
<img src="%[1]s/pixel.png">
<iframe src="%[1]s/frame"></iframe>
<script>fetch(%[2]q).catch(() => {});</script>`, denied.URL, denied.URL+"/api"))
	})
	deniedHost := strings.TrimPrefix(denied.URL, "http://")

	events := make(chan Event, 16)
	s, _ := open(t, func(o *Options) {
		o.Decide = func(raw string) error {
			u, err := url.Parse(raw)
			if err != nil || u.Host == deniedHost {
				return airlock.Errorf(airlock.CodeDenied, "denied_origin", "%s is denied", raw)
			}
			return nil
		}
		o.OnEvent = func(ev Event) {
			if ev.Type == EventPolicyDenied {
				events <- ev
			}
		}
	})
	ctx := testCtx(t)
	if err := s.Navigate(ctx, allowed.URL, true); err != nil {
		t.Fatalf("Navigate: %v", err)
	}
	types := map[string]bool{}
	for range 3 {
		select {
		case d := <-events:
			if !strings.HasPrefix(d.URL, denied.URL) || d.Reason != "denied_origin" {
				t.Errorf("denial %+v, want a denied_origin of %s", d, denied.URL)
			}
			types[d.ResourceType] = true
		case <-ctx.Done():
			t.Fatalf("got %v denials before the deadline, want 3", types)
		}
	}
	// Chromium reports a fetch() paused in the Fetch domain as XHR.
	if !types["Image"] || !types["Document"] || !types["XHR"] && !types["Fetch"] {
		t.Errorf("denied resource types %v, want Image, Document (the iframe) and XHR or Fetch", types)
	}
	if n := deniedHits.Load(); n != 0 {
		t.Errorf("the denied server saw %d requests, want 0", n)
	}
	// Navigating there is refused before the browser asks.
	err := s.Navigate(ctx, denied.URL+"/top", true)
	wantCode(t, err, airlock.CodeDenied, "denied_origin")
	if n := deniedHits.Load(); n != 0 {
		t.Errorf("the denied server saw %d requests, want 0", n)
	}
}

var refRE = regexp.MustCompile(`@e\d+`)

// refOf returns the ref on the first snapshot line that starts with prefix
// (after indentation).
func refOf(t *testing.T, snap Snapshot, prefix string) string {
	t.Helper()
	for line := range strings.SplitSeq(snap.Text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), prefix) {
			if r := refRE.FindString(line); r != "" {
				return r
			}
		}
	}
	t.Fatalf("no ref on a line starting %q in snapshot:\n%s", prefix, snap.Text)
	return ""
}

func snapshot(t *testing.T, s *Session) Snapshot {
	t.Helper()
	snap, err := s.Snapshot(testCtx(t), SnapshotOptions{})
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	return snap
}

func TestFillAndSubmitForm(t *testing.T) {
	t.Parallel()
	got := make(chan url.Values, 1)
	site := serve(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/submit":
			got <- r.URL.Query()
			html(w, "<title>Thanks</title><h1>Thanks</h1>")
		default:
			html(w, `<title>Form</title><form action="/submit">
<label>Name <input name="name" value="old"></label>
<label>Note <textarea name="note"></textarea></label>
<button type="submit">Send</button></form>`)
		}
	})
	s, _ := open(t, nil)
	ctx := testCtx(t)
	if err := s.Navigate(ctx, site.URL+"/", true); err != nil {
		t.Fatalf("Navigate: %v", err)
	}
	snap := snapshot(t, s)
	t.Logf("snapshot:\n%s", snap.Text)
	name, note, send := refOf(t, snap, `- textbox "Name"`), refOf(t, snap, `- textbox "Note"`), refOf(t, snap, `- button "Send"`)
	if err := s.Fill(ctx, name, "Ada Lovelace"); err != nil {
		t.Fatalf("Fill name: %v", err)
	}
	if err := s.Fill(ctx, note, "first\u00e9"); err != nil {
		t.Fatalf("Fill note: %v", err)
	}
	if err := s.Fill(ctx, send, "x"); err == nil {
		t.Error("Fill on a button succeeded")
	} else {
		wantCode(t, err, airlock.CodeInvalid, "not_fillable")
	}
	if after := snapshot(t, s); !strings.Contains(after.Text, `value="Ada Lovelace"`) {
		t.Errorf("snapshot after fill lacks the new value:\n%s", after.Text)
	}
	if err := s.Click(ctx, send); err != nil {
		t.Fatalf("Click: %v", err)
	}
	select {
	case q := <-got:
		if q.Get("name") != "Ada Lovelace" || q.Get("note") != "first\u00e9" {
			t.Errorf("submitted %v, want name=Ada Lovelace note=firsté", q)
		}
	case <-ctx.Done():
		t.Fatal("the form was never submitted")
	}
}

func TestClickCounterAndStaleRefs(t *testing.T) {
	t.Parallel()
	site := serve(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/other":
			html(w, `<title>Other</title><button>Other</button>`)
		default:
			html(w, `<title>Counter</title>
<button onclick="document.getElementById('n').textContent = 'count ' + (++window.c)">Add</button>
<p id="n">count 0</p><script>window.c = 0</script>`)
		}
	})
	s, _ := open(t, nil)
	ctx := testCtx(t)
	if err := s.Navigate(ctx, site.URL+"/", true); err != nil {
		t.Fatalf("Navigate: %v", err)
	}
	snap := snapshot(t, s)
	add := refOf(t, snap, `- button "Add"`)
	for range 3 {
		if err := s.Click(ctx, add); err != nil {
			t.Fatalf("Click: %v", err)
		}
	}
	again := snapshot(t, s)
	if !strings.Contains(again.Text, `"count 3"`) {
		t.Errorf("after three clicks the snapshot does not show count 3:\n%s", again.Text)
	}
	// An element keeps its ref across snapshots of the same document, so
	// an agent sees the same @eN for the same button in every reply.
	if got := refOf(t, again, `- button "Add"`); got != add {
		t.Errorf("the Add button is %s in the second snapshot, %s in the first", got, add)
	}
	// The earlier ref still works on the same document.
	if err := s.Click(ctx, add); err != nil {
		t.Fatalf("Click with an earlier ref of the same page: %v", err)
	}

	wantCode(t, s.Click(ctx, "@e999999"), airlock.CodeInvalid, "stale_ref")

	if err := s.Navigate(ctx, site.URL+"/other", true); err != nil {
		t.Fatalf("Navigate: %v", err)
	}
	// A ref number is never given to another element, on any page.
	if other := refOf(t, snapshot(t, s), `- button "Other"`); other == add {
		t.Errorf("the other page's button got the Add button's ref %s", add)
	}
	wantCode(t, s.Click(ctx, add), airlock.CodeInvalid, "stale_ref")
	wantCode(t, s.Fill(ctx, add, "x"), airlock.CodeInvalid, "stale_ref")
}

// A navigation the page starts itself (not through Navigate) kills refs too.
func TestStaleRefAfterPageNavigation(t *testing.T) {
	t.Parallel()
	site := serve(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/next":
			html(w, `<title>Next</title><a href="/">Back</a>`)
		default:
			html(w, `<title>Start</title><a href="/next">Go</a>`)
		}
	})
	s, _ := open(t, nil)
	ctx := testCtx(t)
	if err := s.Navigate(ctx, site.URL+"/", true); err != nil {
		t.Fatalf("Navigate: %v", err)
	}
	goRef := refOf(t, snapshot(t, s), `- link "Go"`)
	if err := s.Click(ctx, goRef); err != nil {
		t.Fatalf("Click: %v", err)
	}
	// Wait for the new document: its snapshot shows the link Back.
	for {
		snap := snapshot(t, s)
		if strings.Contains(snap.Text, `link "Back"`) {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the link never navigated; last snapshot:\n%s", snap.Text)
		case <-time.After(50 * time.Millisecond): // poll interval, not synchronisation
		}
	}
	wantCode(t, s.Click(ctx, goRef), airlock.CodeInvalid, "stale_ref")
}

func TestCrashDetectedAndRestart(t *testing.T) {
	t.Parallel()
	site := serve(t, func(w http.ResponseWriter, r *http.Request) { html(w, "<title>Back again</title>") })
	s, _ := open(t, nil)
	ctx := testCtx(t)
	s.mu.Lock()
	b := s.b
	s.mu.Unlock()
	if err := b.browser.Process().Kill(); err != nil {
		t.Fatalf("kill: %v", err)
	}
	select {
	case <-b.browser.LostConnection:
	case <-ctx.Done():
		t.Fatal("the lost connection was never noticed")
	}
	if !s.Crashed() {
		t.Error("Crashed() = false after the process was killed")
	}
	_, err := s.GetState(ctx)
	wantCode(t, err, airlock.CodeUnavailable, "browser_crashed")
	wantCode(t, s.Navigate(ctx, site.URL, true), airlock.CodeUnavailable, "browser_crashed")

	if err := s.Restart(ctx); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	if s.Crashed() {
		t.Error("Crashed() = true after Restart")
	}
	if err := s.Navigate(ctx, site.URL, true); err != nil {
		t.Fatalf("Navigate after Restart: %v", err)
	}
	st, err := s.GetState(ctx)
	if err != nil || st.Title != "Back again" {
		t.Fatalf("GetState after Restart = %+v, %v", st, err)
	}
}

func TestClosedSession(t *testing.T) {
	t.Parallel()
	s, _ := open(t, nil)
	ctx := testCtx(t)
	if err := s.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	_, err := s.GetState(ctx)
	wantCode(t, err, airlock.CodeInvalid, "session_closed")
	wantCode(t, s.Restart(ctx), airlock.CodeInvalid, "session_closed")
}

// Layer 2: the proxy's own refusal of a document comes back typed, not as
// a page. nowhere.test resolves to nothing in the proxy's resolver, and
// Chromium resolves nothing itself.
func TestNavigateProxyRefusalIsTyped(t *testing.T) {
	t.Parallel()
	s, p := open(t, nil)
	err := s.Navigate(testCtx(t), "http://nowhere.test/", true)
	var ae *airlock.Error
	if !errors.As(err, &ae) || ae.Code == airlock.CodeInternal || ae.Reason == "" {
		t.Fatalf("err = %v, want the proxy's code and reason", err)
	}
	t.Logf("refusal: %s/%s: %v", ae.Code, ae.Reason, err)
	if len(p.decisionKeys()) == 0 {
		t.Error("the proxy recorded no decision for the refused request")
	}
}
