//go:build wasip1

// Command probe calls one import as its arguments say and prints one JSON
// line per call: {"ok":...} or {"error":{code,reason,...}}. It imports
// every function of the ABI, so it links only under posix.
//
//	probe fetch URL
//	probe http METHOD URL [BODY] [BUFSIZE]
//	probe many URL...
//	probe tcp|udp|tls HOST PORT DATA
//	probe sign NAME DATA
//	probe route NAME METHOD PATH
//	probe loop-sign N | loop-noop N
//	probe spin | mem MIB
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/guest"
)

var keep [][]byte

type line struct {
	OK    any            `json:"ok,omitempty"`
	Error *airlock.Error `json:"error,omitempty"`
}

func emit(v any, err error) {
	var l line
	if err != nil {
		var e *airlock.Error
		if !errors.As(err, &e) {
			e = &airlock.Error{Code: "internal", Message: err.Error()}
		}
		l.Error = e
	} else {
		l.OK = v
	}
	b, _ := json.Marshal(l)
	fmt.Println(string(b))
}

func main() {
	a := os.Args[1:]
	switch a[0] {
	case "fetch":
		p, err := guest.Fetch(a[1])
		if err != nil {
			emit(nil, err)
			return
		}
		emit(map[string]any{"status": p.Status, "title": p.Title}, nil)
	case "http":
		req := guest.Request{Method: a[1], URL: a[2]}
		if len(a) > 3 {
			req.Body = []byte(a[3])
		}
		if len(a) > 4 {
			n, _ := strconv.Atoi(a[4])
			guest.SetBufferSize(n)
		}
		r, err := guest.HTTP(req)
		if err != nil {
			emit(nil, err)
			return
		}
		emit(map[string]any{"status": r.Status, "body": string(r.Body)}, nil)
	case "many":
		rs, err := guest.GetMany(a[1:])
		if err != nil {
			emit(nil, err)
			return
		}
		for _, r := range rs {
			if r.Error != nil {
				emit(nil, r.Error)
			} else {
				emit(map[string]any{"status": r.Page.Status, "title": r.Page.Title}, nil)
			}
		}
	case "tcp", "udp", "tls":
		port, _ := strconv.Atoi(a[2])
		f := map[string]func(string, int, []byte) ([]byte, error){"tcp": guest.TCP, "udp": guest.UDP, "tls": guest.TLS}[a[0]]
		out, err := f(a[1], port, []byte(a[3]))
		emit(string(out), err)
	case "sign":
		out, err := guest.Sign(a[1], []byte(a[2]))
		emit(fmt.Sprintf("%x", out), err)
	case "route":
		r, err := guest.Route(a[1], guest.RouteRequest{Method: a[2], Path: a[3]})
		if err != nil {
			emit(nil, err)
			return
		}
		emit(map[string]any{"status": r.Status, "body": string(r.Body)}, nil)
	case "loop-sign":
		n, _ := strconv.Atoi(a[1])
		for range n {
			if _, err := guest.Sign("k", []byte("x")); err != nil {
				emit(nil, err)
				return
			}
		}
		emit(n, nil)
	case "loop-noop":
		n, _ := strconv.Atoi(a[1])
		for range n {
			_ = guest.LastError()
		}
		emit(n, nil)
	case "spin":
		x := 0
		for {
			x++
		}
	case "mem":
		n, _ := strconv.Atoi(a[1])
		for range n {
			b := make([]byte, 1<<20)
			for i := 0; i < len(b); i += 4096 {
				b[i] = 1
			}
			keep = append(keep, b)
		}
		emit(len(keep), nil)
	default:
		fmt.Fprintln(os.Stderr, "unknown command", a[0])
		os.Exit(2)
	}
}
