package crawl

import (
	"context"
	"strings"
	"testing"

	"github.com/airlockhq/airlock"
)

// TestCheckRobots: a single page against its origin's robots.txt, as a
// crawl decides it, with the verdict cached per partition and origin (not
// when the policy refused the robots.txt request: that is the caller's).
func TestCheckRobots(t *testing.T) {
	s := newSite(t, map[string]resp{
		"/robots.txt": {status: 200, body: "User-agent: airlock\nDisallow: /no\n\nUser-agent: *\nDisallow: /\n"},
	})
	d := newDoer(s)
	defer d.close()
	ctx := context.Background()
	cache := NewRobotsCache(0)
	check := func(part, path string) error {
		return CheckRobots(ctx, d, cache, RobotsCheck{Target: s.URL(path), Partition: part, Header: map[string][]string{"User-Agent": {"airlock/test"}}})
	}
	if err := check("a", "/yes"); err != nil {
		t.Errorf("/yes: %v", err)
	}
	err := check("a", "/no/x")
	if airlock.CodeOf(err) != airlock.CodeDenied || airlock.ReasonOf(err) != airlock.ReasonRobots || !strings.Contains(err.Error(), "robots.txt") {
		t.Errorf("/no/x: %v, want denied (robots)", err)
	}
	if n := s.count("/robots.txt"); n != 1 {
		t.Errorf("robots.txt fetched %d times for one partition, want 1", n)
	}
	if err := check("b", "/no/x"); airlock.ReasonOf(err) != airlock.ReasonRobots || s.count("/robots.txt") != 2 {
		t.Errorf("partition b: %v after %d robots.txt requests, want its own request", err, s.count("/robots.txt"))
	}
	if h := s.hits(); len(h) == 0 || h[0].ua != "airlock/test" {
		t.Errorf("robots.txt requests %+v, want the caller's User-Agent", h)
	}

	// Refused by policy: allowed here (the fetch is refused with the
	// policy's reason), and asked again next time.
	d.fail = func(string) error { return airlock.Errorf(airlock.CodeDenied, "private", "refused") }
	for range 2 {
		if err := check("c", "/no/x"); err != nil {
			t.Errorf("policy-refused robots.txt: %v, want no robots verdict", err)
		}
	}
	if n := d.calls.Load(); n != 4 {
		t.Errorf("%d requests, want 4 (a policy refusal is not cached)", n)
	}
	// Unreachable: refused, saying why.
	d.fail = func(string) error { return airlock.Errorf(airlock.CodeUpstream, "connect", "connection refused") }
	if err := check("d", "/yes"); airlock.ReasonOf(err) != airlock.ReasonRobots || !strings.Contains(err.Error(), "unreachable") {
		t.Errorf("unreachable robots.txt: %v, want denied (robots) saying unreachable", err)
	}
}
