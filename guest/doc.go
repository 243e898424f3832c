// Package guest is the Go SDK for Airlock WebAssembly guests: programs
// built with GOOS=wasip1 GOARCH=wasm and run by `airlock run` or
// `airlock serve-guest`. It wraps the imports of the module "airlock"
// (docs/wasm-abi.md) in plain functions: Fetch, GetMany, HTTP, TCP, UDP,
// TLS, Sign, Route. The guest never opens a socket; the engine does the
// work under the principal's policy and returns the result.
//
// A function whose import the profile does not grant is not linked at all:
// a guest that calls Fetch does not even instantiate under the compute
// profile. Keep calls you may not be granted in separate programs.
//
// Errors are *airlock.Error values read from last_error, in the engine's
// one vocabulary: inspect Code (denied, timeout, upstream, ...) and Reason
// (loopback, capability, ...) with errors.As.
//
//	page, err := guest.Fetch("https://example.com/")
//	var e *airlock.Error
//	if errors.As(err, &e) && e.Code == airlock.CodeDenied { ... }
//
// The wire types below are the JSON shapes of the ABI. The import wrappers
// exist only when building for wasip1; Serve, ServeIO and IsDenied build
// everywhere, so handlers can be tested on the host.
package guest

import "github.com/airlockhq/airlock"

// DefaultBufferSize is the size of the first out buffer a call offers the
// host. A larger result is copied with result_read, never by repeating the
// call.
const DefaultBufferSize = 64 << 10

// Request is an HTTP request made by the engine (http_request).
type Request struct {
	Method       string              `json:"method,omitempty"`
	URL          string              `json:"url"`
	Header       map[string][]string `json:"headers,omitempty"`
	Body         []byte              `json:"body_b64,omitempty"`
	MaxRedirects *int                `json:"max_redirects,omitempty"`
}

// Response is the answer of HTTP and Route.
type Response struct {
	Status     int                 `json:"status"`
	Header     map[string][]string `json:"headers"`
	Body       []byte              `json:"body_b64"`
	URL        string              `json:"url,omitempty"`
	DecisionID string              `json:"decision_id"`
}

// RouteRequest is a call of a credentialed route: the engine adds the
// credential the guest never sees.
type RouteRequest struct {
	Method string              `json:"method,omitempty"`
	Path   string              `json:"path"`
	Header map[string][]string `json:"headers,omitempty"`
	Body   []byte              `json:"body_b64,omitempty"`
}

// FetchOptions narrow a Fetch.
type FetchOptions struct {
	Provider   string             `json:"provider,omitempty"`
	TLSProfile string             `json:"tls_profile,omitempty"`
	Cache      bool               `json:"cache,omitempty"`
	Narrow     *airlock.Narrowing `json:"narrow,omitempty"`
}
