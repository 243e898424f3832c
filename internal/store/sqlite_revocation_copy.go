package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// RevocationMark is what a replica remembers of a shared revocation set
// (Redis) it copied: the set's epoch, a random id given when the set was
// created or restored, and its generation, a counter bumped by every
// change. The zero RevocationMark means no shared set was ever copied.
type RevocationMark struct {
	Epoch      int64  // > 0 once a set was copied
	Generation uint64 // the set's change counter when it was copied
}

// The mark lives in the versions table (a name and an integer), so that
// the copy needs no schema change.
const (
	markEpoch      = "fleet_revocations_epoch"
	markGeneration = "fleet_revocations_generation"
)

// RevocationMark returns the mark of the last shared set copied into this
// store by CopyRevocations (zero: none).
func (s *SQLite) RevocationMark(ctx context.Context) (RevocationMark, error) {
	if err := s.enter(); err != nil {
		return RevocationMark{}, fmt.Errorf("revocation mark: %w", err)
	}
	defer s.mu.RUnlock()
	m, err := readMark(ctx, s.r.QueryRowContext)
	if err != nil {
		return RevocationMark{}, fmt.Errorf("revocation mark: %w", err)
	}
	return m, nil
}

type queryRow func(ctx context.Context, query string, args ...any) *sql.Row

func readMark(ctx context.Context, q queryRow) (RevocationMark, error) {
	var m RevocationMark
	var epoch, gen int64
	err := q(ctx, `SELECT value FROM versions WHERE name = ?`, markEpoch).Scan(&epoch)
	if errors.Is(err, sql.ErrNoRows) {
		return m, nil
	}
	if err != nil {
		return m, err
	}
	if err := q(ctx, `SELECT value FROM versions WHERE name = ?`, markGeneration).Scan(&gen); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return m, err
	}
	return RevocationMark{Epoch: epoch, Generation: uint64(gen)}, nil
}

// CopyRevocations makes this store's revocation set exactly list (the
// shared set as read, creation times kept) and records mark, in one
// transaction: the durable copy a replica restores from when the shared
// set is lost. A copy older than the one stored (same epoch, lower
// generation: another process of this data directory copied a later
// state first) is skipped. The set's version is bumped when the set
// changed, as by Revoke. mark.Epoch must be positive (ErrInvalid).
func (s *SQLite) CopyRevocations(ctx context.Context, list []Revocation, mark RevocationMark) error {
	if mark.Epoch <= 0 || mark.Generation > 1<<63-1 {
		return fmt.Errorf("copy revocations: %w: mark %+v", ErrInvalid, mark)
	}
	for _, r := range list {
		if err := ValidateSubject(r.Subject); err != nil {
			return fmt.Errorf("copy revocations: %w", err)
		}
	}
	if err := s.enter(); err != nil {
		return fmt.Errorf("copy revocations: %w", err)
	}
	defer s.mu.RUnlock()
	if err := s.copyRevocations(ctx, list, mark); err != nil {
		return fmt.Errorf("copy revocations: %w", err)
	}
	return nil
}

func (s *SQLite) copyRevocations(ctx context.Context, list []Revocation, mark RevocationMark) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	cur, err := readMark(ctx, tx.QueryRowContext)
	if err != nil {
		return err
	}
	if cur.Epoch == mark.Epoch && cur.Generation > mark.Generation {
		return nil
	}
	type row struct {
		reason  string
		created int64
	}
	have := map[string]row{}
	rows, err := tx.QueryContext(ctx, `SELECT subject, reason, created FROM revocations`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var sub string
		var r row
		if err := rows.Scan(&sub, &r.reason, &r.created); err != nil {
			rows.Close()
			return err
		}
		have[sub] = r
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	changed := false
	want := make(map[string]bool, len(list))
	for _, r := range list {
		want[r.Subject] = true
		if h, ok := have[r.Subject]; ok && h.reason == r.Reason && h.created == nanos(r.Created) {
			continue
		}
		changed = true
		if _, err := tx.ExecContext(ctx, `INSERT INTO revocations (subject, reason, created) VALUES (?, ?, ?)
ON CONFLICT (subject) DO UPDATE SET reason = excluded.reason, created = excluded.created`, r.Subject, r.Reason, nanos(r.Created)); err != nil {
			return err
		}
	}
	for sub := range have {
		if want[sub] {
			continue
		}
		changed = true
		if _, err := tx.ExecContext(ctx, `DELETE FROM revocations WHERE subject = ?`, sub); err != nil {
			return err
		}
	}
	if changed {
		if _, err := tx.ExecContext(ctx, `UPDATE versions SET value = value + 1 WHERE name = 'revocations'`); err != nil {
			return err
		}
	}
	for _, kv := range []struct {
		name  string
		value int64
	}{{markEpoch, mark.Epoch}, {markGeneration, int64(mark.Generation)}} {
		if _, err := tx.ExecContext(ctx, `INSERT INTO versions (name, value) VALUES (?, ?)
ON CONFLICT (name) DO UPDATE SET value = excluded.value`, kv.name, kv.value); err != nil {
			return err
		}
	}
	return tx.Commit()
}
