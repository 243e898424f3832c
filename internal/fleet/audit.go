package fleet

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/airlockhq/airlock/internal/store"
)

// DefaultAuditMaxLen bounds the audit stream (approximately: MAXLEN ~).
const DefaultAuditMaxLen = 100000

// DefaultAuditBlock is how long each read of Follow waits for new records
// (XREAD BLOCK) before it reads again. Follow stops at once when its
// context ends, whatever the block.
const DefaultAuditBlock = time.Second

// AuditStream carries every replica's decision records to every other
// replica: each replica appends its records (XADD, bounded with MAXLEN)
// and follows the stream from the start (XREAD), storing the others'
// records in its own SQLite, so that any replica's audit queries, stats,
// counters and deny ring cover the whole fleet.
//
// Why every replica reads everything (XREAD) rather than a consumer
// group: a group hands each record to one consumer, which suits a single
// writer; a copy per replica needs every record on every replica, which
// is what XREAD gives, with no single writer to lose and no group state to
// clean up. Records are idempotent (their ULID is the primary key), so
// reading again after a restart is harmless. A replica down for longer
// than the stream's retention misses what was trimmed meanwhile (it is
// still in the writing replica's SQLite).
type AuditStream struct {
	f       *Fleet
	replica string
	maxLen  int64
	block   time.Duration
}

// AuditStream returns the fleet's audit stream as replica (a name unique
// in the fleet) writes and reads it.
func (f *Fleet) AuditStream(replica string) *AuditStream {
	return &AuditStream{f: f, replica: replica, maxLen: DefaultAuditMaxLen, block: DefaultAuditBlock}
}

// SetBlock sets how long each read of Follow blocks; d <= 0 is
// DefaultAuditBlock. Call it before Follow.
func (s *AuditStream) SetBlock(d time.Duration) {
	if d <= 0 {
		d = DefaultAuditBlock
	}
	s.block = d
}

func (s *AuditStream) key() string { return s.f.key("audit") }

// Publish appends records to the stream. Errors: unavailable (redis).
func (s *AuditStream) Publish(ctx context.Context, records []store.AuditRecord) error {
	if len(records) == 0 {
		return nil
	}
	_, err := s.f.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := range records {
			js, err := json.Marshal(&records[i])
			if err != nil {
				return err
			}
			p.XAdd(ctx, &redis.XAddArgs{Stream: s.key(), MaxLen: s.maxLen, Approx: true,
				Values: map[string]any{"replica": s.replica, "r": js}})
		}
		return nil
	})
	if err != nil {
		return unavailable("audit stream", err)
	}
	return nil
}

// Follow reads the stream from its start until ctx ends, handing the
// records other replicas wrote to deliver in batches, in stream order. A
// failing deliver or read is retried with backoff; it never gives up
// while ctx lives.
func (s *AuditStream) Follow(ctx context.Context, deliver func([]store.AuditRecord) error, logger *slog.Logger) {
	// A blocked XREAD does not see its context end: the reads go through a
	// client of their own, closed as soon as ctx ends, so that a replica's
	// Close does not wait out the block.
	opts := *s.f.rdb.Options()
	opts.PoolSize, opts.MinIdleConns, opts.MaxIdleConns = 1, 0, 1
	rdb := redis.NewClient(&opts)
	stop := context.AfterFunc(ctx, func() { rdb.Close() })
	defer func() {
		if stop() {
			rdb.Close()
		}
	}()
	last := "0"
	backoff := 50 * time.Millisecond
	for ctx.Err() == nil {
		res, err := rdb.XRead(ctx, &redis.XReadArgs{Streams: []string{s.key(), last}, Count: 500, Block: s.block}).Result()
		if err == redis.Nil {
			continue
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			logger.Warn("audit stream: read failed; retrying", slog.String("error", err.Error()), slog.Duration("backoff", backoff))
			sleep(ctx, backoff)
			backoff = min(2*backoff, 5*time.Second)
			continue
		}
		backoff = 50 * time.Millisecond
		for _, st := range res {
			var batch []store.AuditRecord
			for _, m := range st.Messages {
				if m.Values["replica"] == s.replica {
					continue
				}
				raw, _ := m.Values["r"].(string)
				var r store.AuditRecord
				if err := json.Unmarshal([]byte(raw), &r); err != nil || r.ID == "" {
					logger.Warn("audit stream: skipping a malformed entry", slog.String("id", m.ID))
					continue
				}
				batch = append(batch, r)
			}
			for len(batch) > 0 && ctx.Err() == nil {
				if err := deliver(batch); err != nil {
					logger.Warn("audit stream: storing records failed; retrying", slog.String("error", err.Error()))
					sleep(ctx, backoff)
					continue
				}
				break
			}
			if n := len(st.Messages); n > 0 {
				last = st.Messages[n-1].ID
			}
		}
	}
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// TeeAudit is a replica's audit sink in a fleet: it stores records in the
// replica's own log, then publishes them on the audit stream. A stream
// failure loses nothing (the records are in the replica's own log, which
// its queries see): it is logged, with the failures so far, and not
// returned.
type TeeAudit struct {
	store.AuditLog
	Stream *AuditStream
	Logger *slog.Logger

	failures atomic.Int64
}

// AppendAudit implements store.AuditLog.
func (t *TeeAudit) AppendAudit(ctx context.Context, recs []store.AuditRecord) error {
	if err := t.AuditLog.AppendAudit(ctx, recs); err != nil {
		return err
	}
	if err := t.Stream.Publish(ctx, recs); err != nil {
		n := t.failures.Add(1)
		t.Logger.Warn("audit stream: publishing failed; the records are in this replica's store only",
			slog.Int("records", len(recs)), slog.Int64("failures", n), slog.String("error", err.Error()))
	}
	return nil
}
