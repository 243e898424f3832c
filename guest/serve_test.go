package guest_test

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/airlockhq/airlock/guest"
)

func TestServeIO(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Path", r.URL.Path)
		w.WriteHeader(http.StatusCreated)
		w.Write([]byte(r.Method + " " + r.URL.Query().Get("q") + " " + string(body)))
	})
	in := "POST /items?q=1 HTTP/1.1\r\nHost: example\r\nContent-Length: 5\r\n\r\nhello"
	var out bytes.Buffer
	if err := guest.ServeIO(h, strings.NewReader(in), &out); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(&out), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 201 || resp.Header.Get("X-Path") != "/items" || string(body) != "POST 1 hello" {
		t.Fatalf("got %d %v %q", resp.StatusCode, resp.Header, body)
	}

	out.Reset()
	if err := guest.ServeIO(h, strings.NewReader("garbage"), &out); err == nil || !strings.HasPrefix(out.String(), "HTTP/1.1 400") {
		t.Fatalf("garbage: err %v, out %q", err, out.String())
	}
}
