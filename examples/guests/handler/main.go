//go:build wasip1

// Command handler is an Airlock guest for the server flip
// (airlock serve-guest): the host owns the listening socket and runs a
// fresh instance of this program per request, with the request on stdin
// and the response on stdout. Its outbound calls are still brokered: a
// served guest is no SSRF pivot.
//
//	GOOS=wasip1 GOARCH=wasm go build -o handler.wasm ./examples/guests/handler
//	airlock serve-guest handler.wasm --listen 127.0.0.1:8081 --profile network
//
// Routes: / says hello; /title?url=U fetches U through the engine and
// answers its title (or why the engine refused it).
package main

import (
	"fmt"
	"net/http"
	"os"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/guest"
)

func main() {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from a guest; you asked for %s\n", r.URL.Path)
	})
	mux.HandleFunc("GET /title", func(w http.ResponseWriter, r *http.Request) {
		page, err := guest.Fetch(r.URL.Query().Get("url"))
		if err != nil {
			w.WriteHeader(http.StatusBadGateway)
			pub := airlock.Public(err, "")
			fmt.Fprintf(w, "outbound=blocked code=%s reason=%s\n", pub.Code, pub.Reason)
			return
		}
		fmt.Fprintf(w, "outbound=ok title=%s\n", page.Title)
	})
	if err := guest.Serve(mux); err != nil {
		fmt.Fprintln(os.Stderr, "handler:", err)
		os.Exit(1)
	}
}
