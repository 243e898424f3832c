package api

import (
	"net/http"
	"testing"

	"github.com/airlockhq/airlock"
)

// TestFetchErrorPages: options.error_pages answers a 404 page as a page
// with its status; without it the fetch is an upstream http_status error.
func TestFetchErrorPages(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	r := f.do("POST", "/api/browse", acmeToken, map[string]any{"verb": "fetch", "url": f.site.URL + "/missing", "options": map[string]any{"error_pages": true}})
	var page airlock.Page
	if r.StatusCode != http.StatusOK {
		t.Fatalf("error_pages fetch of a 404: %s, want 200", r)
	}
	r.decode(t, &page)
	if page.Status != http.StatusNotFound {
		t.Errorf("status = %d, want 404", page.Status)
	}
	r = f.do("POST", "/api/browse", acmeToken, map[string]any{"verb": "fetch", "url": f.site.URL + "/missing"})
	if r.StatusCode != http.StatusBadGateway {
		t.Errorf("fetch of a 404 without error_pages: %s, want 502", r)
	}
}
