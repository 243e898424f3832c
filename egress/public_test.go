package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestPublicMessageHidesAnswers: a refusal of a name that resolves into a
// refused class is reason internal_address whatever the class, and its
// public message carries neither the answer nor its class; the full text
// (for the audit) and the decision keep both. A literal keeps its class.
func TestPublicMessageHidesAnswers(t *testing.T) {
	d, audit := staticDialer(t, map[string][]netip.Addr{
		"internal.test": mustAddrs("10.1.2.3"),
		"loop.test":     mustAddrs("127.0.0.9"),
		"meta.test":     mustAddrs("169.254.169.254"),
		// Never dialled: the private answer denies the name.
		"mixed.test": mustAddrs("93.184.216.34", "10.1.2.3"),
	})
	c := newTestClient(t, d, nil)
	tests := []struct {
		url        string
		wantReason Reason
		wantClass  Reason
		hidden     string // must not be in the public message
	}{
		{"http://internal.test/", ReasonInternalAddress, ReasonPrivate, "10.1.2.3"},
		{"http://loop.test/", ReasonInternalAddress, ReasonLoopback, "127.0.0.9"},
		{"http://meta.test/", ReasonInternalAddress, ReasonMetadata, "169.254.169.254"},
		{"http://mixed.test/", ReasonInternalAddress, ReasonDNSMixed, "10.1.2.3"},
		{"http://10.1.2.3/", ReasonPrivate, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			audit.reset()
			_, err := c.Do(context.Background(), &Request{URL: tt.url})
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error = %v, want an *Error", err)
			}
			if e.Code != CodeDenied || e.Reason != tt.wantReason || e.ErrorReason() != string(tt.wantReason) {
				t.Fatalf("error = %s (%s), want denied (%s)", e.Code, e.Reason, tt.wantReason)
			}
			pub := e.PublicMessage()
			if tt.hidden == "" {
				if !strings.Contains(pub, "private address") {
					t.Errorf("public message of a literal %q, want its class", pub)
				}
				return
			}
			if e.Class != tt.wantClass {
				t.Errorf("Class = %q, want %q", e.Class, tt.wantClass)
			}
			host := strings.TrimSuffix(strings.TrimPrefix(tt.url, "http://"), "/")
			if want := host + " resolves to an address the policy refuses"; !strings.Contains(pub, want) {
				t.Errorf("public message %q, want it to say %q", pub, want)
			}
			for _, leak := range []string{tt.hidden, string(tt.wantClass), "private", "loopback", "metadata"} {
				if strings.Contains(pub, leak) {
					t.Errorf("public message %q carries %q", pub, leak)
				}
			}
			if full := e.Error(); !strings.Contains(full, tt.hidden) || !strings.Contains(full, string(tt.wantClass)) {
				t.Errorf("full text %q lacks the address or the class", full)
			}
			ds := audit.all()
			if len(ds) != 1 || ds[0].Reason != tt.wantClass {
				t.Errorf("decisions %+v, want one with the class %s", ds, tt.wantClass)
			}
		})
	}
}

// TestPublicMessageHidesDNSServer: a resolver failure's public message does
// not name the DNS server, nor the addresses of the socket it used.
func TestPublicMessageHidesDNSServer(t *testing.T) {
	s := startStubDNS(t)
	s.SetServFail("broken.test")
	s.SetDelay("slow.test", 2*time.Second)
	d, _ := dnsDialer(t, s)
	d.DNSTimeout = 200 * time.Millisecond
	c := newTestClient(t, d, nil)
	server, _, _ := net.SplitHostPort(s.Addr())
	for _, name := range []string{"broken.test", "slow.test"} {
		_, err := c.Do(context.Background(), &Request{URL: "http://" + name + "/"})
		var e *Error
		if !errors.As(err, &e) {
			t.Fatalf("%s: error = %v, want an *Error", name, err)
		}
		if pub := e.PublicMessage(); strings.Contains(pub, server) || strings.Contains(pub, s.Addr()) {
			t.Errorf("%s: public message %q names the DNS server %s", name, pub, s.Addr())
		}
		if !strings.Contains(e.Error(), s.Addr()) {
			t.Errorf("%s: full text %q lacks the DNS server %s", name, e.Error(), s.Addr())
		}
	}
}

func TestPublicCause(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{&net.OpError{Op: "read", Net: "tcp",
			Source: &net.TCPAddr{IP: net.ParseIP("127.0.0.1"), Port: 5555},
			Addr:   &net.TCPAddr{IP: net.ParseIP("10.1.2.3"), Port: 80},
			Err:    &os.SyscallError{Syscall: "read", Err: syscall.ECONNRESET}}, "read: read: connection reset by peer"},
		{&net.DNSError{Err: "no such host", Name: "x.test", Server: "10.0.0.53:53"}, "lookup x.test: no such host"},
		{fmt.Errorf("dial 10.1.2.3:80 and [fd00::1]:443 then ::ffff:10.0.0.1."), "dial [address] and [address] then [address]."},
		{errors.New("tls: bad certificate; deadbeef 1.2 a:b"), "tls: bad certificate; deadbeef 1.2 a:b"},
	}
	for _, tt := range tests {
		if got := publicCause(tt.err); got != tt.want {
			t.Errorf("publicCause(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
}
