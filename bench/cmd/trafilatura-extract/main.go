// Command trafilatura-extract runs go-trafilatura v1.12.2 alone (fallback
// on, its defaults otherwise, as its published scores run it) with the
// command line and output of `airlock extract`, so that an evaluation
// script that calls
//
//	BIN extract --url U --format json FILE
//
// and reads {"text": ...} can score it side by side with airlock:
//
//	go build -o /tmp/trafilatura-extract ./cmd/trafilatura-extract
//
// It lives in the bench module so that go-trafilatura and its
// dependencies stay out of the main module.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"

	trafilatura "github.com/markusmobius/go-trafilatura"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "extract" {
		args = args[1:]
	}
	fs := flag.NewFlagSet("extract", flag.ContinueOnError)
	fs.SetOutput(stderr)
	rawURL := fs.String("url", "", "the page's URL (base of relative links)")
	format := fs.String("format", "json", "output format: json or text")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 1 || (*format != "json" && *format != "text") {
		fmt.Fprintln(stderr, "usage: trafilatura-extract extract --url URL [--format json|text] FILE")
		return 2
	}
	body, err := os.ReadFile(fs.Arg(0))
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	opts := trafilatura.Options{EnableFallback: true}
	if u, err := url.Parse(*rawURL); err == nil && u.IsAbs() {
		opts.OriginalURL = u
	}
	text := ""
	if res, err := trafilatura.Extract(bytes.NewReader(body), opts); err == nil && res != nil {
		text = res.ContentText
	}
	if *format == "text" {
		fmt.Fprintln(stdout, text)
		return 0
	}
	if err := json.NewEncoder(stdout).Encode(map[string]string{"text": text}); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}
