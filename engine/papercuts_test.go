package engine_test

import (
	"errors"
	"net/http"
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/engine"
)

// TestCallerURLClassified: a URL the caller gives that is not an absolute
// URL, or whose scheme is not http or https, is invalid on every verb that
// takes one; an ambiguous host and a refused redirect location (to ftp:
// too) stay denied and are audited as deny.
func TestCallerURLClassified(t *testing.T) {
	redir := serveOn(t, "127.0.0.1", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "ftp://127.0.0.1/x", http.StatusFound)
	}))
	e := newEngine(t, engine.Config{
		DefaultTenant: "t",
		Tenants:       map[string]engine.TenantConfig{"t": {Profile: "posix", Exceptions: []string{"127.0.0.1"}}},
	})
	p := airlock.Principal{Tenant: "t"}
	ctx := testCtx(t)
	verbs := []struct {
		name string
		call func(url string) error
	}{
		{"fetch", func(u string) error { _, err := e.Fetch(ctx, p, airlock.FetchRequest{URL: u}); return err }},
		{"http", func(u string) error { _, err := e.HTTP(ctx, p, airlock.HTTPRequest{URL: u}); return err }},
		{"fetch_many", func(u string) error {
			res, _, err := e.FetchMany(ctx, p, []string{u}, airlock.FetchRequest{})
			if err != nil {
				return err
			}
			if len(res) != 1 || res[0].Error == nil {
				t.Fatalf("fetch_many %q: %+v, want one error", u, res)
			}
			return res[0].Error
		}},
		{"crawl", func(u string) error {
			_, err := e.Crawl(ctx, p, airlock.CrawlRequest{Seed: u, MaxPages: 1}, func(*airlock.Page) error { return nil }, nil)
			return err
		}},
	}
	tests := []struct {
		url  string
		code airlock.Code
	}{
		{"not a url", airlock.CodeInvalid},
		{"htp:/x", airlock.CodeInvalid},
		{"ftp://127.0.0.1/x", airlock.CodeInvalid},
		{"127.0.0.1:80", airlock.CodeInvalid},
		{"http://0x7f.1/", airlock.CodeDenied},
		{"http://a@127.0.0.1/", airlock.CodeDenied},
	}
	for _, v := range verbs {
		for _, tt := range tests {
			if v.name == "crawl" && tt.code == airlock.CodeDenied {
				continue // a refused seed is a page error in the summary
			}
			err := v.call(tt.url)
			if got := airlock.CodeOf(err); got != tt.code {
				t.Errorf("%s %q: code %q (%v), want %q", v.name, tt.url, got, err, tt.code)
			}
		}
	}
	for _, v := range verbs[:2] {
		err := v.call(redir.URL + "/")
		if got := airlock.CodeOf(err); got != airlock.CodeDenied {
			t.Errorf("%s redirect to ftp: code %q (%v), want denied", v.name, got, err)
		}
		var ae *airlock.Error
		if errors.As(err, &ae) && ae.DecisionID != "" {
			flush(t, e)
			recs := auditAll(t, e, airlock.AuditQuery{})
			found := false
			for _, r := range recs {
				if r.ID == ae.DecisionID {
					found = true
					if r.Outcome != "deny" {
						t.Errorf("%s redirect to ftp: audited %q, want deny", v.name, r.Outcome)
					}
				}
			}
			if !found {
				t.Errorf("%s redirect to ftp: decision %s not audited", v.name, ae.DecisionID)
			}
		} else {
			t.Errorf("%s redirect to ftp: no decision id in %v", v.name, err)
		}
	}
}
