//go:build !linux

package sandbox

import (
	"context"
	"errors"
	"runtime"
)

func run(context.Context, Config) (int, error) {
	return -1, &UnavailableError{Op: "namespaces", Err: errors.New(runtime.GOOS + " has no user, network and PID namespaces (airlock exec is Linux only; point the program at `airlock proxy` instead)")}
}
