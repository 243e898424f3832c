package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
)

// screen replays what a terminal shows for b: \r returns to the start of
// the line, ESC[2K erases it, \n starts a new line, other bytes overwrite.
func screen(b string) []string {
	lines := []string{""}
	col := 0
	put := func(r rune) {
		l := []rune(lines[len(lines)-1])
		for len(l) < col {
			l = append(l, ' ')
		}
		if col < len(l) {
			l[col] = r
		} else {
			l = append(l, r)
		}
		lines[len(lines)-1] = string(l)
		col++
	}
	for i := 0; i < len(b); {
		switch {
		case strings.HasPrefix(b[i:], "\x1b[2K"):
			lines[len(lines)-1] = ""
			i += len("\x1b[2K")
		case b[i] == '\r':
			col = 0
			i++
		case b[i] == '\n':
			lines = append(lines, "")
			col = 0
			i++
		default:
			r := []rune(b[i:])[0]
			put(r)
			i += len(string(r))
		}
	}
	return lines
}

// fakeClock advances only when told.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

func TestCrawlBarRenders(t *testing.T) {
	var out bytes.Buffer
	clk := &fakeClock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	b := newCrawlBar(&out, 20, clk.now)

	clk.advance(2 * time.Second)
	b.Update(airlock.CrawlProgress{Done: 5, Queued: 7, Failed: 1})
	got := screen(out.String())
	want := "[#####---------------]  5/20 pages  2.5 pages/s  ETA 6s  7 queued  1 failed"
	if len(got) != 1 || got[0] != want {
		t.Fatalf("bar after 5 of 20 pages in 2s:\n got %q\nwant %q", got, want)
	}

	// Within the redraw interval nothing is drawn; past it the bar is
	// redrawn in place (one line on the screen).
	n := out.Len()
	clk.advance(crawlBarInterval / 2)
	b.Update(airlock.CrawlProgress{Done: 6, Queued: 6})
	if out.Len() != n {
		t.Errorf("redrawn within %s: %q", crawlBarInterval, out.String()[n:])
	}
	clk.advance(2*time.Second - crawlBarInterval/2)
	b.Update(airlock.CrawlProgress{Done: 10, Queued: 3})
	got = screen(out.String())
	want = "[##########----------] 10/20 pages  2.5 pages/s  ETA 4s  3 queued"
	if len(got) != 1 || got[0] != want {
		t.Fatalf("bar after 10 of 20 pages in 4s:\n got %q\nwant %q", got, want)
	}

	// Page output around the bar: the page lines stand alone, the bar is
	// drawn again below them.
	b.Around(func() error { out.WriteString(`{"url":"http://a/"}` + "\n"); return nil })
	got = screen(out.String())
	if len(got) != 2 || got[0] != `{"url":"http://a/"}` || !strings.HasPrefix(got[1], "[##########") {
		t.Errorf("page output around the bar: %q", got)
	}

	// Past the budget the bar is full, and Clear leaves nothing behind.
	clk.advance(time.Second)
	b.Update(airlock.CrawlProgress{Done: 25})
	if got := screen(out.String()); !strings.HasPrefix(got[1], "[####################] 25/20 pages") || !strings.Contains(got[1], "ETA 0s") {
		t.Errorf("full bar: %q", got[1])
	}
	b.Clear()
	if got := screen(out.String()); len(got) != 2 || got[1] != "" {
		t.Errorf("after Clear: %q", got)
	}

	// No rate yet: no ETA guess; no budget: no bar.
	out.Reset()
	b = newCrawlBar(&out, 0, clk.now)
	b.Update(airlock.CrawlProgress{Done: 0, Queued: 1})
	if got := screen(out.String()); got[0] != "0 pages  0.0 pages/s  1 queued" {
		t.Errorf("no budget: %q", got[0])
	}
	out.Reset()
	b = newCrawlBar(&out, 4, clk.now)
	b.Update(airlock.CrawlProgress{Queued: 1})
	if got := screen(out.String()); got[0] != "[--------------------] 0/4 pages  0.0 pages/s  ETA --  1 queued" {
		t.Errorf("no rate yet: %q", got[0])
	}
}

// ttyBuffer is a buffer that says it is a terminal: stdout and stderr of
// a crawl on one terminal.
type ttyBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (t *ttyBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.b.Write(p)
}
func (t *ttyBuffer) IsTerminal() bool { return true }
func (t *ttyBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.b.String()
}

func TestCrawlProgressOnTerminal(t *testing.T) {
	t.Parallel()
	srv := browseSite()
	defer srv.Close()
	term := &ttyBuffer{}
	e := &env{stdin: strings.NewReader(""), stdout: term, stderr: term, tty: noTerminal}
	code := run(context.Background(), e, []string{"crawl", "--data-dir", t.TempDir(), "--except", "127.0.0.1", "--max-pages", "5", srv.URL + "/"}, commands)
	raw := term.String()
	if code != 0 {
		t.Fatalf("crawl: %d %q", code, raw)
	}
	if !strings.Contains(raw, "/5 pages") || !strings.Contains(raw, "pages/s") || !strings.Contains(raw, "ETA") {
		t.Errorf("no progress bar toward --max-pages 5 on the terminal: %q", raw)
	}
	// What the person sees at the end: every page line whole, the summary,
	// and no bar left over.
	pages := 0
	for _, l := range screen(raw) {
		switch {
		case strings.HasPrefix(l, "{"):
			var p map[string]any
			if err := json.Unmarshal([]byte(l), &p); err != nil {
				t.Errorf("page line mixed with progress: %q: %v", l, err)
			}
			pages++
		case strings.Contains(l, "pages/s") && !strings.HasPrefix(l, "crawl: "):
			t.Errorf("progress left on the screen: %q", l)
		}
	}
	if pages != 3 {
		t.Errorf("page lines = %d, want 3:\n%s", pages, strings.Join(screen(raw), "\n"))
	}
}
