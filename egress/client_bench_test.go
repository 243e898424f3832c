//go:build unix

package egress

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"
)

// The guarded client against a plain http.Client, both fetching a 10 KB
// body from a loopback keep-alive HTTP/1.1 server. Compare with benchstat:
//
//	go test -run XXX -bench 'Client10KB' -benchmem -count 8 ./egress/ > bench.txt
//	benchstat -col /client bench.txt    (or compare the two rows by eye)
//
// The target is a guarded overhead of at most 10% at the median. Besides
// wall time, each reports cpu-ns/op: the process's CPU time (client and
// server) per fetch, which other load on the machine disturbs less.

const benchBodySize = 10 << 10

func benchServer(b *testing.B) *httptest.Server {
	b.Helper()
	body := bytes.Repeat([]byte("0123456789abcdef"), benchBodySize/16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write(body)
	}))
	b.Cleanup(srv.Close)
	return srv
}

// cpuTime returns the CPU time the process has used, user and system.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU reports the CPU time per op since start.
func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(cpuTime(b)-start)/float64(b.N), "cpu-ns/op")
}

func BenchmarkGuardedClient10KB(b *testing.B) {
	srv := benchServer(b)
	c := &Client{
		Dialer:  &Dialer{Policy: Policy{Lanes: Lanes(), Exceptions: exceptLocal}.MustCompile()},
		Profile: ProfileGo, // the plain client's header set, near enough
	}
	b.Cleanup(c.CloseIdleConnections)
	ctx := context.Background()
	url := srv.URL + "/"
	b.ReportAllocs()
	b.SetBytes(benchBodySize)
	start := cpuTime(b)
	for b.Loop() {
		resp, err := c.Get(ctx, url)
		if err != nil {
			b.Fatal(err)
		}
		n, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil || n != benchBodySize {
			b.Fatalf("read %d bytes, %v", n, err)
		}
	}
	reportCPU(b, start)
}

func BenchmarkPlainClient10KB(b *testing.B) {
	srv := benchServer(b)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	b.Cleanup(tr.CloseIdleConnections)
	c := &http.Client{Transport: tr}
	ctx := context.Background()
	url := srv.URL + "/"
	b.ReportAllocs()
	b.SetBytes(benchBodySize)
	start := cpuTime(b)
	for b.Loop() {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			b.Fatal(err)
		}
		resp, err := c.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		n, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil || n != benchBodySize {
			b.Fatalf("read %d bytes, %v", n, err)
		}
	}
	reportCPU(b, start)
}
