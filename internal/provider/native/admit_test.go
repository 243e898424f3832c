package native

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/extract"
)

// countingBudget refuses when refuse is set and records what was asked.
type countingBudget struct {
	mu       sync.Mutex
	refuse   error
	asked    []int64
	released int
}

func (b *countingBudget) Acquire(_ context.Context, n int64) (func(), error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.asked = append(b.asked, n)
	if b.refuse != nil {
		return nil, b.refuse
	}
	return func() { b.mu.Lock(); b.released++; b.mu.Unlock() }, nil
}

// discoverablePage is an HTML page long enough for the crawler's
// tokenizer pass (crawl.Discover) to read it.
func discoverablePage() *airlock.HTTPResponse {
	body := `<html><head><title>A page</title></head><body>` +
		strings.Repeat(`<p>Lorem ipsum dolor sit amet, consectetur adipiscing elit. <a href="/next">next</a></p>`, 40)
	return &airlock.HTTPResponse{Status: 200, URL: "https://site.example/", Body: []byte(body),
		Header: map[string][]string{"Content-Type": {"text/html; charset=utf-8"}}}
}

// TestPageFuncExtractNoneTakesBudget: a page read for links only
// (--extract none) asks the extractor's memory budget for room for its
// body as the extractor does, and a refusal is the page's error.
func TestPageFuncExtractNoneTakesBudget(t *testing.T) {
	resp := discoverablePage()
	b := &countingBudget{}
	ex, err := pageFunc(extract.WithBudget(context.Background(), b), resp, airlock.ExtractNone)
	if err != nil || len(ex.Links) == 0 {
		t.Fatalf("pageFunc: %v, %d links", err, len(ex.Links))
	}
	if len(b.asked) == 0 || b.asked[0] != int64(len(resp.Body)) || b.released != len(b.asked) {
		t.Errorf("budget asked for %v (released %d), want %d bytes first, all released", b.asked, b.released, len(resp.Body))
	}

	refused := airlock.Errorf(airlock.CodeTooLarge, airlock.ReasonMemoryLimit, "no room")
	b = &countingBudget{refuse: refused}
	if _, err := pageFunc(extract.WithBudget(context.Background(), b), resp, airlock.ExtractNone); !errors.Is(err, refused) {
		t.Errorf("pageFunc with a refusing budget: %v, want the budget's error", err)
	}
}

// TestPageFuncExtractNoneStopsWithContext: a cancelled crawl does not
// read its page for links.
func TestPageFuncExtractNoneStopsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := pageFunc(ctx, discoverablePage(), airlock.ExtractNone); !errors.Is(err, context.Canceled) {
		t.Errorf("pageFunc with a cancelled context: %v, want context.Canceled", err)
	}
}
