//go:build !unix

package gate

// DescriptorLimit returns false: the platform has no RLIMIT_NOFILE.
func DescriptorLimit() (uint64, bool) { return 0, false }
