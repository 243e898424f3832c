package fleet

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/internal/store"
)

// Follow stops as soon as its context ends, even in the middle of a
// blocked read: a replica's Close does not wait out the block.
func TestAuditFollowStopsAtOnce(t *testing.T) {
	t.Parallel()
	f := open(t)
	s := f.AuditStream("a")
	s.SetBlock(time.Hour)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Follow(ctx, func([]store.AuditRecord) error { return nil }, slog.New(slog.DiscardHandler))
	}()
	// Wait until Redis holds the read blocked on the stream.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		list, err := f.rdb.ClientList(t.Context()).Result()
		if err != nil {
			t.Fatal(err)
		}
		if blockedOn(list, "xread") {
			break
		}
		if time.Now().After(deadline) { // hang guard
			t.Fatalf("no blocked XREAD seen:\n%s", list)
		}
	}
	cancel()
	select {
	case <-done:
	case <-time.After(30 * time.Second): // hang guard; the block is an hour
		t.Fatal("Follow did not stop when its context ended: it waits out its blocked read")
	}
}

// blockedOn reports whether CLIENT LIST shows a client blocked (flag b)
// in cmd.
func blockedOn(list, cmd string) bool {
	for line := range strings.SplitSeq(list, "\n") {
		var flags, c string
		for _, f := range strings.Fields(line) {
			if v, ok := strings.CutPrefix(f, "flags="); ok {
				flags = v
			}
			if v, ok := strings.CutPrefix(f, "cmd="); ok {
				c = v
			}
		}
		if strings.Contains(flags, "b") && strings.EqualFold(c, cmd) {
			return true
		}
	}
	return false
}
