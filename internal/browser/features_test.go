package browser

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/egress"
)

func TestParsePolicy(t *testing.T) {
	t.Parallel()
	good := Policy{
		AllowedOrigins: []string{"https://example.com", "http://127.0.0.1:8080", "example.org", "*.docs.test", "https://[::1]:8443"},
		DeniedOrigins:  []string{"https://evil.example.com"},
		DefaultAction:  ActionAsk,
	}
	c, err := good.compile()
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	for _, tc := range []struct {
		scheme, host string
		port         int
		want         verdict
	}{
		{"https", "example.com", 443, verdictAllow},
		{"http", "example.com", 80, verdictAsk}, // another origin: another scheme and port
		{"https", "example.com", 8443, verdictAsk},
		{"http", "127.0.0.1", 8080, verdictAllow},
		{"http", "127.0.0.1", 8081, verdictAsk},
		{"http", "example.org", 1234, verdictAllow}, // a host entry: any port
		{"https", "a.docs.test", 443, verdictAllow},
		{"https", "docs.test", 443, verdictAsk}, // *.suffix is the subdomains only
		{"https", "xdocs.test", 443, verdictAsk},
		{"https", "::1", 8443, verdictAllow},
		{"", "example.com", 443, verdictAllow}, // layer 2: host and port
		{"", "other.test", 443, verdictDeny},   // layer 2 cannot ask
	} {
		if got, _ := c.decide(tc.scheme, tc.host, tc.port); got != tc.want {
			t.Errorf("decide(%s, %s, %d) = %v, want %v", tc.scheme, tc.host, tc.port, got, tc.want)
		}
	}
	// Deny wins over allow, at both layers.
	c2, _ := Policy{AllowedOrigins: []string{"*.example.com"}, DeniedOrigins: []string{"https://evil.example.com"}}.compile()
	if v, r := c2.decide("https", "evil.example.com", 443); v != verdictDeny || r != "denied_origin" {
		t.Errorf("deny vs allow: %v %s", v, r)
	}
	if v, _ := c2.decide("", "evil.example.com", 443); v != verdictDeny {
		t.Errorf("layer 2 deny vs allow: %v", v)
	}
	if v, r := c2.decide("https", "other.test", 443); v != verdictDeny || r != "default_deny" {
		t.Errorf("default: %v %s", v, r)
	}
	for _, bad := range []Policy{
		{DefaultAction: "maybe"},
		{AllowedOrigins: []string{""}},
		{AllowedOrigins: []string{"ftp://example.com"}},
		{AllowedOrigins: []string{"javascript://x"}},
		{AllowedOrigins: []string{"https://example.com/path"}},
		{AllowedOrigins: []string{"https://user@example.com"}},
		{AllowedOrigins: []string{"*.1.2.3.4"}},
		{DeniedOrigins: []string{"exa mple.com"}},
		{DeniedOrigins: []string{"example.com/x"}},
	} {
		if err := bad.Validate(); airlock.CodeOf(err) != airlock.CodeInvalid {
			t.Errorf("Validate(%+v) = %v, want invalid", bad, err)
		}
	}
}

func TestConfine(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "secret"), []byte("x"), 0o600)
	os.Symlink(outside, filepath.Join(root, "link"))
	os.Symlink(filepath.Join(outside, "secret"), filepath.Join(root, "filelink"))
	os.MkdirAll(filepath.Join(root, "sub"), 0o700)
	for _, ok := range []string{"a.txt", "sub/b.png", "new/dir/c.png", filepath.Join(root, "d.txt")} {
		if _, err := confine(root, ok); err != nil {
			t.Errorf("confine(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", "../x", "sub/../../x", "a/../b", "/etc/passwd", filepath.Join(outside, "secret"),
		"link/secret", "link/new.txt", "filelink", "a\x00b", `..\x`} {
		_, err := confine(root, bad)
		if airlock.ReasonOf(err) != "path_escape" {
			t.Errorf("confine(%q) = %v, want path_escape", bad, err)
		}
	}
}

// Snapshots include same-origin iframes and shadow DOM, give distinct refs
// to duplicate role+name elements, and page with a budget.
func TestSnapshotFramesShadowDuplicatesAndPaging(t *testing.T) {
	t.Parallel()
	site := serve(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/frame":
			html(w, `<button>Inside the frame</button>`)
		case "/long":
			var b strings.Builder
			b.WriteString("<title>Long</title>")
			for i := range 400 {
				b.WriteString(`<p>Paragraph number ` + strings.Repeat("x", i%7) + `</p><a href="#l">Link ` + string(rune('a'+i%26)) + `</a>`)
			}
			html(w, b.String())
		default:
			html(w, `<title>Parts</title><h1>Parts</h1>
<button>Save</button><button>Save</button>
<div id="host"></div>
<script>document.getElementById("host").attachShadow({mode: "open"}).innerHTML = "<button>Shadow button</button>";</script>
<iframe src="/frame"></iframe>`)
		}
	})
	s, _ := open(t, nil)
	ctx := testCtx(t)
	if err := s.Navigate(ctx, site.URL+"/", true); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitFor(ctx, "iframe", "", 0); err != nil {
		t.Fatal(err)
	}
	var snap Snapshot
	deadline := time.Now().Add(10 * time.Second)
	for {
		snap = snapshot(t, s)
		if strings.Contains(snap.Text, "Inside the frame") || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, want := range []string{`heading "Parts"`, `button "Shadow button"`, `button "Inside the frame"`} {
		if !strings.Contains(snap.Text, want) {
			t.Errorf("snapshot lacks %s:\n%s", want, snap.Text)
		}
	}
	saves := 0
	var refs []string
	for line := range strings.SplitSeq(snap.Text, "\n") {
		if strings.Contains(line, `button "Save"`) {
			saves++
			refs = append(refs, refRE.FindString(line))
		}
	}
	if saves != 2 || refs[0] == refs[1] || refs[0] == "" {
		t.Fatalf("duplicate buttons: %d lines, refs %v", saves, refs)
	}
	// The button in the frame and the one in the shadow root are clickable.
	if err := s.Click(ctx, refOf(t, snap, `- button "Inside the frame"`)); err != nil {
		t.Errorf("click in the iframe: %v", err)
	}
	if err := s.Click(ctx, refOf(t, snap, `- button "Shadow button"`)); err != nil {
		t.Errorf("click in the shadow root: %v", err)
	}
	// Interactive-only: buttons alone, unindented.
	io, err := s.Snapshot(ctx, SnapshotOptions{InteractiveOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(io.Text, "heading") || !strings.Contains(io.Text, `- button "Shadow button"`) {
		t.Errorf("interactive-only:\n%s", io.Text)
	}

	// Paging: a bounded first page with a marker, then the rest.
	if err := s.Navigate(ctx, site.URL+"/long", true); err != nil {
		t.Fatal(err)
	}
	first, err := s.Snapshot(ctx, SnapshotOptions{MaxChars: 2000})
	if err != nil {
		t.Fatal(err)
	}
	if !first.Truncated || len(first.Text) > 2200 || first.TotalChars <= 2000 || !strings.Contains(first.Text, "[truncated:") {
		t.Fatalf("first page: truncated %v, %d chars of %d", first.Truncated, len(first.Text), first.TotalChars)
	}
	var all strings.Builder
	all.WriteString(first.Text[:strings.Index(first.Text, "[truncated:")])
	off := first.NextOffset
	for pages := 0; off > 0; pages++ {
		if pages > 100 {
			t.Fatal("paging does not end")
		}
		p, err := s.Snapshot(ctx, SnapshotOptions{MaxChars: 2000, Offset: off})
		if err != nil {
			t.Fatalf("page at %d: %v", off, err)
		}
		text := p.Text
		if i := strings.Index(text, "[truncated:"); i >= 0 {
			text = text[:i]
		}
		all.WriteString(text)
		off = p.NextOffset
	}
	if all.Len() != first.TotalChars {
		t.Errorf("pages add up to %d characters, want %d", all.Len(), first.TotalChars)
	}
	// An offset after a navigation is refused.
	if err := s.Navigate(ctx, site.URL+"/", true); err != nil {
		t.Fatal(err)
	}
	_, err = s.Snapshot(ctx, SnapshotOptions{MaxChars: 2000, Offset: first.NextOffset})
	wantCode(t, err, airlock.CodeInvalid, "stale_snapshot")
}

// Under default_action ask a request waits for Approve (and its origin is
// admitted for the session), Deny, or the ask timeout.
func TestAskApproveDenyTimeout(t *testing.T) {
	t.Parallel()
	var hits atomic.Int64
	site := serve(t, func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		html(w, `<title>Asked</title><p>ok</p>`)
	})
	events := make(chan Event, 64)
	s, _ := open(t, func(o *Options) {
		o.Policy = Policy{DefaultAction: ActionAsk}
		o.AskTimeout = 1500 * time.Millisecond
		o.OnEvent = func(ev Event) { events <- ev }
	})
	ctx := testCtx(t)
	approval := func() Event {
		t.Helper()
		for {
			select {
			case ev := <-events:
				if ev.Type == EventApprovalRequired {
					return ev
				}
			case <-ctx.Done():
				t.Fatal("no approval-required event")
			}
		}
	}
	// Approve.
	done := make(chan error, 1)
	go func() { done <- s.Navigate(ctx, site.URL+"/a", true) }()
	ev := approval()
	if ev.ApprovalID == "" || !strings.HasPrefix(ev.URL, site.URL) || ev.ResourceType != "Document" {
		t.Fatalf("approval event %+v", ev)
	}
	if got := s.Pending(); got[ev.ApprovalID] == "" {
		t.Fatalf("Pending() = %v", got)
	}
	if err := s.Approve(ev.ApprovalID); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("approved navigation: %v", err)
	}
	wantCode(t, s.Approve(ev.ApprovalID), airlock.CodeNotFound, "approval")
	// The origin is admitted for the session, at layer 2 too.
	if err := s.Navigate(ctx, site.URL+"/b", true); err != nil {
		t.Fatalf("second navigation to an approved origin: %v", err)
	}
	tg, _ := egress.ParseHostPort(strings.TrimPrefix(site.URL, "http://"))
	if err := s.Admit(tg, nil); err != nil {
		t.Errorf("layer 2 refuses an approved origin: %v", err)
	}
	// Deny.
	var otherHits atomic.Int64
	other := serve(t, func(w http.ResponseWriter, r *http.Request) { otherHits.Add(1) })
	go func() { done <- s.Navigate(ctx, other.URL+"/", true) }()
	ev = approval()
	if err := s.Deny(ev.ApprovalID); err != nil {
		t.Fatal(err)
	}
	wantCode(t, <-done, airlock.CodeDenied, "blocked")
	// Silence: denied after the ask timeout.
	go func() { done <- s.Navigate(ctx, other.URL+"/again", true) }()
	approval()
	wantCode(t, <-done, airlock.CodeDenied, "blocked")
	if n := otherHits.Load(); n != 0 {
		t.Errorf("the refused origin got %d requests", n)
	}
	// Layer 2 refuses the origin that was never approved.
	tg, _ = egress.ParseHostPort(strings.TrimPrefix(other.URL, "http://"))
	if err := s.Admit(tg, nil); err == nil {
		t.Error("layer 2 admits an unapproved origin under ask")
	}
}

func TestUploadDownloadReadNetworkLogTabs(t *testing.T) {
	t.Parallel()
	got := make(chan string, 1)
	site := serve(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/upload":
			f, _, err := r.FormFile("f")
			if err == nil {
				b := make([]byte, 64)
				n, _ := f.Read(b)
				got <- string(b[:n])
			}
			html(w, `<title>Uploaded</title>`)
		case "/file.bin":
			w.Header().Set("Content-Type", "application/octet-stream")
			w.Header().Set("Content-Disposition", `attachment; filename="file.bin"`)
			w.Write([]byte("downloaded bytes"))
		case "/article":
			html(w, `<title>An article</title><article><h1>Headline</h1><p>`+strings.Repeat("Body text of the article. ", 20)+`</p></article>`)
		default:
			html(w, `<title>Form</title><form method="post" action="/upload" enctype="multipart/form-data">
<input type="file" name="f" aria-label="File"><button>Send</button></form><p id="js"></p>
<script>document.getElementById("js").textContent = "Rendered by script";</script>`)
		}
	})
	s, _ := open(t, nil)
	ctx := testCtx(t)
	os.WriteFile(filepath.Join(s.FilesDir(), "in.txt"), []byte("uploaded bytes"), 0o600)
	if err := s.Navigate(ctx, site.URL+"/", true); err != nil {
		t.Fatal(err)
	}
	snap := snapshot(t, s)
	file := refOf(t, snap, `- button "File"`)
	wantCode(t, s.Upload(ctx, file, "../in.txt"), airlock.CodeDenied, "path_escape")
	wantCode(t, s.Upload(ctx, file, "/etc/passwd"), airlock.CodeDenied, "path_escape")
	wantCode(t, s.Upload(ctx, file, "missing.txt"), airlock.CodeInvalid, "no_file")
	if err := s.Upload(ctx, file, "in.txt"); err != nil {
		t.Fatalf("Upload: %v", err)
	}
	if err := s.Click(ctx, refOf(t, snap, `- button "Send"`)); err != nil {
		t.Fatal(err)
	}
	select {
	case body := <-got:
		if body != "uploaded bytes" {
			t.Errorf("server got %q", body)
		}
	case <-ctx.Done():
		t.Fatal("the upload never arrived")
	}

	// Read: main content through the extractor, raw DOM after scripts.
	if err := s.Navigate(ctx, site.URL+"/article", true); err != nil {
		t.Fatal(err)
	}
	rr, err := s.Read(ctx, "")
	if err != nil || !strings.Contains(rr.Markdown, "Body text of the article") || rr.Title != "An article" {
		t.Fatalf("read: %v %+v", err, rr)
	}
	ar, err := s.Read(ctx, ReadArticle)
	if err != nil || ar.Page == nil || len(ar.Page.Headings) == 0 {
		t.Fatalf("read article: %v %+v", err, ar)
	}
	if err := s.Navigate(ctx, site.URL+"/", true); err != nil {
		t.Fatal(err)
	}
	raw, err := s.Read(ctx, ReadRaw)
	if err != nil || !strings.Contains(raw.HTML, "Rendered by script") {
		t.Fatalf("read raw: %v %+v", err, raw)
	}

	// Download into the files directory, confined.
	if _, err := s.Download(ctx, site.URL+"/file.bin", "../out.bin"); airlock.ReasonOf(err) != "path_escape" {
		t.Fatalf("download escape: %v", err)
	}
	d, err := s.Download(ctx, site.URL+"/file.bin", "got/file.bin")
	if err != nil || d.Bytes != int64(len("downloaded bytes")) || d.Name != "file.bin" || d.ContentType != "application/octet-stream" {
		t.Fatalf("Download: %+v %v", d, err)
	}
	if b, _ := os.ReadFile(filepath.Join(s.FilesDir(), "got/file.bin")); string(b) != "downloaded bytes" {
		t.Fatalf("downloaded %q", b)
	}
	if st, _ := s.GetState(ctx); st.URL != site.URL+"/" {
		t.Errorf("the page moved during the download: %s", st.URL)
	}

	// Tabs: open, act in it, close back.
	tabs, err := s.NewTab(ctx, site.URL+"/article")
	if err != nil || len(tabs) != 2 || !tabs[1].Current || tabs[1].Title != "An article" {
		t.Fatalf("new_tab: %v %+v", err, tabs)
	}
	tabs, err = s.CloseTab(ctx)
	if err != nil || len(tabs) != 1 || tabs[0].URL != site.URL+"/" {
		t.Fatalf("close_tab: %v %+v", err, tabs)
	}
	_, err = s.CloseTab(ctx)
	wantCode(t, err, airlock.CodeInvalid, "last_tab")

	// The network log has what layer 1 saw.
	log := s.NetworkLog()
	var sawUpload bool
	for _, e := range log.Entries {
		if e.Method == "POST" && strings.HasSuffix(e.URL, "/upload") && e.Allowed {
			sawUpload = true
		}
	}
	if !sawUpload {
		t.Errorf("network log lacks the upload POST: %+v", log.Entries)
	}
}

// interact: failures are recorded and the sequence goes on, unless
// stop_on_error; wait_for_hidden waits for an overlay to go; a failed goto
// aborts the rest; dblclick fires dblclick listeners.
func TestInteractSemantics(t *testing.T) {
	t.Parallel()
	site := serve(t, func(w http.ResponseWriter, r *http.Request) {
		html(w, `<title>Steps</title><div id="overlay" style="position:fixed;inset:0">busy</div>
<button id="b" ondblclick="document.getElementById('out').textContent='double'" onclick="document.getElementById('out').textContent='single'">B</button>
<p id="out">none</p>
<script>setTimeout(() => document.getElementById("overlay").remove(), 300);</script>`)
	})
	s, _ := open(t, nil)
	ctx := testCtx(t)
	res, err := s.Interact(ctx, []Action{
		{Action: ActGoto, URL: site.URL + "/"},
		{Action: ActClick, Selector: "#missing", TimeoutMS: 200},
		{Action: ActDblclick, Selector: "#b", WaitForHidden: "#overlay", WaitForHiddenMS: 5000},
		{Action: ActExtractText, Selector: "#out"},
		{Action: ActWaitForSelector, Selector: "#overlay", State: "detached"},
	}, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Results) != 5 || res.Aborted || res.Results[1].OK || !res.Results[2].OK || *res.Results[3].Text != "double" || !res.Results[4].OK {
		t.Fatalf("results: %+v", res)
	}
	if airlock.ReasonOf(res.Results[1].Err) != "no_match" {
		t.Errorf("missing selector: %v", res.Results[1].Err)
	}
	res, _ = s.Interact(ctx, []Action{
		{Action: ActClick, Selector: "#missing", TimeoutMS: 200},
		{Action: ActExtractText, Selector: "#out"},
	}, true)
	if !res.Aborted || res.AbortReason != "stop_on_error" || len(res.Results) != 1 {
		t.Fatalf("stop_on_error: %+v", res)
	}
	res, _ = s.Interact(ctx, []Action{
		{Action: ActGoto, URL: "http://127.0.0.1:1/"},
		{Action: ActExtractText},
	}, false)
	if !res.Aborted || res.AbortReason != "goto_failed" || len(res.Results) != 1 {
		t.Fatalf("goto failure: %+v", res)
	}
	_, err = s.Interact(ctx, []Action{{Action: "eval"}}, false)
	wantCode(t, err, airlock.CodeInvalid, "browser_action")
	// Strict parsing names the stray field.
	if _, err := ParseAction([]byte(`{"action":"click","selector":"a","url":"x"}`)); err == nil || !strings.Contains(err.Error(), `"url"`) {
		t.Errorf("ParseAction with a stray field: %v", err)
	}
}

// A redirect chain longer than MaxRedirects is cut at layer 1.
func TestRedirectCap(t *testing.T) {
	t.Parallel()
	var hops atomic.Int64
	site := serve(t, func(w http.ResponseWriter, r *http.Request) {
		hops.Add(1)
		var n int
		fmt.Sscanf(r.URL.Path, "/r/%d", &n)
		http.Redirect(w, r, fmt.Sprintf("/r/%d", n+1), http.StatusFound)
	})
	events := make(chan Event, 64)
	s, _ := open(t, func(o *Options) {
		o.OnEvent = func(ev Event) {
			if ev.Type == EventPolicyDenied {
				events <- ev
			}
		}
	})
	ctx := testCtx(t)
	err := s.Navigate(ctx, site.URL+"/r/0", true)
	wantCode(t, err, airlock.CodeDenied, "blocked")
	select {
	case ev := <-events:
		if ev.Reason != "redirect_limit" || !strings.HasSuffix(ev.URL, fmt.Sprintf("/r/%d", MaxRedirects+1)) {
			t.Errorf("denial %+v", ev)
		}
	case <-ctx.Done():
		t.Fatal("no redirect_limit denial")
	}
	if n := hops.Load(); n != MaxRedirects+1 {
		t.Errorf("the server saw %d requests, want %d (the first and %d redirects)", n, MaxRedirects+1, MaxRedirects)
	}
}
