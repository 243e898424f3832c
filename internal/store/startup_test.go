package store_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/airlockhq/airlock/internal/store"
	"github.com/airlockhq/airlock/internal/store/storetest"
)

// TestCloseDoesNotCheckpoint: closing the store leaves its commits in the
// WAL (no checkpoint, so no fsync, on close; issue #20), and the next Open
// reads them back.
func TestCloseDoesNotCheckpoint(t *testing.T) {
	path := filepath.Join(t.TempDir(), "airlock.db")
	s, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	recs := storetest.AuditRecords(time.Now(), 1, 3)
	if err := s.AppendAudit(t.Context(), recs); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path + "-wal")
	if err != nil {
		t.Fatalf("after Close: %v (the WAL was checkpointed and removed)", err)
	}
	if fi.Size() == 0 {
		t.Fatal("after Close the WAL is empty: it was checkpointed")
	}
	s = openPath(t, path)
	got, err := s.QueryAudit(t.Context(), store.AuditQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(recs) {
		t.Fatalf("reopened store holds %d records, want %d", len(got), len(recs))
	}
}

// TestWALCheckpointedOnceLarge: the WAL that closes leave behind is
// checkpointed by a later commit once it is large, so it does not grow
// without bound across processes.
func TestWALCheckpointedOnceLarge(t *testing.T) {
	path := filepath.Join(t.TempDir(), "airlock.db")
	var seq uint64
	for i := range 60 {
		s, err := store.Open(path)
		if err != nil {
			t.Fatalf("Open #%d: %v", i+1, err)
		}
		if err := s.AppendAudit(t.Context(), storetest.AuditRecords(time.Now(), seq, 20)); err != nil {
			t.Fatal(err)
		}
		seq += 20
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	fi, err := os.Stat(path + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	// 60 sessions of 20 records write far more than the 512 KiB from
	// which Close checkpoints (plus the last session's frames); a WAL
	// that was never checkpointed would hold them all.
	if fi.Size() > 640<<10 {
		t.Errorf("WAL is %d bytes after 60 sessions: never checkpointed?", fi.Size())
	}
	db, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if db.Size() < 100<<10 {
		t.Errorf("database file is %d bytes: nothing was checkpointed into it", db.Size())
	}
	s := openPath(t, path)
	got, err := s.QueryAudit(t.Context(), store.AuditQuery{Limit: store.MaxQueryLimit})
	if err != nil {
		t.Fatal(err)
	}
	if uint64(len(got)) != seq {
		t.Errorf("store holds %d records, want %d", len(got), seq)
	}
}

// TestOpenDoesNotWaitForWriter: opening a store whose schema is current
// takes no write lock, so it does not wait behind another process's
// write transaction (every CLI verb opens the store).
func TestOpenDoesNotWaitForWriter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "airlock.db")
	s, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	conn, err := rawDB(t, path).Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(t.Context(), "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		s, err := store.Open(path)
		if err == nil {
			err = s.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Open while another connection writes: %v", err)
		}
	case <-time.After(time.Minute): // hang guard
		t.Fatal("Open did not return")
	}
	if _, err := conn.ExecContext(t.Context(), "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
}

// TestMaintenanceWithNothingToDoTakesNoWriteLock: the maintenance every
// engine start runs (expiring crawl jobs, pruning jobs and the audit log
// by age) does not wait for another process's write transaction when it
// has nothing to change.
func TestMaintenanceWithNothingToDoTakesNoWriteLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "airlock.db")
	s := openPath(t, path)
	ctx := t.Context()
	if err := s.AppendAudit(ctx, storetest.AuditRecords(time.Now(), 1, 2)); err != nil {
		t.Fatal(err)
	}
	conn, err := rawDB(t, path).Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	defer conn.ExecContext(ctx, "ROLLBACK")
	done := make(chan error, 1)
	go func() {
		long := time.Now().Add(-24 * time.Hour)
		if _, err := s.ExpireJobs(ctx, long, "interrupted", time.Now()); err != nil {
			done <- err
			return
		}
		if _, err := s.PruneJobs(ctx, long); err != nil {
			done <- err
			return
		}
		_, err := s.PruneAudit(ctx, long, 1000)
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("maintenance while another connection writes: %v", err)
		}
	case <-time.After(time.Minute): // hang guard
		t.Fatal("maintenance did not return")
	}
}
