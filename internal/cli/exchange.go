package cli

import (
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/engine"
)

func init() { registerCommand("exchange", newExchangeCmd) }

// maxExchangeRequest bounds what exchange reads from standard input.
const maxExchangeRequest = 1 << 20

func newExchangeCmd(e *env) *cobra.Command {
	var pf policyFlags
	var timeout, idle time.Duration
	var maxReply int64
	cmd := &cobra.Command{
		Use:   "exchange tcp|udp|tls HOST:PORT",
		Short: "Send standard input to HOST:PORT under the policy and print the reply",
		Long: `Read the request bytes from standard input (at most 1 MiB), send them to HOST:PORT
over a guarded connection, and write the reply to standard output.
tcp and tls read the reply until EOF, or until the peer has been idle 500 ms after
its first byte; tls verifies the peer against the system roots with SNI = HOST.
udp sends one datagram and prints one reply. Replies past the cap are an error.
The call is audited in the data directory like any other broker call.`,
		Example: `  printf 'PING\r\n' | airlock exchange tcp --except 127.0.0.1 127.0.0.1:6379
  printf 'GET / HTTP/1.1\r\nHost: example.com\r\nConnection: close\r\n\r\n' | airlock exchange tls example.com:443`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			lane := args[0]
			if lane != airlock.LaneTCP && lane != airlock.LaneUDP && lane != airlock.LaneTLS {
				return usageErrorf("exchange: lane must be tcp, udp or tls, not %q", lane)
			}
			req, err := io.ReadAll(io.LimitReader(e.stdin, maxExchangeRequest+1))
			if err != nil {
				return err
			}
			if len(req) > maxExchangeRequest {
				return usageErrorf("exchange: request on standard input is larger than 1 MiB")
			}
			return e.withEngine(&pf, func(en *engine.Engine, p airlock.Principal) error {
				resp, err := en.Exchange(cmd.Context(), p, airlock.ExchangeRequest{Lane: lane, Target: args[1], Data: req, Timeout: timeout, Idle: idle, MaxReply: maxReply})
				if err != nil {
					return err
				}
				_, err = e.stdout.Write(resp.Data)
				return err
			})
		},
	}
	pf.register(cmd)
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "give up when no reply byte arrives within this time (default 10s tcp/tls, 5s udp)")
	cmd.Flags().DurationVar(&idle, "idle", 0, "tcp/tls: stop reading when the peer is idle this long after its first byte (default 500ms)")
	cmd.Flags().Int64Var(&maxReply, "max-reply", 0, "reply cap in bytes (default 1 MB tcp/tls, 65535 udp)")
	return cmd
}
