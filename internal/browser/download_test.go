package browser

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/egress"
)

// history is the current tab's navigation history: its entries' URLs and
// the current index.
func history(t *testing.T, s *Session) ([]string, int64) {
	t.Helper()
	s.mu.Lock()
	tg := s.b.target
	s.mu.Unlock()
	h, err := cdp.Call(testCtx(t), tg, page.GetNavigationHistory, cdp.Empty{})
	if err != nil {
		t.Fatalf("history: %v", err)
	}
	var urls []string
	for _, e := range h.Entries {
		urls = append(urls, e.URL)
	}
	return urls, h.CurrentIndex
}

func sameHistory(t *testing.T, s *Session, urls []string, idx int64) {
	t.Helper()
	u2, i2 := history(t, s)
	if strings.Join(u2, " ") != strings.Join(urls, " ") || i2 != idx {
		t.Errorf("the tab's history changed: %v @%d, was %v @%d", u2, i2, urls, idx)
	}
}

// A URL that renders as a page downloads as the session (its cookie goes
// along) into the files directory, and the tab stays where it is.
func TestDownloadPageWithoutNavigating(t *testing.T) {
	t.Parallel()
	const report = `<!doctype html><title>Report</title><p>quarterly numbers</p>`
	site := serve(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/start":
			http.SetCookie(w, &http.Cookie{Name: "sid", Value: "s1", Path: "/"})
			html(w, `<title>Start</title><p>start</p>`)
		case "/report":
			if c, err := r.Cookie("sid"); err != nil || c.Value != "s1" {
				http.Error(w, "no session cookie", http.StatusForbidden)
				return
			}
			html(w, report)
		default:
			http.NotFound(w, r)
		}
	})
	s, _ := open(t, nil)
	ctx := testCtx(t)
	do(t, s, Op{Kind: KindNavigate, URL: site.URL + "/start"})
	urls, idx := history(t, s)
	r, err := s.Do(ctx, Op{Kind: KindDownload, URL: site.URL + "/report", DestPath: "out/report.html"})
	if err != nil {
		t.Fatalf("download of a page: %v", err)
	}
	if d := r.Download; d == nil || d.Bytes != int64(len(report)) || d.Path != "out/report.html" || d.Name != "report" ||
		!strings.HasPrefix(d.ContentType, "text/html") {
		t.Fatalf("download result %+v", r.Download)
	}
	if b, _ := os.ReadFile(filepath.Join(s.FilesDir(), "out/report.html")); string(b) != report {
		t.Fatalf("saved %q", b)
	}
	sameHistory(t, s, urls, idx)
	if st, _ := s.GetState(ctx); st.URL != site.URL+"/start" || st.Title != "Start" {
		t.Errorf("the tab moved: %+v", st)
	}
	// The background tab is gone, and was never a tab of the session.
	if tabs, err := s.Tabs(ctx); err != nil || len(tabs) != 1 {
		t.Errorf("tabs after a download: %+v %v", tabs, err)
	}
}

// The body is capped (declared or streamed), a status other than 2xx is
// no file, a redirect to a denied origin is refused by layer 1; nothing is
// left behind in the files directory.
func TestDownloadLimitsAndStatus(t *testing.T) {
	t.Parallel()
	var deniedHits atomic.Int64
	denied := serve(t, func(w http.ResponseWriter, r *http.Request) { deniedHits.Add(1) })
	site := serve(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/big":
			w.Header().Set("Content-Type", "application/octet-stream")
			w.Write(make([]byte, 4096))
		case "/stream": // chunked: no Content-Length to refuse early
			w.Header().Set("Content-Type", "application/octet-stream")
			for range 8 {
				w.Write(make([]byte, 512))
				w.(http.Flusher).Flush()
			}
		case "/fits":
			w.Header().Set("Content-Type", "text/plain")
			w.Write(make([]byte, 1024))
		case "/away":
			http.Redirect(w, r, denied.URL+"/x", http.StatusFound)
		case "/hop":
			http.Redirect(w, r, "/fits", http.StatusFound)
		default:
			http.NotFound(w, r)
		}
	})
	s, _ := open(t, func(o *Options) {
		o.MaxDownloadBytes = 1024
		o.Policy = Policy{DefaultAction: ActionAllow, DeniedOrigins: []string{denied.URL}}
	})
	ctx := testCtx(t)
	for _, tc := range []struct {
		path        string
		code        airlock.Code
		reason      airlock.Reason
		bytes       int64
		name, ctype string
	}{
		{"/big", airlock.CodeTooLarge, "download_size", 0, "", ""},
		{"/stream", airlock.CodeTooLarge, "download_size", 0, "", ""},
		{"/missing", airlock.CodeUpstream, "download_status", 0, "", ""},
		{"/away", airlock.CodeDenied, "denied_origin", 0, "", ""},
		{"/fits", "", "", 1024, "fits", "text/plain"},
		{"/hop", "", "", 1024, "fits", "text/plain"},
	} {
		dest := "d" + strings.ReplaceAll(tc.path, "/", "_")
		d, err := s.Download(ctx, site.URL+tc.path, dest)
		_, statErr := os.Stat(filepath.Join(s.FilesDir(), dest))
		if tc.code != "" {
			if airlock.CodeOf(err) != tc.code || airlock.ReasonOf(err) != tc.reason {
				t.Errorf("%s: %v, want %s/%s", tc.path, err, tc.code, tc.reason)
			}
			if !os.IsNotExist(statErr) {
				t.Errorf("%s: a refused download saved a file", tc.path)
			}
			continue
		}
		if err != nil || d.Bytes != tc.bytes || d.Name != tc.name || d.ContentType != tc.ctype || statErr != nil {
			t.Errorf("%s: %+v %v (file: %v)", tc.path, d, err, statErr)
		}
	}
	if n := deniedHits.Load(); n != 0 {
		t.Errorf("the denied origin got %d requests", n)
	}
	left, _ := filepath.Glob(filepath.Join(s.FilesDir(), ".download-*"))
	if len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

// Under default_action ask, a download waits for the approval (the event
// names the download op), and goes on once approved.
func TestDownloadAsk(t *testing.T) {
	t.Parallel()
	site := serve(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Write([]byte("asked bytes"))
	})
	events := make(chan Event, 64)
	s, _ := open(t, func(o *Options) {
		o.Policy = Policy{DefaultAction: ActionAsk}
		o.OnEvent = func(ev Event) { events <- ev }
	})
	ctx := testCtx(t)
	type res struct {
		r   Result
		err error
	}
	done := make(chan res, 1)
	go func() {
		r, err := s.Do(ctx, Op{Kind: KindDownload, URL: site.URL + "/notes.txt", DestPath: "notes.txt"})
		done <- res{r, err}
	}()
	for {
		var ev Event
		select {
		case ev = <-events:
		case <-ctx.Done():
			t.Fatal("no approval-required event")
		}
		if ev.Type != EventApprovalRequired {
			continue
		}
		if ev.InitiatingOp != KindDownload {
			t.Errorf("approval event %+v, want initiating_op download", ev)
		}
		if err := s.Approve(ev.ApprovalID); err != nil {
			t.Fatal(err)
		}
		break
	}
	got := <-done
	if got.err != nil || got.r.Download == nil || got.r.Download.Bytes != int64(len("asked bytes")) || got.r.Download.Name != "notes.txt" {
		t.Fatalf("approved download: %+v %v", got.r.Download, got.err)
	}
	// Another origin, denied by the person asked: refused with that reason.
	other := serve(t, func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("never")) })
	go func() {
		r, err := s.Do(ctx, Op{Kind: KindDownload, URL: other.URL, DestPath: "x.txt"}) // no path: Chromium asks for "/"
		done <- res{r, err}
	}()
	for asked := false; !asked; {
		select {
		case ev := <-events:
			if ev.Type == EventApprovalRequired {
				if err := s.Deny(ev.ApprovalID); err != nil {
					t.Fatal(err)
				}
				asked = true
			}
		case <-ctx.Done():
			t.Fatal("no approval-required event for the second origin")
		}
	}
	got = <-done
	wantCode(t, got.err, airlock.CodeDenied, "not_approved")
}

// A download right after a press whose navigation is still in flight
// works the first time, and the tab goes on to the page the press led to.
func TestDownloadAfterNavigatingPress(t *testing.T) {
	t.Parallel()
	site := serve(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/next":
			html(w, `<title>Next</title><h1>Next</h1>`)
		case "/file.bin":
			time.Sleep(800 * time.Millisecond) // the press's navigation lands meanwhile
			w.Header().Set("Content-Type", "application/octet-stream")
			w.Header().Set("Content-Disposition", `attachment; filename="file.bin"`)
			w.Write([]byte("file bytes"))
		default:
			html(w, `<title>Form</title><form action="/next"><label>Q <input name="q"></label></form>
<script>document.forms[0].onsubmit = e => { e.preventDefault(); setTimeout(() => e.target.submit(), 300); };</script>`)
		}
	})
	s, _ := open(t, nil)
	ctx := testCtx(t)
	do(t, s, Op{Kind: KindNavigate, URL: site.URL + "/"})
	q := refOf(t, *do(t, s, Op{Kind: KindSnapshot}).Snapshot, `- textbox "Q"`)
	do(t, s, Op{Kind: KindPress, Ref: q, Key: "Enter", Snapshot: new(false)})
	r, err := s.Do(ctx, Op{Kind: KindDownload, URL: site.URL + "/file.bin", DestPath: "file.bin"})
	if err != nil {
		t.Fatalf("download right after a navigating press: %v", err)
	}
	if r.Download.Bytes != int64(len("file bytes")) {
		t.Fatalf("download result %+v", r.Download)
	}
	do(t, s, Op{Kind: KindWaitFor, Selector: "h1", TimeoutMS: 20000})
	if st, _ := s.GetState(ctx); !strings.HasPrefix(st.URL, site.URL+"/next") {
		t.Errorf("the tab is on %s, want /next", st.URL)
	}
}

// A denied origin is refused before any request; an address layer 2
// refuses is a typed refusal, not a timeout, and nothing is saved.
func TestDownloadRefusals(t *testing.T) {
	t.Parallel()
	var hits atomic.Int64
	denied := serve(t, func(w http.ResponseWriter, r *http.Request) { hits.Add(1) })
	s, _ := open(t, func(o *Options) {
		o.Policy = Policy{DefaultAction: ActionAllow, DeniedOrigins: []string{denied.URL}}
	})
	ctx := testCtx(t)
	_, err := s.Do(ctx, Op{Kind: KindDownload, URL: denied.URL + "/x", DestPath: "x"})
	wantCode(t, err, airlock.CodeDenied, "denied_origin")
	if hits.Load() != 0 {
		t.Errorf("the denied origin got %d requests", hits.Load())
	}
	// 127.0.0.9 is loopback without the proxy's exception: layer 1 lets it
	// through (default allow), layer 2 refuses.
	s2, _ := open(t, nil)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(denied.URL, "http://"))
	inner := "http://127.0.0.9:" + port + "/secret"
	lctx, cancel := context.WithTimeout(ctx, testTimeout/2)
	defer cancel()
	_, err = s2.Do(lctx, Op{Kind: KindDownload, URL: inner, DestPath: "secret"})
	if airlock.CodeOf(err) != airlock.CodeDenied || airlock.ReasonOf(err) == "" {
		t.Fatalf("download of an internal address: %v, want a denied refusal with the proxy's reason", err)
	}
	t.Logf("layer 2: %v", err)
	if _, err := os.Stat(filepath.Join(s2.FilesDir(), "secret")); !os.IsNotExist(err) {
		t.Errorf("a refused download saved a file: %v", err)
	}
}

// A download whose server never answers ends at the op's deadline as a
// timeout; the session goes on, with its one tab.
func TestDownloadTimeoutLeavesSessionUsable(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	site := serve(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hang" {
			select {
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
		html(w, `<title>Fine</title>`)
	})
	t.Cleanup(func() { close(release) })
	s, _ := open(t, nil)
	ctx := testCtx(t)
	do(t, s, Op{Kind: KindNavigate, URL: site.URL + "/"})
	dctx, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
	defer cancel()
	_, err := s.Download(dctx, site.URL+"/hang", "hang.bin")
	wantCode(t, err, airlock.CodeTimeout, "browser_timeout")
	do(t, s, Op{Kind: KindNavigate, URL: site.URL + "/again"})
	if tabs, err := s.Tabs(ctx); err != nil || len(tabs) != 1 || tabs[0].Title != "Fine" {
		t.Errorf("tabs after a timed-out download: %+v %v", tabs, err)
	}
}

// A download a page starts itself (a click on an attachment link) is
// refused: only the download op writes files, and only in the files
// directory. Chromium's default directory is under HOME, set here to an
// empty directory that must stay empty.
func TestDownloadByPageIsDenied(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_DOWNLOAD_DIR", filepath.Join(home, "Downloads"))
	var served atomic.Int64
	site := serve(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/file.bin" {
			served.Add(1)
			w.Header().Set("Content-Type", "application/octet-stream")
			w.Header().Set("Content-Disposition", `attachment; filename="file.bin"`)
			w.Write([]byte("page-started download"))
			return
		}
		html(w, `<title>Links</title><a href="/file.bin">Get the file</a>`)
	})
	s, _ := open(t, nil)
	do(t, s, Op{Kind: KindNavigate, URL: site.URL + "/"})
	// Chromium reports the download's end (canceled when denied,
	// completed when it wrote the file): the files are looked for after it.
	s.mu.Lock()
	ctx, stop := context.WithCancel(testCtx(t))
	defer stop()
	progress := cdp.Events(ctx, s.b.browser, cdpbrowser.DownloadProgress)
	s.mu.Unlock()
	link := refOf(t, *do(t, s, Op{Kind: KindSnapshot}).Snapshot, `- link "Get the file"`)
	r := do(t, s, Op{Kind: KindClick, Ref: link, Snapshot: new(false)})
	for ev, err := range progress {
		if err != nil {
			t.Fatalf("no end of the page's download: %v", err)
		}
		if ev.State != cdpbrowser.DownloadProgressStateInProgress {
			t.Logf("the page's download ended: %s", ev.State)
			break
		}
	}
	if served.Load() == 0 {
		t.Error("the site never served the file: the test proves nothing")
	}
	var found []string
	filepath.WalkDir(home, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.Contains(d.Name(), "file") {
			found = append(found, p)
		}
		return nil
	})
	if len(found) != 0 {
		t.Errorf("a page-started download was written outside the files directory: %v", found)
	}
	// The click's reply says what the page tried to download.
	if r.Page == nil || len(r.Page.Downloads) != 1 || r.Page.Downloads[0].URL != site.URL+"/file.bin" || r.Page.Downloads[0].Name != "file.bin" {
		t.Errorf("click reply %+v, want the refused download of /file.bin", r.Page)
	}
}

// statusRecorder notes a response's status and passes hijacking on.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (w *statusRecorder) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusRecorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// An https download whose tunnel layer 2 refuses (an internal address) is
// that refusal, typed, once the proxy reports it (RefusedTunnel), as the
// engine's proxy does: Chromium itself only says
// ERR_TUNNEL_CONNECTION_FAILED.
func TestDownloadTunnelRefusal(t *testing.T) {
	t.Parallel()
	requireChromium(t)
	var sess atomic.Pointer[Session]
	p := startProxyWith(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rec := &statusRecorder{ResponseWriter: w}
			h.ServeHTTP(rec, r)
			if s := sess.Load(); s != nil && r.Method == http.MethodConnect && rec.status == http.StatusForbidden {
				s.RefusedTunnel(r.Host, rec.Header().Get(egress.HeaderAirlockReason))
			}
		})
	})
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	s, err := Open(ctx, Options{ProxyAddr: p.addr, ProxyUser: proxyUser, ProxyPass: proxyPass, ProfileDir: t.TempDir(),
		FilesDir: t.TempDir(), Policy: Policy{DefaultAction: ActionAllow}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	sess.Store(s)
	_, err = s.Download(ctx, "https://127.0.0.9:8443/secret", "secret")
	wantCode(t, err, airlock.CodeDenied, "loopback")
	if _, err := os.Stat(filepath.Join(s.FilesDir(), "secret")); !os.IsNotExist(err) {
		t.Errorf("a refused download saved a file: %v", err)
	}
}
