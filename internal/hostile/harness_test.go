package hostile

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/engine"
	"github.com/airlockhq/airlock/internal/extract"
	"github.com/airlockhq/airlock/internal/leakcheck"
)

// The child process: TestChild runs one case, named by caseEnv, against the
// server at urlEnv, and prints its result as one line after resultPrefix.
const (
	caseEnv      = "AIRLOCK_HOSTILE_CASE"
	urlEnv       = "AIRLOCK_HOSTILE_URL"
	resultPrefix = "hostile-result "
)

// The caps every case runs under (a case may change one), small so that a
// cap that does not hold shows in the child's memory at once.
const (
	bodyCap      = 1 << 20 // egress.max_body_bytes
	decodedCap   = 4 << 20 // egress.max_decoded_bytes
	maxRedirects = 3       // egress.max_redirects
	// shortTimeout is the fetch timeout of the cases about time.
	shortTimeout = 300 * time.Millisecond
	// longTimeout is the fetch timeout of the other cases: a hang guard.
	longTimeout = 3 * time.Second * timeScale
)

// A case's peak RSS bound is baseRSS + k × its cap, k doubled under the
// race detector. baseRSS (norace_test.go, race_test.go) is the peak of the
// baseline case, which does nothing hostile, with headroom.

// pdfChildInput bounds what the PDF child reads, as the airlock binary's
// hidden subcommand does (internal/cli).
const pdfChildInput = 256 << 20

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == extract.PDFSubcommand {
		// extract.PDFCommand re-executes the running binary with the PDF
		// subcommand: act as the airlock binary does, so that the PDF cases
		// run the real launcher and the real reader.
		if err := extract.WritePDFText(os.Stdout, os.Stdin, pdfChildInput); err != nil {
			fmt.Fprintln(os.Stderr, "airlock:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if os.Getenv(caseEnv) != "" || os.Getenv(spawnerEnv) != "" {
		os.Exit(m.Run()) // a child: its servers are in the parent
	}
	os.Exit(leakcheck.Main(m, "hostile", leakcheck.Options{}))
}

// Calls a case can make.
const (
	callFetch = "fetch" // a person's fetch: what the server sends is all it reads
	// callModelFetch is a model's fetch, which reads the origin's
	// robots.txt first.
	callModelFetch = "model_fetch"
	callHTTP       = "http"
	callCrawl      = "crawl"
)

// hcase is one hostile input and what the engine must make of it.
type hcase struct {
	name string
	// server returns the hostile handler; it runs in the parent only.
	server func() http.Handler
	call   string
	path   string               // appended to the server's URL
	crawl  airlock.CrawlRequest // callCrawl: Seed is set to the URL
	// timeout is the configured fetch timeout (longTimeout when zero); the
	// call must end within ten times it.
	timeout time.Duration
	// pdfTimeout, when set, is the PDF child's time limit (extract.PDFTimeout).
	pdfTimeout time.Duration
	egress     func(*engine.EgressConfig) // changes to the caps above
	// code and reason are the error wanted ("" and "": success).
	code   airlock.Code
	reason airlock.Reason
	// minElapsed, when set, is how long the call must at least take: the
	// cases about a timeout end because of it, not of something earlier.
	minElapsed time.Duration
	// capBytes and k bound the child's peak RSS: baseRSS + k × capBytes
	// (k doubled under the race detector).
	capBytes int64
	k        int64
	// check asserts the rest of the result and what the server saw.
	check func(t *testing.T, r result, hits *hits)
}

func (c hcase) fetchTimeout() time.Duration {
	if c.timeout > 0 {
		return c.timeout
	}
	return longTimeout
}

// hangGuard is how long the call may take: ten times the longest timeout
// the case configures.
func (c hcase) hangGuard() time.Duration {
	d := c.fetchTimeout()
	if c.crawl.Timeout > d {
		d = c.crawl.Timeout
	}
	if c.pdfTimeout > d {
		d = c.pdfTimeout
	}
	return 10 * d
}

func (c hcase) rssBound() int64 {
	k := c.k
	if raceEnabled {
		k *= 2
	}
	return baseRSS + k*c.capBytes
}

// result is what the child reports.
type result struct {
	Code      airlock.Code `json:"code"`
	Reason    string       `json:"reason"`
	Message   string       `json:"message"`
	ElapsedMS int64        `json:"elapsed_ms"`
	// Fetch and HTTP.
	ContentType string   `json:"content_type"`
	Status      int      `json:"status"`
	Links       int      `json:"links"`
	TextBytes   int      `json:"text_bytes"`
	Truncated   []string `json:"truncated"`
	BodyBytes   int      `json:"body_bytes"`
	// Crawl.
	Pages   int               `json:"pages"`
	Fetched int               `json:"fetched"`
	Failed  int               `json:"failed"`
	Skipped []airlock.Skipped `json:"skipped"`
	Stopped string            `json:"stopped"`
	// ChildMaxRSSKB is the peak RSS of the child's largest child (the PDF
	// reader), from getrusage(RUSAGE_CHILDREN).
	ChildMaxRSSKB int64 `json:"child_max_rss_kb"`
	// HWMKB is the child's own peak RSS since its exec (VmHWM), which
	// the ru_maxrss the parent asserts on should match.
	HWMKB int64 `json:"hwm_kb"`
}

func (r result) skippedFor(reason string) int {
	n := 0
	for _, s := range r.Skipped {
		if s.Reason == airlock.Reason(reason) {
			n++
		}
	}
	return n
}

// hits counts the requests the hostile server got, by path.
type hits struct {
	mu    sync.Mutex
	paths map[string]int
	total int
}

func (h *hits) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		if h.paths == nil {
			h.paths = map[string]int{}
		}
		h.paths[r.URL.Path]++
		h.total++
		h.mu.Unlock()
		next.ServeHTTP(w, r)
	})
}

func (h *hits) count(path string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.paths[path]
}

func (h *hits) all() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.total
}

func lookup(name string) (hcase, bool) {
	for _, c := range cases() {
		if c.name == name {
			return c, true
		}
	}
	return hcase{}, false
}

// TestHostile runs every case in a child process and checks its outcome,
// its peak memory and, as a hang guard, its time.
func TestHostile(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process per case")
	}
	sp := startSpawner(t)
	seen := map[string]bool{}
	for _, c := range cases() {
		if seen[c.name] {
			t.Fatalf("two cases named %q", c.name)
		}
		seen[c.name] = true
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			runParent(t, sp, c)
		})
	}
}

func runParent(t *testing.T, sp *spawner, c hcase) {
	h := &hits{}
	srv := serve(t, h.wrap(c.server()))
	// The child gets the hang guard plus time to start; past that it is
	// killed and the case fails.
	limit := c.hangGuard() + 30*time.Second
	out := sp.run(t, spawnRequest{Case: c.name, URL: srv.URL, Limit: limit})
	if out.Killed {
		t.Fatalf("the child was killed after %s: the call hung", limit)
	}
	if out.Err != "" {
		t.Fatalf("child: %s\nstdout:\n%s\nstderr:\n%s", out.Err, tail(out.Stdout), tail(out.Stderr))
	}
	stdout := strings.NewReader(out.Stdout)
	var r result
	found := false
	sc := bufio.NewScanner(stdout)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if line, ok := strings.CutPrefix(sc.Text(), resultPrefix); ok {
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Fatalf("child result %q: %v", line, err)
			}
			found = true
		}
	}
	if !found {
		t.Fatalf("the child printed no result\nstdout:\n%s\nstderr:\n%s", tail(out.Stdout), tail(out.Stderr))
	}
	maxRSS := out.MaxRSSKB << 10
	t.Logf("%s: code=%q reason=%q in %d ms, peak RSS %.1f MiB (VmHWM %.1f MiB, bound %.1f MiB), server saw %d requests; PDF child peak %.1f MiB; message: %s",
		c.name, r.Code, r.Reason, r.ElapsedMS, mib(maxRSS), mib(r.HWMKB<<10), mib(c.rssBound()), h.all(), mib(r.ChildMaxRSSKB<<10), clip(r.Message, 300))

	if r.Code != c.code || airlock.Reason(r.Reason) != c.reason {
		t.Errorf("got code %q reason %q (%s), want code %q reason %q", r.Code, r.Reason, clip(r.Message, 300), c.code, c.reason)
	}
	if maxRSS > c.rssBound() {
		t.Errorf("peak RSS %.1f MiB is over the bound %.1f MiB (base %d MiB + %d × cap %d KiB)",
			mib(maxRSS), mib(c.rssBound()), baseRSS>>20, c.k, c.capBytes>>10)
	}
	elapsed := time.Duration(r.ElapsedMS) * time.Millisecond
	if elapsed > c.hangGuard() {
		t.Errorf("the call took %s, over the hang guard %s", elapsed, c.hangGuard())
	}
	if elapsed < c.minElapsed {
		t.Errorf("the call ended after %s, before its %s timeout: not because of it", elapsed, c.minElapsed)
	}
	if c.check != nil {
		c.check(t, r, h)
	}
}

// TestChild is the child process of TestHostile.
func TestChild(t *testing.T) {
	name := os.Getenv(caseEnv)
	if name == "" {
		t.Skip("the child process of TestHostile")
	}
	c, ok := lookup(name)
	if !ok {
		t.Fatalf("no case %q", name)
	}
	r, err := runChild(c, os.Getenv(urlEnv))
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("%s%s\n", resultPrefix, b)
}

func runChild(c hcase, base string) (result, error) {
	eg := engine.EgressConfig{FetchTimeout: c.fetchTimeout(), MaxRedirects: maxRedirects,
		MaxBodyBytes: bodyCap, MaxDecodedBytes: decodedCap}
	if c.egress != nil {
		c.egress(&eg)
	}
	if c.pdfTimeout > 0 {
		extract.PDFTimeout = c.pdfTimeout
	}
	e, err := engine.New(context.Background(), engine.Config{
		InMemory:      true,
		DefaultTenant: "t",
		Tenants:       map[string]engine.TenantConfig{"t": {Profile: "posix", Exceptions: []string{"127.0.0.1"}, Initiators: []string{"model", "person"}}},
		Egress:        eg,
	})
	if err != nil {
		return result{}, err
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		e.Close(ctx)
	}()
	// No deadline of the test's own: the caps under test must end the
	// call, and the parent kills a child that hangs.
	ctx := context.Background()
	p := airlock.Principal{Tenant: "t"}
	var r result
	start := time.Now()
	switch c.call {
	case callFetch, callModelFetch:
		initiator := airlock.InitiatorPerson
		if c.call == callModelFetch {
			initiator = airlock.InitiatorModel
		}
		page, err := e.Fetch(ctx, p, airlock.FetchRequest{URL: base + c.path, Initiator: initiator})
		if err == nil {
			r.ContentType, r.Status, r.Links, r.TextBytes, r.Truncated = page.ContentType, page.Status, len(page.Links), len(page.Text), page.Truncated
		}
		r.setErr(err)
	case callHTTP:
		resp, err := e.HTTP(ctx, p, airlock.HTTPRequest{URL: base + c.path})
		if err == nil {
			r.Status, r.BodyBytes = resp.Status, len(resp.Body)
		}
		r.setErr(err)
	case callCrawl:
		req := c.crawl
		req.Seed = base + c.path
		sum, err := e.Crawl(ctx, p, req, func(pg *airlock.Page) error {
			r.Links = max(r.Links, len(pg.Links))
			return nil
		}, nil)
		if err == nil {
			r.Pages, r.Fetched, r.Failed, r.Skipped, r.Stopped = sum.Pages, sum.Fetched, sum.Failed, sum.Skipped, sum.Stopped
		}
		r.setErr(err)
	default:
		return result{}, fmt.Errorf("case %q: unknown call %q", c.name, c.call)
	}
	r.ElapsedMS = time.Since(start).Milliseconds()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru); err == nil {
		r.ChildMaxRSSKB = ru.Maxrss
	}
	r.HWMKB = vmHWM()
	return r, nil
}

func (r *result) setErr(err error) {
	if err != nil {
		r.Code, r.Reason, r.Message = airlock.CodeOf(err), string(airlock.ReasonOf(err)), err.Error()
	}
}

// serve starts h on 127.0.0.1 (the address the engine's floor exception
// lifts), HTTP/1.1.
func serve(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

// vmHWM reads the peak RSS of this process's address space, in KiB.
func vmHWM() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

func tail(s string) string {
	const n = 4000
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
