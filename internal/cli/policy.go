package cli

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/netip"
	"strings"

	"github.com/spf13/cobra"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/egress"
)

func init() { registerCommand("policy", newPolicyCmd) }

func newPolicyCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "policy",
		Short: "Inspect the egress policy",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return usageErrorf("missing subcommand: try 'airlock policy check'")
		},
	}
	cmd.AddCommand(newPolicyCheckCmd(e))
	return cmd
}

// checkResult is one line of `airlock policy check`.
type checkResult struct {
	Target  string   `json:"target"`
	Verdict string   `json:"verdict"`
	Reason  string   `json:"reason"`
	Detail  string   `json:"detail,omitempty"`
	Addrs   []string `json:"addrs"`
}

func newPolicyCheckCmd(e *env) *cobra.Command {
	var pf policyFlags
	var laneName string
	cmd := &cobra.Command{
		Use:   "check [flags] TARGET...",
		Short: "Decide targets against the policy, without connecting",
		Long: `Decide each TARGET as a fetch or exchange would, resolving names (with --resolve
answers or DNS) but never connecting, and print one JSON line per target:
{"target","verdict":"allow"|"deny","reason","detail","addrs"}.
TARGETs are URLs for --lane http (the default) and host:port for tcp, udp and tls.
With no TARGET, or "-", targets are read from standard input, one per line.
Exit status 0 means every target was evaluated, whatever the verdicts.`,
		Example: `  airlock policy check http://169.254.169.254/latest/meta-data/ https://example.com/
  airlock policy check --resolve intranet.example=10.1.2.3 http://intranet.example/
  airlock policy check --except 10.1.2.3 --resolve intranet.example=10.1.2.3 http://intranet.example/
  airlock policy check --lane tcp --allow '*.example.com:6379' cache.example.com:6379`,
		RunE: func(cmd *cobra.Command, args []string) error {
			lane, err := egress.ParseLane(laneName)
			if err != nil {
				return usageErrorf("--lane: %v", err)
			}
			d, err := pf.dialer()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			check := func(target string) error {
				return writeJSON(e.stdout, decide(ctx, d, lane, target))
			}
			if len(args) == 0 || len(args) == 1 && args[0] == "-" {
				return eachLine(e.stdin, check)
			}
			for _, a := range args {
				if err := check(a); err != nil {
					return err
				}
			}
			return nil
		},
	}
	pf.register(cmd)
	cmd.Flags().StringVar(&laneName, "lane", "http", "lane: http (URL targets), tcp, udp or tls (host:port targets)")
	return cmd
}

func eachLine(r io.Reader, f func(string) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), egress.MaxURLLength+1024)
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if err := f(line); err != nil {
			return err
		}
	}
	return sc.Err()
}

// decide runs the whole decision for one target, DNS included, and never
// connects.
func decide(ctx context.Context, d *egress.Dialer, lane egress.Lane, raw string) checkResult {
	res := checkResult{Target: raw, Verdict: "deny", Addrs: []string{}}
	var t egress.Target
	var err error
	if lane == egress.LaneHTTP {
		t, err = egress.ParseURL(raw)
	} else {
		t, err = egress.ParseHostPort(raw)
	}
	if err == nil {
		var r egress.Resolution
		r, err = d.Resolve(ctx, lane, t, nil)
		if err == nil {
			res.Verdict, res.Reason = "allow", string(egress.ReasonAllowed)
			if r.Excepted {
				res.Reason = string(egress.ReasonException)
			}
			res.Addrs = addrStrings(r.Addrs)
			return res
		}
	}
	var e *egress.Error
	if errors.As(err, &e) {
		// The operator's own tool: the class of a refused answer, not the
		// folded reason a workload sees.
		res.Reason = string(e.Reason)
		if e.Reason == egress.ReasonInternalAddress && e.Class != "" {
			res.Reason = string(e.Class)
		}
		res.Detail = e.Detail
		if res.Detail == "" {
			res.Detail = e.Internal
		}
		if e.Addr.IsValid() {
			res.Addrs = []string{e.Addr.Addr().String()}
		}
	} else {
		res.Reason = string(airlock.ReasonError)
	}
	if res.Detail == "" {
		res.Detail = err.Error()
	}
	return res
}

func addrStrings(as []netip.Addr) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = a.String()
	}
	return out
}
