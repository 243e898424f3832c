package extract

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
)

// checkCtx is a context that is done from its n-th Err call on: a deadline
// that passes at a chosen point of the extraction, without a clock.
type checkCtx struct {
	context.Context
	n     int64
	calls atomic.Int64
	done  chan struct{}
}

func newCheckCtx(n int64) *checkCtx {
	return &checkCtx{Context: context.Background(), n: n, done: make(chan struct{})}
}

func (c *checkCtx) Err() error {
	if k := c.calls.Add(1); c.n > 0 && k >= c.n {
		if k == c.n {
			close(c.done)
		}
		return context.DeadlineExceeded
	}
	return nil
}

func (c *checkCtx) Done() <-chan struct{} { return c.done }

func (c *checkCtx) Deadline() (time.Time, bool) { return time.Time{}, false }

// TestExtractStopsAtDeadline: a deadline passing anywhere in an extraction
// (between parsing, readability, the density extractor, the merge, the
// Markdown) stops it with a timeout error; never a page finished past its
// deadline, nor one with Markdown degraded to the text because time ran
// out.
func TestExtractStopsAtDeadline(t *testing.T) {
	page := articlePage(256 << 10)
	in := Input{URL: "http://example.com/a", Body: page, ContentType: "text/html"}
	free := newCheckCtx(0)
	if _, err := Extract(free, in, Options{}); err != nil {
		t.Fatal(err)
	}
	checks := free.calls.Load()
	// Main content alone is most of the work: it must look at the
	// deadline between its phases too.
	if checks < 6 {
		t.Errorf("a full extraction looked at its deadline %d times; want one per phase (6 or more)", checks)
	}
	for k := int64(1); k <= checks; k++ {
		p, err := Extract(newCheckCtx(k), in, Options{})
		if airlock.CodeOf(err) != airlock.CodeTimeout {
			md := 0
			if p != nil {
				md = len(p.Markdown)
			}
			t.Errorf("deadline at check %d of %d: err = %v (page with %d bytes of Markdown), want a timeout error", k, checks, err, md)
		}
	}
}
