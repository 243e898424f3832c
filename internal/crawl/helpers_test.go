package crawl

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/leakcheck"
)

// TestMain fails the package when tests leave goroutines behind: every
// crawl must have ended its workers when Run returns.
func TestMain(m *testing.M) {
	os.Exit(leakcheck.Main(m, "crawl", leakcheck.Options{IdleHTTP: true}))
}

// ---------------------------------------------------------------------------
// A test site

// resp is what the test site answers for one path.
type resp struct {
	status int
	body   string
	ctype  string
	header map[string]string
	sleep  time.Duration
	hang   bool   // wait until the request is canceled
	to     string // redirect target (status 301 unless set)
}

// site is a loopback web site. Its pages are keyed by path (with query),
// or by host+path for name-based virtual hosts (see nameDoer).
type site struct {
	srv *httptest.Server

	mu       sync.Mutex
	pages    map[string]resp
	gen      func(path string) (resp, bool) // pages made on the fly
	log      []hit
	inflight atomic.Int32
	peak     atomic.Int32
	perHost  map[string]*[2]int32 // in flight, peak
}

type hit struct {
	host, path, ua string
	at             time.Time
}

func newSite(t testing.TB, pages map[string]resp) *site {
	t.Helper()
	s := &site{pages: pages, perHost: map[string]*[2]int32{}}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	return s
}

// URL returns the absolute URL of a path on the site.
func (s *site) URL(path string) string { return s.srv.URL + path }

func (s *site) serve(w http.ResponseWriter, r *http.Request) {
	n := s.inflight.Add(1)
	defer s.inflight.Add(-1)
	for {
		p := s.peak.Load()
		if n <= p || s.peak.CompareAndSwap(p, n) {
			break
		}
	}
	path := r.URL.RequestURI()
	s.mu.Lock()
	s.log = append(s.log, hit{host: r.Host, path: path, ua: r.UserAgent(), at: time.Now()})
	ph := s.perHost[r.Host]
	if ph == nil {
		ph = new([2]int32)
		s.perHost[r.Host] = ph
	}
	ph[0]++
	ph[1] = max(ph[1], ph[0])
	p, ok := s.pages[r.Host+path]
	if !ok {
		p, ok = s.pages[path]
	}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		ph[0]--
		s.mu.Unlock()
	}()
	if !ok && s.gen != nil {
		p, ok = s.gen(path)
	}
	if !ok {
		http.NotFound(w, r)
		return
	}
	if p.hang {
		<-r.Context().Done()
		return
	}
	if p.sleep > 0 {
		select {
		case <-time.After(p.sleep):
		case <-r.Context().Done():
			return
		}
	}
	for k, v := range p.header {
		w.Header().Set(k, v)
	}
	if p.to != "" {
		http.Redirect(w, r, p.to, cmp.Or(p.status, http.StatusMovedPermanently))
		return
	}
	w.Header().Set("Content-Type", cmp.Or(p.ctype, "text/html; charset=utf-8"))
	w.WriteHeader(cmp.Or(p.status, http.StatusOK))
	io.WriteString(w, p.body)
}

// hits returns the requests for paths, in order ("host" prefix omitted).
func (s *site) hits() []hit {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.log)
}

func (s *site) paths() []string {
	var out []string
	for _, h := range s.hits() {
		out = append(out, h.path)
	}
	return out
}

func (s *site) count(path string) int {
	n := 0
	for _, p := range s.paths() {
		if p == path {
			n++
		}
	}
	return n
}

// page returns an HTML page with a title and links.
func page(title string, hrefs ...string) resp {
	return resp{body: pageHTML(title, "", hrefs...)}
}

func pageHTML(title, head string, hrefs ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "<!doctype html><html><head><title>%s</title>%s</head><body><h1>%s</h1>", title, head, title)
	for _, h := range hrefs {
		fmt.Fprintf(&b, `<p><a href="%s">link</a></p>`, html.EscapeString(h))
	}
	b.WriteString("</body></html>")
	return b.String()
}

// ---------------------------------------------------------------------------
// Doers

// httpDoer is a Doer over a plain http.Client (test code may dial
// loopback). names maps host names to the site's address, so that a test
// can crawl www.site.test without DNS: the request goes to the site with
// the name in its Host header, and redirects are followed by hand so that
// each hop is mapped again. fail, when set, may answer instead of the
// network.
type httpDoer struct {
	client *http.Client
	names  map[string]string // host name → host:port of a loopback server
	fail   func(u string) error
	calls  atomic.Int64
}

func newDoer(s *site, names ...string) *httpDoer {
	d := &httpDoer{client: &http.Client{
		Transport: &http.Transport{MaxIdleConnsPerHost: 64},
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}, names: map[string]string{}}
	for _, n := range names {
		d.names[n] = s.srv.Listener.Addr().String()
	}
	return d
}

func (d *httpDoer) close() { d.client.CloseIdleConnections() }

func (d *httpDoer) Do(ctx context.Context, req *airlock.HTTPRequest) (*airlock.HTTPResponse, error) {
	d.calls.Add(1)
	target := req.URL
	var redirects []string
	for hop := 0; ; hop++ {
		if d.fail != nil {
			if err := d.fail(target); err != nil {
				return nil, err
			}
		}
		u, err := url.Parse(target)
		if err != nil {
			return nil, err
		}
		dial := *u
		if addr, ok := d.names[u.Hostname()]; ok {
			dial.Host = addr
		}
		hr, err := http.NewRequestWithContext(ctx, cmp.Or(req.Method, "GET"), dial.String(), nil)
		if err != nil {
			return nil, err
		}
		hr.Host = u.Host
		for k, v := range req.Header {
			hr.Header[k] = v
		}
		res, err := d.client.Do(hr)
		if err != nil {
			return nil, err
		}
		body, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil {
			return nil, err
		}
		if loc := res.Header.Get("Location"); res.StatusCode/100 == 3 && loc != "" {
			if hop == 5 {
				return nil, airlock.Errorf(airlock.CodeUpstream, "redirect_limit", "too many redirects")
			}
			next, err := u.Parse(loc)
			if err != nil {
				return nil, err
			}
			redirects = append(redirects, target)
			target = next.String()
			continue
		}
		return &airlock.HTTPResponse{
			Status: res.StatusCode, Header: res.Header, Body: body, URL: target,
			Redirects: redirects, Proto: res.Proto,
		}, nil
	}
}

// ---------------------------------------------------------------------------
// A page function: links, title and robots meta with the x/net/html tokenizer

func linkPage(_ context.Context, r *airlock.HTTPResponse, _ string) (Extracted, error) {
	ct := strings.Join(headerValues(r.Header, "Content-Type"), ",")
	if ct != "" && !strings.Contains(ct, "html") {
		return Extracted{}, airlock.Errorf(airlock.CodeUpstream, "type", "unsupported content type %q", ct)
	}
	var ex Extracted
	p := &airlock.Page{}
	z := html.NewTokenizer(bytes.NewReader(r.Body))
	inTitle := false
	for {
		switch z.Next() {
		case html.ErrorToken:
			ex.Page = p
			return ex, nil
		case html.TextToken:
			if inTitle {
				p.Title += string(z.Text())
			}
		case html.EndTagToken:
			inTitle = false
		case html.StartTagToken, html.SelfClosingTagToken:
			name, hasAttr := z.TagName()
			switch string(name) {
			case "title":
				inTitle = true
			case "a":
				for hasAttr {
					var k, v []byte
					k, v, hasAttr = z.TagAttr()
					if string(k) == "href" {
						ex.Links = append(ex.Links, string(v))
					}
				}
			case "meta":
				var mname, content string
				for hasAttr {
					var k, v []byte
					k, v, hasAttr = z.TagAttr()
					switch string(k) {
					case "name":
						mname = strings.ToLower(string(v))
					case "content":
						content = strings.ToLower(string(v))
					}
				}
				if mname == "robots" || mname == ProductToken {
					ex.NoIndex = ex.NoIndex || strings.Contains(content, "noindex") || strings.Contains(content, "none")
					ex.NoFollow = ex.NoFollow || strings.Contains(content, "nofollow") || strings.Contains(content, "none")
				}
			}
		}
	}
}

// ---------------------------------------------------------------------------
// Running a crawl

type crawlResult struct {
	pages    []*airlock.Page
	sum      *airlock.CrawlSummary
	err      error
	progress []airlock.CrawlProgress
	at       []time.Time
}

func (c *crawlResult) urls() []string {
	var out []string
	for _, p := range c.pages {
		out = append(out, p.URL)
	}
	return out
}

func (c *crawlResult) skipped(reason airlock.Reason) []string {
	var out []string
	for _, s := range c.sum.Skipped {
		if s.Reason == reason {
			out = append(out, s.URL)
		}
	}
	slices.Sort(out)
	return out
}

func crawlWith(t testing.TB, ctx context.Context, cfg Config, req airlock.CrawlRequest) *crawlResult {
	t.Helper()
	var c crawlResult
	if cfg.Page == nil {
		cfg.Page = linkPage
	}
	c.sum, c.err = Run(ctx, cfg, req, func(p *airlock.Page) error {
		c.pages = append(c.pages, p)
		return nil
	}, func(p airlock.CrawlProgress) {
		c.progress = append(c.progress, p)
		c.at = append(c.at, time.Now())
	})
	return &c
}

// crawlSite crawls with an httpDoer on s and fails the test on error.
func crawlSite(t testing.TB, s *site, req airlock.CrawlRequest) *crawlResult {
	t.Helper()
	d := newDoer(s)
	defer d.close()
	c := crawlWith(t, t.Context(), Config{Doer: d}, req)
	if c.err != nil {
		t.Fatalf("Run() error = %v", c.err)
	}
	return c
}
