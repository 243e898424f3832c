//go:build wasip1

package guest

import (
	"bytes"
	"encoding/json"
	"strings"
	"unsafe"

	"github.com/airlockhq/airlock"
)

//go:wasmimport airlock result_read
func resultRead(outPtr unsafe.Pointer, outCap uint32) int32

//go:wasmimport airlock last_error
func lastError(outPtr unsafe.Pointer, outCap uint32) int32

//go:wasmimport airlock browse_fetch
func browseFetch(urlPtr unsafe.Pointer, urlLen uint32, optsPtr unsafe.Pointer, optsLen uint32, outPtr unsafe.Pointer, outCap uint32) int32

//go:wasmimport airlock http_request
func httpRequest(reqPtr unsafe.Pointer, reqLen uint32, outPtr unsafe.Pointer, outCap uint32) int32

//go:wasmimport airlock http_get_many
func httpGetMany(urlsPtr unsafe.Pointer, urlsLen uint32, outPtr unsafe.Pointer, outCap uint32) int32

//go:wasmimport airlock tcp
func tcp(hostPtr unsafe.Pointer, hostLen uint32, port uint32, reqPtr unsafe.Pointer, reqLen uint32, outPtr unsafe.Pointer, outCap uint32) int32

//go:wasmimport airlock udp
func udp(hostPtr unsafe.Pointer, hostLen uint32, port uint32, reqPtr unsafe.Pointer, reqLen uint32, outPtr unsafe.Pointer, outCap uint32) int32

//go:wasmimport airlock tls
func tlsExchange(hostPtr unsafe.Pointer, hostLen uint32, port uint32, reqPtr unsafe.Pointer, reqLen uint32, outPtr unsafe.Pointer, outCap uint32) int32

//go:wasmimport airlock secret_sign
func secretSign(namePtr unsafe.Pointer, nameLen uint32, dataPtr unsafe.Pointer, dataLen uint32, outPtr unsafe.Pointer, outCap uint32) int32

//go:wasmimport airlock route
func route(namePtr unsafe.Pointer, nameLen uint32, reqPtr unsafe.Pointer, reqLen uint32, outPtr unsafe.Pointer, outCap uint32) int32

var (
	bufferSize = DefaultBufferSize
	scratch    []byte // the first out buffer, reused: a guest's host calls do not overlap
)

// SetBufferSize sets the size of the first out buffer of later calls
// (at least 1 byte). Results larger than it cost one result_read.
func SetBufferSize(n int) {
	bufferSize = max(n, 1)
	scratch = nil
}

func ptr(b []byte) unsafe.Pointer { return unsafe.Pointer(unsafe.SliceData(b)) }

func strPtr(s string) unsafe.Pointer { return unsafe.Pointer(unsafe.StringData(s)) }

// call runs one import with the out buffer, then fetches the rest of a
// larger result with result_read. The result is the caller's to keep.
func call(f func(out unsafe.Pointer, outCap uint32) int32) ([]byte, error) {
	if scratch == nil {
		scratch = make([]byte, bufferSize)
	}
	n := f(ptr(scratch), uint32(len(scratch)))
	if n < 0 {
		return nil, readError(n)
	}
	if int(n) <= len(scratch) {
		return bytes.Clone(scratch[:n]), nil
	}
	buf := make([]byte, n)
	if m := resultRead(ptr(buf), uint32(n)); m != n {
		return nil, &airlock.Error{Code: airlock.CodeInternal, Reason: airlock.ReasonABI, Message: "guest: result_read returned a different length"}
	}
	return buf, nil
}

// readError turns a negative return into the *airlock.Error of last_error.
func readError(ret int32) error {
	buf := make([]byte, 1024)
	n := lastError(ptr(buf), uint32(len(buf)))
	if int(n) > len(buf) {
		buf = make([]byte, n)
		n = lastError(ptr(buf), uint32(len(buf)))
	}
	e := &airlock.Error{}
	if n <= 0 || json.Unmarshal(buf[:n], e) != nil {
		e = &airlock.Error{Code: airlock.CodeInternal, Reason: airlock.ReasonABI, Message: "guest: the host reported a failure without details"}
		if ret == -1 {
			e.Code = airlock.CodeDenied
		}
	}
	return e
}

// Fetch fetches a page through the engine (capability browse).
func Fetch(url string) (*airlock.Page, error) { return FetchWith(url, FetchOptions{}) }

// FetchWith is Fetch with options.
func FetchWith(url string, o FetchOptions) (*airlock.Page, error) {
	opts, err := json.Marshal(o)
	if err != nil {
		return nil, err
	}
	out, err := call(func(p unsafe.Pointer, c uint32) int32 {
		return browseFetch(strPtr(url), uint32(len(url)), ptr(opts), uint32(len(opts)), p, c)
	})
	if err != nil {
		return nil, err
	}
	page := &airlock.Page{}
	return page, json.Unmarshal(out, page)
}

// GetMany fetches up to 64 URLs concurrently on the host (capability
// parallel); results come back in input order, each a page or an error.
func GetMany(urls []string) ([]airlock.FetchResult, error) {
	for _, u := range urls {
		if strings.ContainsAny(u, "\r\n") {
			return nil, &airlock.Error{Code: airlock.CodeInvalid, Reason: airlock.ReasonArgument, Message: "guest: a URL contains a line break"}
		}
	}
	joined := strings.Join(urls, "\n")
	out, err := call(func(p unsafe.Pointer, c uint32) int32 {
		return httpGetMany(strPtr(joined), uint32(len(joined)), p, c)
	})
	if err != nil {
		return nil, err
	}
	var res []airlock.FetchResult
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var r airlock.FetchResult
		if err := dec.Decode(&r); err != nil {
			return nil, err
		}
		res = append(res, r)
	}
	return res, nil
}

// HTTP makes an HTTP request through the engine (capability http).
func HTTP(req Request) (*Response, error) {
	in, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	out, err := call(func(p unsafe.Pointer, c uint32) int32 { return httpRequest(ptr(in), uint32(len(in)), p, c) })
	if err != nil {
		return nil, err
	}
	resp := &Response{}
	return resp, json.Unmarshal(out, resp)
}

// Get is HTTP with method GET.
func Get(url string) (*Response, error) { return HTTP(Request{Method: "GET", URL: url}) }

// Post is HTTP with method POST and a Content-Type.
func Post(url, contentType string, body []byte) (*Response, error) {
	return HTTP(Request{Method: "POST", URL: url, Header: map[string][]string{"Content-Type": {contentType}}, Body: body})
}

type exchangeFunc func(hostPtr unsafe.Pointer, hostLen uint32, port uint32, reqPtr unsafe.Pointer, reqLen uint32, outPtr unsafe.Pointer, outCap uint32) int32

func exchange(f exchangeFunc, host string, port int, req []byte) ([]byte, error) {
	if port <= 0 || port > 65535 {
		return nil, &airlock.Error{Code: airlock.CodeInvalid, Reason: airlock.ReasonPort, Message: "guest: port out of range 1..65535"}
	}
	return call(func(p unsafe.Pointer, c uint32) int32 {
		return f(strPtr(host), uint32(len(host)), uint32(port), ptr(req), uint32(len(req)), p, c)
	})
}

// TCP sends req to host:port and returns the reply (capability tcp; 1 MB,
// 10 s).
func TCP(host string, port int, req []byte) ([]byte, error) { return exchange(tcp, host, port, req) }

// UDP sends one datagram and returns one reply (capability udp; 65,535 B,
// 5 s).
func UDP(host string, port int, req []byte) ([]byte, error) { return exchange(udp, host, port, req) }

// TLS sends req over TLS, the host doing the handshake with SNI = host,
// and returns the decrypted reply (capability tls; 1 MB, 10 s).
func TLS(host string, port int, req []byte) ([]byte, error) {
	return exchange(tlsExchange, host, port, req)
}

// Sign returns HMAC-SHA256 of data with the tenant's secret name
// (capability secrets); the secret never enters the guest.
func Sign(name string, data []byte) ([]byte, error) {
	return call(func(p unsafe.Pointer, c uint32) int32 {
		return secretSign(strPtr(name), uint32(len(name)), ptr(data), uint32(len(data)), p, c)
	})
}

// Route calls the credentialed route name (capability routes).
func Route(name string, req RouteRequest) (*Response, error) {
	in, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	out, err := call(func(p unsafe.Pointer, c uint32) int32 {
		return route(strPtr(name), uint32(len(name)), ptr(in), uint32(len(in)), p, c)
	})
	if err != nil {
		return nil, err
	}
	resp := &Response{}
	return resp, json.Unmarshal(out, resp)
}

// LastError returns the last failure of this instance's host calls, or
// nil when none has failed.
func LastError() error {
	if lastError(nil, 0) == 0 {
		return nil
	}
	return readError(-2)
}
