package browser

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
)

// Approvers receive each new ask while its navigate waits; the first
// answer resolves it, an approver that gives none leaves it to the others
// (and to Approve/Deny), and the approvers' context ends when it is
// answered. With an approver attached, NoApprover no longer denies.
func TestApproversAnswerAsks(t *testing.T) {
	t.Parallel()
	site := serve(t, func(w http.ResponseWriter, r *http.Request) { html(w, `<title>Asked</title>`) })
	var answer atomic.Value // "approve", "deny", "none"
	var navigating atomic.Bool
	asked := make(chan ApprovalRequest, 8)
	ended := make(chan error, 8)
	answering := ApproverFunc(func(ctx context.Context, req ApprovalRequest) (bool, error) {
		if !navigating.Load() {
			t.Error("asked while no navigate waits")
		}
		asked <- req
		switch answer.Load() {
		case "approve":
			return true, nil
		case "deny":
			return false, nil
		}
		<-ctx.Done()
		ended <- ctx.Err()
		return false, ctx.Err()
	})
	silent := ApproverFunc(func(ctx context.Context, req ApprovalRequest) (bool, error) {
		<-ctx.Done()
		return false, errors.New("no answer")
	})
	s, _ := open(t, func(o *Options) {
		o.Policy = Policy{DefaultAction: ActionAsk}
		o.AskTimeout = time.Minute
		o.NoApprover = "allow it with --allow-origin"
		o.Approvers = func() []Approver { return []Approver{silent, answering} }
	})
	ctx := testCtx(t)
	nav := func(path string) error {
		navigating.Store(true)
		defer navigating.Store(false)
		return s.Navigate(ctx, site.URL+path, true)
	}

	answer.Store("deny")
	wantCode(t, nav("/denied"), airlock.CodeDenied, "blocked")
	req := <-asked
	if req.Origin != site.URL || req.URL != site.URL+"/denied" || !strings.HasPrefix(req.ID, "ap_") || req.Deadline.IsZero() {
		t.Errorf("request %+v", req)
	}

	// No answer from the approvers: Approve answers, and their context ends.
	answer.Store("none")
	done := make(chan error, 1)
	go func() { done <- nav("/api") }()
	req = <-asked
	if got := slices.Collect(func(yield func(string) bool) {
		for id := range s.Pending() {
			yield(id)
		}
	}); len(got) != 1 || got[0] != req.ID {
		t.Fatalf("Pending() = %v, want %s", got, req.ID)
	}
	// Whether the session crashed is known without its op lock, which the
	// waiting navigate holds: listing sessions must not wait for the ask
	// (the engine lists them under its own lock, which approvals take).
	crashed := make(chan bool, 1)
	go func() { crashed <- s.Crashed() }()
	select {
	case c := <-crashed:
		if c {
			t.Error("Crashed() = true")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Crashed() waits for the op that waits for the approval")
	}
	if err := s.Approve(req.ID); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("approved through Approve: %v", err)
	}
	if err := <-ended; !errors.Is(err, context.Canceled) {
		t.Errorf("the approver's context ended with %v, want canceled", err)
	}

	// An approver approves another origin.
	other := serve(t, func(w http.ResponseWriter, r *http.Request) { html(w, `<title>Other</title>`) })
	answer.Store("approve")
	navigating.Store(true)
	if err := s.Navigate(ctx, other.URL+"/", true); err != nil {
		t.Fatalf("approved by an approver: %v", err)
	}
	navigating.Store(false)
	if req := <-asked; req.Origin != other.URL {
		t.Errorf("asked about %s, want %s", req.Origin, other.URL)
	}
}

// BenchmarkApprovalRoundTrip measures an ask's round trip through an
// approver: from the approver being asked to the paused request reaching
// the server after its answer. Each iteration asks about a new origin.
func BenchmarkApprovalRoundTrip(b *testing.B) {
	var asked atomic.Int64
	var lat []time.Duration
	s := benchSessionWith(b, func(o *Options) {
		o.Policy = Policy{DefaultAction: ActionAsk}
		o.Approvers = func() []Approver {
			return []Approver{ApproverFunc(func(ctx context.Context, req ApprovalRequest) (bool, error) {
				asked.Store(time.Now().UnixNano())
				return true, nil
			})}
		}
	})
	ctx := context.Background()
	for b.Loop() {
		b.StopTimer()
		arrived := make(chan time.Time, 4)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case arrived <- time.Now():
			default:
			}
			html(w, `<title>x</title>`)
		}))
		b.Cleanup(srv.Close)
		b.StartTimer()
		if err := s.Navigate(ctx, srv.URL+"/", true); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, (<-arrived).Sub(time.Unix(0, asked.Load())))
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*9/10].Microseconds())/1000, "p90-ms")
}
