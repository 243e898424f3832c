package egress

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// countSlots is a ConnSlots of limit slots that refuses at once when full
// and counts what it gave.
type countSlots struct {
	mu          sync.Mutex
	limit, used int
	peak        int
	acquired    int
	refuse      error // returned when full; nil: a plain error
}

func (s *countSlots) Acquire(ctx context.Context) (func(), error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.used >= s.limit {
		if s.refuse != nil {
			return nil, s.refuse
		}
		return nil, errors.New("no slot")
	}
	s.used++
	s.acquired++
	s.peak = max(s.peak, s.used)
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			s.used--
			s.mu.Unlock()
		})
	}, nil
}

func (s *countSlots) inUse() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.used
}

// TestConnSlotsHeldUntilClose: each connection the client opens holds a
// slot while it is pooled, gives it back when it is closed, and a dial that
// finds no slot is refused rate_limited without reaching the server.
func TestConnSlotsHeldUntilClose(t *testing.T) {
	noIdleGrace(t)
	var live atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) }))
	srv.Config.ConnState = func(c net.Conn, st http.ConnState) {
		switch st {
		case http.StateNew:
			live.Add(1)
		case http.StateClosed, http.StateHijacked:
			live.Add(-1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	d, _ := staticDialer(t, nil, exceptLocal...)
	slots := &countSlots{limit: 1}
	d.Conns = slots
	c := newTestClient(t, d, nil)
	ctx := context.Background()
	for i := range 3 {
		resp, err := c.Get(ctx, srv.URL+"/")
		if err != nil {
			t.Fatalf("get %d: %v", i, err)
		}
		if _, err := ReadAll(resp); err != nil {
			t.Fatal(err)
		}
	}
	if got := slots.inUse(); got != 1 {
		t.Errorf("slots in use with one pooled connection: got %d, want 1", got)
	}
	if slots.acquired != 1 {
		t.Errorf("slots acquired for three requests on one kept-alive connection: got %d, want 1", slots.acquired)
	}
	// A second host (another pool key) needs a second connection: refused.
	srv2, n2, _ := startServer(t, modeHTTP, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	_, err := c.Get(ctx, srv2.URL+"/")
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeRateLimited {
		t.Fatalf("a dial past the slots: got %v, want an *Error rate_limited", err)
	}
	if got := n2.conns.Load(); got != 0 {
		t.Errorf("connections the refused dial opened: got %d, want 0", got)
	}
	// Releasing idle connections gives the slot back, and the server sees
	// the connection closed.
	c.ReleaseIdle()
	if got := slots.inUse(); got != 0 {
		t.Errorf("slots in use after ReleaseIdle: got %d, want 0", got)
	}
	resp, err := c.Get(ctx, srv2.URL+"/")
	if err != nil {
		t.Fatalf("after the release: %v", err)
	}
	ReadAll(resp)
	deadline := time.Now().Add(10 * time.Second)
	for live.Load() != 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if got := live.Load(); got != 0 {
		t.Errorf("server connections still open after the release: %d", got)
	}
}

// TestConnSlotsErrors: a refusal that is an *Error is returned as is, a
// context error is a timeout, and exchanges (UDP included, which needs the
// *net.UDPConn underneath) hold a slot only while they run.
func TestConnSlotsErrors(t *testing.T) {
	d, _ := staticDialer(t, nil, exceptLocal...)
	own := &Error{Code: CodeTooLarge, Reason: "budget", Op: "dial", Detail: "too big"}
	d.Conns = &countSlots{limit: 0, refuse: own}
	_, err := d.ExchangeTCP(context.Background(), "127.0.0.1:9", nil, nil)
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeTooLarge || e.Reason != "budget" {
		t.Errorf("an *Error refusal: got %v, want it as is", err)
	}
	d.Conns = &countSlots{limit: 0, refuse: context.DeadlineExceeded}
	_, err = d.ExchangeTCP(context.Background(), "127.0.0.1:9", nil, nil)
	if !errors.As(err, &e) || e.Code != CodeTimeout {
		t.Errorf("a context refusal: got %v, want timeout", err)
	}

	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	go func() {
		buf := make([]byte, 64)
		n, from, err := pc.ReadFrom(buf)
		if err == nil {
			pc.WriteTo(buf[:n], from)
		}
	}()
	slots := &countSlots{limit: 1}
	d.Conns = slots
	reply, err := d.ExchangeUDP(context.Background(), pc.LocalAddr().String(), []byte("ping"), &ExchangeOptions{Timeout: 5 * time.Second})
	if err != nil || string(reply) != "ping" {
		t.Fatalf("udp exchange with slots: %q, %v", reply, err)
	}
	if slots.inUse() != 0 || slots.acquired != 1 {
		t.Errorf("udp exchange slots: in use %d, acquired %d; want 0, 1", slots.inUse(), slots.acquired)
	}
}

// TestConnSlotsH2Race: requests racing to a new h2 destination each dial a
// connection; ReleaseIdle closes every one of them, not only the one kept
// for new requests, so that their slots come back.
func TestConnSlotsH2Race(t *testing.T) {
	noIdleGrace(t)
	release := make(chan struct{})
	var arrived sync.WaitGroup
	srv, _, roots := startServer(t, modeH2, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived.Done()
		<-release
		w.Write([]byte("ok"))
	}))
	d, _ := staticDialer(t, nil, exceptLocal...)
	slots := &countSlots{limit: 100}
	d.Conns = slots
	c := newTestClient(t, d, roots)
	const n = 8
	arrived.Add(n)
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := c.Get(context.Background(), srv.URL+"/")
			if err != nil {
				t.Error(err)
				return
			}
			ReadAll(resp)
		}()
	}
	arrived.Wait()
	close(release)
	wg.Wait()
	if slots.acquired < 1 {
		t.Fatal("no slot taken")
	}
	c.ReleaseIdle()
	deadline := time.Now().Add(10 * time.Second)
	for slots.inUse() != 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if got := slots.inUse(); got != 0 {
		t.Errorf("slots still held after ReleaseIdle: %d of %d dialled", got, slots.acquired)
	}
}

// noIdleGrace lets ReleaseIdle close the connections of a destination used
// a moment ago.
func noIdleGrace(t *testing.T) {
	saved := releaseIdleAfter
	releaseIdleAfter = 0
	t.Cleanup(func() { releaseIdleAfter = saved })
}

// TestReleaseIdleSparesBusyDestinations: ReleaseIdle keeps the idle
// connections of a destination used within the grace period, so that a
// busy destination does not close and dial again.
func TestReleaseIdleSparesBusyDestinations(t *testing.T) {
	srv, n, _ := startServer(t, modeHTTP, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) }))
	d, _ := staticDialer(t, nil, exceptLocal...)
	slots := &countSlots{limit: 4}
	d.Conns = slots
	c := newTestClient(t, d, nil)
	for range 3 {
		resp, err := c.Get(context.Background(), srv.URL+"/")
		if err != nil {
			t.Fatal(err)
		}
		ReadAll(resp)
		c.ReleaseIdle()
	}
	if got := n.conns.Load(); got != 1 {
		t.Errorf("connections for three requests with ReleaseIdle between them: got %d, want 1", got)
	}
	if slots.inUse() != 1 {
		t.Errorf("slots in use: got %d, want the one kept-alive connection", slots.inUse())
	}
}
