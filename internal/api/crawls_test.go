package api

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
)

// sseEvent is one server-sent event as a client reads it.
type sseMsg struct {
	event, id, data string
}

// stream opens an event stream and returns its response; the caller
// closes the body.
func (f *fixture) stream(path, token string, header ...string) *http.Response {
	f.t.Helper()
	req, err := http.NewRequestWithContext(f.t.Context(), "GET", f.api.URL+path, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := f.api.Client().Do(req)
	if err != nil {
		f.t.Fatalf("GET %s: %v", path, err)
	}
	return resp
}

// readSSE reads events (and, as event "comment", comment lines) until the
// stream ends or stop returns true.
func readSSE(t *testing.T, body io.Reader, stop func(sseMsg) bool) []sseMsg {
	t.Helper()
	var out []sseMsg
	var cur sseMsg
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur != (sseMsg{}) {
				out = append(out, cur)
				if stop != nil && stop(cur) {
					return out
				}
			}
			cur = sseMsg{}
		case strings.HasPrefix(line, ":"):
			cur.event, cur.data = "comment", strings.TrimSpace(line[1:])
		case strings.HasPrefix(line, "event: "):
			cur.event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "id: "):
			cur.id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "data: "):
			if cur.data != "" {
				t.Errorf("an event with two data lines: %q", line)
			}
			cur.data = strings.TrimPrefix(line, "data: ")
		default:
			t.Errorf("unexpected stream line %q", line)
		}
	}
	return out
}

func (f *fixture) startJob(token string, body any) airlock.CrawlJob {
	f.t.Helper()
	r := f.do("POST", "/api/crawls", token, body)
	if r.StatusCode != 202 {
		f.t.Fatalf("start crawl job: %s", r)
	}
	var job airlock.CrawlJob
	r.decode(f.t, &job)
	if job.ID == "" || job.Tenant != "acme" || r.Header.Get("Location") != "/api/crawls/"+job.ID {
		f.t.Fatalf("started job %+v, Location %q", job, r.Header.Get("Location"))
	}
	return job
}

func TestCrawlJobLifecycle(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	job := f.startJob(acmeToken, map[string]any{"seed": f.site.URL + "/", "max_pages": 5, "depth": 3, "timeout": "10s"})
	if job.Request.MaxPages != 5 || job.Request.Timeout != 10*time.Second || job.Request.Seed != f.site.URL+"/" {
		t.Errorf("job request = %+v", job.Request)
	}

	// Server-sent events to the end.
	resp := f.stream("/api/crawls/"+job.ID+"/events", acmeToken)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" || resp.Header.Get("Cache-Control") != "no-cache" {
		t.Fatalf("events: %d %v", resp.StatusCode, resp.Header)
	}
	events := readSSE(t, resp.Body, nil)
	resp.Body.Close()
	var seqs []int
	var end *airlock.CrawlJob
	for _, ev := range events {
		switch ev.event {
		case "page":
			var p airlock.Page
			if err := json.Unmarshal([]byte(ev.data), &p); err != nil || !strings.HasPrefix(p.Title, "Page") {
				t.Errorf("page event %q: %v", ev.data, err)
			}
			n, err := strconv.Atoi(ev.id)
			if err != nil {
				t.Errorf("page event id %q", ev.id)
			}
			seqs = append(seqs, n)
		case "progress":
			var p airlock.CrawlProgress
			if err := json.Unmarshal([]byte(ev.data), &p); err != nil {
				t.Errorf("progress event %q: %v", ev.data, err)
			}
		case "end":
			end = &airlock.CrawlJob{}
			if err := json.Unmarshal([]byte(ev.data), end); err != nil {
				t.Errorf("end event %q: %v", ev.data, err)
			}
		case "comment":
		default:
			t.Errorf("unknown event %+v", ev)
		}
	}
	if len(seqs) != 5 || seqs[0] != 1 || seqs[4] != 5 {
		t.Errorf("page event ids = %v, want 1..5", seqs)
	}
	if end == nil || end.State != airlock.JobDone || end.Pages != 5 || end.Summary == nil || events[len(events)-1].event != "end" {
		t.Fatalf("end = %+v; events %+v", end, events)
	}

	// Resuming after the third page, by Last-Event-ID (which wins over after).
	resp = f.stream("/api/crawls/"+job.ID+"/events?after=1", acmeToken, "Last-Event-ID", "3")
	events = readSSE(t, resp.Body, nil)
	resp.Body.Close()
	var kinds []string
	for _, ev := range events {
		if ev.event != "comment" {
			kinds = append(kinds, ev.event+ev.id)
		}
	}
	if strings.Join(kinds, ",") != "page4,page5,end" {
		t.Errorf("resumed events = %v, want page4,page5,end", kinds)
	}

	// Paged results.
	var got jobResponse
	var all []int
	cursor := "0"
	for i := 0; ; i++ {
		r := f.do("GET", "/api/crawls/"+job.ID+"?limit=2&after="+cursor, acmeToken, nil)
		got = jobResponse{}
		r.decode(t, &got)
		if r.StatusCode != 200 || got.Job == nil || got.Job.ID != job.ID {
			t.Fatalf("get job: %s", r)
		}
		for _, p := range got.Pages {
			all = append(all, p.Seq)
			if p.Page == nil || p.Page.URL == "" {
				t.Errorf("page %d without its page", p.Seq)
			}
		}
		if got.Next == nil {
			break
		}
		if i > 5 {
			t.Fatalf("paging does not end: %+v", got)
		}
		cursor = strconv.Itoa(*got.Next)
	}
	if len(all) != 5 || all[0] != 1 || all[4] != 5 {
		t.Errorf("paged seqs = %v", all)
	}
	if r := f.do("GET", "/api/crawls/"+job.ID+"?limit=0", acmeToken, nil); !strings.Contains(string(r.body), `"pages":[]`) || !strings.Contains(string(r.body), `"next":0`) {
		t.Errorf("limit=0: %s", r)
	}

	// The tenant's list; another tenant sees neither the job nor its events.
	r := f.do("GET", "/api/crawls", acmeToken, nil)
	var list jobsResponse
	r.decode(t, &list)
	if r.StatusCode != 200 || len(list.Jobs) != 1 || list.Jobs[0].ID != job.ID || list.Jobs[0].State != airlock.JobDone {
		t.Errorf("list: %s", r)
	}
	r = f.do("GET", "/api/crawls?limit=5", otherToken, nil)
	if r.StatusCode != 200 || !strings.Contains(string(r.body), `"jobs":[]`) {
		t.Errorf("other's list: %s", r)
	}
	wantError(t, f.do("GET", "/api/crawls/"+job.ID, otherToken, nil), 404, airlock.CodeNotFound, "")
	wantError(t, f.do("GET", "/api/crawls/"+job.ID+"/events", otherToken, nil), 404, airlock.CodeNotFound, "")
	wantError(t, f.do("DELETE", "/api/crawls/"+job.ID, otherToken, nil), 404, airlock.CodeNotFound, "")
	wantError(t, f.do("GET", "/api/crawls/nope", acmeToken, nil), 404, airlock.CodeNotFound, "")
	// Cancelling a finished job changes nothing.
	r = f.do("DELETE", "/api/crawls/"+job.ID, acmeToken, nil)
	var after airlock.CrawlJob
	r.decode(t, &after)
	if r.StatusCode != 200 || after.State != airlock.JobDone {
		t.Errorf("cancel a finished job: %s", r)
	}
}

func TestCrawlJobCancelAndHeartbeat(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(s *server) { s.heartbeat = 20 * time.Millisecond })
	// Every page under /slow waits until the site is released.
	job := f.startJob(acmeToken, map[string]any{"seed": f.site.URL + "/slow/", "max_pages": 50})
	resp := f.stream("/api/crawls/"+job.ID+"/events", acmeToken)
	defer resp.Body.Close()
	// An idle stream gets heartbeats.
	events := readSSE(t, resp.Body, func(m sseMsg) bool { return m.event == "comment" && m.data == "heartbeat" })
	if len(events) == 0 || events[len(events)-1].data != "heartbeat" {
		t.Fatalf("no heartbeat: %+v", events)
	}
	r := f.do("DELETE", "/api/crawls/"+job.ID, acmeToken, nil)
	var got airlock.CrawlJob
	r.decode(t, &got)
	if r.StatusCode != 200 || got.State != airlock.JobCancelled {
		t.Errorf("cancel: %s", r)
	}
	// The open stream ends with the cancelled job.
	events = readSSE(t, resp.Body, func(m sseMsg) bool { return m.event == "end" })
	last := events[len(events)-1]
	if last.event != "end" || !strings.Contains(last.data, `"state":"cancelled"`) {
		t.Errorf("stream after cancel ended with %+v", last)
	}
}

func TestCrawlJobBadRequests(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	tests := []struct {
		name   string
		body   any
		status int
		code   airlock.Code
		reason airlock.Reason
	}{
		{"no seed", map[string]any{"max_pages": 3}, 400, airlock.CodeInvalid, airlock.ReasonRequest},
		{"seed and urls", map[string]any{"seed": f.site.URL, "urls": []string{f.site.URL}}, 400, airlock.CodeInvalid, airlock.ReasonRequest},
		{"unknown field", map[string]any{"seed": f.site.URL, "pages": 3}, 400, airlock.CodeInvalid, airlock.ReasonBody},
		{"bad timeout", map[string]any{"seed": f.site.URL, "timeout": "-1s"}, 400, airlock.CodeInvalid, airlock.ReasonBody},
		{"too many pages", map[string]any{"seed": f.site.URL, "max_pages": 1_000_000}, 400, airlock.CodeInvalid, airlock.ReasonLimit},
		{"bad extract", map[string]any{"seed": f.site.URL, "extract": "some"}, 400, airlock.CodeInvalid, ""},
		{"options twice", map[string]any{"seed": f.site.URL, "max_pages": 3, "options": map[string]any{"depth": 1}}, 400, airlock.CodeInvalid, airlock.ReasonRequest},
		{"unknown option", map[string]any{"seed": f.site.URL, "options": map[string]any{"pages": 3}}, 400, airlock.CodeInvalid, airlock.ReasonBody},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantError(t, f.do("POST", "/api/crawls", acmeToken, tt.body), tt.status, tt.code, airlock.Reason(string(tt.reason)))
		})
	}
	// The options may also come under "options", as in /api/browse.
	resp := f.do("POST", "/api/crawls", acmeToken, map[string]any{"seed": f.site.URL, "options": map[string]any{"max_pages": 2, "depth": 1}})
	var job airlock.CrawlJob
	if resp.StatusCode != 202 {
		t.Fatalf("options under \"options\": %s", resp)
	}
	if resp.decode(t, &job); job.Request.MaxPages != 2 || job.Request.Depth != 1 {
		t.Errorf("options under \"options\": %+v", job.Request)
	}
	for _, q := range []string{"?after=-1", "?limit=x", "?cursor=3"} {
		wantError(t, f.do("GET", "/api/crawls/x"+q, acmeToken, nil), 400, airlock.CodeInvalid, airlock.ReasonQuery)
	}
	wantError(t, f.do("GET", "/api/crawls/x/events", acmeToken, nil, "Last-Event-ID", "abc"), 400, airlock.CodeInvalid, airlock.ReasonQuery)
}
