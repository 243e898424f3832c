package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"os"
	"reflect"
	"strconv"
	"time"

	"modernc.org/libc"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// walCloseCheckpoint is the WAL size (bytes) from which Close checkpoints
// the WAL into the database file and truncates it. Closing does not
// checkpoint otherwise (see noCheckpointOnClose), so the WAL outlives the
// processes that wrote it, and the first connection of the next process
// reads all of it to rebuild its index: this bound keeps that read short
// while a run of one-record processes pays the checkpoint's fsyncs once in
// many runs. (SQLite's own autocheckpoint, at 1000 pages, does not do
// this across processes: the next process's index does not know what the
// last one checkpointed, so the WAL would never restart.)
const walCloseCheckpoint = 512 << 10

// closeCheckpointWait bounds how long Close's checkpoint waits for other
// connections to the file.
const closeCheckpointWait = 200 * time.Millisecond

// walSizeLimit is the size (bytes) to which a checkpoint truncates a WAL
// that a large transaction grew (journal_size_limit).
const walSizeLimit = 4 << 20

// noCheckpointOnClose is a driver.Connector whose connections do not
// checkpoint the WAL when the last of them closes
// (SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE).
//
// A checkpoint on close costs three fsyncs (the WAL, the database file,
// then, when the next process recreates the WAL, its header and the
// directory): an airlock CLI verb that writes one audit record would pay
// them on every run, and they are most of its wall time on a busy disk.
// Without it a commit survives the process as before (synchronous=NORMAL:
// it is in the WAL, which outlives a kill -9), the WAL stays beside the
// database file, and the next process reads it back; Close checkpoints
// once the WAL reaches walCloseCheckpoint bytes, so the work is amortised
// instead of skipped. What changes is a power loss or OS crash: the
// checkpoint's fsyncs used to make a finished CLI call's records safe
// from those too; now, as for a long-running server's commits, the last
// records before one may be lost until a later checkpoint syncs them.
type noCheckpointOnClose struct{ driver.Connector }

func (c noCheckpointOnClose) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	if err := setNoCheckpointOnClose(conn); err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

// openConnector opens a database/sql handle on dsn whose connections do
// not checkpoint on close.
func openConnector(dsn string) (*sql.DB, error) {
	base, err := sqlite.NewConnector(dsn)
	if err != nil {
		return nil, err
	}
	return sql.OpenDB(noCheckpointOnClose{base}), nil
}

// setNoCheckpointOnClose calls sqlite3_db_config(NO_CKPT_ON_CLOSE, 1) on a
// connection of modernc.org/sqlite, which exposes no method for it: the
// handle and the C runtime state are read (not written) from the
// connection's fields. A driver whose connection no longer has them is an
// error here rather than a silent return to a checkpoint on every close;
// TestCloseDoesNotCheckpoint fails with it.
func setNoCheckpointOnClose(conn driver.Conn) error {
	v := reflect.ValueOf(conn)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return fmt.Errorf("sqlite connection %T: not a pointer to a struct", conn)
	}
	db, tls := v.Elem().FieldByName("db"), v.Elem().FieldByName("tls")
	if !db.IsValid() || db.Kind() != reflect.Uintptr || !tls.IsValid() || tls.Type() != reflect.TypeFor[*libc.TLS]() {
		return fmt.Errorf("sqlite connection %T: no db handle and TLS to configure", conn)
	}
	t := (*libc.TLS)(tls.UnsafePointer())
	const vaSlot = 8 // libc.VaList's stride per argument
	bp := t.Alloc(2 * vaSlot)
	defer t.Free(2 * vaSlot)
	if rc := sqlite3.Xsqlite3_db_config(t, uintptr(db.Uint()), sqlite3.SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, libc.VaList(bp, int32(1), uintptr(0))); rc != sqlite3.SQLITE_OK {
		return fmt.Errorf("sqlite3_db_config(NO_CKPT_ON_CLOSE): code %d", rc)
	}
	return nil
}

// checkpointLargeWAL checkpoints the WAL into the database file and
// truncates it when it has reached walCloseCheckpoint bytes. It is best
// effort: another process reading or writing the file may keep it from
// finishing (that process then checkpoints in its turn), and an error
// leaves the WAL to the next process, losing nothing.
func (s *SQLite) checkpointLargeWAL() {
	if s.wal == "" || s.w == nil {
		return
	}
	fi, err := os.Stat(s.wal)
	if err != nil || fi.Size() < walCloseCheckpoint {
		return
	}
	// The writer is closing: it waits for other processes' readers and
	// writers briefly, not for the busy timeout.
	ctx := context.Background()
	if _, err := s.w.ExecContext(ctx, "PRAGMA busy_timeout = "+strconv.FormatInt(closeCheckpointWait.Milliseconds(), 10)); err != nil {
		return
	}
	var busy, log, done int
	_ = s.w.QueryRowContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &log, &done)
}
