package extract

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// TestTextShingles: the one-pass shingler gives what shingles(words(s))
// gives, on texts of every length from empty to long, in several scripts
// and with punctuation between the words.
func TestTextShingles(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 19))
	toks := []string{"the", "word", "_x", "42", "été", "日本語", "Привет", "a1b2", "-", ", ", " ", "\n", "…", "\u00a0", "«", "é"}
	for n := range 200 {
		var b strings.Builder
		for range n % 40 {
			b.WriteString(toks[rng.IntN(len(toks))])
			if rng.IntN(2) == 0 {
				b.WriteByte(' ')
			}
		}
		s := b.String()
		want := shingles(words(s))
		if got := textShingles(s); !slices.Equal(got, want) {
			t.Fatalf("textShingles(%q) = %v, want %v", s, got, want)
		}
		if got, want := countWords(s), len(words(s)); got != want {
			t.Fatalf("countWords(%q) = %d, want %d", s, got, want)
		}
	}
}

// TestShingleSet: the open-addressing set agrees with a Go map on
// membership, size, shared counts and first values, across growth and with
// the key 0 (which it keeps aside).
func TestShingleSet(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	s, o := newSetCap(0), newSetCap(4)
	ms, mo := map[uint64]int32{}, map[uint64]bool{}
	for i := range 5000 {
		h := rng.Uint64()
		if i%7 == 0 {
			h = uint64(rng.IntN(300)) // small keys, repeats and 0
		}
		s.add(h, int32(i))
		if _, ok := ms[h]; !ok {
			ms[h] = int32(i)
		}
		if i%3 == 0 {
			o.add(h, 0)
			mo[h] = true
		}
	}
	if s.len() != len(ms) || o.len() != len(mo) {
		t.Fatalf("len %d, %d; want %d, %d", s.len(), o.len(), len(ms), len(mo))
	}
	if !s.has(0) || ms[0] != mustGet(t, s, 0) {
		t.Fatalf("key 0: has %v, value %d; want %d", s.has(0), mustGet(t, s, 0), ms[0])
	}
	for h, v := range ms {
		if got := mustGet(t, s, h); got != v {
			t.Fatalf("value of %d = %d, want %d (the first added)", h, got, v)
		}
	}
	for range 1000 {
		h := rng.Uint64()
		if _, in := ms[h]; s.has(h) != in {
			t.Fatalf("has(%d) = %v, want %v", h, s.has(h), in)
		}
	}
	if got := o.sharedWith(s); got != len(mo) {
		t.Fatalf("sharedWith = %d, want %d", got, len(mo))
	}
}

func mustGet(t *testing.T, s *shingleSet, h uint64) int32 {
	t.Helper()
	v, ok := s.get(h)
	if !ok {
		t.Fatalf("key %d missing", h)
	}
	return v
}
