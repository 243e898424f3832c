package extract

import (
	"hash/maphash"
	"unicode"
	"unicode/utf8"
)

// Word 4-gram shingles compare extracted texts the way extraction
// benchmarks score them: two extractors agree on a passage when they
// share its shingles.

var shingleSeed = maphash.MakeSeed()

// words splits s into word tokens: maximal runs of letters, digits and
// underscores (what a Unicode \w+ matches).
func words(s string) []string {
	var out []string
	start := -1
	for i, r := range s {
		w := r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r)
		if r < utf8.RuneSelf {
			w = r == '_' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9'
		}
		switch {
		case w && start < 0:
			start = i
		case !w && start >= 0:
			out = append(out, s[start:i])
			start = -1
		}
	}
	if start >= 0 {
		out = append(out, s[start:])
	}
	return out
}

// shingles returns the hashes of the word 4-grams of toks, in order; a text
// of fewer than four words is one shingle.
func shingles(toks []string) []uint64 {
	if len(toks) == 0 {
		return nil
	}
	n := 4
	if len(toks) < n {
		n = len(toks)
	}
	out := make([]uint64, 0, len(toks)-n+1)
	var h maphash.Hash
	h.SetSeed(shingleSeed)
	for i := 0; i+n <= len(toks); i++ {
		h.Reset()
		for _, t := range toks[i : i+n] {
			h.WriteString(t)
			h.WriteByte(0)
		}
		out = append(out, h.Sum64())
	}
	return out
}

// shingleSet is a set of shingle hashes.
type shingleSet map[uint64]struct{}

func newShingleSet(text string) shingleSet {
	s := shingleSet{}
	for _, h := range shingles(words(text)) {
		s[h] = struct{}{}
	}
	return s
}

// coverage is the fraction of text's shingles that are in s, and the
// number of shingles text has.
func (s shingleSet) coverage(text string) (float64, int) {
	sh := shingles(words(text))
	if len(sh) == 0 {
		return 0, 0
	}
	in := 0
	for _, h := range sh {
		if _, ok := s[h]; ok {
			in++
		}
	}
	return float64(in) / float64(len(sh)), len(sh)
}
