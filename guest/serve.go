package guest

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
)

// Serve answers the one request of a served guest (airlock serve-guest):
// the host writes the request to standard input as an HTTP/1.1 message and
// reads the response from standard output. Each request gets a fresh
// instance, so a handler keeps no state between requests.
func Serve(h http.Handler) error { return ServeIO(h, os.Stdin, os.Stdout) }

// ServeIO is Serve on the given streams.
func ServeIO(h http.Handler, in io.Reader, out io.Writer) error {
	req, err := http.ReadRequest(bufio.NewReader(in))
	if err != nil {
		fmt.Fprintf(out, "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
		return fmt.Errorf("guest: read the request: %w", err)
	}
	rw := &responseWriter{header: http.Header{}}
	h.ServeHTTP(rw, req)
	if rw.status == 0 {
		rw.status = http.StatusOK
	}
	rw.header.Set("Content-Length", strconv.Itoa(rw.body.Len()))
	resp := &http.Response{
		StatusCode: rw.status, ProtoMajor: 1, ProtoMinor: 1, Header: rw.header,
		ContentLength: int64(rw.body.Len()), Body: io.NopCloser(&rw.body),
	}
	return resp.Write(out)
}

// responseWriter buffers a handler's response.
type responseWriter struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (w *responseWriter) Header() http.Header { return w.header }

func (w *responseWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
}

func (w *responseWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.body.Write(p)
}
