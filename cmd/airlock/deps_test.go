package main

import (
	"bytes"
	"flag"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite deps.txt")

// depsFile lists every package outside the standard library and outside
// this module that the airlock binary links, one import path a line,
// sorted, for linux/amd64 without cgo (so that it does not
// depend on the machine that checks it). It is checked in so that a new
// transitive dependency shows as a diff in review (the depaware practice).
const depsFile = "deps.txt"

const depsHeader = "# Third-party packages linked into cmd/airlock (GOOS=linux GOARCH=amd64 CGO_ENABLED=0).\n" +
	"# Checked by TestDeps; regenerate: go test ./cmd/airlock -run TestDeps -update\n"

func listDeps(t *testing.T) []string {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".")
	cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH=amd64", "CGO_ENABLED=0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.Bytes())
	}
	var deps []string
	for _, p := range strings.Fields(string(out)) {
		if p != "github.com/airlockhq/airlock" && !strings.HasPrefix(p, "github.com/airlockhq/airlock/") {
			deps = append(deps, p)
		}
	}
	slices.Sort(deps)
	return deps
}

// TestDeps compares the third-party packages the binary links with
// deps.txt: a dependency added or dropped, directly or through another
// one, fails until deps.txt is regenerated and the diff reviewed.
func TestDeps(t *testing.T) {
	got := listDeps(t)
	// Guard against a vacuous pass: the binary links these today.
	for _, want := range []string{"github.com/spf13/cobra", "golang.org/x/net/html"} {
		if !slices.Contains(got, want) {
			t.Fatalf("go list -deps did not report %s among %d packages", want, len(got))
		}
	}
	text := depsHeader + strings.Join(got, "\n") + "\n"
	if *update {
		if err := os.WriteFile(depsFile, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	b, err := os.ReadFile(depsFile)
	if err != nil {
		t.Fatalf("%v (regenerate: go test ./cmd/airlock -run TestDeps -update)", err)
	}
	var want []string
	for _, l := range strings.Split(string(b), "\n") {
		if l != "" && !strings.HasPrefix(l, "#") {
			want = append(want, l)
		}
	}
	for _, p := range got {
		if !slices.Contains(want, p) {
			t.Errorf("new dependency %s: review it, then regenerate %s (go test ./cmd/airlock -run TestDeps -update)", p, depsFile)
		}
	}
	for _, p := range want {
		if !slices.Contains(got, p) {
			t.Errorf("dependency %s is gone: regenerate %s (go test ./cmd/airlock -run TestDeps -update)", p, depsFile)
		}
	}
	if !t.Failed() && string(b) != text {
		t.Errorf("%s is out of date (order or header): regenerate it (go test ./cmd/airlock -run TestDeps -update)", depsFile)
	}
}
