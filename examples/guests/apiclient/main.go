//go:build wasip1

// Command apiclient is an Airlock guest that calls an authenticated API
// through a credentialed route: the engine adds the route's credential
// header, the guest never sees it (an echo of it comes back redacted).
// It also signs its request body with a tenant secret it cannot read.
//
//	GOOS=wasip1 GOARCH=wasm go build -o apiclient.wasm ./examples/guests/apiclient
//	airlock run apiclient.wasm --profile network -- ROUTE /v1/items [SECRET]
package main

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"

	"github.com/airlockhq/airlock/guest"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: apiclient ROUTE PATH [SECRET]")
		os.Exit(2)
	}
	route, path := os.Args[1], os.Args[2]
	req := guest.RouteRequest{Method: "GET", Path: path}
	if len(os.Args) > 3 {
		sig, err := guest.Sign(os.Args[3], []byte("GET "+path))
		if err != nil {
			fail(err)
		}
		req.Header = map[string][]string{"X-Signature": {hex.EncodeToString(sig)}}
	}
	resp, err := guest.Route(route, req)
	if err != nil {
		fail(err)
	}
	var v any
	if err := json.Unmarshal(resp.Body, &v); err != nil {
		fmt.Printf("%d %s\n", resp.Status, resp.Body)
		return
	}
	out, _ := json.MarshalIndent(map[string]any{"status": resp.Status, "json": v, "decision_id": resp.DecisionID}, "", "  ")
	fmt.Println(string(out))
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "apiclient:", err)
	if guest.IsDenied(err) {
		os.Exit(3)
	}
	os.Exit(1)
}
