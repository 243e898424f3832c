package cli

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/airlockhq/airlock"
)

// crawlBarWidth is the number of cells of the progress bar.
const crawlBarWidth = 20

// crawlBarInterval is the least time between two redraws of the bar.
const crawlBarInterval = 100 * time.Millisecond

// crawlBar draws a crawl's progress on one terminal line toward its page
// budget: a bar, pages done of the budget, the rate and an ETA, redrawn in
// place. Page output written through it clears the line first and redraws
// it after, so a bar on a terminal never lands inside a page. The clock is
// injected so that tests need no wall clock. Safe for concurrent use.
type crawlBar struct {
	mu    sync.Mutex
	w     io.Writer        // the terminal (stderr)
	now   func() time.Time // the clock
	total int              // the page budget (--max-pages); 0: unknown
	start time.Time
	last  time.Time // last redraw
	pr    airlock.CrawlProgress
	seen  bool // an update has arrived
	shown bool // the line currently holds the bar
}

func newCrawlBar(w io.Writer, total int, now func() time.Time) *crawlBar {
	if now == nil {
		now = time.Now
	}
	return &crawlBar{w: w, now: now, total: total, start: now()}
}

// Update records pr and redraws the bar, at most every crawlBarInterval
// (the first update always draws).
func (b *crawlBar) Update(pr airlock.CrawlProgress) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.pr, b.seen = pr, true
	now := b.now()
	if b.shown && now.Sub(b.last) < crawlBarInterval {
		return
	}
	b.last = now
	b.draw(now)
}

// Around runs write (page output on another stream of the same terminal)
// with the bar cleared, then draws it again.
func (b *crawlBar) Around(write func() error) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.clear()
	err := write()
	if b.seen {
		b.draw(b.now())
	}
	return err
}

// Clear erases the bar for good (the crawl has ended).
func (b *crawlBar) Clear() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.clear()
	b.seen = false
}

func (b *crawlBar) clear() {
	if b.shown {
		io.WriteString(b.w, "\r\x1b[2K")
		b.shown = false
	}
}

func (b *crawlBar) draw(now time.Time) {
	io.WriteString(b.w, "\r\x1b[2K"+b.line(now))
	b.shown = true
}

// line is the text of the bar at now, e.g.
// "[#######-------------]  9/25 pages  3.0 pages/s  ETA 6s  1 failed".
func (b *crawlBar) line(now time.Time) string {
	pr := b.pr
	done := pr.Done
	elapsed := now.Sub(b.start)
	var rate float64
	if elapsed > 0 {
		rate = float64(done) / elapsed.Seconds()
	}
	var sb strings.Builder
	if b.total > 0 {
		filled := min(done, b.total) * crawlBarWidth / b.total
		sb.WriteString("[" + strings.Repeat("#", filled) + strings.Repeat("-", crawlBarWidth-filled) + "]")
		fmt.Fprintf(&sb, " %*d/%d pages", len(fmt.Sprint(b.total)), done, b.total)
	} else {
		fmt.Fprintf(&sb, "%d pages", done)
	}
	fmt.Fprintf(&sb, "  %.1f pages/s", rate)
	switch {
	case b.total > 0 && done >= b.total:
		sb.WriteString("  ETA 0s")
	case b.total > 0 && rate > 0:
		eta := time.Duration(float64(b.total-done) / rate * float64(time.Second))
		sb.WriteString("  ETA " + eta.Round(time.Second).String())
	case b.total > 0:
		sb.WriteString("  ETA --")
	}
	fmt.Fprintf(&sb, "  %d queued", pr.Queued)
	if pr.Failed > 0 {
		fmt.Fprintf(&sb, "  %d failed", pr.Failed)
	}
	return sb.String()
}
