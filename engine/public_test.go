package engine_test

import (
	"encoding/json"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/egress/egresstest"
	"github.com/airlockhq/airlock/engine"
)

// TestPublicErrorsThroughDNS resolves through a stub DNS server: a name
// answered with a loopback address that no exception covers (127.0.0.9,
// never a test server's) is refused internal_address on every broker, and
// nothing the caller receives carries the answer or the DNS server; the
// audit record has the answer. A name the server fails on names no server
// either.
func TestPublicErrorsThroughDNS(t *testing.T) {
	dns, err := egresstest.StartDNS()
	if err != nil {
		t.Fatal(err)
	}
	defer dns.Close()
	dns.SetA("internal.test", 60, netip.MustParseAddr("127.0.0.9"))
	dns.SetServFail("broken.test")
	server, _, _ := net.SplitHostPort(dns.Addr())
	e := newEngine(t, engine.Config{Egress: engine.EgressConfig{DNSServer: dns.Addr(), Exceptions: []string{"127.0.0.1"}}})
	ctx := testCtx(t)
	p := e.Principal()

	var outputs []string
	record := func(v any, err error) {
		if err != nil {
			outputs = append(outputs, err.Error())
			b, _ := json.Marshal(airlock.Public(err, ""))
			outputs = append(outputs, string(b))
		}
		if v != nil {
			b, _ := json.Marshal(v)
			outputs = append(outputs, string(b))
		}
	}
	_, err = e.HTTP(ctx, p, airlock.HTTPRequest{URL: "http://internal.test/"})
	wantErr(t, err, airlock.CodeDenied, "internal_address")
	record(nil, err)
	_, err = e.Fetch(ctx, p, airlock.FetchRequest{URL: "http://internal.test/a"})
	wantErr(t, err, airlock.CodeDenied, "internal_address")
	record(nil, err)
	_, err = e.Exchange(ctx, p, airlock.ExchangeRequest{Lane: airlock.LaneTCP, Target: "internal.test:80", Data: []byte("x")})
	wantErr(t, err, airlock.CodeDenied, "internal_address")
	record(nil, err)
	sum, err := e.Crawl(ctx, p, airlock.CrawlRequest{URLs: []string{"http://internal.test/b"}}, func(*airlock.Page) error { return nil }, nil)
	record(sum, err)
	if err == nil && (len(sum.Skipped) != 1 || !strings.Contains(sum.Skipped[0].Detail, "resolves to an address the policy refuses")) {
		t.Errorf("crawl skipped %+v, want the refusal", sum.Skipped)
	}
	_, err = e.HTTP(ctx, p, airlock.HTTPRequest{URL: "http://broken.test/"})
	if err == nil {
		t.Fatal("a SERVFAIL name was fetched")
	}
	record(nil, err)

	for _, out := range outputs {
		for _, leak := range []string{"127.0.0.9", dns.Addr(), server + ":", "loopback"} {
			if strings.Contains(out, leak) {
				t.Errorf("caller output %s carries %q", out, leak)
			}
		}
	}
	if err := e.FlushAudit(ctx); err != nil {
		t.Fatal(err)
	}
	recs, err := e.AuditQuery(ctx, airlock.AuditQuery{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var withAnswer, withServer bool
	for _, r := range recs {
		withAnswer = withAnswer || strings.Contains(r.Detail, "127.0.0.9")
		withServer = withServer || strings.Contains(r.Detail, dns.Addr())
	}
	if !withAnswer || !withServer {
		t.Errorf("audit records %+v: want the answer (%v) and the DNS server (%v) in their detail", recs, withAnswer, withServer)
	}
}
