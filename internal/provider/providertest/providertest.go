// Package providertest holds test helpers shared by the browse providers:
// a Doer that reaches only one loopback httptest server.
package providertest

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

// Doer is a test's airlock.Doer: it sends requests to one loopback httptest
// server and refuses (and reports) any other host, so that no test can reach
// a real service.
type Doer struct {
	t *testing.T
	// Server is the loopback server every request goes to.
	Server *httptest.Server
	// Fail, when set, answers a request instead of the server.
	Fail func(r *airlock.HTTPRequest) error

	mu   sync.Mutex
	reqs []airlock.HTTPRequest
}

// NewDoer starts a loopback server for h, closed when the test ends.
func NewDoer(t *testing.T, h http.Handler) *Doer {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &Doer{t: t, Server: srv}
}

// Do implements airlock.Doer.
func (d *Doer) Do(ctx context.Context, r *airlock.HTTPRequest) (*airlock.HTTPResponse, error) {
	d.mu.Lock()
	d.reqs = append(d.reqs, *r)
	fail := d.Fail
	d.mu.Unlock()
	u, err := url.Parse(r.URL)
	if err != nil {
		return nil, err
	}
	if want, _ := url.Parse(d.Server.URL); u.Host != want.Host {
		d.t.Errorf("request to %s: tests may only reach the loopback server %s", r.URL, d.Server.URL)
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
	resp, err := d.Server.Client().Do(hr)
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

// Requests returns the requests made so far.
func (d *Doer) Requests() []airlock.HTTPRequest {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]airlock.HTTPRequest(nil), d.reqs...)
}
