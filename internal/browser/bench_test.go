package browser

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// benchSession opens a session for a benchmark.
func benchSession(b *testing.B) *Session { return benchSessionWith(b, nil) }

// benchSessionWith opens a session for a benchmark, its Options tweaked.
func benchSessionWith(b *testing.B, tweak func(*Options)) *Session {
	b.Helper()
	if err := checkExec(DefaultExecPath); err != nil {
		b.Fatalf("benchmarks need Chromium: %v", err)
	}
	p := startProxy(b)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	opts := Options{ProxyAddr: p.addr, ProxyUser: proxyUser, ProxyPass: proxyPass, ProfileDir: b.TempDir(),
		FilesDir: b.TempDir(), Policy: Policy{DefaultAction: ActionAllow}}
	if tweak != nil {
		tweak(&opts)
	}
	s, err := Open(ctx, opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close(context.Background()) })
	return s
}

// todoApp serves the web-components todo app of testdata/apps and opens
// it with three todos added through the new-todo field's ref.
func todoApp(b *testing.B, s *Session) {
	b.Helper()
	srv := httptest.NewServer(http.FileServer(http.Dir(filepath.Join("testdata", "apps"))))
	b.Cleanup(srv.Close)
	ctx := context.Background()
	if err := s.Navigate(ctx, srv.URL+"/todo/", true); err != nil {
		b.Fatal(err)
	}
	snap, err := s.Snapshot(ctx, SnapshotOptions{})
	if err != nil {
		b.Fatal(err)
	}
	var field string
	for line := range strings.SplitSeq(snap.Text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), `- textbox "New todo"`) {
			field = refRE.FindString(line)
		}
	}
	if field == "" {
		b.Fatalf("no new-todo field in\n%s", snap.Text)
	}
	for _, title := range []string{"buy milk", "write the note", "ship it"} {
		if _, err := s.Do(ctx, Op{Kind: KindFill, Ref: field, Text: title}); err != nil {
			b.Fatal(err)
		}
		if _, err := s.Do(ctx, Op{Kind: KindPress, Ref: field, Key: "Enter"}); err != nil {
			b.Fatal(err)
		}
	}
}

func snapshotBench(b *testing.B, s *Session, o SnapshotOptions) {
	ctx := context.Background()
	var snap Snapshot
	var err error
	for b.Loop() {
		if snap, err = s.Snapshot(ctx, o); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(snap.Text)), "chars")
	b.ReportMetric(float64(snap.TotalChars), "total_chars")
	b.ReportMetric(float64(snap.Refs), "refs")
	b.ReportMetric(float64(strings.Count(snap.Text, "\n")), "lines")
}

// BenchmarkSnapshotTodoApp: the web-components todo app with three todos
// (its outline reaches into the open shadow roots).
func BenchmarkSnapshotTodoApp(b *testing.B) {
	s := benchSession(b)
	todoApp(b, s)
	b.Run("full", func(b *testing.B) { snapshotBench(b, s, SnapshotOptions{}) })
	b.Run("interactive", func(b *testing.B) { snapshotBench(b, s, SnapshotOptions{InteractiveOnly: true}) })
}

// BenchmarkSnapshotWikipedia: the Playwright MCP anchor is 214,911
// characters, untruncated, for this page. The corpus is
// $AIRLOCK_EXTRACT_CORPUS or internal/extract/testdata/readability.
func BenchmarkSnapshotWikipedia(b *testing.B) {
	dir := os.Getenv("AIRLOCK_EXTRACT_CORPUS")
	if dir == "" {
		dir = filepath.Join("..", "extract", "testdata", "readability")
	}
	src, err := os.ReadFile(filepath.Join(dir, "wikipedia", "source.html"))
	if err != nil {
		b.Skipf("no corpus: %v", err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write(src)
	}))
	b.Cleanup(srv.Close)
	s := benchSession(b)
	if err := s.Navigate(context.Background(), srv.URL+"/", true); err != nil {
		b.Fatal(err)
	}
	b.Run("page", func(b *testing.B) { snapshotBench(b, s, SnapshotOptions{}) })
	b.Run("whole", func(b *testing.B) { snapshotBench(b, s, SnapshotOptions{MaxChars: MaxSnapshotChars}) })
	b.Run("interactive", func(b *testing.B) { snapshotBench(b, s, SnapshotOptions{InteractiveOnly: true}) })
}

// BenchmarkOps measures navigate, click and fill on a small local page.
func BenchmarkOps(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte(`<title>Ops</title><input aria-label="Name"><button onclick="this.textContent='pressed'">Press</button>`))
	}))
	b.Cleanup(srv.Close)
	s := benchSession(b)
	ctx := context.Background()
	b.Run("navigate", func(b *testing.B) {
		for b.Loop() {
			if err := s.Navigate(ctx, srv.URL+"/", true); err != nil {
				b.Fatal(err)
			}
		}
	})
	if err := s.Navigate(ctx, srv.URL+"/", true); err != nil {
		b.Fatal(err)
	}
	snap, err := s.Snapshot(ctx, SnapshotOptions{})
	if err != nil {
		b.Fatal(err)
	}
	ref := func(prefix string) string {
		for line := range strings.SplitSeq(snap.Text, "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), prefix) {
				return refRE.FindString(line)
			}
		}
		b.Fatalf("no %s in %s", prefix, snap.Text)
		return ""
	}
	button, field := ref(`- button "Press"`), ref(`- textbox "Name"`)
	b.Run("click", func(b *testing.B) {
		for b.Loop() {
			if err := s.Click(ctx, button); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("fill", func(b *testing.B) {
		for b.Loop() {
			if err := s.Fill(ctx, field, "some text"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("snapshot", func(b *testing.B) { snapshotBench(b, s, SnapshotOptions{}) })
	// The ops as agents run them: each waits for what it caused (the DOM
	// settling: 100 ms without a mutation) and returns a fresh snapshot,
	// or not (snapshot: false).
	for _, withSnap := range []bool{true, false} {
		name := "settled"
		if !withSnap {
			name = "settled-nosnapshot"
		}
		b.Run(name, func(b *testing.B) {
			op := func(o Op) {
				o.Snapshot = new(withSnap)
				if _, err := s.Do(ctx, o); err != nil {
					b.Fatal(err)
				}
			}
			op(Op{Kind: KindNavigate, URL: srv.URL + "/"})
			snap, err := s.Snapshot(ctx, SnapshotOptions{})
			if err != nil {
				b.Fatal(err)
			}
			var button, field string
			for line := range strings.SplitSeq(snap.Text, "\n") {
				switch l := strings.TrimSpace(line); {
				case strings.HasPrefix(l, `- button`):
					button = refRE.FindString(l)
				case strings.HasPrefix(l, `- textbox "Name"`):
					field = refRE.FindString(l)
				}
			}
			b.Run("navigate", func(b *testing.B) {
				for b.Loop() {
					op(Op{Kind: KindNavigate, URL: srv.URL + "/"})
				}
			})
			snap, err = s.Snapshot(ctx, SnapshotOptions{})
			if err != nil {
				b.Fatal(err)
			}
			for line := range strings.SplitSeq(snap.Text, "\n") {
				switch l := strings.TrimSpace(line); {
				case strings.HasPrefix(l, `- button`):
					button = refRE.FindString(l)
				case strings.HasPrefix(l, `- textbox "Name"`):
					field = refRE.FindString(l)
				}
			}
			b.Run("click", func(b *testing.B) {
				for b.Loop() {
					op(Op{Kind: KindClick, Ref: button})
				}
			})
			b.Run("fill", func(b *testing.B) {
				for b.Loop() {
					op(Op{Kind: KindFill, Ref: field, Text: "some text"})
				}
			})
		})
	}
}

// BenchmarkDownload measures a download of a small file and of a 4 MiB
// one (each in its own background tab), with a page open in the tab.
func BenchmarkDownload(b *testing.B) {
	big := make([]byte, 4<<20)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/small":
			w.Header().Set("Content-Type", "text/html")
			w.Write([]byte(`<title>Small</title><p>a page saved as a file</p>`))
		case "/big":
			w.Header().Set("Content-Type", "application/octet-stream")
			w.Write(big)
		default:
			w.Header().Set("Content-Type", "text/html")
			w.Write([]byte(`<title>Home</title>`))
		}
	}))
	b.Cleanup(srv.Close)
	s := benchSession(b)
	ctx := context.Background()
	if err := s.Navigate(ctx, srv.URL+"/", true); err != nil {
		b.Fatal(err)
	}
	for _, path := range []string{"/small", "/big"} {
		b.Run(strings.TrimPrefix(path, "/"), func(b *testing.B) {
			for b.Loop() {
				if _, err := s.Download(ctx, srv.URL+path, "out"+path); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	os.RemoveAll(s.FilesDir())
}
