package cli

import (
	"bufio"
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestPolicyCheckBypassCorpus runs the SSRF bypass corpus through the
// command itself: `airlock policy check` must deny every internal target and
// allow every public one. Names are answered with --resolve: no DNS is sent.
func TestPolicyCheckBypassCorpus(t *testing.T) {
	t.Parallel()
	f, err := os.Open("../../egress/testdata/ssrf-bypass-corpus.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	type payload struct{ want, target string }
	groups := map[string][]payload{} // payloads by their --resolve answers
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Split(line, "\t")
		if len(fields) < 2 {
			t.Fatalf("corpus line %q", line)
		}
		target := fields[1]
		if strings.HasPrefix(target, `"`) {
			if target, err = strconv.Unquote(target); err != nil {
				t.Fatalf("corpus line %q: %v", line, err)
			}
		}
		if strings.ContainsAny(target, "\n\r") || strings.HasPrefix(target, "#") {
			continue // stdin is line-based and skips # comments; egress's own corpus test covers these
		}
		var res []string
		for _, extra := range fields[2:] {
			if kv, ok := strings.CutPrefix(extra, "resolve="); ok {
				res = append(res, kv)
			}
		}
		key := strings.Join(res, "\t")
		groups[key] = append(groups[key], payload{fields[0], target})
	}
	total, allowed, denied := 0, 0, 0
	for key, payloads := range groups {
		args := []string{"policy", "check"}
		for _, kv := range strings.Split(key, "\t") {
			if kv != "" {
				args = append(args, "--resolve", kv)
			}
		}
		// Any other name is refused offline rather than resolved for real.
		args = append(args, "--dns-server", "127.0.0.1:9", "-")
		var stdin strings.Builder
		for _, p := range payloads {
			stdin.WriteString(p.target + "\n")
		}
		r := invoke(t, context.Background(), stdin.String(), args)
		if r.code != 0 {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
		got := parseCheckLines(t, r.stdout)
		if len(got) != len(payloads) {
			t.Fatalf("%d results for %d payloads", len(got), len(payloads))
		}
		for i, p := range payloads {
			total++
			if got[i].Verdict != p.want {
				t.Errorf("%q: verdict %s (%s %s), want %s", p.target, got[i].Verdict, got[i].Reason, got[i].Detail, p.want)
			}
			if got[i].Verdict == "allow" {
				allowed++
			} else {
				denied++
			}
		}
	}
	t.Logf("%d payloads through airlock policy check: %d denied, %d allowed", total, denied, allowed)
}
