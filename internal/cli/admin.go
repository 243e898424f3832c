package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/engine"
)

func init() {
	registerCommand("admin", newAdminCmd)
	registerCommand("token", newTokenCmd)
	registerCommand("audit", newAuditCmd)
	registerCommand("config", newConfigCmd)
}

func newAdminCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "admin",
		Short: "Revoke and unrevoke principals and tenants",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return usageErrorf("missing subcommand: revoke, unrevoke or revocations")
		},
	}
	var reason string
	revoke := &cobra.Command{
		Use:   "revoke TENANT|TENANT/INSTANCE",
		Short: "Revoke a tenant or one principal: its next broker call fails with revoked",
		Long: `Revoke a tenant (all its instances) or one principal. Calls in flight are
cancelled and the next broker call fails with revoked, in every process that shares
the data directory (within a second).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return e.withEngine(nil, func(en *engine.Engine, _ airlock.Principal) error {
				if err := en.Revoke(cmd.Context(), args[0], reason); err != nil {
					return err
				}
				return e.say(map[string]string{"revoked": args[0]}, "revoked %s\n", args[0])
			})
		},
	}
	revoke.Flags().StringVar(&reason, "reason", "", "why (kept with the revocation)")
	unrevoke := &cobra.Command{
		Use:   "unrevoke TENANT|TENANT/INSTANCE",
		Short: "Lift a revocation",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return e.withEngine(nil, func(en *engine.Engine, _ airlock.Principal) error {
				if err := en.Unrevoke(cmd.Context(), args[0]); err != nil {
					return err
				}
				return e.say(map[string]string{"unrevoked": args[0]}, "unrevoked %s\n", args[0])
			})
		},
	}
	cmd.AddCommand(revoke, unrevoke, newRevocationsCmd(e))
	return cmd
}

// newRevocationsCmd lists, exports and restores the revocation set.
// Bare `revocations` lists, as before `list` existed.
func newRevocationsCmd(e *env) *cobra.Command {
	listRun := func(cmd *cobra.Command, args []string) error {
		return e.withEngine(nil, func(en *engine.Engine, _ airlock.Principal) error {
			subs := en.Revocations()
			if e.format == formatJSON {
				return writeJSON(e.stdout, map[string][]string{"revoked": append([]string{}, subs...)})
			}
			for _, s := range subs {
				fmt.Fprintln(e.stdout, s)
			}
			return nil
		})
	}
	cmd := &cobra.Command{
		Use:   "revocations",
		Short: "List, export or restore the revocations",
		Args:  cobra.NoArgs,
		RunE:  listRun,
	}
	list := &cobra.Command{
		Use:   "list",
		Short: "List the revoked subjects (the default of `revocations`)",
		Args:  cobra.NoArgs,
		RunE:  listRun,
	}
	export := &cobra.Command{
		Use:   "export",
		Short: "Print the revocations with their reasons as JSON, the input of `restore --from`",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return e.withEngine(nil, func(en *engine.Engine, _ airlock.Principal) error {
				return writeJSONIndent(e.stdout, revocationFile{Revocations: append([]engine.Revocation{}, en.RevocationList()...)})
			})
		},
	}
	var from string
	var force bool
	restore := &cobra.Command{
		Use:   "restore [--from FILE]",
		Short: "Write the fleet's revocation set back to Redis after Redis lost it",
		Long: `Write the fleet's whole revocation set to Redis under a new epoch, which every
replica adopts: the way out when Redis lost its data and the replicas refuse every call
(unavailable, revocations_stale). The set comes from this data directory's copy (kept by
the replica that runs on it; --data-dir) or, with --from, from a file as
"revocations export" or "revocations --format json" prints it ("-": stdin).
Without --force it refuses to replace a set that is not lost.`,
		Example: `  airlock admin revocations restore --data-dir /var/lib/airlock
  airlock admin revocations restore --from revocations.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var list []engine.Revocation
			if from != "" {
				var err error
				if list, err = e.readRevocationFile(from); err != nil {
					return err
				}
			}
			return e.withEngine(nil, func(en *engine.Engine, _ airlock.Principal) error {
				src := from
				if from == "" {
					var err error
					if list, err = en.LocalRevocationCopy(cmd.Context()); err != nil {
						return err
					}
					src = "the data directory's copy"
				}
				if err := en.RestoreRevocations(cmd.Context(), list, force); err != nil {
					return err
				}
				subs := make([]string, 0, len(list))
				for _, r := range list {
					subs = append(subs, r.Subject)
				}
				if e.format == formatJSON {
					return writeJSON(e.stdout, map[string]any{"restored": subs, "from": src})
				}
				fmt.Fprintf(e.stdout, "restored %d revocations from %s under a new epoch; the replicas take calls again\n", len(subs), src)
				for _, s := range subs {
					fmt.Fprintln(e.stdout, s)
				}
				return nil
			})
		},
	}
	restore.Flags().StringVar(&from, "from", "", "a file from `revocations export` or `revocations --format json` (\"-\": stdin) instead of the data directory's copy")
	restore.Flags().BoolVar(&force, "force", false, "replace the set even when it is not lost")
	cmd.AddCommand(list, export, restore)
	return cmd
}

// revocationFile is what `revocations export` prints; `restore --from`
// also reads the {"revoked": [...]} of `revocations --format json`.
type revocationFile struct {
	Revocations []engine.Revocation `json:"revocations"`
	Revoked     []string            `json:"revoked,omitempty"`
}

// maxRevocationFile bounds what restore --from reads.
const maxRevocationFile = 64 << 20

func (e *env) readRevocationFile(path string) ([]engine.Revocation, error) {
	var r io.Reader = e.stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, airlock.Errorf(airlock.CodeNotFound, airlock.ReasonFile, "revocations restore: %v", err)
		}
		defer f.Close()
		r = f
	}
	b, err := io.ReadAll(io.LimitReader(r, maxRevocationFile+1))
	if err != nil {
		return nil, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonFile, "revocations restore: read %s: %v", path, err)
	}
	if len(b) > maxRevocationFile {
		return nil, airlock.Errorf(airlock.CodeTooLarge, airlock.ReasonFile, "revocations restore: %s is larger than %d bytes", path, maxRevocationFile)
	}
	var f revocationFile
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonFile, "revocations restore: %s: want the JSON of `revocations export` or `revocations --format json`: %v", path, err)
	}
	if f.Revocations == nil && f.Revoked == nil {
		return nil, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonFile, "revocations restore: %s has neither \"revocations\" nor \"revoked\"", path)
	}
	list := f.Revocations
	for _, s := range f.Revoked {
		list = append(list, engine.Revocation{Subject: s})
	}
	return list, nil
}

// say prints v as JSON with --format json, else the formatted text.
func (e *env) say(v any, format string, args ...any) error {
	if e.format == formatJSON {
		return writeJSON(e.stdout, v)
	}
	_, err := fmt.Fprintf(e.stdout, format, args...)
	return err
}

func newTokenCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Manage API tokens",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return usageErrorf("missing subcommand: create, list, revoke, hash or generate")
		},
	}
	var tenant, label string
	create := &cobra.Command{
		Use:   "create --tenant T",
		Short: "Create an API token for a tenant; it is printed once and only its hash is kept",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if tenant == "" {
				return usageErrorf("token create: --tenant is required")
			}
			return e.withEngine(nil, func(en *engine.Engine, _ airlock.Principal) error {
				tok, err := en.CreateToken(cmd.Context(), tenant, label)
				if err != nil {
					return err
				}
				if e.format == formatJSON {
					return writeJSON(e.stdout, map[string]string{"tenant": tenant, "token": tok})
				}
				_, err = fmt.Fprintf(e.stdout, "%s\n", tok)
				fmt.Fprintf(e.stderr, "token for tenant %s created; it is shown only this once\n", tenant)
				return err
			})
		},
	}
	create.Flags().StringVar(&tenant, "tenant", "", "tenant the token authenticates as")
	create.Flags().StringVar(&label, "label", "", "a note kept with the token's hash")
	hash := &cobra.Command{
		Use:   "hash [TOKEN]",
		Short: "Print the sha256:<hex> hash of a token (from the argument or stdin) for tenants.*.tokens or admin_tokens",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var tok string
			if len(args) == 1 {
				tok = args[0]
			} else {
				b, err := io.ReadAll(io.LimitReader(e.stdin, 4096))
				if err != nil {
					return err
				}
				tok = strings.TrimSpace(string(b))
			}
			if tok == "" {
				return usageErrorf("token hash: no token given (pass it as the argument or on stdin)")
			}
			_, err := fmt.Fprintln(e.stdout, engine.HashToken(tok))
			return err
		},
	}
	generate := &cobra.Command{
		Use:   "generate",
		Short: "Make a random token without storing it; prints the token and the hash to put in the config (e.g. admin_tokens)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			tok := engine.NewToken()
			if e.format == formatJSON {
				return writeJSON(e.stdout, map[string]string{"token": tok, "hash": engine.HashToken(tok)})
			}
			_, err := fmt.Fprintf(e.stdout, "token: %s\nhash:  %s\n", tok, engine.HashToken(tok))
			return err
		},
	}
	var listTenant string
	list := &cobra.Command{
		Use:   "list [--tenant T]",
		Short: "List the API tokens made by token create or serve's development mode (hashes, never the tokens)",
		Long: `List the API tokens kept in the data directory: the id to revoke each
with (the first hex digits of its hash), the tenant, when it was made and its
label. Tokens listed in the configuration (tenants.*.tokens) are not stored
and not listed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return e.withEngine(nil, func(en *engine.Engine, _ airlock.Principal) error {
				ts, err := en.ListTokens(cmd.Context(), listTenant)
				if err != nil {
					return err
				}
				if e.format == formatJSON {
					for _, t := range ts {
						if err := writeJSON(e.stdout, t); err != nil {
							return err
						}
					}
					return nil
				}
				if len(ts) == 0 {
					fmt.Fprintln(e.stderr, "no stored API tokens")
					return nil
				}
				tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintf(tw, "ID\tTENANT\tCREATED\tLABEL\n")
				for _, t := range ts {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", t.ID(), t.Tenant, t.Created.Local().Format("2006-01-02 15:04:05"), t.Label)
				}
				return tw.Flush()
			})
		},
	}
	list.Flags().StringVar(&listTenant, "tenant", "", "only this tenant's tokens")
	revoke := &cobra.Command{
		Use:   "revoke ID...",
		Short: "Revoke stored API tokens by id (from token list), hash, or the token itself",
		Long: `Revoke stored API tokens: each is deleted from the data directory, and
its next call is denied by every airlock process sharing it (a running serve
included). Name a token by the id token list shows, by its full hash, or by
the token itself.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return e.withEngine(nil, func(en *engine.Engine, _ airlock.Principal) error {
				for _, id := range args {
					t, err := en.RevokeToken(cmd.Context(), id)
					if err != nil {
						return err
					}
					if err := e.say(t, "revoked %s (tenant %s, %s)\n", t.ID(), t.Tenant, t.Label); err != nil {
						return err
					}
				}
				return nil
			})
		},
	}
	cmd.AddCommand(create, list, revoke, hash, generate)
	return cmd
}

// auditFlags are the filters of audit query and tail.
type auditFlags struct {
	since                              time.Duration
	principal, outcome, broker, reason string
	limit                              int
}

func (a *auditFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.DurationVar(&a.since, "since", 0, "only records newer than this (e.g. 1h, 30m)")
	f.StringVar(&a.principal, "principal", "", "tenant or tenant/instance")
	f.StringVar(&a.outcome, "outcome", "", "allow, deny or error (anything else is refused)")
	f.StringVar(&a.broker, "broker", "", "http, tcp, udp, tls, sign, route, admin, ...")
	f.StringVar(&a.reason, "reason", "", "a reason such as loopback or capability")
}

func (a *auditFlags) query() airlock.AuditQuery {
	q := airlock.AuditQuery{Principal: a.principal, Outcome: a.outcome, Broker: a.broker, Reason: a.reason, Limit: a.limit}
	if a.since > 0 {
		q.Since = time.Now().Add(-a.since)
	}
	return q
}

func (e *env) printRecords(recs []airlock.AuditRecord) error {
	if e.format == formatJSON {
		for _, r := range recs {
			if err := writeJSON(e.stdout, r); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	for _, r := range recs {
		who := r.Tenant
		if r.Instance != "" {
			who += "/" + r.Instance
		}
		detail := r.Detail
		if len(detail) > 120 {
			detail = detail[:120] + "…"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Time.Local().Format("2006-01-02 15:04:05.000"), r.ID, who, r.Broker, r.Outcome, r.Reason, r.Target, strings.ReplaceAll(detail, "\n", " "))
	}
	return tw.Flush()
}

func newAuditCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Read the audit log of the data directory",
		Args:  cobra.NoArgs,
		RunE:  func(*cobra.Command, []string) error { return usageErrorf("missing subcommand: tail, stats or query") },
	}
	var qf auditFlags
	query := &cobra.Command{
		Use:   "query",
		Short: "Print audit records, newest first",
		Example: `  airlock audit query --outcome deny --since 1h
  airlock audit query --principal acme --format json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return e.withEngine(nil, func(en *engine.Engine, _ airlock.Principal) error {
				recs, err := en.AuditQuery(cmd.Context(), qf.query())
				if err != nil {
					return err
				}
				return e.printRecords(recs)
			})
		},
	}
	qf.register(query)
	query.Flags().IntVar(&qf.limit, "limit", 100, "at most this many records (max 10000)")

	var tf auditFlags
	var follow bool
	tail := &cobra.Command{
		Use:   "tail",
		Short: "Print the latest audit records, oldest first; --follow keeps printing new ones",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return e.withEngine(nil, func(en *engine.Engine, _ airlock.Principal) error {
				return e.tail(cmd.Context(), en, tf.query(), follow)
			})
		},
	}
	tf.register(tail)
	tail.Flags().IntVarP(&tf.limit, "lines", "n", 20, "how many records to start with")
	tail.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new records until interrupted")

	var since time.Duration
	stats := &cobra.Command{
		Use:   "stats",
		Short: "Count decisions by broker, outcome and reason",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return e.withEngine(nil, func(en *engine.Engine, _ airlock.Principal) error {
				var from time.Time
				if since > 0 {
					from = time.Now().Add(-since)
				}
				st, err := en.AuditStats(cmd.Context(), from, "")
				if err != nil {
					return err
				}
				if e.format == formatJSON {
					return writeJSON(e.stdout, map[string]any{"stats": append([]airlock.AuditStat{}, st...)})
				}
				tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "BROKER\tOUTCOME\tREASON\tCOUNT")
				for _, s := range st {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%d\n", s.Broker, s.Outcome, s.Reason, s.Count)
				}
				return tw.Flush()
			})
		},
	}
	stats.Flags().DurationVar(&since, "since", 0, "only decisions newer than this (e.g. 24h)")
	cmd.AddCommand(query, tail, stats)
	return cmd
}

func (e *env) tail(ctx context.Context, en *engine.Engine, q airlock.AuditQuery, follow bool) error {
	recs, err := en.AuditQuery(ctx, q)
	if err != nil {
		return err
	}
	for i, j := 0, len(recs)-1; i < j; i, j = i+1, j-1 {
		recs[i], recs[j] = recs[j], recs[i]
	}
	if err := e.printRecords(recs); err != nil {
		return err
	}
	if !follow {
		return nil
	}
	last := ""
	if len(recs) > 0 {
		last = recs[len(recs)-1].ID
	}
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		q.Limit = 1000
		q.BeforeID = ""
		newer, err := en.AuditQuery(ctx, q)
		if err != nil {
			return err
		}
		var fresh []airlock.AuditRecord
		for _, r := range newer {
			if r.ID <= last {
				break
			}
			fresh = append(fresh, r)
		}
		for i, j := 0, len(fresh)-1; i < j; i, j = i+1, j-1 {
			fresh[i], fresh[j] = fresh[j], fresh[i]
		}
		if len(fresh) > 0 {
			last = fresh[len(fresh)-1].ID
			if err := e.printRecords(fresh); err != nil {
				return err
			}
		}
	}
}

func newConfigCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Check the configuration",
		Args:  cobra.NoArgs,
		RunE:  func(*cobra.Command, []string) error { return usageErrorf("missing subcommand: check") },
	}
	check := &cobra.Command{
		Use:   "check",
		Short: "Validate the configuration (secrets and credentials read, as a start would) and print the effective result (secrets shown by source, never by value)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, path, err := e.config(nil)
			if err != nil {
				return err
			}
			if err := engine.Validate(cfg.Config, e.engineOptions(cfg.Config)...); err != nil {
				return err
			}
			return writeJSONIndent(e.stdout, describeConfig(effectiveConfig(cfg), path))
		},
	}
	cmd.AddCommand(check)
	return cmd
}
