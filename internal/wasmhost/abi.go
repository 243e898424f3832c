package wasmhost

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/engine"
)

// Return values of the brokered imports besides a result length.
const (
	ReturnDenied = -1 // denied, revoked or rate-limited: last_error says which
	ReturnError  = -2 // any other failure: last_error says what
)

// Caps on what a guest hands the host, checked before anything reaches the
// engine, a log or the audit trail.
const (
	MaxURLBytes     = 8 << 10  // one URL
	MaxNameBytes    = 256      // a secret or route name
	MaxHostBytes    = 255      // an exchange host
	MaxOptsBytes    = 64 << 10 // browse_fetch options
	MaxRequestBytes = 8 << 20  // an http_request or route request (JSON, base64 body)
	MaxSignBytes    = 1 << 20  // data to sign
	MaxBatchURLs    = airlock.DefaultBatchMax
)

// Lane timeouts: each host call gets min(its lane's timeout, the guest's
// remaining time).
const (
	TimeoutFetch = 20 * time.Second
	TimeoutHTTP  = 20 * time.Second
	// TimeoutBatch covers a full batch: 64 URLs, 16 at a time, 15 s each.
	TimeoutBatch = 4 * airlock.DefaultBatchTimeout
	TimeoutTCP   = 10 * time.Second
	TimeoutUDP   = 5 * time.Second
	TimeoutTLS   = 10 * time.Second
	TimeoutSign  = 5 * time.Second
	TimeoutRoute = 20 * time.Second
)

// Reply caps of the exchange lanes: the engine's defaults, or a tenant's
// lower ceiling (limits.exchange_max_reply, limits.udp_max_reply).
const (
	MaxReplyTCP = 1 << 20
	MaxReplyUDP = 65535
	MaxReplyTLS = 1 << 20
)

// invocation is the state of one guest instance's host calls. Host
// functions run on the guest's goroutine, one at a time, so it needs no
// lock.
type invocation struct {
	h       *Host
	p       airlock.Principal
	result  []byte // the whole result of the last successful call
	lastErr []byte // the last failure, as {"code","reason","message","decision_id"}
	calls   int
}

type invocationKey struct{}

func invocationOf(ctx context.Context) *invocation {
	inv, _ := ctx.Value(invocationKey{}).(*invocation)
	return inv
}

// argSpec is one input of a brokered import: a (ptr, len) pair capped at
// max bytes, or an i32.
type argSpec struct {
	name  string
	max   uint32
	isInt bool
}

type arg struct {
	b []byte
	n uint32
}

// function is one brokered import: its inputs (then out_ptr, out_cap), its
// lane timeout and what it asks the broker.
type function struct {
	in   []argSpec
	lane time.Duration
	do   func(ctx context.Context, b Broker, p airlock.Principal, a []arg) ([]byte, error)
}

func bytesArg(name string, max uint32) argSpec { return argSpec{name: name, max: max} }

var functions = map[string]function{
	FuncBrowseFetch: {in: []argSpec{bytesArg("url", MaxURLBytes), bytesArg("opts", MaxOptsBytes)}, lane: TimeoutFetch, do: doBrowseFetch},
	FuncHTTPRequest: {in: []argSpec{bytesArg("req", MaxRequestBytes)}, lane: TimeoutHTTP, do: doHTTPRequest},
	FuncHTTPGetMany: {in: []argSpec{bytesArg("urls", MaxBatchURLs*(MaxURLBytes+1))}, lane: TimeoutBatch, do: doHTTPGetMany},
	FuncTCP:         exchangeFunction(airlock.LaneTCP, TimeoutTCP),
	FuncUDP:         exchangeFunction(airlock.LaneUDP, TimeoutUDP),
	FuncTLS:         exchangeFunction(airlock.LaneTLS, TimeoutTLS),
	FuncSecretSign:  {in: []argSpec{bytesArg("name", MaxNameBytes), bytesArg("data", MaxSignBytes)}, lane: TimeoutSign, do: doSign},
	FuncRoute:       {in: []argSpec{bytesArg("name", MaxNameBytes), bytesArg("req", MaxRequestBytes)}, lane: TimeoutRoute, do: doRoute},
}

// instantiateAirlock links the airlock functions of p's grant set, and no
// other, into rt.
func (h *Host) instantiateAirlock(ctx context.Context, rt wazero.Runtime, p engine.GuestProfile) error {
	b := rt.NewHostModuleBuilder(ModuleName)
	i32 := api.ValueTypeI32
	for _, name := range Imports(p) {
		fb := b.NewFunctionBuilder()
		switch name {
		case FuncResultRead:
			fb = fb.WithGoModuleFunction(api.GoModuleFunc(resultRead), []api.ValueType{i32, i32}, []api.ValueType{i32}).
				WithParameterNames("out_ptr", "out_cap")
		case FuncLastError:
			fb = fb.WithGoModuleFunction(api.GoModuleFunc(lastError), []api.ValueType{i32, i32}, []api.ValueType{i32}).
				WithParameterNames("out_ptr", "out_cap")
		default:
			f := functions[name]
			var params []api.ValueType
			var names []string
			for _, s := range f.in {
				if s.isInt {
					params, names = append(params, i32), append(names, s.name)
				} else {
					params, names = append(params, i32, i32), append(names, s.name+"_ptr", s.name+"_len")
				}
			}
			params, names = append(params, i32, i32), append(names, "out_ptr", "out_cap")
			fb = fb.WithGoModuleFunction(brokered(f), params, []api.ValueType{i32}).WithParameterNames(names...)
		}
		fb.Export(name)
	}
	if _, err := b.Instantiate(ctx); err != nil {
		return airlock.Errorf(airlock.CodeInternal, airlock.ReasonNone, "wasmhost: instantiate the airlock module: %v", err)
	}
	return nil
}

// brokered wraps a function in the ABI: read and cap the inputs, check the
// out buffer before anything runs (a call must never be repeated to
// recover its result), call the broker under the lane's timeout, keep the
// whole result and copy what fits.
func brokered(f function) api.GoModuleFunc {
	return func(ctx context.Context, mod api.Module, stack []uint64) {
		inv := invocationOf(ctx)
		inv.calls++
		mem := mod.Memory()
		args := make([]arg, len(f.in))
		i := 0
		for k, s := range f.in {
			if s.isInt {
				args[k].n = api.DecodeU32(stack[i])
				i++
				continue
			}
			ptr, n := api.DecodeU32(stack[i]), api.DecodeU32(stack[i+1])
			i += 2
			if n > s.max {
				stack[0] = inv.fail(airlock.Errorf(airlock.CodeTooLarge, airlock.ReasonArgument, "%s of %d bytes; at most %d", s.name, n, s.max))
				return
			}
			b, ok := mem.Read(ptr, n)
			if !ok {
				stack[0] = inv.fail(airlock.Errorf(airlock.CodeInvalid, airlock.ReasonBounds, "%s [%d, +%d) is outside guest memory", s.name, ptr, n))
				return
			}
			args[k].b = bytes.Clone(b)
		}
		outPtr, outCap := api.DecodeU32(stack[i]), api.DecodeU32(stack[i+1])
		if uint64(outPtr)+uint64(outCap) > uint64(mem.Size()) {
			stack[0] = inv.fail(airlock.Errorf(airlock.CodeInvalid, airlock.ReasonBounds, "out buffer [%d, +%d) is outside guest memory", outPtr, outCap))
			return
		}
		cctx, cancel := context.WithTimeout(ctx, f.lane)
		defer cancel()
		res, err := f.do(cctx, inv.h.broker, inv.p, args)
		if err != nil {
			stack[0] = inv.fail(err)
			return
		}
		stack[0] = inv.deliver(mem, res, outPtr, outCap)
	}
}

// deliver keeps res as the pending result, copies what fits into the out
// buffer and returns the full length.
func (inv *invocation) deliver(mem api.Memory, res []byte, outPtr, outCap uint32) uint64 {
	if len(res) > math.MaxInt32 {
		return inv.fail(airlock.Errorf(airlock.CodeTooLarge, airlock.ReasonResult, "result of %d bytes does not fit the ABI", len(res)))
	}
	inv.result = res
	if res == nil {
		inv.result = []byte{}
	}
	n := min(uint32(len(res)), outCap)
	if n > 0 && !mem.Write(outPtr, res[:n]) {
		return inv.fail(airlock.Errorf(airlock.CodeInvalid, airlock.ReasonBounds, "out buffer [%d, +%d) is outside guest memory", outPtr, n))
	}
	return api.EncodeI32(int32(len(res)))
}

// fail records err for last_error and returns -1 for a refusal, -2 for
// anything else.
func (inv *invocation) fail(err error) uint64 {
	pub := airlock.Public(err, "")
	inv.lastErr, _ = json.Marshal(pub)
	inv.result = nil
	switch pub.Code {
	case airlock.CodeDenied, airlock.CodeRevoked, airlock.CodeRateLimited:
		return api.EncodeI32(ReturnDenied)
	}
	return api.EncodeI32(ReturnError)
}

// resultRead copies the pending result of the last successful call.
func resultRead(ctx context.Context, mod api.Module, stack []uint64) {
	inv := invocationOf(ctx)
	inv.calls++
	stack[0] = copyOut(mod.Memory(), inv.result, api.DecodeU32(stack[0]), api.DecodeU32(stack[1]))
}

// lastError copies the last failure's JSON; 0 when no call has failed.
func lastError(ctx context.Context, mod api.Module, stack []uint64) {
	inv := invocationOf(ctx)
	inv.calls++
	stack[0] = copyOut(mod.Memory(), inv.lastErr, api.DecodeU32(stack[0]), api.DecodeU32(stack[1]))
}

func copyOut(mem api.Memory, b []byte, ptr, capacity uint32) uint64 {
	n := min(uint32(len(b)), capacity)
	if n > 0 && !mem.Write(ptr, b[:n]) {
		return api.EncodeI32(ReturnError)
	}
	return api.EncodeI32(int32(len(b)))
}

func invalidJSON(what string, err error) error {
	return airlock.Errorf(airlock.CodeInvalid, airlock.ReasonJSON, "%s: %s", what, cut(err.Error(), 200))
}

// decodeJSON decodes a guest's JSON strictly: unknown fields are errors,
// so that a typo is not silently a different request.
func decodeJSON(what string, b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return invalidJSON(what, err)
	}
	if dec.More() {
		return airlock.Errorf(airlock.CodeInvalid, airlock.ReasonJSON, "%s: trailing data", what)
	}
	return nil
}

// FetchOptions are browse_fetch's options.
type FetchOptions struct {
	Provider   string             `json:"provider,omitempty"`
	TLSProfile string             `json:"tls_profile,omitempty"`
	Cache      bool               `json:"cache,omitempty"`
	Narrow     *airlock.Narrowing `json:"narrow,omitempty"`
}

func doBrowseFetch(ctx context.Context, b Broker, p airlock.Principal, a []arg) ([]byte, error) {
	var o FetchOptions
	if len(bytes.TrimSpace(a[1].b)) > 0 {
		if err := decodeJSON("browse_fetch options", a[1].b, &o); err != nil {
			return nil, err
		}
	}
	page, err := b.Fetch(ctx, p, airlock.FetchRequest{URL: string(a[0].b), Provider: o.Provider, TLSProfile: o.TLSProfile, Cache: o.Cache, Narrow: o.Narrow})
	if err != nil {
		return nil, err
	}
	return json.Marshal(page)
}

// HTTPRequest is http_request's request.
type HTTPRequest struct {
	Method       string              `json:"method,omitempty"`
	URL          string              `json:"url"`
	Headers      map[string][]string `json:"headers,omitempty"`
	Body         []byte              `json:"body_b64,omitempty"`
	MaxRedirects *int                `json:"max_redirects,omitempty"`
}

// HTTPResponse is the result of http_request and route.
type HTTPResponse struct {
	Status     int                 `json:"status"`
	Headers    map[string][]string `json:"headers"`
	Body       []byte              `json:"body_b64"`
	URL        string              `json:"url,omitempty"`
	DecisionID string              `json:"decision_id"`
}

func httpResult(r *airlock.HTTPResponse) ([]byte, error) {
	return json.Marshal(HTTPResponse{Status: r.Status, Headers: r.Header, Body: r.Body, URL: r.URL, DecisionID: r.DecisionID})
}

func doHTTPRequest(ctx context.Context, b Broker, p airlock.Principal, a []arg) ([]byte, error) {
	var r HTTPRequest
	if err := decodeJSON("http_request", a[0].b, &r); err != nil {
		return nil, err
	}
	if len(r.URL) > MaxURLBytes {
		return nil, airlock.Errorf(airlock.CodeTooLarge, airlock.ReasonArgument, "url of %d bytes; at most %d", len(r.URL), MaxURLBytes)
	}
	resp, err := b.HTTP(ctx, p, airlock.HTTPRequest{Method: r.Method, URL: r.URL, Header: r.Headers, Body: r.Body, MaxRedirects: r.MaxRedirects})
	if err != nil {
		return nil, err
	}
	return httpResult(resp)
}

func doHTTPGetMany(ctx context.Context, b Broker, p airlock.Principal, a []arg) ([]byte, error) {
	var urls []string
	for line := range strings.SplitSeq(string(a[0].b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if len(line) > MaxURLBytes {
			return nil, airlock.Errorf(airlock.CodeTooLarge, airlock.ReasonArgument, "a url of %d bytes; at most %d", len(line), MaxURLBytes)
		}
		urls = append(urls, line)
	}
	if len(urls) == 0 {
		return nil, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonArgument, "http_get_many: no URLs")
	}
	if len(urls) > MaxBatchURLs {
		return nil, airlock.Errorf(airlock.CodeTooLarge, airlock.ReasonBatch, "%d URLs in one batch; at most %d", len(urls), MaxBatchURLs)
	}
	results, _, err := b.FetchMany(ctx, p, urls, airlock.FetchRequest{})
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	for _, r := range results {
		if err := enc.Encode(r); err != nil {
			return nil, airlock.Errorf(airlock.CodeInternal, airlock.ReasonNone, "encode a batch result: %v", err)
		}
	}
	return out.Bytes(), nil
}

func exchangeFunction(lane string, timeout time.Duration) function {
	maxReq := uint32(1 << 20)
	if lane == airlock.LaneUDP {
		maxReq = MaxReplyUDP
	}
	return function{
		in:   []argSpec{bytesArg("host", MaxHostBytes), {name: "port", isInt: true}, bytesArg("req", maxReq)},
		lane: timeout,
		do: func(ctx context.Context, b Broker, p airlock.Principal, a []arg) ([]byte, error) {
			port := a[1].n
			if port == 0 || port > 65535 {
				return nil, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonPort, "%s: port %d out of range 1..65535", lane, int32(port))
			}
			target := net.JoinHostPort(string(a[0].b), strconv.Itoa(int(port)))
			// The reply cap and timeout are the engine's defaults for the
			// lane (MaxReply*, Timeout*): asking for the default (0) lets a
			// tenant's lower ceiling (limits.exchange_*) apply instead of
			// refusing every call.
			resp, err := b.Exchange(ctx, p, airlock.ExchangeRequest{Lane: lane, Target: target, Data: a[2].b})
			if err != nil {
				return nil, err
			}
			return resp.Data, nil
		},
	}
}

func doSign(ctx context.Context, b Broker, p airlock.Principal, a []arg) ([]byte, error) {
	sum, _, err := b.Sign(ctx, p, string(a[0].b), a[1].b)
	return sum, err
}

// RouteRequest is route's request (the route name is its own argument).
type RouteRequest struct {
	Method  string              `json:"method,omitempty"`
	Path    string              `json:"path"`
	Headers map[string][]string `json:"headers,omitempty"`
	Body    []byte              `json:"body_b64,omitempty"`
}

func doRoute(ctx context.Context, b Broker, p airlock.Principal, a []arg) ([]byte, error) {
	var r RouteRequest
	if err := decodeJSON("route", a[1].b, &r); err != nil {
		return nil, err
	}
	if len(r.Path) > MaxURLBytes {
		return nil, airlock.Errorf(airlock.CodeTooLarge, airlock.ReasonArgument, "path of %d bytes; at most %d", len(r.Path), MaxURLBytes)
	}
	resp, err := b.Route(ctx, p, airlock.RouteRequest{Name: string(a[0].b), Method: r.Method, Path: r.Path, Header: r.Headers, Body: r.Body})
	if err != nil {
		return nil, err
	}
	return httpResult(resp)
}
