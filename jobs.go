package airlock

import "time"

// Crawl job states. A job is created queued, runs, and ends in exactly one
// of the four final states; a final job never changes again.
const (
	JobQueued    = "queued"    // stored, its crawl not started yet
	JobRunning   = "running"   // its crawl is running
	JobDone      = "done"      // the crawl ended (Summary says whether early and why)
	JobFailed    = "failed"    // the crawl failed: Error says why
	JobCancelled = "cancelled" // stopped by its tenant (DELETE /api/crawls/{id})
	// JobInterrupted: the process running the crawl stopped (engine Close,
	// a crash, a kill) before it ended. The pages gathered are kept;
	// Summary.Stopped is "interrupted". Jobs are not resumed.
	JobInterrupted = "interrupted"
)

// JobFinished reports whether state is one of the final job states.
func JobFinished(state string) bool {
	switch state {
	case JobDone, JobFailed, JobCancelled, JobInterrupted:
		return true
	}
	return false
}

// CrawlJob is a crawl that runs in the background under its tenant's
// principal and keeps its pages in the store: what POST /api/crawls starts
// and GET /api/crawls/{id} reports.
type CrawlJob struct {
	ID         string        `json:"id"` // a ULID
	Tenant     string        `json:"tenant"`
	State      string        `json:"state"` // one of the Job* states
	Request    CrawlRequest  `json:"request"`
	Progress   CrawlProgress `json:"progress"`
	Pages      int           `json:"pages"`             // pages stored so far
	Summary    *CrawlSummary `json:"summary,omitempty"` // when finished
	Error      *Error        `json:"error,omitempty"`   // when failed, in its public shape
	CreatedAt  time.Time     `json:"created_at"`
	UpdatedAt  time.Time     `json:"updated_at"`
	FinishedAt *time.Time    `json:"finished_at,omitempty"`
}

// JobPage is one page of a job's results, numbered from 1 in arrival order.
type JobPage struct {
	Seq  int   `json:"seq"`
	Page *Page `json:"page"`
}

// Kinds of CrawlJobEvent.
const (
	JobEventPage     = "page"
	JobEventProgress = "progress"
	JobEventEnd      = "end"
)

// CrawlJobEvent is one event of a job's stream: kind "page" (Seq, Page),
// "progress" (Progress) or "end" (Job, in its final state).
type CrawlJobEvent struct {
	Kind     string         `json:"kind"`
	Seq      int            `json:"seq,omitempty"`
	Page     *Page          `json:"page,omitempty"`
	Progress *CrawlProgress `json:"progress,omitempty"`
	Job      *CrawlJob      `json:"job,omitempty"`
}
