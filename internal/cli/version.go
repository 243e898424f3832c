package cli

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version is the release, set at build time:
//
//	go build -ldflags "-X github.com/airlockhq/airlock/internal/cli.version=v1.2.3" ./cmd/airlock
//
// When left at "dev", the module version recorded by `go install
// module@version` is used instead, if there is one.
var version = "dev"

func init() { registerCommand("version", newVersionCmd) }

func newVersionCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version of airlock and of the Go toolchain that built it",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			v := struct {
				Version  string `json:"version"`
				Go       string `json:"go"`
				Platform string `json:"platform"`
			}{releaseVersion(), runtime.Version(), runtime.GOOS + "/" + runtime.GOARCH}
			if e.format == formatJSON {
				return writeJSON(e.stdout, v)
			}
			_, err := fmt.Fprintf(e.stdout, "airlock %s %s %s\n", v.Version, v.Go, v.Platform)
			return err
		},
	}
}

func releaseVersion() string {
	if version != "dev" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return version
}
