package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// maxInitBytes caps what the package initialisers of the airlock binary
// allocate together: every airlock process and every Go program that
// embeds the engine pays it before main runs. A dependency that builds
// large tables at init (a date parser's locale data once took 83 MB)
// shows up here, by name.
const maxInitBytes = 8 << 20

// initRecord is one line of GODEBUG=inittrace=1 output.
type initRecord struct {
	pkg   string
	bytes int64
}

// parseInitTrace reads the "init PKG @T ms, C ms clock, B bytes, A allocs"
// lines of a GODEBUG=inittrace=1 run.
func parseInitTrace(out []byte) ([]initRecord, error) {
	var recs []initRecord
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 9 || f[0] != "init" || f[8] != "bytes," {
			continue
		}
		n, err := strconv.ParseInt(f[7], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("inittrace line %q: %w", line, err)
		}
		recs = append(recs, initRecord{pkg: f[1], bytes: n})
	}
	return recs, nil
}

func TestParseInitTrace(t *testing.T) {
	out := []byte("init internal/bytealg @0.008 ms, 0 ms clock, 0 bytes, 0 allocs\n" +
		"init github.com/example/big @9.2 ms, 169 ms clock, 78295992 bytes, 335835 allocs\n" +
		"some other line\n")
	recs, err := parseInitTrace(out)
	if err != nil {
		t.Fatal(err)
	}
	want := []initRecord{{"internal/bytealg", 0}, {"github.com/example/big", 78295992}}
	if !slices.Equal(recs, want) {
		t.Errorf("parseInitTrace = %v, want %v", recs, want)
	}
}

// TestInitAllocations builds the airlock binary, runs it with
// GODEBUG=inittrace=1 and fails when its package initialisers allocate
// more than maxInitBytes in total, naming the heaviest packages.
func TestInitAllocations(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "airlock")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	run := exec.Command(bin, "--help")
	run.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	var stderr bytes.Buffer
	run.Stderr = &stderr
	if err := run.Run(); err != nil {
		t.Fatalf("airlock --help: %v\n%s", err, stderr.Bytes())
	}
	recs, err := parseInitTrace(stderr.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	// Guard against a vacuous pass: the runtime always reports some
	// packages, and the binary's own inits are among them.
	if len(recs) < 10 || !slices.ContainsFunc(recs, func(r initRecord) bool { return strings.HasPrefix(r.pkg, "github.com/airlockhq/airlock") }) {
		t.Fatalf("inittrace reported %d packages, none of airlock's: GODEBUG=inittrace=1 not honoured?\n%s", len(recs), stderr.Bytes())
	}
	var total int64
	for _, r := range recs {
		total += r.bytes
	}
	slices.SortFunc(recs, func(a, b initRecord) int { return int(b.bytes - a.bytes) })
	var top strings.Builder
	for _, r := range recs[:min(5, len(recs))] {
		fmt.Fprintf(&top, "\n  %-60s %10d bytes", r.pkg, r.bytes)
	}
	t.Logf("package inits allocate %d bytes in total; heaviest:%s", total, top.String())
	if total > maxInitBytes {
		t.Errorf("package inits allocate %d bytes, over the %d-byte cap; heaviest:%s", total, int64(maxInitBytes), top.String())
	}
}
