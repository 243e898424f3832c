package cli

import (
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/engine"
)

// maxStdinBody is the most --data-stdin reads: the default of
// limits.http_body. A longer body is refused, never cut.
const maxStdinBody = 10 << 20

func init() {
	registerCommand("http", newHTTPCmd)
	registerCommand("sign", newSignCmd)
	registerCommand("route", newRouteCmd)
}

func parseHeaders(hs []string) (map[string][]string, error) {
	h := map[string][]string{}
	for _, kv := range hs {
		k, v, ok := strings.Cut(kv, ":")
		if !ok || strings.TrimSpace(k) == "" {
			return nil, usageErrorf("-H %q: want 'Name: value'", kv)
		}
		k = http.CanonicalHeaderKey(strings.TrimSpace(k))
		h[k] = append(h[k], strings.TrimSpace(v))
	}
	return h, nil
}

func (e *env) printHTTP(resp *airlock.HTTPResponse, include bool) error {
	if e.format == formatJSON {
		return writeJSON(e.stdout, resp)
	}
	if include {
		fmt.Fprintf(e.stdout, "%s %d %s\n", resp.Proto, resp.Status, http.StatusText(resp.Status))
		keys := make([]string, 0, len(resp.Header))
		for k := range resp.Header {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			for _, v := range resp.Header[k] {
				fmt.Fprintf(e.stdout, "%s: %s\n", k, v)
			}
		}
		fmt.Fprintln(e.stdout)
	}
	_, err := e.stdout.Write(resp.Body)
	return err
}

func newHTTPCmd(e *env) *cobra.Command {
	var pf policyFlags
	var method, data, proxy, profile string
	var headers []string
	var include, dataStdin bool
	var maxRedirects int
	cmd := &cobra.Command{
		Use:   "http [flags] URL",
		Short: "Make an HTTP request under the policy and print the body",
		Long: `Make one HTTP request through the engine: the URL and every redirect hop are
checked against the policy, names are resolved once and pinned, bodies are decoded
and capped. The body goes to standard output (--include adds the status line and
headers; --format json prints the whole response). The call is audited.`,
		Example: `  airlock http https://example.com/
  airlock http -X POST -H 'Content-Type: application/json' -d '{"q":1}' https://api.example.com/v1
  airlock http --except 127.0.0.1 http://127.0.0.1:8080/healthz`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			h, err := parseHeaders(headers)
			if err != nil {
				return err
			}
			req := airlock.HTTPRequest{Method: strings.ToUpper(method), URL: args[0], Header: h, Proxy: proxy, TLSProfile: profile}
			if data != "" {
				req.Body = []byte(data)
			}
			if dataStdin {
				b, err := io.ReadAll(io.LimitReader(e.stdin, maxStdinBody+1))
				if err != nil {
					return err
				}
				if len(b) > maxStdinBody {
					return usageErrorf("http: request body on standard input is larger than 10 MiB")
				}
				req.Body = b
			}
			if cmd.Flags().Changed("max-redirects") {
				req.MaxRedirects = &maxRedirects
			}
			return e.withEngine(&pf, func(en *engine.Engine, p airlock.Principal) error {
				resp, err := en.HTTP(cmd.Context(), p, req)
				if err != nil {
					return err
				}
				return e.printHTTP(resp, include)
			})
		},
	}
	pf.register(cmd)
	f := cmd.Flags()
	f.StringVarP(&method, "request", "X", "GET", "method")
	f.StringArrayVarP(&headers, "header", "H", nil, "request header 'Name: value' (repeatable)")
	f.StringVarP(&data, "data", "d", "", "request body")
	f.BoolVar(&dataStdin, "data-stdin", false, "read the request body from standard input")
	f.BoolVarP(&include, "include", "i", false, "print the status line and headers before the body")
	f.IntVar(&maxRedirects, "max-redirects", 5, "redirects to follow (0: none)")
	f.StringVar(&proxy, "proxy", "", "upstream proxy name from the configuration's egress.proxies")
	f.StringVar(&profile, "tls-profile", "", "TLS handshake profile: chrome (default) or go")
	return cmd
}

func newSignCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "sign NAME",
		Short: "HMAC-SHA256 standard input with the tenant's secret NAME; print the hex digest",
		Long: `Sign standard input with a named secret of the tenant. The secret never leaves the
engine: only the HMAC-SHA256 comes back, as hex. Secrets are configured per tenant
(tenants.NAME.secrets.SECRET: {env: VAR} or {file: PATH}).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			data, err := io.ReadAll(io.LimitReader(e.stdin, 10<<20))
			if err != nil {
				return err
			}
			return e.withEngine(nil, func(en *engine.Engine, p airlock.Principal) error {
				sum, id, err := en.Sign(cmd.Context(), p, args[0], data)
				if err != nil {
					return err
				}
				if e.format == formatJSON {
					return writeJSON(e.stdout, map[string]string{"signature": hex.EncodeToString(sum), "algorithm": "hmac-sha256", "decision_id": id})
				}
				_, err = fmt.Fprintln(e.stdout, hex.EncodeToString(sum))
				return err
			})
		},
	}
}

func newRouteCmd(e *env) *cobra.Command {
	var headers []string
	var include, dataStdin bool
	var data string
	cmd := &cobra.Command{
		Use:   "route NAME METHOD PATH",
		Short: "Call a credentialed route: the engine adds the credential",
		Long: `Call a route declared in the configuration (routes.NAME: base_url, header,
value_env, methods, path_prefix). The engine adds the credential header, checks the
route's host against the policy like any request, and redacts any echo of the
credential in the response.`,
		Example: `  airlock route llm POST /v1/chat/completions --data-stdin < request.json`,
		Args:    cobra.ExactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			h, err := parseHeaders(headers)
			if err != nil {
				return err
			}
			req := airlock.RouteRequest{Name: args[0], Method: args[1], Path: args[2], Header: h}
			if data != "" {
				req.Body = []byte(data)
			}
			if dataStdin {
				if req.Body, err = io.ReadAll(io.LimitReader(e.stdin, 10<<20)); err != nil {
					return err
				}
			}
			return e.withEngine(nil, func(en *engine.Engine, p airlock.Principal) error {
				resp, err := en.Route(cmd.Context(), p, req)
				if err != nil {
					return err
				}
				return e.printHTTP(resp, include)
			})
		},
	}
	f := cmd.Flags()
	f.StringArrayVarP(&headers, "header", "H", nil, "request header 'Name: value' (repeatable)")
	f.StringVarP(&data, "data", "d", "", "request body")
	f.BoolVar(&dataStdin, "data-stdin", false, "read the request body from standard input")
	f.BoolVarP(&include, "include", "i", false, "print the status line and headers before the body")
	return cmd
}
