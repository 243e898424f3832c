package api

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/engine"
)

// Crawl job paging: the engine's defaults (or the tenant's
// limits.list_limit when lower), so that a short page of results means the
// end. A limit above the ceiling is refused, not reduced.
const (
	DefaultJobsLimit  = engine.DefaultJobPageLimit
	DefaultPagesLimit = engine.DefaultJobPageLimit
)

// defaultListLimit is def, or the caller's ceiling when that is lower.
func (s *server) defaultListLimit(c caller, def int) int {
	return int(min(int64(def), s.en.Ceiling(c.principal, engine.LimitListLimit)))
}

// crawlJobRequest is the body of POST /api/crawls: a seed or a list of
// URLs, and the crawl options at the top level or, as in POST /api/browse,
// under "options" (not both).
type crawlJobRequest struct {
	Seed string   `json:"seed,omitempty"`
	URLs []string `json:"urls,omitempty"`
	crawlOptions
	Options *crawlOptions `json:"options,omitempty"`
}

// jobsResponse is the answer of GET /api/crawls, newest first.
type jobsResponse struct {
	Jobs []airlock.CrawlJob `json:"jobs"`
}

// jobResponse is the answer of GET /api/crawls/{id}: the job and its pages
// after the cursor. Next is the after of the following request; it is null
// once the job has ended and every page has been read.
type jobResponse struct {
	Job   *airlock.CrawlJob `json:"job"`
	Pages []airlock.JobPage `json:"pages"`
	Next  *int              `json:"next"`
}

func (s *server) startCrawl(w http.ResponseWriter, r *http.Request, c caller) error {
	var req crawlJobRequest
	if err := decodeJSON(r, &req); err != nil {
		return err
	}
	if (req.Seed == "") == (len(req.URLs) == 0) {
		return badRequest("a crawl job needs seed or urls, exactly one of them")
	}
	if req.Options != nil {
		if !reflect.DeepEqual(req.crawlOptions, crawlOptions{}) {
			return badRequest("give the crawl options at the top level or under \"options\", not both")
		}
		req.crawlOptions = *req.Options
	}
	job, err := s.en.StartCrawlJob(r.Context(), c.principal, req.request(req.Seed, req.URLs))
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/api/crawls/"+url.PathEscape(job.ID))
	writeJSON(w, http.StatusAccepted, job)
	return nil
}

func (s *server) listCrawls(w http.ResponseWriter, r *http.Request, c caller) error {
	q, err := queryParams(r, "limit")
	if err != nil {
		return err
	}
	limit, err := intParam(q, "limit", s.defaultListLimit(c, DefaultJobsLimit))
	if err != nil {
		return err
	}
	if limit == 0 {
		limit = s.defaultListLimit(c, DefaultJobsLimit)
	}
	jobs, err := s.en.CrawlJobs(r.Context(), c.principal, limit)
	if err != nil {
		return err
	}
	if jobs == nil {
		jobs = []airlock.CrawlJob{}
	}
	writeJSON(w, http.StatusOK, jobsResponse{Jobs: jobs})
	return nil
}

func (s *server) getCrawl(w http.ResponseWriter, r *http.Request, c caller) error {
	q, err := queryParams(r, "after", "limit")
	if err != nil {
		return err
	}
	after, err := intParam(q, "after", 0)
	if err != nil {
		return err
	}
	limit, err := intParam(q, "limit", s.defaultListLimit(c, DefaultPagesLimit))
	if err != nil {
		return err
	}
	id := r.PathValue("id")
	// The job first: when it has ended, every page is already stored, so
	// a short page of results is the last one.
	job, err := s.en.CrawlJob(r.Context(), c.principal, id)
	if err != nil {
		return err
	}
	resp := jobResponse{Job: job, Pages: []airlock.JobPage{}}
	next := after
	if limit > 0 {
		pages, err := s.en.CrawlJobPages(r.Context(), c.principal, id, after, limit)
		if err != nil {
			return err
		}
		if pages != nil {
			resp.Pages = pages
		}
		if len(pages) > 0 {
			next = pages[len(pages)-1].Seq
		}
		if len(pages) < limit && airlock.JobFinished(job.State) {
			writeJSON(w, http.StatusOK, resp)
			return nil
		}
	}
	resp.Next = &next
	writeJSON(w, http.StatusOK, resp)
	return nil
}

// cancelCrawl asks the job to stop and answers the job as it is then
// (its state becomes cancelled when the crawl has stopped).
func (s *server) cancelCrawl(w http.ResponseWriter, r *http.Request, c caller) error {
	id := r.PathValue("id")
	if err := s.en.CancelCrawlJob(r.Context(), c.principal, id); err != nil {
		return err
	}
	job, err := s.en.CrawlJob(r.Context(), c.principal, id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, job)
	return nil
}

// crawlEvents streams a job as server-sent events: "page" (id: its seq,
// data: the Page), "progress" (data: CrawlProgress) and "end" (data: the
// CrawlJob in its final state), after which the stream closes. It resumes
// after Last-Event-ID, else after the query's after; a comment line every
// HeartbeatInterval keeps an idle stream open. The write deadline moves
// forward with every write.
func (s *server) crawlEvents(w http.ResponseWriter, r *http.Request, c caller) error {
	q, err := queryParams(r, "after")
	if err != nil {
		return err
	}
	after, err := intParam(q, "after", 0)
	if err != nil {
		return err
	}
	if lei := r.Header.Get("Last-Event-ID"); lei != "" {
		n, err := strconv.Atoi(lei)
		if err != nil || n < 0 {
			return airlock.Errorf(airlock.CodeInvalid, airlock.ReasonQuery, "Last-Event-ID %q: want the seq of a page event", lei)
		}
		after = n
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	if s.opts.Streams != nil {
		// The server is shutting down: end the stream so the drain is not
		// held up by it; the client reconnects with Last-Event-ID.
		stop := context.AfterFunc(s.opts.Streams, cancel)
		defer stop()
	}
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(s.opts.WriteTimeout))
	events, err := s.en.WatchCrawlJob(ctx, c.principal, r.PathValue("id"), after)
	if err != nil {
		return err
	}
	// From here on errors cannot be sent: a failed write ends the stream.
	streamSSE(s, ctx, w, "stream of crawl job "+r.PathValue("id"), events, func(ev airlock.CrawlJobEvent) ([]byte, bool, error) {
		b, err := sseEvent(ev)
		return b, ev.Kind == airlock.JobEventEnd, err
	})
	return nil
}

// streamSSE writes events as an event stream until the channel closes, an
// event is the last, a write fails, or ctx ends; a comment line every
// heartbeat keeps an idle stream open. encode formats one event and says
// whether it ends the stream.
func streamSSE[T any](s *server, ctx context.Context, w http.ResponseWriter, comment string, events <-chan T, encode func(T) ([]byte, bool, error)) {
	send := s.startSSE(w)
	if !send([]byte(": " + comment + "\n\n")) {
		return
	}
	heartbeat := time.NewTicker(s.heartbeat)
	defer heartbeat.Stop()
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				return
			}
			b, last, err := encode(ev)
			if err != nil {
				s.log.Error("encode event", slog.String("stream", comment), slog.String("error", err.Error()))
				return
			}
			if !send(b) || last {
				return
			}
		case <-heartbeat.C:
			if !send([]byte(": heartbeat\n\n")) {
				return
			}
		case <-ctx.Done():
			return
		}
	}
}

// startSSE begins an event stream: its headers and status. The send it
// returns writes one chunk and flushes it, moving the write deadline on;
// it reports false once the client is gone.
func (s *server) startSSE(w http.ResponseWriter) func([]byte) bool {
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	w.WriteHeader(http.StatusOK)
	return func(b []byte) bool {
		_ = rc.SetWriteDeadline(time.Now().Add(s.opts.WriteTimeout))
		if _, err := w.Write(b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
}

// sseEvent formats one event. JSON holds no raw newline, so data is one
// line.
func sseEvent(ev airlock.CrawlJobEvent) ([]byte, error) {
	var data any
	switch ev.Kind {
	case airlock.JobEventPage:
		data = ev.Page
	case airlock.JobEventProgress:
		data = ev.Progress
	case airlock.JobEventEnd:
		data = ev.Job
	default:
		data = ev
	}
	js, err := json.Marshal(data)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteString("event: ")
	b.WriteString(ev.Kind)
	b.WriteByte('\n')
	if ev.Kind == airlock.JobEventPage || ev.Seq > 0 {
		b.WriteString("id: ")
		b.WriteString(strconv.Itoa(ev.Seq))
		b.WriteByte('\n')
	}
	b.WriteString("data: ")
	b.Write(js)
	b.WriteString("\n\n")
	return b.Bytes(), nil
}
