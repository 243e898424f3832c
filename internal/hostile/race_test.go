//go:build race

package hostile

// Under the race detector a process's resident set grows (shadow memory,
// larger allocations): k is doubled, and the base is the race build's own
// (the baseline case measured 194 MiB against 78 MiB without it). The code
// also runs several times slower: the timeouts that are only hang guards
// (not the short ones a case is about) are scaled by timeScale.
const (
	raceEnabled = true
	baseRSS     = 224 << 20
	timeScale   = 4
)
