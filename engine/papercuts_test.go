package engine_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/engine"
	"github.com/airlockhq/airlock/internal/provider/searxng"
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

// TestBinaryUnsupported: a body the extractor cannot read (an image, an
// unlabelled binary) is an unsupported_content error naming its type and
// size, never an empty page; a crawl skips it with reason type.
func TestBinaryUnsupported(t *testing.T) {
	png := "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"
	srv := serveOn(t, "127.0.0.1", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/i.png":
			w.Header().Set("Content-Type", "image/png")
			io.WriteString(w, png)
		case "/blob":
			w.Header().Set("Content-Type", "application/octet-stream")
			io.WriteString(w, "\x00\x01\x02\x03")
		default:
			http.NotFound(w, r)
		}
	}))
	e := newEngine(t, engine.Config{
		DefaultTenant: "t",
		Tenants:       map[string]engine.TenantConfig{"t": {Profile: "posix", Exceptions: []string{"127.0.0.1"}}},
	})
	p := airlock.Principal{Tenant: "t"}
	ctx := testCtx(t)
	for _, tt := range []struct{ path, ctype, size string }{
		{"/i.png", "image/png", "16 bytes"},
		{"/blob", "application/octet-stream", "4 bytes"},
	} {
		page, err := e.Fetch(ctx, p, airlock.FetchRequest{URL: srv.URL + tt.path})
		if err == nil {
			t.Errorf("fetch %s: page %+v, want an error", tt.path, page)
			continue
		}
		ae := wantErr(t, err, airlock.CodeUpstream, string(airlock.ReasonUnsupportedContent))
		if !strings.Contains(ae.Message, tt.ctype) || !strings.Contains(ae.Message, tt.size) {
			t.Errorf("fetch %s: message %q does not name %s and %s", tt.path, ae.Message, tt.ctype, tt.size)
		}
	}
	sum, err := e.Crawl(ctx, p, airlock.CrawlRequest{URLs: []string{srv.URL + "/i.png"}}, func(pg *airlock.Page) error {
		t.Errorf("crawl emitted %+v", pg)
		return nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.Skipped) != 1 || sum.Skipped[0].Reason != "type" || !strings.Contains(sum.Skipped[0].Detail, "image/png") {
		t.Errorf("crawl skipped %+v, want the image skipped as type", sum.Skipped)
	}
}

// TestCancelClassified: a caller that gives up mid-request (Ctrl-C, a
// closed connection) gets the same answer from every verb: code timeout,
// reason canceled.
func TestCancelClassified(t *testing.T) {
	started := make(chan struct{}, 64)
	srv := serveOn(t, "127.0.0.1", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			http.NotFound(w, r)
			return
		}
		started <- struct{}{}
		select {
		case <-r.Context().Done():
		case <-time.After(20 * time.Second): // a hang guard only
		}
	}))
	e := newEngine(t, engine.Config{
		DefaultTenant: "t",
		Tenants:       map[string]engine.TenantConfig{"t": {Profile: "posix", Exceptions: []string{"127.0.0.1"}}},
		Browse:        engine.BrowseConfig{SearchProvider: "searxng", SearXNGURL: srv.URL},
	}, engine.WithProviders(engine.Provider{Name: searxng.Name, Capabilities: []string{airlock.VerbSearch},
		New: func(func(string) string) (engine.BrowseProvider, error) {
			return searxng.New(searxng.Options{URL: srv.URL})
		}}))
	p := airlock.Principal{Tenant: "t"}
	verbs := []struct {
		name string
		call func(ctx context.Context) error
	}{
		{"fetch", func(ctx context.Context) error {
			_, err := e.Fetch(ctx, p, airlock.FetchRequest{URL: srv.URL + "/page"})
			return err
		}},
		{"http", func(ctx context.Context) error {
			_, err := e.HTTP(ctx, p, airlock.HTTPRequest{URL: srv.URL + "/page"})
			return err
		}},
		{"search", func(ctx context.Context) error {
			_, _, err := e.Search(ctx, p, airlock.SearchRequest{Query: "x"})
			return err
		}},
		{"crawl", func(ctx context.Context) error {
			_, err := e.Crawl(ctx, p, airlock.CrawlRequest{Seed: srv.URL + "/page", MaxPages: 1}, func(*airlock.Page) error { return nil }, nil)
			return err
		}},
	}
	for _, v := range verbs {
		ctx, cancel := context.WithCancel(testCtx(t))
		go func() {
			select {
			case <-started:
			case <-time.After(20 * time.Second):
			}
			cancel()
		}()
		err := v.call(ctx)
		cancel()
		if code, reason := airlock.CodeOf(err), airlock.ReasonOf(err); code != airlock.CodeTimeout || reason != airlock.ReasonCanceled {
			t.Errorf("%s canceled mid-request: %s/%s (%v), want timeout/canceled", v.name, code, reason, err)
		}
	}
}

// TestFetchTimeoutAndBodyCap: a fetch's timeout is the caller's, under the
// limits.fetch_timeout ceiling; a body past the cap names the key that
// raises it.
func TestFetchTimeoutAndBodyCap(t *testing.T) {
	srv := serveOn(t, "127.0.0.1", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		if r.URL.Path == "/big" {
			io.WriteString(w, strings.Repeat("x", 4096))
			return
		}
		select {
		case <-r.Context().Done():
		case <-time.After(20 * time.Second): // a hang guard only
		}
	}))
	e := newEngine(t, engine.Config{
		DefaultTenant: "t",
		Tenants:       map[string]engine.TenantConfig{"t": {Profile: "posix", Exceptions: []string{"127.0.0.1"}, Initiators: []string{"model", "person"}}},
		Egress:        engine.EgressConfig{MaxBodyBytes: 1024},
	})
	p := airlock.Principal{Tenant: "t"}
	ctx := testCtx(t)
	_, err := e.Fetch(ctx, p, airlock.FetchRequest{URL: srv.URL + "/slow", Timeout: airlock.Duration(time.Hour)})
	ae := wantErr(t, err, airlock.CodeInvalid, string(airlock.ReasonLimit))
	if !strings.Contains(ae.Message, "fetch_timeout") {
		t.Errorf("over the ceiling: %q does not name limits.fetch_timeout", ae.Message)
	}
	// A person's fetch: no robots.txt first (this server never answers).
	_, err = e.Fetch(ctx, p, airlock.FetchRequest{URL: srv.URL + "/slow", Initiator: airlock.InitiatorPerson, Timeout: airlock.Duration(200 * time.Millisecond)})
	wantErr(t, err, airlock.CodeTimeout, string(airlock.ReasonTimeout))
	_, err = e.Fetch(ctx, p, airlock.FetchRequest{URL: srv.URL + "/big", Initiator: airlock.InitiatorPerson})
	ae = wantErr(t, err, airlock.CodeTooLarge, "")
	if !strings.Contains(ae.Message, "egress.max_body_bytes") {
		t.Errorf("too large: %q does not name egress.max_body_bytes", ae.Message)
	}
}
