package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/airlockhq/airlock/internal/store"
)

// Jobs is a store.Jobs in Redis, so that a crawl job's state, progress
// and pages are visible from every replica (the replica that started a job
// runs it). Each job is one JSON value changed in optimistic transactions
// (WATCH/MULTI), its pages a list; indexes by tenant (newest first),
// unfinished jobs (for leases) and finish time (for pruning).
type Jobs struct{ f *Fleet }

// Jobs returns the fleet-wide job store.
func (f *Fleet) Jobs() *Jobs { return &Jobs{f: f} }

func (s *Jobs) jobKey(id string) string     { return s.f.key("job", id) }
func (s *Jobs) pagesKey(id string) string   { return s.f.key("job", id, "pages") }
func (s *Jobs) doneKey(id string) string    { return s.f.key("job", id, "finished") }
func (s *Jobs) touchedKey(id string) string { return s.f.key("job", id, "touched") }
func (s *Jobs) tenantKey(t string) string   { return s.f.key("jobs", "tenant", t) }
func (s *Jobs) unfinishedKey() string       { return s.f.key("jobs", "unfinished") }
func (s *Jobs) finishedKey() string         { return s.f.key("jobs", "finished") }
func finishedScore(t time.Time) float64     { return float64(t.UnixNano()) }
func utc(t time.Time) time.Time             { return t.UTC() }
func errJob(op string, err error) error     { return fmt.Errorf("%s: %w", op, err) }
func conflict(op, why string) error         { return fmt.Errorf("%s: %s: %w", op, why, store.ErrConflict) }
func notFound(op, id string) error          { return fmt.Errorf("%s %s: %w", op, id, store.ErrNotFound) }
func encodeJob(j store.Job) ([]byte, error) { return json.Marshal(j) }

// get reads a job: its JSON value, with Pages the length of its page list
// and Updated moved by its last page (appends touch only those, so that
// replicas storing pages at once do not contend on the job's value).
func (s *Jobs) get(ctx context.Context, c redis.Cmdable, id string) (store.Job, error) {
	var raw *redis.StringCmd
	var pages *redis.IntCmd
	var touched *redis.StringCmd
	_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		raw = p.Get(ctx, s.jobKey(id))
		pages = p.LLen(ctx, s.pagesKey(id))
		touched = p.Get(ctx, s.touchedKey(id))
		return nil
	})
	if errors.Is(raw.Err(), redis.Nil) {
		return store.Job{}, store.ErrNotFound
	}
	if err != nil && !errors.Is(err, redis.Nil) {
		return store.Job{}, unavailable("job", err)
	}
	var j store.Job
	if err := json.Unmarshal([]byte(raw.Val()), &j); err != nil {
		return store.Job{}, unavailable("job", err)
	}
	j.Pages = int(pages.Val())
	if ns, err := strconv.ParseInt(touched.Val(), 10, 64); err == nil {
		if t := time.Unix(0, ns); t.After(j.Updated) {
			j.Updated = t
		}
	}
	j.Created, j.Updated, j.Finished, j.Lease = utc(j.Created), utc(j.Updated), utc(j.Finished), utc(j.Lease)
	return j, nil
}

// txRetries bounds the optimistic transactions' retries under contention.
const txRetries = 20

// tx runs fn in an optimistic transaction on the job's key (and the time
// its last page was stored), retrying when
// another writer changed it in between.
func (s *Jobs) tx(ctx context.Context, id string, fn func(tx *redis.Tx) error) error {
	for range txRetries {
		err := s.f.rdb.Watch(ctx, fn, s.jobKey(id), s.touchedKey(id))
		if !errors.Is(err, redis.TxFailedErr) {
			return err
		}
	}
	return unavailable("job", errors.New("too much contention"))
}

// CreateJob implements store.Jobs.
func (s *Jobs) CreateJob(ctx context.Context, j store.Job) error {
	if err := j.Validate(); err != nil {
		return errJob("create job", err)
	}
	if j.Pages != 0 {
		return errJob("create job", fmt.Errorf("%w: a new job has no pages", store.ErrInvalid))
	}
	if j.Updated.IsZero() {
		j.Updated = j.Created
	}
	if !j.Finished.IsZero() {
		j.Owner = ""
	}
	raw, err := encodeJob(j)
	if err != nil {
		return err
	}
	return s.tx(ctx, j.ID, func(tx *redis.Tx) error {
		n, err := tx.Exists(ctx, s.jobKey(j.ID)).Result()
		if err != nil {
			return unavailable("create job", err)
		}
		if n > 0 {
			return fmt.Errorf("create job %s: %w", j.ID, store.ErrExists)
		}
		_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, s.jobKey(j.ID), raw, 0)
			p.Del(ctx, s.touchedKey(j.ID)) // Updated is in the value now
			p.ZAdd(ctx, s.tenantKey(j.Tenant), redis.Z{Member: j.ID})
			if j.Finished.IsZero() {
				p.SAdd(ctx, s.unfinishedKey(), j.ID)
			} else {
				p.Set(ctx, s.doneKey(j.ID), "1", 0)
				p.ZAdd(ctx, s.finishedKey(), redis.Z{Score: finishedScore(j.Finished), Member: j.ID})
			}
			return nil
		})
		return err
	})
}

// UpdateJob implements store.Jobs.
func (s *Jobs) UpdateJob(ctx context.Context, j store.Job) error {
	if j.State == "" || j.Owner == "" {
		return errJob("update job", fmt.Errorf("%w: job %s without state or owner", store.ErrInvalid, j.ID))
	}
	return s.tx(ctx, j.ID, func(tx *redis.Tx) error {
		cur, err := s.get(ctx, tx, j.ID)
		if errors.Is(err, store.ErrNotFound) {
			return notFound("update job", j.ID)
		}
		if err != nil {
			return err
		}
		switch {
		case !cur.Finished.IsZero():
			return conflict("update job "+j.ID, "finished")
		case cur.Owner != j.Owner:
			return conflict("update job "+j.ID, "owned by another runner")
		}
		cur.State, cur.Progress, cur.Summary, cur.Error = j.State, j.Progress, j.Summary, j.Error
		cur.Updated, cur.Finished, cur.Lease = j.Updated, j.Finished, j.Lease
		if cur.Updated.IsZero() {
			cur.Updated = time.Now()
		}
		if !cur.Finished.IsZero() {
			cur.Owner = ""
		}
		raw, err := encodeJob(cur)
		if err != nil {
			return err
		}
		_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, s.jobKey(j.ID), raw, 0)
			p.Del(ctx, s.touchedKey(j.ID)) // Updated is in the value now
			if !cur.Finished.IsZero() {
				p.Set(ctx, s.doneKey(j.ID), "1", 0)
				p.SRem(ctx, s.unfinishedKey(), j.ID)
				p.ZAdd(ctx, s.finishedKey(), redis.Z{Score: finishedScore(cur.Finished), Member: j.ID})
			}
			return nil
		})
		return err
	})
}

// AppendJobPage implements store.Jobs.
func (s *Jobs) AppendJobPage(ctx context.Context, id string, seq int, data []byte) error {
	if seq < 1 || len(data) == 0 {
		return errJob("append job page", fmt.Errorf("%w: page %d of %d bytes", store.ErrInvalid, seq, len(data)))
	}
	_, err := s.appendPage(ctx, id, seq, data)
	return err
}

// AppendNextJobPage appends a page as the job's next and returns its seq:
// for a job whose pages several replicas store at once.
func (s *Jobs) AppendNextJobPage(ctx context.Context, id string, data []byte) (int, error) {
	if len(data) == 0 {
		return 0, errJob("append job page", fmt.Errorf("%w: an empty page", store.ErrInvalid))
	}
	return s.appendPage(ctx, id, 0, data)
}

// appendScript appends a page. KEYS: the job, its finished flag, its
// pages, its touched time. ARGV: seq (0: the next), the page, the time
// (Unix ns). Returns the page's seq, or -1 (no job), -2 (finished), -3
// (seq is not next).
var appendScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
if redis.call('EXISTS', KEYS[2]) == 1 then return -2 end
local n = redis.call('LLEN', KEYS[3])
local seq = tonumber(ARGV[1])
if seq ~= 0 and seq ~= n + 1 then return -3 end
redis.call('RPUSH', KEYS[3], ARGV[2])
redis.call('SET', KEYS[4], ARGV[3])
return n + 1`)

// appendPage appends page seq, or the next page when seq is 0: one
// round trip, atomic on the server.
func (s *Jobs) appendPage(ctx context.Context, id string, seq int, data []byte) (int, error) {
	n, err := appendScript.Run(ctx, s.f.rdb, []string{s.jobKey(id), s.doneKey(id), s.pagesKey(id), s.touchedKey(id)},
		seq, data, time.Now().UnixNano()).Int()
	switch {
	case err != nil:
		return 0, unavailable("append job page", err)
	case n == -1:
		return 0, notFound("append job page", id)
	case n == -2:
		return 0, conflict("append job page "+id, "finished")
	case n == -3:
		return 0, conflict("append job page "+id, "page "+strconv.Itoa(seq)+" is not next")
	}
	return n, nil
}

// GetJob implements store.Jobs.
func (s *Jobs) GetJob(ctx context.Context, id string) (store.Job, error) {
	j, err := s.get(ctx, s.f.rdb, id)
	if errors.Is(err, store.ErrNotFound) {
		return store.Job{}, notFound("get job", id)
	}
	return j, err
}

// ListJobs implements store.Jobs: newest first.
func (s *Jobs) ListJobs(ctx context.Context, tenant string, limit int) ([]store.Job, error) {
	if tenant == "" {
		return nil, errJob("list jobs", fmt.Errorf("%w: no tenant", store.ErrInvalid))
	}
	ids, err := s.f.rdb.ZRangeArgs(ctx, redis.ZRangeArgs{Key: s.tenantKey(tenant), Start: "+", Stop: "-", ByLex: true, Rev: true,
		Count: int64(store.JobLimit(limit))}).Result()
	if err != nil {
		return nil, unavailable("list jobs", err)
	}
	var out []store.Job
	for _, id := range ids {
		j, err := s.get(ctx, s.f.rdb, id)
		if errors.Is(err, store.ErrNotFound) {
			continue // pruned meanwhile
		}
		if err != nil {
			return nil, err
		}
		out = append(out, j)
	}
	return out, nil
}

// JobPages implements store.Jobs.
func (s *Jobs) JobPages(ctx context.Context, id string, after, limit int) ([]store.JobPage, error) {
	if after < 0 {
		after = 0
	}
	n := store.JobLimit(limit)
	vals, err := s.f.rdb.LRange(ctx, s.pagesKey(id), int64(after), int64(after+n-1)).Result()
	if err != nil {
		return nil, unavailable("job pages", err)
	}
	if len(vals) == 0 {
		return nil, nil
	}
	out := make([]store.JobPage, len(vals))
	for i, v := range vals {
		out[i] = store.JobPage{Seq: after + 1 + i, Data: []byte(v)}
	}
	return out, nil
}

// RenewJobs implements store.Jobs.
func (s *Jobs) RenewJobs(ctx context.Context, owner string, until time.Time) (int64, error) {
	if owner == "" {
		return 0, errJob("renew jobs", fmt.Errorf("%w: no owner", store.ErrInvalid))
	}
	ids, err := s.f.rdb.SMembers(ctx, s.unfinishedKey()).Result()
	if err != nil {
		return 0, unavailable("renew jobs", err)
	}
	var n int64
	for _, id := range ids {
		err := s.tx(ctx, id, func(tx *redis.Tx) error {
			cur, err := s.get(ctx, tx, id)
			if err != nil || cur.Owner != owner || !cur.Finished.IsZero() {
				return nil
			}
			cur.Lease = until
			raw, err := encodeJob(cur)
			if err != nil {
				return err
			}
			_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
				p.Set(ctx, s.jobKey(id), raw, 0)
				p.Del(ctx, s.touchedKey(id)) // Updated is in the value now
				return nil
			})
			if err == nil {
				n++
			}
			return err
		})
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// ExpireJobs implements store.Jobs.
func (s *Jobs) ExpireJobs(ctx context.Context, leaseBefore time.Time, state string, at time.Time) ([]string, error) {
	if state == "" {
		return nil, errJob("expire jobs", fmt.Errorf("%w: no state", store.ErrInvalid))
	}
	if at.IsZero() {
		at = time.Now()
	}
	ids, err := s.f.rdb.SMembers(ctx, s.unfinishedKey()).Result()
	if err != nil {
		return nil, unavailable("expire jobs", err)
	}
	var out []string
	for _, id := range ids {
		err := s.tx(ctx, id, func(tx *redis.Tx) error {
			cur, err := s.get(ctx, tx, id)
			if errors.Is(err, store.ErrNotFound) {
				return tx.SRem(ctx, s.unfinishedKey(), id).Err()
			}
			if err != nil || !cur.Finished.IsZero() || !cur.Lease.Before(leaseBefore) {
				return err
			}
			cur.State, cur.Finished, cur.Updated, cur.Owner = state, at, at, ""
			raw, err := encodeJob(cur)
			if err != nil {
				return err
			}
			_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
				p.Set(ctx, s.jobKey(id), raw, 0)
				p.Del(ctx, s.touchedKey(id)) // Updated is in the value now
				p.Set(ctx, s.doneKey(id), "1", 0)
				p.SRem(ctx, s.unfinishedKey(), id)
				p.ZAdd(ctx, s.finishedKey(), redis.Z{Score: finishedScore(at), Member: id})
				return nil
			})
			if err == nil {
				out = append(out, id)
			}
			return err
		})
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

// PruneJobs implements store.Jobs.
func (s *Jobs) PruneJobs(ctx context.Context, finishedBefore time.Time) (int64, error) {
	ids, err := s.f.rdb.ZRangeArgs(ctx, redis.ZRangeArgs{Key: s.finishedKey(), Start: "-inf",
		Stop: "(" + strconv.FormatFloat(finishedScore(finishedBefore), 'f', 0, 64), ByScore: true}).Result()
	if err != nil {
		return 0, unavailable("prune jobs", err)
	}
	var n int64
	for _, id := range ids {
		j, err := s.get(ctx, s.f.rdb, id)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return n, err
		}
		_, err = s.f.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Del(ctx, append([]string{s.jobKey(id), s.pagesKey(id), s.doneKey(id), s.touchedKey(id)}, s.f.crawlKeys(id)...)...)
			p.ZRem(ctx, s.finishedKey(), id)
			p.SRem(ctx, s.f.key("crawls", "active"), id)
			if j.Tenant != "" {
				p.ZRem(ctx, s.tenantKey(j.Tenant), id)
			}
			return nil
		})
		if err != nil {
			return n, unavailable("prune jobs", err)
		}
		n++
	}
	return n, nil
}

var _ store.Jobs = (*Jobs)(nil)
