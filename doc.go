// Package airlock is the domain vocabulary of Airlock, a gateway that gives
// sandboxed workloads (AI agents, WebAssembly guests, untrusted scripts) the
// web without ever handing them the network: the workload asks, the engine
// fetches, crawls, searches, drives a browser or exchanges bytes with a host
// on its behalf, under one policy, and hands back structured data.
//
// This root package owns the words every other package shares and nothing
// else: the capability names a profile grants ([Capability]) and the one
// error vocabulary of every surface ([Code], [Error], [CodeOf], [ExitCode],
// [Public]). It imports only the standard library, so any package, and any
// Go program embedding Airlock, can use it without pulling in the engine.
//
// The network itself lives in package egress, the only package allowed to
// dial, resolve or build an HTTP transport.
package airlock
