//go:build wasip1

// Command summarise is an Airlock guest that fetches a page through the
// engine and prints a short summary: title, description, the outline and
// the first sentences of the main text. It has no socket and no DNS; under
// the network profile the engine fetches the page for it, under compute it
// does not even link.
//
//	GOOS=wasip1 GOARCH=wasm go build -o summarise.wasm ./examples/guests/summarise
//	airlock run summarise.wasm --profile network -- https://example.com/ 3
package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/guest"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: summarise URL [SENTENCES]")
		os.Exit(2)
	}
	n := 3
	if len(os.Args) > 2 {
		if v, err := strconv.Atoi(os.Args[2]); err == nil && v > 0 {
			n = v
		}
	}
	page, err := guest.Fetch(os.Args[1])
	if err != nil {
		var e *airlock.Error
		if errors.As(err, &e) {
			fmt.Fprintf(os.Stderr, "summarise: %s (%s/%s)\n", e.Message, e.Code, e.Reason)
		} else {
			fmt.Fprintln(os.Stderr, "summarise:", err)
		}
		if guest.IsDenied(err) {
			os.Exit(3)
		}
		os.Exit(1)
	}
	fmt.Printf("# %s\n", page.Title)
	if page.Description != "" {
		fmt.Printf("\n%s\n", page.Description)
	}
	if len(page.Headings) > 0 {
		fmt.Println("\nOutline:")
		for i, h := range page.Headings {
			if i == 10 {
				break
			}
			fmt.Printf("%s- %s\n", strings.Repeat("  ", max(h.Level-1, 0)), h.Text)
		}
	}
	if s := sentences(page.Text, n); s != "" {
		fmt.Printf("\nSummary: %s\n", s)
	}
	fmt.Printf("\n(%d words, %d links; %s, decision %s)\n", len(strings.Fields(page.Text)), len(page.Links), page.URL, page.DecisionID)
}

// sentences returns the first n sentences of text.
func sentences(text string, n int) string {
	text = strings.Join(strings.Fields(text), " ")
	var out strings.Builder
	for n > 0 && text != "" {
		i := strings.IndexAny(text, ".!?")
		if i < 0 {
			out.WriteString(text)
			break
		}
		out.WriteString(text[:i+1])
		text = strings.TrimSpace(text[i+1:])
		if text != "" && n > 1 {
			out.WriteByte(' ')
		}
		n--
	}
	return strings.TrimSpace(out.String())
}
