package bench

// Whole-process comparisons (issue #20): each side runs as its own
// process, so start-up, configuration, the store and the audit flush are
// in the figures, as an agent calling the CLI sees them. The binaries are
// built once per run into a temporary directory; the sides alternate
// within one benchmark so that load on the machine hits both alike.
//
//	go test -run '^$' -bench Process -benchtime 1x .
//
// Each benchmark reports the medians (ms) and their ratio (airlock/other):
//   - BenchmarkProcessStart: `airlock version` against a hello-world Go
//     binary (20 runs each), with the peak RSS of both;
//   - BenchmarkProcessFetch: `airlock fetch` of a local 8 KB page against
//     curl (20 runs each);
//   - BenchmarkProcessCrawl: `airlock crawl --extract none` of the
//     generated site (crawlbench) against colly (cmd/collycrawl), at
//     concurrency 8 and per-host 8, with Airlock's defaults on (robots.txt,
//     politeness, policy, audit), and the peak RSS of both.

import (
	"bytes"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock/internal/crawl/crawlbench"
)

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// binaries builds airlock, collycrawl and a hello-world program once and
// returns their directory. BENCH_AIRLOCK, when set, is the airlock binary
// to measure instead of the one built from ../ (another branch's, say);
// BENCH_AIRLOCK_BASE, when set, is a second airlock binary that
// BenchmarkProcessCrawl runs alongside, reported as "base" (before and
// after in one run).
func binaries(b *testing.B) (dir, airlock string) {
	b.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "airlock-bench-")
		if buildErr != nil {
			return
		}
		hello := filepath.Join(binDir, "hello.go")
		if buildErr = os.WriteFile(hello, []byte("package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"hello\") }\n"), 0o600); buildErr != nil {
			return
		}
		for _, args := range [][]string{
			{"..", "build", "-o", filepath.Join(binDir, "airlock"), "./cmd/airlock"}, // in the main module
			{".", "build", "-o", filepath.Join(binDir, "collycrawl"), "./cmd/collycrawl"},
			{".", "build", "-o", filepath.Join(binDir, "hello"), hello},
		} {
			cmd := exec.Command("go", args[1:]...)
			cmd.Dir = args[0]
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0") // static, as released (README)
			out, err := cmd.CombinedOutput()
			if err != nil {
				buildErr = fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
				return
			}
		}
	})
	if buildErr != nil {
		b.Fatal(buildErr)
	}
	airlock = filepath.Join(binDir, "airlock")
	if p := os.Getenv("BENCH_AIRLOCK"); p != "" {
		airlock = p
	}
	return binDir, airlock
}

// TestMain removes what binaries built.
func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// run is one finished process: its wall time, CPU time (user and
// system) and output.
type run struct {
	wall, cpu time.Duration
	stdout    string
}

func runProcess(b *testing.B, dir string, name string, args ...string) run {
	b.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	t0 := time.Now()
	err := cmd.Run()
	wall := time.Since(t0)
	if err != nil {
		b.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, stderr.String())
	}
	cpu := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	return run{wall: wall, cpu: cpu, stdout: stdout.String()}
}

// peakRSS runs the command once more under GNU time and returns its peak
// RSS in MB, or 0 without /usr/bin/time. (The rusage of a child that Go
// starts directly counts the parent's pages before exec.)
func peakRSS(b *testing.B, dir string, args ...string) float64 {
	b.Helper()
	if _, err := os.Stat("/usr/bin/time"); err != nil {
		return 0
	}
	out := filepath.Join(b.TempDir(), "rss")
	cmd := exec.Command("/usr/bin/time", append([]string{"-f", "%M", "-o", out}, args...)...)
	cmd.Dir = dir
	if o, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("%s: %v\n%.2000s", strings.Join(args, " "), err, o)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		b.Fatal(err)
	}
	kb, err := strconv.ParseFloat(strings.TrimSpace(string(data)), 64)
	if err != nil {
		b.Fatalf("GNU time wrote %q", data)
	}
	return kb / 1024
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// side is one of the two commands compared: its name, how to run it
// once (checking its output), and its command line for peakRSS.
type side struct {
	name string
	run  func() run
	args []string
}

// compare runs a and c (and the extra sides) alternately, runs times
// each, and reports both medians of wall time and their ratio, the ratio
// of the medians of CPU time (steadier than wall time on a loaded
// machine), and the peak RSS of one more run of each. Each extra side
// (another build of airlock, say) gets its median and both ratios to c
// too, under its own name.
func compare(b *testing.B, dir string, runs int, a, c side, extra ...side) {
	b.Helper()
	sides := append([]side{a, c}, extra...)
	wall := make([][]time.Duration, len(sides))
	cpu := make([][]time.Duration, len(sides))
	for b.Loop() {
		for range runs {
			for i, s := range sides {
				r := s.run()
				wall[i], cpu[i] = append(wall[i], r.wall), append(cpu[i], r.cpu)
			}
		}
	}
	cm, cc := median(wall[1]), median(cpu[1])
	b.ReportMetric(ms(cm), c.name+"-ms")
	for i, s := range sides {
		if i == 1 {
			continue
		}
		prefix := ""
		if i > 1 {
			prefix = s.name + "-"
		}
		b.ReportMetric(ms(median(wall[i])), s.name+"-ms")
		b.ReportMetric(float64(median(wall[i]))/float64(cm), prefix+"ratio")
		b.ReportMetric(float64(median(cpu[i]))/float64(cc), prefix+"cpu-ratio")
	}
	for _, s := range sides {
		b.ReportMetric(peakRSS(b, dir, s.args...), s.name+"-MB")
	}
	b.ReportMetric(0, "ns/op")
}

// BenchmarkProcessStart compares `airlock version` with a hello-world Go
// program.
func BenchmarkProcessStart(b *testing.B) {
	bin, airlock := binaries(b)
	dir := b.TempDir()
	compare(b, dir, 20, command(b, dir, "airlock", nil, airlock, "version"), command(b, dir, "hello", nil, filepath.Join(bin, "hello")))
}

// command is a side that runs args in dir and checks its stdout with
// check (when not nil).
func command(b *testing.B, dir, name string, check func(stdout string), args ...string) side {
	return side{name: name, args: args, run: func() run {
		r := runProcess(b, dir, args[0], args[1:]...)
		if check != nil {
			check(r.stdout)
		}
		r.stdout = ""
		return r
	}}
}

// page8K is an 8 KB article.
var page8K = func() string {
	var s strings.Builder
	s.WriteString("<!doctype html><html><head><title>An 8 KB page</title></head><body><article><h1>An 8 KB page</h1>\n")
	for i := 0; s.Len() < 8<<10; i++ {
		fmt.Fprintf(&s, "<p>Paragraph %d: lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore et dolore magna aliqua.</p>\n", i)
	}
	s.WriteString("</article></body></html>")
	return s.String()
}()

// BenchmarkProcessFetch compares `airlock fetch` of a local 8 KB page
// (its audit record written to the data directory's store before exit;
// robots.txt answers 404) with curl fetching the same page.
func BenchmarkProcessFetch(b *testing.B) {
	_, airlock := binaries(b)
	curl, err := exec.LookPath("curl")
	if err != nil {
		b.Fatal("curl is missing: install it (apt-get install curl)")
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/page" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write([]byte(page8K))
	}))
	defer srv.Close()
	dir := b.TempDir()
	u := srv.URL + "/page"
	compare(b, dir, 20,
		command(b, dir, "airlock", func(out string) {
			if !strings.Contains(out, "Paragraph 3:") {
				b.Fatalf("airlock fetch printed %q", out)
			}
		}, airlock, "fetch", "--except", "127.0.0.1", u),
		command(b, dir, "curl", nil, curl, "-sf", "-o", "/dev/null", u))
}

// BenchmarkProcessCrawl compares `airlock crawl --extract none` with colly
// on the generated site, both at concurrency 8 and per-host 8. pages=100000
// runs only when asked for by name (-bench 'ProcessCrawl/pages=100000'):
// it is the memory comparison.
func BenchmarkProcessCrawl(b *testing.B) {
	bin, airlock := binaries(b)
	for _, n := range []int{2000, 20000, 100000} {
		b.Run(fmt.Sprintf("pages=%d", n), func(b *testing.B) {
			if n == 100000 && !strings.Contains(flagBench(), "100000") {
				b.Skip("the 100,000-page crawl runs when named: -bench 'ProcessCrawl/pages=100000'")
			}
			s := crawlbench.NewSite(b, n)
			dir := b.TempDir()
			// The default ceiling on max_pages is 10,000.
			conf := filepath.Join(dir, "airlock.yaml")
			if err := os.WriteFile(conf, []byte("limits:\n  crawl_max_pages: 1000000\n"), 0o600); err != nil {
				b.Fatal(err)
			}
			per := strconv.Itoa(crawlbench.Concurrency)
			crawler := func(name, bin string) side {
				return command(b, dir, name, func(out string) {
					if got := strings.Count(out, "\n"); got != n {
						b.Fatalf("%s crawled %d pages, want %d", name, got, n)
					}
				}, bin, "crawl", "--config", conf, "--except", "127.0.0.1",
					"--extract", "none", "--format", "jsonl", "--max-pages", strconv.Itoa(n), "--depth", "100",
					"--concurrency", per, "--per-host-concurrency", per, s.Seed())
			}
			var extra []side
			if base := os.Getenv("BENCH_AIRLOCK_BASE"); base != "" {
				extra = append(extra, crawler("base", base))
			}
			compare(b, dir, 1,
				crawler("airlock", airlock),
				command(b, dir, "colly", func(out string) {
					if got := strings.TrimSpace(out); got != strconv.Itoa(n) {
						b.Fatalf("colly crawled %s pages, want %d", got, n)
					}
				}, filepath.Join(bin, "collycrawl"), "-per-host", per, s.Seed()),
				extra...)
		})
	}
}

// flagBench is the -test.bench pattern.
func flagBench() string {
	if f := flag.Lookup("test.bench"); f != nil {
		return f.Value.String()
	}
	return ""
}
