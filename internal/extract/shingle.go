package extract

import (
	"hash/maphash"
	"iter"
	"unicode"
	"unicode/utf8"
)

// Word 4-gram shingles compare extracted texts the way extraction
// benchmarks score them: two extractors agree on a passage when they
// share its shingles.

var shingleSeed = maphash.MakeSeed()

// isWordRune reports a letter, digit or underscore: what \w matches.
func isWordRune(r rune) bool {
	if r < utf8.RuneSelf {
		return r == '_' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9'
	}
	return unicode.IsLetter(r) || unicode.IsNumber(r)
}

// words splits s into word tokens: maximal runs of letters, digits and
// underscores (what a Unicode \w+ matches).
func words(s string) []string {
	out := make([]string, 0, len(s)/8+1) // a word and its space: 8 bytes on average in English

	for w := range wordsOf(s) {
		out = append(out, w)
	}
	return out
}

// wordsOf yields s's word tokens in order, as words returns them.
func wordsOf(s string) iter.Seq[string] {
	return func(yield func(string) bool) {
		start := -1
		for i, r := range s {
			w := isWordRune(r)
			switch {
			case w && start < 0:
				start = i
			case !w && start >= 0:
				if !yield(s[start:i]) {
					return
				}
				start = -1
			}
		}
		if start >= 0 {
			yield(s[start:])
		}
	}
}

// countWords is len(words(s)) without the slice.
func countWords(s string) int {
	n := 0
	in := false
	for _, r := range s {
		w := isWordRune(r)
		if w && !in {
			n++
		}
		in = w
	}
	return n
}

// wordHash is the hash of one word, as shingles hash them.
func wordHash(w string) uint64 { return maphash.String(shingleSeed, w) }

// wordSet is the set of the hashes of s's words (wordHash): a set of
// words without a string per word.
func wordSet(s string) *shingleSet {
	set := newSetCap(64)
	for w := range wordsOf(s) {
		set.add(wordHash(w), 0)
	}
	return set
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

// textShingles is shingles(words(s)), computed in one pass over s with a
// window of the last four word hashes instead of the word and hash slices.
func textShingles(s string) []uint64 {
	// About a word per five bytes in English prose.
	return appendShingles(make([]uint64, 0, len(s)/5+1), s)
}

// appendShingles appends the shingles of s (shingles(words(s))) to out.
func appendShingles(out []uint64, s string) []uint64 {
	var win [4]uint64 // the last four word hashes, by word number mod 4
	n := 0            // words seen
	for w := range wordsOf(s) {
		win[n&3] = maphash.String(shingleSeed, w)
		n++
		if n >= 4 {
			h := uint64(4)
			for k := n - 4; k < n; k++ {
				h = mix64(h ^ win[k&3])
			}
			out = append(out, h)
		}
	}
	if n > 0 && n < 4 {
		h := uint64(n)
		for k := range n {
			h = mix64(h ^ win[k])
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

// shingleSet is a set of shingle hashes, each with a value (a block
// number, for the merge): an open-addressing table indexed by the hash's
// low bits, which are as uniform as the rest (the hashes are mixed), at
// most half full. A Go map spends most of its time on what these keys do
// not need.
type shingleSet struct {
	keys []uint64 // 0 marks an empty slot; the key 0 is kept aside
	vals []int32  // nil while every value is 0 (a plain set)
	n    int
	// The key 0, which a slot cannot hold.
	zero    bool
	zeroVal int32
}

// newSetCap returns an empty set with room for about n keys.
func newSetCap(n int) *shingleSet {
	size := 16
	for size < 2*n {
		size <<= 1
	}
	return &shingleSet{keys: make([]uint64, size)}
}

// newShingleSet is the set of text's shingles.
func newShingleSet(text string) *shingleSet {
	return setOf(textShingles(text))
}

// setOf is the set of the shingles sh.
func setOf(sh []uint64) *shingleSet {
	s := newSetCap(len(sh))
	for _, h := range sh {
		s.add(h, 0)
	}
	return s
}

// len is the number of distinct shingles in s.
func (s *shingleSet) len() int {
	if s.zero {
		return s.n + 1
	}
	return s.n
}

// get is h's value, and whether s holds h.
func (s *shingleSet) get(h uint64) (int32, bool) {
	if h == 0 {
		return s.zeroVal, s.zero
	}
	mask := uint64(len(s.keys) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		switch s.keys[i] {
		case h:
			if s.vals == nil {
				return 0, true
			}
			return s.vals[i], true
		case 0:
			return 0, false
		}
	}
}

func (s *shingleSet) has(h uint64) bool {
	_, ok := s.get(h)
	return ok
}

// add puts h in s with the value v, unless s holds h already (its value
// stays the first one given).
func (s *shingleSet) add(h uint64, v int32) {
	if h == 0 {
		if !s.zero {
			s.zero, s.zeroVal = true, v
		}
		return
	}
	if 2*(s.n+1) > len(s.keys) {
		s.grow()
	}
	if v != 0 && s.vals == nil {
		s.vals = make([]int32, len(s.keys))
	}
	mask := uint64(len(s.keys) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		switch s.keys[i] {
		case h:
			return
		case 0:
			s.keys[i] = h
			if s.vals != nil {
				s.vals[i] = v
			}
			s.n++
			return
		}
	}
}

func (s *shingleSet) grow() {
	old, oldVals := s.keys, s.vals
	s.keys = make([]uint64, 2*len(old))
	if oldVals != nil {
		s.vals = make([]int32, 2*len(old))
	}
	mask := uint64(len(s.keys) - 1)
	for j, h := range old {
		if h == 0 {
			continue
		}
		i := h & mask
		for s.keys[i] != 0 {
			i = (i + 1) & mask
		}
		s.keys[i] = h
		if oldVals != nil {
			s.vals[i] = oldVals[j]
		}
	}
}

// sharedWith is the number of s's shingles that are in t.
func (s *shingleSet) sharedWith(t *shingleSet) int {
	n := 0
	if s.zero && t.zero {
		n++
	}
	for _, h := range s.keys {
		if h != 0 && t.has(h) {
			n++
		}
	}
	return n
}

// coverageOf is the fraction of the shingles sh that are in s, and
// len(sh).
func (s *shingleSet) coverageOf(sh []uint64) (float64, int) {
	if len(sh) == 0 {
		return 0, 0
	}
	in := 0
	for _, h := range sh {
		if s.has(h) {
			in++
		}
	}
	return float64(in) / float64(len(sh)), len(sh)
}

// shingled is a text with its shingles and their set, computed once and
// shared by the steps of the merge that compare against it.
type shingled struct {
	text string
	sh   []uint64
	set  *shingleSet
}

func newShingled(text string) *shingled {
	sh := textShingles(text)
	return &shingled{text: text, sh: sh, set: setOf(sh)}
}
