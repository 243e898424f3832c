package crawl

import (
	"fmt"
	"testing"
	"time"
)

// TestParkQueueBounded checks that a host whose queue never drains (a
// busy host in a long crawl: items are parked while earlier ones start)
// keeps a queue sized by what waits, not by everything ever parked.
func TestParkQueueBounded(t *testing.T) {
	r := &run{opt: options{ignore: true}, hosts: make(map[string]*host)}
	now := time.Now()
	const waiting, total = 10, 100000
	for i := range total {
		r.park(Item{URL: fmt.Sprintf("http://a.test/%d", i)}, now)
		if i >= waiting { // start the oldest, as fill does
			h := r.hosts["http://a.test"]
			if got, want := h.queue[h.qhead].URL, fmt.Sprintf("http://a.test/%d", i-waiting); got != want {
				t.Fatalf("next item = %s, want %s", got, want)
			}
			h.queue[h.qhead] = Item{}
			h.qhead++
			r.parked--
		}
	}
	h := r.hosts["http://a.test"]
	if n := len(h.queue) - h.qhead; n != waiting {
		t.Fatalf("%d items wait, want %d", n, waiting)
	}
	if c := cap(h.queue); c > 4*waiting {
		t.Errorf("after %d items through a queue of %d, its capacity is %d, want at most %d", total, waiting, c, 4*waiting)
	}
}
