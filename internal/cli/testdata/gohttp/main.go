// Command gohttp is the Go net/http client of internal/cli's exec tests:
// it GETs each URL through the proxy of its environment (HTTP_PROXY,
// HTTPS_PROXY; SSL_CERT_FILE for the test CA) and prints one line each.
package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
)

func main() {
	failed := false
	for _, u := range os.Args[1:] {
		resp, err := http.Get(u)
		if err != nil {
			fmt.Printf("%s error %v\n", u, err)
			failed = true
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Printf("%s %d reason=%s body=%q\n", u, resp.StatusCode, resp.Header.Get("X-Airlock-Reason"), strings.TrimSpace(string(b)))
		failed = failed || resp.StatusCode != http.StatusOK
	}
	if failed {
		os.Exit(1)
	}
}
