package proxy

import (
	"context"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/gate"
)

// TestCloseWaitsForHandlers: Close returns only once every connection's
// handler has returned, so that a tunnel's audit record (written by its
// handler) is in when Close is. A handler held in authentication while
// Close runs must have gone on to its gate call by then.
func TestCloseWaitsForHandlers(t *testing.T) {
	entered, release := make(chan struct{}, 1), make(chan struct{})
	var began atomic.Bool
	s, err := New(Options{}, Deps{
		Authenticate: func(context.Context, string) (airlock.Principal, error) {
			entered <- struct{}{}
			<-release
			return airlock.Principal{Tenant: "acme"}, nil
		},
		Begin: func(context.Context, airlock.Principal, airlock.Capability, string, string) (*gate.Call, error) {
			began.Store(true)
			return nil, airlock.Errorf(airlock.CodeUnavailable, airlock.ReasonShuttingDown, "closed")
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln) }()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// user "a", password "tok"
	io.WriteString(c, "CONNECT site.test:443 HTTP/1.1\r\nHost: site.test:443\r\nProxy-Authorization: Basic YTp0b2s=\r\n\r\n")
	<-entered
	go func() {
		time.Sleep(50 * time.Millisecond)
		close(release)
	}()
	s.Close()
	if !began.Load() {
		t.Fatal("Close returned while a handler was still running")
	}
	select {
	case <-served:
	case <-time.After(30 * time.Second):
		t.Fatal("Serve did not return after Close")
	}
}
