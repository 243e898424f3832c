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
	out := make([]string, 0, len(s)/8+1) // a word and its space: 8 bytes on average in English

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
// of fewer than four words is one shingle. Each word is hashed once and a
// 4-gram's hash mixes its words' hashes in order, so a long text costs one
// string hash per word, not four.
func shingles(toks []string) []uint64 {
	if len(toks) == 0 {
		return nil
	}
	n := min(4, len(toks))
	hs := make([]uint64, len(toks))
	for i, t := range toks {
		hs[i] = maphash.String(shingleSeed, t)
	}
	out := make([]uint64, 0, len(toks)-n+1)
	for i := 0; i+n <= len(hs); i++ {
		h := uint64(n)
		for _, w := range hs[i : i+n] {
			h = mix64(h ^ w)
		}
		out = append(out, h)
	}
	return out
}

// mix64 is SplitMix64's finaliser: every input bit moves every output bit,
// so chaining it makes a 4-gram's hash depend on its words' order.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// shingleSet is a set of shingle hashes.
type shingleSet map[uint64]struct{}

func newShingleSet(text string) shingleSet {
	sh := shingles(words(text))
	s := make(shingleSet, len(sh))
	for _, h := range sh {
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
