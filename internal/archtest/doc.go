// Package archtest holds no code: its tests enforce the layering of
// ARCHITECTURE.md on the whole module, so that a package added later is
// covered the moment it appears.
//
//   - Forbidden imports, from `go list -deps`: the root package imports only
//     the standard library; egress imports nothing of ours outside egress/;
//     the surfaces (internal/api, internal/mcp, internal/wasmhost) never
//     import egress, a provider, the gate or each other, nor
//     internal/extract (they format output with internal/render, which
//     imports nothing of ours but the root package); commands link no test
//     support (package testing, *test and *bench helper packages).
//   - No direct network access outside egress/: an AST check of every
//     non-test file for net.Dial*, net.Dialer, net.Resolver, net.Lookup*,
//     tls.Dial*, http.Transport, http.DefaultClient, http.Get and their
//     kin, whatever name the import is given, plus http.Client literals
//     without a Transport (they fall back to http.DefaultTransport), and
//     egress.DialInfrastructure (unguarded, for Redis) outside
//     internal/fleet.
//   - Reasons are a checked contract (reasons_test.go): every reason given
//     to an error of the vocabulary (airlock.Errorf, literals with a Reason
//     field, functions that forward a reason) is a constant of the root
//     catalogue (reasons.go) or a value computed at run time, never a
//     string literal or another package's constant; an Errorf's code is one
//     the catalogue gives its reason; every egress reason is catalogued
//     under the same string. Files not yet converted would be listed in
//     reasonDebt, which may only shrink; it is empty.
//
// The checkers are proved able to fail: the import rules on a synthetic
// package graph, the AST check on fixtures in testdata/violations (named
// *.go.txt so that they are never compiled or formatted as part of the
// module), each line annotated with the violations it must produce; the
// reasons check on a fixture package (TestReasonCheckerCatches).
package archtest
