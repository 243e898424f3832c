package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"modernc.org/sqlite" // also registers the "sqlite" database/sql driver
	sqlite3 "modernc.org/sqlite/lib"
)

// DefaultBusyTimeout is how long a statement waits for another process's
// write lock before failing with "database is locked".
const DefaultBusyTimeout = 5 * time.Second

// pruneChunk bounds the rows one PruneAudit transaction deletes, so that a
// large prune never holds the write lock long enough to stall the audit
// pipeline of this or another process.
const pruneChunk = 10000

// auditInsertRows is how many records one prepared INSERT statement writes.
// Multi-row statements amortise the per-statement cost of database/sql and
// of the driver's cancellation watcher.
const auditInsertRows = 64

// SQLite is the embedded store: one SQLite database file in WAL mode,
// implementing AuditLog, Revocations, Tokens, Cache and Jobs.
//
// Several SQLite values, in this process or in other processes, may open
// the same file: writes are serialised by SQLite's file lock (each waits up
// to DefaultBusyTimeout), and readers see every committed write. The file
// must live on a local filesystem (WAL needs shared memory, so no NFS).
//
// Within one value, writes go through a single connection (so goroutines of
// one process queue in Go rather than spin on the file lock) and reads
// through a pool of read-only connections.
//
// Commits use synchronous=NORMAL: a committed write survives the process
// being killed (kill -9), but the last transactions before a power loss or
// OS crash may be lost. Closing does not checkpoint the WAL (see
// noCheckpointOnClose): airlock.db-wal beside the file holds the latest
// commits until a later commit checkpoints it, so copy the three files
// together, or open the database with SQLite, which reads the WAL.
//
// All methods are safe for concurrent use. After Close they return an error
// wrapping ErrClosed.
type SQLite struct {
	w *sql.DB // one connection, BEGIN IMMEDIATE
	r *sql.DB // read-only pool
	// keep and hold pin a connection to an in-memory database (nil for a
	// file), which lives only while a connection is open.
	keep *sql.DB
	hold *sql.Conn
	// wal is the path of the WAL file ("" in memory), checkpointed on
	// Close once it reaches walCloseCheckpoint bytes.
	wal string

	// insAudit is the auditInsertRows-row INSERT, prepared on w by the
	// first append that needs it (a CLI verb appends one record).
	insMu    sync.Mutex
	insAudit *sql.Stmt

	mu     sync.RWMutex // read-held by every call; Close takes it to drain them
	closed bool
}

// Open opens (creating it and its directory if needed) the SQLite store at
// path, switches it to WAL mode and applies pending migrations in one
// transaction. A new file is created with mode 0600. Open fails if the
// file's schema is newer than this program.
func Open(path string) (*SQLite, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o700); err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	_, err = os.Stat(abs)
	created := errors.Is(err, fs.ErrNotExist)

	u := url.URL{Scheme: "file", Path: filepath.ToSlash(abs)}
	s, err := open(u.String(), "", func(ctx context.Context, w *sql.DB) error {
		// The first connection has created the file: restrict it before
		// WAL mode creates -wal and -shm, which copy its permissions.
		if created {
			if err := os.Chmod(abs, 0o600); err != nil {
				return err
			}
		}
		// Switching to WAL takes an exclusive lock without waiting for it:
		// retry while another process opens the new file at the same time.
		var mode string
		err := retryBusy(ctx, func() error {
			return w.QueryRowContext(ctx, "PRAGMA journal_mode=WAL").Scan(&mode)
		})
		if err != nil {
			return fmt.Errorf("set WAL mode: %w", err)
		}
		if !strings.EqualFold(mode, "wal") {
			return fmt.Errorf("set WAL mode: journal mode is %q", mode)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	s.wal = abs + "-wal"
	return s, nil
}

var memSeq atomic.Uint64

// OpenMemory opens a new, empty store that lives in this process's memory
// until Close: for tests and engines without a data directory. It behaves
// like a store from Open, except that no other process can share it and it
// has no WAL (readers and the writer take turns).
func OpenMemory() (*SQLite, error) {
	name := fmt.Sprintf("file:/airlock-memory-%d-%d", os.Getpid(), memSeq.Add(1))
	s, err := open(name, "vfs=memdb", nil)
	if err != nil {
		return nil, fmt.Errorf("open memory store: %w", err)
	}
	return s, nil
}

// open opens the writer and reader pools on dsn, runs setup on the writer
// before migrating, and prepares the statements.
func open(dsn, extra string, setup func(context.Context, *sql.DB) error) (_ *SQLite, err error) {
	ctx := context.Background() // bounded by the busy timeout
	busy := "_pragma=busy_timeout(" + strconv.FormatInt(DefaultBusyTimeout.Milliseconds(), 10) + ")"
	params := func(p ...string) string {
		if extra != "" {
			p = append(p, extra)
		}
		return dsn + "?" + strings.Join(p, "&")
	}

	s := &SQLite{}
	defer func() {
		if err != nil {
			s.closeAll()
		}
	}()

	s.w, err = openConnector(params(busy, "_pragma=synchronous(NORMAL)", "_txlock=immediate",
		"_pragma=journal_size_limit("+strconv.Itoa(walSizeLimit)+")"))
	if err != nil {
		return nil, err
	}
	s.w.SetMaxOpenConns(1)
	s.w.SetMaxIdleConns(1)
	s.w.SetConnMaxIdleTime(0)
	s.w.SetConnMaxLifetime(0)

	if extra != "" {
		// An in-memory database lives while a connection is open: pin one
		// outside the pools, whose connections may come and go.
		if s.keep, err = openConnector(params(busy)); err != nil {
			return nil, err
		}
		if s.hold, err = s.keep.Conn(ctx); err != nil {
			return nil, err
		}
	}
	if err = s.w.PingContext(ctx); err != nil {
		return nil, err
	}
	if setup != nil {
		if err = setup(ctx, s.w); err != nil {
			return nil, err
		}
	}
	if err = retryBusy(ctx, func() error { return migrate(ctx, s.w) }); err != nil {
		return nil, err
	}

	readers := max(4, runtime.GOMAXPROCS(0))
	s.r, err = openConnector(params(busy, "_pragma=query_only(1)"))
	if err != nil {
		return nil, err
	}
	s.r.SetMaxOpenConns(readers)
	s.r.SetMaxIdleConns(readers)
	s.r.SetConnMaxIdleTime(0)
	s.r.SetConnMaxLifetime(0)
	if err = s.r.PingContext(ctx); err != nil {
		return nil, err
	}

	return s, nil
}

// Close waits for calls in flight, then closes the database. Calls after
// Close fail with ErrClosed; Close itself may be called again and returns
// nil.
func (s *SQLite) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if err := s.closeAll(); err != nil {
		return fmt.Errorf("close store: %w", err)
	}
	return nil
}

func (s *SQLite) closeAll() error {
	var errs []error
	if s.insAudit != nil {
		errs = append(errs, s.insAudit.Close())
	}
	s.checkpointLargeWAL()
	if s.r != nil {
		errs = append(errs, s.r.Close())
	}
	if s.w != nil { // after the readers: the last connection checkpoints the WAL
		errs = append(errs, s.w.Close())
	}
	if s.hold != nil {
		errs = append(errs, s.hold.Close())
	}
	if s.keep != nil {
		errs = append(errs, s.keep.Close())
	}
	return errors.Join(errs...)
}

// enter read-holds s.mu for one call; the caller defers s.mu.RUnlock.
func (s *SQLite) enter() error {
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return ErrClosed
	}
	return nil
}

// retryBusy runs f until it does not fail with SQLITE_BUSY or
// DefaultBusyTimeout has passed. Most statements wait for locks by
// themselves (busy_timeout); the few that SQLite does not let wait, like a
// journal mode change, go through this.
func retryBusy(ctx context.Context, f func() error) error {
	deadline := time.Now().Add(DefaultBusyTimeout)
	for wait := time.Millisecond; ; wait = min(2*wait, 50*time.Millisecond) {
		err := f()
		var se *sqlite.Error
		if err == nil || !errors.As(err, &se) || se.Code()&0xff != sqlite3.SQLITE_BUSY || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
	}
}

// ---------------------------------------------------------------------------
// Migrations

// migrations[i] brings the schema to version i+1. Append only: a released
// migration is never edited.
var migrations = []string{
	// 1: audit log, revocations, tokens, HTTP cache.
	`
CREATE TABLE audit (
	seq         INTEGER PRIMARY KEY,
	id          TEXT    NOT NULL UNIQUE,
	time        INTEGER NOT NULL,
	tenant      TEXT    NOT NULL,
	instance    TEXT    NOT NULL,
	broker      TEXT    NOT NULL,
	outcome     TEXT    NOT NULL,
	code        TEXT    NOT NULL,
	reason      TEXT    NOT NULL,
	target      TEXT    NOT NULL,
	detail      TEXT    NOT NULL,
	duration_ms INTEGER NOT NULL,
	bytes_in    INTEGER NOT NULL,
	bytes_out   INTEGER NOT NULL
) STRICT;
CREATE INDEX audit_time ON audit (time);

CREATE TABLE revocations (
	subject TEXT    PRIMARY KEY,
	reason  TEXT    NOT NULL,
	created INTEGER NOT NULL
) STRICT;

-- Change counters for pollers in other processes, bumped in the
-- transaction that makes the change.
CREATE TABLE versions (
	name  TEXT    PRIMARY KEY,
	value INTEGER NOT NULL
) STRICT;
INSERT INTO versions (name, value) VALUES ('revocations', 0);

CREATE TABLE tokens (
	hash    TEXT    PRIMARY KEY,
	tenant  TEXT    NOT NULL,
	label   TEXT    NOT NULL,
	created INTEGER NOT NULL
) STRICT;
CREATE INDEX tokens_tenant ON tokens (tenant, created);

CREATE TABLE cache (
	partition      TEXT    NOT NULL,
	key            TEXT    NOT NULL,
	status         INTEGER NOT NULL,
	header         BLOB,
	request_header BLOB,
	body           BLOB    NOT NULL,
	stored         INTEGER NOT NULL,
	expires        INTEGER NOT NULL, -- 0: never
	size           INTEGER NOT NULL,
	PRIMARY KEY (partition, key)
) STRICT;
CREATE INDEX cache_stored ON cache (stored);
CREATE INDEX cache_expires ON cache (expires) WHERE expires > 0;
`,
	// 2: crawl jobs and their pages.
	`
CREATE TABLE jobs (
	id       TEXT    PRIMARY KEY,
	tenant   TEXT    NOT NULL,
	owner    TEXT    NOT NULL,
	state    TEXT    NOT NULL,
	request  BLOB,
	progress BLOB,
	summary  BLOB,
	error    BLOB,
	pages    INTEGER NOT NULL,
	created  INTEGER NOT NULL,
	updated  INTEGER NOT NULL,
	finished INTEGER NOT NULL, -- 0: unfinished
	lease    INTEGER NOT NULL
) STRICT;
CREATE INDEX jobs_tenant ON jobs (tenant, id);
CREATE INDEX jobs_lease ON jobs (lease) WHERE finished = 0;
CREATE INDEX jobs_finished ON jobs (finished) WHERE finished <> 0;

CREATE TABLE job_pages (
	job  TEXT    NOT NULL,
	seq  INTEGER NOT NULL,
	page BLOB    NOT NULL,
	PRIMARY KEY (job, seq)
) STRICT;
`,
}

// migrate applies the pending migrations in one write transaction, so that
// processes opening the same file at once apply each migration once.
//
// A schema already at this program's version, the common case, is read
// without a write transaction: opening the store then waits for no other
// process's writes.
func migrate(ctx context.Context, db *sql.DB) error {
	var cur int
	if err := db.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&cur); err == nil && cur == len(migrations) {
		return nil
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
	version INTEGER PRIMARY KEY,
	applied INTEGER NOT NULL
) STRICT`); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&cur); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if cur > len(migrations) {
		return fmt.Errorf("migrate: schema version %d is newer than this program's %d", cur, len(migrations))
	}
	for v := cur + 1; v <= len(migrations); v++ {
		if _, err := tx.ExecContext(ctx, migrations[v-1]); err != nil {
			return fmt.Errorf("migrate to version %d: %w", v, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, applied) VALUES (?, ?)`,
			v, time.Now().UnixNano()); err != nil {
			return fmt.Errorf("migrate to version %d: %w", v, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}

// ---------------------------------------------------------------------------
// Time: stored as Unix nanoseconds, 0 for the zero Time.

// Times outside what Unix nanoseconds in an int64 can hold (years 1678 to
// 2262) are clamped to the bounds rather than wrapped.
var (
	minNanosTime = time.Unix(0, math.MinInt64)
	maxNanosTime = time.Unix(0, math.MaxInt64)
)

func nanos(t time.Time) int64 {
	switch {
	case t.IsZero():
		return 0
	case t.Before(minNanosTime):
		return math.MinInt64
	case t.After(maxNanosTime):
		return math.MaxInt64
	}
	return t.UnixNano()
}

func fromNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

// ---------------------------------------------------------------------------
// AuditLog

const auditColumns = `id, time, tenant, instance, broker, outcome, code, reason, target, detail, duration_ms, bytes_in, bytes_out`

const auditParams = 13

func auditInsertSQL(rows int) string {
	var b strings.Builder
	b.WriteString(`INSERT INTO audit (` + auditColumns + `) VALUES `)
	for i := range rows {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`(?,?,?,?,?,?,?,?,?,?,?,?,?)`)
	}
	b.WriteString(` ON CONFLICT (id) DO NOTHING`)
	return b.String()
}

func appendAuditArgs(args []any, r *AuditRecord) []any {
	return append(args, r.ID, nanos(r.Time), r.Tenant, r.Instance, r.Broker, r.Outcome,
		r.Code, r.Reason, r.Target, r.Detail, r.DurationMS, r.BytesIn, r.BytesOut)
}

// AppendAudit implements AuditLog.
func (s *SQLite) AppendAudit(ctx context.Context, records []AuditRecord) error {
	for i := range records {
		if err := records[i].Validate(); err != nil {
			return fmt.Errorf("audit append: %w", err)
		}
	}
	if len(records) == 0 {
		return nil
	}
	if err := s.enter(); err != nil {
		return fmt.Errorf("audit append: %w", err)
	}
	defer s.mu.RUnlock()
	if err := s.appendAudit(ctx, records); err != nil {
		return fmt.Errorf("audit append: %w", err)
	}
	return nil
}

func (s *SQLite) appendAudit(ctx context.Context, records []AuditRecord) error {
	var ins *sql.Stmt
	if len(records) >= auditInsertRows {
		// Before BeginTx: w's one connection is the transaction's.
		var err error
		if ins, err = s.fullAuditInsert(ctx); err != nil {
			return err
		}
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()

	args := make([]any, 0, min(len(records), auditInsertRows)*auditParams)
	var full *sql.Stmt
	if ins != nil {
		full = tx.StmtContext(ctx, ins)
		defer full.Close()
	}
	for len(records) >= auditInsertRows {
		args = args[:0]
		for i := range auditInsertRows {
			args = appendAuditArgs(args, &records[i])
		}
		if _, err := full.ExecContext(ctx, args...); err != nil {
			return err
		}
		records = records[auditInsertRows:]
	}
	if len(records) > 0 {
		args = args[:0]
		for i := range records {
			args = appendAuditArgs(args, &records[i])
		}
		if _, err := tx.ExecContext(ctx, auditInsertSQL(len(records)), args...); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// QueryAudit implements AuditLog.
func (s *SQLite) QueryAudit(ctx context.Context, q AuditQuery) ([]AuditRecord, error) {
	if err := s.enter(); err != nil {
		return nil, fmt.Errorf("audit query: %w", err)
	}
	defer s.mu.RUnlock()

	var where []string
	var args []any
	add := func(cond string, arg any) {
		where = append(where, cond)
		args = append(args, arg)
	}
	if !q.Since.IsZero() {
		add("time >= ?", nanos(q.Since))
	}
	if !q.Until.IsZero() {
		add("time < ?", nanos(q.Until))
	}
	for _, f := range []struct{ col, val string }{
		{"tenant", q.Tenant}, {"instance", q.Instance}, {"outcome", q.Outcome},
		{"broker", q.Broker}, {"reason", q.Reason},
	} {
		if f.val != "" {
			add(f.col+" = ?", f.val)
		}
	}
	if q.BeforeID != "" {
		add("id < ?", q.BeforeID)
	}
	query := `SELECT ` + auditColumns + ` FROM audit`
	if len(where) > 0 {
		query += ` WHERE ` + strings.Join(where, " AND ")
	}
	query += ` ORDER BY id DESC LIMIT ?`
	args = append(args, q.PageSize())

	rows, err := s.r.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("audit query: %w", err)
	}
	defer rows.Close()
	var out []AuditRecord
	for rows.Next() {
		var r AuditRecord
		var t int64
		if err := rows.Scan(&r.ID, &t, &r.Tenant, &r.Instance, &r.Broker, &r.Outcome, &r.Code,
			&r.Reason, &r.Target, &r.Detail, &r.DurationMS, &r.BytesIn, &r.BytesOut); err != nil {
			return nil, fmt.Errorf("audit query: %w", err)
		}
		r.Time = fromNanos(t)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("audit query: %w", err)
	}
	return out, nil
}

// AuditStats implements AuditLog.
func (s *SQLite) AuditStats(ctx context.Context, since time.Time, tenant string) ([]AuditStat, error) {
	if err := s.enter(); err != nil {
		return nil, fmt.Errorf("audit stats: %w", err)
	}
	defer s.mu.RUnlock()

	rows, err := s.r.QueryContext(ctx, `SELECT broker, outcome, reason, COUNT(*) AS n FROM audit
WHERE time >= ? AND (? = '' OR tenant = ?) GROUP BY broker, outcome, reason ORDER BY n DESC, broker, outcome, reason`,
		nanosOrMin(since), tenant, tenant)
	if err != nil {
		return nil, fmt.Errorf("audit stats: %w", err)
	}
	defer rows.Close()
	var out []AuditStat
	for rows.Next() {
		var st AuditStat
		if err := rows.Scan(&st.Broker, &st.Outcome, &st.Reason, &st.Count); err != nil {
			return nil, fmt.Errorf("audit stats: %w", err)
		}
		out = append(out, st)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("audit stats: %w", err)
	}
	return out, nil
}

// nanosOrMin is t in Unix nanoseconds, or the smallest int64 for the zero
// Time, for "since" bounds.
func nanosOrMin(t time.Time) int64 {
	if t.IsZero() {
		return math.MinInt64
	}
	return nanos(t)
}

// PruneAudit implements AuditLog.
func (s *SQLite) PruneAudit(ctx context.Context, olderThan time.Time, maxRows int64) (int64, error) {
	if err := s.enter(); err != nil {
		return 0, fmt.Errorf("audit prune: %w", err)
	}
	defer s.mu.RUnlock()

	var deleted int64
	some := false
	if !olderThan.IsZero() {
		// Look before taking the write lock (every engine start prunes).
		var err error
		if some, err = s.anyRow(ctx, `SELECT 1 FROM audit WHERE time < ? LIMIT 1`, nanos(olderThan)); err != nil {
			return 0, fmt.Errorf("audit prune by age: %w", err)
		}
	}
	if some {
		n, err := s.deleteChunked(ctx, `DELETE FROM audit WHERE seq IN
(SELECT seq FROM audit WHERE time < ? LIMIT ?)`, nanos(olderThan))
		deleted += n
		if err != nil {
			return deleted, fmt.Errorf("audit prune by age: %w", err)
		}
	}
	if maxRows > 0 {
		// Every engine start prunes, CLI calls included: when the span
		// of seq (the rowid, an index lookup at each end) shows the log
		// cannot hold more than maxRows records, skip the scan below,
		// which reads maxRows index entries. (Two subqueries: SQLite
		// reads one end of the index only for a lone MIN or MAX.)
		var span int64
		if err := s.r.QueryRowContext(ctx, `SELECT COALESCE((SELECT MAX(seq) FROM audit) - (SELECT MIN(seq) FROM audit) + 1, 0)`).Scan(&span); err != nil {
			return deleted, fmt.Errorf("audit prune by size: %w", err)
		}
		if span <= maxRows {
			return deleted, nil
		}
		var cutoff string
		err := s.r.QueryRowContext(ctx, `SELECT id FROM audit ORDER BY id DESC LIMIT 1 OFFSET ?`, maxRows).Scan(&cutoff)
		if errors.Is(err, sql.ErrNoRows) {
			return deleted, nil
		}
		if err != nil {
			return deleted, fmt.Errorf("audit prune by size: %w", err)
		}
		n, err := s.deleteChunked(ctx, `DELETE FROM audit WHERE seq IN
(SELECT seq FROM audit WHERE id <= ? LIMIT ?)`, cutoff)
		deleted += n
		if err != nil {
			return deleted, fmt.Errorf("audit prune by size: %w", err)
		}
	}
	return deleted, nil
}

// fullAuditInsert returns insAudit, preparing it on first use.
func (s *SQLite) fullAuditInsert(ctx context.Context) (*sql.Stmt, error) {
	s.insMu.Lock()
	defer s.insMu.Unlock()
	if s.insAudit == nil {
		st, err := s.w.PrepareContext(ctx, auditInsertSQL(auditInsertRows))
		if err != nil {
			return nil, fmt.Errorf("prepare: %w", err)
		}
		s.insAudit = st
	}
	return s.insAudit, nil
}

// anyRow reports whether query (a SELECT of at most one row) returns a
// row, reading through the reader pool: a write transaction that would
// change nothing is skipped without waiting for the write lock.
func (s *SQLite) anyRow(ctx context.Context, query string, args ...any) (bool, error) {
	var one int
	err := s.r.QueryRowContext(ctx, query, args...).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// deleteChunked runs query (whose last parameter is a row limit) with arg
// and pruneChunk, each in its own transaction, until a run deletes fewer
// than pruneChunk rows.
func (s *SQLite) deleteChunked(ctx context.Context, query string, arg any) (int64, error) {
	var total int64
	for {
		res, err := s.w.ExecContext(ctx, query, arg, pruneChunk)
		if err != nil {
			return total, err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return total, err
		}
		total += n
		if n < pruneChunk {
			return total, nil
		}
	}
}

// ---------------------------------------------------------------------------
// Revocations

// Revoke implements Revocations.
func (s *SQLite) Revoke(ctx context.Context, subject, reason string) error {
	if err := ValidateSubject(subject); err != nil {
		return fmt.Errorf("revoke: %w", err)
	}
	if err := s.enter(); err != nil {
		return fmt.Errorf("revoke %q: %w", subject, err)
	}
	defer s.mu.RUnlock()
	err := s.revocationTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO revocations (subject, reason, created) VALUES (?, ?, ?)
ON CONFLICT (subject) DO UPDATE SET reason = excluded.reason, created = excluded.created`,
			subject, reason, time.Now().UnixNano())
		return err
	})
	if err != nil {
		return fmt.Errorf("revoke %q: %w", subject, err)
	}
	return nil
}

// Unrevoke implements Revocations.
func (s *SQLite) Unrevoke(ctx context.Context, subject string) error {
	if err := ValidateSubject(subject); err != nil {
		return fmt.Errorf("unrevoke: %w", err)
	}
	if err := s.enter(); err != nil {
		return fmt.Errorf("unrevoke %q: %w", subject, err)
	}
	defer s.mu.RUnlock()
	err := s.revocationTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM revocations WHERE subject = ?`, subject)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return ErrNotFound
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("unrevoke %q: %w", subject, err)
	}
	return nil
}

// revocationTx runs change and bumps the revocation version in one
// transaction.
func (s *SQLite) revocationTx(ctx context.Context, change func(*sql.Tx) error) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := change(tx); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE versions SET value = value + 1 WHERE name = 'revocations'`); err != nil {
		return err
	}
	return tx.Commit()
}

// ListRevocations implements Revocations.
func (s *SQLite) ListRevocations(ctx context.Context) ([]Revocation, error) {
	if err := s.enter(); err != nil {
		return nil, fmt.Errorf("list revocations: %w", err)
	}
	defer s.mu.RUnlock()
	rows, err := s.r.QueryContext(ctx, `SELECT subject, reason, created FROM revocations ORDER BY subject`)
	if err != nil {
		return nil, fmt.Errorf("list revocations: %w", err)
	}
	defer rows.Close()
	var out []Revocation
	for rows.Next() {
		var r Revocation
		var created int64
		if err := rows.Scan(&r.Subject, &r.Reason, &created); err != nil {
			return nil, fmt.Errorf("list revocations: %w", err)
		}
		r.Created = fromNanos(created)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list revocations: %w", err)
	}
	return out, nil
}

// RevocationVersion implements Revocations: one single-row read.
func (s *SQLite) RevocationVersion(ctx context.Context) (uint64, error) {
	if err := s.enter(); err != nil {
		return 0, fmt.Errorf("revocation version: %w", err)
	}
	defer s.mu.RUnlock()
	var v int64
	if err := s.r.QueryRowContext(ctx, `SELECT value FROM versions WHERE name = 'revocations'`).Scan(&v); err != nil {
		return 0, fmt.Errorf("revocation version: %w", err)
	}
	return uint64(v), nil
}

// ---------------------------------------------------------------------------
// Tokens

// AddToken implements Tokens.
func (s *SQLite) AddToken(ctx context.Context, t Token) error {
	if err := ValidateTokenHash(t.Hash); err != nil {
		return fmt.Errorf("add token: %w", err)
	}
	if t.Tenant == "" {
		return fmt.Errorf("add token: %w: empty tenant", ErrInvalid)
	}
	if t.Created.IsZero() {
		t.Created = time.Now()
	}
	if err := s.enter(); err != nil {
		return fmt.Errorf("add token: %w", err)
	}
	defer s.mu.RUnlock()
	res, err := s.w.ExecContext(ctx, `INSERT INTO tokens (hash, tenant, label, created) VALUES (?, ?, ?, ?)
ON CONFLICT (hash) DO NOTHING`, t.Hash, t.Tenant, t.Label, nanos(t.Created))
	if err != nil {
		return fmt.Errorf("add token: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("add token: %w", err)
	} else if n == 0 {
		return fmt.Errorf("add token: %w", ErrExists)
	}
	return nil
}

// LookupToken implements Tokens.
func (s *SQLite) LookupToken(ctx context.Context, hash string) (Token, error) {
	if err := s.enter(); err != nil {
		return Token{}, fmt.Errorf("lookup token: %w", err)
	}
	defer s.mu.RUnlock()
	t := Token{Hash: hash}
	var created int64
	err := s.r.QueryRowContext(ctx, `SELECT tenant, label, created FROM tokens WHERE hash = ?`, hash).
		Scan(&t.Tenant, &t.Label, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return Token{}, fmt.Errorf("lookup token: %w", ErrNotFound)
	}
	if err != nil {
		return Token{}, fmt.Errorf("lookup token: %w", err)
	}
	t.Created = fromNanos(created)
	return t, nil
}

// ListTokens implements Tokens.
func (s *SQLite) ListTokens(ctx context.Context, tenant string) ([]Token, error) {
	if err := s.enter(); err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	defer s.mu.RUnlock()
	query := `SELECT hash, tenant, label, created FROM tokens ORDER BY created, hash`
	var args []any
	if tenant != "" {
		query = `SELECT hash, tenant, label, created FROM tokens WHERE tenant = ? ORDER BY created, hash`
		args = append(args, tenant)
	}
	rows, err := s.r.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	defer rows.Close()
	var out []Token
	for rows.Next() {
		var t Token
		var created int64
		if err := rows.Scan(&t.Hash, &t.Tenant, &t.Label, &created); err != nil {
			return nil, fmt.Errorf("list tokens: %w", err)
		}
		t.Created = fromNanos(created)
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	return out, nil
}

// DeleteToken implements Tokens.
func (s *SQLite) DeleteToken(ctx context.Context, hash string) error {
	if err := s.enter(); err != nil {
		return fmt.Errorf("delete token: %w", err)
	}
	defer s.mu.RUnlock()
	res, err := s.w.ExecContext(ctx, `DELETE FROM tokens WHERE hash = ?`, hash)
	if err != nil {
		return fmt.Errorf("delete token: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("delete token: %w", err)
	} else if n == 0 {
		return fmt.Errorf("delete token: %w", ErrNotFound)
	}
	return nil
}

// ---------------------------------------------------------------------------
// Cache

func encodeHeader(h http.Header) ([]byte, error) {
	if h == nil {
		return nil, nil
	}
	return json.Marshal(h)
}

func decodeHeader(b []byte) (http.Header, error) {
	if b == nil {
		return nil, nil
	}
	var h http.Header
	err := json.Unmarshal(b, &h)
	return h, err
}

// GetCacheEntry implements Cache.
func (s *SQLite) GetCacheEntry(ctx context.Context, partition, key string) (CacheEntry, error) {
	if err := ValidateCacheKey(partition, key); err != nil {
		return CacheEntry{}, fmt.Errorf("cache get: %w", err)
	}
	if err := s.enter(); err != nil {
		return CacheEntry{}, fmt.Errorf("cache get: %w", err)
	}
	defer s.mu.RUnlock()
	var (
		e               CacheEntry
		hdr, reqHdr     []byte
		stored, expires int64
	)
	err := s.r.QueryRowContext(ctx, `SELECT status, header, request_header, body, stored, expires FROM cache
WHERE partition = ? AND key = ? AND (expires = 0 OR expires > ?)`, partition, key, time.Now().UnixNano()).
		Scan(&e.Status, &hdr, &reqHdr, &e.Body, &stored, &expires)
	if errors.Is(err, sql.ErrNoRows) {
		return CacheEntry{}, fmt.Errorf("cache get: %w", ErrNotFound)
	}
	if err != nil {
		return CacheEntry{}, fmt.Errorf("cache get: %w", err)
	}
	if e.Header, err = decodeHeader(hdr); err != nil {
		return CacheEntry{}, fmt.Errorf("cache get: header: %w", err)
	}
	if e.RequestHeader, err = decodeHeader(reqHdr); err != nil {
		return CacheEntry{}, fmt.Errorf("cache get: request header: %w", err)
	}
	e.Stored, e.Expires = fromNanos(stored), fromNanos(expires)
	return e, nil
}

// PutCacheEntry implements Cache.
func (s *SQLite) PutCacheEntry(ctx context.Context, partition, key string, e CacheEntry) error {
	if err := ValidateCacheKey(partition, key); err != nil {
		return fmt.Errorf("cache put: %w", err)
	}
	hdr, err := encodeHeader(e.Header)
	if err != nil {
		return fmt.Errorf("cache put: header: %w", err)
	}
	reqHdr, err := encodeHeader(e.RequestHeader)
	if err != nil {
		return fmt.Errorf("cache put: request header: %w", err)
	}
	body := e.Body
	if body == nil {
		body = []byte{}
	}
	if err := s.enter(); err != nil {
		return fmt.Errorf("cache put: %w", err)
	}
	defer s.mu.RUnlock()
	_, err = s.w.ExecContext(ctx, `INSERT INTO cache
(partition, key, status, header, request_header, body, stored, expires, size)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (partition, key) DO UPDATE SET
	status = excluded.status, header = excluded.header, request_header = excluded.request_header,
	body = excluded.body, stored = excluded.stored, expires = excluded.expires, size = excluded.size`,
		partition, key, e.Status, hdr, reqHdr, body, nanos(e.Stored), nanos(e.Expires), e.Size())
	if err != nil {
		return fmt.Errorf("cache put: %w", err)
	}
	return nil
}

// DeleteCacheEntry implements Cache.
func (s *SQLite) DeleteCacheEntry(ctx context.Context, partition, key string) error {
	if err := ValidateCacheKey(partition, key); err != nil {
		return fmt.Errorf("cache delete: %w", err)
	}
	if err := s.enter(); err != nil {
		return fmt.Errorf("cache delete: %w", err)
	}
	defer s.mu.RUnlock()
	if _, err := s.w.ExecContext(ctx, `DELETE FROM cache WHERE partition = ? AND key = ?`, partition, key); err != nil {
		return fmt.Errorf("cache delete: %w", err)
	}
	return nil
}

// PruneCache implements Cache.
func (s *SQLite) PruneCache(ctx context.Context, maxBytes int64) (int64, error) {
	if err := s.enter(); err != nil {
		return 0, fmt.Errorf("cache prune: %w", err)
	}
	defer s.mu.RUnlock()
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("cache prune: %w", err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `DELETE FROM cache WHERE expires > 0 AND expires <= ?`, time.Now().UnixNano())
	if err != nil {
		return 0, fmt.Errorf("cache prune: %w", err)
	}
	deleted, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("cache prune: %w", err)
	}
	if maxBytes > 0 {
		// Delete the shortest oldest-first prefix whose sizes cover the
		// excess over maxBytes.
		res, err := tx.ExecContext(ctx, `DELETE FROM cache WHERE rowid IN (
	SELECT rowid FROM (
		SELECT rowid, size,
			SUM(size) OVER (ORDER BY stored, rowid ROWS UNBOUNDED PRECEDING) AS running
		FROM cache)
	WHERE running - size < (SELECT COALESCE(SUM(size), 0) FROM cache) - ?)`, maxBytes)
		if err != nil {
			return 0, fmt.Errorf("cache prune by size: %w", err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return 0, fmt.Errorf("cache prune by size: %w", err)
		}
		deleted += n
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("cache prune: %w", err)
	}
	return deleted, nil
}

// Interface guards.
var (
	_ AuditLog    = (*SQLite)(nil)
	_ Revocations = (*SQLite)(nil)
	_ Tokens      = (*SQLite)(nil)
	_ Cache       = (*SQLite)(nil)
	_ Jobs        = (*SQLite)(nil)
)
