//go:build race

package hostile

// Under the race detector a process's resident set about doubles (shadow
// memory, larger allocations): the memory bounds are doubled. Its code also
// runs several times slower: the timeouts that are only hang guards (not
// the short ones a case is about) are scaled by timeScale.
const (
	raceEnabled = true
	timeScale   = 4
)
