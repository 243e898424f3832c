package api

import (
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// docRoute finds "/api/..." paths in prose, with the method before them
// when there is one. A path that is part of a file name (internal/api/...)
// is not a route: the character before it may not be a letter, '_', '.',
// '-' or '/'.
var docRoute = regexp.MustCompile(`(?:^|[^A-Za-z_.\-/])(?:(GET|POST|PUT|PATCH|DELETE|HEAD)\s+)?(?:https?://[A-Za-z0-9.:\[\]]+)?(/api/[A-Za-z0-9_{}./:-]*)`)

// TestDocRoutesExist: every /api/ route that README.md or docs/*.md
// mention is served by the API's mux (for the method named with it, else
// for some method).
func TestDocRoutesExist(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "../../README.md")
	s := newServer(newEngine(t, testConfig("http://127.0.0.1:1/")), Options{})
	seen := 0
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			for _, m := range docRoute.FindAllStringSubmatch(line, -1) {
				method, path := m[1], strings.TrimRight(m[2], ".:")
				seen++
				methods := []string{method}
				if method == "" {
					methods = []string{"GET", "POST", "DELETE"}
				}
				ok := false
				for _, meth := range methods {
					// The mux matches {id} and NAME segments like any value.
					r := httptest.NewRequest(meth, "http://airlock.test"+path, nil)
					if _, pattern := s.mux.Handler(r); pattern != "" {
						ok = true
					}
				}
				if !ok {
					t.Errorf("%s:%d: %s %s is not a route of the API", filepath.Base(file), i+1, method, path)
				}
			}
		}
	}
	if seen < 20 {
		t.Fatalf("found %d routes in the docs; the pattern no longer reads them", seen)
	}
}
