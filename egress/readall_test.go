package egress

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// ReadAll reads every body whole whatever its Content-Length says, and a
// page of a typical size, its length unknown, takes one buffer.
func TestReadAllSizes(t *testing.T) {
	for _, size := range []int{0, 1, 511, 512, 5000, readAllDefault, readAllDefault + 1, 100 << 10, readAllMax + 3} {
		body := strings.Repeat("x", size)
		for _, cl := range []string{"", strconv.Itoa(size), "0", "17", "99999999999999", "-1", "junk"} {
			h := http.Header{}
			if cl != "" {
				h.Set("Content-Length", cl)
			}
			got, err := ReadAll(&Response{Header: h, Body: io.NopCloser(strings.NewReader(body))})
			if err != nil || string(got) != body {
				t.Errorf("size %d, Content-Length %q: got %d bytes, %v", size, cl, len(got), err)
			}
		}
	}
	if raceEnabled {
		return // the race detector's instrumentation allocates on its own
	}
	page := bytes.Repeat([]byte("<p>lorem ipsum</p>\n"), 5000/19)
	r := bytes.NewReader(page)
	resp := &Response{Body: io.NopCloser(r)}
	allocs := testing.AllocsPerRun(20, func() {
		r.Reset(page)
		ReadAll(resp)
	})
	if allocs > 2 { // the buffer and its bytes
		t.Errorf("ReadAll of a %d-byte body of unknown length: %.0f allocations, want 2", len(page), allocs)
	}
}
