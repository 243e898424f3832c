package brave

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"

	airlock "github.com/airlockhq/airlock"
)

// testDoer is the test's airlock.Doer: it sends requests to one loopback
// httptest server and refuses (and reports) any other host, so that no test
// can reach a real search engine.
type testDoer struct {
	t   *testing.T
	srv *httptest.Server

	mu   sync.Mutex
	reqs []airlock.HTTPRequest
	// fail, when set, answers a request instead of the server.
	fail func(r *airlock.HTTPRequest) error
}

func newTestDoer(t *testing.T, h http.Handler) *testDoer {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &testDoer{t: t, srv: srv}
}

func (d *testDoer) Do(ctx context.Context, r *airlock.HTTPRequest) (*airlock.HTTPResponse, error) {
	d.mu.Lock()
	d.reqs = append(d.reqs, *r)
	fail := d.fail
	d.mu.Unlock()
	u, err := url.Parse(r.URL)
	if err != nil {
		return nil, err
	}
	if want, _ := url.Parse(d.srv.URL); u.Host != want.Host {
		d.t.Errorf("request to %s: tests may only reach the loopback server %s", r.URL, d.srv.URL)
		return nil, fmt.Errorf("refused non-loopback request to %s", u.Host)
	}
	if fail != nil {
		if err := fail(r); err != nil {
			return nil, err
		}
	}
	method := r.Method
	if method == "" {
		method = http.MethodGet
	}
	hr, err := http.NewRequestWithContext(ctx, method, r.URL, bytes.NewReader(r.Body))
	if err != nil {
		return nil, err
	}
	for k, vs := range r.Header {
		for _, v := range vs {
			hr.Header.Add(k, v)
		}
	}
	resp, err := d.srv.Client().Do(hr)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	return &airlock.HTTPResponse{Status: resp.StatusCode, Header: resp.Header, Body: body, URL: resp.Request.URL.String(), Proto: resp.Proto}, nil
}

func (d *testDoer) requests() []airlock.HTTPRequest {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]airlock.HTTPRequest(nil), d.reqs...)
}
