//go:build !race

package hostile

// Without the race detector the baseline case peaks at about 78 MiB: the
// test binary and an in-memory engine, most of it the date parser's tables
// that extraction loads at start-up.
const (
	raceEnabled = false
	baseRSS     = 96 << 20
	timeScale   = 1
)
