package store

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrConflict: a job write that the stored job refuses: the job is
// finished (a finished job never changes), owned by another runner, or a
// page is not the next in sequence. Nothing was written.
var ErrConflict = errors.New("store: conflicting job state")

// Limits of ListJobs and JobPages.
const (
	DefaultJobLimit = 100
	MaxJobLimit     = 1000
)

// JobLimit is the effective limit of a ListJobs or JobPages call: <= 0
// means DefaultJobLimit, anything above MaxJobLimit is MaxJobLimit.
func JobLimit(limit int) int {
	switch {
	case limit <= 0:
		return DefaultJobLimit
	case limit > MaxJobLimit:
		return MaxJobLimit
	}
	return limit
}

// Job is a background crawl job as stored. The store does not read the
// JSON documents it keeps (Request, Progress, Summary, Error) nor the
// meaning of State; it keeps them as given.
//
// A job is unfinished while Finished is zero: it has an Owner (the runner,
// an engine instance) that vouches for it until Lease, and renews the lease
// while it runs. A job whose lease passed belongs to a runner that died:
// ExpireJobs finishes it.
type Job struct {
	ID       string // a ULID: unique, sorts by creation time
	Tenant   string // required: every read is by tenant or checked against it
	Owner    string // the runner of an unfinished job; "" once finished
	State    string // required
	Request  []byte // JSON
	Progress []byte // JSON; nil: none yet
	Summary  []byte // JSON; nil: none
	Error    []byte // JSON; nil: none
	// Pages is the number of pages appended (the last seq); only
	// AppendJobPage changes it.
	Pages    int
	Created  time.Time // read back in UTC, as are the other times
	Updated  time.Time
	Finished time.Time // zero: unfinished
	Lease    time.Time // unfinished jobs only
}

// Validate reports a job that no implementation stores, as an error
// wrapping ErrInvalid.
func (j Job) Validate() error {
	switch {
	case j.ID == "":
		return fmt.Errorf("%w: job without ID", ErrInvalid)
	case j.Tenant == "":
		return fmt.Errorf("%w: job %s without tenant", ErrInvalid, j.ID)
	case j.State == "":
		return fmt.Errorf("%w: job %s without state", ErrInvalid, j.ID)
	case j.Created.IsZero():
		return fmt.Errorf("%w: job %s without creation time", ErrInvalid, j.ID)
	case j.Finished.IsZero() && j.Owner == "":
		return fmt.Errorf("%w: unfinished job %s without owner", ErrInvalid, j.ID)
	}
	return nil
}

// JobPage is one stored page of a job: Seq from 1 in arrival order, Data
// the page's JSON.
type JobPage struct {
	Seq  int
	Data []byte
}

// Jobs stores background crawl jobs and their pages.
//
// CreateJob stores a new job (see Job.Validate; Pages must be 0; a zero
// Updated is Created); an ID already stored is ErrExists.
//
// UpdateJob replaces the mutable fields of a stored unfinished job (State,
// Progress, Summary, Error, Updated, Finished, Lease) with j's, and its
// Owner with "" when j is finished (a zero Updated is now). Its runner
// writes it: j.Owner must be
// the stored owner. A finished job, or another owner, is ErrConflict; an
// unknown ID is ErrNotFound. Tenant, Request, Created and Pages are not
// changed.
//
// AppendJobPage stores the page seq of an unfinished job, which must be
// the stored Pages + 1 (else ErrConflict, as for a finished job), and sets
// its Pages to seq and Updated to now, in one transaction. An unknown ID
// is ErrNotFound; an empty page or seq < 1 is ErrInvalid.
//
// GetJob returns ErrNotFound for an unknown ID. ListJobs returns a
// tenant's jobs newest first (by ID descending), at most JobLimit(limit).
// JobPages returns the pages of a job with Seq > after in ascending order,
// at most JobLimit(limit); nil when there are none, the job unknown
// included.
//
// RenewJobs sets Lease to until on every unfinished job of owner and
// returns how many it renewed. ExpireJobs finishes every unfinished job
// whose Lease is before leaseBefore: State becomes state, Finished and
// Updated become at, Owner becomes ""; it returns their IDs (nil when
// none). A runner that renews in time is never expired.
//
// PruneJobs deletes the jobs finished before finishedBefore, with their
// pages, and returns how many jobs it deleted.
type Jobs interface {
	CreateJob(ctx context.Context, j Job) error
	UpdateJob(ctx context.Context, j Job) error
	AppendJobPage(ctx context.Context, id string, seq int, data []byte) error
	GetJob(ctx context.Context, id string) (Job, error)
	ListJobs(ctx context.Context, tenant string, limit int) ([]Job, error)
	JobPages(ctx context.Context, id string, after, limit int) ([]JobPage, error)
	RenewJobs(ctx context.Context, owner string, until time.Time) (int64, error)
	ExpireJobs(ctx context.Context, leaseBefore time.Time, state string, at time.Time) ([]string, error)
	PruneJobs(ctx context.Context, finishedBefore time.Time) (int64, error)
}
