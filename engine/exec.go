package engine

import (
	"context"
	"net"
	"strings"
	"sync"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/gate"
)

// Brokers of airlock exec's audit records.
const (
	// BrokerExec is the broker of an exec session's own record: one per
	// command, its target the command line (cut to MaxExecTarget bytes).
	BrokerExec = "exec"
	// BrokerProxy is the broker of each proxy connection or request (a
	// CONNECT tunnel, a SOCKS5 connection, an absolute-form request) a
	// session's command makes, as for `airlock proxy`.
	BrokerProxy = "proxy"
)

// MaxExecTarget caps the command line an exec session's record keeps.
const MaxExecTarget = 512

// ExecSession is one command run by `airlock exec`: a principal session
// (one audited decision, broker exec, ended by End) whose forward proxy
// (Serve) is the command's only way out. The proxy is internal/proxy's
// server, as `airlock proxy` runs it: the HTTP forward proxy, CONNECT
// tunnels with their first-bytes checks (the ClientHello's SNI), and
// SOCKS5, each connection a broker call of its own (broker proxy,
// capability http) under the session's principal: not revoked, within
// its tenant's rate, the target passing the tenant's policy and the floor,
// decided and audited. A revocation cuts the open tunnels and cancels the
// session's context.
//
// The proxy asks for no credentials: whoever can reach its listener is the
// session's command (the sandbox's loopback). Safe for concurrent use.
type ExecSession struct {
	e    *Engine
	call *gate.Call

	mu    sync.Mutex
	srv   *ProxyServer
	ended bool
}

// BeginExec starts an exec session for principal p (capability http) whose
// record's target is the command line. A refusal (unknown tenant,
// revoked, rate limited, capability) is recorded and returned as an
// *airlock.Error.
func (e *Engine) BeginExec(ctx context.Context, p airlock.Principal, cmdline string) (*ExecSession, error) {
	if len(cmdline) > MaxExecTarget {
		cmdline = strings.ToValidUTF8(cmdline[:MaxExecTarget], "") + "…"
	}
	call, err := e.begin(ctx, p, airlock.CapabilityHTTP, BrokerExec, cmdline)
	if err != nil {
		return nil, err
	}
	return &ExecSession{e: e, call: call}, nil
}

// ID returns the session's decision id.
func (s *ExecSession) ID() string { return s.call.ID }

// Context is cancelled when the principal is revoked or the engine shuts
// down: the command should then be stopped.
func (s *ExecSession) Context() context.Context { return s.call.Ctx }

// Serve serves the session's proxy on l (HTTP or SOCKS5 by the first
// byte) until End, with opts (plain ports, tunnel caps). Each connection is
// the session's principal.
func (s *ExecSession) Serve(l net.Listener, opts ProxyOptions) error {
	opts.Development, opts.Clients = false, nil
	srv, err := s.e.NewProxy(opts)
	if err != nil {
		return err
	}
	s.mu.Lock()
	if s.ended || s.srv != nil {
		s.mu.Unlock()
		srv.Close()
		return airlock.Errorf(airlock.CodeInvalid, airlock.ReasonConfig, "exec: the session's proxy is ended or already served")
	}
	s.srv = srv
	s.mu.Unlock()
	return srv.ServeAs(l, s.call.Principal)
}

// End closes the proxy (open tunnels end) and records the session's
// decision with err (nil: the command ran; its exit code goes in note).
func (s *ExecSession) End(err error, note string) error {
	s.mu.Lock()
	s.ended = true
	srv := s.srv
	s.mu.Unlock()
	if srv != nil {
		srv.Close()
	}
	s.call.Note = note
	return s.call.End(err, 0, 0)
}
