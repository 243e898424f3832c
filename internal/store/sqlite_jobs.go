package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

// pruneJobsChunk bounds the jobs one PruneJobs transaction deletes (each
// with up to thousands of pages).
const pruneJobsChunk = 50

const jobColumns = `id, tenant, owner, state, request, progress, summary, error, pages, created, updated, finished, lease`

func scanJob(sc interface{ Scan(...any) error }) (Job, error) {
	var j Job
	var created, updated, finished, lease int64
	err := sc.Scan(&j.ID, &j.Tenant, &j.Owner, &j.State, &j.Request, &j.Progress, &j.Summary, &j.Error,
		&j.Pages, &created, &updated, &finished, &lease)
	j.Created, j.Updated, j.Finished, j.Lease = fromNanos(created), fromNanos(updated), fromNanos(finished), fromNanos(lease)
	return j, err
}

// CreateJob implements Jobs.
func (s *SQLite) CreateJob(ctx context.Context, j Job) error {
	if err := j.Validate(); err != nil {
		return fmt.Errorf("create job: %w", err)
	}
	if j.Pages != 0 {
		return fmt.Errorf("create job: %w: job %s created with %d pages", ErrInvalid, j.ID, j.Pages)
	}
	if j.Updated.IsZero() {
		j.Updated = j.Created
	}
	if !j.Finished.IsZero() {
		j.Owner = ""
	}
	if err := s.enter(); err != nil {
		return fmt.Errorf("create job: %w", err)
	}
	defer s.mu.RUnlock()
	res, err := s.w.ExecContext(ctx, `INSERT INTO jobs (`+jobColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?, ?)
ON CONFLICT (id) DO NOTHING`, j.ID, j.Tenant, j.Owner, j.State, j.Request, j.Progress, j.Summary, j.Error,
		nanos(j.Created), nanos(j.Updated), nanos(j.Finished), nanos(j.Lease))
	if err != nil {
		return fmt.Errorf("create job: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("create job: %w", err)
	} else if n == 0 {
		return fmt.Errorf("create job %s: %w", j.ID, ErrExists)
	}
	return nil
}

// jobRefusal explains why a conditional write to job id touched no row:
// ErrNotFound or ErrConflict.
func (s *SQLite) jobRefusal(ctx context.Context, id string) error {
	var n int
	err := s.w.QueryRowContext(ctx, `SELECT 1 FROM jobs WHERE id = ?`, id).Scan(&n)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return ErrNotFound
	case err != nil:
		return err
	}
	return ErrConflict
}

// UpdateJob implements Jobs.
func (s *SQLite) UpdateJob(ctx context.Context, j Job) error {
	if j.ID == "" || j.State == "" || j.Owner == "" {
		return fmt.Errorf("update job: %w: ID, state and owner are required", ErrInvalid)
	}
	if j.Updated.IsZero() {
		j.Updated = time.Now()
	}
	if err := s.enter(); err != nil {
		return fmt.Errorf("update job: %w", err)
	}
	defer s.mu.RUnlock()
	owner := j.Owner
	if !j.Finished.IsZero() {
		owner = ""
	}
	res, err := s.w.ExecContext(ctx, `UPDATE jobs SET state = ?, progress = ?, summary = ?, error = ?,
	updated = ?, finished = ?, lease = ?, owner = ?
WHERE id = ? AND finished = 0 AND owner = ?`, j.State, j.Progress, j.Summary, j.Error,
		nanos(j.Updated), nanos(j.Finished), nanos(j.Lease), owner, j.ID, j.Owner)
	if err != nil {
		return fmt.Errorf("update job %s: %w", j.ID, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("update job %s: %w", j.ID, err)
	} else if n == 0 {
		return fmt.Errorf("update job %s: %w", j.ID, s.jobRefusal(ctx, j.ID))
	}
	return nil
}

// AppendJobPage implements Jobs.
func (s *SQLite) AppendJobPage(ctx context.Context, id string, seq int, data []byte) error {
	if id == "" || seq < 1 || len(data) == 0 {
		return fmt.Errorf("append job page: %w: want a job ID, seq >= 1 and a page", ErrInvalid)
	}
	if err := s.enter(); err != nil {
		return fmt.Errorf("append job page: %w", err)
	}
	defer s.mu.RUnlock()
	err := func() error {
		tx, err := s.w.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		res, err := tx.ExecContext(ctx, `UPDATE jobs SET pages = ?, updated = ? WHERE id = ? AND finished = 0 AND pages = ?`,
			seq, time.Now().UnixNano(), id, seq-1)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			var one int
			err := tx.QueryRowContext(ctx, `SELECT 1 FROM jobs WHERE id = ?`, id).Scan(&one)
			if errors.Is(err, sql.ErrNoRows) {
				return ErrNotFound
			} else if err != nil {
				return err
			}
			return ErrConflict
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO job_pages (job, seq, page) VALUES (?, ?, ?)`, id, seq, data); err != nil {
			return err
		}
		return tx.Commit()
	}()
	if err != nil {
		return fmt.Errorf("append page %d to job %s: %w", seq, id, err)
	}
	return nil
}

// GetJob implements Jobs.
func (s *SQLite) GetJob(ctx context.Context, id string) (Job, error) {
	if err := s.enter(); err != nil {
		return Job{}, fmt.Errorf("get job: %w", err)
	}
	defer s.mu.RUnlock()
	j, err := scanJob(s.r.QueryRowContext(ctx, `SELECT `+jobColumns+` FROM jobs WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Job{}, fmt.Errorf("get job %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return Job{}, fmt.Errorf("get job %q: %w", id, err)
	}
	return j, nil
}

// ListJobs implements Jobs.
func (s *SQLite) ListJobs(ctx context.Context, tenant string, limit int) ([]Job, error) {
	if tenant == "" {
		return nil, fmt.Errorf("list jobs: %w: empty tenant", ErrInvalid)
	}
	if err := s.enter(); err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	defer s.mu.RUnlock()
	rows, err := s.r.QueryContext(ctx, `SELECT `+jobColumns+` FROM jobs WHERE tenant = ? ORDER BY id DESC LIMIT ?`, tenant, JobLimit(limit))
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	defer rows.Close()
	var out []Job
	for rows.Next() {
		j, err := scanJob(rows)
		if err != nil {
			return nil, fmt.Errorf("list jobs: %w", err)
		}
		out = append(out, j)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	return out, nil
}

// JobPages implements Jobs.
func (s *SQLite) JobPages(ctx context.Context, id string, after, limit int) ([]JobPage, error) {
	if err := s.enter(); err != nil {
		return nil, fmt.Errorf("job pages: %w", err)
	}
	defer s.mu.RUnlock()
	rows, err := s.r.QueryContext(ctx, `SELECT seq, page FROM job_pages WHERE job = ? AND seq > ? ORDER BY seq LIMIT ?`,
		id, after, JobLimit(limit))
	if err != nil {
		return nil, fmt.Errorf("job pages: %w", err)
	}
	defer rows.Close()
	var out []JobPage
	for rows.Next() {
		var p JobPage
		if err := rows.Scan(&p.Seq, &p.Data); err != nil {
			return nil, fmt.Errorf("job pages: %w", err)
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("job pages: %w", err)
	}
	return out, nil
}

// RenewJobs implements Jobs.
func (s *SQLite) RenewJobs(ctx context.Context, owner string, until time.Time) (int64, error) {
	if owner == "" {
		return 0, fmt.Errorf("renew jobs: %w: empty owner", ErrInvalid)
	}
	if err := s.enter(); err != nil {
		return 0, fmt.Errorf("renew jobs: %w", err)
	}
	defer s.mu.RUnlock()
	res, err := s.w.ExecContext(ctx, `UPDATE jobs SET lease = ? WHERE owner = ? AND finished = 0`, nanos(until), owner)
	if err != nil {
		return 0, fmt.Errorf("renew jobs: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("renew jobs: %w", err)
	}
	return n, nil
}

// ExpireJobs implements Jobs.
func (s *SQLite) ExpireJobs(ctx context.Context, leaseBefore time.Time, state string, at time.Time) ([]string, error) {
	if state == "" {
		return nil, fmt.Errorf("expire jobs: %w: empty state", ErrInvalid)
	}
	if at.IsZero() {
		at = time.Now()
	}
	if err := s.enter(); err != nil {
		return nil, fmt.Errorf("expire jobs: %w", err)
	}
	defer s.mu.RUnlock()
	// Every engine start expires jobs, CLI calls included: look before
	// taking the write lock.
	if some, err := s.anyRow(ctx, `SELECT 1 FROM jobs WHERE finished = 0 AND lease < ? LIMIT 1`, nanos(leaseBefore)); err != nil {
		return nil, fmt.Errorf("expire jobs: %w", err)
	} else if !some {
		return nil, nil
	}
	ids, err := func() ([]string, error) {
		tx, err := s.w.BeginTx(ctx, nil)
		if err != nil {
			return nil, err
		}
		defer tx.Rollback()
		rows, err := tx.QueryContext(ctx, `UPDATE jobs SET state = ?, finished = ?, updated = ?, owner = ''
WHERE finished = 0 AND lease < ? RETURNING id`, state, nanos(at), nanos(at), nanos(leaseBefore))
		if err != nil {
			return nil, err
		}
		var ids []string
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return nil, err
			}
			ids = append(ids, id)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
		return ids, tx.Commit()
	}()
	if err != nil {
		return nil, fmt.Errorf("expire jobs: %w", err)
	}
	return ids, nil
}

// PruneJobs implements Jobs.
func (s *SQLite) PruneJobs(ctx context.Context, finishedBefore time.Time) (int64, error) {
	if finishedBefore.IsZero() {
		return 0, nil
	}
	if err := s.enter(); err != nil {
		return 0, fmt.Errorf("prune jobs: %w", err)
	}
	defer s.mu.RUnlock()
	if some, err := s.anyRow(ctx, `SELECT 1 FROM jobs WHERE finished <> 0 AND finished < ? LIMIT 1`, nanos(finishedBefore)); err != nil || !some {
		if err != nil {
			return 0, fmt.Errorf("prune jobs: %w", err)
		}
		return 0, nil
	}
	var total int64
	for {
		n, err := s.pruneJobsChunk(ctx, nanos(finishedBefore))
		total += n
		if err != nil {
			return total, fmt.Errorf("prune jobs: %w", err)
		}
		if n < pruneJobsChunk {
			return total, nil
		}
	}
}

func (s *SQLite) pruneJobsChunk(ctx context.Context, before int64) (int64, error) {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(ctx, `SELECT id FROM jobs WHERE finished <> 0 AND finished < ? LIMIT ?`, before, pruneJobsChunk)
	if err != nil {
		return 0, err
	}
	var ids []any
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return 0, err
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	if len(ids) == 0 {
		return 0, nil
	}
	in := "(" + strings.TrimSuffix(strings.Repeat("?,", len(ids)), ",") + ")"
	if _, err := tx.ExecContext(ctx, `DELETE FROM job_pages WHERE job IN `+in, ids...); err != nil {
		return 0, err
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM jobs WHERE id IN `+in, ids...); err != nil {
		return 0, err
	}
	return int64(len(ids)), tx.Commit()
}
