//go:build wasip1

// Command flip is a minimal server-flip handler without net/http: it reads
// the request line from stdin and answers by path.
//
//	/plain   plain bytes (a 200 body)
//	/status  a 201 response message with a header
//	/echo    the size of the request body
//	/fail    exits 1
//	/spin    never answers
//	/big     more bytes than the response cap of the tests
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"
)

func main() {
	in := bufio.NewReader(os.Stdin)
	line, _ := in.ReadString('\n')
	parts := strings.Fields(line)
	if len(parts) < 2 {
		os.Exit(2)
	}
	path := parts[1]
	switch path {
	case "/plain":
		os.Stdout.WriteString("plain body")
	case "/status":
		os.Stdout.WriteString("HTTP/1.1 201 Created\r\nX-Thing: 1\r\nContent-Length: 2\r\n\r\nok")
	case "/echo":
		var n int
		for {
			h, _ := in.ReadString('\n')
			if h == "\r\n" || h == "" {
				break
			}
		}
		b, _ := io.ReadAll(in)
		n = len(b)
		fmt.Printf("got %d bytes", n)
	case "/fail":
		os.Exit(1)
	case "/spin":
		for {
		}
	case "/big":
		os.Stdout.Write(make([]byte, 2<<20))
	default:
		os.Stdout.WriteString("HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
	}
}
