// Package contracttest checks HTTP traffic against an OpenAPI 3.1
// document (internal/api/openapi.json): every request a test sends and
// every response it gets is validated with a JSON Schema 2020-12
// validator. A response must match the schema its operation documents for
// its very status (the default response does not count) and media type:
// a JSON body as a whole, each line of a JSON-lines body (x-line), the data
// of each server-sent event by its name (x-events); other media types
// (org, markdown, text, metrics) are only checked to be documented. A
// request whose body or query parameters the document refuses must not
// succeed. An answer to a path the document has no operation for (404,
// 405) must be an error in the shape of the default response of the
// document's paths under the same first segment (/v2/... is Firecrawl's
// shape), or components/schemas/ErrorBody. /mcp is the MCP SDK's transport
// and is left to its own tests.
//
// It is test support for internal/api and its sub-packages: no command
// links it.
package contracttest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// contractURL is the document's base URL for the compiler; the schemas'
// $refs ("#/components/schemas/X") resolve against it.
const contractURL = "mem:///openapi.json"

// Contract is a compiled document: the schema of each operation's request
// body and of each response, compiled on first use. It is safe for
// concurrent use.
type Contract struct {
	doc map[string]any
	c   *jsonschema.Compiler
	mux *http.ServeMux // the document's path templates, to find an operation

	mu      sync.Mutex
	schemas map[string]*jsonschema.Schema
}

// New compiles doc, an OpenAPI 3.1 document in JSON.
func New(doc []byte) (*Contract, error) {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return nil, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("openapi.json: not an object")
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource(contractURL, m); err != nil {
		return nil, err
	}
	k := &Contract{doc: m, c: c, mux: http.NewServeMux(), schemas: map[string]*jsonschema.Schema{}}
	paths, _ := m["paths"].(map[string]any)
	for p, item := range paths {
		for method := range item.(map[string]any) {
			if method == "parameters" {
				continue
			}
			k.mux.Handle(strings.ToUpper(method)+" "+p, http.NotFoundHandler())
		}
	}
	return k, nil
}

// escape is a JSON pointer token.
func escape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// at returns the value at the JSON pointer ptr ("/a/b") and the pointer
// where it really is: a $ref met on the way (responses are often
// references) is followed. The value reached is not resolved itself.
func (k *Contract) at(ptr string) (any, string) {
	var cur any = k.doc
	real := ""
	for _, tok := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
		if arr, isArr := cur.([]any); isArr {
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(arr) {
				return nil, ""
			}
			cur = arr[i]
			real += "/" + tok
			continue
		}
		m, ok := cur.(map[string]any)
		for ok {
			ref, isRef := m["$ref"].(string)
			if !isRef {
				break
			}
			v, p := k.at(strings.TrimPrefix(ref, "#"))
			real = p
			m, ok = v.(map[string]any)
		}
		if !ok {
			return nil, ""
		}
		cur = m[strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")]
		real += "/" + tok
		if cur == nil {
			return nil, ""
		}
	}
	return cur, real
}

// schema compiles the schema at ptr.
func (k *Contract) schema(ptr string) (*jsonschema.Schema, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if s, ok := k.schemas[ptr]; ok {
		return s, nil
	}
	s, err := k.c.Compile(contractURL + "#" + ptr)
	if err != nil {
		return nil, err
	}
	k.schemas[ptr] = s
	return s, nil
}

// Operation finds the document's operation of a request: its pointer
// ("/paths/~1api~1browse/post"), or "" when the document has none.
func (k *Contract) Operation(method, path string) string {
	req := httptest.NewRequest(method, "http://x"+path, nil)
	_, pattern := k.mux.Handler(req)
	if pattern == "" {
		return ""
	}
	m, p, _ := strings.Cut(pattern, " ")
	return "/paths/" + escape(p) + "/" + strings.ToLower(m)
}

// errorSchema is the pointer of the error schema of an answer to path
// when no operation has it: the JSON schema of the default response of
// the first documented path under the same first segment (in path order),
// else the ErrorBody schema.
func (k *Contract) errorSchema(path string) string {
	seg := func(p string) string {
		first, _, _ := strings.Cut(strings.TrimPrefix(p, "/"), "/")
		return first
	}
	paths, _ := k.doc["paths"].(map[string]any)
	var names []string
	for p := range paths {
		if seg(p) == seg(path) {
			names = append(names, p)
		}
	}
	sort.Strings(names)
	for _, p := range names {
		item, _ := paths[p].(map[string]any)
		var methods []string
		for m := range item {
			if m != "parameters" {
				methods = append(methods, m)
			}
		}
		sort.Strings(methods)
		for _, m := range methods {
			s, ptr := k.at("/paths/" + escape(p) + "/" + m + "/responses/default/content/application~1json/schema")
			if s != nil {
				return ptr
			}
		}
	}
	return "/components/schemas/ErrorBody"
}

// mediaType is a Content-Type without its parameters.
func mediaType(ct string) string {
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return ct
	}
	return mt
}

// isJSON says whether a media type carries one JSON document.
func isJSON(mt string) bool { return mt == "application/json" || strings.HasSuffix(mt, "+json") }

// ValidateJSON decodes body and validates it against the schema at ptr; the
// error names the instance's JSON pointer and the message.
func (k *Contract) ValidateJSON(ptr string, body []byte) error {
	s, err := k.schema(ptr)
	if err != nil {
		return fmt.Errorf("compile %s: %v", ptr, err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("not JSON: %v", err)
	}
	if err := s.Validate(v); err != nil {
		var ve *jsonschema.ValidationError
		if errors.As(err, &ve) {
			return fmt.Errorf("%s", leaves(ve))
		}
		return err
	}
	return nil
}

// leaves lists the innermost causes of a validation error, each as
// "at <instance pointer>: <message> (schema <keyword location>)".
func leaves(ve *jsonschema.ValidationError) string {
	var out []string
	var walk func(u jsonschema.OutputUnit)
	walk = func(u jsonschema.OutputUnit) {
		if len(u.Errors) == 0 {
			msg := ""
			if u.Error != nil {
				msg = u.Error.String()
			}
			loc := u.AbsoluteKeywordLocation
			if loc == "" {
				loc = u.KeywordLocation
			}
			out = append(out, fmt.Sprintf("at %q: %s (schema %s)", u.InstanceLocation, msg, strings.TrimPrefix(loc, contractURL)))
			return
		}
		for _, c := range u.Errors {
			walk(c)
		}
	}
	walk(*ve.DetailedOutput())
	if len(out) > 12 {
		out = append(out[:12], fmt.Sprintf("... and %d more", len(out)-12))
	}
	return strings.Join(out, "; ")
}

// CheckRequest validates a request body against its operation's request
// schema. It returns "" with no error when the request has no JSON body to
// check.
func (k *Contract) CheckRequest(op, contentType string, body []byte) error {
	if len(body) == 0 {
		return nil
	}
	ct := mediaType(contentType)
	if contentType == "" {
		ct = "application/json" // the API reads JSON whatever the header says
	}
	if !isJSON(ct) {
		return nil
	}
	s, ptr := k.at(op + "/requestBody/content/" + escape(ct) + "/schema")
	if s == nil {
		return fmt.Errorf("the document has no %s request body for this operation", ct)
	}
	return k.ValidateJSON(ptr, body)
}

// CheckQuery validates a request's query parameters: each must be one the
// document names for the operation (or its path), with a value its schema
// takes.
func (k *Contract) CheckQuery(op string, q url.Values) error {
	named := map[string]string{} // name -> pointer of its schema
	item := op[:strings.LastIndexByte(op, '/')]
	for _, base := range []string{item + "/parameters", op + "/parameters"} {
		list, real := k.at(base)
		arr, _ := list.([]any)
		for i := range arr {
			p, ptr := k.at(real + "/" + strconv.Itoa(i) + "/in")
			if p == nil {
				continue
			}
			ptr = strings.TrimSuffix(ptr, "/in")
			if p != "query" {
				continue
			}
			name, _ := k.at(ptr + "/name")
			named[name.(string)] = ptr + "/schema"
		}
	}
	var errs []string
	for name, vals := range q {
		ptr, ok := named[name]
		if !ok {
			errs = append(errs, fmt.Sprintf("query parameter %q is not documented", name))
			continue
		}
		typ, _ := k.at(ptr + "/type")
		for _, v := range vals {
			js, _ := json.Marshal(v)
			switch typ {
			case "integer", "number":
				if _, err := strconv.ParseFloat(v, 64); err == nil {
					js = []byte(v)
				}
			case "boolean":
				if v == "true" || v == "false" {
					js = []byte(v)
				}
			}
			if err := k.ValidateJSON(ptr, js); err != nil {
				errs = append(errs, fmt.Sprintf("query parameter %s=%q: %v", name, v, err))
			}
		}
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}

// CheckResponse validates a response against the response its operation
// documents for status. skipped says why a body
// was not validated (a media type that is not JSON).
func (k *Contract) CheckResponse(op string, status int, contentType string, body []byte) (skipped string, err error) {
	// Every status an operation returns is documented by itself: the
	// default response is for clients, not an excuse for the document.
	code := strconv.Itoa(status)
	if resp, _ := k.at(op + "/responses/" + code); resp == nil {
		return "", fmt.Errorf("status %d is not documented for this operation", status)
	}
	content, _ := k.at(op + "/responses/" + code + "/content")
	if content == nil {
		if len(body) == 0 {
			return "", nil
		}
		return "", fmt.Errorf("status %d documents no body, got %d bytes", status, len(body))
	}
	ct := mediaType(contentType)
	if _, ok := content.(map[string]any)[ct]; !ok {
		return "", fmt.Errorf("status %d (response %s) documents no %q body", status, code, ct)
	}
	switch {
	case isJSON(ct):
		// The response object may be a $ref: validate with the schema
		// where it really is.
		_, ptr := k.at(op + "/responses/" + code + "/content/" + escape(ct) + "/schema")
		return "", k.ValidateJSON(ptr, body)
	case ct == "application/x-ndjson":
		// One JSON value a line, each validated with the schema the
		// document gives a line (x-line).
		line, ptr := k.at(op + "/responses/" + code + "/content/" + escape(ct) + "/x-line")
		if line == nil {
			return "", fmt.Errorf("the document gives no x-line schema for %s", ct)
		}
		sc := bufio.NewScanner(bytes.NewReader(body))
		sc.Buffer(nil, 64<<20)
		for n := 1; sc.Scan(); n++ {
			if err := k.ValidateJSON(ptr, sc.Bytes()); err != nil {
				return "", fmt.Errorf("line %d: %v", n, err)
			}
		}
		return "", nil
	default:
		return "not JSON: " + ct, nil
	}
}

// contractChecker wraps a handler: it validates each request and response
// against the served document and reports each mismatch to errorf.
type contractChecker struct {
	k      *Contract
	next   http.Handler
	errorf func(format string, args ...any)

	mu      sync.Mutex
	done    bool
	checked int // responses validated as JSON
	skipped map[string]int
}

// Handler wraps h for a test server: a mismatch fails t. It stops
// reporting when t's cleanup runs (the server must be closed before).
func (k *Contract) Handler(t testing.TB, h http.Handler) http.Handler {
	t.Helper()
	var cc *contractChecker
	cc = k.checker(h, func(format string, args ...any) {
		cc.mu.Lock()
		defer cc.mu.Unlock()
		if !cc.done {
			t.Errorf("contract: "+format, args...)
		}
	})
	t.Cleanup(func() {
		cc.mu.Lock()
		defer cc.mu.Unlock()
		cc.done = true
		if cc.checked > 0 || len(cc.skipped) > 0 {
			t.Logf("contract: %d responses validated; not validated: %v", cc.checked, cc.skipped)
		}
	})
	return cc
}

// Checker wraps h: each mismatch between its traffic and the document is
// reported to errorf, which must be safe for concurrent use.
func (k *Contract) Checker(h http.Handler, errorf func(format string, args ...any)) http.Handler {
	return k.checker(h, errorf)
}

func (k *Contract) checker(h http.Handler, errorf func(format string, args ...any)) *contractChecker {
	return &contractChecker{k: k, next: h, errorf: errorf, skipped: map[string]int{}}
}

func (cc *contractChecker) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body []byte
	if r.Body != nil {
		var err error
		body, err = io.ReadAll(r.Body)
		if err != nil {
			cc.errorf("%s %s: read the request: %v", r.Method, r.URL.Path, err)
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	op := cc.k.Operation(r.Method, r.URL.Path)
	var reqErr error
	if op != "" {
		reqErr = errors.Join(cc.k.CheckRequest(op, r.Header.Get("Content-Type"), body), cc.k.CheckQuery(op, r.URL.Query()))
	}
	if op == "/paths/~1mcp/"+strings.ToLower(r.Method) {
		// The MCP transport is the SDK's handler (a stand-in in these
		// tests): its JSON-RPC messages are the MCP package's to test.
		cc.count("mcp: the SDK's transport")
		cc.next.ServeHTTP(w, r)
		return
	}
	tw := &teeWriter{ResponseWriter: w}
	what := r.Method + " " + r.URL.Path
	tw.event = func(event, data string) {
		if err := cc.k.CheckEvent(op, event, data); err != nil {
			cc.errorf("%s: event %q: %v\ndata: %.2000s", what, event, err, data)
		}
	}
	cc.next.ServeHTTP(tw, r)
	status := tw.status()
	what += " -> " + strconv.Itoa(status)
	if op == "" {
		// No such operation: the answer is the error shape (404, 405).
		if status < 400 {
			cc.errorf("%s: not in the document, yet answered %d", what, status)
			return
		}
		if err := cc.k.ValidateJSON(cc.k.errorSchema(r.URL.Path), tw.body.Bytes()); err != nil {
			cc.errorf("%s: error body: %v\nbody: %.2000s", what, err, tw.body.Bytes())
		}
		return
	}
	if reqErr != nil && status < 400 {
		cc.errorf("%s: the document refuses the request, the server took it: %v\nrequest: %.2000s", what, reqErr, body)
	}
	if tw.stream {
		cc.count("") // each event's data was validated as it passed
		return
	}
	skipped, err := cc.k.CheckResponse(op, status, tw.Header().Get("Content-Type"), tw.body.Bytes())
	if err != nil {
		cc.errorf("%s: response: %v\nbody: %.2000s", what, err, tw.body.Bytes())
	}
	if skipped != "" {
		cc.count(skipped)
	} else {
		cc.count("")
	}
}

func (cc *contractChecker) count(skipped string) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if skipped == "" {
		cc.checked++
	} else {
		cc.skipped[skipped]++
	}
}

// CheckEvent validates the data of one server-sent event against the
// schema the document gives its name (x-events of the text/event-stream
// response).
func (k *Contract) CheckEvent(op, event, data string) error {
	base := op + "/responses/200/content/text~1event-stream/x-events"
	events, real := k.at(base)
	if events == nil {
		return fmt.Errorf("the document names no events for this stream")
	}
	if _, ok := events.(map[string]any)[event]; !ok {
		return fmt.Errorf("the document does not name this event")
	}
	return k.ValidateJSON(real+"/"+escape(event), []byte(data))
}

// teeWriter keeps a copy of a response body while it passes through; an
// event stream, which may not end, is cut into events instead, each given
// to event as it completes (comments skipped).
type teeWriter struct {
	http.ResponseWriter
	code   int
	body   bytes.Buffer
	stream bool
	event  func(event, data string)
}

// events hands the complete events in the buffer to w.event.
func (w *teeWriter) events() {
	for {
		b := w.body.Bytes()
		i := bytes.Index(b, []byte("\n\n"))
		if i < 0 {
			return
		}
		var event, data string
		for _, line := range strings.Split(string(b[:i]), "\n") {
			switch {
			case strings.HasPrefix(line, "event: "):
				event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				data += strings.TrimPrefix(line, "data: ")
			}
		}
		w.body.Next(i + 2)
		if data != "" && w.event != nil {
			w.event(event, data)
		}
	}
}

func (w *teeWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
		w.stream = mediaType(w.Header().Get("Content-Type")) == "text/event-stream"
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *teeWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.WriteHeader(http.StatusOK)
	}
	w.body.Write(b)
	if w.stream {
		w.events()
	}
	return w.ResponseWriter.Write(b)
}

func (w *teeWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *teeWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *teeWriter) status() int {
	if w.code == 0 {
		return http.StatusOK
	}
	return w.code
}
