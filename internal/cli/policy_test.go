package cli

import (
	"context"
	"encoding/json"
	"net"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func parseCheckLines(t *testing.T, out string) []checkResult {
	t.Helper()
	var rs []checkResult
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var r checkResult
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		rs = append(rs, r)
	}
	return rs
}

func TestPolicyCheck(t *testing.T) {
	t.Parallel()
	// Every name is answered by --resolve: no DNS leaves the machine.
	base := []string{"policy", "check",
		"--resolve", "internal.example=10.0.0.5",
		"--resolve", "public.example=93.184.215.14",
		"--resolve", "mixed.example=93.184.215.14,127.0.0.1",
		"--resolve", "localhost.example=127.0.0.1,::1",
	}
	tests := []struct {
		name   string
		flags  []string
		target string
		want   checkResult
	}{
		{"metadata", nil, "http://169.254.169.254/latest/meta-data/", checkResult{Verdict: "deny", Reason: "metadata", Addrs: []string{"169.254.169.254"}}},
		{"internal name", nil, "http://internal.example/", checkResult{Verdict: "deny", Reason: "private", Addrs: []string{"10.0.0.5"}}},
		{"public name", nil, "https://public.example/", checkResult{Verdict: "allow", Reason: "allowed", Addrs: []string{"93.184.215.14"}}},
		{"mixed answers", nil, "http://mixed.example/", checkResult{Verdict: "deny", Reason: "dns_mixed", Addrs: []string{"127.0.0.1"}}},
		{"localhost half excepted", []string{"--except", "127.0.0.1"}, "http://localhost.example/", checkResult{Verdict: "deny", Reason: "dns_mixed", Addrs: []string{"::1"}}},
		{"localhost excepted", []string{"--except", "127.0.0.1", "--except", "::1"}, "http://localhost.example/", checkResult{Verdict: "allow", Reason: "exception", Addrs: []string{"127.0.0.1", "::1"}}},
		{"exception", []string{"--except", "10.0.0.0/8"}, "http://internal.example/", checkResult{Verdict: "allow", Reason: "exception", Addrs: []string{"10.0.0.5"}}},
		{"metadata never excepted", []string{"--except", "169.254.0.0/16"}, "http://169.254.169.254/", checkResult{Verdict: "deny", Reason: "metadata", Addrs: []string{"169.254.169.254"}}},
		{"octal", nil, "http://0177.0.0.1/", checkResult{Verdict: "deny", Reason: "numeric_host", Addrs: []string{}}},
		{"userinfo", nil, "http://public.example@127.0.0.1/", checkResult{Verdict: "deny", Reason: "userinfo", Addrs: []string{}}},
		{"mapped", nil, "http://[::ffff:127.0.0.1]/", checkResult{Verdict: "deny", Reason: "ipv4_embedded", Addrs: []string{"::ffff:127.0.0.1"}}},
		{"mapped unwrapped", []string{"--unwrap-embedded-ipv4"}, "http://[::ffff:127.0.0.1]/", checkResult{Verdict: "deny", Reason: "loopback", Addrs: []string{"::ffff:127.0.0.1"}}},
		{"deny list", []string{"--deny", "*.example"}, "https://public.example/", checkResult{Verdict: "deny", Reason: "deny_list", Addrs: []string{}}},
		{"allow list", []string{"--allow", "other.example"}, "https://public.example/", checkResult{Verdict: "deny", Reason: "not_allowed", Addrs: []string{}}},
		{"scheme", nil, "file:///etc/passwd", checkResult{Verdict: "deny", Reason: "scheme", Addrs: []string{}}},
		{"tcp lane", []string{"--lane", "tcp"}, "public.example:6379", checkResult{Verdict: "allow", Reason: "allowed", Addrs: []string{"93.184.215.14"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			args := append(append(append([]string(nil), base...), tt.flags...), tt.target)
			r := invoke(t, context.Background(), "", args)
			if r.code != 0 {
				t.Fatalf("exit %d, stderr %s", r.code, r.stderr)
			}
			got := parseCheckLines(t, r.stdout)
			if len(got) != 1 {
				t.Fatalf("got %d lines, want 1", len(got))
			}
			tt.want.Target = tt.target
			if diff := cmp.Diff(tt.want, got[0], cmp.FilterPath(func(p cmp.Path) bool { return p.String() == "Detail" }, cmp.Ignore())); diff != "" {
				t.Errorf("policy check %s (-want +got):\n%s", tt.target, diff)
			}
		})
	}
}

func TestPolicyCheckStdinAndUsage(t *testing.T) {
	t.Parallel()
	r := invoke(t, context.Background(), "# comment\nhttp://10.0.0.1/\n\nhttp://[::1]/\n", []string{"policy", "check", "-"})
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if got := parseCheckLines(t, r.stdout); len(got) != 2 || got[0].Reason != "private" || got[1].Reason != "loopback" {
		t.Errorf("got %+v", got)
	}
	for _, args := range [][]string{
		{"policy", "check", "--lane", "smtp", "x:25"},
		{"policy", "check", "--allow", "10.0.0.0/99", "http://x/"},
		{"policy", "check", "--resolve", "nohost", "http://x/"},
		{"policy", "check", "--except", "example.com", "http://x/"},
		{"policy"},
	} {
		if r := invoke(t, context.Background(), "", args); r.code != 2 {
			t.Errorf("%v: exit %d, want 2 (stderr %s)", args, r.code, r.stderr)
		}
	}
}

func TestExchangeCLI(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		buf := make([]byte, 64)
		n, _ := c.Read(buf)
		c.Write([]byte(strings.ToUpper(string(buf[:n]))))
	}()
	addr := ln.Addr().String()
	dd := t.TempDir()
	r := invoke(t, context.Background(), "ping", []string{"exchange", "--data-dir", dd, "tcp", "--except", "127.0.0.1", "--idle", "50ms", addr})
	if r.code != 0 || r.stdout != "PING" {
		t.Errorf("exchange: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	// Without the exception loopback is the floor: exit 3, nothing sent.
	r = invoke(t, context.Background(), "ping", []string{"exchange", "--data-dir", dd, "tcp", addr})
	if r.code != 3 || !strings.Contains(r.stderr, "loopback") {
		t.Errorf("denied exchange: exit %d stderr %q", r.code, r.stderr)
	}
	r = invoke(t, context.Background(), "ping", []string{"exchange", "--data-dir", dd, "http", addr})
	if r.code != 2 {
		t.Errorf("bad lane: exit %d", r.code)
	}
}
