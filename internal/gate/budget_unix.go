//go:build unix

package gate

import "syscall"

// DescriptorLimit returns the process's soft limit on open descriptors
// (RLIMIT_NOFILE), and false when it cannot be read.
func DescriptorLimit() (uint64, bool) {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return 0, false
	}
	return r.Cur, true
}
