package gate_test

import (
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/gate"
)

func mustLimits(t *testing.T, tenant string, global, override map[string]int64) *gate.Limits {
	t.Helper()
	l, err := gate.NewLimits(tenant, global, override)
	if err != nil {
		t.Fatalf("NewLimits: %v", err)
	}
	return l
}

func wantLimitErr(t *testing.T, err error, code airlock.Code, reason airlock.Reason, msg string) {
	t.Helper()
	var ae *airlock.Error
	if !errors.As(err, &ae) || ae.Code != code || ae.Reason != reason || (msg != "" && ae.Message != msg) {
		t.Fatalf("err = %#v, want %s/%s %q", err, code, reason, msg)
	}
}

func TestLimitsCheck(t *testing.T) {
	l := mustLimits(t, "acme", map[string]int64{gate.LimitMaxRedirects: 3}, map[string]int64{gate.LimitCrawlPerHost: 4})
	three, big, neg := 3, 1_000_000_000, -1
	tests := []struct {
		name    string
		req     any
		variant string
		code    airlock.Code
		msg     string
	}{
		{name: "zero values ask for defaults", req: airlock.ExchangeRequest{Lane: "tcp"}, variant: "tcp"},
		{name: "at the ceiling", req: airlock.ExchangeRequest{MaxReply: 1 << 20, Timeout: 10 * time.Second}, variant: "tcp"},
		{name: "max_reply above", req: airlock.ExchangeRequest{MaxReply: 2_000_000_000}, variant: "tcp", code: airlock.CodeInvalid,
			msg: "max_reply 2000000000 is above the ceiling 1048576 (limits.exchange_max_reply)"},
		{name: "udp max_reply has its own ceiling", req: airlock.ExchangeRequest{MaxReply: 65536}, variant: "udp", code: airlock.CodeInvalid,
			msg: "max_reply 65536 is above the ceiling 65535 (limits.udp_max_reply)"},
		{name: "timeout 1000h", req: airlock.ExchangeRequest{Timeout: 1000 * time.Hour}, variant: "tls", code: airlock.CodeInvalid,
			msg: "timeout 1000h0m0s is above the ceiling 10s (limits.exchange_timeout)"},
		{name: "idle negative", req: airlock.ExchangeRequest{Idle: -time.Second}, variant: "tcp", code: airlock.CodeInvalid,
			msg: "idle -1s is negative; the ceiling is 10s (limits.exchange_idle)"},
		{name: "data size", req: airlock.ExchangeRequest{Data: make([]byte, 1<<20+1)}, variant: "tcp", code: airlock.CodeInvalid,
			msg: "data 1048577 is above the ceiling 1048576 (limits.exchange_data)"},
		{name: "redirects within", req: &airlock.HTTPRequest{MaxRedirects: &three}},
		{name: "redirects nil", req: &airlock.HTTPRequest{}},
		{name: "redirects 1e9", req: &airlock.HTTPRequest{MaxRedirects: &big}, code: airlock.CodeInvalid,
			msg: "max_redirects 1000000000 is above the ceiling 3 (limits.max_redirects)"},
		{name: "redirects negative", req: &airlock.HTTPRequest{MaxRedirects: &neg}, code: airlock.CodeInvalid},
		{name: "per host over the tenant's ceiling", req: airlock.CrawlRequest{PerHostConcurrency: 5}, code: airlock.CodeInvalid,
			msg: "per_host_concurrency 5 is above the ceiling 4 (tenants.acme.limits.crawl_per_host_concurrency)"},
		{name: "per host lowered", req: airlock.CrawlRequest{PerHostConcurrency: 1, Concurrency: 64}},
		{name: "concurrency 100000", req: airlock.CrawlRequest{Concurrency: 100000}, code: airlock.CodeInvalid,
			msg: "concurrency 100000 is above the ceiling 64 (limits.crawl_concurrency)"},
		{name: "depth unlimited", req: airlock.CrawlRequest{Depth: -1}, code: airlock.CodeInvalid},
		{name: "crawl urls", req: airlock.CrawlRequest{URLs: make([]string, 10001)}, code: airlock.CodeInvalid},
		{name: "udp zero values", req: airlock.ExchangeRequest{}, variant: "udp"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := l.Check(tt.req, tt.variant)
			if tt.code == "" {
				if err != nil {
					t.Fatalf("Check = %v, want nil", err)
				}
				return
			}
			wantLimitErr(t, err, tt.code, airlock.Reason(string(airlock.ReasonLimit)), tt.msg)
		})
	}
}

// An int field of a duration limit is in milliseconds.
type Op struct {
	TimeoutMS int `json:"timeout_ms"`
}

func TestLimitsMilliseconds(t *testing.T) {
	l := mustLimits(t, "acme", nil, map[string]int64{gate.LimitBrowserWait: int64(time.Second)})
	if err := l.Check(Op{TimeoutMS: 1000}, ""); err != nil {
		t.Fatalf("1000 ms: %v", err)
	}
	wantLimitErr(t, l.Check(Op{TimeoutMS: 1001}, ""), airlock.CodeInvalid, airlock.Reason(string(airlock.ReasonLimit)),
		"timeout_ms 1.001s is above the ceiling 1s (tenants.acme.limits.browser_wait_timeout)")
	// No overflow into a negative number.
	wantLimitErr(t, l.Check(Op{TimeoutMS: 1 << 62}, ""), airlock.CodeInvalid, airlock.Reason(string(airlock.ReasonLimit)), "")
}

// HTTPRequest is a fixture: a request type with a numeric field that the
// table does not know. (The table matches on type and field names.)
type HTTPRequest struct {
	Retries int
}

// TestLimitsUnmappedFieldFailsClosed: a numeric field missing from the
// table is reported (HasCeiling) and refuses the request at run time.
func TestLimitsUnmappedFieldFailsClosed(t *testing.T) {
	if gate.HasCeiling("HTTPRequest.Retries") {
		t.Fatal("HasCeiling(HTTPRequest.Retries) = true for a field in no row")
	}
	if got := gate.NumericFields(reflect.TypeFor[HTTPRequest]()); !reflect.DeepEqual(got, []string{"HTTPRequest.Retries"}) {
		t.Fatalf("NumericFields = %v", got)
	}
	wantLimitErr(t, mustLimits(t, "acme", nil, nil).Check(HTTPRequest{}, ""), airlock.CodeInternal, airlock.Reason(string(airlock.ReasonLimit)),
		"limits: request field HTTPRequest.Retries has no ceiling")
}

func TestNewLimits(t *testing.T) {
	tests := []struct {
		name             string
		global, override map[string]int64
		want             string
	}{
		{name: "unknown name", global: map[string]int64{"exchange_max_replies": 1}, want: `unknown limit "exchange_max_replies"`},
		{name: "negative", override: map[string]int64{gate.LimitCrawlConcurrency: -1}, want: "tenants.acme.limits.crawl_concurrency: negative"},
		{name: "above what the code does", global: map[string]int64{gate.LimitUDPMaxReply: 70000}, want: "limits.udp_max_reply: 70000 is above the most"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := gate.NewLimits("acme", tt.global, tt.override)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("NewLimits = %v, want %q", err, tt.want)
			}
		})
	}
	l := mustLimits(t, "acme", map[string]int64{gate.LimitCrawlConcurrency: 10}, map[string]int64{gate.LimitCrawlMaxPages: 7})
	for name, want := range map[string]int64{gate.LimitCrawlConcurrency: 10, gate.LimitCrawlMaxPages: 7, gate.LimitCrawlPerHost: 8, gate.LimitExchangeMaxReply: 1 << 20} {
		if got := l.Ceiling(name); got != want {
			t.Errorf("Ceiling(%s) = %d, want %d", name, got, want)
		}
	}
	if got := l.Key(gate.LimitCrawlMaxPages); got != "tenants.acme.limits.crawl_max_pages" {
		t.Errorf("Key = %q", got)
	}
}

func TestCheckCrawlIgnoreRobots(t *testing.T) {
	l := mustLimits(t, "acme", nil, nil)
	req := airlock.CrawlRequest{Seed: "http://example.com/", IgnoreRobots: true}
	wantLimitErr(t, (&gate.Tenant{Name: "acme", Limits: l}).CheckCrawl(req), airlock.CodeDenied, airlock.ReasonIgnoreRobots,
		"ignore_robots is not allowed for tenant acme (tenants.acme.allow_ignore_robots)")
	if err := (&gate.Tenant{Name: "acme", Limits: l, AllowIgnoreRobots: true}).CheckCrawl(req); err != nil {
		t.Fatalf("allowed tenant: %v", err)
	}
	// A list without max_pages asks for every URL.
	small := &gate.Tenant{Name: "acme", Limits: mustLimits(t, "acme", nil, map[string]int64{gate.LimitCrawlMaxPages: 2})}
	wantLimitErr(t, small.CheckCrawl(airlock.CrawlRequest{URLs: []string{"a", "b", "c"}}), airlock.CodeInvalid, airlock.Reason(string(airlock.ReasonLimit)),
		"urls 3 is above the ceiling 2 (tenants.acme.limits.crawl_max_pages)")
	if err := small.CheckCrawl(airlock.CrawlRequest{URLs: []string{"a", "b", "c"}, MaxPages: 2}); err != nil {
		t.Fatalf("a list with max_pages: %v", err)
	}
}

// TestCeilingsTable: names unique, fields spelled Type.Field, defaults
// within built-in bounds, every row documented.
func TestCeilingsTable(t *testing.T) {
	seen := map[string]bool{}
	fields := map[string]bool{}
	for _, c := range gate.Ceilings {
		if seen[c.Name] || c.Name == "" || c.Doc == "" {
			t.Errorf("row %q: duplicate, unnamed or undocumented", c.Name)
		}
		seen[c.Name] = true
		if c.Derived == "" && c.Default <= 0 || c.Max != 0 && c.Default > c.Max {
			t.Errorf("row %q: default %d (max %d)", c.Name, c.Default, c.Max)
		}
		for _, f := range c.Fields {
			typ, field, ok := strings.Cut(strings.SplitN(f, "@", 2)[0], ".")
			if !ok || typ == "" || field == "" || fields[f] {
				t.Errorf("row %q: field %q", c.Name, f)
			}
			fields[f] = true
		}
	}
}

// TestCeilingsDocumented: each row of the table has its line in
// docs/configuration.md and in airlock.example.yaml.
func TestCeilingsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	example, err := os.ReadFile("../../airlock.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range gate.LimitNames() {
		if !strings.Contains(string(doc), "| `limits."+name+"` |") {
			t.Errorf("docs/configuration.md has no row for limits.%s", name)
		}
		if !strings.Contains(string(example), " "+name+":") {
			t.Errorf("airlock.example.yaml does not show %s", name)
		}
	}
}
