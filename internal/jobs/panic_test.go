package jobs

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/gate"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestRunnerCrawlPanicFailsJob: a crawl that panics fails its job (code
// internal, reason panic, without the panic's value), logs the panic with
// its stack, and the runner (the process) goes on to run the next job.
func TestRunnerCrawlPanicFailsJob(t *testing.T) {
	f := newFake(t, 2, false)
	f.panics = true
	var log lockedBuffer
	r := New(context.Background(), Config{
		Store: memStore(t), Crawler: f.crawler(), NewID: f.gate.NewID,
		CheckReader:  func(airlock.Principal) error { return nil },
		Limits:       func(string) *gate.Limits { return nil },
		DrainTimeout: time.Second,
		Logger:       slog.New(slog.NewTextHandler(&log, nil)),
	})
	defer r.Close(context.Background())
	ctx := context.Background()
	job, err := r.Start(ctx, acme, airlock.CrawlRequest{Seed: "https://example.com/"})
	if err != nil {
		t.Fatal(err)
	}
	ch, err := r.Watch(ctx, acme, job.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, end := drain(t, ch)
	if end == nil || end.State != airlock.JobFailed || end.Error == nil ||
		end.Error.Code != airlock.CodeInternal || end.Error.Reason != airlock.ReasonPanic {
		t.Fatalf("end = %+v, want a failed job, code internal, reason panic", end)
	}
	if strings.Contains(end.Error.Message, "hostile page") {
		t.Errorf("the job's error tells the caller the panic: %q", end.Error.Message)
	}
	if l := log.String(); !strings.Contains(l, "hostile page") || !strings.Contains(l, "panic_test.go") && !strings.Contains(l, "jobs_test.go") {
		t.Errorf("the log has no panic with its stack:\n%s", l)
	}

	f.panics = false
	job, err = r.Start(ctx, acme, airlock.CrawlRequest{Seed: "https://example.com/"})
	if err != nil {
		t.Fatal(err)
	}
	if ch, err = r.Watch(ctx, acme, job.ID, 0); err != nil {
		t.Fatal(err)
	}
	if _, end := drain(t, ch); end == nil || end.State != airlock.JobDone {
		t.Errorf("the next job: %+v, want done", end)
	}
}
