package store_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock/internal/store"
	"github.com/airlockhq/airlock/internal/store/storetest"
)

// dbPaths gives each test its own database file; every openFile(t) of one
// test opens that same file, as separate processes sharing a data
// directory do.
var dbPaths sync.Map // *testing.T → string

func openFile(t *testing.T) *store.SQLite {
	t.Helper()
	p, ok := dbPaths.Load(t)
	if !ok {
		p, _ = dbPaths.LoadOrStore(t, filepath.Join(t.TempDir(), "airlock.db"))
		t.Cleanup(func() { dbPaths.Delete(t) })
	}
	return openPath(t, p.(string))
}

func openPath(t *testing.T, path string) *store.SQLite {
	t.Helper()
	s, err := store.Open(path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// memStores gives each test one in-memory store, returned by every
// openMemory(t) of that test.
var memStores sync.Map // *testing.T → *store.SQLite

func openMemory(t *testing.T) *store.SQLite {
	t.Helper()
	if s, ok := memStores.Load(t); ok {
		return s.(*store.SQLite)
	}
	s, err := store.OpenMemory()
	if err != nil {
		t.Fatalf("OpenMemory: %v", err)
	}
	memStores.Store(t, s)
	t.Cleanup(func() {
		memStores.Delete(t)
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

func TestConformance(t *testing.T) {
	for name, open := range map[string]func(*testing.T) *store.SQLite{
		"File":   openFile,
		"Memory": openMemory,
	} {
		t.Run(name, func(t *testing.T) {
			t.Run("AuditLog", func(t *testing.T) {
				storetest.RunAuditLog(t, func(t *testing.T) store.AuditLog { return open(t) })
			})
			t.Run("Revocations", func(t *testing.T) {
				storetest.RunRevocations(t, func(t *testing.T) store.Revocations { return open(t) })
			})
			t.Run("Tokens", func(t *testing.T) {
				storetest.RunTokens(t, func(t *testing.T) store.Tokens { return open(t) })
			})
			t.Run("Cache", func(t *testing.T) {
				storetest.RunCache(t, func(t *testing.T) store.Cache { return open(t) })
			})
		})
	}
}

// rawDB opens path with the bare driver, as a foreign process (or an
// operator with the sqlite3 shell) would.
func rawDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	u := url.URL{Scheme: "file", Path: filepath.ToSlash(path), RawQuery: "_pragma=busy_timeout(5000)"}
	db, err := sql.Open("sqlite", u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func TestMigrationsIdempotentOnReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "airlock.db")
	for i := range 3 {
		s, err := store.Open(path)
		if err != nil {
			t.Fatalf("Open #%d: %v", i+1, err)
		}
		if err := s.AppendAudit(t.Context(), storetest.AuditRecords(time.Now(), uint64(i), 1)); err != nil {
			t.Fatalf("AppendAudit #%d: %v", i+1, err)
		}
		if err := s.Close(); err != nil {
			t.Fatalf("Close #%d: %v", i+1, err)
		}
	}
	db := rawDB(t, path)
	rows, err := db.Query(`SELECT version FROM schema_migrations ORDER BY version`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var versions []int
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		versions = append(versions, v)
	}
	if len(versions) == 0 || versions[0] != 1 {
		t.Fatalf("schema_migrations = %v, want 1..n once each", versions)
	}
	for i, v := range versions {
		if v != i+1 {
			t.Fatalf("schema_migrations = %v, want 1..n once each", versions)
		}
	}
	var n int
	if err := db.QueryRow(`SELECT COUNT(*) FROM audit`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 3 {
		t.Errorf("audit holds %d records after three sessions, want 3", n)
	}
}

func TestOpenConcurrentlyMigratesOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "airlock.db")
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			s, err := store.Open(path)
			if err != nil {
				errs <- err
				return
			}
			errs <- errors.Join(s.Revoke(t.Context(), "acme", "x"), s.Close())
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

func TestNewerSchemaRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "airlock.db")
	s, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := rawDB(t, path).Exec(`INSERT INTO schema_migrations (version, applied) VALUES (999, 0)`); err != nil {
		t.Fatal(err)
	}
	s, err = store.Open(path)
	if err == nil {
		s.Close()
		t.Fatal("Open of a database from a newer program succeeded")
	}
	if !strings.Contains(err.Error(), "newer") {
		t.Errorf("Open error %q does not say the schema is newer", err)
	}
}

func TestWALAndPermissions(t *testing.T) {
	// The directory is created; URI-special characters in the path are
	// taken literally.
	path := filepath.Join(t.TempDir(), "data dir #1?x=%20", "airlock.db")
	s := openPath(t, path)
	if err := s.Revoke(t.Context(), "acme", "x"); err != nil {
		t.Fatal(err)
	}
	var mode string
	if err := rawDB(t, path).QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil {
		t.Fatal(err)
	}
	if mode != "wal" {
		t.Errorf("journal_mode = %q, want wal", mode)
	}
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Errorf("stat: %v", err)
			continue
		}
		if perm := fi.Mode().Perm(); perm != 0o600 {
			t.Errorf("%s has mode %v, want 0600", filepath.Base(p), perm)
		}
	}
}

func TestWrittenByAnotherHandleIsVisible(t *testing.T) {
	path := filepath.Join(t.TempDir(), "airlock.db")
	ctx := t.Context()
	recs := storetest.AuditRecords(time.Now(), 0, 10)

	// Written, then closed: a later process sees it.
	a, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(a.AppendAudit(ctx, recs), a.Revoke(ctx, "acme", "gone"),
		a.AddToken(ctx, store.Token{Hash: store.HashToken("t"), Tenant: "acme"})); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	b := openPath(t, path)
	if got, err := b.QueryAudit(ctx, store.AuditQuery{}); err != nil || len(got) != len(recs) {
		t.Errorf("QueryAudit after reopen: %d records, %v; want %d", len(got), err, len(recs))
	}
	if list, err := b.ListRevocations(ctx); err != nil || len(list) != 1 {
		t.Errorf("ListRevocations after reopen: %v, %v", list, err)
	}
	if _, err := b.LookupToken(ctx, store.HashToken("t")); err != nil {
		t.Errorf("LookupToken after reopen: %v", err)
	}

	// Written by a foreign writer with plain SQL while b is open: b's next
	// read sees it, and the version counter tells b's poller.
	v0, err := b.RevocationVersion(ctx)
	if err != nil {
		t.Fatal(err)
	}
	raw := rawDB(t, path)
	if _, err := raw.Exec(`BEGIN IMMEDIATE;
INSERT INTO revocations (subject, reason, created) VALUES ('globex', 'foreign', 1);
UPDATE versions SET value = value + 1 WHERE name = 'revocations';
COMMIT;`); err != nil {
		t.Fatal(err)
	}
	if v1, err := b.RevocationVersion(ctx); err != nil || v1 == v0 {
		t.Errorf("RevocationVersion after a foreign write = %d, %v; was %d", v1, err, v0)
	}
	if list, err := b.ListRevocations(ctx); err != nil || len(list) != 2 {
		t.Errorf("ListRevocations after a foreign write: %v, %v", list, err)
	}
}

func TestClosed(t *testing.T) {
	s, err := store.Open(filepath.Join(t.TempDir(), "airlock.db"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	ctx := t.Context()
	h := store.HashToken("x")
	for name, call := range map[string]func() error{
		"AppendAudit": func() error { return s.AppendAudit(ctx, storetest.AuditRecords(time.Now(), 0, 1)) },
		"QueryAudit":  func() error { _, err := s.QueryAudit(ctx, store.AuditQuery{}); return err },
		"AuditStats":  func() error { _, err := s.AuditStats(ctx, time.Time{}, ""); return err },
		"PruneAudit":  func() error { _, err := s.PruneAudit(ctx, time.Now(), 1); return err },
		"Revoke":      func() error { return s.Revoke(ctx, "acme", "") },
		"Unrevoke":    func() error { return s.Unrevoke(ctx, "acme") },
		"ListRevocations": func() error {
			_, err := s.ListRevocations(ctx)
			return err
		},
		"RevocationVersion": func() error { _, err := s.RevocationVersion(ctx); return err },
		"AddToken":          func() error { return s.AddToken(ctx, store.Token{Hash: h, Tenant: "acme"}) },
		"LookupToken":       func() error { _, err := s.LookupToken(ctx, h); return err },
		"ListTokens":        func() error { _, err := s.ListTokens(ctx, ""); return err },
		"DeleteToken":       func() error { return s.DeleteToken(ctx, h) },
		"GetCacheEntry":     func() error { _, err := s.GetCacheEntry(ctx, "a", "k"); return err },
		"PutCacheEntry":     func() error { return s.PutCacheEntry(ctx, "a", "k", store.CacheEntry{}) },
		"DeleteCacheEntry":  func() error { return s.DeleteCacheEntry(ctx, "a", "k") },
		"PruneCache":        func() error { _, err := s.PruneCache(ctx, 1); return err },
	} {
		if err := call(); !errors.Is(err, store.ErrClosed) {
			t.Errorf("%s after Close: got %v, want ErrClosed", name, err)
		}
	}
}

func TestMemoryStoresAreSeparate(t *testing.T) {
	a, b := openMemory(t), func() *store.SQLite {
		s, err := store.OpenMemory()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}()
	if err := a.Revoke(t.Context(), "acme", "x"); err != nil {
		t.Fatal(err)
	}
	if list, err := b.ListRevocations(t.Context()); err != nil || len(list) != 0 {
		t.Errorf("a second memory store sees %v, %v", list, err)
	}
}

// TestConcurrentUse hammers one file from two handles with appends,
// queries, prunes and revocations at once (run it with -race).
func TestConcurrentUse(t *testing.T) {
	handles := []*store.SQLite{openFile(t), openFile(t)}
	ctx := t.Context()
	const writers, batches, size = 8, 10, 50
	var wg sync.WaitGroup
	errs := make(chan error, 1000)
	report := func(err error) {
		if err != nil {
			select {
			case errs <- err:
			default:
			}
		}
	}
	start := time.Now()
	for w := range writers {
		wg.Go(func() {
			s := handles[w%2]
			for b := range batches {
				seq := uint64((w*batches + b) * size)
				report(s.AppendAudit(ctx, storetest.AuditRecords(start, seq, size)))
			}
		})
	}
	stop := make(chan struct{})
	var readers sync.WaitGroup
	for i := range 4 {
		readers.Go(func() {
			s := handles[i%2]
			for {
				select {
				case <-stop:
					return
				default:
				}
				_, err := s.QueryAudit(ctx, store.AuditQuery{Tenant: "acme", Limit: 50})
				report(err)
				_, err = s.AuditStats(ctx, time.Time{}, "")
				report(err)
				_, err = s.RevocationVersion(ctx)
				report(err)
				report(s.Revoke(ctx, fmt.Sprintf("acme/r%d", i), "x"))
				_, err = s.PruneAudit(ctx, start.Add(-time.Hour), 0) // deletes nothing
				report(err)
			}
		})
	}
	wg.Wait()
	close(stop)
	readers.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	stats, err := handles[1].AuditStats(ctx, time.Time{}, "")
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, st := range stats {
		n += st.Count
	}
	if n != writers*batches*size {
		t.Errorf("%d records, want %d", n, writers*batches*size)
	}
}

// TestCrossProcess runs a second process (this test binary) that writes to
// the same file while this one does.
func TestCrossProcess(t *testing.T) {
	if path := os.Getenv("AIRLOCK_STORE_HELPER_DB"); path != "" {
		helperProcess(path)
		return
	}
	path := filepath.Join(t.TempDir(), "airlock.db")
	s := openPath(t, path)
	ctx := t.Context()
	v0, err := s.RevocationVersion(ctx)
	if err != nil {
		t.Fatal(err)
	}

	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestCrossProcess$")
	cmd.Env = append(os.Environ(), "AIRLOCK_STORE_HELPER_DB="+path)
	done := make(chan error, 1)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()

	start := time.Now()
	for b := range 20 {
		if err := s.AppendAudit(ctx, storetest.AuditRecords(start, uint64(b*100), 100)); err != nil {
			t.Errorf("AppendAudit: %v", err)
		}
	}
	if err := <-done; err != nil {
		t.Fatalf("helper process: %v\n%s", err, out.String())
	}

	got, err := s.QueryAudit(ctx, store.AuditQuery{Limit: store.MaxQueryLimit})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 4000 {
		t.Errorf("%d records from two processes, want 4000", len(got))
	}
	if v, err := s.RevocationVersion(ctx); err != nil || v == v0 {
		t.Errorf("RevocationVersion after the other process revoked: %d, %v (was %d)", v, err, v0)
	}
	if list, err := s.ListRevocations(ctx); err != nil || len(list) != 1 || list[0].Subject != "acme/helper" {
		t.Errorf("ListRevocations: %v, %v; want acme/helper", list, err)
	}
}

func helperProcess(path string) {
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	s, err := store.Open(path)
	if err != nil {
		fail(err)
	}
	ctx := context.Background()
	start := time.Now()
	for b := range 20 {
		if err := s.AppendAudit(ctx, storetest.AuditRecords(start, uint64(1<<32+b*100), 100)); err != nil {
			fail(err)
		}
	}
	if err := s.Revoke(ctx, "acme/helper", "from another process"); err != nil {
		fail(err)
	}
	if err := s.Close(); err != nil {
		fail(err)
	}
	os.Exit(0)
}

func BenchmarkAppendBatch(b *testing.B) {
	for _, size := range []int{100, 1000} {
		b.Run(fmt.Sprint(size), func(b *testing.B) {
			s, err := store.Open(filepath.Join(b.TempDir(), "airlock.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			ctx := b.Context()
			start := time.Now()
			batch := storetest.AuditRecords(start, 0, size)
			seq := uint64(0)
			for b.Loop() {
				// Times and IDs increase, as the gate's do.
				for i := range batch {
					batch[i].Time = start.Add(time.Duration(seq) * time.Microsecond)
					batch[i].ID = storetest.ULID(batch[i].Time, seq)
					seq++
				}
				if err := s.AppendAudit(ctx, batch); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(seq)/b.Elapsed().Seconds(), "records/s")
		})
	}
}

func BenchmarkRevocationVersion(b *testing.B) {
	s, err := store.Open(filepath.Join(b.TempDir(), "airlock.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := b.Context()
	for b.Loop() {
		if _, err := s.RevocationVersion(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPruneAuditUnderCap is the retention pass that every engine
// start runs (gate.Retain), on a log of 200,000 records that is under
// both limits: it should cost no more than an index lookup, whatever the
// size of the log, since every CLI call pays it.
func BenchmarkPruneAuditUnderCap(b *testing.B) {
	s, err := store.Open(filepath.Join(b.TempDir(), "airlock.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := b.Context()
	start := time.Now()
	for i := range 200 {
		if err := s.AppendAudit(ctx, storetest.AuditRecords(start, uint64(i*1000), 1000)); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		n, err := s.PruneAudit(ctx, start.Add(-time.Hour), 5_000_000)
		if err != nil || n != 0 {
			b.Fatalf("PruneAudit = %d, %v; want 0, nil", n, err)
		}
	}
}
