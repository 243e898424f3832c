package extract

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"
)

// helperEnv makes the test binary act as the PDF child process (the real
// one is the airlock binary re-executed, which a test binary is not).
const helperEnv = "AIRLOCK_EXTRACT_TEST_HELPER"

func TestMain(m *testing.M) {
	switch os.Getenv(helperEnv) {
	case "pdftext":
		if err := RunPDFChild(os.Stdout, os.Stdin); err != nil {
			fmt.Fprintln(os.Stderr, "airlock:", err)
			os.Exit(1)
		}
		os.Exit(0)
	case "pdfparent":
		PDFCommand = helperCommand("pdftext")
		runPDFParent()
	case "alloc":
		runAlloc()
	case "hang":
		// A parser stuck in a hostile file.
		time.Sleep(time.Hour)
		os.Exit(0)
	}
	PDFCommand = helperCommand("pdftext")
	os.Exit(m.Run())
}

// helperCommand returns a PDFCommand that runs this test binary in the
// given helper mode.
func helperCommand(mode string) func(ctx context.Context) (*exec.Cmd, error) {
	return func(ctx context.Context) (*exec.Cmd, error) {
		exe, err := os.Executable()
		if err != nil {
			return nil, err
		}
		cmd := exec.CommandContext(ctx, exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), helperEnv+"="+mode)
		return cmd, nil
	}
}
